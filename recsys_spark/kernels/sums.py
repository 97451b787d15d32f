"""Sufficient statistics whose unit is the **user** (the randomisation and sampling unit), as gbstats' statistic
classes: a Spark aggregation produces them, the driver merges a handful of them, and every interval and test
(:mod:`~recsys_spark.kernels.estimates`, :mod:`~recsys_spark.kernels.comparisons`) takes them.

* :class:`MeanStats` (``n, Σx, Σx²``): a mean over units;
* :class:`RatioStats` (``n, Σx, Σy, Σx², Σy², Σxy``): a ratio of sums, its delta-method variance;
* :func:`non_finite`: the rule every interval follows when a sum overflowed a double.

Pure numpy, no Spark; see ``docs/statistics.md`` for the formulas, their units and the edge cases.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


def _above_rounding(value: float, scale: float, n: float) -> float:
    """``value``, a difference of raw sums (Σx² − (Σx)²/n and the like), or 0 when it is within their rounding.

    Each raw sum of n terms carries a rounding error of at most n·ε times the sum of the magnitudes
    (ε the double's machine epsilon); a difference at or below n·ε·``scale`` (``scale``: the sum of the
    magnitudes of its terms) cannot be told from 0, and is 0 (as are negative results).  Without this,
    n equal values give a variance of 1e-18 or so instead of 0, depending on the order of the sums.

    A sum that overflowed (``value`` or ``scale`` NaN or infinite) is NaN, never 0: nothing is known of
    the variance then (:func:`non_finite`).

    >>> _above_rounding(float("nan"), float("inf"), 2.0)
    nan
    """
    if not (math.isfinite(value) and math.isfinite(scale)):
        return math.nan
    return value if value > n * _EPS * scale else 0.0


def non_finite(parts: Mapping[str, float | None]) -> str | None:
    """The first of ``parts`` (name -> a sum, a sum of products, a variance) that is NaN or infinite, as
    ``"name = inf"``; None when each is finite (or None).

    The rule every interval follows: a sum, product or variance that is not a finite double (values
    whose squares pass 1.8e308, an importance weight of 1e160) gives no interval and a note naming it,
    never a standard error of 0 (docs/statistics.md, "Sums that overflow").

    >>> non_finite({"Σx": 2.0, "Σx²": float("inf")})
    'Σx² = inf'
    >>> non_finite({"Σx": 2.0, "Σx²": 4.0}) is None
    True
    """
    for name, value in parts.items():
        if value is not None and not math.isfinite(value):
            return f"{name} = {value:g}"
    return None


_EPS = float(np.finfo(np.float64).eps)


def nan_divide(a: float, b: float) -> float:
    """a / b, NaN when b is 0 (a mean of no unit, a lift over a control of 0)."""
    return a / b if b else math.nan


def _sample_var(n: float, total: float, total_sq: float) -> float:
    """The sample variance from raw sums, (Σx² − (Σx)²/n) / (n − 1): NaN below two units, 0 within the sums'
    rounding (:func:`_above_rounding`)."""
    if n < 2:
        return math.nan
    return _above_rounding(total_sq - total * total / n, 2.0 * total_sq, n) / (n - 1.0)


@dataclass(frozen=True)
class MeanStats:
    """Sufficient statistics of a per-unit value x: ``n``, ``sum`` = Σx, ``sum_sq`` = Σx².

    ``mean`` = Σx / n (NaN when n = 0); ``var`` = (Σx² − (Σx)²/n) / (n − 1), the
    sample variance (NaN below two units; 0 within the raw sums' rounding, :func:`_above_rounding`).  The
    optional ``m2`` = Σ(x − x̄)², when known (:meth:`from_values`, :meth:`from_moments`,
    merged by Chan et al.'s pairwise update), gives the variance without the
    cancellation of Σx² − (Σx)²/n.

    >>> s = MeanStats.from_values(np.array([2.0, 4.0])).merge(MeanStats.from_values(np.array([6.0])))
    >>> s.n, s.mean, s.var          # mean 4; ((2-4)^2 + 0 + (6-4)^2) / 2 = 4
    (3.0, 4.0, 4.0)
    """

    n: float
    sum: float
    sum_sq: float
    m2: float | None = None

    @property
    def mean(self) -> float:
        return nan_divide(self.sum, self.n)

    @property
    def var(self) -> float:
        if self.n >= 2 and self.m2 is not None:
            return max(self.m2, 0.0) / (self.n - 1.0)
        return _sample_var(self.n, self.sum, self.sum_sq)

    @property
    def se(self) -> float:
        """Standard error of the mean, sqrt(var / n) (NaN below two units)."""
        return math.sqrt(self.var / self.n) if self.n >= 2 else math.nan

    def merge(self, other: MeanStats) -> MeanStats:
        n = self.n + other.n
        m2 = None
        if self.m2 is not None and other.m2 is not None:
            d = other.mean - self.mean if self.n and other.n else 0.0
            m2 = self.m2 + other.m2 + (d * d * self.n * other.n / n if n else 0.0)
        return MeanStats(n, self.sum + other.sum, self.sum_sq + other.sum_sq, m2)

    @classmethod
    def from_values(cls, x: np.ndarray, weights: np.ndarray | None = None) -> MeanStats:
        """Statistics of the non-NaN values of ``x``; with ``weights`` (bootstrap), each unit counts w times."""
        x = np.asarray(x, dtype=np.float64)
        ok = ~np.isnan(x)
        w = np.ones(int(ok.sum())) if weights is None else np.asarray(weights, dtype=np.float64)[ok]
        xs = x[ok]
        n, total = float(w.sum()), float(np.dot(w, xs))
        m2 = float(np.dot(w, (xs - total / n) ** 2)) if n else 0.0
        return cls(n, total, float(np.dot(w, xs * xs)), m2)

    @classmethod
    def from_moments(cls, n: float, mean: float, m2: float) -> MeanStats:
        """From a count, a mean and the sum of squared deviations (e.g. :class:`kernels.moments.Moments`)."""
        return cls(n, n * mean, m2 + n * mean * mean, m2)


@dataclass(frozen=True)
class RatioStats:
    """Per-unit numerator x and denominator y of a ratio of sums R = Σx / Σy.

    ``var_ratio`` is the delta-method variance of R (Deng, Knoblich & Lu, KDD 2018),
    with sample (n − 1) variances and covariance of the per-unit x and y::

        Var(R) ≈ (σ²_x − 2 R σ_xy + R² σ²_y) / (n μ_y²)

    (the same as (1/n)[σ²_x/μ_y² − 2 μ_x σ_xy/μ_y³ + μ_x² σ²_y/μ_y⁴]); 0 when Σ(x − R y)², computed
    from the raw sums, is within their rounding (:func:`_above_rounding`: every x_u = R y_u).  NaN when
    n < 2 or Σy = 0.

    >>> s = RatioStats.from_values(np.array([1.0, 0.0, 2.0, 1.0, 0.0, 1.0]),
    ...                            np.array([10.0, 5.0, 8.0, 12.0, 3.0, 7.0]))
    >>> round(s.ratio, 10), round(s.var_ratio, 13)       # REFERENCES.md: 0.1111111111, 1.0827617741e-03
    (0.1111111111, 0.0010827617741)
    """

    n: float
    sum_x: float
    sum_y: float
    sum_xx: float
    sum_yy: float
    sum_xy: float

    @property
    def ratio(self) -> float:
        return nan_divide(self.sum_x, self.sum_y)

    @property
    def var_x(self) -> float:
        return _sample_var(self.n, self.sum_x, self.sum_xx)

    @property
    def var_y(self) -> float:
        return _sample_var(self.n, self.sum_y, self.sum_yy)

    @property
    def cov_xy(self) -> float:
        return (self.sum_xy - self.sum_x * self.sum_y / self.n) / (self.n - 1.0) if self.n >= 2 else math.nan

    @property
    def var_ratio(self) -> float:
        if self.n < 2 or not self.sum_y:
            return math.nan
        r = self.sum_x / self.sum_y
        mu_y = self.sum_y / self.n
        # Σ(x − R y)² / (n − 1) expanded; identical to σ²_x − 2Rσ_xy + R²σ²_y with n − 1 variances
        resid = self.sum_xx - 2.0 * r * self.sum_xy + r * r * self.sum_yy  # Σ(x − R y)², as Σ(x − Ry) = 0
        scale = self.sum_xx + 2.0 * abs(r * self.sum_xy) + r * r * self.sum_yy
        return _above_rounding(resid, scale, self.n) / (self.n - 1.0) / (self.n * mu_y * mu_y)

    def merge(self, other: RatioStats) -> RatioStats:
        return RatioStats(
            self.n + other.n,
            self.sum_x + other.sum_x,
            self.sum_y + other.sum_y,
            self.sum_xx + other.sum_xx,
            self.sum_yy + other.sum_yy,
            self.sum_xy + other.sum_xy,
        )

    @classmethod
    def from_values(cls, x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> RatioStats:
        """Statistics of per-unit (x, y); with ``weights`` (bootstrap), each unit counts w times."""
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=np.float64)
        return cls(
            float(w.sum()),
            float(np.dot(w, x)),
            float(np.dot(w, y)),
            float(np.dot(w, x * x)),
            float(np.dot(w, y * y)),
            float(np.dot(w, x * y)),
        )
