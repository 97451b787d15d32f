"""``recsys-spark ope``: a candidate policy's reward estimated from the logged days (Spark wiring only).

The maths is :mod:`recsys_spark.kernels.ope` (formulas there and in docs/ope.md); here:

1. the logged days (:mod:`recsys_spark.ope.inputs`): each day's exposures (with the optional
   ``propensity``, ``list_propensity`` and ``prefix_propensity`` columns) and clicks, validated by the daily
   job's checks against their own day (a day without feedback left out with a note), keyed by day and
   request, then labelled by the daily job's steps (:mod:`recsys_spark.steps.label`: the one shuffle by user, the
   same deduplication, attribution window and event weights), so that a reward here is a click there;
2. the candidate (``ope.target``): hash-partitioned by request, one row per (request, item, position),
   summed per (request, position) -- its mass, its modelled reward Σ π q̂ -- checked, and matched with the
   logged requests (none, or too few, is an error naming an id of each side);
3. one query: the labelled rows, hash-partitioned by request too (their one shuffle here), joined with
   the candidate's row and position in place, each row's terms, sums per (user, request) in place -- the
   list-level terms, in position order -- then per user (the per-list rows move), then per run: Σ of
   every per-user sum and of the products the intervals need.

One row reaches the driver (plus a few counts from the checks); nothing proportional to rows, users or
items.  Bad input is one line before anything is computed: a propensity outside (0, 1], a candidate whose
probabilities for one (request, position) sum above 1 (or that lists a row twice, or has a probability
outside [0, 1]), a request id logged on two days that the candidate cannot tell apart, copies of a logged
row that disagree on a propensity.  An estimator whose input is missing (no propensity, no q̂ for every row
the candidate shows, a candidate that is not deterministic for replay, ...) is skipped with a note; the
others run.  An estimator whose sums overflow a double has no interval, and the run's status says
``overflow`` (a note names the weight).

Writes ``{output_root}/ope/{estimates,diagnostics}/run=NAME/`` and ``ope/summary/run=NAME/summary.json``
through :func:`recsys_spark.io.output.open_output` (on a classic session the run's lock, staging, the
journalled commit, ``_SUCCESS`` last, as the offline runs do; on Spark Connect plain overwrites).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config
from recsys_spark.errors import ConfigError, EmptyInputError, HardRuleViolation, SchemaError
from recsys_spark.io.output import commit_summary, open_wing
from recsys_spark.kernels import ope as K
from recsys_spark.ope.inputs import (
    DAY,
    check_labelled,
    check_logged,
    check_target,
    day_request,
    keyed_clicks,
    label_logged,
    match_requests,
    read_logged,
    read_target,
    target_positions,
    target_rows,
)
from recsys_spark.per_user.table import bucket_count
from recsys_spark.runtime import log
from recsys_spark.runtime.engine import default_parallelism
from recsys_spark.runtime.session import CACHE_LEVEL, apply_time_zone
from recsys_spark.schema import (
    ITEM,
    LIST_PROPENSITY,
    OPE_DIAGNOSTICS_DDL,
    OPE_ESTIMATES_DDL,
    POSITION,
    PREFIX_PROPENSITY,
    PROPENSITY,
    Q_HAT,
    RELEVANCE,
    REQUEST,
    USER,
)
from recsys_spark.tables import OPE, check_name


def target_location(cfg: Config, input_root: str, run: str) -> str:
    """``ope.target`` with ``{input_root}`` and ``{run}`` filled in; a ConfigError (exit 3) when it is empty."""
    if not cfg.ope.target:
        raise ConfigError(
            'config key ope.target is empty: name the candidate\'s table (--set ope.target="PATH" or table:NAME; '
            "columns request_id, item_id, position, probability [, q_hat]; docs/ope.md)"
        )
    return cfg.ope.target.replace("{input_root}", input_root.rstrip("/")).replace("{run}", check_name(run, "ope run"))


# --------------------------------------------------------------------------- the candidate on the logged rows


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
        ITEM,
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
        F.max(F.when(has_p, F.struct(w.alias("w"), F.col("e"), F.col("p"), REQUEST, ITEM, POSITION))).alias("top_w"),
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
    heaviest = [F.col("top_w")]
    if with_list:  # the list weight W of slate_ips, with what it is made of
        weight = _clipped(F.col("e_list") / F.col("lp"), clip)
        heaviest.append(
            F.when(
                has_lp,
                F.struct(weight.alias("w"), F.col("e_list"), F.col("lp"), F.col(REQUEST)),
            ).alias("top_list")
        )
    return per_list.select(
        USER, *[extra[name].alias(name) if name in extra else F.col(name) for name in K.SUMS], *heaviest
    )


def check_no_copies(sums: K.RunSums, rows: int, location: str) -> None:
    """A :class:`SchemaError` when the candidate lists a logged row's (request, item, position) twice: the
    join then counted that logged row twice (``rows``: the labelled rows,
    :func:`recsys_spark.ope.inputs.check_labelled`)."""
    if sums.sum("rows") != rows:
        raise SchemaError(
            f"ope.target {location}: some (request_id, item_id, position) of a logged row are listed more than "
            f"once ({int(sums.sum('rows')) - rows} extra rows); one row per (request_id, item_id, position)"
        )


def _clipped(weight: Column, clip: float) -> Column:
    return F.least(weight, F.lit(float(clip))) if clip > 0 else weight


def run_sums(per_list: DataFrame) -> tuple[K.RunSums, dict[str, Any]]:
    """The per-user sums of :data:`kernels.ope.SUMS`, then per run: the users, Σ of each, Σ of the
    products :func:`kernels.ope.products` names (one row to the driver); and the heaviest weights with
    what they are made of: ``item`` (w, e, p, request, item, position) and, with list propensities,
    ``list`` (W, Π e, list_propensity, request), or None."""
    tops = [c for c in ("top_w", "top_list") if c in per_list.columns]
    per_user = per_list.groupBy(USER).agg(
        *[F.sum(name).alias(name) for name in K.SUMS], *[F.max(c).alias(c) for c in tops]
    )
    pairs = K.products()
    row = per_user.agg(
        F.count(F.lit(1)).alias("_n"),
        *[F.sum(name).alias(name) for name in K.SUMS],
        *[F.sum(F.col(a) * F.col(b)).alias(K.product_name(a, b)) for a, b in pairs],
        *[F.max(c).alias(c) for c in tops],
    ).collect()[0]
    top = row["top_w"]
    sums = K.RunSums(
        float(row["_n"]),
        {name: float(row[name] or 0.0) for name in K.SUMS},
        {(a, b): float(row[K.product_name(a, b)] or 0.0) for a, b in pairs},
        None if top is None else float(top["w"]),
    )
    return sums, {"item": top, "list": row["top_list"] if "top_list" in tops else None}


def overflow_note(estimates: Sequence[K.Estimate], heaviest: dict[str, Any]) -> str | None:
    """One note for the estimates left without an interval because a sum overflowed a double
    (:attr:`kernels.ope.Estimate.note`), naming the weight that broke them: the heaviest importance weight
    (its request, item, position, e and propensity) and, for ``slate_ips``, the heaviest list weight."""
    broken = [e for e in estimates if e.note]
    if not broken:
        return None
    names = ", ".join(e.estimator for e in broken)
    parts = [f"no interval for {names}: a sum overflows a double ({broken[0].note})"]
    item, whole = heaviest.get("item"), heaviest.get("list")
    if item is not None and any(e.estimator != "slate_ips" for e in broken):
        parts.append(
            f"the largest importance weight is {item['w']:.3g} = e {item['e']:.3g} / propensity {item['p']:.3g} "
            f"(request {item[REQUEST]}, item {item[ITEM]}, position {item[POSITION]})"
        )
    if whole is not None and any(e.estimator == "slate_ips" for e in broken):
        parts.append(
            f"the largest list weight is {whole['w']:.3g} = Π e {whole['e_list']:.3g} / list_propensity "
            f"{whole['lp']:.3g} (request {whole[REQUEST]})"
        )
    return "; ".join(parts) + " (clip the weights with ope.clip, or check those propensities)"


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
    write ``ope/{estimates,diagnostics,summary}/run=NAME``; return the summary.

    On a classic session the output is the path output (lock, staging, commit, ``_SUCCESS``); on Spark
    Connect, which has no file-system API, the scratch output (plain overwrites, no ``_SUCCESS``:
    :func:`recsys_spark.io.output.open_output`), as the daily job's ``evaluate_day``."""
    apply_time_zone(spark, cfg.validation.time_zone)
    location = target_location(cfg, input_root, run)
    days = [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]
    settings = cfg.ope
    out = open_wing(spark, OPE, output_root, cfg.output, run=run)
    out.refuse_inputs_inside([location])
    timings: dict[str, float] = {}
    notes: list[str] = []
    persisted: list[DataFrame] = []
    out.acquire()  # one run of a name at a time; proves the output root writable before any work
    try:
        with log.stage("read", timings, run=run) as info:
            logged = read_logged(spark, cfg, input_root, days, notes)
            counts = check_logged(logged.exposures, logged.paths)
            if counts["exposures"] == 0:
                raise EmptyInputError(f"no valid logged exposure with an item between {start} and {end}")
            target, by_day = read_target(spark, location, cfg.input.columns)
            has_q = Q_HAT in target.columns
            partitions = bucket_count(counts["exposures"], cfg.execution.rows_per_bucket, default_parallelism(spark))
            candidate = target_rows(target, partitions)
            positions = target_positions(candidate).persist(CACHE_LEVEL)
            persisted.append(positions)
            target_counts = check_target(positions, location, has_q)
            exposures = logged.exposures
            if by_day:  # the candidate answers (day, request): so do the logged rows
                exposures = exposures.withColumn(REQUEST, day_request(F.col(DAY), F.col(REQUEST)))
            matched = match_requests(exposures, positions, location, settings.min_matched_share, by_day, notes)
            info.update(days=len(logged.days), exposures=counts["exposures"], target_rows=target_counts["rows"])
        with log.stage("label", timings) as info:
            clicks = keyed_clicks(logged, by_day, cfg.attribution.window_minutes, cfg.validation.time_zone)
            labelled = label_logged(cfg, exposures, clicks, counts["exposures"]).persist(CACHE_LEVEL)
            persisted.append(labelled)
            labelled_counts = check_labelled(labelled)
            duplicates = labelled_counts["duplicate_logged_rows"]
            if duplicates:
                notes.append(
                    f"{duplicates} logged rows repeat a (user, request, item) of their day: each counted once, at "
                    "its smallest position (the daily job's deduplication)"
                )
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
            sums, heaviest = run_sums(per_list)
            check_no_copies(sums, labelled_counts["rows"], location)
            check_feedback(sums, logged.valid_clicks, start, end)
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
        overflow = overflow_note(estimates, heaviest)
        if overflow:
            notes.append(overflow)
        diagnostics = K.diagnostics(sums, unseen, mass)
        notes += diagnostic_notes(diagnostics)
        with log.stage("write", timings):
            rows = estimate_tuples(estimates, settings.clip, settings.switch_tau, cfg)
            out.stage_rows("estimates", rows, OPE_ESTIMATES_DDL)
            out.stage_rows("diagnostics", [(k, _number(v)) for k, v in diagnostics.items()], OPE_DIAGNOSTICS_DDL)
            summary = {
                "run": run,
                "status": "overflow" if overflow else "ok",
                "start": start.isoformat(),
                "end": end.isoformat(),
                "days_found": [d.isoformat() for d in logged.days],
                "days_without_feedback": logged.without_feedback,
                "target": location,
                "keyed_by": "day and request" if by_day else "request",
                "parameters": {
                    "clip": settings.clip,
                    "switch_tau": settings.switch_tau,
                    "confidence": cfg.stats.confidence,
                    "min_matched_share": settings.min_matched_share,
                    "estimators": wanted,
                },
                "counts": {
                    **counts,
                    **matched,
                    "duplicate_logged_rows": duplicates,
                    **{f"target_{k}": v for k, v in target_counts.items() if k != "has_q"},
                },
                "estimates": {e.estimator: e.value for e in estimates},
                "diagnostics": {k: _number(v) for k, v in diagnostics.items()},
                "notes": notes,
                "seconds": dict(timings),
                "config_hash": cfg.fingerprint(),
            }
            commit_summary(out, OPE, summary)
    except BaseException:
        out.abort()
        raise
    finally:
        for df in persisted:
            df.unpersist()
    return summary


def check_feedback(sums: K.RunSums, valid_clicks: int, start: dt.date, end: dt.date) -> None:
    """A :class:`HardRuleViolation` (exit 8, the daily job's hard ``no_feedback``) when no logged exposure
    got feedback: every reward 0, every estimate 0 or the reward model's alone."""
    if sums.sum("reward") == 0:
        raise HardRuleViolation(
            f"ope: no logged exposure between {start} and {end} got feedback ({valid_clicks} valid clicks in the "
            "days read; none attributed to a logged exposure, or only events without a weight in "
            "labels.event_weights): no logged reward to estimate from (the daily job's hard no_feedback rule)"
        )


def diagnostic_notes(diagnostics: dict[str, float | None]) -> list[str]:
    """The notes the diagnostics call for: positions the candidate leaves empty, rows without a propensity."""
    notes = []
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
    return notes


def _number(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


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
