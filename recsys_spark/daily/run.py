"""The day, end to end: the one orchestrator of ``recsys-spark evaluate`` (and ``simulate``), on any engine.

read -> validate -> label (+ slices) -> per-user metrics and aggregates -> experiments -> health ->
rules -> summary -> commit.  Each stage is one call into :mod:`recsys_spark.daily.stages` (or a step
module), timed and logged here; every table goes through the day's output
(:func:`recsys_spark.io.output.open_wing`): the path output with its lock, staging and atomic commit on a
classic session, a scratch output on Spark Connect.

A simulated day (``recsys-spark simulate``, docs/ope.md) is the same day with a candidate's lists for the
logged requests and no feedback: everything that needs none (health, the rules but the feedback ones),
nothing that does, written under ``simulation/{table}/run=NAME/dt=D``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config
from recsys_spark.daily.day import Day, History, InputPaths, Inputs, Metrics, Simulation, Validated
from recsys_spark.daily.inputs import read_history, read_inputs, read_simulated_inputs, rejected_rows
from recsys_spark.daily.stages import (
    check_custom_rules,
    check_populations,
    health_stage,
    label_day,
    label_planning,
    metric_stage,
    outside_label,
    rules_stage,
    validate_inputs,
)
from recsys_spark.daily.summary import build_summary, day_notes
from recsys_spark.daily.surveys import SurveyInput, read_survey, survey_stage, with_surveys
from recsys_spark.daily.thresholds import day_thresholds
from recsys_spark.errors import HardRuleViolation
from recsys_spark.experiments.stage import ExperimentResult, experiment_stage
from recsys_spark.io import catalog
from recsys_spark.io.output import Output, commit_summary, open_wing
from recsys_spark.per_user.aggregate import metric_tuples
from recsys_spark.per_user.composite import resolve as resolve_composites
from recsys_spark.per_user.curves import curve_rows
from recsys_spark.registry import needs_feedback
from recsys_spark.runtime import log
from recsys_spark.runtime.engine import default_parallelism
from recsys_spark.runtime.session import apply_time_zone
from recsys_spark.schema import (
    ALL,
    CONFUSION_DDL,
    LORENZ_DDL,
    METRICS_DDL,
    PR_CURVE_DDL,
    ROC_CURVE_DDL,
    RULE_CHECKS_DDL,
    SLICE,
)
from recsys_spark.steps.rules import FEEDBACK_RULES, RuleResult, rule_tuples
from recsys_spark.tables import DAILY, SIMULATION


def evaluate_day(
    spark: SparkSession,
    cfg: Config,
    date: dt.date,
    input_root: str,
    output_root: str,
    simulation_run: str | None = None,
) -> dict[str, Any]:
    """Evaluate one day and write its outputs under ``output_root``; return the summary.

    With ``simulation_run``, the day is simulated (docs/ope.md): its exposures are the candidate's lists
    of ``simulation.lists`` for the logged requests, no click is read, and no metric or rule that needs
    feedback is computed (no ``user_metrics``, ranking or business metric, experiment, ``no_feedback``
    and the other rules about the day's events); the summary says ``"simulation"``.

    The same on a classic and a Spark Connect session; only the output differs
    (:func:`recsys_spark.io.output.open_wing`).  Before anything is computed the output is opened
    (on a classic session: the date's lock taken, which proves the root writable); every table is
    staged, and moved into place together at the end.  A hard rule violation raises
    :class:`~recsys_spark.errors.HardRuleViolation` after everything is written
    (``rules.fail_on_hard``).
    """
    iso = date.isoformat()
    apply_time_zone(spark, cfg.validation.time_zone)
    paths = InputPaths.resolve(cfg, input_root, iso)
    simulation = None if simulation_run is None else Simulation.resolve(cfg, simulation_run, input_root, iso)
    layout = DAILY if simulation is None else SIMULATION
    keys = {"dt": iso} if simulation is None else {"run": simulation.run, "dt": iso}
    out = open_wing(spark, layout, output_root, cfg.output, **keys)
    out.refuse_inputs_inside(
        [paths.exposures, paths.clicks, paths.items, paths.users, *([simulation.lists] if simulation else [])]
    )
    timings: dict[str, float] = {}
    inputs, history = read_stage(spark, cfg, date, input_root, paths, simulation, out, timings)
    held: list[Any] = []  # what the day persisted: released whatever happens
    try:
        day = Day(date, paths, inputs, validate_stage(spark, cfg, date, paths, inputs, timings), history)
        summary, results = compute_stages(spark, cfg, day, input_root, simulation, out, timings, held)
        if cfg.output.catalog and simulation is None:  # publish the committed day to catalog tables (docs/catalog.md)
            catalog.publish(spark, cfg.output, output_root, iso, out.tables, summary, log.run_id(), cfg.fingerprint())
    except BaseException:
        out.abort()
        raise
    finally:
        for persisted in held:
            persisted.unpersist()
    log.event("done", date=iso, status=summary["status"], **dict(list(summary["headline"].items())[:4]))
    failed_hard = [r.rule for r in results if r.severity == "hard" and not r.passed]
    if failed_hard and cfg.rules.fail_on_hard:
        raise HardRuleViolation(
            f"{iso}: hard business rules violated: {', '.join(failed_hard)} (outputs written; see "
            f"{DAILY.relative('rule_checks', dt=iso)})"
        )
    return summary


def read_stage(
    spark: SparkSession,
    cfg: Config,
    date: dt.date,
    input_root: str,
    paths: InputPaths,
    simulation: Simulation | None,
    out: Output,
    timings: dict[str, float],
) -> tuple[Inputs, History]:
    """Read the day's inputs, check the custom rules against them (a rule Spark cannot evaluate fails here: no
    lock, no row read), take the output's lock (a writable root, one run per date: before any computation),
    then read the earlier days the day needs; the lock is released if that fails."""
    with log.stage("read", timings, date=date.isoformat()) as info:
        if simulation is None:
            inputs = read_inputs(spark, cfg, paths)
        else:
            inputs = read_simulated_inputs(spark, cfg, paths, simulation)
            info.update(inputs.simulated or {})
        check_custom_rules(spark, inputs, cfg, date)
        if simulation is None:  # a simulated day has no feedback, so no experiment: no population to check
            check_populations(spark, inputs, cfg, date)
        out.acquire()
        info["has_score"] = inputs.has_score
        try:
            history = read_history(spark, cfg, input_root, date, feedback=simulation is None)
        except BaseException:
            out.abort()
            raise
        info.update(provisional=history.provisional, swept_staging=out.swept)
    return inputs, history


def validate_stage(
    spark: SparkSession, cfg: Config, date: dt.date, paths: InputPaths, inputs: Inputs, timings: dict[str, float]
) -> Validated:
    """The row checks: invalid rows set aside and counted."""
    with log.stage("validate", timings) as info, outside_label(spark, cfg, 2 * default_parallelism(spark)):
        valid = validate_inputs(spark, inputs, cfg, date, paths)
        info.update(exposure_rows=valid.exposure_counts["rows"], click_rows=valid.click_counts["rows"])
    return valid


def compute_stages(
    spark: SparkSession,
    cfg: Config,
    day: Day,
    input_root: str,
    simulation: Simulation | None,
    out: Output,
    timings: dict[str, float],
    held: list[Any],
) -> tuple[dict[str, Any], list[RuleResult]]:
    """Label the day, then the metrics, the experiments, health and the rules over its user partitions, each
    staged; then the summary, and the commit.  What is persisted is added to ``held``."""
    survey = read_survey(spark, cfg, day.date, input_root) if simulation is None else SurveyInput()  # schema only
    with log.stage("label", timings) as info, label_planning(spark, cfg, day.valid):
        labelled = label_day(spark, day, cfg)
        held.append(labelled)
        info.update(labelled.labels)
    with outside_label(spark, cfg, labelled.partitions):  # the user partitions are read in place
        if simulation is None:
            with log.stage("metrics", timings) as info:
                composites, composite_notes = resolve_composites(spark, out.root, cfg.metrics.composite, day.date)
                metrics = metric_stage(labelled, cfg, out, composites=composites)
                if metrics.user_pass is not None:
                    held.append(metrics.user_pass)
                metrics = with_surveys(metrics, survey_stage(cfg, survey, metrics.day_sums, cfg.stats.confidence))
                at = day_thresholds(labelled.by_user, labelled.has_score, cfg.metrics, cfg.stats.confidence)
                metrics = dataclasses.replace(metrics, rows=metrics.rows + at.rows, notes=metrics.notes + at.notes)
                if at.confusion:  # a few rows per slice and threshold
                    out.stage_rows("confusion", at.confusion, CONFUSION_DDL)
                metrics.notes[:0] = composite_notes
                info.update(buckets=metrics.buckets, metric_rows=len(metrics.rows))
            with log.stage("experiments", timings) as info:  # from the metric stage's pass
                population = labelled.rows if labelled.rows is not None else labelled.by_user.where(F.col(SLICE) == ALL)
                experiments = experiment_stage(
                    spark,
                    cfg,
                    day.date,
                    input_root,
                    metrics.day_sums,
                    out,
                    (population, day.inputs.slices.kept.internal()),
                )
                info.update(experiments.info)
        else:  # a simulation has no feedback: no per-user metrics, no experiment
            metrics = Metrics([], {}, [], labelled.partitions)
            experiments = ExperimentResult({"status": "skipped", "note": "a simulated day has no feedback"})
        with log.stage("health", timings) as info:
            health = health_stage(spark, labelled, day, cfg, metrics)
            rows = metrics.rows + health.rows
            if simulation is not None:  # no feedback metric, rather than a zero CTR
                rows = [r for r in rows if not needs_feedback(r.metric)]
            out.stage_rows("lorenz", health.lorenz, LORENZ_DDL)  # small tables: one file each, no job
            out.stage_rows("metrics", metric_tuples(rows), METRICS_DDL)
            if metrics.curves is not None:  # at most metrics.curve_points rows per slice
                roc, pr = curve_rows(metrics.curves.curves)
                out.stage_rows("roc_curve", roc, ROC_CURVE_DDL)
                out.stage_rows("pr_curve", pr, PR_CURVE_DDL)
            info.update(health.info)
        with log.stage("rules", timings) as info:
            results = rules_stage(labelled, day, cfg, out.root, health.rule_counts) + experiments.rules
            if simulation is not None:  # no feedback by design: its rules do not apply
                results = [r for r in results if r.rule not in FEEDBACK_RULES]
            out.stage_rows("rule_checks", rule_tuples(results), RULE_CHECKS_DDL)
            info.update(failed=[r.rule for r in results if not r.passed])
            if cfg.validation.write_rejected:
                out.stage("rejected", rejected_rows(day.valid.rejected_exposures, day.valid.rejected_clicks))
    with log.stage("write", timings):
        notes = health.notes + metrics.notes + day_notes(day, out) + experiments.notes
        summary = build_summary(
            cfg, day, labelled, metrics, rows, results, notes, experiments.summary, timings, simulation
        )
        commit_summary(out, DAILY if simulation is None else SIMULATION, summary)
    return summary, results
