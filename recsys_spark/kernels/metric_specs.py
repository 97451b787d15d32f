"""What each testable metric is as per-user sums: :class:`MetricSpec` (a numerator and a denominator, additive
per-user columns of the ``experiment_users`` table) and :func:`parse_metric` (a metric key -> its spec).

The experiments compare arms on these sums, so that a user's sums add up over days (the window) and every
metric's statistics come from one aggregation by arm.  No scipy and no Spark: a config check parses the metric
names before the JVM starts.  docs/experiments.md, "Which metrics".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from recsys_spark.kernels import composite
from recsys_spark.kernels.user_day import event_columns, survey_columns, user_sum_column
from recsys_spark.registry import LIST_METRICS, event_rate, f_score, is_composite, parse_key, survey_metric


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
    #: the user's numerator counted up to this (``capped_ctr``: ``metrics.click_cap``); None: not capped
    num_cap: float | None = None
    #: more terms of the denominator, (column, factor) each: y = den + Σ factor · column (F_alpha@k global)
    den_terms: tuple[tuple[str, float], ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        """Every per-user column the metric reads."""
        return (self.num, self.den, *(c for c, _ in self.den_terms))

    def num_expr(self, quote: Callable[[str], str], prefix: str = "") -> str:
        """The per-user numerator as a SQL expression over the columns (each ``prefix + name``, quoted by
        ``quote``): the column, or the column capped (null stays null: a CUPED covariate without pre-period)."""
        num = quote(prefix + self.num)
        return num if self.num_cap is None else f"if({num} IS NULL, NULL, least({num}, {float(self.num_cap)!r}D))"

    def den_expr(self, quote: Callable[[str], str], prefix: str = "") -> str:
        """The per-user denominator (before ``den_factor``) as a SQL expression, as :meth:`num_expr`."""
        terms = [quote(prefix + self.den)] + [f"{float(f)!r}D * {quote(prefix + c)}" for c, f in self.den_terms]
        return terms[0] if len(terms) == 1 else "(" + " + ".join(terms) + ")"


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


def parse_metric(name: str, click_cap: int = 10) -> MetricSpec:
    """A metric key (:func:`recsys_spark.registry.parse_key`: ``ndcg@10_user_avg``) -> its :class:`MetricSpec`.

    ``click_cap``: ``metrics.click_cap``, the cap of ``capped_ctr``'s per-user clicks (over the analysed days: a
    user's clicked exposures summed over them, then capped).  ``f{alpha}@k_global`` = Σ H / Σ (a² / (1 + a²) Rel
    + k / (1 + a²) L), written y = L + (a² / k) Rel with ``den_factor`` k / (1 + a²) (docs/metrics.md, "F-scores
    and thresholds").  Raises ValueError naming the metric when the key is malformed or the metric has no per-user
    form.
    """
    metric, k, agg = parse_key(name)
    if agg == "user_avg" and is_composite(metric):  # the user's composite, averaged over its days with one
        return MetricSpec(name, metric, k, agg, "mean", composite.sum_column(metric), composite.units_column(metric))
    if agg == "user_avg" and survey_metric(metric) is not None:  # the user's mean score over its responses
        return MetricSpec(name, metric, k, agg, "mean", *survey_columns(metric))
    alpha = _f_alpha(metric)
    if alpha is not None and agg == "global" and k is not None:
        a2 = alpha * alpha  # y = L + (a² / k) Rel, scaled by k / (1 + a²): the factor applies to all of y
        terms = (("relevant", a2 / k),)
        return MetricSpec(
            name, metric, k, agg, "ratio", f"hits_at_{k}", "lists_ranked", k / (1.0 + a2), den_terms=terms
        )
    if metric == "capped_ctr" and agg == "global":
        return MetricSpec(name, metric, k, agg, "ratio", "clicked", "exposures", num_cap=float(click_cap))
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
    raise ValueError(
        f"metric {name!r} has no per-user form to test (pooled AUC, Gini, diversity, click concentration, "
        "F_alpha@k user_avg... have none)"
    )


def _f_alpha(metric: str) -> float | None:
    """The alpha of an F-score metric name (``f1``: 1.0, ``f0.5``: 0.5), None for another metric."""
    return float(metric[1:]) if f_score(metric) is not None else None
