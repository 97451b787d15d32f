"""The logged days of ``recsys-spark ope``: read, checked against their day, keyed and labelled (Spark wiring).

The first of the run's three steps (:mod:`recsys_spark.ope.run`); its rules, each one line and a documented exit
when it fails (docs/ope.md, "What the run does with odd input"):

* **feedback**: a logged day whose clicks partition is missing, holds no row (no file, a zero-row file
  with or without types) or no valid row has no feedback: a note, and the day is left out (its exposures
  would read as unclicked and pull every estimate towards 0).  When no day is left, the window fails as
  the daily job's hard ``no_feedback`` rule does (:class:`~recsys_spark.errors.HardRuleViolation`, exit 8);
  so does a window whose clicks reach no logged exposure (:func:`check_feedback`);
* **propensities**: a ``propensity``, ``list_propensity`` or ``prefix_propensity`` present but outside
  (0, 1] is refused (exit 5) with an example (:func:`check_logged`);
* **keys**: logged rows are keyed by day and request; when the candidate names the day each row answers,
  both sides' request ids become ``D|request`` (:func:`day_request`, :func:`keyed_by_day`,
  :func:`keyed_clicks`; the candidate's side: :mod:`recsys_spark.ope.candidate`);
* **copies**: rows logged twice in a day are deduplicated as the daily job does and counted
  (``duplicate_logged_rows``); copies at one position that disagree on a propensity are refused (exit 5).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config, templates
from recsys_spark.errors import EmptyInputError, HardRuleViolation, MissingInputError, SchemaError
from recsys_spark.io.read import conform, exists, read_parquet
from recsys_spark.per_user.table import bucket_count
from recsys_spark.runtime.engine import default_parallelism
from recsys_spark.schema import (
    CLICK_COLUMNS,
    COPIES,
    ITEM,
    LIST_PROPENSITY,
    OPE_EXPOSURE_COLUMNS,
    POSITION,
    PREFIX_PROPENSITY,
    PROPENSITY,
    REASON,
    RELEVANCE,
    REQUEST,
    SCORE,
    SESSION,
    TS,
    USER,
)
from recsys_spark.steps.label import by_user, join_feedback
from recsys_spark.steps.validate import (
    ZERO_POSITION,
    click_checks,
    day_bounds,
    day_start,
    exposure_checks,
    refuse_zero_positions,
    split_rows,
    tag_rows,
)

#: the logged day of a row, and the candidate's optional column naming the day it answers
DAY = "dt"
#: the conflicting copies of a logged row, on the labelled rows (null when its copies agree)
CONFLICT = "_conflict"
PROPENSITIES = (PROPENSITY, LIST_PROPENSITY, PREFIX_PROPENSITY)
_LOGGED = (USER, SESSION, REQUEST, ITEM, POSITION, TS, *PROPENSITIES)
#: at most this many days are named in one line
_NAMED = 3


def day_request(day: Column, request: Column) -> Column:
    """A request id made unique across days, ``2026-11-20|r1`` (null when either is null)."""
    return F.concat(day.cast("string"), F.lit("|"), request)


def count_where(condition: Column) -> Column:
    """The number of rows where ``condition`` holds (0 where it is false or null), as an aggregate."""
    return F.sum(F.when(condition, 1).otherwise(0))


# --------------------------------------------------------------------------- the logged days


@dataclass
class Logged:
    """The logged days of a window: ``exposures`` (tagged by the daily checks, with ``dt``) of the days
    with feedback, their valid ``clicks`` per day (with ``dt``), and the ``late`` ones (the next day's
    first minutes, under the last day)."""

    exposures: DataFrame
    clicks: list[tuple[dt.date, DataFrame]]
    late: DataFrame | None
    days: list[dt.date]  # the days read: an exposures partition and feedback
    paths: list[str]  # their exposures partitions
    without_feedback: dict[str, str] = field(default_factory=dict)  # day -> why it was left out
    valid_clicks: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # the valid rows' counts (:func:`check_logged`)


def logged_days(spark: SparkSession, cfg: Config, input_root: str, days: Sequence[dt.date], notes: list[str]) -> Logged:
    """Step 1 of the run: the logged days of ``days`` (:func:`read_logged`) with their ``counts``
    (:func:`check_logged`); an :class:`EmptyInputError` (exit 7) when no valid logged exposure has an item,
    a :class:`SchemaError` (exit 5) when items sit at position 0 under ``input.position_base = 1``, as the
    daily job (:func:`refuse_zero_positions`)."""
    logged = read_logged(spark, cfg, input_root, days, notes)
    counts = check_logged(logged.exposures, logged.paths)
    position = cfg.input.columns_for("exposures").get(POSITION, POSITION)
    zero = {ZERO_POSITION: counts.get(f"set_aside_{ZERO_POSITION}", 0), "rows": counts.get("rows", 0)}
    refuse_zero_positions(zero, "the logged exposures", ", ".join(logged.paths[:3]), position)
    if counts["exposures"] == 0:
        raise EmptyInputError(f"no valid logged exposure with an item between {days[0]} and {days[-1]}")
    return replace(logged, counts=counts)


def read_logged(spark: SparkSession, cfg: Config, input_root: str, days: Sequence[dt.date], notes: list[str]) -> Logged:
    """Each day's exposures, tagged by the daily checks against its own day (``reject_reason``), and its
    valid clicks, plus the next day's clicks of its first ``attribution.window_minutes`` (late feedback, as
    the daily job).  A day without an exposures partition, or without feedback (:func:`feedback_per_day`),
    is left out with a note; no exposures partition at all is exit 4, no feedback at all exit 8."""
    options, columns = templates.InputSettings.of(cfg.input), cfg.input.columns
    tolerance, zone = cfg.validation.ts_tolerance_minutes, cfg.validation.time_zone
    exposures: dict[dt.date, tuple[DataFrame, str]] = {}
    clicks: dict[dt.date, DataFrame] = {}
    why: dict[dt.date, str] = {}
    for day in days:
        path = templates.resolve(cfg.input.exposures, input_root, day, "exposures", options)
        if not exists(spark, path):
            notes.append(f"{day}: no exposures partition ({path}); the day is left out")
            continue
        base = cfg.input.position_base
        raw = read_parquet(spark, path, "exposures partition", columns)
        raw = conform(raw, OPE_EXPOSURE_COLUMNS, path, position_base=base)
        for name in PROPENSITIES:
            if name not in raw.columns:
                raw = raw.withColumn(name, F.lit(None).cast("double"))
        bounds = day_bounds(day, tolerance, zone)
        checks = exposure_checks(SCORE in raw.columns, bounds, zero_position=base == 1)
        tagged = tag_rows(raw, checks).select(*_LOGGED, REASON)
        exposures[day] = (tagged.withColumn(DAY, F.lit(day)), path)
        click_path = templates.resolve(cfg.input.clicks, input_root, day, "clicks", options)
        if not exists(spark, click_path):
            why[day] = f"no clicks partition ({click_path})"
            continue
        try:
            raw_clicks = read_parquet(spark, click_path, "clicks partition", columns)
            raw_clicks = conform(raw_clicks, CLICK_COLUMNS, click_path)
        except EmptyInputError:  # no file, or zero-row files without types: no row, as a typed empty file
            why[day] = f"0 rows in its clicks partition ({click_path})"
            continue
        clicks[day] = tag_rows(raw_clicks, click_checks(bounds)).withColumn(DAY, F.lit(day))
    if not exposures:
        raise MissingInputError(
            f"no exposures partition between {days[0]} and {days[-1]} under {input_root} (input.exposures)"
        )
    counted = feedback_per_day(list(clicks.values()))
    for day in clicks:
        rows, valid = counted.get(day, (0, 0))
        if not valid:
            path = templates.resolve(cfg.input.clicks, input_root, day, "clicks", options)
            why[day] = f"0 rows in its clicks partition ({path})" if not rows else f"0 valid of {rows} clicks ({path})"
    kept = [day for day in exposures if day not in why]
    without = {str(day): why[day] for day in exposures if day in why}
    for name, reason in without.items():
        notes.append(f"{name}: no feedback ({reason}): the day is left out (its exposures would read as unclicked)")
    if not kept:
        listed = "; ".join(f"{d}: {r}" for d, r in list(without.items())[:_NAMED])
        more = f" and {len(without) - _NAMED} more days" if len(without) > _NAMED else ""
        raise HardRuleViolation(
            f"ope: no feedback between {days[0]} and {days[-1]} ({listed}{more}): no logged reward to estimate "
            "from (the daily job's hard no_feedback rule)"
        )
    day_clicks = [(day, split_rows(clicks[day])[0]) for day in kept]
    late = late_clicks(spark, cfg, input_root, kept[-1], set(exposures), notes)
    union = exposures[kept[0]][0]
    for day in kept[1:]:
        union = union.unionByName(exposures[day][0])
    valid = sum(counted[day][1] for day in kept)
    return Logged(union, day_clicks, late, kept, [exposures[d][1] for d in kept], without, valid)


def feedback_per_day(clicks: Sequence[DataFrame]) -> dict[dt.date, tuple[int, int]]:
    """{day: (rows, valid rows)} of the tagged clicks partitions (with ``dt``), in one Spark job."""
    if not clicks:
        return {}
    union = clicks[0].select(DAY, REASON)
    for frame in clicks[1:]:
        union = union.unionByName(frame.select(DAY, REASON))
    rows = union.groupBy(DAY).agg(
        F.count(F.lit(1)).alias("rows"), F.sum(F.when(F.col(REASON).isNull(), 1).otherwise(0)).alias("valid")
    )
    return {row[DAY]: (int(row["rows"]), int(row["valid"] or 0)) for row in rows.collect()}


def late_clicks(
    spark: SparkSession, cfg: Config, input_root: str, last: dt.date, logged: set[dt.date], notes: list[str]
) -> DataFrame | None:
    """The valid clicks of the first ``attribution.window_minutes`` after the last day read, from the next
    day's clicks partition; None when the window is 0 or that day is a logged day of the window (its
    clicks partition, read or left out, is that day's)."""
    window = cfg.attribution.window_minutes
    late_day = last + dt.timedelta(days=1)
    if window <= 0 or late_day in logged:
        return None
    options = templates.InputSettings.of(cfg.input)
    path = templates.resolve(cfg.input.clicks, input_root, late_day, "clicks", options)
    missing = f"feedback after midnight on the last {window:g} minutes of {last} is missing"
    if not exists(spark, path):
        notes.append(f"provisional: no clicks partition for {late_day} yet; {missing}")
        return None
    try:
        late = conform(read_parquet(spark, path, "next day's clicks partition", cfg.input.columns), CLICK_COLUMNS, path)
    except EmptyInputError:  # no file, or zero-row untyped files: as absent
        notes.append(f"provisional: the clicks partition for {late_day} is empty; {missing}")
        return None
    start = day_start(late_day, cfg.validation.time_zone)
    bounds = (start, start + dt.timedelta(minutes=window))
    return split_rows(tag_rows(late, click_checks(bounds)))[0].withColumn(DAY, F.lit(last))


def _outside_unit(c: Column) -> Column:
    """A probability that is present but not in (0, 1]."""
    return c.isNotNull() & (F.isnan(c) | (c <= 0) | (c > 1))


def check_logged(tagged: DataFrame, paths: Sequence[str]) -> dict[str, int]:
    """Counts of the logged rows in one job (rows, set aside per reason, exposures, rows with each
    propensity); a :class:`SchemaError` (one line, an example) when a propensity lies outside (0, 1]."""
    valid = F.col(REASON).isNull() & F.col(ITEM).isNotNull()
    aggs = [F.count(F.lit(1)).alias("rows"), count_where(valid).alias("exposures")]
    for name in PROPENSITIES:
        aggs.append(count_where(valid & F.col(name).isNotNull()).alias(f"with_{name}"))
        aggs.append(count_where(valid & _outside_unit(F.col(name))).alias(f"bad_{name}"))
    rows = tagged.groupBy(REASON).agg(*aggs).collect()
    counts: dict[str, int] = {}
    for row in rows:
        for key, value in row.asDict().items():
            if key != REASON:
                counts[key] = counts.get(key, 0) + int(value or 0)
        if row[REASON] is not None:
            counts[f"set_aside_{row[REASON]}"] = int(row["rows"])
    for name in PROPENSITIES:
        bad = counts.get(f"bad_{name}", 0)
        if bad:
            offending = tagged.where(valid & _outside_unit(F.col(name)))
            example = offending.select(REQUEST, ITEM, POSITION, name).limit(1).collect()[0]
            raise SchemaError(
                f"ope: {bad} logged rows have a {name} outside (0, 1] (e.g. request {example[REQUEST]}, item "
                f"{example[ITEM]}, position {example[POSITION]}: {example[name]}) in {', '.join(paths[:3])}"
                + (" ..." if len(paths) > 3 else "")
            )
    return counts


def keyed_clicks(logged: Logged, by_day: bool, window_minutes: float, time_zone: str) -> DataFrame:
    """The valid clicks of the window, one frame.  ``by_day``: a click's request id becomes its day's
    (:func:`day_request`), and a click of a day's first ``window_minutes`` is also offered to the day
    before (late feedback across midnight, as the daily job reads the next day's partition)."""
    days = set(logged.days)
    frames = [] if logged.late is None else [logged.late]
    for day, frame in logged.clicks:
        frames.append(frame)
        before = day - dt.timedelta(days=1)
        if by_day and window_minutes > 0 and before in days:
            early = F.col(TS) < F.lit(day_start(day, time_zone) + dt.timedelta(minutes=window_minutes))
            frames.append(frame.where(F.col(REQUEST).isNotNull() & early).withColumn(DAY, F.lit(before)))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    return keyed_by_day(union, by_day).drop(DAY)


def keyed_by_day(logged: DataFrame, by_day: bool) -> DataFrame:
    """Logged rows (exposures or clicks, with ``dt``) keyed as the candidate answers: ``by_day``, a request
    id becomes its day's (:func:`day_request`); otherwise unchanged."""
    if not by_day:
        return logged
    return logged.withColumn(REQUEST, day_request(F.col(DAY), F.col(REQUEST)))


# --------------------------------------------------------------------------- labelling


def deduplicate_logged(exposures: DataFrame) -> DataFrame:
    """:func:`recsys_spark.steps.label.deduplicate_exposures`'s rows -- one per (user, request, item): the
    smallest position, then the earliest ts, and ``copies`` -- plus :data:`CONFLICT`: the first position
    whose copies disagree on a propensity (one has none, or two differ), as (position, column, smallest,
    largest, copies with one, copies), null when they agree.  Both aggregations keep the partitioning by
    user (:func:`recsys_spark.steps.label.by_user`): no shuffle."""
    others = [c for c in exposures.columns if c not in (USER, REQUEST, ITEM, POSITION, TS, *PROPENSITIES)]
    disagree = []
    for name in PROPENSITIES:
        low, high, have = F.min(name), F.max(name), F.count(name)
        split = ((have > 0) & (have < F.count(F.lit(1)))) | (low != high)
        disagree.append(
            F.when(
                split,
                F.struct(
                    F.lit(name).alias("column"),
                    low.alias("low"),
                    high.alias("high"),
                    have.alias("with"),
                    F.count(F.lit(1)).alias("copies"),
                ),
            )
        )
    at = (
        exposures.where(F.col(USER).isNotNull())
        .groupBy(USER, REQUEST, ITEM, POSITION)
        .agg(
            F.min(F.struct(TS, *PROPENSITIES, *others)).alias("_first"),
            F.count(F.lit(1)).alias("_n"),
            F.coalesce(*disagree).alias("_split"),
        )
    )
    kept = at.groupBy(USER, REQUEST, ITEM).agg(
        F.min(F.struct(POSITION, "_first")).alias("_kept"),
        F.sum("_n").alias(COPIES),
        F.min(F.when(F.col("_split").isNotNull(), F.struct(POSITION, "_split"))).alias(CONFLICT),
    )
    return kept.select(
        USER,
        REQUEST,
        ITEM,
        F.col(f"_kept.{POSITION}").alias(POSITION),
        F.col(f"_kept._first.{TS}").alias(TS),
        *[F.col(f"_kept._first.{c}").alias(c) for c in (*PROPENSITIES, *others)],
        COPIES,
        CONFLICT,
    )


def label_logged(cfg: Config, tagged: DataFrame, clicks: DataFrame, rows: int) -> DataFrame:
    """The valid logged exposures with their reward (``relevance``), by the daily job's labelling steps:
    partitioned by user, deduplicated on (user, request, item) (:func:`deduplicate_logged`), feedback
    attributed in the same window with the same weights.  Empty responses are left out (nothing was shown)."""
    spark = tagged.sparkSession
    partitions = bucket_count(rows, cfg.execution.rows_per_bucket, default_parallelism(spark))
    valid = split_rows(tagged)[0]
    deduplicated = deduplicate_logged(by_user(valid, partitions))
    labels = cfg.labels
    joined = join_feedback(
        deduplicated,
        by_user(clicks, partitions),
        cfg.attribution.window_minutes,
        labels.event_weights,
        labels.click_event,
    )
    return joined.where(F.col(ITEM).isNotNull()).select(
        USER, REQUEST, ITEM, POSITION, RELEVANCE, *PROPENSITIES, COPIES, CONFLICT
    )


def check_labelled(labelled: DataFrame) -> dict[str, int]:
    """The labelled rows and the copies the deduplication folded (``duplicate_logged_rows``), in one job;
    a :class:`SchemaError` naming the request, item, position and both propensities when copies of a
    logged row disagree (the logging policy showed it once, with one probability)."""
    row = labelled.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.col(COPIES) - 1).alias("duplicates"),
        F.count(CONFLICT).alias("conflicts"),
        F.min(F.when(F.col(CONFLICT).isNotNull(), F.struct(REQUEST, ITEM, CONFLICT))).alias("example"),
    ).collect()[0]
    if row["conflicts"]:
        ex = row["example"]
        c = ex[CONFLICT]
        split = c["_split"]
        if split["with"] < split["copies"]:
            values = f"{split['low']:g} on {split['with']} of {split['copies']} copies, none on the others"
        else:
            values = f"{split['low']:g} and {split['high']:g}"
        raise SchemaError(
            f"ope: {row['conflicts']} logged rows are logged more than once with different propensities (e.g. "
            f"request {ex[REQUEST]}, item {ex[ITEM]}, position {c[POSITION]}: {split['column']} {values}); "
            "the copies of a row must agree"
        )
    return {"rows": int(row["rows"]), "duplicate_logged_rows": int(row["duplicates"] or 0)}


def label_days(
    cfg: Config,
    logged: Logged,
    exposures: DataFrame,
    by_day: bool,
    persist: Callable[[DataFrame], DataFrame],
    notes: list[str],
) -> tuple[DataFrame, dict[str, int]]:
    """The labelled rows and their counts, once the candidate has said how rows are keyed (``by_day``):
    ``exposures`` (the logged ones, keyed by :func:`keyed_by_day`) labelled with the keyed clicks
    (:func:`keyed_clicks`, :func:`label_logged`), kept by ``persist`` (before any check, so that the run
    releases them whatever happens), then checked (:func:`check_labelled`; a note counts the copies folded)."""
    clicks = keyed_clicks(logged, by_day, cfg.attribution.window_minutes, cfg.validation.time_zone)
    rows = logged.counts["exposures"]
    labelled = persist(label_logged(cfg, exposures, clicks, rows))
    counts = check_labelled(labelled)
    duplicates = counts["duplicate_logged_rows"]
    if duplicates:
        notes.append(
            f"{duplicates} logged rows repeat a (user, request, item) of their day: each counted once, at "
            "its smallest position (the daily job's deduplication)"
        )
    return labelled, counts


def check_feedback(reward: float, valid_clicks: int, start: dt.date, end: dt.date) -> None:
    """A :class:`HardRuleViolation` (exit 8, the daily job's hard ``no_feedback``) when no logged exposure
    got feedback (``reward``: Σ y over the labelled rows): every reward 0, every estimate 0 or the reward
    model's alone."""
    if reward == 0:
        raise HardRuleViolation(
            f"ope: no logged exposure between {start} and {end} got feedback ({valid_clicks} valid clicks in the "
            "days read; none attributed to a logged exposure, or only events without a weight in "
            "labels.event_weights): no logged reward to estimate from (the daily job's hard no_feedback rule)"
        )
