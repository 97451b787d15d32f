"""``recsys-spark ope``: a candidate policy's reward estimated from the logged days (Spark wiring only).

The maths is :mod:`recsys_spark.kernels.ope` (formulas there and in docs/ope.md); here:

1. the logged days: each day's exposures (with the optional ``propensity``, ``list_propensity`` and
   ``prefix_propensity`` columns) and clicks, validated by the daily job's checks against their own day,
   then labelled by the daily job's steps (:mod:`recsys_spark.label`: the one shuffle by user, the same
   deduplication, attribution window and event weights), so that a reward here is a click there;
2. the candidate (``ope.target``): hash-partitioned by request, one row per (request, item, position),
   summed per (request, position) -- its mass, its modelled reward Σ π q̂ -- and checked;
3. one query: the labelled rows, hash-partitioned by request too (their one shuffle here), joined with
   the candidate's row and position in place, each row's terms, sums per (user, request) in place -- the
   list-level terms, in position order -- then per user (the per-list rows move), then per run: Σ of
   every per-user sum and of the products the intervals need.

One row reaches the driver (plus a few counts from the checks); nothing proportional to rows, users or
items.  Bad input is one line before anything is computed: a propensity outside (0, 1], a candidate whose
probabilities for one (request, position) sum above 1 (or that lists a row twice, or has a probability
outside [0, 1]).  An estimator whose input is missing (no propensity, no q̂ for every row the candidate
shows, a candidate that is not deterministic for replay, ...) is skipped with a note; the others run.

Writes ``{output_root}/ope/{estimates,diagnostics}/run=NAME/`` and ``ope/summary/run=NAME/summary.json``
through :class:`recsys_spark.write.DailyOutput` (the run's lock, staging, the journalled commit,
``_SUCCESS`` last), as the offline runs do.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark import log, templates
from recsys_spark.config import Config, check_name
from recsys_spark.engine import default_parallelism
from recsys_spark.errors import ConfigError, EmptyInputError, MissingInputError, SchemaError
from recsys_spark.kernels import ope as K
from recsys_spark.label import by_user, deduplicate_exposures, join_feedback
from recsys_spark.per_user import bucket_count
from recsys_spark.read import conform, empty_frame, exists, read_parquet
from recsys_spark.schema import (
    CLICK_COLUMNS,
    ITEM,
    LIST_PROPENSITY,
    OPE_DIAGNOSTICS_DDL,
    OPE_ESTIMATES_DDL,
    OPE_EXPOSURE_COLUMNS,
    POSITION,
    PREFIX_PROPENSITY,
    PROBABILITY,
    PROPENSITY,
    Q_HAT,
    REASON,
    RELEVANCE,
    REQUEST,
    SCORE,
    SESSION,
    TARGET_COLUMNS,
    TS,
    USER,
)
from recsys_spark.session import CACHE_LEVEL, apply_time_zone
from recsys_spark.validate import click_checks, day_bounds, day_start, exposure_checks, split_rows, tag_rows
from recsys_spark.write import SUMMARY, DailyOutput

#: the tables of an OPE run, each ``ope/{table}/run=NAME``
OPE_TABLES = ("estimates", "diagnostics", SUMMARY)
#: a candidate's probabilities for one (request, position) may sum to 1 + this (rounding), no more
MASS_TOLERANCE = 1e-9
_PROPENSITIES = (PROPENSITY, LIST_PROPENSITY, PREFIX_PROPENSITY)
_LOGGED = (USER, SESSION, REQUEST, ITEM, POSITION, TS, *_PROPENSITIES)


def root_of(output_root: str) -> str:
    return f"{output_root.rstrip('/')}/ope"


def run_partition(run: str) -> str:
    return f"run={check_name(run, 'ope run')}"


def run_complete(output_root: str, run: str) -> str:
    """The marker of a complete run: ``ope/summary/run=NAME/_SUCCESS``."""
    return f"{root_of(output_root)}/{SUMMARY}/{run_partition(run)}/_SUCCESS"


def target_location(cfg: Config, input_root: str, run: str) -> str:
    """``ope.target`` with ``{input_root}`` and ``{run}`` filled in; a ConfigError (exit 3) when it is empty."""
    if not cfg.ope.target:
        raise ConfigError(
            'config key ope.target is empty: name the candidate\'s table (--set ope.target="PATH" or table:NAME; '
            "columns request_id, item_id, position, probability [, q_hat]; docs/ope.md)"
        )
    return cfg.ope.target.replace("{input_root}", input_root.rstrip("/")).replace("{run}", check_name(run, "ope run"))


# --------------------------------------------------------------------------- the logged days


def read_logged(
    spark: SparkSession, cfg: Config, input_root: str, days: Sequence[dt.date], notes: list[str]
) -> tuple[DataFrame, DataFrame, list[dt.date], list[str]]:
    """Each day's exposures, tagged by the daily checks against its own day (``reject_reason``), and its
    valid clicks, plus the next day's clicks of its first ``attribution.window_minutes`` (late feedback, as
    the daily job).  Returns (tagged exposures, valid clicks, days found, exposure paths)."""
    options = templates.InputSettings.of(cfg.input)
    tolerance, zone = cfg.validation.ts_tolerance_minutes, cfg.validation.time_zone
    exposures: list[DataFrame] = []
    clicks: list[DataFrame] = []
    found: list[dt.date] = []
    paths: list[str] = []
    for day in days:
        path = templates.resolve(cfg.input.exposures, input_root, day, "exposures", options)
        if not exists(spark, path):
            notes.append(f"{day}: no exposures partition ({path}); the day is left out")
            continue
        raw = conform(read_parquet(spark, path, "exposures partition"), OPE_EXPOSURE_COLUMNS, path)
        for name in _PROPENSITIES:
            if name not in raw.columns:
                raw = raw.withColumn(name, F.lit(None).cast("double"))
        bounds = day_bounds(day, tolerance, zone)
        tagged = tag_rows(raw, exposure_checks(SCORE in raw.columns, bounds))
        exposures.append(tagged.select(*_LOGGED, REASON))
        found.append(day)
        paths.append(path)
        click_path = templates.resolve(cfg.input.clicks, input_root, day, "clicks", options)
        if exists(spark, click_path):
            day_clicks = conform(read_parquet(spark, click_path, "clicks partition"), CLICK_COLUMNS, click_path)
            clicks.append(split_rows(tag_rows(day_clicks, click_checks(bounds)))[0])
        else:
            notes.append(f"{day}: no clicks partition ({click_path}): its exposures have no feedback")
    if not exposures:
        raise MissingInputError(
            f"no exposures partition between {days[0]} and {days[-1]} under {input_root} (input.exposures)"
        )
    window = cfg.attribution.window_minutes
    late_day = found[-1] + dt.timedelta(days=1)
    late_path = templates.resolve(cfg.input.clicks, input_root, late_day, "clicks", options)
    if window > 0 and exists(spark, late_path):
        late = conform(read_parquet(spark, late_path, "next day's clicks partition"), CLICK_COLUMNS, late_path)
        start = day_start(late_day, zone)
        clicks.append(split_rows(tag_rows(late, click_checks((start, start + dt.timedelta(minutes=window)))))[0])
    elif window > 0:
        notes.append(
            f"provisional: no clicks partition for {late_day} yet; feedback after midnight on the last "
            f"{window:g} minutes of {found[-1]} is missing"
        )
    union = exposures[0]
    for frame in exposures[1:]:
        union = union.unionByName(frame)
    events = clicks[0] if clicks else empty_frame(spark, CLICK_COLUMNS)
    for frame in clicks[1:]:
        events = events.unionByName(frame, allowMissingColumns=True)
    return union, events, found, paths


def _outside_unit(c: Column) -> Column:
    """A probability that is present but not in (0, 1]."""
    return c.isNotNull() & (F.isnan(c) | (c <= 0) | (c > 1))


def check_logged(tagged: DataFrame, paths: Sequence[str]) -> dict[str, int]:
    """Counts of the logged rows in one job (rows, set aside per reason, exposures, rows with each
    propensity); a :class:`SchemaError` (one line, an example) when a propensity lies outside (0, 1]."""
    valid = F.col(REASON).isNull() & F.col(ITEM).isNotNull()

    def n(condition: Column) -> Column:
        return F.sum(F.when(condition, 1).otherwise(0))

    aggs = [F.count(F.lit(1)).alias("rows"), n(valid).alias("exposures")]
    for name in _PROPENSITIES:
        aggs.append(n(valid & F.col(name).isNotNull()).alias(f"with_{name}"))
        aggs.append(n(valid & _outside_unit(F.col(name))).alias(f"bad_{name}"))
    rows = tagged.groupBy(REASON).agg(*aggs).collect()
    counts: dict[str, int] = {}
    for row in rows:
        for key, value in row.asDict().items():
            if key != REASON:
                counts[key] = counts.get(key, 0) + int(value or 0)
        if row[REASON] is not None:
            counts[f"set_aside_{row[REASON]}"] = int(row["rows"])
    for name in _PROPENSITIES:
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


def label_logged(cfg: Config, tagged: DataFrame, clicks: DataFrame, rows: int) -> DataFrame:
    """The valid logged exposures with their reward (``relevance``), by the daily job's labelling steps:
    partitioned by user, deduplicated on (user, request, item), feedback attributed in the same window
    with the same weights.  Empty responses are left out (nothing was shown)."""
    spark = tagged.sparkSession
    partitions = bucket_count(rows, cfg.execution.rows_per_bucket, default_parallelism(spark))
    valid = split_rows(tagged)[0]
    deduplicated = deduplicate_exposures(by_user(valid, partitions))
    labels = cfg.labels
    joined = join_feedback(
        deduplicated,
        by_user(clicks, partitions),
        cfg.attribution.window_minutes,
        labels.event_weights,
        labels.click_event,
    )
    return joined.where(F.col(ITEM).isNotNull()).select(USER, REQUEST, ITEM, POSITION, RELEVANCE, *_PROPENSITIES)


# --------------------------------------------------------------------------- the candidate


def read_target(spark: SparkSession, location: str) -> DataFrame:
    return conform(read_parquet(spark, location, "ope.target"), TARGET_COLUMNS, location)


def target_rows(target: DataFrame, partitions: int) -> DataFrame:
    """The candidate's rows that show an item (probability e > 0, q = its q̂), hash-partitioned by request;
    with ``bad``: the rows whose probability is null, NaN or outside [0, 1], or that have no item."""
    prob = F.col(PROBABILITY)
    q = F.col(Q_HAT) if Q_HAT in target.columns else F.lit(None).cast("double")
    bad = F.col(ITEM).isNull() | prob.isNull() | F.isnan(prob) | (prob < 0) | (prob > 1)
    return target.repartition(partitions, REQUEST).select(
        REQUEST, ITEM, POSITION, prob.alias("e"), q.alias("q"), bad.alias("bad")
    )


def target_positions(rows: DataFrame) -> DataFrame:
    """Per (request, position) of the candidate (from :func:`target_rows`, partitioned by request): its
    mass Σπ, its modelled reward d = Σ π q̂, and the checks' counts."""
    e, q, bad = F.col("e"), F.col("q"), F.col("bad")
    shown = ~bad & (e > 0)
    return rows.groupBy(REQUEST, POSITION).agg(
        F.sum(F.when(~bad, e)).alias("mass"),
        F.sum(F.when(shown, e * q)).alias("d"),
        F.count(F.lit(1)).alias("n_rows"),
        F.sum(F.when(bad, 1).otherwise(0)).alias("bad"),
        F.sum(F.when(shown & (q.isNull() | F.isnan(q)), 1).otherwise(0)).alias("q_missing"),
        F.sum(F.when(shown & (e < 1), 1).otherwise(0)).alias("fractional"),
    )


def check_target(positions: DataFrame, location: str, has_q: bool) -> dict[str, Any]:
    """Counts over the candidate in one job; a :class:`SchemaError` (one line, an example) for a
    probability outside [0, 1] or a (request, position) whose probabilities sum above 1 (a row listed
    twice is caught where it matters, on a logged row: :func:`check_no_copies`)."""
    over = F.col("mass") > 1 + MASS_TOLERANCE
    row = positions.agg(
        F.count(F.lit(1)).alias("positions"),
        F.sum("n_rows").alias("rows"),
        F.sum("bad").alias("bad"),
        F.sum("q_missing").alias("q_missing"),
        F.sum("fractional").alias("fractional"),
        F.sum(F.when(over, 1).otherwise(0)).alias("over"),
        F.max_by(F.struct(REQUEST, POSITION, "mass"), "mass").alias("heaviest"),
    ).collect()[0]
    counts = {k: row[k] for k in ("positions", "rows", "bad", "q_missing", "fractional", "over")}
    counts = {k: int(v or 0) for k, v in counts.items()}
    if counts["positions"] == 0:
        raise EmptyInputError(f"empty input ope.target (0 rows): {location}")
    if counts["bad"]:
        raise SchemaError(
            f"ope.target {location}: {counts['bad']} rows have no item, or a probability that is null, NaN or "
            "outside [0, 1]"
        )
    if counts["over"]:
        worst = row["heaviest"]
        raise SchemaError(
            f"ope.target {location}: the probabilities of {counts['over']} (request, position) pairs sum above 1 "
            f"(e.g. request {worst[REQUEST]}, position {worst[POSITION]}: {worst['mass']:.6g})"
        )
    counts["has_q"] = has_q and counts["q_missing"] == 0
    return counts


def unsupported_mass(labelled: DataFrame, candidate: DataFrame) -> tuple[float, float]:
    """(the candidate's mass on (item, position) pairs no logged row shows, its whole mass), over the
    logged requests (``candidate``: :func:`target_rows`)."""
    pairs = labelled.select(ITEM, POSITION).distinct().withColumn("_seen", F.lit(True))
    on_logged = candidate.where(~F.col("bad")).join(labelled.select(REQUEST).distinct(), REQUEST, "left_semi")
    row = (
        on_logged.join(pairs, [ITEM, POSITION], "left")
        .agg(
            F.sum("e").alias("mass"),
            F.sum(F.when(F.col("_seen").isNull(), F.col("e"))).alias("unseen"),
        )
        .collect()[0]
    )
    return float(row["unseen"] or 0.0), float(row["mass"] or 0.0)


# --------------------------------------------------------------------------- the sums


def list_terms(
    labelled: DataFrame,
    candidate: DataFrame,
    positions: DataFrame,
    partitions: int,
    clip: float,
    tau: float,
    ordered: bool,
    with_list: bool,
) -> DataFrame:
    """One row per logged (user, request): the item-level sums of its rows and its list-level terms
    (kernels/ope.py's definitions).  ``ordered``: compute RIPS (the rows in position order);
    ``with_list``: compute the standard slate IPS.

    The logged rows are hash-partitioned by request (their one shuffle here) like ``candidate``
    (:func:`target_rows`) and ``positions`` (:func:`target_positions`), so the joins on (request, item,
    position) and (request, position) and the sums per (user, request) move nothing more
    (``spark.sql.requireAllClusterKeysForCoPartition=false``, which the job sets); only the per-list rows
    move, to be summed per user.
    """
    rows = (
        labelled.repartition(partitions, REQUEST)
        .join(
            candidate.where(~F.col("bad") & (F.col("e") > 0)).select(REQUEST, ITEM, POSITION, "e", "q"),
            [REQUEST, ITEM, POSITION],
            "left",
        )
        .join(positions.select(REQUEST, POSITION, "d", "mass"), [REQUEST, POSITION], "left")
    )
    y = F.col(RELEVANCE).cast("double")
    p = F.col(PROPENSITY)
    rows = rows.select(
        USER,
        REQUEST,
        POSITION,
        y.alias("y"),
        p.alias("p"),
        F.col(LIST_PROPENSITY).alias("lp"),
        F.col(PREFIX_PROPENSITY).alias("pp"),
        F.coalesce(F.col("e"), F.lit(0.0)).alias("e"),
        F.col("q"),
        F.coalesce(F.col("d"), F.lit(0.0)).alias("d"),
        F.coalesce(F.col("mass"), F.lit(0.0)).alias("mass"),
    )
    has_p = F.col("p").isNotNull()
    raw = F.when(has_p, F.col("e") / F.col("p")).otherwise(F.lit(0.0))
    rows = rows.withColumn("raw", raw).withColumn("w", _clipped(F.col("raw"), clip))
    y, e, w, d = F.col("y"), F.col("e"), F.col("w"), F.col("d")
    residual = F.when(e > 0, y - F.coalesce(F.col("q"), F.lit(0.0))).otherwise(F.lit(0.0))

    def total(value: Column, where: Column | None = None) -> Column:
        return F.sum(value if where is None else F.when(where, value).otherwise(F.lit(0.0))).cast("double")

    one = F.lit(1.0)
    aggs = [
        total(one).alias("rows"),
        total(y).alias("reward"),
        total(d).alias("dm"),
        total(F.col("mass")).alias("mass"),
        total(one, e == 1.0).alias("match"),
        total(y, e == 1.0).alias("match_reward"),
        total(one, e == 0.0).alias("unseen"),
        total(one, has_p).alias("rows_p"),
        total(d, has_p).alias("dm_p"),
        total(w, has_p).alias("w"),
        total(w * w, has_p).alias("w_sq"),
        total(w * y, has_p).alias("w_reward"),
        total(w * residual, has_p).alias("w_residual"),
        total(w * residual, has_p & (F.col("raw") <= tau)).alias("switch_residual"),
        F.max(F.when(has_p, w)).alias("max_w"),
        F.count(F.col("p")).alias("n_p"),
        F.count(F.lit(1)).alias("n"),
        F.max("lp").alias("lp"),
        F.count(F.col("pp")).alias("n_pp"),
    ]
    if with_list:
        aggs.append(F.aggregate(F.collect_list(e), F.lit(1.0), lambda acc, x: acc * x).alias("e_list"))
    if ordered:
        ordered_rows = F.array_sort(F.collect_list(F.struct(POSITION, "e", "y", "pp")))
        cascade = F.aggregate(
            ordered_rows,
            F.struct(F.lit(1.0).alias("prod"), F.lit(0.0).alias("total")),
            lambda acc, x: F.struct(
                (acc["prod"] * x["e"]).alias("prod"),
                (acc["total"] + x["y"] * _clipped(acc["prod"] * x["e"] / x["pp"], clip)).alias("total"),
            ),
            lambda acc: acc["total"],
        )
        aggs.append(cascade.alias("cascade"))
    per_list = rows.groupBy(USER, REQUEST).agg(*aggs)
    complete_p = F.col("n_p") == F.col("n")
    has_lp = F.col("lp").isNotNull()
    complete_pp = F.col("n_pp") == F.col("n")
    zero = F.lit(0.0)
    extra = {
        "lists": F.lit(1.0),
        "list_reward": F.col("reward"),
        "lists_sips": F.when(has_lp, 1.0).otherwise(zero) if with_list else zero,
        "sips": F.when(has_lp, _clipped(F.col("e_list") / F.col("lp"), clip) * F.col("reward")).otherwise(zero)
        if with_list
        else zero,
        "lists_iips": F.when(complete_p, 1.0).otherwise(zero),
        "iips": F.when(complete_p, F.col("w_reward")).otherwise(zero),
        "lists_rips": F.when(complete_pp, 1.0).otherwise(zero) if ordered else zero,
        "rips": F.when(complete_pp, F.col("cascade")).otherwise(zero) if ordered else zero,
    }
    return per_list.select(
        USER, *[extra[name].alias(name) if name in extra else F.col(name) for name in K.SUMS], "max_w"
    )


def check_no_copies(sums: K.RunSums, labelled: DataFrame, location: str) -> None:
    """A :class:`SchemaError` when the candidate lists a logged row's (request, item, position) twice: the
    join then counted that logged row twice (one count of the persisted labelled rows)."""
    rows = labelled.count()
    if sums.sum("rows") != rows:
        raise SchemaError(
            f"ope.target {location}: some (request_id, item_id, position) of a logged row are listed more than "
            f"once ({int(sums.sum('rows')) - rows} extra rows); one row per (request_id, item_id, position)"
        )


def _clipped(weight: Column, clip: float) -> Column:
    return F.least(weight, F.lit(float(clip))) if clip > 0 else weight


def run_sums(per_list: DataFrame) -> K.RunSums:
    """The per-user sums of :data:`kernels.ope.SUMS`, then per run: the users, Σ of each, Σ of the
    products :func:`kernels.ope.products` names, the largest weight (one row to the driver)."""
    per_user = per_list.groupBy(USER).agg(*[F.sum(name).alias(name) for name in K.SUMS], F.max("max_w").alias("max_w"))
    pairs = K.products()
    row = per_user.agg(
        F.count(F.lit(1)).alias("_n"),
        *[F.sum(name).alias(name) for name in K.SUMS],
        *[F.sum(F.col(a) * F.col(b)).alias(K.product_name(a, b)) for a, b in pairs],
        F.max("max_w").alias("max_w"),
    ).collect()[0]
    return K.RunSums(
        float(row["_n"]),
        {name: float(row[name] or 0.0) for name in K.SUMS},
        {(a, b): float(row[K.product_name(a, b)] or 0.0) for a, b in pairs},
        None if row["max_w"] is None else float(row["max_w"]),
    )


# --------------------------------------------------------------------------- the run


def run_ope(
    spark: SparkSession,
    cfg: Config,
    run: str,
    start: dt.date,
    end: dt.date,
    input_root: str,
    output_root: str,
) -> dict[str, Any]:
    """``recsys-spark ope``: estimate the candidate of ``ope.target`` over the logged days [start, end];
    write ``ope/{estimates,diagnostics,summary}/run=NAME``; return the summary."""
    templates.configure(templates.InputSettings.of(cfg.input))
    apply_time_zone(spark, cfg.validation.time_zone)
    location = target_location(cfg, input_root, run)
    days = [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]
    settings = cfg.ope
    out = DailyOutput(
        spark,
        root_of(output_root),
        f"run {run}",
        cfg.output.stale_minutes,
        owned=OPE_TABLES,
        heartbeat_seconds=cfg.output.heartbeat_seconds,
        partition=run_partition(run),
    )
    out.refuse_inputs_inside([location])
    timings: dict[str, float] = {}
    notes: list[str] = []
    persisted: list[DataFrame] = []
    out.acquire()  # one run of a name at a time; proves the output root writable before any work
    try:
        with log.stage("read", timings, run=run) as info:
            tagged, clicks, found, paths = read_logged(spark, cfg, input_root, days, notes)
            counts = check_logged(tagged, paths)
            if counts["exposures"] == 0:
                raise EmptyInputError(f"no valid logged exposure with an item between {start} and {end}")
            target = read_target(spark, location)
            has_q = Q_HAT in target.columns
            partitions = bucket_count(counts["exposures"], cfg.execution.rows_per_bucket, default_parallelism(spark))
            candidate = target_rows(target, partitions)
            positions = target_positions(candidate).persist(CACHE_LEVEL)
            persisted.append(positions)
            target_counts = check_target(positions, location, has_q)
            info.update(days=len(found), exposures=counts["exposures"], target_rows=target_counts["rows"])
        with log.stage("label", timings) as info:
            labelled = label_logged(cfg, tagged, clicks, counts["exposures"]).persist(CACHE_LEVEL)
            persisted.append(labelled)
        with log.stage("estimate", timings) as info:
            per_list = list_terms(
                labelled,
                candidate,
                positions,
                partitions,
                settings.clip,
                settings.switch_tau,
                ordered=counts[f"with_{PREFIX_PROPENSITY}"] > 0,
                with_list=counts[f"with_{LIST_PROPENSITY}"] > 0,
            )
            sums = run_sums(per_list)
            check_no_copies(sums, labelled, location)
            unseen, mass = unsupported_mass(labelled, candidate)
            info.update(users=int(sums.n), rows=int(sums.sum("rows")))
        available = {
            "propensity": sums.sum("rows_p") > 0,
            "q_hat": bool(target_counts["has_q"]),
            "deterministic": target_counts["fractional"] == 0,
            "list_propensity": sums.sum("lists_sips") > 0,
            "prefix_propensity": sums.sum("lists_rips") > 0,
        }
        if has_q and not target_counts["has_q"]:
            notes.append(f"ope.target: {target_counts['q_missing']} rows with a probability above 0 have no q_hat")
        wanted = [name for name in K.ESTIMATORS if name in settings.estimators or name in K.BASELINE.values()]
        estimates, skipped = K.estimate_all(sums, available, cfg.stats.confidence, wanted)
        notes += skipped
        diagnostics = K.diagnostics(sums, unseen, mass)
        filled = diagnostics["mean_target_mass"]
        if filled is not None and filled < 1 - 1e-6:
            notes.append(
                f"the candidate's probabilities at a logged request and position sum to {filled:.3g} on average: it "
                "leaves positions empty; snips, sndr and replay estimate its reward per position it fills, "
                "ips, dm, dr and switch_dr per logged position"
            )
        if diagnostics["rows_without_propensity"]:
            notes.append(
                f"{int(diagnostics['rows_without_propensity'] or 0)} logged rows have no propensity: left out of "
                "the weighted estimators (dm, replay and logged read every row)"
            )
        with log.stage("write", timings):
            rows = estimate_tuples(estimates, settings.clip, settings.switch_tau, cfg)
            out.stage_rows("estimates", rows, OPE_ESTIMATES_DDL)
            out.stage_rows("diagnostics", [(k, _number(v)) for k, v in diagnostics.items()], OPE_DIAGNOSTICS_DDL)
            summary = {
                "run": run,
                "status": "ok",
                "start": start.isoformat(),
                "end": end.isoformat(),
                "days_found": [d.isoformat() for d in found],
                "target": location,
                "parameters": {
                    "clip": settings.clip,
                    "switch_tau": settings.switch_tau,
                    "confidence": cfg.stats.confidence,
                    "estimators": wanted,
                },
                "counts": {**counts, **{f"target_{k}": v for k, v in target_counts.items() if k != "has_q"}},
                "estimates": {e.estimator: e.value for e in estimates},
                "diagnostics": {k: _number(v) for k, v in diagnostics.items()},
                "notes": notes,
                "seconds": dict(timings),
                "config_hash": cfg.fingerprint(),
            }
            out.stage_text(SUMMARY, "summary.json", json.dumps(_finite(summary), indent=2, allow_nan=False))
            out.commit()
    except BaseException:
        out.abort()
        raise
    finally:
        for df in persisted:
            df.unpersist()
    return summary


def _number(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _finite(value: Any) -> Any:
    """NaN and infinities as null: the summary is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def estimate_tuples(estimates: Sequence[K.Estimate], clip: float, tau: float, cfg: Config) -> list[tuple]:
    """The estimates table's rows (:data:`schema.OPE_ESTIMATES_DDL`'s columns), with the parameters each used."""
    out = []
    for e in estimates:
        spec = K.ESTIMATORS[e.estimator]
        out.append(
            (
                e.estimator,
                e.level,
                e.value,
                e.se,
                e.ci_low,
                e.ci_high,
                e.ci_method,
                e.n,
                e.units,
                e.delta,
                e.delta_se,
                e.delta_ci_low,
                e.delta_ci_high,
                (clip if clip > 0 else None) if "clip" in spec.parameters else None,
                tau if "switch_tau" in spec.parameters else None,
                cfg.stats.confidence,
            )
        )
    return out
