"""The day, end to end: the one orchestrator of ``recsys-spark evaluate`` (and ``simulate``), on any engine.

read -> validate -> label (+ slices) -> per-user metrics and aggregates -> experiments -> health ->
rules -> summary -> commit.  Each stage is one call into :mod:`recsys_spark.daily.stages` (or a step
module), timed and logged here; every table goes through the day's output
(:func:`recsys_spark.io.output.open_output`): the path output with its lock, staging and atomic commit on a
classic session, a scratch output on Spark Connect.

A simulated day (``recsys-spark simulate``, docs/ope.md) is the same day with a candidate's lists for the
logged requests and no feedback: everything that needs none (health, the rules but the feedback ones),
nothing that does, written under ``simulation/{table}/run=NAME/dt=D``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import SparkSession

from recsys_spark.config import Config
from recsys_spark.daily.day import Day, InputPaths, Metrics, Simulation
from recsys_spark.daily.inputs import read_history, read_inputs, read_simulated_inputs, rejected_rows
from recsys_spark.daily.stages import (
    check_custom_rules,
    health_stage,
    label_day,
    label_planning,
    metric_stage,
    outside_label,
    rules_stage,
    validate_inputs,
)
from recsys_spark.daily.summary import build_summary, day_notes
from recsys_spark.errors import HardRuleViolation
from recsys_spark.experiments.stage import ExperimentResult, experiment_stage
from recsys_spark.io import catalog
from recsys_spark.io.output import commit_summary, open_wing
from recsys_spark.per_user.aggregate import metric_tuples
from recsys_spark.registry import needs_feedback
from recsys_spark.runtime import log
from recsys_spark.runtime.engine import default_parallelism
from recsys_spark.runtime.session import apply_time_zone
from recsys_spark.schema import LORENZ_DDL, METRICS_DDL, RULE_CHECKS_DDL
from recsys_spark.steps.rules import FEEDBACK_RULES, rule_tuples
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
    (:func:`recsys_spark.io.output.open_output`).  Before anything is computed the output is opened
    (on a classic session: the date's lock taken, which proves the root writable); every table is
    staged, and moved into place together at the end.  A hard rule violation raises
    :class:`~recsys_spark.errors.HardRuleViolation` after everything is written
    (``rules.fail_on_hard``).
    """
    iso = date.isoformat()
    apply_time_zone(spark, cfg.validation.time_zone)
    paths = InputPaths.resolve(cfg, input_root, iso)
    simulation = None if simulation_run is None else Simulation.resolve(cfg, simulation_run, input_root, iso)
    if simulation is None:
        out = open_wing(spark, DAILY, output_root, cfg.output, dt=iso)
    else:
        out = open_wing(spark, SIMULATION, output_root, cfg.output, run=simulation.run, dt=iso)
    out.refuse_inputs_inside(
        [paths.exposures, paths.clicks, paths.items, paths.users, *([simulation.lists] if simulation else [])]
    )
    timings: dict[str, float] = {}
    labelled, metrics = None, None
    with log.stage("read", timings, date=iso) as info:
        if simulation is None:
            inputs = read_inputs(spark, cfg, paths)
        else:
            inputs = read_simulated_inputs(spark, cfg, paths, simulation)
            info.update(inputs.simulated or {})
        check_custom_rules(spark, inputs, cfg, date)  # a rule Spark cannot evaluate fails here: no lock, no row read
        out.acquire()  # writable output root, one run per date: checked before any computation
        info["has_score"] = inputs.has_score
        try:
            history = read_history(spark, cfg, input_root, date, feedback=simulation is None)
        except BaseException:
            out.abort()
            raise
        info.update(provisional=history.provisional, swept_staging=out.swept)
    try:
        with log.stage("validate", timings) as info, outside_label(spark, cfg, 2 * default_parallelism(spark)):
            valid = validate_inputs(spark, inputs, cfg, date, paths)
            info.update(exposure_rows=valid.exposure_counts["rows"], click_rows=valid.click_counts["rows"])
        day = Day(date, paths, inputs, valid, history)
        with log.stage("label", timings) as info, label_planning(spark, cfg, valid):
            labelled = label_day(spark, day, cfg)
            info.update(labelled.labels)
        with outside_label(spark, cfg, labelled.partitions):  # the user partitions are read in place
            if simulation is None:
                with log.stage("metrics", timings) as info:
                    metrics = metric_stage(labelled, cfg, out)
                    info.update(buckets=metrics.buckets, metric_rows=len(metrics.rows))
                with log.stage("experiments", timings) as info:  # from the metric stage's pass
                    experiments = experiment_stage(spark, cfg, date, input_root, metrics.day_sums, out)
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
                info.update(health.info)
            with log.stage("rules", timings) as info:
                results = rules_stage(labelled, day, cfg, out.root) + experiments.rules
                if simulation is not None:  # no feedback by design: its rules do not apply
                    results = [r for r in results if r.rule not in FEEDBACK_RULES]
                out.stage_rows("rule_checks", rule_tuples(results), RULE_CHECKS_DDL)
                info.update(failed=[r.rule for r in results if not r.passed])
                if cfg.validation.write_rejected:
                    out.stage("rejected", rejected_rows(valid.rejected_exposures, valid.rejected_clicks))
        with log.stage("write", timings):
            notes = health.notes + metrics.notes + day_notes(day, out) + experiments.notes
            summary = build_summary(
                cfg, day, labelled, metrics, rows, results, notes, experiments.summary, timings, simulation
            )
            commit_summary(out, DAILY if simulation is None else SIMULATION, summary)
        if cfg.output.catalog and simulation is None:  # publish the committed day to catalog tables (docs/catalog.md)
            catalog.publish(spark, cfg.output, output_root, iso, out.tables, summary, log.run_id(), cfg.fingerprint())
    except BaseException:
        out.abort()
        raise
    finally:
        if labelled is not None:
            labelled.unpersist()
        if metrics is not None and metrics.user_pass is not None:
            metrics.user_pass.unpersist()
    log.event("done", date=iso, status=summary["status"], **dict(list(summary["headline"].items())[:4]))
    failed_hard = [r.rule for r in results if r.severity == "hard" and not r.passed]
    if failed_hard and cfg.rules.fail_on_hard:
        raise HardRuleViolation(
            f"{iso}: hard business rules violated: {', '.join(failed_hard)} (outputs written; see "
            f"{DAILY.relative('rule_checks', dt=iso)})"
        )
    return summary
