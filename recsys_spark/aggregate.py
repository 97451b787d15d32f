"""From the per-user table to the long ``metrics`` table (one groupBy, one small collect).

Aggregations (README, "Metrics"):

* ``user_avg``: mean over users that have the metric; ``se`` = sample std / sqrt(n);
* ``list_avg``: mean over lists with a relevant item (user means weighted by
  the user's ``n_lists_ranked``);
* ``impression_weighted`` (AUC): user AUCs weighted by the user's exposures;
* ``global``: AUC of all exposures pooled (see :mod:`pooled_auc`);
  precision@k = sum hits@k / (k * lists); recall@k = sum hits@k / sum R.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.kernels.auc import UPartial
from recsys_spark.kernels.users import LIST_METRICS, metric_column
from recsys_spark.schema import SLICE

METRICS_SCHEMA = ("metric string, k int, aggregation string, slice string, "
                  "value double, n long, se double")


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


def _aggregates(ks: Sequence[int]) -> list[Column]:
    """Every sum and count the long table needs, as one list of aggregate expressions."""
    n_ranked = F.col("n_lists_ranked")
    exprs: list[Column] = [
        F.count(F.lit(1)).alias("users"),
        F.sum("n_lists").alias("lists"),
        F.sum(n_ranked).alias("lists_ranked"),
        F.sum("n_relevant").alias("relevant"),
        F.sum("n_exposures").alias("exposures"),
        F.sum(F.when(n_ranked == 0, 1).otherwise(0)).alias("users_without_ranked_list"),
        F.avg("auc").alias("auc__mean"),
        F.count("auc").alias("auc__n"),
        F.stddev_samp("auc").alias("auc__sd"),
        F.sum(F.col("auc") * F.col("n_exposures")).alias("auc__wsum"),
        F.sum(F.when(F.col("auc").isNotNull(), F.col("n_exposures"))).alias("auc__w"),
    ]
    for metric, k in _list_metric_columns(ks):
        col = metric_column(metric, k)
        exprs += [
            F.avg(col).alias(f"{col}__mean"),
            F.count(col).alias(f"{col}__n"),
            F.stddev_samp(col).alias(f"{col}__sd"),
            F.sum(F.col(col) * n_ranked).alias(f"{col}__lsum"),
        ]
    exprs += [F.sum(metric_column("hits", k)).alias(f"hits_{k}") for k in ks]
    return exprs


def _se(sd: float | None, n: int) -> float | None:
    return sd / math.sqrt(n) if sd is not None and n > 1 else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def aggregate_users(users: DataFrame, ks: Sequence[int], pooled: Mapping[str, UPartial]) -> tuple[list[MetricRow], dict]:
    """(metric rows, per-slice counts) from the per-user table and the pooled AUC partials."""
    rows: list[MetricRow] = []
    counts: dict[str, dict[str, int]] = {}
    for agg in users.groupBy(SLICE).agg(*_aggregates(ks)).collect():
        s = agg[SLICE]
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
            col = metric_column(metric, k)
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
    return spark.createDataFrame(data, METRICS_SCHEMA)
