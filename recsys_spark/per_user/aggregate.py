"""From the per-user table to the long ``metrics`` table (one pass, one small collect).

Aggregations (docs/metrics.md, "Aggregations"):

* ``user_avg``: mean over users that have the metric; ``se`` = sample std / sqrt(n);
* ``list_avg``: mean over lists with a relevant item (user means weighted by
  the user's ``n_lists_ranked``);
* ``impression_weighted`` (AUC): user AUCs weighted by the user's exposures;
* ``global``: AUC of all exposures pooled (see :mod:`pooled_auc`);
  precision@k = sum hits@k / (k * lists); recall@k = sum hits@k / sum R.

Every row carries ``se``, ``ci_low``, ``ci_high`` and ``ci_method`` at level
``stats.confidence`` (docs/statistics.md), the user as the unit: ``user_avg``
rows a Student t interval from the per-user moments (``t``); ``list_avg``,
``impression_weighted`` and the ``global`` precision/recall rows, ratios of
per-user sums, a delta-method interval (``delta``); the pooled ``global`` AUC
a Poisson bootstrap keyed by user when ``stats.bootstrap_replicates`` > 0
(``bootstrap``, :func:`bootstrap.auc_bootstrap`), else ``none``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession

from recsys_spark.kernels.auc import UPartial
from recsys_spark.kernels.estimates import Interval, MetricValue, bootstrap_interval, delta_interval, t_interval
from recsys_spark.kernels.fscores import global_f_stats
from recsys_spark.kernels.moments import Moments, merge_by_slice, user_table_moments
from recsys_spark.kernels.sums import MeanStats, RatioStats
from recsys_spark.registry import LIST_METRICS, f_score_name, metric_name
from recsys_spark.schema import METRICS_DDL, SLICE


@dataclass(frozen=True)
class MetricRow(MetricValue):
    """One ``metrics`` row: the metric's value in a slice (:class:`MetricValue`), then its interval."""

    se: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_method: str = "none"
    #: the score cut-off of a threshold metric (``schema.METRICS_DDL``); None on every other row
    threshold: float | None = None

    def with_interval(self, interval: Interval) -> MetricRow:
        """This row with ``interval``'s se, bounds and method (its value is kept)."""
        return MetricRow(
            self.metric,
            self.k,
            self.aggregation,
            self.slice,
            self.value,
            self.n,
            interval.se,
            interval.ci_low,
            interval.ci_high,
            interval.method,
            self.threshold,
        )


def interval_row(
    metric: str, k: int | None, aggregation: str, slice_value: str, interval: Interval, n: int
) -> MetricRow:
    """A metrics row whose value, se and bounds come from ``interval``."""
    return MetricRow(
        metric,
        k,
        aggregation,
        slice_value,
        interval.value,
        n,
        interval.se,
        interval.ci_low,
        interval.ci_high,
        interval.method,
    )


def _list_metric_columns(ks: Sequence[int]) -> list[tuple[str, int | None]]:
    return [("mrr", None)] + [(m, k) for k in ks for m in LIST_METRICS]


def _totals_of(ks: Sequence[int], f_alphas: Sequence[float]):
    """mapInArrow function: per-user rows -> one :class:`Moments` per slice of the partition, as rows."""

    def totals(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        by_slice: dict[str, Moments] = {}
        for batch in batches:
            merge_by_slice(by_slice, user_table_moments(batch.to_pandas(), ks, f_alphas=f_alphas))
        context = TaskContext.get()
        assert context is not None, "runs inside a Spark task"
        partition = context.partitionId()
        rows = [(s, partition, *row) for s, m in by_slice.items() for row in m.to_rows()]
        types = (pa.string(), pa.int64(), pa.string(), pa.string(), pa.float64())
        columns = zip(*rows, strict=True) if rows else ([],) * len(types)
        yield pa.RecordBatch.from_arrays(
            [pa.array(list(c), type=t) for c, t in zip(columns, types, strict=True)],
            names=[SLICE, "partial", "part", "name", "value"],
        )

    return totals


def slice_moments(users: DataFrame, ks: Sequence[int], f_alphas: Sequence[float] = (1.0,)) -> dict[str, Moments]:
    """{slice: Moments} of a per-user table: one pass, partials merged on the driver.

    Not a ``groupBy(slice).agg``: with one expression per moment and metric, its planning and code
    generation cost more than the pass (docs/performance.md).
    """
    schema = f"{SLICE} string, partial long, part string, name string, value double"
    parts: dict[str, dict[int, list]] = {}
    for row in users.mapInArrow(_totals_of(ks, f_alphas), schema).collect():
        parts.setdefault(row[SLICE], {}).setdefault(row["partial"], []).append((row["part"], row["name"], row["value"]))
    out: dict[str, Moments] = {}
    for slice_value, by_partition in parts.items():
        for rows in by_partition.values():
            merge_by_slice(out, {slice_value: Moments.from_rows(rows)})
    return out


def _totals(m: Moments, ks: Sequence[int]) -> dict[str, Any]:
    """Every sum and count the long table needs, by name."""
    # counts are ints, means and sums floats, absent means None: read by name right below
    agg: dict[str, Any] = {
        "users": int(m.sums["users"]),
        "lists": int(m.sums["n_lists"]),
        "lists_ranked": int(m.sums["n_lists_ranked"]),
        "relevant": int(m.sums["n_relevant"]),
        "exposures": int(m.sums["n_exposures"]),
        "users_without_ranked_list": int(m.sums["users_without_ranked_list"]),
        "auc__wsum": m.wsum["auc"] if m.n["auc"] else None,
        "auc__w": m.w["auc"] if m.n["auc"] else None,
    }
    for name in m.n:
        agg[f"{name}__mean"] = m.mean[name] if m.n[name] else None
        agg[f"{name}__n"] = int(m.n[name])
        agg[f"{name}__sd"] = m.sd(name)
        agg[f"{name}__lsum"] = m.wsum[name] if m.n[name] else None
    for k in ks:
        agg[f"hits_{k}"] = int(m.sums[metric_name("hits", k)])
    return agg


def _t(m: Moments, col: str, confidence: float) -> Interval:
    """Student t interval of the mean over users of ``col`` (users without a value left out)."""
    n = m.n.get(col, 0.0)
    interval = t_interval(MeanStats.from_moments(n, m.mean.get(col, 0.0), m.m2.get(col, 0.0)), confidence)
    # the value is the merged mean itself (n * mean / n may differ from it in the last bit)
    return dataclasses.replace(interval, value=m.mean[col]) if n else interval


def weighted_ratio_stats(m: Moments, col: str) -> RatioStats:
    """Σ(x w) / Σw as a ratio of per-user sums: x w the numerator, w the denominator, over users with x."""
    return RatioStats(
        m.n.get(col, 0.0),
        m.wsum.get(col, 0.0),
        m.w.get(col, 0.0),
        m.wsq.get(col, 0.0),
        m.w2.get(col, 0.0),
        m.xw2.get(col, 0.0),
    )


def _weighted(m: Moments, col: str, confidence: float) -> Interval:
    return delta_interval(weighted_ratio_stats(m, col), confidence)


def _sum_ratio(m: Moments, num: str, den: str, scale: float = 1.0) -> RatioStats:
    """Σ num / (scale Σ den) over every user of the slice, from the plain sums and their products."""
    s = m.sums
    return RatioStats(
        s["users"],
        s[num],
        scale * s[den],
        s[f"{num}*{num}"],
        scale * scale * s[f"{den}*{den}"],
        scale * s[f"{num}*{den}"],
    )


def aggregate_users(
    users: DataFrame | Mapping[str, Moments],
    ks: Sequence[int],
    pooled: Mapping[str, UPartial],
    confidence: float = 0.95,
    auc_replicates: Mapping[str, np.ndarray] | None = None,
    composites: Sequence[str] = (),
    f_alphas: Sequence[float] = (1.0,),
) -> tuple[list[MetricRow], dict]:
    """(metric rows, per-slice counts) from the per-user table (or its {slice: Moments}) and the pooled AUC.

    ``auc_replicates``: {slice: pooled AUC per bootstrap replicate} (:func:`bootstrap.auc_bootstrap`),
    the interval of the ``global`` AUC row; without it that row has none.  ``composites``: the names of the
    composite metrics the moments carry (:mod:`recsys_spark.kernels.composite`), each a ``user_avg`` row with
    its t interval (none in a slice where no user has one: no row rather than a zero).  ``f_alphas``: the
    F-scores written at each k (:func:`f_score_rows`, from the moments).

    Rows come slice by slice in sorted order: the moments arrive in whatever order the tasks finished.
    """
    rows: list[MetricRow] = []
    counts: dict[str, dict[str, int]] = {}
    moments = slice_moments(users, ks, f_alphas) if isinstance(users, DataFrame) else users
    for s, agg in ((s, _totals(moments[s], ks)) for s in sorted(moments)):
        counts[s] = {
            "users": agg["users"],
            "users_with_auc": agg["auc__n"],
            "users_without_auc": agg["users"] - agg["auc__n"],
            "users_without_relevant_list": agg["users_without_ranked_list"],
            "lists": agg["lists"] or 0,
            "lists_with_relevant": agg["lists_ranked"] or 0,
            "lists_without_relevant": (agg["lists"] or 0) - (agg["lists_ranked"] or 0),
        }
        part = pooled.get(s)
        if part is not None:
            value = part.auc
            row = MetricRow(
                "auc", None, "global", s, None if math.isnan(value) else value, int(part.n_pos + part.n_neg)
            )
            if auc_replicates is not None and s in auc_replicates and row.value is not None:
                row = row.with_interval(bootstrap_interval(row.value, auc_replicates[s], confidence))
            rows.append(row)
        m = moments[s]
        n_auc = agg["auc__n"]
        rows.append(interval_row("auc", None, "user_avg", s, _t(m, "auc", confidence), n_auc))
        rows.append(
            interval_row(
                "auc", None, "impression_weighted", s, _weighted(m, "auc", confidence), int(agg["auc__w"] or 0)
            )
        )
        for metric, k in _list_metric_columns(ks):
            col = metric_name(metric, k)
            rows.append(interval_row(metric, k, "user_avg", s, _t(m, col, confidence), agg[f"{col}__n"]))
            rows.append(interval_row(metric, k, "list_avg", s, _weighted(m, col, confidence), agg["lists_ranked"] or 0))
        for name in composites:
            if m.n.get(name, 0.0):
                rows.append(interval_row(name, None, "user_avg", s, _t(m, name, confidence), int(m.n[name])))
        for k in ks:
            lists = agg["lists_ranked"] or 0
            rows.append(
                interval_row(
                    "precision",
                    k,
                    "global",
                    s,
                    delta_interval(_sum_ratio(m, metric_name("hits", k), "n_lists_ranked", scale=k), confidence),
                    lists,
                )
            )
            rows.append(
                interval_row(
                    "recall",
                    k,
                    "global",
                    s,
                    delta_interval(_sum_ratio(m, metric_name("hits", k), "n_relevant"), confidence),
                    agg["relevant"] or 0,
                )
            )
        rows += f_score_rows(m, s, ks, f_alphas, confidence)
    return rows, counts


def f_score_rows(
    m: Moments, slice_value: str, ks: Sequence[int], f_alphas: Sequence[float], confidence: float
) -> list[MetricRow]:
    """F_alpha@k per alpha and k (docs/metrics.md, "F-scores and thresholds"): ``user_avg``, the mean over users
    of each user's F from its precision@k and recall@k (Student t); ``global``, F of the global precision@k and
    recall@k, the ratio Σ (1 + a²) H / Σ (a² Rel + k L) of per-user sums (delta method, the user as unit:
    :func:`kernels.fscores.global_f_stats`).  No ``global`` row when the slice has no ranked list."""
    rows: list[MetricRow] = []
    s = m.sums
    lists = int(s["n_lists_ranked"])
    for k in ks:
        hits = metric_name("hits", k)
        products = {
            "hh": s[f"{hits}*{hits}"],
            "rr": s["n_relevant*n_relevant"],
            "ll": s["n_lists_ranked*n_lists_ranked"],
            "hr": s[f"{hits}*n_relevant"],
            "hl": s[f"{hits}*n_lists_ranked"],
            "rl": s.get("n_relevant*n_lists_ranked", math.nan),
        }
        for alpha in f_alphas:
            name = f_score_name(alpha)
            col = metric_name(name, k)
            if col in m.n:
                rows.append(interval_row(name, k, "user_avg", slice_value, _t(m, col, confidence), int(m.n[col])))
            if lists > 0:
                stats = global_f_stats(alpha, k, s["users"], s[hits], s["n_relevant"], lists, products)
                rows.append(interval_row(name, k, "global", slice_value, delta_interval(stats, confidence), lists))
    return rows


def metric_tuples(rows: Iterable[MetricRow]) -> list[tuple]:
    """The long metrics table's rows, in :data:`schema.METRICS_DDL`'s column order."""
    return [
        (r.metric, r.k, r.aggregation, r.slice, r.value, r.n, r.se, r.ci_low, r.ci_high, r.ci_method, r.threshold)
        for r in rows
    ]


def metrics_frame(spark: SparkSession, rows: Iterable[MetricRow]) -> DataFrame:
    """The long metrics table as a (small) DataFrame."""
    return spark.createDataFrame(metric_tuples(rows), METRICS_DDL)
