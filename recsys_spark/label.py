"""Labelling: deduplicate exposures, attribute feedback events, give each exposure a relevance.

Rules (docs/metrics.md, "Labelling"):

* exposures are deduplicated on (request_id, item_id), keeping the smallest
  position (then the earliest ts); ``copies`` keeps how many rows collapsed;
* an event with a request_id belongs to the exposure with the same request_id
  and item_id; one without belongs to the latest exposure with the same
  user_id, session_id and item_id whose ts lies in [event ts - window, event ts]
  (ties on ts: the largest request_id);
* relevance = the largest weight among the exposure's events (unlisted events
  weigh 0); ``clicked`` = at least one event named ``click_event``;
* events that match no exposure are *orphans*: they are kept in the output of
  :func:`join_feedback` (flagged) so that they are counted, not lost.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.schema import (
    CLICKED,
    COPIES,
    EVENT,
    EXPOSED,
    ITEM,
    N_EVENTS,
    POSITION,
    RELEVANCE,
    REQUEST,
    SESSION,
    TS,
    USER,
)


def deduplicate_exposures(exposures: DataFrame) -> DataFrame:
    """One row per (request_id, item_id): the smallest position, then earliest ts.

    Adds ``copies`` (rows that collapsed into this one).  An empty response
    (null item) stays one row per request.
    """
    others = [c for c in exposures.columns if c not in (REQUEST, ITEM, POSITION, TS)]
    keep = F.min(F.struct(POSITION, TS, *others)).alias("_kept")
    return (
        exposures.groupBy(REQUEST, ITEM)
        .agg(keep, F.count(F.lit(1)).alias(COPIES))
        .select(REQUEST, ITEM, *[F.col(f"_kept.{c}").alias(c) for c in (POSITION, TS, *others)], COPIES)
    )


def weigh_events(clicks: DataFrame, weights: Mapping[str, float], click_event: str) -> DataFrame:
    """Add each event's ``weight`` (0 when not listed) and ``is_click``."""
    event = F.coalesce(F.col(EVENT), F.lit(click_event)) if EVENT in clicks.columns else F.lit(click_event)
    weight: Column = F.lit(0.0)
    for name, value in weights.items():
        weight = F.when(event == name, F.lit(float(value))).otherwise(weight)
    return clicks.withColumn("weight", weight).withColumn("is_click", event == click_event)


def resolve_session_events(events: DataFrame, exposures: DataFrame, window_minutes: float) -> DataFrame:
    """Give events without a request_id the request_id of the exposure they belong to.

    Identical events (same user, session, item and ts) are resolved together.
    Returns (request_id, item_id, weight, is_click, n) with a null request_id
    for events that found no exposure in the window.
    """
    grouped = (
        events.where(F.col(REQUEST).isNull())
        .groupBy(USER, SESSION, ITEM, TS)
        .agg(F.max("weight").alias("weight"), F.max("is_click").alias("is_click"), F.count(F.lit(1)).alias("n"))
    )
    # No filter on the grouping keys of ``exposures`` here (not even the item_id IS NOT NULL a plain
    # equality would imply): Spark pushes such a filter below the deduplication, which then runs
    # twice, once per branch, with a second full shuffle of the exposures.  Written this way the
    # candidates read the same deduplicated exposures as the main join (a reused exchange; ``copies``
    # is referenced so that it is not pruned from this branch's copy), and an empty response (null
    # item) still matches no event, since the event's item must be non-null.
    candidates = exposures.where(F.col(COPIES) > 0).select(
        USER, SESSION, ITEM, F.col(REQUEST).alias("_req"), F.col(TS).alias("_exp_ts")
    )
    window = F.expr(f"INTERVAL {int(round(window_minutes * 60))} SECONDS")
    joined = grouped.join(
        candidates,
        on=[
            grouped[USER] == candidates[USER],
            grouped[SESSION] == candidates[SESSION],
            grouped[ITEM].isNotNull(),
            grouped[ITEM].eqNullSafe(candidates[ITEM]),
            candidates["_exp_ts"] <= grouped[TS],
            candidates["_exp_ts"] >= grouped[TS] - window,
        ],
        how="left",
    )
    latest = F.max(F.when(F.col("_req").isNotNull(), F.struct("_exp_ts", "_req")))
    return (
        joined.groupBy(grouped[USER], grouped[SESSION], grouped[ITEM], grouped[TS])
        .agg(
            latest.alias("_match"),
            F.max("weight").alias("weight"),
            F.max("is_click").alias("is_click"),
            F.max("n").alias("n"),
        )
        .select(F.col("_match._req").alias(REQUEST), ITEM, "weight", "is_click", "n")
    )


def join_feedback(
    exposures: DataFrame, clicks: DataFrame, window_minutes: float, weights: Mapping[str, float], click_event: str
) -> DataFrame:
    """Deduplicated exposures joined with their feedback; orphan events kept as rows.

    Output: the exposure columns plus ``relevance``, ``clicked``, ``n_events``
    and ``exposed`` (false on rows that are orphan events: no exposure matched;
    their ``n_events`` says how many events).  Rows with ``exposed`` true are
    the labelled exposures.
    """
    events = weigh_events(clicks, weights, click_event)
    direct = events.where(F.col(REQUEST).isNotNull()).select(
        REQUEST, ITEM, "weight", "is_click", F.lit(1).cast("long").alias("n")
    )
    # session events that found no exposure keep a null request_id: they never
    # match in the join below and come out as orphan rows
    by_session = resolve_session_events(events, exposures, window_minutes)
    attributed = (
        direct.unionByName(by_session)
        .groupBy(REQUEST, ITEM)
        .agg(F.max("weight").alias(RELEVANCE), F.max("is_click").alias(CLICKED), F.sum("n").alias(N_EVENTS))
    )
    return (
        exposures.withColumn(EXPOSED, F.lit(True))
        .join(attributed, on=[REQUEST, ITEM], how="full")
        .select(
            *[F.col(c) for c in exposures.columns],
            F.coalesce(EXPOSED, F.lit(False)).alias(EXPOSED),
            F.coalesce(RELEVANCE, F.lit(0.0)).alias(RELEVANCE),
            F.coalesce(CLICKED, F.lit(False)).alias(CLICKED),
            F.coalesce(N_EVENTS, F.lit(0)).cast("long").alias(N_EVENTS),
        )
    )


def label_counts(labelled: DataFrame, events: int) -> dict[str, int]:
    """Data-quality counts in one pass over labelled exposures (:func:`labelled_exposures`; one row per
    exposure: with slices, the caller keeps the ``all`` rows).

    ``events`` is the number of events given to :func:`join_feedback`: each one is either attributed
    to an exposure or an orphan, so ``orphan_events = events - attributed_events`` and the orphan rows
    need not be read (or kept) to count them.
    """
    item = F.col(ITEM).isNotNull()
    row = labelled.agg(
        F.sum(F.when(item, 1).otherwise(0)).alias("exposures"),
        F.sum(F.when(item, 0).otherwise(1)).alias("empty_responses"),
        F.sum(F.col(COPIES) - 1).alias("duplicate_exposures"),
        F.sum(N_EVENTS).alias("attributed_events"),
        F.sum(F.when(F.col(RELEVANCE) > 0, 1).otherwise(0)).alias("relevant_exposures"),
        F.sum(F.when(F.col(CLICKED), 1).otherwise(0)).alias("clicked_exposures"),
    ).collect()[0]  # an aggregation without grouping: always one row
    counts = {k: int(v or 0) for k, v in row.asDict().items()}
    counts["orphan_events"] = events - counts["attributed_events"]
    order = (
        "exposures",
        "empty_responses",
        "duplicate_exposures",
        "attributed_events",
        "orphan_events",
        "relevant_exposures",
        "clicked_exposures",
    )
    return {k: counts[k] for k in order}


def labelled_exposures(joined: DataFrame) -> DataFrame:
    """The exposure rows of a :func:`join_feedback` result (empty responses included)."""
    return joined.where(F.col(EXPOSED)).drop(EXPOSED)
