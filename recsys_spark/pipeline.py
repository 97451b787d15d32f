"""The daily evaluation, end to end: read, validate, label, per-user, aggregate, write.

:func:`evaluate_day` takes the session and plain settings, returns the summary
dict it wrote.  Each stage is one call into a module named for it; this file
only wires them and times them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark import catalog, fs, log, templates
from recsys_spark.aggregate import MetricRow, aggregate_users, metric_tuples
from recsys_spark.bootstrap import auc_bootstrap
from recsys_spark.config import Config
from recsys_spark.connect import default_parallelism
from recsys_spark.errors import EmptyInputError, HardRuleViolation, JobError, root_cause
from recsys_spark.experiments import experiment_stage
from recsys_spark.health import HealthResult, evaluate_health
from recsys_spark.label import by_user, deduplicate_exposures, join_feedback, label_counts
from recsys_spark.per_user import UserMetrics, bucket_count, persist_user_rows, ranking_input
from recsys_spark.pooled_auc import pooled_auc
from recsys_spark.read import conform, empty_frame, read_parquet
from recsys_spark.rules import RuleResult, as_dicts, rule_tuples, scan_rules
from recsys_spark.schema import (
    ALL,
    CATEGORY,
    CLICK_COLUMNS,
    EVENT,
    EXPOSURE_COLUMNS,
    HEADLINE,
    ITEM,
    ITEM_COLUMNS,
    LORENZ_DDL,
    METRICS_DDL,
    REASON,
    REQUEST,
    RULE_CHECKS_DDL,
    SCORE,
    SESSION,
    SLICE,
    TS,
    USER,
    summary_key,
)
from recsys_spark.session import CACHE_LEVEL, fixed_shuffles
from recsys_spark.slices import (
    PopularityCutoffs,
    SliceInputs,
    add_slice_columns,
    explode_slices,
    item_exposure_counts,
    popularity_cutoffs,
    read_slice_inputs,
    slice_input_columns,
    with_item_exposures,
    with_slice_keys,
)
from recsys_spark.validate import (
    click_checks,
    count_rows,
    day_bounds,
    day_start,
    exposure_checks,
    instant,
    split_rows,
    tag_rows,
)
from recsys_spark.write import SUMMARY, DailyOutput


@dataclass(frozen=True)
class InputPaths:
    exposures: str
    clicks: str
    items: str
    users: str

    @classmethod
    def resolve(cls, cfg: Config, input_root: str, date: str) -> InputPaths:
        # [catalog hook, issue 17] {date:%Y%m%d} formats and table:NAME inputs (recsys_spark/templates.py)
        options = templates.InputSettings.of(cfg.input)
        return cls(
            *(
                templates.resolve(getattr(cfg.input, kind), input_root, date, kind, options)
                for kind in ("exposures", "clicks", "items", "users")
            )
        )


@dataclass(frozen=True)
class Inputs:
    """The day's inputs, conformed to the expected columns (nothing read yet: Spark is lazy)."""

    exposures: DataFrame
    clicks: DataFrame
    slices: SliceInputs
    has_score: bool
    items: DataFrame | None = None  # the items table as read (an item may be listed twice)


@dataclass(frozen=True)
class History:
    """What the day needs from other days, read once by the read stage; every part is optional.

    ``previous``: distinct (user_id, item_id) exposed the day before (valid rows), or None;
    ``previous_rows``: exposure rows of the day before, or None; ``popularity``: (user_id, item_id)
    of the click events of the ``health.novelty_days`` days before (valid rows), or None when no such
    partition could be read (novelty then uses the day's own clicks); ``late_clicks``: the next day's
    clicks of its first ``attribution.window_minutes`` (late feedback), or None when that partition
    does not exist yet (the day is then *provisional*); ``notes`` say what was missing and why.

    A problem with any of them (missing, empty, corrupt) is a note, never a failure of the day.
    """

    previous: DataFrame | None
    previous_rows: int | None
    popularity: DataFrame | None
    late_clicks: DataFrame | None = None
    provisional: bool = False
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Validated:
    """The inputs split into rows to use and rows set aside (with ``reject_reason``), and their counts."""

    exposures: DataFrame
    clicks: DataFrame
    rejected_exposures: DataFrame
    rejected_clicks: DataFrame
    exposure_counts: dict[str, int]  # "rows" and one count per reject reason
    click_counts: dict[str, int]
    unweighted_events: dict[str, int]  # valid events per event name that has no weight
    catalog_conflicts: tuple[int, tuple[str, ...]] = (0, ())  # items listed under several categories, examples

    @property
    def valid_events(self) -> int:
        return _kept(self.click_counts)

    @property
    def valid_exposure_rows(self) -> int:
        return _kept(self.exposure_counts)


def _kept(counts: dict[str, int]) -> int:
    """Rows that passed every check, from the row count and the counts per reason."""
    return counts["rows"] - sum(v for k, v in counts.items() if k != "rows")


@dataclass(frozen=True)
class Day:
    """One day as every stage after validation sees it: its date, paths, inputs, validated rows and history."""

    date: dt.date
    paths: InputPaths
    inputs: Inputs
    valid: Validated
    history: History

    @property
    def iso(self) -> str:
        return self.date.isoformat()


@dataclass(frozen=True)
class Labelled:
    """Exposures joined with their feedback, sliced and partitioned by user (persisted), and the ranking input."""

    labels: dict[str, int]  # label.label_counts
    cutoffs: PopularityCutoffs | None
    by_user: DataFrame  # one row per (exposure, slice), hash-partitioned by user (exploded from ``rows``)
    ranked: DataFrame  # by_user's exposed items with list_id and score (same partitions)
    partitions: int
    #: what labelling persisted: the user partitions (``rows``), the next day's late events that match a
    #: late exposure; with the popularity slice, the labelled rows and the item counts its buckets come from
    persisted: tuple[DataFrame, ...] = ()
    #: one row per labelled exposure, hash-partitioned by user and persisted (None: ``by_user``'s
    #: ``all`` rows)
    rows: DataFrame | None = None
    #: with slices, ``rows`` and ``ranked`` before the explode, each row's slice keys as an array
    #: (``_slices``): what the Python passes read, exploding the keys in Arrow (one row per exposure
    #: crosses to Python, not 1 + S)
    keyed: DataFrame | None = None
    ranked_keyed: DataFrame | None = None

    @property
    def exposures(self) -> DataFrame:
        """One row per labelled exposure (the persisted user partitions, or the ``all`` slice of ``by_user``)."""
        return self.rows if self.rows is not None else all_slice(self.by_user)

    def unpersist(self) -> None:
        for df in (self.by_user, *self.persisted):
            df.unpersist()


def all_slice(by_user: DataFrame) -> DataFrame:
    return by_user.where(F.col(SLICE) == ALL)


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
    here.  Every table is staged and moved into place only at the end.  Before
    anything is computed, the output root is proved writable by taking the
    date's lock (:meth:`write.DailyOutput.acquire`).
    """
    iso = date.isoformat()
    templates.configure(templates.InputSettings.of(cfg.input))  # input.columns, partition formats
    paths = InputPaths.resolve(cfg, input_root, iso)
    timings: dict[str, float] = {}
    # the day, the hour/weekday slices and timestamps without zone are read in one explicit zone
    spark.conf.set("spark.sql.session.timeZone", cfg.validation.time_zone)
    out = DailyOutput(spark, output_root, iso, cfg.output.stale_minutes, heartbeat_seconds=cfg.output.heartbeat_seconds)
    out.refuse_inputs_inside([paths.exposures, paths.clicks, paths.items, paths.users])

    labelled = None
    with log.stage("read", timings, date=iso) as info:
        inputs = read_inputs(spark, cfg, paths)
        out.acquire()  # writable output root, one run per date: checked before any computation
        info["has_score"] = inputs.has_score
        try:
            history = read_history(spark, cfg, input_root, date)
        except BaseException:
            out.abort()
            raise
        info.update(provisional=history.provisional, swept_staging=out.swept)
    try:
        with log.stage("validate", timings) as info, outside_label(spark, cfg, 2 * default_parallelism(spark)):
            valid = validate_inputs(spark, inputs, cfg, date, paths)
            info.update(exposure_rows=valid.exposure_counts["rows"], click_rows=valid.click_counts["rows"])
        day = Day(date, paths, inputs, valid, history)
        with log.stage("label", timings) as info:
            labelled = label_day(spark, day, cfg)
            info.update(labelled.labels)
        with outside_label(spark, cfg, labelled.partitions):  # the user partitions are read in place
            with log.stage("metrics", timings) as info:
                metrics = metric_stage(labelled, cfg, out)
                info.update(buckets=metrics.buckets, metric_rows=len(metrics.rows))
            with log.stage("experiments", timings) as info:  # after user_metrics is staged: it reads it back
                experiments = experiment_stage(spark, cfg, date, input_root, labelled.by_user, out)
                info.update(experiments.info)
            with log.stage("health", timings) as info:
                health = health_stage(spark, labelled, day, cfg)
                rows = metrics.rows + health.rows
                notes = health.notes + metrics.notes + day_notes(day, out)
                out.stage_rows("lorenz", health.lorenz, LORENZ_DDL)  # small tables: one file each, no job
                out.stage_rows("metrics", metric_tuples(rows), METRICS_DDL)
                info.update(health.info)
            with log.stage("rules", timings) as info:
                rule_results = rules_stage(labelled, day, cfg) + experiments.rules
                out.stage_rows("rule_checks", rule_tuples(rule_results), RULE_CHECKS_DDL)
                failed_hard = [r.rule for r in rule_results if r.severity == "hard" and not r.passed]
                info.update(failed=[r.rule for r in rule_results if not r.passed])
                if cfg.validation.write_rejected:
                    out.stage("rejected", rejected_rows(valid.rejected_exposures, valid.rejected_clicks))
        with log.stage("write", timings):
            summary = build_summary(
                cfg,
                iso,
                paths,
                valid.exposure_counts,
                valid.click_counts,
                labelled.labels,
                metrics.unit_counts.get(ALL, {}),
                rows,
                timings,
            )
            summary["data_quality"]["unweighted_events"] = dict(valid.unweighted_events)
            summary["data_quality"]["items_in_several_categories"] = valid.catalog_conflicts[0]
            summary["rules"] = as_dicts(rule_results)
            summary["status"] = status_of(rule_results)
            summary["provisional"] = history.provisional
            summary["notes"] = notes + experiments.notes
            summary["experiments"] = experiments.summary
            out.stage_text(SUMMARY, "summary.json", summary_json(summary))
            out.commit()
        if cfg.output.catalog:  # [catalog hook, issue 17] publish the committed day to catalog tables
            catalog.publish(
                spark,
                cfg.output.catalog,
                output_root,
                iso,
                summary,
                log.run_id(),
                cfg.fingerprint(),
                cfg.output.table_format,
                cfg.output.write_mode,
            )
    except BaseException:
        out.abort()
        raise
    finally:
        if labelled is not None:
            labelled.unpersist()
    log.event(
        "done", date=iso, status=summary["status"], **{k: summary["headline"][k] for k in list(summary["headline"])[:4]}
    )
    if failed_hard and cfg.rules.fail_on_hard:
        raise HardRuleViolation(
            f"{iso}: hard business rules violated: {', '.join(failed_hard)} (outputs written; see rule_checks/dt={iso})"
        )
    return summary


def outside_label(spark: SparkSession, cfg: Config, partitions: int) -> contextlib.AbstractContextManager:
    """How validation and the stages after labelling are planned: without adaptive query execution, with
    ``partitions`` shuffle partitions (:func:`session.fixed_shuffles`), unless
    ``execution.adaptive_outside_label`` keeps the session's settings."""
    if cfg.execution.adaptive_outside_label:
        return contextlib.nullcontext()
    return fixed_shuffles(spark, partitions)


def status_of(results: Sequence[RuleResult]) -> str:
    """``ok`` only when every rule passed; else ``hard_rule_violated`` or ``soft_rule_failed``."""
    if any(r.severity == "hard" and not r.passed for r in results):
        return "hard_rule_violated"
    if any(not r.passed for r in results):
        return "soft_rule_failed"
    return "ok"


def day_notes(day: Day, out: DailyOutput) -> list[str]:
    """Notes on the day's inputs that are not metrics' own."""
    notes = []
    n, examples = day.valid.catalog_conflicts
    if n:
        notes.append(
            f"{n} items are listed under several categories in the items table; each keeps its "
            f"smallest category (e.g. {', '.join(examples)})"
        )
    if day.valid.unweighted_events:
        names = ", ".join(f"{k} ({v})" for k, v in day.valid.unweighted_events.items())
        notes.append(f"events whose name has no weight in labels.event_weights (they weigh 0): {names}")
    if out.swept:
        notes.append(f"removed staging directories of dead runs: {', '.join(out.swept)}")
    if out.recovered:
        notes.append(f"finished the commit a killed run had started: {', '.join(out.recovered)}")
    return notes


def _finite(value: Any) -> Any:
    """NaN and infinities as null: the summary is strict JSON (RFC 8259 has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def summary_json(summary: dict[str, Any]) -> str:
    return json.dumps(_finite(summary), indent=2, sort_keys=False, allow_nan=False)


# --- the stages ---------------------------------------------------------------------------------
def read_inputs(spark: SparkSession, cfg: Config, paths: InputPaths) -> Inputs:
    """The exposures and clicks partitions, and the items/users tables the slices and health need.

    A missing partition or column is an :class:`~recsys_spark.errors.InputError` here, before any work.
    A clicks partition without files is a day without feedback, like one with a zero-row file: an
    empty frame, left to the ``no_feedback`` rule.
    """
    raw_exposures = read_parquet(spark, paths.exposures, "exposures partition")
    slice_inputs = read_slice_inputs(spark, cfg.slices.names, raw_exposures.columns, paths.items, paths.users)
    exposures = conform(raw_exposures, EXPOSURE_COLUMNS, paths.exposures, keep=slice_inputs.dims.exposure)
    try:
        raw_clicks = read_parquet(spark, paths.clicks, "clicks partition")
    except EmptyInputError:
        raw_clicks = empty_frame(spark, CLICK_COLUMNS)
    clicks = conform(raw_clicks, CLICK_COLUMNS, paths.clicks)
    items = None
    if slice_inputs.catalog is not None:
        items = conform(read_parquet(spark, paths.items, "items table"), ITEM_COLUMNS, paths.items)
    return Inputs(exposures, clicks, slice_inputs, SCORE in exposures.columns, items)


def history_paths(
    template: str, input_root: str, date: dt.date, days: int, kind: str = "exposures"
) -> list[tuple[dt.date, str]]:
    """(date, location) of the ``days`` days before ``date``, most recent first (date formats and
    ``table:`` inputs as for the day itself, :func:`templates.resolve`)."""
    days_before = [date - dt.timedelta(days=back) for back in range(1, days + 1)]
    return [(day, templates.resolve(template, input_root, day, kind)) for day in days_before]


def _problem(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, JobError) else f"{type(exc).__name__}: {root_cause(exc)}"


def read_history(spark: SparkSession, cfg: Config, input_root: str, date: dt.date) -> History:
    """The other days the day needs (update_rate, exposure_change, novelty, late feedback), read once,
    validated as the day's own rows (:mod:`recsys_spark.validate`), each checked readable here (a
    count from the Parquet footers, no column read) so that a missing, empty, corrupt or truncated
    partition of another day becomes a note, never a failure of today.  A file whose footer is sound
    but whose data pages are corrupt still fails the day later (in the health stage): reading every
    earlier day's columns once more to rule that out would cost a full pass per day.
    """
    tolerance, zone = cfg.validation.ts_tolerance_minutes, cfg.validation.time_zone
    notes: list[str] = []
    ((prev_day, prev_path),) = history_paths(cfg.input.exposures, input_root, date, 1)
    previous, previous_rows = None, None
    if fs.exists(spark, prev_path):
        try:
            raw = read_parquet(spark, prev_path, "previous exposures partition")
            previous_rows = raw.count()  # from the Parquet footers: a corrupt or truncated file fails here
            conformed = conform(raw, EXPOSURE_COLUMNS, prev_path)
            tagged = tag_rows(
                conformed, exposure_checks(SCORE in conformed.columns, day_bounds(prev_day, tolerance, zone))
            )
            previous = split_rows(tagged)[0].where(F.col(ITEM).isNotNull()).select(USER, ITEM).distinct()
        except Exception as exc:  # noqa: BLE001 - an earlier day is an optional input
            previous, previous_rows = None, None
            notes.append(
                f"update_rate and exposure_change skipped: the previous day's exposures cannot be used "
                f"({_problem(exc)})"
            )
    else:
        notes.append(f"update_rate skipped: no exposures partition for the previous day {prev_day} ({prev_path})")

    click_paths = history_paths(cfg.input.clicks, input_root, date, cfg.health.novelty_days, "clicks")
    frames, used = [], []
    for day, path in click_paths:
        if not fs.exists(spark, path):
            continue
        try:
            raw = read_parquet(spark, path, "clicks partition")
            raw.count()  # footers only: a corrupt or truncated file fails here, not in the health stage
            tagged = tag_rows(conform(raw, CLICK_COLUMNS, path), click_checks(day_bounds(day, tolerance, zone)))
            frames.append(split_rows(tagged)[0])
            used.append(day.isoformat())
        except Exception as exc:  # noqa: BLE001 - an earlier day is an optional input
            notes.append(f"novelty: the clicks of {day} left out ({_problem(exc)})")
    popularity = None
    if frames:
        popularity = click_events(frames, cfg.labels.click_event)
        notes.insert(
            0,
            f"novelty: item popularity from the clicks of {len(frames)} of the {len(click_paths)} "
            f"previous days ({min(used)}..{max(used)})",
        )
    else:
        notes.insert(
            0,
            f"novelty: no clicks partition in the {len(click_paths)} previous days; "
            "item popularity from the same day's clicks",
        )
    late, provisional = read_late_clicks(spark, cfg, input_root, date, notes)
    return History(previous, previous_rows, popularity, late, provisional, tuple(notes))


def read_late_clicks(
    spark: SparkSession, cfg: Config, input_root: str, date: dt.date, notes: list[str]
) -> tuple[DataFrame | None, bool]:
    """The next day's clicks of its first ``attribution.window_minutes`` (a click at 00:05 on an
    exposure shown at 23:58), and whether the day is provisional (that partition is not there yet,
    or cannot be read: a rerun once it exists completes the day)."""
    window = cfg.attribution.window_minutes
    next_day = date + dt.timedelta(days=1)
    path = templates.resolve(cfg.input.clicks, input_root, next_day, "clicks")
    if window <= 0:
        return None, False
    if not fs.exists(spark, path):
        notes.append(
            f"provisional: no clicks partition for {next_day} yet ({path}); feedback after midnight on "
            f"the last {window:g} minutes of exposures is missing; rerun the day once it exists"
        )
        return None, True
    try:
        clicks = conform(read_parquet(spark, path, "next day's clicks partition"), CLICK_COLUMNS, path)
    except Exception as exc:  # noqa: BLE001 - the next day is an optional input
        notes.append(
            f"provisional: the clicks of {next_day} cannot be read ({_problem(exc)}); feedback after "
            "midnight is missing"
        )
        return None, True
    start = day_start(next_day, cfg.validation.time_zone)
    bounds = (start, start + dt.timedelta(minutes=window))
    return split_rows(tag_rows(clicks, click_checks(bounds)))[0], False


def late_events(day: Day, window_minutes: float, time_zone: str) -> DataFrame | None:
    """The next day's late events that can belong to the day: those matching (by user, request and item,
    or by user, session and item: the attribution's keys) an exposure of the day's last ``window_minutes``
    -- a small join of two small sides, so that the next day's own clicks are not counted as the day's
    orphans."""
    late = day.history.late_clicks
    if late is None:
        return None
    end = day_start(day.date + dt.timedelta(days=1), time_zone)
    tail = day.valid.exposures.where(
        (F.col(TS) >= instant(end - dt.timedelta(minutes=window_minutes))) & F.col(ITEM).isNotNull()
    )
    direct = late.where(F.col(REQUEST).isNotNull()).join(
        F.broadcast(tail.select(USER, REQUEST, ITEM).distinct()), on=[USER, REQUEST, ITEM], how="left_semi"
    )
    by_session = late.where(F.col(REQUEST).isNull()).join(
        F.broadcast(tail.select(USER, SESSION, ITEM).distinct()), on=[USER, SESSION, ITEM], how="left_semi"
    )
    return direct.unionByName(by_session)


def click_events(frames: Sequence[DataFrame], click_event: str) -> DataFrame:
    """(user_id, item_id) of the events named ``click_event`` (a row without ``event`` is a click)."""
    clicks = frames[0]
    for frame in frames[1:]:
        clicks = clicks.unionByName(frame, allowMissingColumns=True)
    event = F.coalesce(F.col(EVENT), F.lit(click_event)) if EVENT in clicks.columns else F.lit(click_event)
    return clicks.where(event == click_event).select(USER, ITEM)


def validate_inputs(spark: SparkSession, inputs: Inputs, cfg: Config, date: dt.date, paths: InputPaths) -> Validated:
    """Tag every row with its first failed check, count rows per reason (one job per input; the clicks'
    also counts the valid events per event name that has no weight), split."""
    bounds = day_bounds(date, cfg.validation.ts_tolerance_minutes, cfg.validation.time_zone)
    exposures = tag_rows(inputs.exposures, exposure_checks(inputs.has_score, bounds))
    clicks = tag_rows(inputs.clicks, click_checks(bounds))
    exposure_counts, _ = count_rows(exposures, "exposures partition", paths.exposures)
    click_counts, unweighted = count_rows(
        clicks,
        "clicks partition",
        paths.clicks,
        by=unweighted_name(clicks, cfg.labels.event_weights, cfg.labels.click_event),
    )
    if exposure_counts["rows"] == 0:
        raise EmptyInputError(f"empty input exposures partition (0 rows): {paths.exposures}")
    good_exposures, rejected_exposures = split_rows(exposures)
    good_clicks, rejected_clicks = split_rows(clicks)
    return Validated(
        good_exposures,
        good_clicks,
        rejected_exposures,
        rejected_clicks,
        exposure_counts,
        click_counts,
        unweighted,
        catalog_conflicts(inputs.items),
    )


def unweighted_name(clicks: DataFrame, weights: Mapping[str, float], click_event: str) -> Column:
    """The event's name when it has no weight (a row without ``event`` is a ``click_event``), else null."""
    event = F.coalesce(F.col(EVENT), F.lit(click_event)) if EVENT in clicks.columns else F.lit(click_event)
    return F.when(~event.isin(list(weights)), event)


def catalog_conflicts(items: DataFrame | None) -> tuple[int, tuple[str, ...]]:
    """Items listed under more than one category, and a few of them (one small pass over the catalog)."""
    if items is None:
        return 0, ()
    several = items.groupBy(ITEM).agg(F.count_distinct(CATEGORY).alias("n")).where(F.col("n") > 1)
    n = several.count()
    examples = sorted(r[ITEM] for r in several.select(ITEM).limit(5).collect()) if n else []
    return n, tuple(examples)


def label_day(spark: SparkSession, day: Day, cfg: Config) -> Labelled:
    """Partition exposures and clicks by user, deduplicate, attach slice columns, attribute feedback,
    persisted: the one shuffle of exposure rows (:mod:`recsys_spark.label`), whose partitions the counts
    here, the metrics, the health indicators and the rules all read in place.  ``by_user`` explodes the
    slices from those persisted rows as each stage reads them (one cached row per exposure, not 1 + S).

    Only those partitions are kept: the orphan events are counted from the valid events (see
    :func:`label.label_counts`), and the labelled rows are persisted before the item counts only when
    the popularity slice needs a pass over them first (its cut-offs).
    """
    inputs, valid = day.inputs, day.valid
    window = cfg.attribution.window_minutes
    clicks = valid.clicks
    late, n_late = late_events(day, window, cfg.validation.time_zone), 0  # None without a next-day partition
    if late is not None:
        late = late.persist(CACHE_LEVEL)
        n_late = late.count()
        clicks = clicks.unionByName(late, allowMissingColumns=True)
    # each exposure comes once under "all" and at most once more per slice dimension; the valid rows
    # (before deduplication) bound the exposures
    partitions = bucket_count(
        valid.valid_exposure_rows * (1 + len(cfg.slices.names)),
        cfg.execution.rows_per_bucket,
        default_parallelism(spark),
    )
    deduplicated = deduplicate_exposures(by_user(valid.exposures, partitions)).transform(
        add_slice_columns, inputs.slices, day.date, cfg.slices.new_user_days
    )
    joined = join_feedback(
        deduplicated, by_user(clicks, partitions), window, cfg.labels.event_weights, cfg.labels.click_event
    )
    cutoffs, kept = None, [late]
    if "popularity" in cfg.slices.names:  # the day's count per item, then its bucket on every row
        joined = joined.persist(CACHE_LEVEL)
        counts = item_exposure_counts(joined).persist(CACHE_LEVEL)
        cutoffs = popularity_cutoffs(counts, cfg.slices.popularity_head_share, cfg.slices.popularity_tail_share)
        kept += [joined, counts]
        joined = with_item_exposures(joined, counts)
    # partitioned by user again: Spark drops this repartition when the rows already are (it keeps it when
    # a join moved them, e.g. the item counts when they are too large to broadcast)
    # persisted one row per exposure, with the slice dimensions' values as columns: the slices are
    # exploded as each stage reads the rows (a narrow step, the partitioning kept), not cached S+1 times
    dims = inputs.slices.dims
    user_rows = persist_user_rows(by_user(joined, partitions), slice_input_columns(dims))
    labels = label_counts(user_rows, valid.valid_events + n_late)  # builds the user partitions
    labels["late_events"] = n_late
    sliced = explode_slices(user_rows, dims, cutoffs)
    # the Python passes read one row per exposure with its slice keys and explode them in Arrow
    keyed = with_slice_keys(user_rows, dims, cutoffs) if dims.names else None
    return Labelled(
        labels,
        cutoffs,
        sliced,
        ranking_input(sliced, cfg.ranking.list_unit, inputs.has_score),
        partitions,
        tuple(df for df in (user_rows, *kept) if df is not None),
        user_rows,
        keyed,
        None if keyed is None else ranking_input(keyed, cfg.ranking.list_unit, inputs.has_score),
    )


def metric_stage(labelled: Labelled, cfg: Config, out: DailyOutput) -> Metrics:
    """Per-user table (staged as ``user_metrics``) in one pass, then every aggregate from its sums."""
    ks = cfg.metrics.k
    users = UserMetrics(
        labelled.ranked,
        ks,
        cfg.metrics.ndcg_gain,
        None,
        cfg.execution.max_user_rows,
        cfg.execution.rows_per_bucket,
        cfg.ranking.list_unit,
        labelled.ranked_keyed,
    )
    staged_users = out.stage("user_metrics", users.frame)  # the one pass over labelled exposures
    heavy = users.heavy_frame()  # users past execution.max_user_rows, if any: bounded path
    if heavy is not None:
        heavy.write.mode("append").parquet(staged_users)
    pooled = pooled_auc(labelled.ranked)
    replicates = (
        auc_bootstrap(labelled.ranked, cfg.stats.bootstrap_replicates, cfg.stats.seed)
        if cfg.stats.bootstrap_replicates
        else None
    )
    rows, unit_counts = aggregate_users(
        users.moments(),
        ks,
        pooled,
        cfg.stats.confidence,  # sums from the pass
        replicates,
    )
    unit_counts.setdefault(ALL, {}).update(users.counts())
    return Metrics(rows, unit_counts, users.notes(), labelled.partitions)


def run_metric_stage(labelled: DataFrame, cfg: Config, out: DailyOutput, rows: int, has_score: bool = True) -> Metrics:
    """The metric stage on labelled exposures built outside :func:`evaluate_day` (the benchmark's entry).

    ``labelled``: one row per labelled exposure (:func:`label.join_feedback`, optionally with a
    ``slice`` column), ``rows`` about how many (it sizes the user partitions). Partitions them by user (the
    one shuffle), runs :func:`metric_stage` (``user_metrics`` staged in ``out``; the caller commits or
    aborts ``out``) and unpersists the partitions.
    """
    spark = labelled.sparkSession
    partitions = bucket_count(rows, cfg.execution.rows_per_bucket, default_parallelism(spark))
    user_rows = persist_user_rows(by_user(labelled, partitions))
    ranked = ranking_input(user_rows, cfg.ranking.list_unit, has_score)
    try:
        with outside_label(spark, cfg, partitions):
            return metric_stage(Labelled({}, None, user_rows, ranked, partitions), cfg, out)
    finally:
        user_rows.unpersist()


def health_stage(spark: SparkSession, labelled: Labelled, day: Day, cfg: Config) -> HealthResult:
    """Health and business indicators per slice, with the previous day (update rate) and the
    clicks of the last ``health.novelty_days`` days (novelty) when they exist."""
    history = day.history
    popularity = (
        history.popularity
        if history.popularity is not None
        else click_events([day.valid.clicks], cfg.labels.click_event)
    )
    health = evaluate_health(
        spark,
        labelled.by_user,
        day.inputs.slices.dims,
        day.inputs.slices.catalog,
        min_list_length=cfg.health.min_list_length,
        lorenz_points=cfg.health.lorenz_points,
        popularity=popularity,
        previous=history.previous,
        cutoffs=labelled.cutoffs,
        items_path=day.paths.items,
        confidence=cfg.stats.confidence,
        bootstrap_replicates=cfg.stats.bootstrap_replicates,
        seed=cfg.stats.seed,
        keyed=labelled.keyed,
    )
    if labelled.cutoffs is not None:
        health.info.update(popularity_head_min=labelled.cutoffs.head_min, popularity_tail_max=labelled.cutoffs.tail_max)
    health.notes += list(history.notes)
    return health


def rules_stage(labelled: Labelled, day: Day, cfg: Config) -> list[RuleResult]:
    """Every business rule that applies (see :mod:`recsys_spark.rules`)."""
    valid = day.valid
    exposure_reasons = {k: v for k, v in valid.exposure_counts.items() if k != "rows"}
    click_reasons = {k: v for k, v in valid.click_counts.items() if k != "rows"}
    counts = {
        "exposure_rows": valid.exposure_counts["rows"],
        "bad_score": valid.exposure_counts.get("bad_score", 0),
        "valid_events": valid.valid_events,
        "click_rows": valid.click_counts["rows"],
        "rejected_exposures": sum(exposure_reasons.values()),
        "rejected_clicks": sum(click_reasons.values()),
        **labelled.labels,
    }
    return scan_rules(
        labelled.exposures,
        counts,
        has_catalog=day.inputs.slices.catalog is not None,
        has_score=day.inputs.has_score,
        blacklist_items=cfg.rules.blacklist_items,
        blacklist_categories=cfg.rules.blacklist_categories,
        bot_requests_per_user=cfg.rules.bot_requests_per_user,
        thresholds=threshold_settings(cfg),
        previous_exposure_rows=day.history.previous_rows,
        rejected_exposures=valid.rejected_exposures,
        exposure_reasons=exposure_reasons,
        click_reasons=click_reasons,
        unweighted_events=dict(valid.unweighted_events),
    )


def threshold_settings(cfg: Config) -> dict[str, float]:
    return {name: value for name, value in cfg.to_dict()["rules"].items() if name.startswith("max_")}


def rejected_rows(exposures: DataFrame, clicks: DataFrame) -> DataFrame:
    """Set-aside rows of both inputs in one table: source, reason, and the row as JSON."""

    def tidy(df: DataFrame, source: str) -> DataFrame:
        payload = F.to_json(F.struct(*[c for c in df.columns if c != REASON]))
        return df.select(F.lit(source).alias("source"), F.col(REASON).alias("reason"), payload.alias("row"))

    return tidy(exposures, "exposures").unionByName(tidy(clicks, "clicks"))


def build_summary(
    cfg: Config,
    day: str,
    paths: InputPaths,
    exposure_counts: dict,
    click_counts: dict,
    labels: dict,
    unit_counts: dict,
    rows: list,
    timings: dict,
) -> dict[str, Any]:
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
    return summary_key(metric, k, aggregation)


def read_summary(spark: SparkSession, output_root: str, date: str) -> dict[str, Any]:
    """The summary a previous run wrote for ``date``."""
    return json.loads(fs.read_text(spark, f"{output_root.rstrip('/')}/{SUMMARY}/dt={date}/summary.json"))
