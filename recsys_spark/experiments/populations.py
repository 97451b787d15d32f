"""Who is in a test (docs/experiments.md, "Populations"): an experiment's ``population``
(``experiments.per_experiment.NAME.population = "region = 'north' AND user_type = 'new'"``), a Spark SQL condition
on the exposures' or the users table's columns, restricts the experiment to the users it admits.

**A user is in an experiment's population on a day when at least one of its labelled exposures of that day
meets the condition** (the users table's columns joined to each exposure by ``user_id``; a null result is
false).  Its assignment to that experiment is kept for the day only then (:func:`restrict`): the user's
``variants`` in ``experiment_users`` hold the experiment only on the days it was in the population, so that SRM,
every statistic, the decisions, the accumulated users, the window and the interactions all see the population
only.  The condition went through :func:`recsys_spark.config.sql_guard.check_expression` at config load and
Spark's analysis before any row was read (:func:`recsys_spark.daily.stages.check_populations`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.experiments.tables import EXPERIMENT
from recsys_spark.schema import EXPOSED, USER


def population_frame(rows: DataFrame, kept: Mapping[str, str], conditions: Sequence[str]) -> DataFrame:
    """``user_id`` and one column ``_p<i>`` per condition (a boolean, null as false) on each of ``rows`` (the
    labelled exposures), whose kept input columns are renamed to the names the conditions read (``kept``: name ->
    its column on the rows, :meth:`recsys_spark.steps.slices.KeptColumns.internal`)."""
    named = rows.select(USER, *[F.col(internal).alias(name) for name, internal in kept.items()])
    return named.select(
        USER, *[F.coalesce(F.expr(f"({c})"), F.lit(False)).alias(f"_p{i}") for i, c in enumerate(conditions)]
    )


def members(rows: DataFrame, kept: Mapping[str, str], populations: Mapping[str, str]) -> DataFrame:
    """(user_id, experiment): each user with a labelled exposure of the day that meets the experiment's
    population.  One aggregation by user over the day's exposure rows (only when a population is configured)."""
    names = list(populations)
    exposures = rows.where(F.col(EXPOSED)) if EXPOSED in rows.columns else rows
    flags = population_frame(exposures, kept, [populations[n] for n in names])
    per_user = flags.groupBy(USER).agg(*[F.bool_or(f"_p{i}").alias(f"_p{i}") for i in range(len(names))])
    which = F.array(*[F.when(F.col(f"_p{i}"), F.lit(n)) for i, n in enumerate(names)])
    return per_user.select(USER, F.explode(F.filter(which, lambda x: x.isNotNull())).alias(EXPERIMENT))


def restrict(assignments: DataFrame, admitted: DataFrame, populations: Mapping[str, str]) -> DataFrame:
    """The assignments with those of an experiment that has a population kept only for the users ``admitted``
    (:func:`members`) to it; the other experiments' untouched."""
    names = list(populations)
    inside = F.col(EXPERIMENT).isin(names)
    kept = assignments.where(inside).join(admitted, on=[USER, EXPERIMENT], how="left_semi")
    return assignments.where(~inside).unionByName(kept)


def turned_away(
    populations: Mapping[str, str], assignments: DataFrame, rows: DataFrame | None
) -> Callable[[str], tuple[str, int] | None]:
    """For an experiment left without users: its population and how many of its ``assignments`` (before the
    populations were applied) had a valid row of the day among ``rows`` (the labelled exposures); None without a
    population.  One small query per call, made only then (:func:`recsys_spark.experiments.analysis.analyse`)."""

    def count(name: str) -> tuple[str, int] | None:
        if name not in populations or rows is None:
            return None
        day_users = rows.select(USER).distinct()
        ids = assignments.where(F.col(EXPERIMENT) == name).select(USER).distinct()
        return populations[name], ids.join(day_users, on=USER, how="left_semi").count()

    return count
