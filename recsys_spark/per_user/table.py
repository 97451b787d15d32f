"""The per-user table: the user partitions, and the per-user metrics of the one pass over them.

:func:`persist_user_rows` persists the labelled exposures, one row per exposure, hash-partitioned by user:
the one table the passes read in place.  The per-user metrics come from the day's one Python pass over
those partitions (:class:`user_pass.UserPass`, which also gives the health sums): each Python task reads
its partition as Arrow batches and calls the numpy kernels once for thousands of users; no sort on the
JVM side, no Python call per user, no metric maths here.  :class:`UserMetrics` writes its per-user rows
and gives the aggregates' sums (:class:`kernels.moments.Moments` per slice, from the pass's output: no
second pass over the per-user table, no accumulator).

Memory of one call is its partition, about ``rows_per_bucket`` rows, unless one user is heavier.  The
pass sets aside every user past ``max_user_rows`` rows (their rows dropped, the count kept), so no call
ever holds more than ``max_user_rows`` rows of one user; :meth:`UserMetrics.heavy_frame` then scores them
on a bounded path:

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
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels.composite import Composite
from recsys_spark.kernels.moments import Moments, merge_by_slice, user_table_moments
from recsys_spark.per_user.pooled_auc import exact_auc
from recsys_spark.per_user.user_pass import UserPass
from recsys_spark.registry import LIST_METRICS
from recsys_spark.runtime.session import CACHE_LEVEL
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
    """The labelled exposures, partitioned by user by the caller (:func:`recsys_spark.steps.label.by_user`),
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
    as an array (:func:`slices.with_slice_keys`) keep the array instead of ``slice`` (what the one pass,
    :mod:`recsys_spark.per_user.user_pass`, reads).
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
    """The per-user table of one day: the one pass's per-user rows, plus a bounded path for set-aside users.

    Use: write :attr:`frame` (the pass's per-user rows), then :meth:`heavy_frame` (None when no user was set
    aside) to the same table; :meth:`moments` then gives the aggregates' sums for every user, :meth:`notes`
    and :meth:`counts` what the summary says about set-aside users.
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
        user_pass: UserPass | None = None,
        composites: Sequence[Composite] = (),
        f_alphas: Sequence[float] = (1.0,),
    ) -> None:
        """``ranked``: the ranking input (:func:`ranking_input`), one row per (exposed item, slice);
        ``partitions``: hash-partition it by user into that many, None when it already is (built on
        :func:`persist_user_rows`: then the pass reads it in place, no shuffle).  ``keyed``: the same rows
        before the slices are exploded, their keys as an array, in the same partitions: the pass reads
        those.  ``user_pass``: the day's pass (which also sums the health indicators), built by the
        caller over the user partitions; without it this builds a pass of its own (the per-user values
        only), unpersisted by :meth:`unpersist`.  The set-aside users' bounded path reads ``ranked``.
        ``composites``: the composite metrics the set-aside users' moments include (the pass's own are the
        pass's)."""
        self.ranked, self.ks, self.gain, self.f_alphas = ranked, tuple(ks), gain, tuple(f_alphas)
        self.max_user_rows, self.rows_per_bucket, self.list_unit = max_user_rows, rows_per_bucket, list_unit
        self._own, self.composites = user_pass is None, tuple(composites)
        if user_pass is None:
            rows = ranked if partitions is None else ranked.repartition(partitions, USER)
            if keyed is not None and partitions is None:
                rows = keyed
            user_pass = UserPass(
                rows,
                self.ks,
                gain=gain,
                list_unit=list_unit,
                max_user_rows=max_user_rows,
                composites=composites,
                f_alphas=self.f_alphas,
            )
        self.user_pass = user_pass
        self.frame = user_pass.user_frame()
        self._heavy_moments: dict[str, Moments] = {}

    def unpersist(self) -> None:
        """Drop the pass's persisted output when this built it."""
        if self._own:
            self.user_pass.unpersist()

    @property
    def set_aside(self) -> dict[str, int]:
        """{user: rows} of users past ``max_user_rows`` (known once :attr:`frame` has run)."""
        return dict(self.user_pass.totals.set_aside)

    def heavy_frame(self) -> DataFrame | None:
        """Per-user rows of the set-aside users (bounded path), or None; computes their AUC eagerly."""
        heavy = self.set_aside
        if not heavy:
            return None
        rows = self.ranked.where(F.col(USER).isin(sorted(heavy)))
        parts = max(1, math.ceil(sum(heavy.values()) / self.rows_per_bucket))
        scored = UserPass(rows.repartition(parts, USER, LIST_ID), self.ks, gain=self.gain, persist=False)
        merged = _merge_parts(scored.user_frame())
        aucs = [
            (key[0], key[1], None if math.isnan(part.auc) else part.auc)
            for key, part in exact_auc(rows, (SLICE, USER)).items()
        ]
        spark = self.ranked.sparkSession
        auc = spark.createDataFrame(aucs, f"{SLICE} string, {USER} string, auc double")
        names = [name for name, _ in USER_METRICS_COLUMNS]
        # a few rows per set-aside user: computed once, kept for the aggregates and the table
        table = merged.join(auc, on=[SLICE, USER], how="left").select(*names).toPandas()
        self._heavy_moments = user_table_moments(table, self.ks, self.composites, self.f_alphas)
        return spark.createDataFrame(table, USER_METRICS_DDL)

    def moments(self) -> dict[str, Moments]:
        """{slice: Moments} over every user (after :attr:`frame` and :meth:`heavy_frame` ran)."""
        out = {s: Moments().merge(m) for s, m in self.user_pass.totals.moments.items()}
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
