"""The day's inputs: its partitions, the other days it needs (history, late clicks), and what is set aside.

Every function reads or shapes input DataFrames for :mod:`recsys_spark.daily.stages`; a problem with an
input other than the day's own (an earlier day, the next day) is a note, never a failure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config, templates
from recsys_spark.config.templates import InputSettings, is_table
from recsys_spark.daily.day import Day, History, InputPaths, Inputs, Simulation
from recsys_spark.errors import EmptyInputError, JobError, root_cause
from recsys_spark.io.read import conform, empty_frame, exists, footer_rows, read_parquet
from recsys_spark.runtime.engine import is_connect
from recsys_spark.schema import (
    CATEGORY,
    CLICK_COLUMNS,
    EVENT,
    EXPOSURE_COLUMNS,
    ITEM,
    ITEM_COLUMNS,
    POSITION,
    REASON,
    REQUEST,
    SCORE,
    SESSION,
    SIMULATED_LIST_COLUMNS,
    TS,
    USER,
)
from recsys_spark.steps.dimensions import ACTIVITY, Activity, active_days
from recsys_spark.steps.slices import read_slice_inputs
from recsys_spark.steps.validate import (
    click_checks,
    day_bounds,
    day_start,
    exposure_checks,
    instant,
    split_rows,
    tag_rows,
)

#: the one column the activity history reads of an earlier day's exposures
EXPOSURE_USER = next(c for c in EXPOSURE_COLUMNS if c.name == USER)


def read_inputs(spark: SparkSession, cfg: Config, paths: InputPaths) -> Inputs:
    """The exposures and clicks partitions, and the items/users tables the slices and health need.

    A missing partition or column is an :class:`~recsys_spark.errors.InputError` here, before any work.
    A clicks partition without files is a day without feedback, like one with a zero-row file: an
    empty frame, left to the ``no_feedback`` rule.
    """
    columns = cfg.input.columns
    raw_exposures = read_parquet(spark, paths.exposures, "exposures partition", columns)
    custom = bool(cfg.rules.custom)  # the custom rules' input columns, and the items' first_seen, when there are any
    slice_inputs = read_slice_inputs(
        spark,
        cfg.slices.names,
        raw_exposures.columns,
        paths.items,
        paths.users,
        columns,
        cfg.rules.columns if custom else (),
        item_first_seen=custom,
        settings=cfg.slices,
    )
    exposures = conform(
        raw_exposures,
        EXPOSURE_COLUMNS,
        paths.exposures,
        keep=slice_inputs.dims.exposure,
        typed=slice_inputs.kept.exposure,
        position_base=cfg.input.position_base,
    )
    try:
        raw_clicks = read_parquet(spark, paths.clicks, "clicks partition", columns)
    except EmptyInputError:  # no file: the required columns and the event (no value or dwell to speak of)
        raw_clicks = empty_frame(spark, [c for c in CLICK_COLUMNS if c.required or c.name == EVENT])
    clicks = conform(raw_clicks, CLICK_COLUMNS, paths.clicks)
    items = None
    if slice_inputs.catalog is not None:
        items = conform(read_parquet(spark, paths.items, "items table", columns), ITEM_COLUMNS, paths.items)
    return Inputs(exposures, clicks, slice_inputs, SCORE in exposures.columns, items)


def read_simulated_inputs(spark: SparkSession, cfg: Config, paths: InputPaths, simulation: Simulation) -> Inputs:
    """A simulated day's inputs (docs/ope.md): the candidate's lists (``simulation.lists``) for the logged
    day's requests, and no clicks (the day has no feedback by design).

    Each logged request keeps its user, session, time and exposure columns the slices read (its earliest
    row's) and gets the candidate's rows for it (item, position, and score when the lists have one); a
    logged request the candidate has no row for is an empty response, a failure as a logged one would be;
    the candidate's rows for requests the day never logged are left out and counted (one job).
    """
    columns = cfg.input.columns
    raw_logged = read_parquet(spark, paths.exposures, "exposures partition", columns)
    slice_inputs = read_slice_inputs(
        spark, cfg.slices.names, raw_logged.columns, paths.items, paths.users, columns, settings=cfg.slices
    )
    dims = list(slice_inputs.dims.exposure)
    logged = conform(raw_logged, EXPOSURE_COLUMNS, paths.exposures, keep=dims)
    raw_lists = read_parquet(spark, simulation.lists, "simulation.lists", columns)
    lists = conform(raw_lists, SIMULATED_LIST_COLUMNS, simulation.lists, position_base=cfg.input.position_base)
    kept = (TS, USER, SESSION, *dims)
    requests = (
        logged.where(F.col(REQUEST).isNotNull())
        .groupBy(REQUEST)
        .agg(F.min(F.struct(*kept)).alias("_first"))
        .select(REQUEST, *[F.col(f"_first.{c}").alias(c) for c in kept])
    )
    has_score = SCORE in lists.columns
    shown = [ITEM, POSITION, *([SCORE] if has_score else [])]
    exposures = requests.join(lists.select(REQUEST, *shown), REQUEST, "left").select(
        USER, SESSION, REQUEST, *shown, TS, *dims
    )
    per_request = lists.groupBy(REQUEST).agg(F.count(F.lit(1)).alias("rows"))
    row = (
        requests.select(REQUEST, F.lit(1).alias("logged"))
        .join(per_request, REQUEST, "full")
        .agg(
            F.sum("logged").alias("logged_requests"),
            F.sum(F.when(F.col("logged").isNotNull() & F.col("rows").isNotNull(), 1).otherwise(0)).alias("answered"),
            F.sum(F.when(F.col("logged").isNull(), 1).otherwise(0)).alias("requests_not_logged"),
            F.sum(F.when(F.col("logged").isNull(), F.col("rows")).otherwise(0)).alias("rows_not_logged"),
            F.sum("rows").alias("list_rows"),
        )
        .collect()[0]
    )
    counts = {k: int(v or 0) for k, v in row.asDict().items()}
    items = None
    if slice_inputs.catalog is not None:
        items = conform(read_parquet(spark, paths.items, "items table", columns), ITEM_COLUMNS, paths.items)
    return Inputs(exposures, empty_frame(spark, CLICK_COLUMNS), slice_inputs, has_score, items, counts)


def history_paths(
    template: str, input_root: str, date: dt.date, days: int, kind: str, options: InputSettings
) -> list[tuple[dt.date, str]]:
    """(date, location) of the ``days`` days before ``date``, most recent first (date formats and
    ``table:`` inputs as for the day itself, :func:`templates.resolve` with the run's ``options``)."""
    days_before = [date - dt.timedelta(days=back) for back in range(1, days + 1)]
    return [(day, templates.resolve(template, input_root, day, kind, options)) for day in days_before]


def _problem(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, JobError) else f"{type(exc).__name__}: {root_cause(exc)}"


def _rows(spark: SparkSession, raw: DataFrame, location: str) -> int:
    """Rows of an input: from its files' footers (no Spark job), or a count for a ``table:`` (and on Spark
    Connect, which has no file-system API to list the files)."""
    if is_table(location) or is_connect(spark):
        return raw.count()
    return footer_rows(spark, location, "previous exposures partition")


def read_history(spark: SparkSession, cfg: Config, input_root: str, date: dt.date, feedback: bool = True) -> History:
    """The other days the day needs (update_rate, exposure_change, novelty, late feedback), read once,
    validated as the day's own rows (:mod:`recsys_spark.steps.validate`), each checked readable here (the
    files' footers, read on the driver without a Spark job; a table is counted) so that a missing, empty,
    corrupt or truncated
    partition of another day becomes a note, never a failure of today.  ``feedback=False`` (a simulated day):
    no late clicks are read.  A file whose footer is sound
    but whose data pages are corrupt still fails the day later (in the health stage): reading every
    earlier day's columns once more to rule that out would cost a full pass per day.
    """
    tolerance, zone = cfg.validation.ts_tolerance_minutes, cfg.validation.time_zone
    options, columns = InputSettings.of(cfg.input), cfg.input.columns
    notes: list[str] = []
    ((prev_day, prev_path),) = history_paths(cfg.input.exposures, input_root, date, 1, "exposures", options)
    previous, previous_rows = None, None
    if exists(spark, prev_path):
        try:
            raw = read_parquet(spark, prev_path, "previous exposures partition", columns)
            previous_rows = _rows(spark, raw, prev_path)  # a corrupt or truncated file fails here
            conformed = conform(raw, EXPOSURE_COLUMNS, prev_path, position_base=cfg.input.position_base)
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

    click_paths = history_paths(cfg.input.clicks, input_root, date, cfg.health.novelty_days, "clicks", options)
    frames, used = [], []
    for day, path in click_paths:
        if not exists(spark, path):
            continue
        try:
            raw = read_parquet(spark, path, "clicks partition", columns)
            if is_table(path) or is_connect(spark):  # files: their footers were read (a corrupt one failed)
                raw.count()
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
    # a simulated day (no feedback) needs no late clicks
    late, provisional = read_late_clicks(spark, cfg, input_root, date, notes) if feedback else (None, False)
    activity = read_activity(spark, cfg, input_root, date, notes) if ACTIVITY in cfg.slices.names else None
    return History(previous, previous_rows, popularity, late, provisional, tuple(notes), activity)


def read_activity(spark: SparkSession, cfg: Config, input_root: str, date: dt.date, notes: list[str]) -> Activity:
    """The activity slice's history (:mod:`recsys_spark.steps.dimensions`): the user_id column of the exposures
    partitions of the ``slices.activity_window_days`` days before ``date`` (a missing, empty or unreadable one is
    left out with a note; the partition's day is the day, its rows' ts are not checked), and each user's count
    of those days.  Read only when ``slices.names`` holds ``activity``."""
    window = cfg.slices.activity_window_days
    options, columns = InputSettings.of(cfg.input), cfg.input.columns
    frames, used = [], []
    for day, path in history_paths(cfg.input.exposures, input_root, date, window, "exposures", options):
        if not exists(spark, path):
            continue
        try:
            raw = read_parquet(spark, path, "exposures partition", columns)
            _rows(spark, raw, path)  # a corrupt or truncated file fails here, not in the day's pass
            frames.append(conform(raw, (EXPOSURE_USER,), path))
            used.append(day.isoformat())
        except Exception as exc:  # noqa: BLE001 - an earlier day is an optional input
            notes.append(f"activity: the exposures of {day} left out ({_problem(exc)})")
    if not frames:
        notes.append(f"activity: no exposures partition in the {window} previous days; every user is unknown")
        return Activity(None, 0, window)
    notes.append(
        f"activity: exposed days from {len(frames)} of the {window} previous days' exposures ({min(used)}..{max(used)})"
    )
    return Activity(active_days(frames), len(frames), window)


def read_late_clicks(
    spark: SparkSession, cfg: Config, input_root: str, date: dt.date, notes: list[str]
) -> tuple[DataFrame | None, bool]:
    """The next day's clicks of its first ``attribution.window_minutes`` (a click at 00:05 on an
    exposure shown at 23:58), and whether the day is provisional (that partition is not there yet,
    or cannot be read: a rerun once it exists completes the day)."""
    window = cfg.attribution.window_minutes
    next_day = date + dt.timedelta(days=1)
    path = templates.resolve(cfg.input.clicks, input_root, next_day, "clicks", InputSettings.of(cfg.input))
    if window <= 0:
        return None, False
    if not exists(spark, path):
        notes.append(
            f"provisional: no clicks partition for {next_day} yet ({path}); feedback after midnight on "
            f"the last {window:g} minutes of exposures is missing; rerun the day once it exists"
        )
        return None, True
    try:
        raw = read_parquet(spark, path, "next day's clicks partition", cfg.input.columns)
        clicks = conform(raw, CLICK_COLUMNS, path)
    except Exception as exc:  # noqa: BLE001 - the next day is an optional input
        notes.append(
            f"provisional: the clicks of {next_day} cannot be read ({_problem(exc)}); feedback after "
            "midnight is missing"
        )
        return None, True
    start = day_start(next_day, cfg.validation.time_zone)
    bounds = (start, start + dt.timedelta(minutes=window))
    return split_rows(tag_rows(clicks, click_checks(bounds, clicks.columns)))[0], False


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


#: the reason :func:`catalog_tags` gives an item listed under more than one category
SEVERAL_CATEGORIES = "in_several_categories"


def catalog_tags(items: DataFrame) -> DataFrame:
    """One row per item of the catalog, its ``reject_reason`` :data:`SEVERAL_CATEGORIES` when it is listed
    under more than one category: counted with the day's inputs (:func:`validate.count_inputs`)."""
    n = F.count_distinct(CATEGORY)
    return items.groupBy(ITEM).agg(F.when(n > 1, F.lit(SEVERAL_CATEGORIES)).alias(REASON))


def catalog_conflicts(items: DataFrame | None, n: int) -> tuple[int, tuple[str, ...]]:
    """The ``n`` items listed under more than one category, and a few of them (a small pass over the
    catalog, only when there are some)."""
    if items is None or n == 0:
        return 0, ()
    several = catalog_tags(items).where(F.col(REASON).isNotNull())
    return n, tuple(sorted(r[ITEM] for r in several.select(ITEM).limit(5).collect()))


def rejected_rows(exposures: DataFrame, clicks: DataFrame) -> DataFrame:
    """Set-aside rows of both inputs in one table: source, reason, and the row as JSON."""

    def tidy(df: DataFrame, source: str) -> DataFrame:
        payload = F.to_json(F.struct(*[c for c in df.columns if c != REASON]))
        return df.select(F.lit(source).alias("source"), F.col(REASON).alias("reason"), payload.alias("row"))

    return tidy(exposures, "exposures").unionByName(tidy(clicks, "clicks"))
