"""Pooled ROC and precision-recall curves per key, with the exact pooled AUC, from the AUC's one sorted stream.

1. a cheap count first: each key's class totals ``P`` and ``N`` (one aggregation, one row per key);
2. the pooled AUC's plan (:func:`pooled_auc.sorted_rows`: rows hashed by (key, score bin), sorted by score) and
   its one streaming loop (:func:`pooled_auc.bin_runs`): each (key, bin)'s distinct scores go through a
   :class:`kernels.curve_summary.BinSummary`, which keeps the bin's Mann-Whitney partial and a bounded summary
   of its histogram (the first and last score of each local cell of ``FPR + TPR``, among every score and among
   the sure ROC vertices; and, per key and partition, the first ``bound - 1`` scores whole, so that a key with
   at most ``bound - 1`` distinct scores arrives complete: a partition that streams more of a key drops them,
   since the key cannot fit);
3. the driver collects one row per (key, bin) and the kept scores (at most ``4 (C + B)`` per key, ``B`` bins,
   plus the whole ones: at most ``bound - 1`` per key and partition that streams no more than that of the key;
   nothing per row, nothing persisted, no aggregation in Spark), merges the partials in bin order into the
   exact AUC (:func:`kernels.auc.merge_u`, as :func:`pooled_auc.exact_auc`) and draws the curves
   (:func:`kernels.curve_summary.curves_from_summary`): exact when the key's distinct scores fit the bound,
   else the documented subset (docs/metrics.md, "Curves").

With ``metrics.curve_points = 0`` the day runs :func:`pooled_auc.exact_auc` alone: the same loop, partials only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels import curve_summary as CS
from recsys_spark.kernels import curves as K
from recsys_spark.kernels.auc import UPartial, merge_u
from recsys_spark.per_user.pooled_auc import _BIN, bin_runs, sorted_rows
from recsys_spark.schema import RELEVANCE, SLICE, SLICE_KEYS

#: the bin row's columns (null on a kept score's row), then a kept score's (null on the bin's row)
_BIN_COLUMNS = ("u", "n_pos", "n_neg", "runs", "vertices")
_ROLE = "role"  # -1 on the bin's row


@dataclass
class PooledCurves:
    """The exact pooled AUC and both curves per key, and notes (a key without a curve, a subset)."""

    auc: dict[tuple, UPartial]
    curves: dict[tuple, K.Curves]
    notes: list[str] = field(default_factory=list)


def class_totals(
    rows: DataFrame, keys: Sequence[str], array_key: str | None = None
) -> dict[tuple, tuple[float, float]]:
    """Step 1: {key: (P, N)}, positives (``relevance > 0``) and negatives of each key's rows."""
    columns = [F.explode(k).alias(k) if k == array_key else F.col(k) for k in keys]
    positive = F.when(F.col(RELEVANCE) > 0, 1).otherwise(0)
    found = (
        rows.select(*columns, positive.alias("_p"))
        .groupBy(*keys)
        .agg(F.sum("_p").alias("p"), F.count("*").alias("n"))
        .collect()
    )
    return {tuple(r[k] for k in keys): (float(r["p"]), float(r["n"] - r["p"])) for r in found}


def _summaries(keys: Sequence[str], array_key: str | None, totals: Mapping[tuple, tuple[float, float]], bound: int):
    """mapInArrow function: rows sorted by score -> per (key, bin) its row and its kept scores (step 2)."""

    def summaries(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        open_bins: dict[tuple, CS.BinSummary] = {}
        seen: dict[tuple, int] = {}  # per key: distinct scores this partition has streamed
        done: list[tuple[tuple, int, CS.BinSummary, np.ndarray]] = []
        for key, score_bin, values, pos, neg, last in bin_runs(batches, keys, array_key):
            summary = open_bins.get(key)
            if summary is None:
                summary = open_bins[key] = CS.BinSummary(*totals[key], bound)
            before = seen.get(key, 0)
            seen[key] = before + len(values)
            summary.add(values, pos, neg, whole=min(len(values), max(bound - 1 - before, 0)))
            if last:
                done.append((key, score_bin, summary, summary.finish()))
                del open_bins[key]
        # a key with more than bound - 1 distinct scores here has more in all: its whole scores are not needed
        past = {key for key, n in seen.items() if n > bound - 1}
        done = [(k, b, s, _summary_only(kept) if k in past else kept) for k, b, s, kept in done]
        yield _batch(done, keys)

    return summaries


def _summary_only(kept: np.ndarray) -> np.ndarray:
    """The kept rows without those kept only to be sent whole."""
    return kept[kept[:, -1] != CS.WHOLE]


def _batch(done: list[tuple[tuple, int, CS.BinSummary, np.ndarray]], keys: Sequence[str]) -> pa.RecordBatch:
    """Each bin's row (role -1) and its kept scores, as one Arrow batch of :func:`summary_frame`'s schema."""
    blocks, key_of, bin_of = [], [], []
    width = len(CS.FIELDS) + 1 + len(_BIN_COLUMNS)
    for key, score_bin, summary, kept in done:
        head = np.full((1, width), np.nan)
        head[0, len(CS.FIELDS)] = -1
        part = summary.partial
        head[0, len(CS.FIELDS) + 1 :] = (part.u, part.n_pos, part.n_neg, summary.runs, summary.vertices)
        rows = np.full((len(kept), width), np.nan)
        rows[:, : len(CS.FIELDS) + 1] = kept
        blocks += [head, rows]
        key_of += [key] * (1 + len(kept))
        bin_of += [score_bin] * (1 + len(kept))
    table = np.concatenate(blocks) if blocks else np.zeros((0, width))
    arrays: list[pa.Array] = [pa.array([k[i] for k in key_of], pa.string()) for i in range(len(keys))]
    arrays.append(pa.array(np.array(bin_of, dtype=np.int32), pa.int32()))
    for j in range(width):
        column = table[:, j]
        if j == len(CS.FIELDS):
            arrays.append(pa.array(column.astype(np.int32), pa.int32()))
        else:
            arrays.append(pa.array(column, type=pa.float64(), from_pandas=True))  # NaN -> null
    return pa.RecordBatch.from_arrays(arrays, names=[*keys, _BIN, *CS.FIELDS, _ROLE, *_BIN_COLUMNS])


def summary_frame(
    rows: DataFrame, keys: Sequence[str], totals: Mapping[tuple, tuple[float, float]], bound: int, array_key=None
) -> DataFrame:
    """Step 2's plan: ``keys..., _bin, score, below_pos, below_neg, pos, neg, role, u, n_pos, n_neg, runs,
    vertices``; ``rows`` as :func:`pooled_auc.exact_auc` takes them, ``totals`` from :func:`class_totals`."""
    schema = ", ".join(f"`{k}` string" for k in keys) + f", {_BIN} int, "
    schema += ", ".join(f"{c} double" for c in CS.FIELDS) + f", {_ROLE} int, "
    schema += ", ".join(f"{c} double" for c in _BIN_COLUMNS)
    stream = _summaries(tuple(keys), array_key, dict(totals), bound)
    return sorted_rows(rows, keys, array_key).mapInArrow(stream, schema)


def _key_summaries(table: pa.Table, keys: Sequence[str]) -> dict[tuple, tuple[UPartial, CS.KeySummary]]:
    """Step 3: each key's exact AUC and summaries from the collected rows."""
    data = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
    names = [tuple(v) for v in zip(*(table.column(k).to_pylist() for k in keys), strict=True)]
    found: dict[tuple, tuple[UPartial, CS.KeySummary]] = {}
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(names):
        groups.setdefault(key, []).append(i)
    for key, at in groups.items():
        index = np.array(at, dtype=np.int64)
        role = data[_ROLE][index]
        heads, kept = index[role < 0], index[role >= 0]
        heads = heads[np.argsort(data[_BIN][heads], kind="stable")]
        auc = merge_u(
            UPartial(float(u), float(p), float(n))
            for u, p, n in zip(*(data[c][heads] for c in _BIN_COLUMNS[:3]), strict=True)
        )
        fields = [data[c][kept] for c in CS.FIELDS]
        summary = CS.KeySummary(
            bins=data[_BIN][heads].astype(np.int64),
            bin_pos=data["n_pos"][heads],
            bin_neg=data["n_neg"][heads],
            bin_runs=data["runs"][heads],
            bin_vertices=data["vertices"][heads],
            row_bin=data[_BIN][kept].astype(np.int64),
            rows=np.column_stack([*fields, data[_ROLE][kept].astype(np.float64)]),
        )
        found[key] = (auc, summary)
    return found


def _to_arrow(frame: DataFrame) -> pa.Table:
    """A small frame on the driver as Arrow: ``toArrow`` (PySpark 4), else through pandas with the frame's own
    Arrow schema (PySpark 3.5, which has no public ``toArrow``)."""
    to_arrow = getattr(frame, "toArrow", None)
    if to_arrow is not None:
        return to_arrow()
    from pyspark.sql.pandas.types import to_arrow_schema

    return pa.Table.from_pandas(frame.toPandas(), schema=to_arrow_schema(frame.schema), preserve_index=False)


def pooled_curves(
    rows: DataFrame, keys: Sequence[str], bound: int, array_key: str | None = None, what: str = "curves"
) -> PooledCurves:
    """The exact AUC and both curves of each key's rows (``rows`` as :func:`pooled_auc.exact_auc` takes them),
    exact when a key has at most ``bound - 1`` distinct scores, else the subset of :mod:`kernels.curve_summary`."""
    keys = tuple(keys)
    totals = class_totals(rows, keys, array_key)
    collected = _to_arrow(summary_frame(rows, keys, totals, bound, array_key))
    found = _key_summaries(collected, keys)
    notes, subsets = [], []
    drawn: dict[tuple, K.Curves] = {}
    for key in sorted(found):
        auc, summary = found[key]
        c = CS.curves_from_summary(summary, bound)
        if c is None:
            only = "positives" if auc.n_neg == 0 else "negatives"
            notes.append(f"{what}: no roc_curve or pr_curve for {_label(key)}: its scored exposures are all {only}")
            continue
        drawn[key] = c
        if summary.distinct + 1 > bound:
            subsets.append(
                f"{what}: {_label(key)} has {summary.distinct} distinct scores (metrics.curve_points {bound}): "
                f"roc_curve keeps {len(c.roc)} of its {c.exact_roc_points} vertices, pr_curve {len(c.pr)} of "
                f"{c.exact_pr_points} points (area {K.trapezoid_area(c.roc.x, c.roc.y):.6f}, exact AUC "
                f"{auc.auc:.6f}, at most {K.area_bound(bound):.2g} apart)"
            )
    return PooledCurves({k: v[0] for k, v in found.items()}, drawn, notes + subsets)


def _label(key: tuple) -> str:
    return "slice " + "/".join(str(k) for k in key)


def daily_curves(ranked: DataFrame, bound: int) -> PooledCurves:
    """:func:`pooled_curves` per slice of the day's ranking input (``ranked`` as :func:`pooled_auc.pooled_auc`
    takes it), keyed by the slice name."""
    if SLICE_KEYS in ranked.columns:
        found = pooled_curves(ranked.withColumnRenamed(SLICE_KEYS, SLICE), (SLICE,), bound, array_key=SLICE)
    else:
        found = pooled_curves(ranked, (SLICE,), bound)
    return found


def curve_rows(curves: Mapping[tuple, K.Curves]) -> tuple[list[tuple], list[tuple]]:
    """Rows of ``roc_curve`` (slice, threshold, fpr, tpr) and ``pr_curve`` (slice, threshold, recall,
    precision) in curve order; a NaN threshold (the ends no score reaches) written as null."""
    roc: list[tuple] = []
    pr: list[tuple] = []
    for key in sorted(curves):
        c = curves[key]
        name = key[0]
        for target, curve in ((roc, c.roc), (pr, c.pr)):
            for t, x, y in zip(curve.threshold.tolist(), curve.x.tolist(), curve.y.tolist(), strict=True):
                target.append((name, None if np.isnan(t) else t, x, y))
    return roc, pr
