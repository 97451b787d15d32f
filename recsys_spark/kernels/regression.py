"""Least-squares line, its interval and two correlations over a few paired points (numpy + scipy.stats).

Used by the report to relate a business metric (y, e.g. UV CTR) to an
offline metric (x, e.g. GAUC) across the days of a range: each day is one
point, so n is small and every statistic carries its own count.

For n points (x_i, y_i) with means x̄, ȳ and
S_xx = Σ (x_i - x̄)², S_yy = Σ (y_i - ȳ)², S_xy = Σ (x_i - x̄)(y_i - ȳ)::

    slope b = S_xy / S_xx,  intercept a = ȳ - b x̄
    residual variance s² = (S_yy - b S_xy) / (n - 2)
    se(b) = sqrt(s² / S_xx),  interval b ± t_{n-2, (1+level)/2} se(b)
    R² = r² with Pearson r = S_xy / sqrt(S_xx S_yy), in [-1, 1]
    p(r) = 2 P(T_{n-2} > |r| sqrt((n - 2) / (1 - r²)))   (0 when |r| = 1)
    Spearman ρ = Pearson r of the ranks (ties get their average rank), p from the same t formula

The prediction of a new point's y at x0 (:func:`predict`: a candidate's business metric from its offline
metric) carries the interval of a new observation, not of the line's mean at x0::

    ŷ0 = a + b x0,  ŷ0 ± t_{n-2, (1+level)/2} s sqrt(1 + 1/n + (x0 - x̄)² / S_xx)

(statsmodels' ``OLS(...).get_prediction(x0).summary_frame()``'s ``obs_ci_lower`` / ``obs_ci_upper``); it needs
n >= 3 like the slope's interval, and widens as x0 leaves the x̄ the days were seen around.

The line is ``scipy.stats.linregress``, the correlations ``pearsonr`` and
``spearmanr``, the quantile ``t.ppf``: this module only drops missing pairs and
names the undefined cases.  Edge cases: pairs with a missing (NaN) side are
dropped; fewer than 2 points, or a constant x, give no line; fewer than 3
give no interval and no p-values; a constant y gives no correlation.  A
correlation is reported in [-1, 1] whatever the rounding of its sums
(:func:`bounded`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class LineFit:
    """Result of :func:`fit_line`; None where a statistic is undefined (see the module docstring)."""

    n: int
    slope: float | None
    intercept: float | None
    slope_se: float | None
    slope_ci_low: float | None
    slope_ci_high: float | None
    level: float
    r_squared: float | None
    pearson_r: float | None
    pearson_p: float | None
    spearman_rho: float | None
    spearman_p: float | None
    x_mean: float | None = None  # x̄ of the pairs used
    sxx: float | None = None  # S_xx
    residual_sd: float | None = None  # s = sqrt(s²), n >= 3

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def bounded(r: float) -> float:
    """A correlation clipped to [-1, 1]: sums of floats can round a perfect line's r just past 1.

    >>> bounded(1.0 + 2**-52), bounded(-1.0 - 2**-52), bounded(0.5)
    (1.0, -1.0, 0.5)
    """
    return max(-1.0, min(1.0, r))


def correlation_p(r: float, n: int) -> float:
    """Two-sided p of a correlation ``r`` of ``n`` points: 2 P(T_{n-2} > |r| sqrt((n - 2) / (1 - r²))),
    0 when |r| = 1; needs n >= 3.

    >>> correlation_p(1.0, 5), correlation_p(0.0, 5)
    (0.0, 1.0)
    """
    if abs(r) >= 1.0:
        return 0.0
    t = abs(r) * math.sqrt((n - 2) / (1.0 - r * r))
    return float(min(1.0, 2.0 * stats.t.sf(t, n - 2)))


def _correlation(x: np.ndarray, y: np.ndarray, *, ranks: bool) -> tuple[float | None, float | None]:
    """(Pearson r of x and y, or Spearman ρ when ``ranks``; two-sided p); None when undefined."""
    n = len(x)
    if n < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:  # exact test: the mean of equal floats may differ from them
        return None, None
    with warnings.catch_warnings():  # scipy warns that 2 points give no p-value; we return None for it
        warnings.simplefilter("ignore")
        found = stats.spearmanr(x, y) if ranks else stats.pearsonr(x, y)
    r = bounded(float(found.statistic))
    return r, (correlation_p(r, n) if n >= 3 else None)


def fit_line(x: Sequence[float], y: Sequence[float], level: float = 0.95) -> LineFit:
    """Ordinary least squares of y on x with the slope's t interval, R², Pearson and Spearman.

    Parameters
    ----------
    x, y : paired values (same length); a pair with a NaN on either side is dropped.
    level : coverage of the slope's interval, in (0, 1).

    Returns
    -------
    LineFit; ``n`` is the number of pairs used.

    >>> f = fit_line([0, 1, 2], [1, 3, 5])     # y = 1 + 2 x exactly
    >>> f.n, f.slope, f.intercept, f.slope_se, round(f.r_squared, 12)
    (3, 2.0, 1.0, 0.0, 1.0)
    >>> fit_line([1, 2, 3], [1, 3, 2]).slope   # S_xy = (-1)(-1) + 0 + (1)(0) = 1, S_xx = 2
    0.5
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    if xa.shape != ya.shape:
        raise ValueError("x and y must have the same length")
    keep = ~(np.isnan(xa) | np.isnan(ya))
    xa, ya = xa[keep], ya[keep]
    n = len(xa)
    none = LineFit(n, None, None, None, None, None, level, None, None, None, None, None)
    if n < 2 or np.ptp(xa) == 0:
        return none
    dx, dy = xa - xa.mean(), ya - ya.mean()
    sxx, syy, sxy = float(dx @ dx), float(dy @ dy), float(dx @ dy)
    slope = sxy / sxx
    intercept = float(ya.mean() - slope * xa.mean())
    r, p = _correlation(xa, ya, ranks=False)
    rho, rho_p = _correlation(xa, ya, ranks=True)
    se = lo = hi = s = None
    if n >= 3:
        s2 = max(syy - slope * sxy, 0.0) / (n - 2)
        s = math.sqrt(s2)
        se = math.sqrt(s2 / sxx)
        half = float(stats.t.ppf(0.5 + level / 2.0, n - 2)) * se
        lo, hi = slope - half, slope + half
    r2 = r * r if r is not None else None  # a constant y: no correlation to square
    return LineFit(n, slope, intercept, se, lo, hi, level, r2, r, p, rho, rho_p, float(xa.mean()), sxx, s)


@dataclass(frozen=True)
class Prediction:
    """Result of :func:`predict`: ``y`` = a + b x0, and the interval of a new observation at ``x``
    (None where undefined: no line, or fewer than 3 points)."""

    x: float
    y: float | None
    low: float | None
    high: float | None
    se: float | None  # s sqrt(1 + 1/n + (x0 - x̄)² / S_xx)
    level: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def predict(fit: LineFit, x0: float) -> Prediction:
    """The line's prediction at ``x0`` with the prediction interval of a new point at ``fit.level``
    (module docstring): ŷ0 ± t_{n-2} s sqrt(1 + 1/n + (x0 - x̄)² / S_xx).

    >>> fit = fit_line([0, 1, 2, 3], [1, 3, 5, 7])   # an exact line: s = 0, the interval is the point
    >>> p = predict(fit, 4)
    >>> p.y, p.low, p.high
    (9.0, 9.0, 9.0)
    >>> predict(fit_line([0, 1], [1, 3]), 4).low is None   # 2 points: a line, no interval
    True
    """
    x0 = float(x0)
    if fit.slope is None or fit.intercept is None or math.isnan(x0):
        return Prediction(x0, None, None, None, None, fit.level, fit.n)
    y0 = fit.intercept + fit.slope * x0
    if fit.residual_sd is None or fit.x_mean is None or not fit.sxx:
        return Prediction(x0, y0, None, None, None, fit.level, fit.n)
    se = fit.residual_sd * math.sqrt(1.0 + 1.0 / fit.n + (x0 - fit.x_mean) ** 2 / fit.sxx)
    half = float(stats.t.ppf(0.5 + fit.level / 2.0, fit.n - 2)) * se
    return Prediction(x0, y0, y0 - half, y0 + half, se, fit.level, fit.n)
