"""Labelling: deduplicate exposures, attribute feedback events, give each exposure a relevance.

Rules (docs/metrics.md, "Labelling"):

* exposures are deduplicated on (user_id, request_id, item_id), keeping the
  smallest position (then the earliest ts); ``copies`` keeps how many rows
  collapsed;
* an event with a request_id belongs to the exposure with the same user_id,
  request_id and item_id; one without belongs to the latest exposure with the
  same user_id, session_id and item_id whose ts lies in [event ts - window,
  event ts] (ties on ts: the largest request_id);
* relevance = the largest weight among the exposure's events (unlisted events
  weigh 0); ``clicked`` = at least one event named ``click_event``; ``n_clicks`` =
  how many; ``value`` / ``dwell_seconds`` (when the events carry them) = the sums
  over its events that carry one (null when none does); ``_ev_<name>`` = at least
  one event ``<name>`` (``labels.conversion_events``): the business metrics read
  what the ranking metrics read, one attribution;
* events that match no exposure are *orphans*: every event is attributed or an
  orphan, so :func:`label_counts` counts them as events - attributed events.

Every key holds the user: exposures and clicks hash-partitioned by user once
(:func:`by_user`, the one shuffle of exposure rows) are deduplicated, attributed
and joined inside their partitions, and the labelled rows come out still
partitioned by user for the per-user pass.  Spark shares the partitioning only
with ``spark.sql.requireAllClusterKeysForCoPartition=false`` (the job sets it,
:func:`recsys_spark.runtime.session.job_settings`); without it the results are the same,
with more shuffles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.schema import (
    CLICKED,
    COPIES,
    DWELL,
    EVENT,
    ITEM,
    N_CLICKS,
    N_EVENTS,
    POSITION,
    RELEVANCE,
    REQUEST,
    SESSION,
    TS,
    USER,
    VALUE,
    event_flag,
)


def by_user(df: DataFrame, partitions: int) -> DataFrame:
    """``df`` hash-partitioned by user_id into ``partitions`` (every row of a user in one partition)."""
    return df.repartition(partitions, USER)


def deduplicate_exposures(exposures: DataFrame) -> DataFrame:
    """One row per (user_id, request_id, item_id): the smallest position, then earliest ts.

    Adds ``copies`` (rows that collapsed into this one).  An empty response
    (null item) stays one row per request.  A (request_id, item_id) pair under
    two users is two exposures: each user was shown the item.
    """
    others = [c for c in exposures.columns if c not in (USER, REQUEST, ITEM, POSITION, TS)]
    keep = F.min(F.struct(POSITION, TS, *others)).alias("_kept")
    # user_id is never null here (validation rejects such rows); said explicitly, because the
    # attribution's join infers it and Spark pushes that filter down to the scan: written here too,
    # both branches read the same rows, and the session-window candidates reuse this shuffle
    return (
        exposures.where(F.col(USER).isNotNull())
        .groupBy(USER, REQUEST, ITEM)
        .agg(keep, F.count(F.lit(1)).alias(COPIES))
        .select(USER, REQUEST, ITEM, *[F.col(f"_kept.{c}").alias(c) for c in (POSITION, TS, *others)], COPIES)
    )


def weigh_events(
    clicks: DataFrame, weights: Mapping[str, float], click_event: str, conversion_events: Sequence[str] = ()
) -> DataFrame:
    """Add each event's ``weight`` (0 when not listed), ``is_click`` and one ``_ev_<name>`` flag per
    conversion event."""
    event = F.coalesce(F.col(EVENT), F.lit(click_event)) if EVENT in clicks.columns else F.lit(click_event)
    weight: Column = F.lit(0.0)
    for name, value in weights.items():
        weight = F.when(event == name, F.lit(float(value))).otherwise(weight)
    flags = [(event == name).alias(event_flag(name)) for name in dict.fromkeys(conversion_events)]
    return clicks.select("*", weight.alias("weight"), (event == click_event).alias("is_click"), *flags)


def _carried(events: DataFrame) -> list[tuple[str, str]]:
    """The per-event columns an exposure gathers besides weight and is_click: (column, how its events
    combine): the click count and the value and dwell sums add up, the conversion flags are any-of."""
    out = [(c, "sum") for c in ("clicks", VALUE, DWELL) if c in events.columns]
    return out + [(c, "max") for c in events.columns if c.startswith(event_flag(""))]


def _combine(name: str, how: str) -> Column:
    return (F.sum(name) if how == "sum" else F.max(name)).alias(name)


def resolve_session_events(events: DataFrame, exposures: DataFrame, window_minutes: float) -> DataFrame:
    """Give events without a request_id the request_id of the exposure they belong to.

    Identical events (same user, session, item and ts) are resolved together.
    Returns (user_id, request_id, item_id, weight, is_click, n, and the carried columns of
    :func:`_carried`: ``clicks``, ``value``, ``dwell_seconds``, ``_ev_*``) for the events that found an
    exposure in the window; the others are orphans (no row).
    """
    carried = _carried(events)
    grouped = (
        events.where(F.col(REQUEST).isNull())
        .groupBy(USER, SESSION, ITEM, TS)
        .agg(
            F.max("weight").alias("weight"),
            F.max("is_click").alias("is_click"),
            F.count(F.lit(1)).alias("n"),
            *[_combine(c, how) for c, how in carried],
        )
    )
    # No filter on the other grouping keys of ``exposures`` here (not even the item_id IS NOT NULL a
    # plain equality would imply): Spark pushes such a filter below the deduplication, whose shuffle
    # this branch would then no longer share with the main join.  Written this way the candidates
    # read the same exposures as the main join (a reused exchange; ``copies`` is referenced so that it
    # is not pruned from this branch's copy), and an empty response (null item) still matches no
    # event, since the event's item must be non-null.
    candidates = exposures.where(F.col(COPIES) > 0).select(
        USER, SESSION, ITEM, F.col(REQUEST).alias("_req"), F.col(TS).alias("_exp_ts")
    )
    window = F.expr(f"INTERVAL {int(round(window_minutes * 60))} SECONDS")
    # an inner join: an event without a candidate is an orphan, and the smaller side (the events, as a
    # rule) can be the hashed one, so the exposures are neither sorted nor moved for it
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
        how="inner",
    )
    return (
        joined.groupBy(grouped[USER], grouped[SESSION], grouped[ITEM], grouped[TS])
        .agg(
            F.max(F.struct("_exp_ts", "_req")).alias("_match"),
            F.max("weight").alias("weight"),
            F.max("is_click").alias("is_click"),
            F.max("n").alias("n"),
            *[F.max(grouped[c]).alias(c) for c, _ in carried],  # one value per group of identical events
        )
        .select(USER, F.col("_match._req").alias(REQUEST), ITEM, "weight", "is_click", "n", *[c for c, _ in carried])
    )


def join_feedback(
    exposures: DataFrame,
    clicks: DataFrame,
    window_minutes: float,
    weights: Mapping[str, float],
    click_event: str,
    conversion_events: Sequence[str] = (),
) -> DataFrame:
    """The deduplicated exposures with their feedback: one row per exposure (empty responses included).

    Output: the exposure columns plus ``relevance``, ``clicked``, ``n_events``
    (the events attributed to it) and ``n_clicks`` (those named ``click_event``);
    ``value`` and ``dwell_seconds`` when the events carry them (the sum over the
    exposure's events that have one; null when none has); ``_ev_<name>`` for
    each of ``conversion_events``.  Orphan events give no row; see
    :func:`label_counts`.  With ``exposures`` and ``clicks`` partitioned by user
    (:func:`by_user`, same number of partitions) no exposure row is shuffled
    again, and the result keeps that partitioning.
    """
    events = weigh_events(clicks, weights, click_event, conversion_events).withColumn(
        "clicks", F.col("is_click").cast("long")
    )
    carried = _carried(events)
    direct = events.where(F.col(REQUEST).isNotNull()).select(
        USER, REQUEST, ITEM, "weight", "is_click", F.lit(1).cast("long").alias("n"), *[c for c, _ in carried]
    )
    # session events that found no exposure in their window are left out: orphans, counted as such
    by_session = resolve_session_events(events, exposures, window_minutes)
    attributed = (
        direct.unionByName(by_session)
        .groupBy(USER, REQUEST, ITEM)
        .agg(
            F.max("weight").alias(RELEVANCE),
            F.max("is_click").alias(CLICKED),
            F.sum("n").alias(N_EVENTS),
            *[_combine(c, how) for c, how in carried],
        )
    )
    flags = [c for c, how in carried if how == "max"]
    # a left join on the keys: they come from the exposure side (an empty response, null item, matches
    # no event: every valid event has an item)
    return exposures.join(attributed, on=[USER, REQUEST, ITEM], how="left").select(
        *[F.col(c) for c in exposures.columns],
        F.coalesce(RELEVANCE, F.lit(0.0)).alias(RELEVANCE),
        F.coalesce(CLICKED, F.lit(False)).alias(CLICKED),
        F.coalesce(N_EVENTS, F.lit(0)).cast("long").alias(N_EVENTS),
        F.coalesce("clicks", F.lit(0)).cast("long").alias(N_CLICKS),
        *[F.col(c) for c in (VALUE, DWELL) if c in events.columns],
        *[F.coalesce(c, F.lit(False)).alias(c) for c in flags],
    )


def label_counts(labelled: DataFrame, events: int) -> dict[str, int]:
    """Data-quality counts in one pass over labelled exposures (:func:`join_feedback`; one row per
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
