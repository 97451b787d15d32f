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
