"""Pooled ROC and precision-recall curves per key, with the exact pooled AUC, from one sorted stream.

The same plan as :func:`pooled_auc.partials_frame` (rows hashed by (key, score bin), sorted by score, streamed
through Python in Arrow batches), but each (key, bin) emits its run-length histogram instead of one
Mann-Whitney partial: one row per distinct score with its positives and negatives, the counts of the bin's
rows below it (``below_pos``, ``below_neg``) and the counts of the next lower distinct score of the bin
(``lower_pos``, ``lower_neg``; null for the bin's lowest).  That frame (one row per distinct score, never
collected) is persisted, and then:

1. one aggregation gives each (key, bin) its partial ``U = sum pos * (below_neg + neg / 2)``, its class
   counts, its number of distinct scores and its highest score's counts: at most ``BINS`` rows per key to the
   driver, merged in bin order into the exact AUC (:func:`kernels.auc.merge_u`), as :func:`pooled_auc.exact_auc`;
2. a key with fewer than ``bound`` distinct scores (``metrics.curve_points``) sends its histogram to the driver
   (at most ``bound`` rows), where :func:`kernels.curves.curves_from_histogram` draws the exact curves;
3. a key with more (``D + 1 > bound``): each distinct score gets its cumulative counts in Spark
   (``TP = P - positives of the lower bins - below_pos``) from a broadcast table of per-bin offsets, whether
   it is a ROC vertex (its step differs from the next lower score's), and its cell of ``FPR + TPR``
   (:func:`kernels.curves.cell_of`); one aggregation keeps the highest and lowest score of each cell, among
   every distinct score (PR) and among the vertices (ROC): at most ``bound`` points per key to the driver.

Nothing proportional to rows reaches the driver: at most ``BINS`` partials and ``bound`` points per key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels import curves as K
from recsys_spark.kernels.auc import UPartial, merge_u, sorted_histogram
from recsys_spark.per_user.pooled_auc import _BIN, _POSITIVE, _explode, _key_codes, score_bin
from recsys_spark.schema import RELEVANCE, SCORE, SLICE, SLICE_KEYS

_COUNTS = ("pos", "neg", "below_pos", "below_neg", "lower_pos", "lower_neg")


@dataclass
class PooledCurves:
    """The exact pooled AUC and both curves per key, and notes (a key without a curve, a subset)."""

    auc: dict[tuple, UPartial]
    curves: dict[tuple, K.Curves]
    notes: list[str] = field(default_factory=list)


def _runs(keys: Sequence[str], array_key: str | None):
    """mapInArrow function: rows sorted by score -> one row per (key, bin, distinct score) with its counts."""

    def runs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # per key: [bin, below_pos, below_neg, lower (pos, neg) or None, pending last run (score, pos, neg)]
        state: dict[tuple, list] = {}
        out: list[tuple] = []

        def emit(key: tuple, entry: list, values: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> None:
            """Completed runs of the bin, ascending: their below and lower counts from the bin's state."""
            if len(values) == 0:
                return
            below_pos = entry[1] + np.cumsum(pos) - pos
            below_neg = entry[2] + np.cumsum(neg) - neg
            lower = entry[3]
            lower_pos = np.r_[np.nan if lower is None else lower[0], pos[:-1]]
            lower_neg = np.r_[np.nan if lower is None else lower[1], neg[:-1]]
            out.append((key, entry[0], values, pos, neg, below_pos, below_neg, lower_pos, lower_neg))
            entry[1] += float(pos.sum())
            entry[2] += float(neg.sum())
            entry[3] = (float(pos[-1]), float(neg[-1]))

        def flush(key: tuple, entry: list) -> None:
            pending = entry[4]
            if pending is not None:
                emit(key, entry, np.array([pending[0]]), np.array([pending[1]]), np.array([pending[2]]))

        for batch in batches:
            if array_key is not None:
                batch = _explode(batch, array_key)
            if batch.num_rows == 0:
                continue
            scores = batch.column(SCORE).to_numpy(zero_copy_only=False)
            positive = batch.column(_POSITIVE).to_numpy(zero_copy_only=False)
            bins = batch.column(_BIN).to_numpy(zero_copy_only=False)
            codes, names = _key_codes(batch, keys)
            for code, key in enumerate(names):
                at = np.flatnonzero(codes == code) if len(names) > 1 else slice(None)
                s, y, b = scores[at], positive[at], bins[at]
                starts = np.r_[np.flatnonzero(np.r_[True, b[1:] != b[:-1]]), len(s)]
                for lo, hi in zip(starts[:-1], starts[1:], strict=True):
                    entry = state.get(key)
                    if entry is None or entry[0] != b[lo]:
                        if entry is not None:
                            flush(key, entry)
                        entry = state[key] = [int(b[lo]), 0.0, 0.0, None, None]
                    values, pos, neg = sorted_histogram(s[lo:hi], y[lo:hi])
                    pending = entry[4]
                    if pending is not None:
                        if values[0] == pending[0]:
                            pos[0] += pending[1]
                            neg[0] += pending[2]
                        else:
                            values = np.r_[pending[0], values]
                            pos, neg = np.r_[pending[1], pos], np.r_[pending[2], neg]
                    entry[4] = (float(values[-1]), float(pos[-1]), float(neg[-1]))
                    emit(key, entry, values[:-1], pos[:-1], neg[:-1])
            if out:
                yield _batch(out, keys)
                out.clear()
        for key, entry in state.items():
            flush(key, entry)
        yield _batch(out, keys)

    return runs


def _batch(parts: list[tuple], keys: Sequence[str]) -> pa.RecordBatch:
    """The emitted runs as one Arrow batch of :func:`histogram_frame`'s schema."""
    arrays: list[Any] = []
    for i in range(len(keys)):
        repeated = [pa.repeat(pa.scalar(p[0][i], pa.string()), len(p[2])) for p in parts]
        arrays.append(pa.concat_arrays(repeated) if repeated else pa.array([], pa.string()))
    bins = [np.full(len(p[2]), p[1], np.int32) for p in parts]
    arrays.append(pa.array(np.concatenate(bins) if bins else np.zeros(0, np.int32), pa.int32()))
    for j in range(2, 9):
        column = np.concatenate([p[j] for p in parts]) if parts else np.zeros(0)
        arrays.append(pa.array(column, type=pa.float64(), from_pandas=True))  # NaN -> null (lower of a bin's first)
    return pa.RecordBatch.from_arrays(arrays, names=[*keys, _BIN, SCORE, *_COUNTS])


def histogram_frame(rows: DataFrame, keys: Sequence[str], array_key: str | None = None) -> DataFrame:
    """One row per (key, score bin, distinct score): ``keys..., _bin, score, pos, neg, below_pos, below_neg,
    lower_pos, lower_neg`` (module docstring).  ``rows`` as :func:`pooled_auc.exact_auc` takes them."""
    schema = ", ".join(f"`{k}` string" for k in keys) + f", {_BIN} int, {SCORE} double, "
    schema += ", ".join(f"{c} double" for c in _COUNTS)
    positive = (F.col(RELEVANCE) > 0).alias(_POSITIVE)
    hashed = [k for k in keys if k != array_key]
    return (
        rows.select(*keys, score_bin().alias(_BIN), F.col(SCORE), positive)
        .repartition(*hashed, _BIN)
        .sortWithinPartitions(SCORE)
        .mapInArrow(_runs(tuple(keys), array_key), schema)
    )


@dataclass(frozen=True)
class _Bins:
    """One key's bins in ascending order, from the partials."""

    bins: list[int]
    partials: list[UPartial]
    distinct: int
    tops: list[tuple[float, float]]  # each bin's highest score's (pos, neg)

    @property
    def total(self) -> UPartial:
        return merge_u(self.partials)


def _bins_of(frame: DataFrame, keys: Sequence[str]) -> dict[tuple, _Bins]:
    """Step 1: one row per (key, bin) to the driver."""
    u = F.sum(F.col("pos") * (F.col("below_neg") + F.col("neg") / 2.0))
    # the bin's highest score's counts; min_by/max_by of doubles keep the aggregation hash-based (a struct's
    # min or max would make Spark sort the histogram rows)
    top_pos, top_neg = F.max_by(F.col("pos"), F.col(SCORE)), F.max_by(F.col("neg"), F.col(SCORE))
    rows = (
        frame.groupBy(*keys, _BIN)
        .agg(
            u.alias("u"),
            F.sum("pos").alias("n_pos"),
            F.sum("neg").alias("n_neg"),
            F.count("*").alias("n"),
            top_pos.alias("top_pos"),
            top_neg.alias("top_neg"),
        )
        .collect()
    )
    found: dict[tuple, _Bins] = {}
    for row in sorted(rows, key=lambda r: (tuple(r[k] for k in keys), r[_BIN])):
        key = tuple(row[k] for k in keys)
        entry = found.setdefault(key, _Bins([], [], 0, []))
        entry.bins.append(row[_BIN])
        entry.partials.append(UPartial(row["u"], row["n_pos"], row["n_neg"]))
        entry.tops.append((row["top_pos"], row["top_neg"]))
        found[key] = _Bins(entry.bins, entry.partials, entry.distinct + row["n"], entry.tops)
    return found


def _offsets(key: tuple, bins: _Bins) -> list[tuple]:
    """Per bin of a key: (key..., bin, TP and FP at the bin's lowest score, the next lower bin's highest score's
    (pos, neg) or nulls, P, N)."""
    total = bins.total
    rows = []
    pos_below = neg_below = 0.0
    lower: tuple[float | None, float | None] = (None, None)
    for b, part, top in zip(bins.bins, bins.partials, bins.tops, strict=True):
        rows.append((*key, b, total.n_pos - pos_below, total.n_neg - neg_below, *lower, total.n_pos, total.n_neg))
        pos_below += part.n_pos
        neg_below += part.n_neg
        lower = top
    return rows


def _exact(frame: DataFrame, keys: Sequence[str], small: list[tuple], bound: int) -> dict[tuple, K.Curves]:
    """Step 2: the histograms of keys with at most ``bound`` distinct scores, drawn on the driver."""
    if not small:
        return {}
    condition = F.lit(False)
    for key in small:
        match = F.lit(True)
        for name, value in zip(keys, key, strict=True):
            match = match & (F.col(name) == value)
        condition = condition | match
    rows = frame.where(condition).select(*keys, SCORE, "pos", "neg").collect()  # at most `bound` per key
    by_key: dict[tuple, list] = {}
    for row in rows:
        by_key.setdefault(tuple(row[k] for k in keys), []).append((row[SCORE], row["pos"], row["neg"]))
    found = {}
    for key, points in by_key.items():
        points.sort()
        values, pos, neg = (np.array(c, dtype=np.float64) for c in zip(*points, strict=True))
        drawn = K.curves_from_histogram(values, pos, neg, bound)
        if drawn is not None:
            found[key] = drawn
    return found


def _subset(frame: DataFrame, keys: Sequence[str], large: dict[tuple, _Bins], bound: int) -> dict[tuple, K.Curves]:
    """Step 3: the first and last point of each cell of the keys with more than ``bound`` distinct scores."""
    if not large:
        return {}
    spark = frame.sparkSession
    names = [*keys, _BIN, "tp_base", "fp_base", "top_pos", "top_neg", "n_pos", "n_neg"]
    offsets = spark.createDataFrame(
        [row for key, bins in large.items() for row in _offsets(key, bins)],
        ", ".join(f"`{k}` string" for k in keys) + f", {_BIN} int, " + ", ".join(f"{n} double" for n in names[-6:]),
    )
    c = K.cells(bound)
    tp = F.col("tp_base") - F.col("below_pos")
    fp = F.col("fp_base") - F.col("below_neg")
    lower_pos = F.coalesce(F.col("lower_pos"), F.col("top_pos"))
    lower_neg = F.coalesce(F.col("lower_neg"), F.col("top_neg"))
    first = (tp == F.col("pos")) & (fp == F.col("neg"))  # nothing scored above: the curve's first point
    vertex = lower_pos.isNull() | first | (F.col("pos") != lower_pos) | (F.col("neg") != lower_neg)
    # the same expression, in the same order, as kernels.curves.cell_of
    cell = F.least(F.floor((fp / F.col("n_neg") + tp / F.col("n_pos")) / F.lit(2.0 / c)), F.lit(c - 1))
    ends = []  # each cell's lowest and highest score with their counts: among every score, among the vertices
    for among, when in (("all", F.lit(True)), ("vertex", vertex)):
        score = F.when(when, F.col(SCORE))
        for end, by in (("lo", F.min_by), ("hi", F.max_by)):
            ends.append(by(score, score).alias(f"{among}_{end}"))
            # a null ordering (not among them) is skipped by min_by and max_by
            ends += [by(value, score).alias(f"{among}_{end}_{name}") for name, value in (("tp", tp), ("fp", fp))]
    rows = (
        frame.join(F.broadcast(offsets), [*keys, _BIN], "inner")
        .groupBy(*keys, cell.alias("cell"))
        .agg(*ends, F.count("*").alias("points"), F.count(F.when(vertex, 1)).alias("vertices"))
        .collect()
    )  # at most C rows per key, 4 points each
    by_key: dict[tuple, tuple[set, set, list]] = {}
    for row in rows:
        pr, roc, sizes = by_key.setdefault(tuple(row[k] for k in keys), (set(), set(), [0, 0]))
        for among, target in (("all", pr), ("vertex", roc)):
            for end in ("lo", "hi"):
                name = f"{among}_{end}"
                if row[name] is not None:
                    target.add((row[name], row[f"{name}_tp"], row[f"{name}_fp"]))
        sizes[0] += row["vertices"]
        sizes[1] += row["points"]
    found = {}
    for key, (pr, roc, sizes) in by_key.items():
        total = large[key].total
        found[key] = K.curves_of(
            _descending(roc), _descending(pr), total.n_pos, total.n_neg, (sizes[0] + 1, sizes[1] + 1)
        )
    return found


def _descending(points: set) -> K.Points:
    """(scores, TP, FP) of ``(score, tp, fp)`` points, descending score."""
    ordered = np.array(sorted(points, reverse=True), dtype=np.float64).reshape(-1, 3)
    return ordered[:, 0], ordered[:, 1], ordered[:, 2]


def pooled_curves(
    rows: DataFrame, keys: Sequence[str], bound: int, array_key: str | None = None, what: str = "curves"
) -> PooledCurves:
    """The exact AUC and both curves of each key's rows (``rows`` as :func:`pooled_auc.exact_auc` takes them),
    exact when a key has at most ``bound`` distinct scores, else the subset of :mod:`kernels.curves`."""
    keys = tuple(keys)
    frame = histogram_frame(rows, keys, array_key).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        bins = _bins_of(frame, keys)
        notes = []
        two_classes = {k: b for k, b in bins.items() if b.total.n_pos > 0 and b.total.n_neg > 0}
        for key in sorted(set(bins) - set(two_classes)):
            only = "positives" if bins[key].total.n_neg == 0 else "negatives"
            notes.append(f"{what}: no roc_curve or pr_curve for {_label(key)}: its scored exposures are all {only}")
        small = sorted(k for k, b in two_classes.items() if b.distinct + 1 <= bound)
        large = {k: b for k, b in two_classes.items() if b.distinct + 1 > bound}
        drawn = {**_exact(frame, keys, small, bound), **_subset(frame, keys, large, bound)}
    finally:
        frame.unpersist()
    for key in sorted(large):
        c = drawn[key]
        notes.append(
            f"{what}: {_label(key)} has {bins[key].distinct} distinct scores (metrics.curve_points {bound}): "
            f"roc_curve keeps {len(c.roc)} of its {c.exact_roc_points} vertices, pr_curve {len(c.pr)} of "
            f"{c.exact_pr_points} points (area {K.trapezoid_area(c.roc.x, c.roc.y):.6f}, exact AUC "
            f"{bins[key].total.auc:.6f}, at most {K.area_bound(bound):.2g} apart)"
        )
    return PooledCurves({k: b.total for k, b in bins.items()}, drawn, notes)


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
