"""Statistics for decisions: sufficient statistics, intervals, comparisons, unit-keyed bootstrap weights.

Pure numpy (and ``scipy.stats`` for the t and normal quantiles, imported
lazily); no Spark.  Every estimate is computed from mergeable sufficient
statistics whose unit is the **user** (the randomisation and sampling unit):
a Spark aggregation produces them, the driver merges a handful of them.

* :class:`MeanStats` (``n, Σx, Σx²``) -> :func:`t_interval` (Student t, n - 1 df);
* :class:`RatioStats` (``n, Σx, Σy, Σx², Σy², Σxy``) -> :func:`delta_interval`
  (ratio of sums, delta method, normal quantile);
* :func:`bootstrap_interval`: SE = standard deviation of replicates whose unit
  weights come from :func:`poisson_weights` (a hash of unit, replicate, seed);
* treatment vs control: :func:`welch`, :func:`ratio_difference`, :func:`paired_t`;
  multiple testing: :func:`adjust_p`;
* always-valid inference (an experiment looked at every night): :func:`sequential`, the asymptotic
  confidence sequence and its p-value (:func:`sequential_half_width`, :func:`sequential_p_value`) as
  GrowthBook's gbstats computes them.

See ``docs/statistics.md`` for the formulas, their units and the edge cases.

>>> s = MeanStats.from_values(np.array([1.0, 2.0, 3.0]))   # mean 2, var 1, se 1/sqrt(3)
>>> i = t_interval(s)
>>> round(i.value, 6), round(i.se, 6), round(i.ci_high - i.value, 4)   # t(0.975, 2) = 4.3027
(2.0, 0.57735, 2.4841)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

METHODS = ("t", "delta", "bootstrap", "none")
NONE = "none"

# --------------------------------------------------------------------------- quantiles


def z_quantile(confidence: float) -> float:
    """Two-sided normal quantile: z_{(1 + confidence) / 2}."""
    from scipy.stats import norm

    _check_confidence(confidence)
    return float(norm.ppf(0.5 + confidence / 2.0))


def _tq(confidence: float, df: float) -> float:
    """Two-sided Student t quantile with ``df`` degrees of freedom (normal when df is infinite)."""
    from scipy.stats import t

    _check_confidence(confidence)
    return float(t.ppf(0.5 + confidence / 2.0, df)) if math.isfinite(df) else z_quantile(confidence)


def _p_t(stat: float, df: float) -> float:
    from scipy.stats import t

    if math.isnan(stat):
        return math.nan
    return float(2.0 * t.sf(abs(stat), df)) if math.isfinite(df) else p_value_z(stat)


def p_value_z(stat: float) -> float:
    from scipy.stats import norm

    return math.nan if math.isnan(stat) else float(2.0 * norm.sf(abs(stat)))


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


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


def _div(a: float, b: float) -> float:
    return a / b if b else math.nan


# --------------------------------------------------------------------------- sufficient statistics


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
        return _div(self.sum, self.n)

    @property
    def var(self) -> float:
        if self.n < 2:
            return math.nan
        if self.m2 is not None:
            return max(self.m2, 0.0) / (self.n - 1.0)
        m2 = _above_rounding(self.sum_sq - self.sum * self.sum / self.n, 2.0 * self.sum_sq, self.n)
        return m2 / (self.n - 1.0)

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
        return _div(self.sum_x, self.sum_y)

    @property
    def var_x(self) -> float:
        if self.n < 2:
            return math.nan
        m2 = self.sum_xx - self.sum_x * self.sum_x / self.n
        return _above_rounding(m2, 2.0 * self.sum_xx, self.n) / (self.n - 1.0)

    @property
    def var_y(self) -> float:
        if self.n < 2:
            return math.nan
        m2 = self.sum_yy - self.sum_y * self.sum_y / self.n
        return _above_rounding(m2, 2.0 * self.sum_yy, self.n) / (self.n - 1.0)

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


# --------------------------------------------------------------------------- one estimate, its interval


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
    half = _tq(confidence, s.n - 1.0) * se
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


# --------------------------------------------------------------------------- treatment vs control


@dataclass(frozen=True)
class Comparison:
    """Treatment vs control: absolute difference, relative lift (Δ / control), both with intervals; p for Δ."""

    delta: float
    se: float
    ci_low: float
    ci_high: float
    rel_delta: float
    rel_ci_low: float
    rel_ci_high: float
    p_value: float
    df: float | None
    method: str
    rel_se: float = math.nan
    rel_p_value: float = math.nan


def compare_estimates(
    mc: float,
    vc: float,
    mt: float,
    vt: float,
    q: float,
    p_of,
    df: float | None,
    method: str,
    unadjusted: tuple[float, float] | None = None,
) -> Comparison:
    """Δ = mt − mc with Var = vc + vt (variances of the two estimates); lift Δ/mc with the gbstats variance
    Var(Δ/mc) ≈ vt/mc² + vc·mt²/mc⁴.

    ``unadjusted`` (CUPED: the arms' plain means (ȳ_c, ȳ_t) beside the adjusted estimates mc, mt): the lift is
    Δ/ȳ_c and its variance vt/ȳ_c² + vc·ȳ_t²/ȳ_c⁴, as gbstats' ``frequentist_diff`` and ``frequentist_variance``
    (0.8.0) take them, so that the lift is the change over the control value the row shows."""
    delta = mt - mc
    se = math.sqrt(vc + vt) if vc + vt >= 0 else math.nan
    bc, bt = unadjusted if unadjusted is not None else (mc, mt)
    rel = _div(delta, bc)
    # products, not powers: a float ** 2 past 1.8e308 raises OverflowError where a product is inf
    bc2 = bc * bc
    rel_se = math.sqrt(vt / bc2 + vc * (bt * bt) / (bc2 * bc2)) if bc else math.nan
    stat = _div(delta, se) if se else (math.nan if delta == 0 else math.copysign(math.inf, delta))
    rel_stat = _div(rel, rel_se) if rel_se else math.nan
    return Comparison(
        delta,
        se,
        delta - q * se,
        delta + q * se,
        rel,
        rel - q * rel_se,
        rel + q * rel_se,
        p_of(stat),
        df,
        method,
        rel_se,
        p_of(rel_stat),
    )


def welch(
    control: MeanStats, treatment: MeanStats, confidence: float = 0.95, unadjusted: tuple[float, float] | None = None
) -> Comparison:
    """Welch's t for a difference of per-unit means, Satterthwaite degrees of freedom.

    Δ = x̄_t − x̄_c, se² = s²_c/n_c + s²_t/n_t,
    df = se⁴ / ((s²_c/n_c)²/(n_c − 1) + (s²_t/n_t)²/(n_t − 1)); the same t and p
    as ``scipy.stats.ttest_ind(control, treatment, equal_var=False)`` (sign
    reversed: Δ is treatment − control).  Relative lift Δ / x̄_c by the delta method
    (GrowthBook), with the same df.  NaN throughout when either arm has n < 2.  ``unadjusted``: the plain
    means of arms given as CUPED-adjusted values, the base of the lift (:func:`compare_estimates`).
    """
    vc, vt = _div(control.var, control.n), _div(treatment.var, treatment.n)
    df = _satterthwaite(vc, control.n, vt, treatment.n)
    q = _tq(confidence, df) if math.isfinite(df) or df == math.inf else math.nan
    p_of = lambda s: _p_t(s, df)  # noqa: E731
    return compare_estimates(control.mean, vc, treatment.mean, vt, q, p_of, df, "welch", unadjusted)


def _satterthwaite(vc: float, nc: float, vt: float, nt: float) -> float:
    if nc < 2 or nt < 2 or math.isnan(vc) or math.isnan(vt):
        return math.nan
    den = vc * vc / (nc - 1.0) + vt * vt / (nt - 1.0)
    return (vc + vt) * (vc + vt) / den if den else math.inf


def ratio_difference(
    control: RatioStats, treatment: RatioStats, confidence: float = 0.95, quantile: str = "normal"
) -> Comparison:
    """Difference of two ratios of sums (e.g. CTR), each with its delta-method variance.

    Δ = R_t − R_c, se² = Var(R_c) + Var(R_t); normal quantile and p by default
    (``quantile="normal"``, the user count of a daily experiment makes t and z
    agree); ``quantile="welch"`` uses Student t with Satterthwaite df on the two
    variances, which is what GrowthBook's gbstats reports (REFERENCES.md golden values).
    """
    vc, vt = control.var_ratio, treatment.var_ratio
    p_of: Callable[[float], float]  # statistic -> two-sided p
    if quantile == "normal":
        df, q, p_of = None, z_quantile(confidence), p_value_z
    elif quantile == "welch":
        df = _satterthwaite(vc, control.n, vt, treatment.n)
        q, p_of = _tq(confidence, df), (lambda s: _p_t(s, df))
    else:
        raise ValueError(f"quantile must be 'normal' or 'welch', got {quantile!r}")
    return compare_estimates(control.ratio, vc, treatment.ratio, vt, q, p_of, df, "delta")


def paired_t(diff: MeanStats, control: MeanStats, confidence: float = 0.95) -> Comparison:
    """Paired t on per-unit differences d = b − a (``scipy.stats.ttest_rel(b, a)``), n − 1 df.

    Δ = d̄, se = sd(d)/sqrt(n).  The relative lift Δ / ā treats the control mean
    ā as fixed (its covariance with d̄ is not in these statistics), so the
    relative interval is the absolute one divided by ā.
    """
    df = diff.n - 1.0 if diff.n >= 2 else math.nan
    se = diff.se
    q = _tq(confidence, df) if diff.n >= 2 else math.nan
    delta = diff.mean
    stat = _div(delta, se) if se else (math.nan if delta == 0 or math.isnan(delta) else math.copysign(math.inf, delta))
    p = _p_t(stat, df) if diff.n >= 2 else math.nan
    mc = control.mean
    rel, rel_se = _div(delta, mc), _div(se, abs(mc)) if mc else math.nan
    return Comparison(
        delta, se, delta - q * se, delta + q * se, rel, rel - q * rel_se, rel + q * rel_se, p, df, "paired_t", rel_se, p
    )


# --------------------------------------------------------------------------- always-valid inference

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
    _check_confidence(confidence)
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


# --------------------------------------------------------------------------- multiple testing


def adjust_p(p_values: Sequence[float], method: str) -> np.ndarray:
    """Adjusted p-values: ``holm`` (Holm–Bonferroni, step-down), ``bh`` (Benjamini–Hochberg) or ``none``.

    NaN p-values stay NaN and do not count in the family size.  Holm: sort
    ascending, p̃_(i) = max_{j≤i} min(1, (m − j + 1) p_(j)); BH: p̃_(i) =
    min_{j≥i} min(1, m p_(j) / j).  Same as ``statsmodels ... multipletests``.

    >>> adjust_p([0.01, 0.04, np.nan, 0.03], "holm").round(4).tolist()   # 3·0.01, max(.03, 2·.03), 1·.04 -> .06
    [0.03, 0.06, nan, 0.06]
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    q = p[ok]
    m = len(q)
    if method == "none" or m == 0:
        out[ok] = q
        if method not in ("none", "holm", "bh"):
            raise ValueError(f"method must be 'holm', 'bh' or 'none', got {method!r}")
        return out
    order = np.argsort(q, kind="mergesort")
    sorted_p = q[order]
    rank = np.arange(1, m + 1, dtype=np.float64)
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (m - rank + 1.0) * sorted_p))
    elif method == "bh":
        adj = np.minimum.accumulate(np.minimum(1.0, m * sorted_p / rank)[::-1])[::-1]
    else:
        raise ValueError(f"method must be 'holm', 'bh' or 'none', got {method!r}")
    res = np.empty(m)
    res[order] = adj
    out[ok] = res
    return out


# --------------------------------------------------------------------------- unit-keyed Poisson bootstrap

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_POISSON_MAX = 20  # P(Poisson(1) > 20) ≈ 1.6e-20: the table ends there
_POISSON_CDF = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(_POISSON_MAX + 1)])


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser (Steele, Lea & Flood 2014) on uint64, element-wise (wrapping arithmetic).

    >>> hex(int(splitmix64(np.array([0], dtype=np.uint64))[0]))   # of the state 0 + golden gamma
    '0xe220a8397b1dcdaf'
    """
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_units(unit_ids: np.ndarray) -> np.ndarray:
    """64-bit hash of each unit id: FNV-1a over its Unicode code points (32-bit words), then splitmix64.

    Vectorised over units (one numpy pass per character position, no Python
    call per id); depends only on the id string, so it is the same on every
    executor, in every batch, in every run.  Integer ids are hashed as their
    decimal strings.
    """
    ids = np.asarray(unit_ids)
    if ids.dtype.kind != "U":
        ids = ids.astype(str)
    n = len(ids)
    width = max(ids.dtype.itemsize // 4, 1)
    codes = (
        np.ascontiguousarray(ids).view(np.uint32).reshape(n, -1)
        if n and ids.dtype.itemsize
        else np.zeros((n, width), dtype=np.uint32)
    )
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(codes.shape[1]):
            c = codes[:, j].astype(np.uint64)
            live = c != 0  # numpy pads shorter strings with NUL code points: they are not part of the id
            h = np.where(live, (h ^ c) * _FNV_PRIME, h)
        lengths = np.char.str_len(ids).astype(np.uint64)
        return splitmix64(h ^ splitmix64(lengths))


def poisson_weights(unit_ids: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """Bootstrap weights (n_units, replicates), each Poisson(1), a pure function of (unit id, replicate, seed).

    u = top 53 bits of splitmix64(splitmix64(hash(unit) ⊕ splitmix64(seed)) + (r + 1)·γ) / 2⁵³,
    γ = 0x9E3779B97F4A7C15; w = the Poisson(1) inverse CDF at u (table up to 20).
    No generator state: the same unit gets the same weight whatever the
    partitioning, batch order or slice it is seen in (Chamandy et al. 2012;
    meterstick's ``PoissonBootstrap``).  Returned as uint8.

    >>> w = poisson_weights(np.array(["u1", "u2"]), 4, seed=7)
    >>> w.shape, bool((w == poisson_weights(np.array(["u2", "u1"]), 4, seed=7)[::-1]).all())
    ((2, 4), True)
    """
    if replicates < 0:
        raise ValueError(f"replicates must be >= 0, got {replicates}")
    with np.errstate(over="ignore"):
        seed_key = splitmix64(np.array([np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)], dtype=np.uint64))
        key = splitmix64(hash_units(unit_ids) ^ seed_key)
        steps = np.arange(1, replicates + 1, dtype=np.uint64) * _GOLDEN
        bits = splitmix64(key[:, None] + steps[None, :])
    u = (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    return np.searchsorted(_POISSON_CDF, u, side="right").astype(np.uint8)
