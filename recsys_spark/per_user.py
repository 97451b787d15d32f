"""Spark adapter: feed batches of many users to the numpy kernel with one pandas UDF.

Users are spread over hash buckets (``pmod(xxhash64(user_id), buckets)``);
``groupBy(bucket).applyInPandas`` calls :func:`kernels.users.score_users` once
per bucket, so one Python call scores thousands of users.  No metric maths here.
"""

from __future__ import annotations

import math
from typing import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels.users import output_columns, score_users
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


def user_metrics(ranked: DataFrame, ks: Sequence[int], gain: str, buckets: int) -> DataFrame:
    """One row per (slice, user): see :func:`kernels.users.score_users`."""
    ks = tuple(ks)
    schema = ", ".join(f"`{name}` {kind}" for name, kind in output_columns(ks))

    def score(batch):  # runs on the executors, once per bucket
        return score_users(batch, ks, gain)

    return (ranked
            .withColumn(BUCKET, F.pmod(F.xxhash64(USER), F.lit(buckets)))
            .groupBy(BUCKET)
            .applyInPandas(score, schema))
