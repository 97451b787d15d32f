"""The experiment window: one experiment analysed over a range of days already evaluated.

``recsys-spark experiment`` runs :func:`run_window`: it reads the daily ``experiment_users`` tables of the
complete days (:func:`recsys_spark.experiments.stage.read_user_tables`), counts each user once over the window,
analyses it as the daily stage does, and writes ``experiment_window/experiment=NAME/window=S_E`` and
``experiment_window_checks/...`` through the same staged commit as the daily tables
(:func:`recsys_spark.io.output.open_wing`, :data:`recsys_spark.tables.WINDOW`).  docs/experiments.md.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import SparkSession

from recsys_spark.config import Config
from recsys_spark.errors import MissingInputError
from recsys_spark.experiments.stage import (
    CHECKS_SCHEMA,
    USERS_TABLE,
    analyse,
    check_tuples,
    covariate_notes,
    decision_tuples,
    decisions,
    metric_specs,
    previous_days,
    read_user_tables,
    result_tuples,
    skipped_note,
    specs_with_columns,
    status_and_notes,
    window_users,
    with_covariates,
)
from recsys_spark.io.output import open_wing, writing
from recsys_spark.kernels.decisions import DECISION_COLUMNS
from recsys_spark.kernels.experiments import RESULT_COLUMNS
from recsys_spark.runtime.session import apply_time_zone
from recsys_spark.tables import WINDOW, check_name, window_span

#: the tables the window writes, one partition ``experiment=NAME/window=S_E`` each; their files hold the
#: ``experiments`` / ``experiment_checks`` columns but ``experiment``, which the path carries (a column in both
#: would make the table unreadable at its root: pandas, pyarrow and DuckDB refuse a duplicate field)
WINDOW_RESULTS_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in RESULT_COLUMNS if name != "experiment")
WINDOW_CHECKS_SCHEMA = CHECKS_SCHEMA.split(", ", 1)[1]
WINDOW_DECISIONS_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in DECISION_COLUMNS if name != "experiment")


def run_window(
    spark: SparkSession, cfg: Config, experiment: str, start: dt.date, end: dt.date, output_root: str
) -> dict[str, Any]:
    """``recsys-spark experiment``: the experiment over [start, end] from the daily ``experiment_users``.

    Writes ``{output_root}/experiment_window/experiment=NAME/window=S_E/`` (the
    ``experiments`` table's columns but ``experiment``), ``experiment_window_checks/...`` (srm,
    multiple_assignment, compared) and ``experiment_window_decisions/...`` (the ship decision of each
    variant over the window, :func:`recsys_spark.experiments.stage.decisions`); returns the summary section.
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
        pre_incomplete: list[dt.date] = []
        previous, pre_found = read_user_tables(
            spark, output_root, previous_days(start, cfg.experiments.cuped_days), pre_incomplete
        )
        notes.append(
            f"CUPED covariate from {len(pre_found)} of the {cfg.experiments.cuped_days} day(s) before {start}"
            + skipped_note(pre_incomplete)
        )
        notes += covariate_notes(previous, specs)
        rows = with_covariates(rows, previous, specs)
    rows = rows.persist()
    try:
        results, checks, section = analyse(rows, cfg, specs, cuped)
    finally:
        rows.unpersist()
    if experiment not in section:
        raise MissingInputError(
            f"experiment {experiment!r} has no assigned user with an exposure between "
            f"{start} and {end} in {output_root}/{USERS_TABLE} (a daily run whose assignment ids matched no exposure "
            f"names both sides' ids in the experiment_checks row 'compared')"
        )
    decided = [d for d in decisions(results, checks, section, cfg) if d.experiment == experiment]
    results_table, checks_table, decisions_table = WINDOW.tables
    span = window_span(start, end)
    with writing(open_wing(spark, WINDOW, output_root, cfg.output, experiment=experiment, window=span)) as out:
        own = [r[1:] for r in result_tuples(results) if r[0] == experiment]
        out.stage_rows(results_table, own, WINDOW_RESULTS_SCHEMA)
        out.stage_rows(checks_table, [c[1:] for c in check_tuples(checks) if c[0] == experiment], WINDOW_CHECKS_SCHEMA)
        out.stage_rows(decisions_table, [d[1:] for d in decision_tuples(decided)], WINDOW_DECISIONS_SCHEMA)
        out.commit()  # no summary: the decisions table, written last, says the window is complete
    status, _, more = status_and_notes(section, checks)
    notes += more
    return {
        "status": status,
        "experiment": experiment,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "days_found": [d.isoformat() for d in found],
        "notes": notes,
        "experiments": section,
        "rows": len(results),
    }
