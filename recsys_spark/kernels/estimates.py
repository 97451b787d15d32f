"""One estimate and its two-sided interval: :class:`Interval`, from :mod:`~recsys_spark.kernels.sums`' sufficient
statistics (:func:`t_interval`: Student t on a mean, n - 1 df; :func:`delta_interval`: a ratio of sums, delta
method, normal quantile) or from bootstrap replicates (:func:`bootstrap_interval`: SE = the replicates' standard
deviation, their weights from :func:`~recsys_spark.kernels.bootstrap_weights.poisson_weights`).

Pure numpy (and ``scipy.stats`` for the quantiles, :mod:`~recsys_spark.kernels.quantiles`); no Spark.  See
``docs/statistics.md`` for the formulas, their units and the edge cases.

>>> s = MeanStats.from_values(np.array([1.0, 2.0, 3.0]))   # mean 2, var 1, se 1/sqrt(3)
>>> i = t_interval(s)
>>> round(i.value, 6), round(i.se, 6), round(i.ci_high - i.value, 4)   # t(0.975, 2) = 4.3027
(2.0, 0.57735, 2.4841)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from recsys_spark.kernels.quantiles import t_quantile, z_quantile
from recsys_spark.kernels.sums import MeanStats, RatioStats, non_finite

METHODS = ("t", "delta", "bootstrap", "none")
NONE = "none"


@dataclass(frozen=True)
class Interval:
    """One estimate with its standard error and two-sided interval; ``method`` in t, delta, bootstrap, none."""

    value: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    method: str
    #: why there is no interval when a sum, product or variance is not finite (:func:`non_finite`), else None
    note: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def none(cls, value: float | None = None, note: str | None = None) -> Interval:
        """No interval defined (a count, too few units, or ``note``: a sum that overflowed): se and bounds
        null, method "none"; a non-finite value is null too."""
        return cls(_finite(value), None, None, None, NONE, note)


@dataclass(frozen=True)
class MetricValue:
    """A metric's value in a slice over ``n`` units: the columns that a ``metrics`` row
    (``per_user.aggregate.MetricRow``) and an ``experiments`` row (:class:`~recsys_spark.kernels.experiments.ResultRow`)
    share, in that order, so that the two tables name a metric and its value alike."""

    metric: str
    k: int | None
    aggregation: str
    slice: str
    value: float | None
    n: int


def _sigma(a: str, b: str | None = None) -> str:
    """The label of a sum in a note: Σx, Σx², Σxy for letters; Σ value, Σ value², Σ value·exposures for names."""
    if b is None:
        return f"Σ{a}" if len(a) == 1 else f"Σ {a}"
    if len(a) == len(b) == 1:
        return f"Σ{a}²" if a == b else f"Σ{a}{b}"
    return f"Σ {a}²" if a == b else f"Σ {a}·{b}"


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def t_interval(s: MeanStats, confidence: float = 0.95, name: str = "x") -> Interval:
    """Mean ± t_{(1+c)/2, n−1} · sd / sqrt(n).

    Edge cases: n = 0 -> value null, method "none"; n = 1 -> the value, no
    interval (method "none"); a zero variance gives se 0 and a zero-width interval; a
    sum or variance that is not finite gives no interval and a :attr:`Interval.note` (:func:`non_finite`;
    ``name``: what x is, for the note).

    >>> t_interval(MeanStats.from_values(np.array([5.0])))
    Interval(value=5.0, se=None, ci_low=None, ci_high=None, method='none')
    >>> t_interval(MeanStats(2.0, 2e154, 2e308)).note       # Σx² overflows: no se of 0
    'Σx² = inf'
    """
    if s.n < 2:
        return Interval.none(s.mean if s.n else None)
    broken = non_finite({_sigma(name): s.sum, _sigma(name, name): s.sum_sq, f"the variance of {name}": s.var})
    if broken:
        return Interval.none(s.mean, broken)
    se = s.se
    half = t_quantile(confidence, s.n - 1.0) * se
    return Interval(s.mean, se, s.mean - half, s.mean + half, "t")


def delta_interval(s: RatioStats, confidence: float = 0.95, names: tuple[str, str] = ("x", "y")) -> Interval:
    """R ± z_{(1+c)/2} · sqrt(Var_delta(R)) for a ratio of per-unit sums.

    Edge cases: Σy = 0 -> value null, "none"; n < 2 -> the value, no interval ("none"); a sum, a sum of
    products or the variance not finite -> no interval and a :attr:`Interval.note` (:func:`non_finite`;
    ``names``: what x and y are, for the note).

    >>> delta_interval(RatioStats(2.0, 2e308, 4.0, 1e308, 8.0, 4.0)).note       # Σx = 2e308 is inf
    'Σx = inf'
    """
    if not s.sum_y or s.n < 1:
        return Interval.none(None)
    if s.n < 2:
        return Interval.none(s.ratio)
    x, y = names
    broken = non_finite(
        {
            _sigma(x): s.sum_x,
            _sigma(y): s.sum_y,
            _sigma(x, x): s.sum_xx,
            _sigma(y, y): s.sum_yy,
            _sigma(x, y): s.sum_xy,
            f"the variance of {_sigma(x)} / {_sigma(y)}": s.var_ratio,
        }
    )
    if broken:
        return Interval.none(s.ratio, broken)
    se = math.sqrt(s.var_ratio)
    half = z_quantile(confidence) * se
    return Interval(s.ratio, se, s.ratio - half, s.ratio + half, "delta")


def bootstrap_interval(value: float, replicates: np.ndarray, confidence: float = 0.95) -> Interval:
    """value ± z_{(1+c)/2} · sd(replicates) (sd with n − 1; NaN replicates are dropped).

    The normal interval around the full-sample estimate: with few replicates
    (tens to a couple of hundred) percentile bounds are too noisy to publish.
    Fewer than two finite replicates, or a non-finite value -> method "none".

    >>> round(bootstrap_interval(0.5, np.array([0.4, 0.5, 0.6])).se, 12)     # sd of 0.4, 0.5, 0.6
    0.1
    """
    r = np.asarray(replicates, dtype=np.float64)
    r = r[np.isfinite(r)]
    if value is None or not math.isfinite(value) or len(r) < 2:
        return Interval.none(value)
    se = float(np.std(r, ddof=1))
    half = z_quantile(confidence) * se
    return Interval(float(value), se, value - half, value + half, "bootstrap")
