"""Power of a two-sided test: the minimum detectable effect (:func:`mde`) and the users an arm needs to detect an
effect (:func:`sample_size_per_arm`).  ``scipy.stats`` for the normal quantiles, imported when called; no Spark.
docs/experiments.md, "Power".
"""

from __future__ import annotations

import math


def _z(confidence: float, power: float) -> float:
    """z_{1-a/2} + z_power, a = 1 - confidence (scipy imported when called)."""
    from scipy.stats import norm

    return float(norm.ppf(0.5 + confidence / 2) + norm.ppf(power))


def mde(se: float, confidence: float = 0.95, power: float = 0.8) -> float:
    """Minimum detectable (absolute) effect at ``power`` for a two-sided test: (z_{1-a/2} + z_power) se.

    ``se`` is the standard error of the difference, sqrt(var_c/n_c + var_t/n_t).

    >>> round(mde(math.sqrt(0.1 * 0.9 * 2 / 10_000)), 6)   # p = 0.10, 10,000 users per arm
    0.011886
    """
    return _z(confidence, power) * se if se is not None and math.isfinite(se) else math.nan


def sample_size_per_arm(
    var_a: float, var_b: float, delta: float, confidence: float = 0.95, power: float = 0.8
) -> float:
    """Users per arm to detect ``delta``: (z_{1-a/2} + z_power)^2 (var_a + var_b) / delta^2 (round it up).

    >>> round(sample_size_per_arm(0.10 * 0.90, 0.11 * 0.89, 0.01), 2)
    14748.05
    """
    return _z(confidence, power) ** 2 * (var_a + var_b) / delta**2


def sequential_width_ratio(units: float, confidence: float = 0.95, tuning: float = 5000.0) -> float:
    """r(N): the confidence sequence's half-width over the fixed-horizon one, z_{1-a/2} se, at N units (both arms):
    ``sequential_half_width(V, N) / (z sqrt(V))``, which does not depend on V
    (:func:`~recsys_spark.kernels.sequential.sequential_half_width`).

    >>> round(sequential_width_ratio(5000), 4)
    1.5486
    """
    from recsys_spark.kernels.quantiles import z_quantile
    from recsys_spark.kernels.sequential import sequential_half_width

    return float(sequential_half_width(1.0, units, confidence, tuning)) / z_quantile(confidence)


def sequential_sample_size_per_arm(
    var_a: float, var_b: float, delta: float, confidence: float = 0.95, power: float = 0.8, tuning: float = 5000.0
) -> float:
    """Users per arm for the confidence sequence to detect ``delta`` with ``power`` at a fixed horizon: the sequence
    excludes 0 at N = 2n when |Δ̂| > r(2n) z_{1-a/2} se, so the power is ``power`` when
    δ = (r(2n) z_{1-a/2} + z_power) se, se² = (var_a + var_b)/n, i.e. the n with::

        n = (r(2n) z_{1-a/2} + z_power)² (var_a + var_b) / δ²

    (:func:`sequential_width_ratio`; r > 1 at every N).  The smallest such n, found by doubling from the
    fixed-horizon n (:func:`sample_size_per_arm`, where the left side is below the right) and then bisection.

    >>> fixed = sample_size_per_arm(0.09, 0.0979, 0.01)
    >>> round(sequential_sample_size_per_arm(0.09, 0.0979, 0.01) / fixed, 2)   # 14,748 fixed: 2.16 times (r = 1.67)
    2.16
    """
    from scipy.stats import norm

    za, zb = float(norm.ppf(0.5 + confidence / 2)), float(norm.ppf(power))
    scale = (var_a + var_b) / delta**2
    if not (math.isfinite(scale) and scale > 0):
        return math.nan

    def short(n: float) -> bool:  # n users per arm are fewer than the sequence needs at 2n
        return n < (sequential_width_ratio(2 * n, confidence, tuning) * za + zb) ** 2 * scale

    low = max(sample_size_per_arm(var_a, var_b, delta, confidence, power), 1.0)
    high = 2 * low
    while short(high):
        low, high = high, 2 * high
    for _ in range(100):
        if high - low <= 0.5:
            break
        mid = (low + high) / 2
        low, high = (mid, high) if short(mid) else (low, mid)
    return high
