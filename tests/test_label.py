"""Labelling in Spark: deduplication, attribution by request and by session window, orphans."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from recsys_spark.label import deduplicate_exposures, join_feedback, label_counts, labelled_exposures
from recsys_spark.read import conform
from recsys_spark.schema import CLICK_COLUMNS, EXPOSURE_COLUMNS, input_ddl

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 11, 20, 10, 0)
EXPOSURE_DDL = input_ddl(EXPOSURE_COLUMNS)
CLICK_DDL = input_ddl(CLICK_COLUMNS)  # with event


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def label(spark, exposures, clicks, window=30.0, weights=None):
    exp = spark.createDataFrame(exposures, EXPOSURE_DDL)
    clk = spark.createDataFrame(clicks, CLICK_DDL)
    joined = join_feedback(deduplicate_exposures(exp), clk, window, weights or {"click": 1.0}, "click")
    return joined


def relevance_of(joined):
    return {
        (r.request_id, r.item_id): r.relevance
        for r in labelled_exposures(joined).select("request_id", "item_id", "relevance").collect()
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
    counts = label_counts(labelled_exposures(joined), len(clicks))
    assert counts["orphan_events"] == 4 and counts["attributed_events"] == 1
    # what the count relies on: the orphan rows the join keeps carry exactly the other events
    assert joined.where(~F.col("exposed")).agg(F.sum("n_events")).first()[0] == 4


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
    assert label_counts(labelled_exposures(joined), len(clicks))["orphan_events"] == 0


def test_duplicates_keep_smallest_position_and_are_counted(spark):
    exposures = [
        ("u", "s", "r1", "a", 3, 0.5, at(0)),
        ("u", "s", "r1", "a", 1, 0.5, at(0)),
        ("u", "s", "r1", "a", 2, 0.5, at(0)),
        ("u", "s", "r1", "b", 2, 0.4, at(0)),
    ]
    joined = label(spark, exposures, [])
    kept = labelled_exposures(joined).select("request_id", "item_id", "position", "copies")
    expected = spark.createDataFrame(
        [("r1", "a", 1, 3), ("r1", "b", 2, 1)], "request_id string, item_id string, position int, copies long"
    )
    assert_df_equality(kept, expected, ignore_row_order=True, ignore_nullable=True)
    assert label_counts(labelled_exposures(joined), 0)["duplicate_exposures"] == 2


def test_relevance_is_largest_event_weight_and_unlisted_events_weigh_zero(spark):
    exposures = [("u", "s", "r1", "a", 1, 0.9, at(0)), ("u", "s", "r1", "b", 2, 0.8, at(0))]
    clicks = [
        ("u", "s", "r1", "a", at(1), "click"),
        ("u", "s", "r1", "a", at(2), "purchase"),
        ("u", "s", "r1", "b", at(1), "share"),
    ]
    joined = label(spark, exposures, clicks, weights={"click": 1.0, "purchase": 3.0})
    assert relevance_of(joined) == {("r1", "a"): 3.0, ("r1", "b"): 0.0}
    rows = {r.item_id: r for r in labelled_exposures(joined).collect()}
    assert rows["a"].clicked and rows["a"].n_events == 2
    assert not rows["b"].clicked and rows["b"].n_events == 1  # attributed, not an orphan
    assert label_counts(labelled_exposures(joined), len(clicks))["orphan_events"] == 0


def test_empty_response_is_kept_as_one_unlabelled_row(spark):
    exposures = [("u", "s", "r1", None, None, None, at(0)), ("u", "s", "r1", None, None, None, at(0))]
    joined = label(spark, exposures, [("u", "s", None, "a", at(1), "click")])
    counts = label_counts(labelled_exposures(joined), 1)
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
    assert labelled_exposures(joined).where(F.col("relevance") > 0).count() == 1


def test_event_without_item_matches_no_empty_response(spark):
    # the session-window join compares items with <=> (see resolve_session_events): a null item must
    # still match nothing, so the event stays an orphan and the empty response unlabelled
    exposures = [("u", "s", "r1", None, None, None, at(0))]
    joined = label(spark, exposures, [("u", "s", None, None, at(1), "click")])
    counts = label_counts(labelled_exposures(joined), 1)
    assert counts["empty_responses"] == 1 and counts["orphan_events"] == 1 and counts["attributed_events"] == 0


def test_exposures_are_deduplicated_once(spark):
    # the session-window candidates read the main join's deduplicated exposures: their shuffle is
    # reused, not run a second time (it was, when a filter on item_id was pushed below it)
    exposures = [("u", "s", f"r{i}", f"i{j}", j, 1.0 - j / 10, at(i)) for i in range(3) for j in range(4)]
    clicks = [("u", "s", None, "i1", at(1.5), "click"), ("u", "s", "r0", "i2", at(1), "click")]
    joined = label(spark, exposures, clicks)
    joined.collect()
    plan = joined._jdf.queryExecution().executedPlan().toString().split("Initial Plan")[0]
    assert "isFinalPlan=true" in plan
    assert "ReusedExchange" in plan
    assert relevance_of(joined)[("r1", "i1")] == 1.0 and relevance_of(joined)[("r0", "i2")] == 1.0
