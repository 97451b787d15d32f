"""validate.py: every bad row is set aside with the first reason it fails, counted, never dropped."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality
from helpers.input_ddl import CLICK_DDL, DAY, EXPOSURE_DDL, T0
from pyspark.sql import functions as F

from recsys_spark.steps.validate import (
    click_checks,
    count_rows,
    day_bounds,
    day_start,
    exposure_checks,
    split_rows,
    tag_rows,
)

BOUNDS = day_bounds(DAY, 60, "UTC")


def test_day_bounds_widen_the_day_by_the_tolerance():
    utc = dt.timezone.utc
    start, end = day_bounds(dt.date(2026, 11, 20), 30, "UTC")
    assert start == dt.datetime(2026, 11, 19, 23, 30, tzinfo=utc)
    assert end == dt.datetime(2026, 11, 21, 0, 30, tzinfo=utc)
    assert day_bounds(dt.date(2026, 11, 20), 0, "UTC") == (
        dt.datetime(2026, 11, 20, tzinfo=utc),
        dt.datetime(2026, 11, 21, tzinfo=utc),
    )


def test_the_day_has_no_default_time_zone():
    # the zone travels one way, the run's validation.time_zone as an argument: a caller that left it out was
    # read in UTC whatever the config said (a second channel, beside the session's zone the orchestrator sets)
    with pytest.raises(TypeError):
        day_bounds(dt.date(2026, 11, 20), 30)
    with pytest.raises(TypeError):
        day_start(dt.date(2026, 11, 20))


@pytest.mark.spark
def test_exposures_get_the_first_failed_reason_and_good_rows_none(spark):
    late = T0 + dt.timedelta(days=1, hours=2)  # outside the day by more than the 60 minutes' tolerance
    rows = [
        ("u1", "s", "r1", "a", 1, 0.9, T0),  # good
        ("u1", "s", "r2", None, None, None, T0),  # empty response: good, no position needed
        (None, "s", None, "a", 0, float("nan"), T0),  # null user first, whatever else fails
        ("u2", "s", None, "a", 1, 0.5, T0),  # null request
        ("u2", "s", "r3", "a", 1, 0.5, None),  # null ts
        ("u2", "s", "r4", "a", 1, 0.5, late),  # outside the day
        ("u2", "s", "r5", "a", 0, 0.5, T0),  # position 0
        ("u2", "s", "r6", "a", 1, float("inf"), T0),  # infinite score
        ("u2", "s", "r7", "a", 1, None, T0),  # null score on an item row
    ]
    tagged = tag_rows(spark.createDataFrame(rows, EXPOSURE_DDL), exposure_checks(True, BOUNDS))
    reasons = [r.reject_reason for r in tagged.orderBy("request_id").collect()]
    assert sorted(reasons, key=str) == sorted(
        [
            None,
            None,
            "null_user_id",
            "null_request_id",
            "null_ts",
            "ts_outside_day",
            "bad_position",
            "bad_score",
            "bad_score",
        ],
        key=str,
    )
    assert count_rows(tagged, "exposures", "p")[0] == {
        "rows": 9,
        "null_user_id": 1,
        "null_request_id": 1,
        "null_ts": 1,
        "ts_outside_day": 1,
        "bad_position": 1,
        "bad_score": 2,
    }


@pytest.mark.spark
def test_without_a_score_column_no_score_check(spark):
    rows = [("u", "s", "r", "a", 1, T0)]
    df = spark.createDataFrame(
        rows, "user_id string, session_id string, request_id string, item_id string, position int, ts timestamp"
    )
    assert [name for name, _ in exposure_checks(False, BOUNDS)] == [
        "null_user_id",
        "blank_user_id",
        "null_request_id",
        "blank_request_id",
        "blank_item_id",
        "null_ts",
        "ts_outside_day",
        "bad_position",
    ]
    assert count_rows(tag_rows(df, exposure_checks(False, BOUNDS)), "exposures", "p") == ({"rows": 1}, {})


@pytest.mark.spark
def test_split_keeps_good_rows_without_the_reason_and_rejected_rows_with_it(spark):
    clicks = spark.createDataFrame([("u1", "s", "r1", "a", T0), ("u2", "s", None, None, T0)], CLICK_DDL)
    good, rejected = split_rows(tag_rows(clicks, click_checks(BOUNDS)))
    assert_df_equality(good, spark.createDataFrame([("u1", "s", "r1", "a", T0)], CLICK_DDL), ignore_nullable=True)
    assert_df_equality(
        rejected,
        spark.createDataFrame([("u2", "s", None, None, T0, "null_item_id")], f"{CLICK_DDL}, reject_reason string"),
        ignore_nullable=True,
    )


@pytest.mark.spark
def test_inputs_are_counted_in_one_job_and_an_unreadable_one_is_named(spark, tmp_path):
    from recsys_spark.errors import UnreadableInputError
    from recsys_spark.runtime.session import fixed_shuffles
    from recsys_spark.steps.validate import count_inputs

    first, second = tmp_path / "exposures", tmp_path / "clicks"
    for path, n in ((first, 3), (second, 2)):
        spark.range(n).selectExpr("cast(id as string) as user_id", "cast(null as string) as item_id").write.parquet(
            str(path)
        )
    checks = [("null_item_id", F.col("item_id").isNull())]
    tagged = [tag_rows(spark.read.parquet(str(p)), checks) for p in (first, second)]
    group = "count-inputs"
    spark.sparkContext.setJobGroup(group, group)
    try:
        with fixed_shuffles(spark, 2):  # as the day validates (daily.stages.outside_label): no AQE job per shuffle
            counted = count_inputs(
                [(tagged[0], "exposures", str(first), None), (tagged[1], "clicks", str(second), None)]
            )
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert counted == [({"rows": 3, "null_item_id": 3}, {}), ({"rows": 2, "null_item_id": 2}, {})]
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == 1
    # the second input's file turns to garbage after it was planned: the error names that input, not the first
    for part in second.glob("part-*.parquet"):
        part.write_bytes(b"PAR1 this is not parquet PAR1")
    with pytest.raises(UnreadableInputError, match=f"unreadable input clicks: {second}"):
        count_inputs([(tagged[0], "exposures", str(first), None), (tagged[1], "clicks", str(second), None)])


@pytest.mark.spark
def test_a_zero_position_gets_its_own_reason_only_when_asked_and_refuses_the_day(spark):
    # under input.position_base = 1 a position 0 refuses the day (counted in the day's one counting job)
    from recsys_spark.errors import SchemaError
    from recsys_spark.steps.validate import refuse_zero_positions

    names = [name for name, _ in exposure_checks(False, BOUNDS, zero_position=True)]
    assert names[-2:] == ["zero_position", "bad_position"]
    assert "zero_position" not in [name for name, _ in exposure_checks(False, BOUNDS)]
    refuse_zero_positions({"rows": 5, "bad_position": 2}, "exposures partition", "p")  # nothing at 0: no error
    with pytest.raises(SchemaError, match=r"column 'position' of exposures partition p: 2 of 5 rows are at position 0"):
        refuse_zero_positions({"rows": 5, "zero_position": 2}, "exposures partition", "p")
