"""CUPED's pre-period: each user's sums over the days before the analysed ones, as covariates.

The ``experiment_users`` tables of the ``experiments.cuped_days`` complete days before the first analysed day
(:func:`add_pre_period`, the day's stage and the window alike) give each (experiment, slice, user) row its
``_cov_<sum>`` columns (:func:`with_covariates`), summed over the pre-period days on which the user was not yet
in the experiment; :mod:`.arm_sums` turns them into the covariate parts and
:mod:`recsys_spark.kernels.cuped` adjusts.  docs/experiments.md, "CUPED".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.experiments.tables import COVARIATE_PREFIX, EXPERIMENT, USERS_TABLE, VARIANTS
from recsys_spark.experiments.user_sums import read_user_tables
from recsys_spark.kernels.metric_specs import MetricSpec
from recsys_spark.schema import SLICE, USER


def previous_days(date: dt.date, days: int) -> list[dt.date]:
    """The ``days`` days before ``date``, oldest first.

    >>> previous_days(dt.date(2026, 11, 20), 2)
    [datetime.date(2026, 11, 18), datetime.date(2026, 11, 19)]
    """
    return [date - dt.timedelta(days=i) for i in range(days, 0, -1)]


def with_covariates(rows: DataFrame, previous: DataFrame | None, specs: Sequence[MetricSpec]) -> DataFrame:
    """Add ``_cov_<sum>``: the user's sums over the pre-period days on which it was not yet in the
    experiment (null when there is no such day).

    A covariate must not carry the treatment: a pre-period day on which the
    user was already assigned to the experiment (either variant) is left out,
    so a daily run of a running experiment adjusts only by days before each
    user's exposure.  ``rows`` has one row per (experiment, slice, user).  A sum the pre-period tables lack
    (:func:`read_user_tables`: written by an older release) is null for every user: no covariate, never 0
    (:func:`covariate_notes`).
    """
    names = sorted({c for s in specs for c in s.columns})
    if previous is None:
        return rows.select("*", *[F.lit(None).cast("double").alias(COVARIATE_PREFIX + c) for c in names])
    absent = F.lit(None).cast("double")
    pre = previous.select(
        SLICE,
        USER,
        F.col(VARIANTS).alias("_pre_variants"),
        *[F.col(c) if c in previous.columns else absent.alias(c) for c in names],
    )
    before = F.col("_pre_variants").isNull() | ~F.map_contains_key("_pre_variants", F.col(EXPERIMENT))
    others = [c for c in rows.columns if c not in (EXPERIMENT, SLICE, USER)]
    return (
        rows.join(
            pre.select(SLICE, USER, "_pre_variants", *[F.col(c).alias(f"_pre_{c}") for c in names]),
            on=[SLICE, USER],
            how="left",
        )
        .groupBy(EXPERIMENT, SLICE, USER)
        .agg(
            *[F.first(c).alias(c) for c in others],
            *[F.sum(F.when(before, F.col(f"_pre_{c}"))).alias(COVARIATE_PREFIX + c) for c in names],
        )
    )


def covariate_notes(previous: DataFrame | None, specs: Sequence[MetricSpec]) -> list[str]:
    """A note naming the metrics whose sums the pre-period tables lack (read as no covariate, unadjusted)."""
    if previous is None:
        return []
    left = [s.name for s in specs if any(c not in previous.columns for c in s.columns)]
    return (
        [f"CUPED: {left} have no covariate: the pre-period {USERS_TABLE} lack their sums (left unadjusted)"]
        if left
        else []
    )


@dataclass(frozen=True)
class PrePeriod:
    """What CUPED read: the pre-period days whose ``experiment_users`` were found, those left out as incomplete
    (no ``_SUCCESS``), and the notes naming the metrics left unadjusted (:func:`covariate_notes`)."""

    found: list[dt.date]
    incomplete: list[dt.date]
    notes: list[str]


def add_pre_period(
    spark: SparkSession,
    output_root: str,
    rows: DataFrame,
    specs: Sequence[MetricSpec],
    first_day: dt.date,
    days: int,
) -> tuple[DataFrame, PrePeriod]:
    """``rows`` (one per experiment, slice and user) with their covariates (:func:`with_covariates`) from the
    ``days`` complete days before ``first_day`` (:func:`read_user_tables`), and what was read."""
    incomplete: list[dt.date] = []
    previous, found = read_user_tables(spark, output_root, previous_days(first_day, days), incomplete)
    return with_covariates(rows, previous, specs), PrePeriod(found, incomplete, covariate_notes(previous, specs))
