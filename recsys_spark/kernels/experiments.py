"""A/B experiment statistics on top of the statistics kernels (:mod:`~recsys_spark.kernels.sums`,
:mod:`~recsys_spark.kernels.comparisons`, :mod:`~recsys_spark.kernels.sequential`; pure numpy + scipy, imported
lazily; no Spark).

The Spark side (:mod:`recsys_spark.experiments.stage`) reduces per-user values to
small named sums per (experiment, variant, slice); everything here works on
those sums, never on rows:

* :func:`srm_test`: sample-ratio mismatch, Pearson chi-square goodness of fit;
* :func:`why_not_compared`: why an experiment has no comparison (no control, no user left, ...);
* :func:`independence_test`: chi-square test of independence of two layers'
  assignments (a contingency table of user counts);
* :class:`CovariateStats`, :func:`fill_covariate`, :func:`cuped_theta`,
  :func:`cuped_compare`: CUPED with theta pooled over arms;
* :func:`mde`, :func:`sample_size_per_arm`: power;
* :class:`MetricSpec` / :func:`parse_metric`: what each testable metric is,
  as a per-user numerator and denominator of additive per-user sums;
* :func:`analyse_experiment`: the result rows of one experiment, with the
  multiple-testing adjustment.

The unit is always the user: every sum below runs over users, never over
exposures or lists.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from recsys_spark.kernels.comparisons import Comparison, adjust_p, compare_estimates, ratio_difference, welch
from recsys_spark.kernels.quantiles import p_value_z, z_quantile
from recsys_spark.kernels.sequential import INFERENCES, SEQUENTIAL_TUNING, sequential
from recsys_spark.kernels.sums import MeanStats, RatioStats, non_finite
from recsys_spark.kernels.user_day import event_columns, user_sum_column
from recsys_spark.registry import LIST_METRICS, event_rate, parse_key

CORRECTIONS = ("holm", "bh", "none")


# --- chi-square tests ----------------------------------------------------------------------------
def _chi2_sf(stat: float, df: int) -> float:
    """P(chi2_df > stat); scipy imported here, not with the module: a config check parses metric names
    with :func:`parse_metric` before the JVM starts and should not pay scipy's import."""
    from scipy.stats import chi2

    return float(chi2.sf(stat, df))


@dataclass(frozen=True)
class ChiSquare:
    """Result of a Pearson chi-square test."""

    statistic: float
    p_value: float
    df: int


def srm_test(observed: Sequence[float], weights: Sequence[float] | None = None) -> ChiSquare:
    """Sample-ratio mismatch: chi-square goodness of fit of users per arm against the planned split.

    chi2 = sum_i (O_i - E_i)^2 / E_i with E_i = N w_i / sum(w), df = arms - 1,
    p = P(chi2_df > chi2).  ``weights`` default to an equal split.

    Notes: an arm with weight 0 and no user adds nothing; an arm with weight 0
    and users gives chi2 = inf and p = 0.  Fewer than two arms, or no user at
    all, gives (nan, nan, 0): nothing to test, and no p-value (p = 1 would read
    as "the split is fine" when no split was seen).

    >>> r = srm_test([600, 400])          # E = 500 each: 100**2/500 * 2 = 40
    >>> r.statistic, r.df, r.p_value < 1e-9
    (40.0, 1, True)
    """
    o = np.asarray(observed, dtype=np.float64)
    w = np.ones_like(o) if weights is None else np.asarray(weights, dtype=np.float64)
    if len(o) != len(w):
        raise ValueError("observed and weights differ in length")
    total = o.sum()
    if len(o) < 2 or total <= 0:
        return ChiSquare(math.nan, math.nan, 0)
    e = total * w / w.sum()
    zero = e == 0
    if np.any(zero & (o > 0)):
        return ChiSquare(math.inf, 0.0, len(o) - 1)
    stat = float(np.sum((o[~zero] - e[~zero]) ** 2 / e[~zero]))
    df = len(o) - 1
    return ChiSquare(stat, _chi2_sf(stat, df), df)


def why_not_compared(
    users: Mapping[str, int],
    excluded: int,
    control: str,
    assigned: int | None = None,
    assigned_example: str | None = None,
    exposure_example: str | None = None,
) -> str | None:
    """Why an experiment has nothing to compare, in one line; None when a variant meets its control.

    ``users``: counted users per variant (the ``all`` slice); ``excluded``: users left out for several
    variants.  A comparison needs users in the arm named ``control`` and in at least one other arm.
    ``assigned`` (the daily run: distinct ids of the experiment in the assignments table) and the two
    examples name the ids of both sides when no assigned id matched a user with a valid row, so that
    a format mismatch (``1`` against ``u000001``) shows.

    >>> why_not_compared({"control": 3, "treatment": 2}, 0, "control") is None
    True
    >>> why_not_compared({}, 5, "control")
    'no user left after excluding 5 user(s) with several variants'
    """
    seen = {v: int(n) for v, n in users.items() if n > 0}
    if not seen and excluded <= 0:
        if assigned is None:
            return "no assigned user with a valid row"
        exposure = (
            f"exposure id {exposure_example!r}; ids are compared as strings"
            if exposure_example is not None
            else "exposure id none: no valid exposure that day"
        )
        return (
            f"no assigned user matched an exposure of the day: {assigned} assignment id(s), 0 matched "
            f"(e.g. assignment id {assigned_example!r}, {exposure})"
        )
    if not seen:
        return f"no user left after excluding {excluded} user(s) with several variants"
    if control not in seen:
        split = ", ".join(f"{v}={n}" for v, n in sorted(seen.items()))
        return f"no control arm named {control!r} (experiments.control); variants with users: {split}"
    if len(seen) == 1:
        return f"no variant besides the control {control!r} ({seen[control]} users)"
    return None


def independence_test(table: np.ndarray) -> ChiSquare:
    """Pearson chi-square test of independence of a contingency table (no continuity correction).

    chi2 = sum_ij (O_ij - E_ij)^2 / E_ij, E_ij = row_i col_j / N, df = (r - 1)(c - 1),
    over the rows and columns with at least one count (an empty cell of a
    non-empty row and column is a 0 that counts).  With one row or column
    left there is nothing to test: (0, 1, 0).  Equals
    ``scipy.stats.chi2_contingency(table, correction=False)``.

    >>> independence_test(np.array([[10, 10], [10, 10]])).statistic
    0.0
    """
    t = np.asarray(table, dtype=np.float64)
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
    if t.ndim != 2 or min(t.shape) < 2:
        return ChiSquare(0.0, 1.0, 0)
    e = np.outer(t.sum(axis=1), t.sum(axis=0)) / t.sum()
    stat = float(np.sum((t - e) ** 2 / e))
    df = (t.shape[0] - 1) * (t.shape[1] - 1)
    return ChiSquare(stat, _chi2_sf(stat, df), df)


# --- CUPED ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CovariateStats:
    """Sufficient statistics of a per-user outcome y and its pre-period covariate x."""

    n: float
    sum_y: float
    sum_yy: float
    sum_x: float
    sum_xx: float
    sum_xy: float

    @classmethod
    def from_values(cls, y: np.ndarray, x: np.ndarray) -> CovariateStats:
        y = np.asarray(y, dtype=np.float64)
        x = np.asarray(x, dtype=np.float64)
        return cls(float(len(y)), float(y.sum()), float(y @ y), float(x.sum()), float(x @ x), float(x @ y))

    def merge(self, other: CovariateStats) -> CovariateStats:
        return CovariateStats(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[float, ...]:
        return (self.n, self.sum_y, self.sum_yy, self.sum_x, self.sum_xx, self.sum_xy)


def fill_covariate(have: CovariateStats, missing: MeanStats, fill: float) -> CovariateStats:
    """Add the users without a covariate, their x set to ``fill`` (the pooled mean of x).

    Sums over the missing users: sum x = m c, sum x^2 = m c^2, sum xy = c sum y.
    Any constant keeps the estimate unbiased (x is pre-treatment and the fill
    does not depend on the arm); the pooled mean keeps the variance reduction
    of the users that have one.
    """
    c = float(fill)
    return CovariateStats(
        have.n + missing.n,
        have.sum_y + missing.sum,
        have.sum_yy + missing.sum_sq,
        have.sum_x + missing.n * c,
        have.sum_xx + missing.n * c * c,
        have.sum_xy + c * missing.sum,
    )


def cuped_theta(arms: Sequence[CovariateStats]) -> float:
    """theta = Cov(y, x) / Var(x) over the users of all arms pooled (one theta for every arm).

    Returns 0 (no adjustment) when x does not vary.
    """
    total = arms[0]
    for a in arms[1:]:
        total = total.merge(a)
    n = total.n
    if n < 2:
        return 0.0
    sxx = total.sum_xx - total.sum_x * total.sum_x / n
    sxy = total.sum_xy - total.sum_x * total.sum_y / n
    return float(sxy / sxx) if sxx > 1e-12 * max(total.sum_xx, 1.0) else 0.0


def cuped_adjusted(arm: CovariateStats, theta: float, x_mean: float) -> MeanStats:
    """The sums of y_cv = y - theta (x - x_mean) over the arm's users, as :class:`MeanStats`.

    mean(y_cv) = mean(y) - theta (mean_arm(x) - x_mean);
    sum y_cv^2 = sum y^2 - 2 theta sum y(x - x_mean) + theta^2 sum (x - x_mean)^2.
    """
    n, sy, syy, sx, sxx, sxy = arm.as_tuple()
    sdx = sx - n * x_mean  # sum (x - x_mean)
    sdxdx = sxx - 2 * x_mean * sx + n * x_mean * x_mean
    sydx = sxy - x_mean * sy
    return MeanStats(n, sy - theta * sdx, syy - 2 * theta * sydx + theta * theta * sdxdx)


def cuped_compare(
    control: CovariateStats, treatment: CovariateStats, confidence: float = 0.95
) -> tuple[Comparison, float]:
    """Welch's test on CUPED-adjusted values, theta pooled over both arms; returns (comparison, theta).

    The relative lift is the adjusted difference over the plain control mean, Δ_cv / ȳ_c, with the variance
    Var(y_cv)_t/(n_t ȳ_c²) + Var(y_cv)_c ȳ_t²/(n_c ȳ_c⁴) and Welch's df: what gbstats (0.8.0) computes for a
    ``RegressionAdjustedStatistic`` (its golden values in tests/kernels/test_experiments.py), so that the lift
    is the change over the ``control_value`` of the same row (docs/experiments.md, "CUPED").
    """
    theta = cuped_theta([control, treatment])
    x_mean = (control.sum_x + treatment.sum_x) / (control.n + treatment.n)
    plain = (control.sum_y / control.n, treatment.sum_y / treatment.n) if control.n and treatment.n else None
    adjusted = cuped_adjusted(control, theta, x_mean), cuped_adjusted(treatment, theta, x_mean)
    return welch(*adjusted, confidence, unadjusted=plain), theta


@dataclass(frozen=True)
class RatioCovariateStats:
    """Sums of a ratio metric's per-user numerator x and denominator y and of their pre-period u, v.

    Every first and second moment of (x, y, u, v) over the arm's users; a user
    without pre-period data has u = v = 0.
    """

    n: float
    s: tuple[float, float, float, float]  # sum x, y, u, v
    ss: tuple[tuple[float, ...], ...]  # 4 x 4 sums of products

    @classmethod
    def from_values(cls, x: np.ndarray, y: np.ndarray, u: np.ndarray, v: np.ndarray) -> RatioCovariateStats:
        m = np.vstack([np.asarray(a, dtype=np.float64) for a in (x, y, u, v)])
        return cls(float(m.shape[1]), tuple(m.sum(axis=1)), tuple(map(tuple, m @ m.T)))

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """(means, sample covariance matrix) of (x, y, u, v)."""
        mu = np.asarray(self.s) / self.n
        cov = (np.asarray(self.ss) - self.n * np.outer(mu, mu)) / (self.n - 1)
        return mu, cov


def cuped_ratio_compare(
    control: RatioCovariateStats, treatment: RatioCovariateStats, confidence: float = 0.95
) -> tuple[Comparison, float] | None:
    """CUPED for a ratio of sums R = sum x / sum y, with the pre-period ratio R' = sum u / sum v as covariate.

    Delta method per arm, with the gradients a = (1/mu_y, -mu_x/mu_y^2, 0, 0) of R and
    b = (0, 0, 1/mu_v, -mu_u/mu_v^2) of R' and the covariance S of (x, y, u, v):
    Var(R) = a'Sa/n, Var(R') = b'Sb/n, Cov(R, R') = a'Sb/n.  theta pooled over
    arms = sum Cov / sum Var(R'); per arm R_cv = R - theta (R' - R'_pooled),
    Var(R_cv) = Var(R) - 2 theta Cov + theta^2 Var(R').  Normal quantile, as the
    unadjusted delta method.  Returns (comparison with ``method = "delta_cuped"``, theta), or None when
    the adjustment is undefined: an arm with fewer than two users, or without a positive mean denominator
    (mu_y or mu_v <= 0).  A variance that rounding leaves below 0 is 0 (it is a variance of a linear
    combination, never negative).
    """
    if any(arm.n < 2 or arm.s[1] <= 0 or arm.s[3] <= 0 for arm in (control, treatment)):
        return None
    parts = []
    for arm in (control, treatment):
        mu, cov = arm.moments()
        a = np.array([1 / mu[1], -mu[0] / mu[1] ** 2, 0.0, 0.0])
        b = np.array([0.0, 0.0, 1 / mu[3], -mu[2] / mu[3] ** 2])
        parts.append((mu[0] / mu[1], mu[2] / mu[3], a @ cov @ a / arm.n, b @ cov @ b / arm.n, a @ cov @ b / arm.n))
    var_pre = parts[0][3] + parts[1][3]
    theta = float((parts[0][4] + parts[1][4]) / var_pre) if var_pre > 0 else 0.0
    pooled = (control.s[2] + treatment.s[2]) / (control.s[3] + treatment.s[3])
    (rc, pc, vc, wc, cc), (rt, pt, vt, wt, ct) = parts
    adj_c, adj_t = rc - theta * (pc - pooled), rt - theta * (pt - pooled)
    var_c = max(vc - 2 * theta * cc + theta * theta * wc, 0.0)
    var_t = max(vt - 2 * theta * ct + theta * theta * wt, 0.0)
    return compare_estimates(adj_c, var_c, adj_t, var_t, z_quantile(confidence), p_value_z, None, "delta_cuped"), theta


# --- power ---------------------------------------------------------------------------------------
def _z(confidence: float, power: float) -> float:
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


# --- metrics -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetricSpec:
    """A testable metric as per-user sums: the user contributes ``num`` and ``den``.

    ``kind = "mean"``: the user's value is num / den (users with den > 0), and
    the metric is the mean over users (Welch).  ``kind = "ratio"``: the metric
    is sum num / (den_factor * sum den) over users with den > 0 (delta method).
    ``num`` and ``den`` name additive per-user columns of the
    ``experiment_users`` table, so that a user's sums add up over days.
    """

    name: str
    metric: str
    k: int | None
    aggregation: str
    kind: str
    num: str
    den: str
    den_factor: float = 1.0


_RATIOS = {  # metric -> (numerator, denominator) of the business ratios, aggregation global
    "exposure_ctr": ("clicked", "exposures"),
    "pv_ctr": ("clicked", "requests"),
    "pv_failure_rate": ("empty_requests", "requests"),
    "clicks_per_exposure": ("click_events", "exposures"),
    "clicks_per_request": ("click_events", "requests"),
    "gmv_per_exposure": ("value", "exposures"),
    "gmv_per_request": ("value", "requests"),
    "value_per_converting_user": ("value", "valued"),  # over the users with a value (valued: 1 for them)
    "dwell_per_click": ("dwell", "click_events"),
}
#: metric -> the per-user sum averaged over the users with exposures (``exposed``: 1 for them), aggregation global
_USER_MEANS = {"gmv_per_user": "value", "dwell_per_user": "dwell"}
#: per-user indicators (0 or 1): over a window a user's is the largest of its days', not their sum
INDICATORS = ("exposed", "valued")


def is_indicator(column: str) -> bool:
    """Whether a per-user column is an indicator (:data:`INDICATORS`, an event's user column)."""
    return column in INDICATORS or (column.startswith("ev_") and column.endswith("_user"))


def parse_metric(name: str) -> MetricSpec:
    """A metric key (:func:`recsys_spark.registry.parse_key`: ``ndcg@10_user_avg``) -> its :class:`MetricSpec`.

    Raises ValueError naming the metric when the key is malformed or the metric has no per-user form.
    """
    metric, k, agg = parse_key(name)
    if metric in LIST_METRICS or metric == "mrr":
        if agg == "user_avg":
            return MetricSpec(name, metric, k, agg, "mean", user_sum_column(metric, k), "lists_ranked")
        if agg == "list_avg":
            return MetricSpec(name, metric, k, agg, "ratio", user_sum_column(metric, k), "lists_ranked")
        if agg == "global" and metric == "precision":
            return MetricSpec(name, metric, k, agg, "ratio", f"hits_at_{k}", "lists_ranked", float(k or 1))
        if agg == "global" and metric == "recall":
            return MetricSpec(name, metric, k, agg, "ratio", f"hits_at_{k}", "relevant")
    if metric == "auc" and agg == "user_avg":
        return MetricSpec(name, metric, k, agg, "mean", "auc_sum", "auc_exposures")
    if metric == "auc" and agg == "impression_weighted":
        return MetricSpec(name, metric, k, agg, "ratio", "auc_sum", "auc_exposures")
    if metric in _RATIOS and agg == "global":
        num, den = _RATIOS[metric]
        return MetricSpec(name, metric, k, agg, "ratio", num, den)
    if metric in _USER_MEANS and agg == "global":
        return MetricSpec(name, metric, k, agg, "mean", _USER_MEANS[metric], "exposed")
    for suffix, kind in (("_user_rate", "mean"), ("_exposure_rate", "ratio")):
        if agg == "global" and metric.endswith(suffix) and event_rate(metric) is not None:
            users, exposures = event_columns(metric[: -len(suffix)])
            num, den = (users, "exposed") if kind == "mean" else (exposures, "exposures")
            return MetricSpec(name, metric, k, agg, kind, num, den)
    raise ValueError(f"metric {name!r} has no per-user form to test (pooled AUC, Gini, diversity... have none)")


# --- result rows ---------------------------------------------------------------------------------
#: the sums the Spark side gathers per (experiment, variant, slice) and metric, named ``f"{metric}|{part}"``
MEAN_PARTS = ("n", "x", "xx")
RATIO_PARTS = ("n", "x", "y", "xx", "yy", "xy")
COVARIATE_PARTS = ("cn", "cy", "cyy", "cx", "cxx", "cxy")  # users of a "mean" metric that have a covariate
#: a ratio metric's pre-period numerator u and denominator v (0 without pre-period data): cn = users with v > 0
RATIO_COVARIATE_PARTS = ("cn", "u", "v", "uu", "vv", "xu", "xv", "yu", "yv", "uv")

RESULT_COLUMNS = (
    ("experiment", "string"),
    ("variant", "string"),
    ("metric", "string"),
    ("k", "int"),
    ("aggregation", "string"),
    ("slice", "string"),
    ("value", "double"),
    ("n", "long"),
    ("control_value", "double"),
    ("control_n", "long"),
    ("delta", "double"),
    ("ci_low", "double"),
    ("ci_high", "double"),
    ("rel_delta", "double"),
    ("rel_ci_low", "double"),
    ("rel_ci_high", "double"),
    ("p_value", "double"),
    ("p_adjusted", "double"),
    ("method", "string"),
    ("se", "double"),
    ("mde", "double"),
    ("covariate_n", "long"),
    ("ci_method", "string"),
)


@dataclass(frozen=True)
class ResultRow:
    experiment: str
    variant: str
    metric: str
    k: int | None
    aggregation: str
    slice: str
    value: float | None
    n: int
    control_value: float | None
    control_n: int
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    rel_delta: float | None
    rel_ci_low: float | None
    rel_ci_high: float | None
    p_value: float | None
    p_adjusted: float | None
    method: str
    se: float | None
    mde: float | None
    covariate_n: int | None
    ci_method: str = "fixed"

    def as_tuple(self) -> tuple:
        return tuple(getattr(self, name) for name, _ in RESULT_COLUMNS)


def _clean(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _sums_of(sums: Mapping[str, float], spec: MetricSpec) -> Callable[[str], float]:
    """part -> the arm's sum ``<metric>|<part>`` as a float, 0.0 when absent or null."""

    def g(part: str) -> float:
        return float(sums.get(f"{spec.name}|{part}") or 0.0)

    return g


def arm_stats(sums: Mapping[str, float], spec: MetricSpec) -> MeanStats | RatioStats:
    """The metric's sufficient statistics from the named sums of one arm."""
    g = _sums_of(sums, spec)
    if spec.kind == "mean":
        return MeanStats(g("n"), g("x"), g("xx"))
    f = spec.den_factor
    return RatioStats(g("n"), g("x"), f * g("y"), g("xx"), f * f * g("yy"), f * g("xy"))


def covariate_stats(sums: Mapping[str, float], spec: MetricSpec) -> tuple[CovariateStats, MeanStats]:
    """(users with a covariate, users without one) of a mean metric of one arm."""
    g = _sums_of(sums, spec)
    have = CovariateStats(*(g(p) for p in COVARIATE_PARTS))
    missing = MeanStats(g("n") - have.n, g("x") - have.sum_y, g("xx") - have.sum_yy)
    return have, missing


def ratio_covariate_stats(sums: Mapping[str, float], spec: MetricSpec) -> tuple[RatioCovariateStats, int]:
    """(moments of (x, y, u, v), users with pre-period data) of a ratio metric of one arm."""
    g = _sums_of(sums, spec)
    f = spec.den_factor
    sx, sy, su, sv = g("x"), f * g("y"), g("u"), f * g("v")
    xx, yy, uu, vv = g("xx"), f * f * g("yy"), g("uu"), f * f * g("vv")
    xy, xu, xv, yu, yv, uv = f * g("xy"), g("xu"), f * g("xv"), f * g("yu"), f * f * g("yv"), f * g("uv")
    ss = ((xx, xy, xu, xv), (xy, yy, yu, yv), (xu, yu, uu, uv), (xv, yv, uv, vv))
    return RatioCovariateStats(g("n"), (sx, sy, su, sv), ss), int(g("cn"))


def _value(s: MeanStats | RatioStats) -> float | None:
    if s.n <= 0:
        return None
    return _clean(s.mean if isinstance(s, MeanStats) else s.ratio)


def compare(
    control: Mapping[str, float],
    treatment: Mapping[str, float],
    spec: MetricSpec,
    confidence: float = 0.95,
    power: float = 0.8,
    cuped: bool = False,
    inference: str = "fixed",
    tuning: float = SEQUENTIAL_TUNING,
) -> dict:
    """One metric, one treatment arm against control: the fields of a result row (no p_adjusted).

    Means: Welch (``method = "welch"``), or Welch on CUPED-adjusted values when
    ``cuped`` and some user has a covariate (``"welch_cuped"``); ratios: delta
    method (``"delta"``), or :func:`cuped_ratio_compare` when ``cuped`` and at
    least two users of each arm have pre-period data (``"delta_cuped"``).
    Undefined results (an arm with fewer than two users, a zero denominator) are None.

    ``inference = "sequential"``: the same estimates and variances, with the asymptotic confidence
    sequence at N = both arms' users as the intervals and its always-valid p-value
    (:func:`~recsys_spark.kernels.sequential.sequential`, gbstats' ``SequentialTwoSidedTTest`` tuned at
    ``tuning`` users); ``"fixed"``: the fixed-horizon test above.  ``ci_method`` says which; ``mde`` stays
    the fixed-horizon one.
    """
    if inference not in INFERENCES:
        raise ValueError(f"inference must be one of {', '.join(INFERENCES)}, got {inference!r}")
    c, t = arm_stats(control, spec), arm_stats(treatment, spec)
    out: dict[str, Any] = {
        "value": _value(t),
        "n": int(t.n),
        "control_value": _value(c),
        "control_n": int(c.n),
        "covariate_n": None,
    }
    comp: Comparison | None = None
    method = "welch" if spec.kind == "mean" else "delta"
    if c.n >= 2 and t.n >= 2:
        with np.errstate(all="ignore"):
            if isinstance(c, MeanStats) and isinstance(t, MeanStats):
                if cuped:
                    (hc, mc), (ht, mt) = covariate_stats(control, spec), covariate_stats(treatment, spec)
                    out["covariate_n"] = int(hc.n + ht.n)
                    if hc.n + ht.n >= 2:
                        fill = (hc.sum_x + ht.sum_x) / (hc.n + ht.n)
                        comp, _ = cuped_compare(fill_covariate(hc, mc, fill), fill_covariate(ht, mt, fill), confidence)
                        method = "welch_cuped"
                if comp is None:
                    comp = welch(c, t, confidence)
            elif isinstance(c, RatioStats) and isinstance(t, RatioStats):
                if cuped:
                    (rc, nc), (rt, nt) = ratio_covariate_stats(control, spec), ratio_covariate_stats(treatment, spec)
                    out["covariate_n"] = nc + nt
                    adjusted = cuped_ratio_compare(rc, rt, confidence) if nc >= 2 and nt >= 2 else None
                    if adjusted is not None:
                        comp, _ = adjusted
                        method = "delta_cuped"
                if comp is None:
                    comp = ratio_difference(c, t, confidence)
    fixed_se = comp.se if comp is not None else math.nan
    if comp is not None and inference == "sequential":
        comp = sequential(comp, c.n + t.n, confidence, tuning)
    fields = ("delta", "ci_low", "ci_high", "rel_delta", "rel_ci_low", "rel_ci_high", "p_value", "se")
    out.update({f: _clean(getattr(comp, f)) if comp is not None else None for f in fields})
    out["method"] = method
    out["mde"] = _clean(mde(fixed_se, confidence, power)) if comp is not None else None
    out["ci_method"] = inference
    return out


def analyse_experiment(
    experiment: str,
    sums: Mapping[tuple[str, str], Mapping[str, float]],
    specs: Sequence[MetricSpec],
    control: str,
    correction: str = "holm",
    confidence: float = 0.95,
    power: float = 0.8,
    cuped: bool = False,
    inference: str = "fixed",
    tuning: float = SEQUENTIAL_TUNING,
) -> list[ResultRow]:
    """Result rows of one experiment from its per-(variant, slice) named sums.

    One row per (variant != control, metric, slice) where the control arm
    exists in that slice.  ``p_adjusted``: ``correction`` (holm, bh, none)
    over the metrics x variants of the experiment, separately per slice (each
    slice is its own exploratory family; the ``all`` slice is the confirmatory
    one); with ``inference = "sequential"`` over the always-valid p-values (Holm and BH need only valid
    p-values).  Intervals are not adjusted.
    """
    rows: list[ResultRow] = []
    slices = sorted({s for _, s in sums})
    for slice_value in slices:
        base = sums.get((control, slice_value))
        if base is None:
            continue
        family: list[dict] = []
        for variant in sorted(v for v, s in sums if s == slice_value and v != control):
            for spec in specs:
                r = compare(base, sums[(variant, slice_value)], spec, confidence, power, cuped, inference, tuning)
                family.append(
                    dict(
                        experiment=experiment,
                        variant=variant,
                        metric=spec.metric,
                        k=spec.k,
                        aggregation=spec.aggregation,
                        slice=slice_value,
                        **r,
                    )
                )
        p = np.array([np.nan if r["p_value"] is None else r["p_value"] for r in family], dtype=np.float64)
        adjusted = adjust_p(list(p), correction) if len(p) else p
        for r, pa in zip(family, adjusted, strict=True):
            rows.append(ResultRow(p_adjusted=_clean(float(pa)), **r))
    return rows


def overflow_notes(
    experiment: str, sums: Mapping[tuple[str, str], Mapping[str, float]], specs: Sequence[MetricSpec]
) -> list[str]:
    """One note per metric of ``experiment`` whose per-user sums overflowed a double in some arm (values
    whose squares pass 1.8e308): its comparisons have no interval and no p-value (never a standard error
    of 0: :func:`kernels.sums.non_finite`), and the note names the sum and the value it sums.

    >>> spec = parse_metric("gmv_per_user_global")
    >>> overflow_notes("shop", {("control", "all"): {"gmv_per_user_global|xx": math.inf}}, [spec])
    ['experiment shop: no interval for gmv_per_user (control, slice all): a sum overflows a double (Σ value² = inf)']
    """
    notes = []
    for spec in specs:
        labels = {"x": f"Σ {spec.num}", "xx": f"Σ {spec.num}²", "y": f"Σ {spec.den}", "yy": f"Σ {spec.den}²"}
        labels["xy"] = f"Σ {spec.num}·{spec.den}"
        broken: dict[str, list[str]] = {}
        for (variant, slice_value), arm in sorted(sums.items()):
            why = non_finite({label: arm.get(f"{spec.name}|{part}") for part, label in labels.items()})
            if why:
                broken.setdefault(why, []).append(f"{variant}, slice {slice_value}")
        notes += [
            f"experiment {experiment}: no interval for {spec.metric} ({'; '.join(arms)}): a sum overflows a double "
            f"({why})"
            for why, arms in broken.items()
        ]
    return notes
