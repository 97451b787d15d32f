"""The result rows of one experiment from its arms' named sums: every variant against the control, metric by
metric and slice by slice (:func:`compare`, :func:`analyse_experiment`), with the multiple-testing adjustment,
and the notes on sums that overflowed (:func:`overflow_notes`).

The Spark side (:mod:`recsys_spark.experiments.arm_sums`) reduces per-user values to small named sums per
(experiment, variant, slice), ``f"{metric}|{part}"`` (the parts below); everything here works on those sums,
never on rows.  The statistics come from the kernels by concept, as gbstats splits them:
:mod:`~recsys_spark.kernels.sums` (sufficient statistics), :mod:`~recsys_spark.kernels.comparisons` (Welch, the
delta method, Holm/BH), :mod:`~recsys_spark.kernels.sequential` (the confidence sequence),
:mod:`~recsys_spark.kernels.cuped`, :mod:`~recsys_spark.kernels.power` (the MDE) and
:mod:`~recsys_spark.kernels.metric_specs` (what each metric is as per-user sums).  The checks of an
experiment's assignment (SRM, layers) are :mod:`~recsys_spark.kernels.assignment_checks`.

The unit is always the user: every sum below runs over users, never over exposures or lists.  Pure numpy;
no Spark.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from recsys_spark.kernels.comparisons import Comparison, adjust_p, ratio_difference, welch
from recsys_spark.kernels.cuped import (
    CovariateStats,
    RatioCovariateStats,
    cuped_compare,
    cuped_ratio_compare,
    fill_covariate,
)
from recsys_spark.kernels.estimates import MetricValue
from recsys_spark.kernels.metric_specs import MetricSpec
from recsys_spark.kernels.power import mde
from recsys_spark.kernels.sequential import INFERENCES, SEQUENTIAL_TUNING, sequential
from recsys_spark.kernels.sums import MeanStats, RatioStats, non_finite

CORRECTIONS = ("holm", "bh", "none")

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
class Arm:
    """Which experiment and which of its variants a result row compares with the control."""

    experiment: str
    variant: str


@dataclass(frozen=True)
class ResultRow(MetricValue, Arm):
    """One ``experiments`` row: a variant (:class:`Arm`) against its control on a metric in a slice
    (:class:`~recsys_spark.kernels.estimates.MetricValue`: the variant's value and users), then the comparison.

    Its fields are :data:`RESULT_COLUMNS` in order: a dataclass takes its bases' fields from the last base to the
    first, so the :class:`Arm`'s come first, then the :class:`MetricValue`'s, then these.
    """

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

    >>> from recsys_spark.kernels.metric_specs import parse_metric
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
