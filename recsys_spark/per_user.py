"""Spark adapter: score all users in one pass over the labelled exposures, whole partitions at a time.

:func:`persist_user_rows` then ``mapInArrow(...)``: one shuffle puts every
row of a user in the same partition (the health indicators read the same
persisted partitions); each Python task reads its
partition as Arrow batches, turns the strings into pandas categoricals
(dictionary codes, no Python string per row: a fraction of the memory of
``applyInPandas``'s object columns) and calls
:func:`kernels.users.score_users` once, so one call scores thousands of users.
No sort on the JVM side (a grouped UDF would sort by its key), and no metric
maths here.  With slices the pass reads one row per exposure with its slice
keys as an array and explodes them in Arrow (:func:`slices.explode_arrow`):
1 + S times fewer rows cross from the JVM.

The same pass also reduces its per-user rows to mergeable sums per slice
(:func:`kernels.moments.user_table_moments`), handed to the driver through an
accumulator: the aggregates need no second pass.  Each partition is counted
once because the pass runs in the result stage of the table's write (Spark
applies a result task's accumulator updates once, retries included); a
shuffle between the pass and the write would make it a map stage, whose
re-runs add again.  The driver merges the partitions' sums in the order their
tasks finish, so aggregates may differ between reruns in the last bits.

Memory of one call is its partition, about ``rows_per_bucket`` rows, unless one
user is heavier.  While reading its batches a task counts rows per user; a user
that passes ``max_user_rows`` is set aside (its rows dropped, the count kept)
and reported through the accumulator, so no call ever holds more than
``max_user_rows`` rows of one user.  :meth:`UserMetrics.heavy_frame` then
scores the set-aside users on a bounded path:

* their lists are spread over sub-partitions by list (a list stays whole) and
  scored by the same kernel; the parts of a user are merged (counts and hits
  added, list-metric means weighted by their ``n_lists_ranked``);
* their AUC comes from :func:`pooled_auc.exact_auc`: a Spark-side sort by
  (user, score) streamed through Python one Arrow batch at a time.

A single list longer than ``max_user_rows`` (``list_unit`` session or user) is
still scored in one call; :meth:`UserMetrics.notes` says so in the summary.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark import engine
from recsys_spark.kernels.moments import Moments, merge_by_slice, user_table_moments
from recsys_spark.kernels.ranking import Gain
from recsys_spark.kernels.users import INPUT_COLUMNS, score_users
from recsys_spark.pooled_auc import exact_auc
from recsys_spark.registry import LIST_METRICS
from recsys_spark.schema import (
    ALL,
    CLICKED,
    COPIES,
    DWELL,
    EVENT_FLAG_PREFIX,
    IN_CATALOG,
    ITEM,
    ITEM_CATEGORY,
    LIST_ID,
    N_CLICKS,
    N_EVENTS,
    POSITION,
    RELEVANCE,
    REQUEST,
    SCORE,
    SESSION,
    SLICE,
    SLICE_KEYS,
    USER,
    USER_METRICS_COLUMNS,
    USER_METRICS_DDL,
    VALUE,
)
from recsys_spark.session import CACHE_LEVEL
from recsys_spark.slices import explode_arrow


def user_row_columns(sliced: DataFrame, extra: Sequence[str] = ()) -> DataFrame:
    """The columns :func:`persist_user_rows` keeps (the plan only)."""
    keep = [
        c
        for c in (
            SLICE,
            USER,
            SESSION,
            REQUEST,
            ITEM,
            POSITION,
            SCORE,
            RELEVANCE,
            CLICKED,
            COPIES,
            N_EVENTS,
            N_CLICKS,
            VALUE,
            DWELL,
            ITEM_CATEGORY,
            IN_CATALOG,
            *[c for c in sliced.columns if c.startswith(EVENT_FLAG_PREFIX)],
            *extra,
        )
        if c in sliced.columns
    ]
    return sliced.select(*dict.fromkeys(keep))


def persist_user_rows(sliced: DataFrame, extra: Sequence[str] = ()) -> DataFrame:
    """The labelled exposures, partitioned by user by the caller (:func:`recsys_spark.label.by_user`),
    narrowed and persisted: every row of a user in one partition.

    Keeps the columns the per-user pass, the health indicators (with the
    business metrics' click counts, values, dwell and conversion flags), the
    label counts and the business rules need, and ``extra`` (the slice
    dimensions' values, when the slices are exploded after the persist; the
    columns the custom rules read); all read it in place (no further shuffle
    of exposure rows).  The caller unpersists it.
    Empty responses (null item) stay: health and the counts use them.
    """
    return user_row_columns(sliced, extra).persist(CACHE_LEVEL)


def ranking_input(labelled: DataFrame, list_unit: str, has_score: bool) -> DataFrame:
    """Exposed items only (empty responses have nothing to rank), with ``list_id`` and ``score``.

    Without a score column, lists are ranked by position: score = -position.  Rows with their slice keys
    as an array (:func:`slices.with_slice_keys`) keep the array instead of ``slice``: the per-user pass
    explodes it in Arrow.
    """
    list_id = {"request": F.col(REQUEST), "session": F.col(SESSION), "user": F.lit("")}[list_unit]
    score = F.col(SCORE) if has_score else -F.col(POSITION).cast("double")
    if SLICE_KEYS in labelled.columns:
        slice_col = F.col(SLICE_KEYS)
    else:
        slice_col = (F.col(SLICE) if SLICE in labelled.columns else F.lit(ALL)).alias(SLICE)
    return labelled.where(F.col(ITEM).isNotNull()).select(
        slice_col, USER, list_id.alias(LIST_ID), ITEM, POSITION, score.alias(SCORE), RELEVANCE
    )


def bucket_count(rows: int, rows_per_bucket: int, parallelism: int) -> int:
    """Partitions of the per-user pass: about ``rows_per_bucket`` rows each, and every core has work."""
    return max(2 * parallelism, math.ceil(rows / rows_per_bucket), 1)


@dataclass
class PassTotals:
    """What the tasks of the per-user pass report to the driver (an accumulator value)."""

    moments: dict[str, Moments] = field(default_factory=dict)  # per slice, users scored in the pass
    set_aside: dict[str, int] = field(default_factory=dict)  # user -> rows, users over max_user_rows

    def merge(self, other: PassTotals) -> PassTotals:
        merge_by_slice(self.moments, other.moments)
        for user, rows in other.set_aside.items():  # a user lives in one partition: no double count
            self.set_aside[user] = max(self.set_aside.get(user, 0), rows)
        return self


class _PassTotalsParam(AccumulatorParam):
    def zero(self, value: PassTotals) -> PassTotals:
        return PassTotals()

    def addInPlace(self, a: PassTotals, b: PassTotals) -> PassTotals:
        return a.merge(b)


class DeferredTotals:
    """The per-user pass's accumulator on Spark Connect (which has none): the same :class:`PassTotals`,
    by aggregation.

    ``frame`` (the pass's output, persisted by the caller so that writing it computes it once) is
    reduced partition by partition to the same mergeable sums the pass's tasks add to the
    accumulator on a classic session; the users over ``max_user_rows`` are a count per user of
    ``rows`` (the pass counts a user's rows of every slice, so does this).  Computed on the first
    read of :attr:`value`, after the table was written; then ``frame`` is unpersisted.
    """

    def __init__(self, rows: DataFrame, frame: DataFrame, ks: Sequence[int], max_user_rows: int | None) -> None:
        self.rows, self.frame, self.ks, self.max_user_rows = rows, frame, tuple(ks), max_user_rows
        self._value: PassTotals | None = None

    @property
    def value(self) -> PassTotals:
        if self._value is None:
            self._value = self._compute()
            self.frame.unpersist()
        return self._value

    def _compute(self) -> PassTotals:
        ks = self.ks

        def partition_moments(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # executors
            tables = list(batches)
            if not tables:
                return
            frame = pa.Table.from_batches(tables).to_pandas()
            blob = pickle.dumps(user_table_moments(frame, ks))
            yield pa.RecordBatch.from_pydict({"moments": [blob]}, pa.schema([("moments", pa.binary())]))

        moments: dict = {}
        for row in self.frame.mapInArrow(partition_moments, "moments binary").collect():
            merge_by_slice(moments, pickle.loads(row["moments"]))
        set_aside: dict[str, int] = {}
        if self.max_user_rows is not None:
            over = self.rows.groupBy(USER).count().where(F.col("count") > self.max_user_rows)
            set_aside = {r[USER]: int(r["count"]) for r in over.collect()}
        return PassTotals(moments, set_aside)


_ARROW_SCHEMA = pa.schema(
    [
        (name, {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "double": pa.float64()}[kind])
        for name, kind in USER_METRICS_COLUMNS
    ]
)


def _score_partitions(
    rows: DataFrame, ks: tuple[int, ...], gain: str, max_user_rows: int | None, totals=None
) -> DataFrame:
    """``mapInArrow``: each partition (whole users) -> one row per (slice, user), in one kernel call.

    With ``max_user_rows``, users past it are set aside; with ``totals`` (an
    accumulator) the task adds its moments and set-aside users.
    """
    columns = list(INPUT_COLUMNS)

    def score(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # on the executors
        kept: list[pa.RecordBatch] = []
        rows_of: dict[str, int] = {}
        over: set[str] = set()
        for batch in _exploded(batches):
            if max_user_rows is not None:
                counts = pc.value_counts(batch.column(USER))
                newly = []
                for user, n in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True):
                    seen = rows_of[user] = rows_of.get(user, 0) + n
                    if seen > max_user_rows and user not in over:
                        newly.append(user)
                if newly:
                    over.update(newly)
                    drop = pa.array(newly, pa.string())
                    kept = [b.filter(pc.invert(pc.is_in(b.column(USER), drop))) for b in kept]
                if over:
                    batch = batch.filter(pc.invert(pc.is_in(batch.column(USER), pa.array(sorted(over), pa.string()))))
            if batch.num_rows:
                kept.append(batch)
        frame = (
            pa.Table.from_batches(kept).select(columns).to_pandas(strings_to_categorical=True)
            if kept
            else pd.DataFrame(columns=columns)
        )
        del kept
        result = score_users(frame, ks, cast(Gain, gain))  # config checked it is one of Gain's values
        del frame
        if totals is not None:
            totals.add(PassTotals(user_table_moments(result, ks), {u: rows_of[u] for u in over}))
        yield from pa.Table.from_pandas(result, schema=_ARROW_SCHEMA, preserve_index=False).to_batches()

    return rows.mapInArrow(score, USER_METRICS_DDL)


def _exploded(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches with their slices exploded (:func:`slices.explode_arrow`), one row per (row, slice)."""
    for batch in batches:
        if SLICE_KEYS in batch.schema.names:
            yield from explode_arrow(pa.Table.from_batches([batch])).combine_chunks().to_batches()
        else:
            yield batch


def _merge_parts(parts: DataFrame) -> DataFrame:
    """Per-user rows of sub-partition parts -> one row per (slice, user, k); ``auc`` left out."""
    n = F.col("n_lists_ranked")
    means = ["mrr", *LIST_METRICS]

    def weighted(col: str):
        has = F.col(col).isNotNull() & ~F.isnan(col)
        return (F.sum(F.when(has, F.col(col) * n)) / F.sum(F.when(has, n))).alias(col)

    sums = ["n_exposures", "n_relevant", "n_lists", "n_lists_ranked", "hits"]
    return parts.groupBy(SLICE, USER, "k").agg(*[F.sum(c).alias(c) for c in sums], *[weighted(c) for c in means])


class UserMetrics:
    """The per-user table of one day, in one pass plus a bounded path for set-aside users.

    Use: write :attr:`frame` (the pass; run it once, since its tasks add to an
    accumulator), then :meth:`heavy_frame` (None when no user was set aside)
    to the same table; :meth:`moments` then gives the
    aggregates' sums for every user, :meth:`notes` and :meth:`counts` what the
    summary says about set-aside users.
    """

    def __init__(
        self,
        ranked: DataFrame,
        ks: Sequence[int],
        gain: str,
        partitions: int | None,
        max_user_rows: int,
        rows_per_bucket: int = 200_000,
        list_unit: str = "request",
        keyed: DataFrame | None = None,
    ) -> None:
        """``partitions``: hash-partition ``ranked`` by user into that many; None when it already is
        (built on :func:`persist_user_rows`: then the pass reads it in place, no shuffle).  ``keyed``:
        the same rows before the slices are exploded, with their keys as an array (in the same
        partitions): the pass reads those and explodes them in Arrow (the set-aside users' bounded path
        still reads ``ranked``)."""
        self.ranked, self.ks, self.gain = ranked, tuple(ks), gain
        self.max_user_rows, self.rows_per_bucket, self.list_unit = max_user_rows, rows_per_bucket, list_unit
        rows = ranked if partitions is None else ranked.repartition(partitions, USER)
        self.totals: Any  # an accumulator of PassTotals, or its Connect stand-in (same .value)
        if engine.is_connect(ranked.sparkSession):  # no accumulators there: the sums from the pass's output
            # (keyed rows are not read there: the stand-in counts a user's rows on the rows it is given)
            self.frame = _score_partitions(rows, self.ks, gain, max_user_rows).persist(CACHE_LEVEL)
            self.totals = DeferredTotals(rows, self.frame, self.ks, max_user_rows)
        else:
            if keyed is not None and partitions is None:
                rows = keyed
            self.totals = ranked.sparkSession.sparkContext.accumulator(PassTotals(), _PassTotalsParam())
            self.frame = _score_partitions(rows, self.ks, gain, max_user_rows, self.totals)
        self._heavy_moments: dict[str, Moments] = {}

    @property
    def set_aside(self) -> dict[str, int]:
        """{user: rows} of users past ``max_user_rows`` (known once :attr:`frame` has run)."""
        return dict(self.totals.value.set_aside)

    def heavy_frame(self) -> DataFrame | None:
        """Per-user rows of the set-aside users (bounded path), or None; computes their AUC eagerly."""
        heavy = self.set_aside
        if not heavy:
            return None
        rows = self.ranked.where(F.col(USER).isin(sorted(heavy)))
        parts = max(1, math.ceil(sum(heavy.values()) / self.rows_per_bucket))
        merged = _merge_parts(_score_partitions(rows.repartition(parts, USER, LIST_ID), self.ks, self.gain, None))
        aucs = [
            (key[0], key[1], None if math.isnan(part.auc) else part.auc)
            for key, part in exact_auc(rows, (SLICE, USER)).items()
        ]
        spark = self.ranked.sparkSession
        auc = spark.createDataFrame(aucs, f"{SLICE} string, {USER} string, auc double")
        names = [name for name, _ in USER_METRICS_COLUMNS]
        # a few rows per set-aside user: computed once, kept for the aggregates and the table
        table = merged.join(auc, on=[SLICE, USER], how="left").select(*names).toPandas()
        self._heavy_moments = user_table_moments(table, self.ks)
        return spark.createDataFrame(table, USER_METRICS_DDL)

    def moments(self) -> dict[str, Moments]:
        """{slice: Moments} over every user (after :attr:`frame` and :meth:`heavy_frame` ran)."""
        out = {s: Moments().merge(m) for s, m in self.totals.value.moments.items()}
        return merge_by_slice(out, self._heavy_moments)

    def counts(self) -> dict[str, int]:
        return {"users_over_row_bound": len(self.set_aside)}

    def notes(self) -> list[str]:
        heavy = self.set_aside
        if not heavy:
            return []
        out = [
            f"{len(heavy)} user(s) with more than execution.max_user_rows={self.max_user_rows} rows "
            f"({sum(heavy.values())} rows) took the bounded path: lists scored in sub-partitions, AUC from a "
            "Spark-side sort; values are exact"
        ]
        if self.list_unit != "request":
            out.append(
                f"list_unit={self.list_unit}: a list of a set-aside user is scored whole in one Python call; "
                f"a list longer than {self.max_user_rows} rows holds that many rows in memory"
            )
        return out
