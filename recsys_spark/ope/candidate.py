"""The candidate of ``recsys-spark ope`` (``ope.target``): read, checked, and met with the logged requests.

The second of the run's three steps (:mod:`recsys_spark.ope.run`); its rules, each one line and a documented
exit when it fails (docs/ope.md, "Bad input: one line" and "What the run does with odd input"):

* **probabilities**: a row without a request (or a valid day) or an item, a probability that is null, NaN
  or outside [0, 1], or a (request, position) whose probabilities sum above 1 is refused (exit 5)
  (:func:`check_target`); a candidate without rows is exit 7;
* **keys**: a candidate with a ``dt`` column answers (day, request) pairs: its request ids become
  ``D|request`` (:func:`recsys_spark.ope.logged.day_request`), as the logged rows' will.  Without it a
  request id logged on two days is refused (exit 5) naming the id and the days: the candidate cannot say
  which of them it answers;
* **matches**: the candidate's requests are matched to the logged ones as strings, exactly (an integer
  ``7`` is ``"7"``, which is not ``"007"``); none matched, or fewer than ``ope.min_matched_share`` of the
  logged requests, fails (exit 7) naming an id of each side; below 1, a note counts the others.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark.config import Config
from recsys_spark.errors import ConfigError, EmptyInputError, SchemaError
from recsys_spark.io.read import conform, read_parquet
from recsys_spark.ope.logged import DAY, count_where, day_request
from recsys_spark.schema import ITEM, POSITION, PROBABILITY, Q_HAT, REASON, REQUEST, TARGET_COLUMNS
from recsys_spark.tables import check_name


def target_location(cfg: Config, input_root: str, run: str) -> str:
    """``ope.target`` with ``{input_root}`` and ``{run}`` filled in; a ConfigError (exit 3) when it is empty."""
    if not cfg.ope.target:
        raise ConfigError(
            'config key ope.target is empty: name the candidate\'s table (--set ope.target="PATH" or table:NAME; '
            "columns request_id, item_id, position, probability [, q_hat]; docs/ope.md)"
        )
    return cfg.ope.target.replace("{input_root}", input_root.rstrip("/")).replace("{run}", check_name(run, "ope run"))


@dataclass(frozen=True)
class Candidate:
    """The candidate, read and checked: its ``rows`` (:func:`target_rows`) and ``positions``
    (:func:`target_positions`), both hash-partitioned by request, whether it answers (day, request) pairs
    (``by_day``) and has a ``q_hat`` column (``has_q``), and the checks' ``counts`` (:func:`check_target`)."""

    location: str
    rows: DataFrame
    positions: DataFrame
    by_day: bool
    has_q: bool
    counts: dict[str, Any]


def read_candidate(
    spark: SparkSession,
    location: str,
    columns: Mapping[str, str],
    partitions: int,
    persist: Callable[[DataFrame], DataFrame],
    position_base: int = 1,
) -> Candidate:
    """Step 2 of the run: the candidate at ``location`` (:func:`read_target`), its rows in ``partitions``
    partitions by request, its positions kept by ``persist`` (before the check, so that the run releases
    them whatever happens), then checked (:func:`check_target`)."""
    target, by_day = read_target(spark, location, columns, position_base)
    has_q = Q_HAT in target.columns
    rows = target_rows(target, partitions)
    positions = persist(target_positions(rows))
    counts = check_target(positions, location, has_q)
    return Candidate(location, rows, positions, by_day, has_q, counts)


def read_target(
    spark: SparkSession, location: str, columns: Mapping[str, str], position_base: int = 1
) -> tuple[DataFrame, bool]:
    """The candidate (``ope.target``, its columns renamed by ``columns``: ``input.columns``) and whether it
    names the day each row answers (a ``dt`` column: a date, a ``YYYY-MM-DD`` string or a timestamp; a
    ``dt=D`` folder gives one); with it, the request ids are :func:`day_request` ids, as the logged rows'
    will be.  ``position_base`` (``input.position_base``): its positions are read 1-based, as the logs'."""
    raw = read_parquet(spark, location, "ope.target", columns)
    if DAY not in raw.columns:
        return conform(raw, TARGET_COLUMNS, location, position_base=position_base), False
    target = conform(raw, TARGET_COLUMNS, location, typed=[DAY], position_base=position_base)
    return target.withColumn(REQUEST, day_request(_as_date(target, location), F.col(REQUEST))).drop(DAY), True


def _as_date(target: DataFrame, location: str) -> Column:
    kind = target.schema[DAY].dataType
    if isinstance(kind, T.DateType):
        return F.col(DAY)
    if isinstance(kind, T.StringType):
        return F.try_to_timestamp(F.col(DAY), F.lit("yyyy-MM-dd")).cast("date")
    if isinstance(kind, (T.TimestampType, T.TimestampNTZType)):
        return F.col(DAY).cast("date")
    raise SchemaError(
        f"column {DAY!r} in {location} has type {kind.simpleString()}: the day a candidate's row answers is a "
        "date, a 'YYYY-MM-DD' string or a timestamp"
    )


def target_rows(target: DataFrame, partitions: int) -> DataFrame:
    """The candidate's rows that show an item (probability e > 0, q = its q̂), hash-partitioned by request;
    with ``bad``: the rows without a request (or a day, when it names one) or an item, or whose probability
    is null, NaN or outside [0, 1]."""
    prob = F.col(PROBABILITY)
    q = F.col(Q_HAT) if Q_HAT in target.columns else F.lit(None).cast("double")
    bad = F.col(REQUEST).isNull() | F.col(ITEM).isNull() | prob.isNull() | F.isnan(prob) | (prob < 0) | (prob > 1)
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
        count_where(bad).alias("bad"),
        count_where(shown & (q.isNull() | F.isnan(q))).alias("q_missing"),
        count_where(shown & (e < 1)).alias("fractional"),
    )


#: a candidate's probabilities for one (request, position) may sum to 1 + this (rounding), no more
MASS_TOLERANCE = 1e-9


def check_target(positions: DataFrame, location: str, has_q: bool) -> dict[str, Any]:
    """Counts over the candidate in one job; a :class:`SchemaError` (one line, an example) for a
    probability outside [0, 1] or a (request, position) whose probabilities sum above 1 (a row listed
    twice is caught where it matters, on a logged row: :func:`recsys_spark.ope.sums.check_no_copies`)."""
    over = F.col("mass") > 1 + MASS_TOLERANCE
    row = positions.agg(
        F.count(F.lit(1)).alias("positions"),
        F.sum("n_rows").alias("rows"),
        F.sum("bad").alias("bad"),
        F.sum("q_missing").alias("q_missing"),
        F.sum("fractional").alias("fractional"),
        count_where(over).alias("over"),
        F.max_by(F.struct(REQUEST, POSITION, "mass"), "mass").alias("heaviest"),
    ).collect()[0]
    counts = {k: row[k] for k in ("positions", "rows", "bad", "q_missing", "fractional", "over")}
    counts = {k: int(v or 0) for k, v in counts.items()}
    if counts["positions"] == 0:
        raise EmptyInputError(f"empty input ope.target (0 rows): {location}")
    if counts["bad"]:
        raise SchemaError(
            f"ope.target {location}: {counts['bad']} rows have no request_id (or no valid dt) or item, or a "
            "probability that is null, NaN or outside [0, 1]"
        )
    if counts["over"]:
        worst = row["heaviest"]
        raise SchemaError(
            f"ope.target {location}: the probabilities of {counts['over']} (request, position) pairs sum above 1 "
            f"(e.g. request {worst[REQUEST]}, position {worst[POSITION]}: {worst['mass']:.6g})"
        )
    counts["has_q"] = has_q and counts["q_missing"] == 0
    return counts


# --------------------------------------------------------------------------- the two sides meet


def match_requests(
    exposures: DataFrame, positions: DataFrame, location: str, min_share: float, by_day: bool, notes: list[str]
) -> dict[str, int]:
    """How the candidate's requests meet the logged ones (valid, with an item), in one job: the logged
    requests, the candidate's, those in both, and the logged request ids seen on several days.

    Raises a :class:`SchemaError` when a request id repeats across days and the candidate names no day
    (``by_day`` False: it cannot say which day it answers); an :class:`EmptyInputError` when no request
    matched or fewer than ``min_share`` of the logged ones did, naming an id of each side (ids are
    compared as strings, exactly).  Between ``min_share`` and 1: a note."""
    valid = F.col(REASON).isNull() & F.col(ITEM).isNotNull() & F.col(REQUEST).isNotNull()
    logged = (
        exposures.where(valid)
        .select(REQUEST, DAY)
        .distinct()
        .groupBy(REQUEST)
        .agg(F.count(F.lit(1)).alias("_days"), F.min(DAY).alias("_first"), F.max(DAY).alias("_last"))
    )
    target = positions.select(REQUEST).distinct().withColumn("_target", F.lit(True))
    on_log, on_target = F.col("_days").isNotNull(), F.col("_target").isNotNull()
    row = (
        logged.join(target, REQUEST, "full")
        .agg(
            count_where(on_log).alias("logged_requests"),
            count_where(on_target).alias("target_requests"),
            count_where(on_log & on_target).alias("matched_requests"),
            count_where(F.col("_days") > 1).alias("repeated_requests"),
            F.min(F.when(F.col("_days") > 1, F.struct(REQUEST, "_days", "_first", "_last"))).alias("repeated"),
            F.min(F.when(on_log & ~on_target, F.col(REQUEST))).alias("logged_only"),
            F.min(F.when(on_target & ~on_log, F.col(REQUEST))).alias("target_only"),
        )
        .collect()[0]
    )
    counts = {k: int(row[k] or 0) for k in ("logged_requests", "target_requests", "matched_requests")}
    repeated = int(row["repeated_requests"] or 0)
    if repeated and not by_day:
        r = row["repeated"]
        others = f", and {repeated - 1} more ids repeat across days" if repeated > 1 else ""
        raise SchemaError(
            f"ope: request id {r[REQUEST]!r} is logged on {r['_days']} days ({r['_first']} to {r['_last']}){others}; "
            f"the candidate ({location}) has no {DAY} column to say which day it answers: add the logged day "
            f"as a {DAY} column (a date) to the candidate, or log ids unique across days"
        )
    logged_n, matched = counts["logged_requests"], counts["matched_requests"]
    share = matched / logged_n if logged_n else 0.0
    if share < min_share:
        example = (
            f"e.g. logged request id {row['logged_only']!r}, candidate request id {row['target_only']!r}; ids are "
            "compared as strings, exactly (7 and '007' differ)"
        )
        raise EmptyInputError(
            f"ope: the candidate ({location}) answers {matched} of {logged_n} logged requests ({share:.1%}; "
            f"ope.min_matched_share is {min_share:g}): {counts['target_requests']} candidate request id(s), "
            f"{matched} matched ({example})"
        )
    if matched < logged_n:
        notes.append(
            f"the candidate has no row for {logged_n - matched} of the {logged_n} logged requests (e.g. "
            f"{row['logged_only']!r}): they count as lists it leaves empty (e = 0 on each of their rows)"
        )
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


#: the file a generator writes beside its candidate with the candidate's true value (``generate --ope``:
#: :func:`recsys_spark.synthetic.candidate.write_truth`), and the keys the summary's ``truth`` reads from it
TRUTH_FILE = "truth.json"
TRUTH_KEYS = ("candidate_per_row", "logged_per_row", "candidate_per_list", "logged_per_list")


def read_truth(location: str, notes: list[str] | None = None) -> dict[str, Any] | None:
    """The true value of the candidate when a generator knows it: ``truth.json`` in the folder that holds the
    candidate (beside ``candidates/NAME/target``, as ``generate --ope`` writes it), for a local path only
    (a ``table:NAME`` or another file system has none).  Returns ``{value, logged, delta}`` per logged position
    (what the item-level estimates and their ``delta`` estimate), ``value_per_list``, ``logged_per_list`` and
    its ``source``; None when there is no such file, or (with a note) when it is not the generator's."""
    if location.startswith("table:") or ("://" in location and not location.startswith("file://")):
        return None
    path = Path(location.removeprefix("file://").removeprefix("file:").rstrip("/")).parent / TRUTH_FILE
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
        values = {key: float(raw[key]) for key in TRUTH_KEYS}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if notes is not None:
            notes.append(f"{path}: not a generator's truth file ({type(exc).__name__}: {exc}): no truth shown")
        return None
    if not all(math.isfinite(v) for v in values.values()):
        return None
    return {
        "value": values["candidate_per_row"],
        "logged": values["logged_per_row"],
        "delta": values["candidate_per_row"] - values["logged_per_row"],
        "value_per_list": values["candidate_per_list"],
        "logged_per_list": values["logged_per_list"],
        "source": str(path),
    }
