"""Exact AUC of many exposures pooled, per key, without collecting rows to the driver.

Used for the global AUC of each slice (key: slice) and for the AUC of users too
heavy for one Python call (key: slice, user; see :mod:`per_user`).

1. cut the score axis into ordered bins with a monotone map,
   ``bin = floor(BINS * (atan(score) / pi + 1/2))`` (equal scores share a bin;
   a higher bin holds only higher scores), and hash-partition the narrow rows
   (key, bin, score, positive) by (key, bin): one shuffle, no sampling pass;
2. sort each partition by score alone (one double: Spark's fastest sort; it
   spills, so a partition of any size fits); each key's rows, and its bins,
   then come in ascending score order;
3. stream each sorted partition through Python in Arrow batches (``mapInArrow``):
   each batch reduces to a run-length histogram (:func:`kernels.auc.sorted_histogram`)
   and a Mann-Whitney partial (:func:`kernels.auc.u_from_histogram`); the
   last run of a batch waits for the next batch, so a score tied across a
   batch boundary is one run; memory is one batch, whatever the key's size;
4. the driver collects one partial per (key, bin), at most ``BINS`` per key,
   and merges them in bin order (:func:`kernels.auc.merge_u`).

With slices, the rows may carry their keys as one array per row (``_slices``, :func:`slices.with_slice_keys`:
one row per exposure instead of one per exposure and slice): they are hashed by bin alone, so every
(key, bin) is still in one partition, and each batch is exploded in numpy before step 3 (a row's index
repeated per key; each key's rows keep their ascending score order).

Ties in score count 1/2, as in the per-user AUC.  (Earlier versions first
aggregated ``groupBy(slice, score)`` and then range-partitioned: with
continuous scores the aggregation reduces nothing, and range partitioning
costs a sampling pass; docs/performance.md has the measurements.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels.auc import UPartial, merge_u, sorted_histogram, u_from_histogram
from recsys_spark.schema import RELEVANCE, SCORE, SLICE, SLICE_KEYS

_POSITIVE = "_positive"
_BIN = "_bin"
_PARTIAL = "u double, n_pos double, n_neg double"
#: bins of the score axis: partials collected per key at most; enough to spread a key over the cores
BINS = 1024


def _explode(batch: pa.RecordBatch, column: str) -> pa.RecordBatch:
    """One row per (row, element of its list ``column``), the element in ``column``; rows of one element
    keep their order."""
    keys = batch.column(column)
    parents = pc.list_parent_indices(keys)
    exploded = batch.drop_columns([column]).take(parents)
    return exploded.append_column(column, pc.list_flatten(keys))


Run = tuple[tuple, int, np.ndarray, np.ndarray, np.ndarray, bool]


def bin_runs(batches: Iterator[pa.RecordBatch], keys: Sequence[str], array_key: str | None = None) -> Iterator[Run]:
    """The one streaming loop (steps 2-3 of the module docstring): rows sorted by score -> each (key, bin)'s
    distinct scores in ascending order with their class counts, as ``(key, bin, values, pos, neg, last)``.

    A (key, bin) comes in one or more chunks, in ascending score order; the chunk with ``last`` True closes
    it (its final run, held back until the key's next bin or the end of the partition, so that a score tied
    across a batch boundary is one run).  Each key's rows come in ascending score order (the partition is
    sorted by score alone, a single double that Spark sorts fast); the bins follow since they are monotone in
    the score.  ``array_key``: the key column that holds a list of keys per row, exploded batch by batch.
    Memory: one batch and one pending run per key.
    """
    pending: dict[tuple, tuple[int, float, float, float]] = {}  # key -> (bin, score, pos, neg) of its last run

    def closed(key: tuple) -> Run:
        b, score, pos, neg = pending.pop(key)
        return key, b, np.array([score]), np.array([pos]), np.array([neg]), True

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
            # runs of one bin inside this key's rows
            starts = np.r_[np.flatnonzero(np.r_[True, b[1:] != b[:-1]]), len(s)]
            for lo, hi in zip(starts[:-1], starts[1:], strict=True):
                score_bin = int(b[lo])
                held = pending.get(key)
                if held is not None and held[0] != score_bin:
                    yield closed(key)
                    held = None
                values, pos, neg = sorted_histogram(s[lo:hi], y[lo:hi])
                if held is not None:
                    if values[0] == held[1]:
                        pos[0] += held[2]
                        neg[0] += held[3]
                    else:
                        values = np.r_[held[1], values]
                        pos, neg = np.r_[held[2], pos], np.r_[held[3], neg]
                pending[key] = (score_bin, float(values[-1]), float(pos[-1]), float(neg[-1]))
                if len(values) > 1:
                    yield key, score_bin, values[:-1], pos[:-1], neg[:-1], False
    for key in list(pending):
        yield closed(key)


def _partials(keys: Sequence[str], array_key: str | None = None):
    """mapInArrow function: rows sorted by score -> one partial per (key, bin) (:func:`bin_runs`)."""

    def partials(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows: list[tuple] = []
        done: dict[tuple, UPartial] = {}  # per key: the partial of its open bin so far
        for key, score_bin, _, pos, neg, last in bin_runs(batches, keys, array_key):
            total = merge_u([done.pop(key, UPartial(0.0, 0.0, 0.0)), u_from_histogram(pos, neg)])
            if last:
                rows.append((*key, score_bin, total.u, total.n_pos, total.n_neg))
            else:
                done[key] = total
        columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in range(len(keys) + 4)]
        names_out = [*keys, _BIN, "u", "n_pos", "n_neg"]
        types = [pa.string()] * len(keys) + [pa.int32()] + [pa.float64()] * 3
        yield pa.RecordBatch.from_arrays(
            [pa.array(c, type=t) for c, t in zip(columns, types, strict=True)], names=names_out
        )

    return partials


def _key_codes(batch: pa.RecordBatch, keys: Sequence[str]) -> tuple[np.ndarray, list[tuple]]:
    """(code of each row's key, key of each code), vectorised over the key columns."""
    codes = np.zeros(batch.num_rows, dtype=np.int64)
    dictionaries = []
    for name in keys:
        encoded = batch.column(name).dictionary_encode()
        dictionary = encoded.dictionary.to_pylist()
        codes = codes * len(dictionary) + encoded.indices.to_numpy(zero_copy_only=False)
        dictionaries.append(dictionary)
    unique, codes = np.unique(codes, return_inverse=True)
    names = []
    for value in unique.tolist():
        parts = []
        for dictionary in reversed(dictionaries):
            value, index = divmod(value, len(dictionary))
            parts.append(dictionary[index])
        names.append(tuple(reversed(parts)))
    return codes, names


def score_bin() -> Column:
    """The score's bin: ``min(floor(BINS * (atan(score) / pi + 1/2)), BINS - 1)`` (step 1 of the module docstring)."""
    return F.least(F.floor((F.atan(F.col(SCORE)) / math.pi + 0.5) * BINS), F.lit(BINS - 1)).cast("int")


def sorted_rows(rows: DataFrame, keys: Sequence[str], array_key: str | None = None) -> DataFrame:
    """Steps 1-2 of the module docstring: ``keys..., _bin, score, _positive``, hashed by (key, bin) and sorted
    by score within each partition, what :func:`bin_runs` streams."""
    positive = (F.col(RELEVANCE) > 0).alias(_POSITIVE)
    hashed = [k for k in keys if k != array_key]
    return (
        rows.select(*keys, score_bin().alias(_BIN), F.col(SCORE), positive)
        .repartition(*hashed, _BIN)
        .sortWithinPartitions(SCORE)
    )


def partials_frame(rows: DataFrame, keys: Sequence[str], array_key: str | None = None) -> DataFrame:
    """The plan of :func:`exact_auc`: one partial per (key, score bin) (steps 1-3 of the module docstring)."""
    schema = ", ".join(f"`{k}` string" for k in keys) + f", {_BIN} int, " + _PARTIAL
    return sorted_rows(rows, keys, array_key).mapInArrow(_partials(tuple(keys), array_key), schema)


def exact_auc(rows: DataFrame, keys: Sequence[str], array_key: str | None = None) -> dict[tuple, UPartial]:
    """{key values: UPartial} over the rows of each key (``.auc`` gives the value).

    ``rows`` has the ``keys`` columns (strings), ``score`` and ``relevance``.  ``array_key``: one of
    ``keys`` is an array of strings, a row counting under each of its elements (the rows are then hashed
    by the other keys and the bin only).
    The driver receives one small row per (key, score bin): at most ``BINS`` per key.
    """
    keys = tuple(keys)
    partials = partials_frame(rows, keys, array_key).collect()
    by_key: dict[tuple, list[UPartial]] = {}
    for row in sorted(partials, key=lambda r: (tuple(r[k] for k in keys), r[_BIN])):
        by_key.setdefault(tuple(row[k] for k in keys), []).append(UPartial(row["u"], row["n_pos"], row["n_neg"]))
    return {k: merge_u(parts) for k, parts in by_key.items()}


def pooled_auc(ranked: DataFrame) -> dict[str, UPartial]:
    """{slice: UPartial} over every exposure of the slice (``.auc`` gives the value).

    ``ranked``: one row per (exposure, slice) with ``slice``, or one row per exposure with its slice keys
    as an array (``_slices``: each row sorted and shuffled once, whatever the number of slices)."""
    if SLICE_KEYS in ranked.columns:
        found = exact_auc(ranked.withColumnRenamed(SLICE_KEYS, SLICE), (SLICE,), array_key=SLICE)
    else:
        found = exact_auc(ranked, (SLICE,))
    return {key[0]: part for key, part in found.items()}
