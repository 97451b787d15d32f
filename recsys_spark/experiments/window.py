"""The experiment window: one experiment analysed over a range of days already evaluated.

``recsys-spark experiment`` runs :func:`run_window`: it reads the daily ``experiment_users`` tables of the
complete days (:func:`recsys_spark.experiments.user_sums.read_user_tables`), counts each user once over the window
(:func:`window_users`), analyses it as the daily stage does (:mod:`.covariates`, :mod:`.analysis`,
:mod:`.decisions`), and writes ``experiment_window/experiment=NAME/window=S_E`` and
``experiment_window_checks/...`` through the same staged commit as the daily tables
(:func:`recsys_spark.io.output.open_wing`, :data:`recsys_spark.tables.WINDOW`).  docs/experiments.md.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config
from recsys_spark.errors import MissingInputError
from recsys_spark.experiments.analysis import Analysis, analyse, metric_specs, specs_with_columns, status_and_notes
from recsys_spark.experiments.assignments import explode_variants
from recsys_spark.experiments.covariates import add_pre_period
from recsys_spark.experiments.decisions import decisions
from recsys_spark.experiments.tables import (
    EXPERIMENT,
    USERS_TABLE,
    VARIANT,
    WINDOW_CHECKS_SCHEMA,
    WINDOW_DECISIONS_SCHEMA,
    WINDOW_RESULTS_SCHEMA,
    check_tuples,
    decision_tuples,
    result_tuples,
)
from recsys_spark.experiments.user_sums import read_user_tables, skipped_note
from recsys_spark.io.output import Output, open_wing, writing
from recsys_spark.kernels.decisions import Decision
from recsys_spark.kernels.metric_specs import is_indicator
from recsys_spark.runtime.session import apply_time_zone
from recsys_spark.schema import SLICE, USER
from recsys_spark.tables import WINDOW, check_name, window_span


def run_window(
    spark: SparkSession, cfg: Config, experiment: str, start: dt.date, end: dt.date, output_root: str
) -> dict[str, Any]:
    """``recsys-spark experiment``: the experiment over [start, end] from the daily ``experiment_users``.

    Writes ``{output_root}/experiment_window/experiment=NAME/window=S_E/`` (the
    ``experiments`` table's columns but ``experiment``), ``experiment_window_checks/...`` (srm,
    multiple_assignment, compared) and ``experiment_window_decisions/...`` (the ship decision of each
    variant over the window, :func:`recsys_spark.experiments.decisions.decisions`); returns the summary section.
    """
    check_name(experiment, "experiment")  # experiment=NAME: a directory of the window's tables
    apply_time_zone(spark, cfg.validation.time_zone)
    days = [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]
    incomplete: list[dt.date] = []
    partial: list[str] = []  # sums some days lack (an older release's partitions): left out
    users, found = read_user_tables(spark, output_root, days, incomplete, partial)
    if users is None:
        raise MissingInputError(
            f"no {USERS_TABLE} partition between {start} and {end} under {output_root} "
            "(daily runs with an assignments table write them)"
        )
    written_ks = sorted(int(c[len("hits_at_") :]) for c in users.columns if c.startswith("hits_at_"))
    specs, notes = metric_specs(cfg, written_ks)
    specs, missing = specs_with_columns(specs, users.columns)
    notes += partial + missing
    rows = window_users(users, experiment)
    cuped = cfg.experiments.cuped_days > 0
    notes.append(f"{len(found)} of {len(days)} day(s) found{skipped_note(incomplete)}")
    if cuped:
        rows, pre = add_pre_period(spark, output_root, rows, specs, start, cfg.experiments.cuped_days)
        notes.append(
            f"CUPED covariate from {len(pre.found)} of the {cfg.experiments.cuped_days} day(s) before {start}"
            + skipped_note(pre.incomplete)
        )
        notes += pre.notes
    rows = rows.persist()
    try:
        analysis = analyse(rows, cfg, specs, cuped)
    finally:
        rows.unpersist()
    if experiment not in analysis.section:
        raise MissingInputError(
            f"experiment {experiment!r} has no assigned user with an exposure between "
            f"{start} and {end} in {output_root}/{USERS_TABLE} (a daily run whose assignment ids matched no exposure "
            f"names both sides' ids in the experiment_checks row 'compared')"
        )
    decided = [replace(d, basis="window") for d in decisions(analysis, cfg) if d.experiment == experiment]
    span = window_span(start, end)
    with writing(open_wing(spark, WINDOW, output_root, cfg.output, experiment=experiment, window=span)) as out:
        stage_window(out, experiment, analysis, decided)
        out.commit()  # no summary: the decisions table, written last, says the window is complete
    status, _, more = status_and_notes(analysis.section, analysis.checks)
    notes += more
    return {
        "status": status,
        "experiment": experiment,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "days_found": [d.isoformat() for d in found],
        "notes": notes,
        "experiments": analysis.section,
        "rows": len(analysis.results),
    }


def stage_window(out: Output, experiment: str, analysis: Analysis, decided: Sequence[Decision]) -> None:
    """Stage ``experiment``'s rows of the window's three tables in ``out``, without their ``experiment`` column
    (the partition's path carries it)."""
    results_table, checks_table, decisions_table = WINDOW.tables
    own = [r[1:] for r in result_tuples(analysis.results) if r[0] == experiment]
    checks = [c[1:] for c in check_tuples(analysis.checks) if c[0] == experiment]
    out.stage_rows(results_table, own, WINDOW_RESULTS_SCHEMA)
    out.stage_rows(checks_table, checks, WINDOW_CHECKS_SCHEMA)
    out.stage_rows(decisions_table, [d[1:] for d in decision_tuples(decided, basis=False)], WINDOW_DECISIONS_SCHEMA)


def window_users(users: DataFrame, experiment: str) -> DataFrame:
    """Each (slice, user) of ``experiment`` once over the window (:func:`count_once` of its exploded rows)."""
    return count_once(explode_variants(users, experiment))


def count_once(rows: DataFrame) -> DataFrame:
    """Each (experiment, slice, user) of exploded per-user rows of several days once: sums added over the days,
    0/1 columns the largest (:func:`~recsys_spark.kernels.metric_specs.is_indicator`); ``variant`` null when the
    user had several variants (or several on one day) over them.  The window's and the accumulated sample's
    (:mod:`.cumulative`) one way of counting a user once."""
    sums = [c for c in rows.columns if c not in (SLICE, USER, EXPERIMENT, VARIANT)]
    return (
        rows.groupBy(EXPERIMENT, SLICE, USER)
        .agg(
            F.array_distinct(F.collect_list(VARIANT)).alias("vs"),
            F.max(F.col(VARIANT).isNull().cast("int")).alias("several"),
            *[(F.max(c) if is_indicator(c) else F.sum(c)).alias(c) for c in sums],  # a user is a user once
        )
        .select(
            EXPERIMENT,
            SLICE,
            USER,
            F.when((F.size("vs") == 1) & (F.col("several") == 0), F.col("vs")[0]).alias(VARIANT),
            *sums,
        )
    )
