"""Spark adapter: feed batches of many users to the numpy kernel with one Arrow UDF.

Users are spread over hash buckets (``pmod(xxhash64(user_id), buckets)``);
``groupBy(bucket).applyInArrow`` calls :func:`kernels.users.score_users` once
per bucket, so one Python call scores thousands of users.  The bucket arrives
as an Arrow table whose strings become pandas categoricals (dictionary codes,
no Python string per row: about 50 bytes a row against 280 for
``applyInPandas``'s object columns).  No metric maths here.

Memory of one call is bounded by its bucket, unless one user is heavier than a
bucket.  :func:`find_heavy_users` finds users with more than ``max_user_rows``
rows from a small sample (it only routes them: every value stays exact), and
:func:`user_metrics` gives them a bounded path:

* their lists are spread over sub-buckets by list (a list stays whole) and
  scored by the same kernel; the parts of a user are merged (counts and hits
  added, list-metric means weighted by their ``n_lists_ranked``);
* their AUC comes from :func:`pooled_auc.exact_auc`: a Spark-side sort by
  (user, score) streamed through Python one Arrow batch at a time.

A single list longer than ``max_user_rows`` (``list_unit`` session or user) is
still scored in one call; :meth:`HeavyUsers.notes` says so in the summary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels.users import INPUT_COLUMNS, LIST_METRICS, metric_column, output_columns, score_users
from recsys_spark.pooled_auc import exact_auc
from recsys_spark.schema import ALL, ITEM, LIST_ID, POSITION, RELEVANCE, REQUEST, SCORE, SESSION, SLICE, USER

BUCKET = "_bucket"


def ranking_input(labelled: DataFrame, list_unit: str, has_score: bool) -> DataFrame:
    """Exposed items only (empty responses have nothing to rank), with ``list_id`` and ``score``.

    Without a score column, lists are ranked by position: score = -position.
    """
    list_id = {"request": F.col(REQUEST), "session": F.col(SESSION), "user": F.lit("")}[list_unit]
    score = F.col(SCORE) if has_score else -F.col(POSITION).cast("double")
    slice_col = F.col(SLICE) if SLICE in labelled.columns else F.lit(ALL)
    return (labelled
            .where(F.col(ITEM).isNotNull())
            .select(slice_col.alias(SLICE), USER, list_id.alias(LIST_ID), ITEM, POSITION,
                    score.alias(SCORE), RELEVANCE))


def bucket_count(rows: int, rows_per_bucket: int, parallelism: int) -> int:
    """Buckets so that each holds about ``rows_per_bucket`` rows, and every core has work."""
    return max(2 * parallelism, math.ceil(rows / rows_per_bucket), 1)


#: expected sampled rows of a user at the bound: a user over the bound is missed
#: by :func:`find_heavy_users` with probability below 1e-100 (flagged at half)
SAMPLED_ROWS_AT_BOUND = 2000


@dataclass(frozen=True)
class HeavyUsers:
    """Users routed to the bounded path, with estimates from the sample."""

    users: tuple[str, ...] = ()
    rows: int = 0  # their exposures (estimated)
    longest_list: int = 0  # rows of their longest list (estimated)
    max_user_rows: int = 0

    def counts(self) -> dict[str, int]:
        return {"users_over_row_bound": len(self.users)}

    def notes(self) -> list[str]:
        out = []
        if self.users:
            out.append(f"{len(self.users)} user(s) with more than execution.max_user_rows={self.max_user_rows} "
                       f"exposures (about {self.rows} rows) took the bounded path: lists scored in sub-buckets, "
                       "AUC from a Spark-side sort; values are exact")
        if self.longest_list > self.max_user_rows:
            out.append(f"a list of about {self.longest_list} rows is longer than execution.max_user_rows="
                       f"{self.max_user_rows}: it was scored whole in one Python call (memory grows with it)")
        return out


def find_heavy_users(ranked: DataFrame, max_user_rows: int, seed: int = 0) -> HeavyUsers:
    """Users with more than ``max_user_rows`` rows (all slices together), from a sample.

    Samples a fraction f = min(1, 2000 / max_user_rows) of the rows and flags a
    user whose sampled rows exceed f * max_user_rows / 2 (exactly
    ``max_user_rows`` when f = 1).  Collects only the flagged users: at most
    about 2 * rows / max_user_rows of them.
    """
    fraction = min(1.0, SAMPLED_ROWS_AT_BOUND / max_user_rows)
    threshold = max_user_rows if fraction >= 1.0 else fraction * max_user_rows / 2
    sample = ranked.select(USER, LIST_ID)
    if fraction < 1.0:
        sample = sample.sample(fraction=fraction, seed=seed)
    flagged = (sample
               .groupBy(USER, LIST_ID).count()
               .groupBy(USER).agg(F.sum("count").alias("rows"), F.max("count").alias("longest"))
               .where(F.col("rows") > threshold)
               .collect())
    if not flagged:
        return HeavyUsers(max_user_rows=max_user_rows)
    return HeavyUsers(users=tuple(sorted(r[USER] for r in flagged)),
                      rows=round(sum(r["rows"] for r in flagged) / fraction),
                      longest_list=round(max(r["longest"] for r in flagged) / fraction),
                      max_user_rows=max_user_rows)


def _arrow_schema(ks: Sequence[int]) -> pa.Schema:
    kinds = {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}
    return pa.schema([(name, kinds[kind]) for name, kind in output_columns(ks)])


def _score_buckets(keyed: DataFrame, ks: tuple[int, ...], gain: str) -> DataFrame:
    """``groupBy(bucket).applyInArrow(score_users)``: one row per (slice, user) of each bucket."""
    schema = ", ".join(f"`{name}` {kind}" for name, kind in output_columns(ks))
    arrow_schema = _arrow_schema(ks)
    columns = list(INPUT_COLUMNS)

    def score(table: pa.Table) -> pa.Table:  # runs on the executors, once per bucket
        frame = table.select(columns).to_pandas(strings_to_categorical=True)
        return pa.Table.from_pandas(score_users(frame, ks, gain), schema=arrow_schema, preserve_index=False)

    return keyed.groupBy(BUCKET).applyInArrow(score, schema)


def _merge_parts(parts: DataFrame, ks: tuple[int, ...]) -> DataFrame:
    """Per-user rows of sub-bucket parts -> one row per (slice, user); ``auc`` left out."""
    n = F.col("n_lists_ranked")
    means = ["mrr"] + [metric_column(m, k) for k in ks for m in LIST_METRICS]

    def weighted(col: str):
        has = F.col(col).isNotNull() & ~F.isnan(col)
        return (F.sum(F.when(has, F.col(col) * n)) / F.sum(F.when(has, n))).alias(col)

    sums = ["n_exposures", "n_relevant", "n_lists", "n_lists_ranked"] + [metric_column("hits", k) for k in ks]
    return parts.groupBy(SLICE, USER).agg(*[F.sum(c).alias(c) for c in sums], *[weighted(c) for c in means])


def user_metrics(ranked: DataFrame, ks: Sequence[int], gain: str, buckets: int,
                 heavy: HeavyUsers = HeavyUsers(), rows_per_bucket: int = 200_000) -> DataFrame:
    """One row per (slice, user): see :func:`kernels.users.score_users`.

    Users in ``heavy`` take the bounded path (module docstring); their AUC is
    computed here, eagerly (one Spark job over their rows only).
    """
    ks = tuple(ks)
    by_user = F.pmod(F.xxhash64(USER), F.lit(buckets))
    if not heavy.users:
        return _score_buckets(ranked.withColumn(BUCKET, by_user), ks, gain)
    is_heavy = F.col(USER).isin(list(heavy.users))
    light = _score_buckets(ranked.where(~is_heavy).withColumn(BUCKET, by_user), ks, gain)
    heavy_rows = ranked.where(is_heavy)
    sub_buckets = max(1, math.ceil(heavy.rows / rows_per_bucket))
    by_list = F.pmod(F.xxhash64(USER, LIST_ID), F.lit(sub_buckets))
    merged = _merge_parts(_score_buckets(heavy_rows.withColumn(BUCKET, by_list), ks, gain), ks)
    aucs = [(key[0], key[1], None if math.isnan(part.auc) else part.auc)
            for key, part in exact_auc(heavy_rows, (SLICE, USER)).items()]
    auc = ranked.sparkSession.createDataFrame(aucs, f"{SLICE} string, {USER} string, auc double")
    names = [name for name, _ in output_columns(ks)]
    return light.unionByName(merged.join(auc, on=[SLICE, USER], how="left").select(*names))
