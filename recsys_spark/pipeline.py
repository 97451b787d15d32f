"""The daily evaluation, end to end: read, validate, label, per-user, aggregate, write.

:func:`evaluate_day` takes the session and plain settings, returns the summary
dict it wrote.  Each stage is one call into a module named for it; this file
only wires them and times them.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark import catalog, fs, log, templates
from recsys_spark.aggregate import aggregate_users, metrics_frame
from recsys_spark.config import Config
from recsys_spark.errors import EmptyInputError, HardRuleViolation
from recsys_spark.aggregate import MetricRow
from recsys_spark.health import HealthResult, evaluate_health, history_paths, lorenz_frame, popularity_clicks, previous_exposures
from recsys_spark.label import deduplicate_exposures, join_feedback, label_counts, labelled_exposures
from recsys_spark.per_user import UserMetrics, bucket_count, partition_by_user, ranking_input
from recsys_spark.pooled_auc import pooled_auc
from recsys_spark.read import CLICK_COLUMNS, EXPOSURE_COLUMNS, conform, read_parquet
from recsys_spark.rules import RuleResult, as_dicts, rules_frame, scan_rules
from recsys_spark.schema import ALL, REASON, SCORE, SLICE
from recsys_spark.session import CACHE_LEVEL
from recsys_spark.slices import (PopularityCutoffs, SliceInputs, add_slice_columns, explode_slices,
                                 popularity_cutoffs, read_slice_inputs)
from recsys_spark.validate import click_checks, count_rows, day_bounds, exposure_checks, split_rows, tag_rows
from recsys_spark.write import SUMMARY, DailyOutput

#: metrics printed by the CLI and put first in the summary: (metric, k, aggregation)
HEADLINE = (
    ("auc", None, "global"),
    ("auc", None, "user_avg"),
    ("auc", None, "impression_weighted"),
    ("ndcg", 10, "user_avg"),
    ("map", 10, "user_avg"),
    ("mrr", None, "user_avg"),
    ("precision", 10, "global"),
    ("recall", 10, "global"),
    ("hit_rate", 10, "user_avg"),
    ("exposure_ctr", None, "global"),
    ("pv_failure_rate", None, "global"),
    ("gini", None, "catalog"),
)


@dataclass(frozen=True)
class InputPaths:
    exposures: str
    clicks: str
    items: str
    users: str

    @classmethod
    def resolve(cls, cfg: Config, input_root: str, date: str) -> "InputPaths":
        # [catalog hook, issue 17] {date:%Y%m%d} formats and table:NAME inputs (recsys_spark/templates.py)
        options = templates.InputSettings.of(cfg.input)
        return cls(*(templates.resolve(getattr(cfg.input, kind), input_root, date, kind, options)
                     for kind in ("exposures", "clicks", "items", "users")))


@dataclass
class Inputs:
    """The day's inputs, conformed to the expected columns (nothing read yet: Spark is lazy)."""

    exposures: DataFrame
    clicks: DataFrame
    slices: SliceInputs
    has_score: bool


@dataclass
class Validated:
    """The inputs split into rows to use and rows set aside (with ``reject_reason``), and their counts."""

    exposures: DataFrame
    clicks: DataFrame
    rejected_exposures: DataFrame
    rejected_clicks: DataFrame
    exposure_counts: dict[str, int]  # "rows" and one count per reject reason
    click_counts: dict[str, int]

    @property
    def valid_events(self) -> int:
        return _kept(self.click_counts)

    @property
    def valid_exposure_rows(self) -> int:
        return _kept(self.exposure_counts)


def _kept(counts: dict[str, int]) -> int:
    """Rows that passed every check, from the row count and the counts per reason."""
    return counts["rows"] - sum(v for k, v in counts.items() if k != "rows")


@dataclass
class Labelled:
    """Exposures joined with their feedback, sliced and partitioned by user (persisted), and the ranking input."""

    joined: DataFrame  # label.join_feedback: exposure rows and orphan events (persisted only for popularity)
    labels: dict[str, int]  # label.label_counts
    sliced: DataFrame  # one row per (exposure, slice)
    cutoffs: PopularityCutoffs | None
    by_user: DataFrame  # sliced, hash-partitioned by user and persisted: the one shuffle of exposures
    ranked: DataFrame  # by_user's exposed items with list_id and score (same partitions)
    partitions: int

    @property
    def exposures(self) -> DataFrame:
        """One row per labelled exposure (the ``all`` slice of the user partitions)."""
        return self.by_user.where(F.col(SLICE) == ALL)

    def unpersist(self) -> None:
        self.by_user.unpersist()
        self.joined.unpersist()


@dataclass
class Metrics:
    rows: list[MetricRow]
    unit_counts: dict[str, dict[str, int]]  # per slice: users and lists counted or skipped
    notes: list[str]
    buckets: int


def evaluate_day(spark: SparkSession, cfg: Config, date: dt.date, input_root: str, output_root: str) -> dict[str, Any]:
    """Evaluate one day and write its outputs; return the summary.

    read -> validate -> label (+ slices) -> per-user metrics and aggregates ->
    health -> rules -> write: each stage is a function below, timed and logged
    here.  Every table is staged and moved into place only at the end.
    """
    day = date.isoformat()
    templates.configure(templates.InputSettings.of(cfg.input))  # [catalog hook, issue 17] input.columns etc.
    paths = InputPaths.resolve(cfg, input_root, day)
    timings: dict[str, float] = {}
    out = DailyOutput(spark, output_root, day)

    with log.stage("read", timings, date=day) as info:
        inputs = read_inputs(spark, cfg, paths)
        info["has_score"] = inputs.has_score
    with log.stage("validate", timings) as info:
        valid = validate_inputs(inputs, cfg, date, paths)
        info.update(exposure_rows=valid.exposure_counts["rows"], click_rows=valid.click_counts["rows"])

    labelled = None
    try:
        with log.stage("label", timings) as info:
            labelled = label_day(spark, inputs, valid, cfg, date)
            info.update(labelled.labels)
        with log.stage("metrics", timings) as info:
            metrics = metric_stage(spark, labelled, cfg, out)
            info.update(buckets=metrics.buckets, metric_rows=len(metrics.rows))
        with log.stage("health", timings) as info:
            health = health_stage(spark, labelled, inputs, valid, cfg, date, input_root, paths)
            rows = metrics.rows + health.rows
            notes = health.notes + metrics.notes
            out.stage("lorenz", lorenz_frame(spark, health.lorenz))
            out.stage("metrics", metrics_frame(spark, rows).coalesce(1))
            info.update(health.info)
        with log.stage("rules", timings) as info:
            rule_results = rules_stage(spark, labelled, inputs, valid, cfg, date, input_root)
            out.stage("rule_checks", rules_frame(spark, rule_results).coalesce(1))
            failed_hard = [r.rule for r in rule_results if r.severity == "hard" and not r.passed]
            info.update(failed=[r.rule for r in rule_results if not r.passed])
            if cfg.validation.write_rejected:
                out.stage("rejected", rejected_rows(valid.rejected_exposures, valid.rejected_clicks))
        with log.stage("write", timings):
            summary = build_summary(cfg, day, paths, valid.exposure_counts, valid.click_counts, labelled.labels,
                                    metrics.unit_counts.get(ALL, {}), rows, timings)
            summary["rules"] = as_dicts(rule_results)
            summary["notes"] = notes
            if failed_hard:
                summary["status"] = "hard_rule_violated"
            out.stage_text(SUMMARY, "summary.json", json.dumps(summary, indent=2, sort_keys=False))
            out.commit()
        if cfg.output.catalog:  # [catalog hook, issue 17] publish the committed day to catalog tables
            catalog.publish(spark, cfg.output.catalog, output_root, day, summary, log.run_id(), cfg.fingerprint(),
                            cfg.output.table_format, cfg.output.write_mode)
    except BaseException:
        out.abort()
        raise
    finally:
        if labelled is not None:
            labelled.unpersist()
    log.event("done", date=day, status=summary["status"],
              **{k: summary["headline"][k] for k in list(summary["headline"])[:4]})
    if failed_hard and cfg.rules.fail_on_hard:
        raise HardRuleViolation(f"{day}: hard business rules violated: {', '.join(failed_hard)} "
                                f"(outputs written; see rule_checks/dt={day})")
    return summary


# --- the stages ---------------------------------------------------------------------------------
def read_inputs(spark: SparkSession, cfg: Config, paths: InputPaths) -> Inputs:
    """The exposures and clicks partitions, and the items/users tables the slices and health need.

    A missing partition or column is an :class:`~recsys_spark.errors.InputError` here, before any work.
    """
    raw_exposures = read_parquet(spark, paths.exposures, "exposures partition")
    slice_inputs = read_slice_inputs(spark, cfg.slices.names, raw_exposures.columns, paths.items, paths.users)
    exposures = conform(raw_exposures, EXPOSURE_COLUMNS, paths.exposures, keep=slice_inputs.dims.exposure)
    clicks = conform(read_parquet(spark, paths.clicks, "clicks partition"), CLICK_COLUMNS, paths.clicks)
    return Inputs(exposures, clicks, slice_inputs, SCORE in exposures.columns)


def validate_inputs(inputs: Inputs, cfg: Config, date: dt.date, paths: InputPaths) -> Validated:
    """Tag every row with its first failed check, count rows per reason (one job per input), split."""
    bounds = day_bounds(date, cfg.validation.ts_tolerance_minutes)
    exposures = tag_rows(inputs.exposures, exposure_checks(inputs.has_score, bounds))
    clicks = tag_rows(inputs.clicks, click_checks(bounds))
    exposure_counts = count_rows(exposures, "exposures partition", paths.exposures)
    click_counts = count_rows(clicks, "clicks partition", paths.clicks)
    if exposure_counts["rows"] == 0:
        raise EmptyInputError(f"empty input exposures partition (0 rows): {paths.exposures}")
    good_exposures, rejected_exposures = split_rows(exposures)
    good_clicks, rejected_clicks = split_rows(clicks)
    return Validated(good_exposures, good_clicks, rejected_exposures, rejected_clicks, exposure_counts, click_counts)


def label_day(spark: SparkSession, inputs: Inputs, valid: Validated, cfg: Config, date: dt.date) -> Labelled:
    """Deduplicate, attach slice columns, attribute feedback, explode the slices and partition them by
    user, persisted: the one shuffle of exposures, which the counts here, the metrics, the health
    indicators and the rules all read in place.

    Only those partitions are kept: the orphan events are counted from the valid events instead of
    read (see :func:`label.label_counts`), and the join itself is persisted only when the popularity
    slice needs a pass over it first (its cut-offs).
    """
    deduplicated = (deduplicate_exposures(valid.exposures)
                    .transform(add_slice_columns, inputs.slices, date, cfg.slices.new_user_days))
    joined = join_feedback(deduplicated, valid.clicks, cfg.attribution.window_minutes, cfg.labels.event_weights,
                           cfg.labels.click_event)
    cutoffs = None
    if "popularity" in cfg.slices.names:
        joined = joined.persist(CACHE_LEVEL)
        cutoffs = popularity_cutoffs(labelled_exposures(joined), cfg.slices.popularity_head_share,
                                     cfg.slices.popularity_tail_share)
    sliced = explode_slices(labelled_exposures(joined), inputs.slices.dims, cutoffs)
    # each exposure comes once under "all" and at most once more per slice dimension; the valid rows
    # (before deduplication) bound the exposures
    partitions = bucket_count(valid.valid_exposure_rows * (1 + len(cfg.slices.names)), cfg.execution.rows_per_bucket,
                              spark.sparkContext.defaultParallelism)
    by_user = partition_by_user(sliced, partitions)
    labelled = Labelled(joined, {}, sliced, cutoffs, by_user,
                        ranking_input(by_user, cfg.ranking.list_unit, inputs.has_score), partitions)
    labelled.labels = label_counts(labelled.exposures, valid.valid_events)  # builds the user partitions
    return labelled


def metric_stage(spark: SparkSession, labelled: Labelled, cfg: Config, out: DailyOutput) -> Metrics:
    """Per-user table (staged as ``user_metrics``) in one pass, then every aggregate from its sums."""
    ks = cfg.metrics.k
    users = UserMetrics(labelled.ranked, ks, cfg.metrics.ndcg_gain, None, cfg.execution.max_user_rows,
                        cfg.execution.rows_per_bucket, cfg.ranking.list_unit)
    staged_users = out.stage("user_metrics", users.frame)  # the one pass over labelled exposures
    heavy = users.heavy_frame()  # users past execution.max_user_rows, if any: bounded path
    if heavy is not None:
        heavy.write.mode("append").parquet(staged_users)
    pooled = pooled_auc(labelled.ranked)
    rows, unit_counts = aggregate_users(users.moments(), ks, pooled)  # sums gathered by the pass
    unit_counts.setdefault(ALL, {}).update(users.counts())
    return Metrics(rows, unit_counts, users.notes(), labelled.partitions)


def health_stage(spark: SparkSession, labelled: Labelled, inputs: Inputs, valid: Validated, cfg: Config,
                 date: dt.date, input_root: str, paths: InputPaths) -> HealthResult:
    """Health and business indicators per slice, with the previous day (update rate) and the
    clicks of the last ``health.novelty_days`` days (novelty) when they exist."""
    (prev_day, prev_path), = history_paths(cfg.input.exposures, input_root, date, 1)
    tolerance = cfg.validation.ts_tolerance_minutes
    previous, update_note = previous_exposures(spark, prev_day, prev_path, tolerance)
    popularity, novelty_note = popularity_clicks(
        spark, history_paths(cfg.input.clicks, input_root, date, cfg.health.novelty_days), valid.clicks,
        cfg.labels.click_event, tolerance)
    health = evaluate_health(spark, labelled.by_user, inputs.slices.dims, inputs.slices.catalog,
                             min_list_length=cfg.health.min_list_length, lorenz_points=cfg.health.lorenz_points,
                             popularity=popularity, previous=previous, cutoffs=labelled.cutoffs,
                             items_path=paths.items)
    if labelled.cutoffs is not None:
        health.info.update(popularity_head_min=labelled.cutoffs.head_min,
                           popularity_tail_max=labelled.cutoffs.tail_max)
    health.notes += [novelty_note] + ([update_note] if update_note else [])
    return health


def rules_stage(spark: SparkSession, labelled: Labelled, inputs: Inputs, valid: Validated, cfg: Config,
                date: dt.date, input_root: str) -> list[RuleResult]:
    """Every business rule that applies (see :mod:`recsys_spark.rules`)."""
    counts = {"exposure_rows": valid.exposure_counts["rows"], "bad_score": valid.exposure_counts.get("bad_score", 0),
              "valid_events": valid.valid_events, **labelled.labels}
    return scan_rules(
        labelled.exposures, counts, has_catalog=inputs.slices.catalog is not None,
        has_score=inputs.has_score, blacklist_items=cfg.rules.blacklist_items,
        blacklist_categories=cfg.rules.blacklist_categories, bot_requests_per_user=cfg.rules.bot_requests_per_user,
        thresholds=threshold_settings(cfg), previous_exposure_rows=previous_rows(spark, cfg, input_root, date),
        rejected_exposures=valid.rejected_exposures)


def previous_rows(spark: SparkSession, cfg: Config, input_root: str, date: dt.date) -> int | None:
    """Exposure rows of the day before (from Parquet metadata), or None when that partition is absent."""
    path = InputPaths.resolve(cfg, input_root, (date - dt.timedelta(days=1)).isoformat()).exposures
    if not fs.exists(spark, path):
        return None
    if templates.is_table(path):  # [catalog hook, issue 17] the previous day's table partition
        return catalog.table_frame(spark, path).count()
    return spark.read.parquet(path).count()


def threshold_settings(cfg: Config) -> dict[str, float]:
    return {name: value for name, value in cfg.to_dict()["rules"].items() if name.startswith("max_")}


def rejected_rows(exposures: DataFrame, clicks: DataFrame) -> DataFrame:
    """Set-aside rows of both inputs in one table: source, reason, and the row as JSON."""
    def tidy(df: DataFrame, source: str) -> DataFrame:
        payload = F.to_json(F.struct(*[c for c in df.columns if c != REASON]))
        return df.select(F.lit(source).alias("source"), F.col(REASON).alias("reason"), payload.alias("row"))
    return tidy(exposures, "exposures").unionByName(tidy(clicks, "clicks"))


def build_summary(cfg: Config, day: str, paths: InputPaths, exposure_counts: dict, click_counts: dict,
                  labels: dict, unit_counts: dict, rows: list, timings: dict) -> dict[str, Any]:
    """The one file a scheduler or an alert reads: headline metrics and data-quality counts."""
    by_key = {(r.metric, r.k, r.aggregation): r.value for r in rows if r.slice == ALL}
    headline = {_headline_name(m, k, a): by_key.get((m, k, a)) for m, k, a in HEADLINE}
    return {
        "date": day,
        "status": "ok",
        "config_hash": cfg.fingerprint(),
        "inputs": {"exposures": paths.exposures, "clicks": paths.clicks},
        "headline": headline,
        "input_rows": {"exposures": exposure_counts["rows"], "clicks": click_counts["rows"]},
        "data_quality": {
            "rejected_exposures": {k: v for k, v in exposure_counts.items() if k != "rows"},
            "rejected_clicks": {k: v for k, v in click_counts.items() if k != "rows"},
            **labels,
            **unit_counts,
        },
        "seconds": dict(timings),
        "config": cfg.to_dict(),
    }


def _headline_name(metric: str, k: int | None, aggregation: str) -> str:
    return f"{metric}{'@' + str(k) if k else ''}_{aggregation}"


def read_summary(spark: SparkSession, output_root: str, date: str) -> dict[str, Any]:
    """The summary a previous run wrote for ``date``."""
    return json.loads(fs.read_text(spark, f"{output_root.rstrip('/')}/{SUMMARY}/dt={date}/summary.json"))
