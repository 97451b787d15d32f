"""Treatment vs control, and the correction of a family of tests: a :class:`Comparison` (the difference, the
relative lift, both with intervals, and p) from two arms' sufficient statistics (:func:`welch`,
:func:`ratio_difference`, :func:`paired_t`), and :func:`adjust_p` (Holm, Benjamini-Hochberg).

Pure numpy (and ``scipy.stats`` for the quantiles, :mod:`~recsys_spark.kernels.quantiles`); no Spark.  See
``docs/statistics.md`` for the formulas and the golden values they reproduce (scipy, statsmodels, gbstats).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from recsys_spark.kernels.quantiles import p_value_t, p_value_z, t_quantile, z_quantile
from recsys_spark.kernels.sums import MeanStats, RatioStats, nan_divide


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
    rel = nan_divide(delta, bc)
    # products, not powers: a float ** 2 past 1.8e308 raises OverflowError where a product is inf
    bc2 = bc * bc
    rel_se = math.sqrt(vt / bc2 + vc * (bt * bt) / (bc2 * bc2)) if bc else math.nan
    stat = nan_divide(delta, se) if se else (math.nan if delta == 0 else math.copysign(math.inf, delta))
    rel_stat = nan_divide(rel, rel_se) if rel_se else math.nan
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
    vc, vt = nan_divide(control.var, control.n), nan_divide(treatment.var, treatment.n)
    df = _satterthwaite(vc, control.n, vt, treatment.n)
    q = t_quantile(confidence, df) if math.isfinite(df) or df == math.inf else math.nan
    p_of = lambda s: p_value_t(s, df)  # noqa: E731
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
        q, p_of = t_quantile(confidence, df), (lambda s: p_value_t(s, df))
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
    q = t_quantile(confidence, df) if diff.n >= 2 else math.nan
    delta = diff.mean
    stat = (
        nan_divide(delta, se)
        if se
        else (math.nan if delta == 0 or math.isnan(delta) else math.copysign(math.inf, delta))
    )
    p = p_value_t(stat, df) if diff.n >= 2 else math.nan
    mc = control.mean
    rel, rel_se = nan_divide(delta, mc), nan_divide(se, abs(mc)) if mc else math.nan
    return Comparison(
        delta, se, delta - q * se, delta + q * se, rel, rel - q * rel_se, rel + q * rel_se, p, df, "paired_t", rel_se, p
    )


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
