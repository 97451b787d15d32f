"""Least-squares line, its interval and two correlations over a few paired points, pure numpy.

Used by the report to relate a business metric (y, e.g. UV CTR) to an
offline metric (x, e.g. GAUC) across the days of a range: each day is one
point, so n is small and every statistic carries its own count.

For n points (x_i, y_i) with means x̄, ȳ and
S_xx = Σ (x_i - x̄)², S_yy = Σ (y_i - ȳ)², S_xy = Σ (x_i - x̄)(y_i - ȳ)::

    slope b = S_xy / S_xx,  intercept a = ȳ - b x̄
    residual variance s² = (S_yy - b S_xy) / (n - 2)
    se(b) = sqrt(s² / S_xx),  interval b ± t_{n-2, (1+level)/2} se(b)
    R² = r² with Pearson r = S_xy / sqrt(S_xx S_yy)
    p(r) = 2 P(T_{n-2} > |r| sqrt((n - 2) / (1 - r²)))
    Spearman ρ = Pearson r of the ranks (ties get their average rank), p from the same t formula

which is what ``scipy.stats.linregress``, ``pearsonr`` and ``spearmanr`` give
(the tests compare).  Edge cases: pairs with a missing (NaN) side are
dropped; fewer than 2 points, or a constant x, give no line; fewer than 3
give no interval and no p-values; a constant y gives no correlation.
The Student t distribution is computed here (regularised incomplete beta by
its continued fraction, quantile by bisection), so the kernel needs numpy
only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1.

    >>> betainc(1.0, 1.0, 0.25)   # the uniform distribution's CDF
    0.25
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom.

    >>> round(t_sf(0.0, 5), 12)
    0.5
    >>> round(t_sf(1.0, 1), 12)   # Cauchy: 1/2 - arctan(1)/pi = 1/4
    0.25
    """
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_ppf(q: float, df: float) -> float:
    """Quantile of Student's t: the t with P(T <= t) = q (bisection on :func:`t_sf`, to 1e-12)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q}")
    if q == 0.5:
        return 0.0
    target = 1.0 - q  # P(T > t)
    lo, hi = -1.0, 1.0
    while t_sf(lo, df) < target:
        lo *= 2.0
    while t_sf(hi, df) > target:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_sf(mid, df) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, abs(mid)):
            break
    return 0.5 * (lo + hi)


def rankdata(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given their average rank (``scipy.stats.rankdata``'s default).

    >>> rankdata([10, 20, 20, 5]).tolist()
    [2.0, 3.5, 3.5, 1.0]
    """
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    sorted_v = v[order]
    starts = np.r_[True, sorted_v[1:] != sorted_v[:-1]]
    group = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    last = np.r_[first[1:], len(v)] - 1
    avg = (first + last) / 2.0 + 1.0
    ranks = np.empty(len(v), dtype=np.float64)
    ranks[order] = avg[group]
    return ranks


def _correlation(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None]:
    """(Pearson r, two-sided p from t with n - 2 df); None when undefined."""
    n = len(x)
    if n < 2:
        return None, None
    dx, dy = x - x.mean(), y - y.mean()
    sxx, syy = float(dx @ dx), float(dy @ dy)
    if np.ptp(x) == 0 or np.ptp(y) == 0:  # exact test: the mean of equal floats may differ from them
        return None, None
    r = max(-1.0, min(1.0, float(dx @ dy) / math.sqrt(sxx * syy)))
    if n < 3:
        return r, None
    if abs(r) == 1.0:
        return r, 0.0
    t = abs(r) * math.sqrt((n - 2) / (1.0 - r * r))
    return r, min(1.0, 2.0 * t_sf(t, n - 2))


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
    >>> f.n, f.slope, f.intercept, f.r_squared, f.slope_se
    (3, 2.0, 1.0, 1.0, 0.0)
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
    if n < 2:
        return none
    dx, dy = xa - xa.mean(), ya - ya.mean()
    sxx, syy, sxy = float(dx @ dx), float(dy @ dy), float(dx @ dy)
    if np.ptp(xa) == 0:
        return none
    slope = sxy / sxx
    intercept = float(ya.mean() - slope * xa.mean())
    r, p = _correlation(xa, ya)
    rho, rho_p = _correlation(rankdata(xa), rankdata(ya))
    se = lo = hi = None
    if n >= 3:
        s2 = max(syy - slope * sxy, 0.0) / (n - 2)
        se = math.sqrt(s2 / sxx)
        half = t_ppf(0.5 + level / 2.0, n - 2) * se
        lo, hi = slope - half, slope + half
    r2 = r * r if r is not None else None  # a constant y: no correlation to square
    return LineFit(n, slope, intercept, se, lo, hi, level, r2, r, p, rho, rho_p)
