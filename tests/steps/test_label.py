"""Labelling in Spark: deduplication, attribution by request and by session window, orphans."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality
from helpers.spark_plans import shuffles
from pyspark.sql import functions as F

from recsys_spark.io.read import conform
from recsys_spark.schema import CLICK_COLUMNS, EXPOSURE_COLUMNS, input_ddl
from recsys_spark.steps.label import by_user, deduplicate_exposures, join_feedback, label_counts

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 11, 20, 10, 0)
EXPOSURE_DDL = input_ddl(EXPOSURE_COLUMNS)
CLICK_DDL = f"{input_ddl(CLICK_COLUMNS, optional=False)}, event string"  # with event, without value or dwell


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def label(spark, exposures, clicks, window=30.0, weights=None, partitions=3):
    """As the job labels: exposures and clicks partitioned by user first (:func:`label.by_user`)."""
    exp = by_user(spark.createDataFrame(exposures, EXPOSURE_DDL), partitions)
    clk = by_user(spark.createDataFrame(clicks, CLICK_DDL), partitions)
    return join_feedback(deduplicate_exposures(exp), clk, window, weights or {"click": 1.0}, "click")


def relevance_of(joined):
    return {
        (r.request_id, r.item_id): r.relevance for r in joined.select("request_id", "item_id", "relevance").collect()
    }


def test_event_with_request_id_goes_to_that_request(spark):
    exposures = [("u", "s", "r1", "a", 1, 0.9, at(0)), ("u", "s", "r2", "a", 1, 0.9, at(1))]
    clicks = [("u", "s", "r1", "a", at(5), "click")]
    assert relevance_of(label(spark, exposures, clicks)) == {("r1", "a"): 1.0, ("r2", "a"): 0.0}


def test_event_without_request_id_goes_to_latest_exposure_in_the_window(spark):
    exposures = [
        ("u", "s", "r1", "a", 1, 0.9, at(0)),
        ("u", "s", "r2", "a", 2, 0.8, at(10)),  # latest before the click at 15: wins
        ("u", "s", "r3", "a", 1, 0.7, at(20)),  # after the click: not eligible
        ("u", "s2", "r4", "a", 1, 0.7, at(12)),  # other session: not eligible
    ]
    clicks = [("u", "s", None, "a", at(15), "click")]
    assert relevance_of(label(spark, exposures, clicks)) == {
        ("r1", "a"): 0.0,
        ("r2", "a"): 1.0,
        ("r3", "a"): 0.0,
        ("r4", "a"): 0.0,
    }


def test_window_bounds_and_orphans_are_counted(spark):
    exposures = [("u", "s", "r1", "a", 1, 0.9, at(0)), ("u", "s", "r1", "b", 2, 0.8, at(0))]
    clicks = [
        ("u", "s", None, "a", at(30), "click"),  # exactly at the window edge: attributed
        ("u", "s", None, "b", at(30.5), "click"),  # beyond 30 minutes: orphan
        ("u", "s", "r9", "a", at(1), "click"),  # request never served: orphan
        ("u", "s", "r1", "c", at(1), "click"),  # item not shown in r1: orphan
        ("u", "s", None, "a", at(-1), "click"),  # before any exposure: orphan
    ]
    joined = label(spark, exposures, clicks)
    assert relevance_of(joined) == {("r1", "a"): 1.0, ("r1", "b"): 0.0}
    counts = label_counts(joined, len(clicks))
    assert counts["orphan_events"] == 4 and counts["attributed_events"] == 1


def test_event_at_its_exposures_exact_timestamp_is_attributed_to_it(spark):
    # the window is [event ts - 30 min, event ts], closed at both ends: a click logged in the same
    # instant as its exposure belongs to that exposure, not to an earlier one of the same item
    exposures = [
        ("u", "s", "r1", "a", 1, 0.9, at(0)),
        ("u", "s", "r2", "a", 1, 0.9, at(5)),  # same timestamp as the click: wins
        ("u", "s", "r3", "b", 1, 0.9, at(7)),  # alone, same timestamp as its click
    ]
    clicks = [("u", "s", None, "a", at(5), "click"), ("u", "s", None, "b", at(7), "click")]
    joined = label(spark, exposures, clicks)
    assert relevance_of(joined) == {("r1", "a"): 0.0, ("r2", "a"): 1.0, ("r3", "b"): 1.0}
    assert label_counts(joined, len(clicks))["orphan_events"] == 0


def test_duplicates_keep_smallest_position_and_are_counted(spark):
    exposures = [
        ("u", "s", "r1", "a", 3, 0.5, at(0)),
        ("u", "s", "r1", "a", 1, 0.5, at(0)),
        ("u", "s", "r1", "a", 2, 0.5, at(0)),
        ("u", "s", "r1", "b", 2, 0.4, at(0)),
    ]
    joined = label(spark, exposures, [])
    kept = joined.select("request_id", "item_id", "position", "copies")
    expected = spark.createDataFrame(
        [("r1", "a", 1, 3), ("r1", "b", 2, 1)], "request_id string, item_id string, position int, copies long"
    )
    assert_df_equality(kept, expected, ignore_row_order=True, ignore_nullable=True)
    assert label_counts(joined, 0)["duplicate_exposures"] == 2


def test_relevance_is_largest_event_weight_and_unlisted_events_weigh_zero(spark):
    exposures = [("u", "s", "r1", "a", 1, 0.9, at(0)), ("u", "s", "r1", "b", 2, 0.8, at(0))]
    clicks = [
        ("u", "s", "r1", "a", at(1), "click"),
        ("u", "s", "r1", "a", at(2), "purchase"),
        ("u", "s", "r1", "b", at(1), "share"),
    ]
    joined = label(spark, exposures, clicks, weights={"click": 1.0, "purchase": 3.0})
    assert relevance_of(joined) == {("r1", "a"): 3.0, ("r1", "b"): 0.0}
    rows = {r.item_id: r for r in joined.collect()}
    assert rows["a"].clicked and rows["a"].n_events == 2
    assert not rows["b"].clicked and rows["b"].n_events == 1  # attributed, not an orphan
    assert label_counts(joined, len(clicks))["orphan_events"] == 0


def test_empty_response_is_kept_as_one_unlabelled_row(spark):
    exposures = [("u", "s", "r1", None, None, None, at(0)), ("u", "s", "r1", None, None, None, at(0))]
    joined = label(spark, exposures, [("u", "s", None, "a", at(1), "click")])
    counts = label_counts(joined, 1)
    assert counts["empty_responses"] == 1 and counts["exposures"] == 0 and counts["orphan_events"] == 1


def test_integer_ids_are_read_as_strings(spark):
    exp = spark.createDataFrame(
        [(1, 2, 3, 4, 1, 0.5, at(0))],
        "user_id long, session_id int, request_id long, item_id long, position long, score float, ts timestamp",
    )
    clk = spark.createDataFrame(
        [(1, 2, 3, 4, at(1))], "user_id long, session_id long, request_id long, item_id long, ts timestamp"
    )
    exp = conform(exp, EXPOSURE_COLUMNS, "exposures")
    clk = conform(clk, CLICK_COLUMNS, "clicks")
    assert dict(exp.dtypes)["item_id"] == "string" and dict(exp.dtypes)["position"] == "int"
    joined = join_feedback(deduplicate_exposures(exp), clk, 30.0, {"click": 1.0}, "click")
    assert relevance_of(joined) == {("3", "4"): 1.0}
    assert joined.where(F.col("relevance") > 0).count() == 1


def test_event_without_item_matches_no_empty_response(spark):
    # the session-window join compares items with <=> (see resolve_session_events): a null item must
    # still match nothing, so the event stays an orphan and the empty response unlabelled
    exposures = [("u", "s", "r1", None, None, None, at(0))]
    joined = label(spark, exposures, [("u", "s", None, None, at(1), "click")])
    counts = label_counts(joined, 1)
    assert counts["empty_responses"] == 1 and counts["orphan_events"] == 1 and counts["attributed_events"] == 0


def test_a_request_under_two_users_is_two_exposures_and_events_keep_their_user(spark):
    # a (request_id, item_id) pair logged under two users is hostile data; each user was shown the
    # item, so each keeps an exposure, and an event goes to its own user's exposure only
    exposures = [
        ("u1", "s", "r1", "a", 1, 0.9, at(0)),
        ("u2", "s", "r1", "a", 2, 0.8, at(0)),
        ("u2", "s", "r1", "a", 3, 0.8, at(0)),  # a duplicate within u2: collapses
    ]
    clicks = [
        ("u2", "s", "r1", "a", at(1), "click"),  # u2's exposure
        ("u3", "s", "r1", "a", at(1), "click"),  # u3 was never shown r1: an orphan
        ("u1", "s", None, "a", at(2), "purchase"),  # session rule: u1's own exposure
    ]
    joined = label(spark, exposures, clicks, weights={"click": 1.0, "purchase": 2.0})
    rows = {(r.user_id, r.request_id, r.item_id): (r.position, r.copies, r.relevance) for r in joined.collect()}
    assert rows == {("u1", "r1", "a"): (1, 1, 2.0), ("u2", "r1", "a"): (2, 2, 1.0)}
    counts = label_counts(joined, len(clicks))
    assert (counts["exposures"], counts["duplicate_exposures"], counts["orphan_events"]) == (2, 1, 1)


def test_exposures_are_shuffled_once_by_user(spark):
    # the one shuffle of exposure rows is the partitioning by user: the deduplication, both joins
    # and the session-window candidates read it in place (the candidates through a reused exchange;
    # it was run twice when a filter on a key was pushed below the deduplication in one branch only)
    exposures = [(f"u{i % 2}", "s", f"r{i}", f"i{j}", j, 1.0 - j / 10, at(i)) for i in range(3) for j in range(4)]
    clicks = [("u1", "s", None, "i1", at(1.5), "click"), ("u0", "s", "r0", "i2", at(1), "click")]
    joined = label(spark, exposures, clicks)
    of_exposures = sorted(name for name, columns in shuffles(joined) if "position" in columns)
    assert of_exposures == ["Exchange", "ReusedExchange"]
    assert relevance_of(joined)[("r1", "i1")] == 1.0 and relevance_of(joined)[("r0", "i2")] == 1.0


@pytest.mark.parametrize("co_partition", ["false", "true"])
def test_labelled_rows_keep_every_user_in_one_partition(spark, co_partition):
    # the per-user pass relies on it.  With Spark's default (true) the joins shuffle by all their
    # keys, and the final by_user is a real shuffle; with the job's setting it is dropped as redundant
    # no broadcast join: AQE turned the tiny click side into one at run time when its stage finished first,
    # after which the final by_user was redundant and the plan had no exchange either way (a flaky test)
    key, no_broadcast = "spark.sql.requireAllClusterKeysForCoPartition", "spark.sql.autoBroadcastJoinThreshold"
    before, before_broadcast = spark.conf.get(key), spark.conf.get(no_broadcast)
    spark.conf.set(key, co_partition)
    spark.conf.set(no_broadcast, "-1")
    try:
        exposures = [(f"u{i % 7}", "s", f"r{i}", f"i{j}", j, 0.1 * j, at(i)) for i in range(40) for j in range(3)]
        clicks = [(f"u{i % 7}", "s", f"r{i}", "i1", at(i), "click") for i in range(0, 40, 3)]
        joined = label(spark, exposures, clicks, partitions=4)
        rows = by_user(joined, 4).select("user_id", F.spark_partition_id().alias("p"))
        spread = rows.groupBy("user_id").agg(F.count_distinct("p").alias("n")).where(F.col("n") > 1).count()
        assert spread == 0 and rows.count() == 120
        # a shuffle of labelled rows (exposure and feedback columns together) happens after the join only;
        # counted by its columns, not by the plan text, which shows a reused exchange or not as AQE's
        # stages happen to materialize
        labelled = [n for n, columns in shuffles(by_user(joined, 4)) if {"position", "relevance"} <= columns]
        assert labelled == ([] if co_partition == "false" else ["Exchange"])
    finally:
        spark.conf.set(key, before)
        spark.conf.set(no_broadcast, before_broadcast)


@pytest.mark.parametrize("broadcast", [True, False])
def test_popularity_counts_reach_the_rows_without_moving_them(spark, broadcast):
    # the popularity slice's count per item is an aggregation (one row per item moves, not the exposures)
    # joined back to the labelled rows.  Persisted and materialized, the counts are small enough for Spark
    # to broadcast: the rows stay where they are, partitioned by user (before: a window by item moved them
    # there and back).  Without the broadcast (a day with too many items) Spark shuffles them by item and
    # by_user moves them back: slower, and every user still in one partition with the same counts
    from recsys_spark.steps.slices import ITEM_EXPOSURES, item_exposure_counts, with_item_exposures

    exposures = [(f"u{i % 7}", "s", f"r{i}", f"i{(i + j) % 5}", j, 0.1 * j, at(i)) for i in range(40) for j in range(3)]
    joined = label(spark, exposures, [], partitions=4).persist()
    counts = item_exposure_counts(joined).persist()
    key, before = "spark.sql.autoBroadcastJoinThreshold", spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    try:
        assert counts.count() == 5  # materialized: its real size is what the join is planned with
        if not broadcast:
            spark.conf.set(key, "-1")
        rows = by_user(with_item_exposures(joined, counts), 4)
        moved = [name for name, columns in shuffles(rows) if "position" in columns]
        assert moved == ([] if broadcast else ["Exchange", "Exchange"])
        expected: dict[str, int] = {}
        for e in exposures:
            expected[e[3]] = expected.get(e[3], 0) + 1
        got = rows.select("user_id", "item_id", ITEM_EXPOSURES, F.spark_partition_id().alias("p")).collect()
        assert len(got) == 120 and all(r[ITEM_EXPOSURES] == expected[r.item_id] for r in got)
        assert all(len({r.p for r in got if r.user_id == u}) == 1 for u in {r.user_id for r in got})
    finally:
        spark.conf.set(key, before)
        counts.unpersist()
        joined.unpersist()


def test_values_dwell_click_counts_and_conversions_ride_the_one_attribution(spark):
    # r1 shows a and b to u1; a is clicked twice (once by request, once by session), then bought for 30 by
    # session; b is clicked once; a purchase of z for 99 (never shown) is an orphan and counts nowhere; u2 gets
    # a purchase of value 0 (free: a conversion all the same) and a like; an event without value or dwell
    # leaves them null (no event carried one), not 0
    full = f"{input_ddl(CLICK_COLUMNS)}"  # with event, value and dwell_seconds
    exposures = [
        ("u1", "s1", "r1", "a", 1, 0.9, at(0)),
        ("u1", "s1", "r1", "b", 2, 0.8, at(0)),
        ("u2", "s2", "r2", "a", 1, 0.5, at(0)),
        ("u3", "s3", "r3", "c", 1, 0.5, at(0)),
    ]
    clicks = [
        ("u1", "s1", "r1", "a", at(1), "click", None, 20.0),
        ("u1", "s1", None, "a", at(2), "click", None, 5.0),
        ("u1", "s1", None, "a", at(3), "purchase", 30.0, None),
        ("u1", "s1", "r1", "b", at(1), "click", None, 12.0),
        ("u1", "s1", "r1", "z", at(1), "purchase", 99.0, None),
        ("u2", "s2", "r2", "a", at(4), "purchase", 0.0, None),
        ("u2", "s2", "r2", "a", at(5), "like", None, None),
    ]
    exp = by_user(spark.createDataFrame(exposures, EXPOSURE_DDL), 3)
    clk = by_user(spark.createDataFrame(clicks, full), 3)
    joined = join_feedback(deduplicate_exposures(exp), clk, 30.0, {"click": 1.0}, "click", ("purchase", "like"))
    got = {
        (r.request_id, r.item_id): (r.clicked, r.n_clicks, r.value, r.dwell_seconds, r._ev_purchase, r._ev_like)
        for r in joined.collect()
    }
    assert got == {
        ("r1", "a"): (True, 2, 30.0, 25.0, True, False),
        ("r1", "b"): (True, 1, None, 12.0, False, False),
        ("r2", "a"): (False, 0, 0.0, None, True, True),
        ("r3", "c"): (False, 0, None, None, False, False),
    }
    # the label counts see the same attribution: 6 of the 7 events attributed, the purchase of z an orphan
    assert label_counts(joined, 7)["orphan_events"] == 1
