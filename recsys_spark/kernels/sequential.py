"""Always-valid inference (an experiment looked at every night): the asymptotic confidence sequence and its
p-value (:func:`sequential_half_width`, :func:`sequential_p_value`) as GrowthBook's gbstats computes them, and
:func:`sequential`, which turns a fixed-horizon :class:`~recsys_spark.kernels.comparisons.Comparison` into one.

Pure numpy; no Spark.  See ``docs/statistics.md`` and docs/experiments.md for the formulas.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from recsys_spark.kernels.comparisons import Comparison
from recsys_spark.kernels.quantiles import check_confidence

#: ``experiments.inference``: an asymptotic confidence sequence (valid at every look) or the fixed-horizon test
INFERENCES = ("sequential", "fixed")
#: ``experiments.sequential_tuning``'s default: the units (both arms) at which the sequence is tightest (gbstats')
SEQUENTIAL_TUNING = 5000.0


def sequential_rho(confidence: float, tuning: float = SEQUENTIAL_TUNING) -> float:
    """The mixing parameter ρ of the normal-mixture boundary, tightest at N = ``tuning`` units
    (Waudby-Smith et al. 2023, eq. 161; gbstats' ``SequentialTwoSidedTTest.rho``)::

        ρ² = (−2 ln α + ln(1 − 2 ln α)) / tuning,   α = 1 − confidence

    >>> round(sequential_rho(0.95, 5000), 8)
    0.03984007
    """
    check_confidence(confidence)
    if not tuning > 0:
        raise ValueError(f"the sequential tuning must be a positive number of units, got {tuning!r}")
    log_alpha = math.log(1.0 - confidence)
    return math.sqrt((-2.0 * log_alpha + math.log(1.0 - 2.0 * log_alpha)) / tuning)


def _out(x: np.ndarray) -> float | np.ndarray:
    return float(x) if np.ndim(x) == 0 else x


def sequential_half_width(
    variance: float | np.ndarray, n: float | np.ndarray, confidence: float = 0.95, tuning: float = SEQUENTIAL_TUNING
) -> float | np.ndarray:
    """Half-width of the asymptotic confidence sequence of an estimate with variance ``variance`` after ``n``
    units (both arms), as gbstats (Waudby-Smith et al. 2023, eq. 9), with s² = variance · N the variance of
    one unit's contribution::

        w = s · sqrt( 2 (N ρ² + 1) ln( sqrt(N ρ² + 1) / α ) / (N ρ)² )

    Element-wise on arrays; NaN where the variance is NaN or N ≤ 0.  At a fixed N it is wider than the
    fixed-horizon z · sqrt(variance) (the price of looking every night):

    >>> v = 0.01 ** 2
    >>> round(sequential_half_width(v, 5000) / (1.959963984540054 * 0.01), 4)
    1.5486
    """
    rho2 = sequential_rho(confidence, tuning) ** 2
    alpha = 1.0 - confidence
    v, units = np.asarray(variance, dtype=np.float64), np.asarray(n, dtype=np.float64)
    with np.errstate(all="ignore"):
        tr = units * rho2 + 1.0
        w = np.sqrt(v * units) * np.sqrt(2.0 * tr * np.log(np.sqrt(tr) / alpha) / (units * units * rho2))
        w = np.where(units > 0, w, np.nan)
    return _out(w)


def sequential_p_value(
    estimate: float | np.ndarray,
    variance: float | np.ndarray,
    n: float | np.ndarray,
    confidence: float = 0.95,
    tuning: float = SEQUENTIAL_TUNING,
    null: float = 0.0,
) -> float | np.ndarray:
    """The always-valid p-value of ``estimate`` against ``null``, as gbstats (Waudby-Smith et al. 2023,
    eq. 155): p = min(1, 1/E) with the e-value::

        E = exp( ρ² S / (2 (N ρ² + 1)) ) / sqrt(N ρ² + 1),   S = (estimate − null)² N / variance

    p < α exactly when the sequence excludes ``null`` (``ρ`` as :func:`sequential_rho`, for the same
    confidence).  Computed from ln E, so a large S gives 0, never an overflow.  A zero variance gives 0 for
    an estimate off the null and NaN on it (as the fixed-horizon test).

    >>> round(sequential_p_value(0.0, 1e-4, 5000), 6)    # E = 1 / sqrt(N ρ² + 1) < 1: p is capped at 1
    1.0
    """
    rho2 = sequential_rho(confidence, tuning) ** 2
    d = np.asarray(estimate, dtype=np.float64) - null
    v, units = np.asarray(variance, dtype=np.float64), np.asarray(n, dtype=np.float64)
    with np.errstate(all="ignore"):
        tr = units * rho2 + 1.0
        s = d * d * units / v
        log_e = rho2 * s / (2.0 * tr) - 0.5 * np.log(tr)
        p = np.minimum(1.0, np.exp(-log_e))
        p = np.where(v == 0, np.where(d == 0, np.nan, 0.0), p)
        p = np.where((units > 0) & ~np.isnan(d) & ~np.isnan(v), p, np.nan)
    return _out(p)


def sequential(comp: Comparison, n: float, confidence: float = 0.95, tuning: float = SEQUENTIAL_TUNING) -> Comparison:
    """A fixed-horizon :class:`Comparison` turned always-valid: the absolute and relative intervals become
    the confidence sequence at ``n`` units (both arms) around the same estimates with the same variances
    (``se``, ``rel_se``), and both p-values the sequence's (:func:`sequential_p_value`).  ``df`` and
    ``method`` (which test gave the variances) are kept.
    """
    var, rel_var = comp.se * comp.se, comp.rel_se * comp.rel_se
    w = float(sequential_half_width(var, n, confidence, tuning))
    rel_w = float(sequential_half_width(rel_var, n, confidence, tuning))
    return replace(
        comp,
        ci_low=comp.delta - w,
        ci_high=comp.delta + w,
        rel_ci_low=comp.rel_delta - rel_w,
        rel_ci_high=comp.rel_delta + rel_w,
        p_value=float(sequential_p_value(comp.delta, var, n, confidence, tuning)),
        rel_p_value=float(sequential_p_value(comp.rel_delta, rel_var, n, confidence, tuning)),
    )
