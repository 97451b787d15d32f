"""The day's experiments: the stage :mod:`recsys_spark.daily` calls after the metric stage.

:func:`experiment_stage`:

1. read ``experiments.assignments`` (``user_id, experiment, variant[, layer]``, :mod:`.assignments`); when the
   path does not exist, nothing else happens and the summary says so;
2. the day's per-user sums (the metric stage's, :attr:`daily.day.Metrics.day_sums`) with each user's
   ``variants`` (:func:`.user_sums.user_day_table`), staged as ``experiment_users/dt=D``: what the window
   command and CUPED read later;
3. one row per (experiment, slice, user), with CUPED's pre-period covariates (:mod:`.covariates`) when
   ``experiments.cuped_days`` > 0; :func:`.analysis.analyse` aggregates them by arm (only small sums reach the
   driver, :mod:`.arm_sums`) and gives the result rows and the checks, :mod:`.checks` the layers', and
   :mod:`.decisions` each variant's ship decision;
4. the experiments' accumulated users since their first days (:mod:`.cumulative`): the nightly decision of an
   experiment whose sample spans several days is made on them (``basis`` ``cumulative``), else on the day's;
5. with layers, every pair of experiments in different layers' interaction contrasts (:mod:`.interactions`);
6. ``experiments``, ``experiment_checks``, ``experiment_cumulative``, ``experiment_decisions`` and
   ``experiment_interactions`` staged (:mod:`.tables`), and the summary's section, its business rules (SRM,
   compared, interaction) and notes returned.

The window (:func:`recsys_spark.experiments.window.run_window`, ``recsys-spark experiment``) runs steps 3 and 5
over the ``experiment_users`` of a range of days.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config, templates
from recsys_spark.experiments.analysis import Analysis, analyse, metric_specs, specs_with_columns, status_and_notes
from recsys_spark.experiments.assignments import assigned_experiments, explode_variants, read_assignments
from recsys_spark.experiments.checks import layer_checks, mismatched, srm_rules
from recsys_spark.experiments.covariates import add_pre_period
from recsys_spark.experiments.cumulative import accumulate, cumulative_rows, decide
from recsys_spark.experiments.decisions import decisions
from recsys_spark.experiments.interactions import INTERACTIONS_TABLE, cell_sums, interaction_rows, interaction_rules
from recsys_spark.experiments.populations import members, restrict, turned_away
from recsys_spark.experiments.tables import (
    CHECKS_SCHEMA,
    CHECKS_TABLE,
    CUMULATIVE_SCHEMA,
    CUMULATIVE_TABLE,
    DECISIONS_SCHEMA,
    DECISIONS_TABLE,
    RESULTS_SCHEMA,
    RESULTS_TABLE,
    USERS_TABLE,
    Check,
    check_tuples,
    decision_tuples,
    result_tuples,
)
from recsys_spark.experiments.user_sums import skipped_note, user_day_table
from recsys_spark.io.output import Output
from recsys_spark.io.read import exists
from recsys_spark.kernels.decisions import Decision
from recsys_spark.kernels.experiments import ResultRow
from recsys_spark.schema import ALL, EXPERIMENT_INTERACTIONS_DDL, SLICE, USER
from recsys_spark.steps.rules import RuleResult


@dataclass
class ExperimentResult:
    """What the pipeline needs back: summary section, rules, notes, log fields, and the rows written."""

    summary: dict[str, Any]
    rules: list[RuleResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    rows: list[ResultRow] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)


def experiment_stage(
    spark: SparkSession,
    cfg: Config,
    date: dt.date,
    input_root: str,
    day_sums: DataFrame | None,
    out: Output,
    exposures: tuple[DataFrame, Mapping[str, str]] | None = None,
) -> ExperimentResult:
    """The day's experiments: stage ``experiment_users``, ``experiments``, ``experiment_checks``,
    ``experiment_decisions`` and ``experiment_interactions``.

    ``day_sums``: one row per (slice, user) with its day sums (the metric stage's
    :attr:`daily.day.Metrics.day_sums`).  ``exposures``: the day's labelled exposure rows and their kept input
    columns (name -> column), read only when an experiment has a population (:mod:`.populations`).  Without an
    assignments table, returns a summary section that says so and stages nothing.
    """
    ex = cfg.experiments
    path = templates.resolve(ex.assignments, input_root, date, "assignments", templates.InputSettings.of(cfg.input))
    if not exists(spark, path):
        note = f"no assignments table at {path}: experiments skipped"
        return ExperimentResult(
            {"status": "skipped", "assignments": path, "note": note}, notes=[note], info={"skipped": True}
        )
    specs, notes = metric_specs(cfg, cfg.metrics.k)
    assignments = read_assignments(spark, path, cfg.input.columns)
    assigned, layers = assigned_experiments(assignments)
    populations = ex.populations()
    before_populations = assignments
    if populations:
        if exposures is None:
            raise ValueError("an experiment's population needs the day's labelled exposures")
        assignments = restrict(assignments, members(exposures[0], exposures[1], populations), populations)
    if day_sums is None:
        raise ValueError("the experiments need the metric stage's day sums")
    table = user_day_table(day_sums, assignments)
    staged = out.stage(USERS_TABLE, table)
    users = spark.read.schema(table.schema).parquet(staged)  # read back as written: no inference job
    specs, missing = specs_with_columns(specs, users.columns)
    notes += missing
    rows = explode_variants(users)
    cuped = ex.cuped_days > 0
    if cuped:
        rows, pre = add_pre_period(spark, out.root, rows, specs, date, ex.cuped_days)
        notes.append(
            f"CUPED covariate from {len(pre.found)} of the {ex.cuped_days} previous day(s)' {USERS_TABLE} "
            f"tables{': none found, no adjustment' if not pre.found else ''}" + skipped_note(pre.incomplete)
        )
        notes += pre.notes

    def exposure_example() -> str | None:
        first = users.where(F.col(SLICE) == ALL).agg(F.min(USER)).first()
        return None if first is None else first[0]

    population = turned_away(populations, before_populations, exposures[0] if exposures is not None else None)
    analysis = analyse(rows, cfg, specs, cuped, assigned, exposure_example, population)
    interactions: list[tuple] = []
    if layers:
        analysis.checks.extend(layer_checks(users, layers, ex.srm_p_threshold))
        interactions, more = interaction_rows(cell_sums(users, layers, specs), layers, specs, cfg)
        notes += more
    cumulative = accumulate(spark, cfg, date, out.root, users, sorted(analysis.section), assigned, specs)
    decided = decide(decisions(analysis, cfg), analysis, cumulative, cfg)
    notes += cumulative.notes
    out.stage_rows(RESULTS_TABLE, result_tuples(analysis.results), RESULTS_SCHEMA)
    out.stage_rows(CHECKS_TABLE, check_tuples(analysis.checks), CHECKS_SCHEMA)
    out.stage_rows(CUMULATIVE_TABLE, cumulative_rows(analysis, cumulative), CUMULATIVE_SCHEMA)
    out.stage_rows(DECISIONS_TABLE, decision_tuples(decided), DECISIONS_SCHEMA)
    out.stage_rows(INTERACTIONS_TABLE, interactions, EXPERIMENT_INTERACTIONS_DDL)
    result = stage_result(cfg, path, notes, analysis, decided)
    rules, result.summary["interactions"] = interaction_rules(interactions, 1 - float(cfg.stats.confidence))
    result.rules += rules
    result.info["interaction_rows"] = len(interactions)
    for name, condition in populations.items():
        if name in result.summary["experiments"]:
            result.summary["experiments"][name]["population"] = condition
    return result


def stage_result(
    cfg: Config, path: str, notes: list[str], analysis: Analysis, decided: Sequence[Decision]
) -> ExperimentResult:
    """The day's summary section (status, the assignments' path, the experiments not compared, each
    experiment's section, the failed checks), its business rules, notes (``notes`` and the analysis'), log
    fields and rows, from the :class:`.analysis.Analysis` and the decisions."""
    results, checks, section = analysis
    status, not_compared, more = status_and_notes(section, checks)
    summary = {
        "status": status,
        "assignments": path,
        "not_compared": not_compared,
        "experiments": section,
        "checks_failed": [f"{c.check}:{c.experiment or c.detail.split(':')[0]}" for c in checks if not c.passed],
    }
    info = {
        "experiments": len(section),
        "rows": len(results),
        "srm_failed": mismatched(checks),
        "not_compared": not_compared,
        "decisions": {f"{d.experiment}/{d.variant}": d.decision for d in decided},
        "decision_basis": {f"{d.experiment}/{d.variant}": d.basis for d in decided},
    }
    ex = cfg.experiments
    rules = srm_rules(checks, ex.srm_severity, ex.srm_p_threshold)
    return ExperimentResult(summary, rules, notes + more, info, results, checks)
