"""steps/rules.py: the rules' counts and examples from labelled exposures through Spark; results are rows (the
verdicts themselves, hard and soft, are tested without Spark in tests/kernels/test_rules.py)."""

from __future__ import annotations

import pytest

from recsys_spark.config import load_config
from recsys_spark.daily.stages import threshold_settings
from recsys_spark.schema import RULE_CHECKS_DDL
from recsys_spark.steps.rules import BUILT_IN_RULES, as_dicts, rules_frame, scan_rules


@pytest.mark.spark
def test_scan_rules_on_labelled_exposures(spark):
    # request r1 shows a twice (copies 2), x is not in the catalog, c is blacklisted, one score above 1
    exposures = spark.createDataFrame(
        [
            ("u1", "r1", "a", 0.9, 2, True, "books"),
            ("u1", "r1", "x", 0.8, 1, False, "unknown"),
            ("u1", "r2", "c", 1.5, 1, True, "toys"),
            ("u2", "r3", None, None, 1, None, None),  # an empty response
        ],
        "user_id string, request_id string, item_id string, score double, copies long, _in_catalog boolean, "
        "_category string",
    )
    counts = {
        "exposure_rows": 5,
        "bad_score": 0,
        "duplicate_exposures": 1,
        "orphan_events": 0,
        "valid_events": 2,
        "empty_responses": 1,
    }
    results = scan_rules(
        exposures,
        counts,
        has_catalog=True,
        has_score=True,
        blacklist_items=["c"],
        blacklist_categories=["toys"],
        bot_requests_per_user=1,
        thresholds=threshold_settings(load_config()),
        previous_exposure_rows=None,
    )
    got = {r.rule: r for r in results}
    assert set(got) <= set(BUILT_IN_RULES)  # the names a custom rule may not take
    # the rule_checks rows in the table's order (kernels/rules.py), the previous day's rule left out
    # no previous day, no clicks histogram (scan_rules without click_counts): exposure_change and
    # click_concentration are left out
    left_out = ("exposure_change", "click_concentration")
    assert [r.rule for r in results] == [name for name in BUILT_IN_RULES if name not in left_out]
    # 3 item exposures
    assert (got["blacklisted_item"].violations, got["blacklisted_item"].examples) == (1, ["c"])
    assert got["blacklisted_category"].violations == 1
    assert (got["duplicate_item_in_request"].violations, got["duplicate_item_in_request"].examples) == (1, ["r1:a"])
    assert got["item_missing_from_catalog"].examples == ["x"] and not got["item_missing_from_catalog"].passed
    assert got["non_finite_score"].passed
    assert got["duplicate_exposure_rate"].rate == pytest.approx(1 / 5)
    assert got["empty_response_rate"].rate == pytest.approx(1 / 3)  # 3 requests
    assert got["score_out_of_range_rate"].rate == pytest.approx(1 / 3)
    assert (got["bot_user_rate"].violations, got["bot_user_rate"].examples) == (1, ["u1"])  # u1: 2 requests > 1
    assert "exposure_change" not in got  # no previous day
    frame = rules_frame(spark, results)
    assert frame.schema.simpleString() == spark.createDataFrame([], RULE_CHECKS_DDL).schema.simpleString()
    assert frame.count() == len(results) == len(as_dicts(results))


@pytest.mark.spark
def test_scores_exactly_0_and_1_are_in_range(spark):
    # [0, 1] is closed: of 0, 1, 0.5, -0.25 and 1.25 only the last two are out of range (2 of 5 item rows)
    rows = [
        ("u1", "r1", item, score, 1, True, "books")
        for item, score in zip("abcde", (0.0, 1.0, 0.5, -0.25, 1.25), strict=True)
    ]
    exposures = spark.createDataFrame(
        rows,
        "user_id string, request_id string, item_id string, score double, copies long, _in_catalog boolean, "
        "_category string",
    )
    counts = {
        "exposure_rows": 5,
        "bad_score": 0,
        "duplicate_exposures": 0,
        "orphan_events": 0,
        "valid_events": 0,
        "empty_responses": 0,
    }
    results = scan_rules(
        exposures,
        counts,
        has_catalog=True,
        has_score=True,
        blacklist_items=[],
        blacklist_categories=[],
        bot_requests_per_user=10,
        thresholds=threshold_settings(load_config()),
        previous_exposure_rows=None,
    )
    got = {r.rule: r for r in results}
    assert got["score_out_of_range_rate"].violations == 2
    assert got["score_out_of_range_rate"].rate == pytest.approx(2 / 5)


@pytest.mark.spark
def test_the_rule_counts_are_one_query_over_the_user_partitions_in_place(spark):
    # the row flags, the users, their requests and the bots come from one query: summed per user where the
    # user partitions hold the rows, so the only shuffle is of the per-partition sums (no exposure row moves)
    from helpers.spark_plans import shuffles
    from pyspark.sql import functions as F

    from recsys_spark.per_user.table import persist_user_rows
    from recsys_spark.steps.label import by_user
    from recsys_spark.steps.rules import row_counts

    rows = [("u1", "r1", "a"), ("u1", "r1", "b"), ("u1", "r2", None), ("u2", "r3", "a"), ("u3", "r4", "c")]
    frame = spark.createDataFrame(rows, "user_id string, request_id string, item_id string")
    persisted = persist_user_rows(by_user(frame, 2))
    try:
        persisted.count()
        counts = row_counts(persisted, {"items": F.col("item_id").isNotNull(), "a": F.col("item_id") == "a"}, 1)
        assert counts.collect()[0].asDict() == {"items": 4, "a": 2, "users": 3, "requests": 4, "bots": 1}
        moved = shuffles(counts)
        assert all("request_id" not in columns and "item_id" not in columns for _, columns in moved), moved
        assert len(moved) == 1, moved  # the per-partition sums, to one partition
    finally:
        persisted.unpersist()


@pytest.mark.spark
def test_examples_are_the_smallest_violating_keys_wherever_they_lie(spark):
    # reruns give the same examples: the smallest keys in string order, not the first rows a scan meets (a
    # limit's rows depend on the order the partitions' blocks arrive in); the smallest here lie last
    from pyspark.sql import functions as F

    from recsys_spark.kernels.rules import N_EXAMPLES
    from recsys_spark.steps.custom_rules import _examples as custom_examples
    from recsys_spark.steps.rules import _examples

    keys = [f"k{i:04d}" for i in range(400)]
    df = spark.createDataFrame([(k, int(k[1:]) // 100) for k in reversed(keys)], "key string, part int")
    df = df.repartitionByRange(4, F.col("part").desc()).sortWithinPartitions(F.col("key").desc())
    smallest = keys[:N_EXAMPLES]
    violating = F.col("key") != keys[1]
    assert _examples({"r": (df, violating, F.col("key"))}) == {"r": [k for k in keys[: N_EXAMPLES + 1] if k != keys[1]]}
    assert _examples({"r": (df, F.lit(True), F.col("key")), "s": (df, F.lit(True), F.col("part"))}) == {
        "r": smallest,
        "s": ["0", "1", "2", "3"],
    }
    assert custom_examples(df, violating, F.col("key")) == [k for k in keys[: N_EXAMPLES + 1] if k != keys[1]]
