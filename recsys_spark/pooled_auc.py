"""Exact AUC of all exposures pooled, per slice, without collecting rows to the driver.

1. ``groupBy(slice, score)``: one row per distinct score with its positive and
   negative counts (map-side combined, so few distinct scores cost little);
2. range-partition and sort that histogram by (slice, score);
3. each partition reduces its sorted part to a Mann-Whitney partial per slice
   (:func:`kernels.auc.u_from_histogram`);
4. the driver collects one partial per (partition, slice) and merges them in
   score order (:func:`kernels.auc.merge_u`).
Ties in score count 1/2, as in the per-user AUC.
"""

from __future__ import annotations

from typing import Iterator

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels.auc import UPartial, merge_u, u_from_histogram
from recsys_spark.schema import RELEVANCE, SCORE, SLICE

_PARTIAL_SCHEMA = "slice string, first_score double, u double, n_pos double, n_neg double"


def _partials(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    parts: dict[str, list[tuple[float, UPartial]]] = {}
    for batch in batches:
        for slice_value, group in batch.groupby(SLICE, sort=False):
            group = group.sort_values(SCORE, kind="stable")
            part = u_from_histogram(group["pos"].to_numpy(), group["neg"].to_numpy())
            parts.setdefault(slice_value, []).append((float(group[SCORE].iloc[0]), part))
    rows = []
    for slice_value, items in parts.items():
        items.sort(key=lambda item: item[0])
        merged = merge_u(part for _, part in items)
        rows.append((slice_value, items[0][0], merged.u, merged.n_pos, merged.n_neg))
    yield pd.DataFrame(rows, columns=["slice", "first_score", "u", "n_pos", "n_neg"])


def pooled_auc(ranked: DataFrame) -> dict[str, UPartial]:
    """{slice: UPartial} over every exposure of the slice (``.auc`` gives the value)."""
    positive = (F.col(RELEVANCE) > 0).cast("long")
    hist = (ranked
            .groupBy(SLICE, SCORE)
            .agg(F.sum(positive).alias("pos"), F.sum(1 - positive).alias("neg"))
            .repartitionByRange(SLICE, SCORE)
            .sortWithinPartitions(SLICE, SCORE))
    rows = hist.mapInPandas(_partials, _PARTIAL_SCHEMA).collect()
    by_slice: dict[str, list] = {}
    for row in sorted(rows, key=lambda r: (r["slice"], r["first_score"])):
        by_slice.setdefault(row["slice"], []).append(UPartial(row["u"], row["n_pos"], row["n_neg"]))
    return {s: merge_u(parts) for s, parts in by_slice.items()}
