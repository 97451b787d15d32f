"""From the per-user table to the long ``metrics`` table (one pass, one small collect).

Aggregations (docs/metrics.md, "Aggregations"):

* ``user_avg``: mean over users that have the metric; ``se`` = sample std / sqrt(n);
* ``list_avg``: mean over lists with a relevant item (user means weighted by
  the user's ``n_lists_ranked``);
* ``impression_weighted`` (AUC): user AUCs weighted by the user's exposures;
* ``global``: AUC of all exposures pooled (see :mod:`pooled_auc`);
  precision@k = sum hits@k / (k * lists); recall@k = sum hits@k / sum R.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession

from recsys_spark.kernels.auc import UPartial
from recsys_spark.kernels.moments import Moments, merge_by_slice, user_table_moments
from recsys_spark.schema import LIST_METRICS, METRICS_DDL, SLICE, metric_name


@dataclass(frozen=True)
class MetricRow:
    metric: str
    k: int | None
    aggregation: str
    slice: str
    value: float | None
    n: int
    se: float | None = None


def _list_metric_columns(ks: Sequence[int]) -> list[tuple[str, int | None]]:
    return [("mrr", None)] + [(m, k) for k in ks for m in LIST_METRICS]


def _totals_of(ks: Sequence[int]):
    """mapInArrow function: per-user rows -> one :class:`Moments` per slice of the partition, as rows."""

    def totals(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        by_slice: dict[str, Moments] = {}
        for batch in batches:
            merge_by_slice(by_slice, user_table_moments(batch.to_pandas(), ks))
        context = TaskContext.get()
        assert context is not None, "runs inside a Spark task"
        partition = context.partitionId()
        rows = [(s, partition, *row) for s, m in by_slice.items() for row in m.to_rows()]
        types = (pa.string(), pa.int64(), pa.string(), pa.string(), pa.float64())
        columns = zip(*rows, strict=True) if rows else ([],) * len(types)
        yield pa.RecordBatch.from_arrays([pa.array(list(c), type=t) for c, t in zip(columns, types, strict=True)],
                                         names=[SLICE, "partial", "part", "name", "value"])

    return totals


def slice_moments(users: DataFrame, ks: Sequence[int]) -> dict[str, Moments]:
    """{slice: Moments} of a per-user table: one pass, partials merged on the driver.

    Not a ``groupBy(slice).agg``: with one expression per moment and metric, its planning and code
    generation cost more than the pass (docs/performance.md).
    """
    schema = f"{SLICE} string, partial long, part string, name string, value double"
    parts: dict[str, dict[int, list]] = {}
    for row in users.mapInArrow(_totals_of(ks), schema).collect():
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
        "users": int(m.sums["users"]), "lists": int(m.sums["n_lists"]),
        "lists_ranked": int(m.sums["n_lists_ranked"]), "relevant": int(m.sums["n_relevant"]),
        "exposures": int(m.sums["n_exposures"]),
        "users_without_ranked_list": int(m.sums["users_without_ranked_list"]),
        "auc__wsum": m.wsum["auc"] if m.n["auc"] else None, "auc__w": m.w["auc"] if m.n["auc"] else None,
    }
    for name in m.n:
        agg[f"{name}__mean"] = m.mean[name] if m.n[name] else None
        agg[f"{name}__n"] = int(m.n[name])
        agg[f"{name}__sd"] = m.sd(name)
        agg[f"{name}__lsum"] = m.wsum[name] if m.n[name] else None
    for k in ks:
        agg[f"hits_{k}"] = int(m.sums[metric_name("hits", k)])
    return agg


def _se(sd: float | None, n: int) -> float | None:
    return sd / math.sqrt(n) if sd is not None and n > 1 else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def aggregate_users(users: DataFrame | Mapping[str, Moments], ks: Sequence[int],
                    pooled: Mapping[str, UPartial]) -> tuple[list[MetricRow], dict]:
    """(metric rows, per-slice counts) from the per-user table (or its {slice: Moments}) and the pooled AUC.

    Rows come slice by slice in sorted order: the moments arrive in whatever order the tasks finished.
    """
    rows: list[MetricRow] = []
    counts: dict[str, dict[str, int]] = {}
    moments = slice_moments(users, ks) if isinstance(users, DataFrame) else users
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
            rows.append(MetricRow("auc", None, "global", s, None if math.isnan(value) else value,
                                  int(part.n_pos + part.n_neg)))
        n_auc = agg["auc__n"]
        rows.append(MetricRow("auc", None, "user_avg", s, agg["auc__mean"], n_auc, _se(agg["auc__sd"], n_auc)))
        rows.append(MetricRow("auc", None, "impression_weighted", s, _ratio(agg["auc__wsum"], agg["auc__w"]),
                              int(agg["auc__w"] or 0)))
        for metric, k in _list_metric_columns(ks):
            col = metric_name(metric, k)
            n = agg[f"{col}__n"]
            rows.append(MetricRow(metric, k, "user_avg", s, agg[f"{col}__mean"], n, _se(agg[f"{col}__sd"], n)))
            rows.append(MetricRow(metric, k, "list_avg", s, _ratio(agg[f"{col}__lsum"], agg["lists_ranked"]),
                                  agg["lists_ranked"] or 0))
        for k in ks:
            hits = agg[f"hits_{k}"]
            lists = agg["lists_ranked"] or 0
            rows.append(MetricRow("precision", k, "global", s, _ratio(hits, k * lists), lists))
            rows.append(MetricRow("recall", k, "global", s, _ratio(hits, agg["relevant"]), agg["relevant"] or 0))
    return rows, counts


def metrics_frame(spark: SparkSession, rows: Iterable[MetricRow]) -> DataFrame:
    """The long metrics table as a (small) DataFrame."""
    data = [(r.metric, r.k, r.aggregation, r.slice, r.value, r.n, r.se) for r in rows]
    return spark.createDataFrame(data, METRICS_DDL)
