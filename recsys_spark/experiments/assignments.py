"""The assignments: reading ``experiments.assignments`` (``user_id, experiment, variant[, layer, assigned_at]``),
each user's variants as one map, and what each experiment of the table is (its distinct ids, one of them, its
layer, the day of its earliest ``assigned_at``).

A user's ids are compared as strings with the exposures' ids (:func:`read_assignments` conforms them); a user
with several variants of one experiment keeps the experiment with a null variant, so that it is counted as
excluded rather than lost (:func:`user_variants`).  docs/experiments.md, "Input" and "Who counts".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.experiments.tables import ASSIGNED_AT, EXPERIMENT, LAYER, VARIANT, VARIANTS
from recsys_spark.io.read import ColumnSpec, conform, read_parquet
from recsys_spark.schema import USER

ASSIGNMENT_COLUMNS = (
    ColumnSpec(USER, "id"),
    ColumnSpec(EXPERIMENT, "string"),
    ColumnSpec(VARIANT, "string"),
    ColumnSpec(LAYER, "string", required=False),
    ColumnSpec(ASSIGNED_AT, "timestamp", required=False),  # when the user was assigned: the experiment's first day
)


def read_assignments(spark: SparkSession, path: str, columns: Mapping[str, str]) -> DataFrame:
    """The assignments table, its columns renamed by ``columns`` (``input.columns``) and conformed (ids as
    strings); rows with a null id, experiment or variant dropped."""
    df = conform(read_parquet(spark, path, "assignments", columns), ASSIGNMENT_COLUMNS, path)
    return df.where(F.col(USER).isNotNull() & F.col(EXPERIMENT).isNotNull() & F.col(VARIANT).isNotNull())


def user_variants(assignments: DataFrame) -> DataFrame:
    """(user_id, variants): map experiment -> variant, null for a user with several variants of it.

    One aggregation by user (the variants of each experiment are resolved in the user's row: an
    aggregation by (user, experiment) first cost a second shuffle).
    """
    pairs = F.array_distinct(F.collect_list(F.struct(EXPERIMENT, VARIANT)))
    experiments = F.array_distinct(F.transform("pairs", lambda p: p[EXPERIMENT]))
    variant = F.transform(
        experiments,
        lambda e: F.transform(F.filter("pairs", lambda p: p[EXPERIMENT] == e), lambda p: p[VARIANT]),
    )
    one = F.transform(variant, lambda vs: F.when(F.size(vs) == 1, vs[0]))
    return (
        assignments.groupBy(USER)
        .agg(pairs.alias("pairs"))
        .select(USER, F.map_from_arrays(experiments, one).alias(VARIANTS))
    )


def explode_variants(users: DataFrame, experiment: str | None = None) -> DataFrame:
    """One row per (experiment, slice, user) of the users assigned to it (``variant`` null: several)."""
    rows = users.select("*", F.explode(VARIANTS).alias(EXPERIMENT, VARIANT)).drop(VARIANTS)
    return rows if experiment is None else rows.where(F.col(EXPERIMENT) == experiment)


@dataclass(frozen=True)
class Assigned:
    """One experiment's side of the assignments table: its distinct user ids, one of them, and the day (in the
    session's time zone) of its earliest ``assigned_at`` (None without the column or a value)."""

    ids: int
    example: str | None
    first_day: dt.date | None = None


def assigned_experiments(assignments: DataFrame) -> tuple[dict[str, Assigned], dict[str, str]]:
    """({experiment: :class:`Assigned`}, {experiment: layer}) from one aggregation of the assignments.

    Each experiment's distinct ids and one of them (named when none matches an exposure), its layer (the
    greatest, should an experiment name several; none without a ``layer`` column), and the date of its earliest
    ``assigned_at`` (the experiment's first day, :mod:`.cumulative`).
    """
    has_layer = LAYER in assignments.columns
    has_time = ASSIGNED_AT in assignments.columns
    per_experiment = (
        assignments.groupBy(EXPERIMENT)
        .agg(
            F.count_distinct(USER).alias("ids"),
            F.min(USER).alias("example"),
            *([F.max(LAYER).alias(LAYER)] if has_layer else []),
            *([F.to_date(F.min(ASSIGNED_AT)).alias(ASSIGNED_AT)] if has_time else []),
        )
        .collect()
    )
    assigned = {
        r[EXPERIMENT]: Assigned(int(r["ids"]), r["example"], r[ASSIGNED_AT] if has_time else None)
        for r in per_experiment
    }
    layers = {r[EXPERIMENT]: r[LAYER] for r in per_experiment if has_layer and r[LAYER] is not None}
    return assigned, layers
