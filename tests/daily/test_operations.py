"""Production behaviour of the whole job: business rules, set-aside rows, nothing half-written.

Bad input (schema, corrupt or empty partitions) is in io/test_read.py."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from helpers.input_ddl import CLICK_DDL, DAY, EXPOSURE_DDL, T0

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.errors import HardRuleViolation

pytestmark = pytest.mark.spark


EXPOSURES = [
    ("u1", "s1", "r1", "a", 1, 0.9, T0),
    ("u1", "s1", "r1", "b", 2, 0.8, T0),
    ("u1", "s1", "r1", "a", 3, 0.7, T0),  # a twice in r1: soft rule
    ("u1", "s1", "r2", "c", 1, 1.5, T0),  # score above 1: soft rule
    ("u2", "s2", "r3", "a", 1, 0.5, T0),
    ("u2", "s2", "r3", "x", 2, 0.4, T0),  # x not in catalog
    ("u3", "s3", "r4", None, None, None, T0),  # empty response
    (None, "s9", "r5", "a", 1, 0.5, T0),  # null user: set aside
    ("u4", "s4", "r6", "a", -1, 0.5, T0),  # negative position: set aside (a position 0 refuses the day)
    ("u4", "s4", "r7", "a", 1, float("nan"), T0),  # NaN score: set aside, hard rule
    ("u4", "s4", "r8", "a", 1, 0.5, T0 + dt.timedelta(days=1, hours=2)),  # outside the day: set aside
]
CLICKS = [("u1", "s1", "r1", "b", T0), ("u2", "s2", "r3", "a", T0), ("u9", "s9", "r99", "z", T0)]
ITEMS = [("a", "books"), ("b", "toys"), ("c", "toys"), ("d", "food")]


@pytest.fixture(scope="module")
def inputs(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("ops")
    spark.createDataFrame(EXPOSURES, EXPOSURE_DDL).write.parquet(f"{root}/in/exposures/dt={DAY}")
    spark.createDataFrame(CLICKS, CLICK_DDL).write.parquet(f"{root}/in/clicks/dt={DAY}")
    spark.createDataFrame(ITEMS, "item_id string, category string").write.parquet(f"{root}/in/items")
    previous = [("u1", "s0", f"p{i}", "a", 1, 0.5, T0 - dt.timedelta(days=1)) for i in range(20)]
    spark.createDataFrame(previous, EXPOSURE_DDL).write.parquet(f"{root}/in/exposures/dt={DAY - dt.timedelta(days=1)}")
    return root


@pytest.fixture(scope="module")
def violated(spark, inputs):
    """The day run with default rules: it must raise after writing everything."""
    out = inputs / "out"
    cfg = load_config(
        None,
        [
            "metrics.k=[1]",
            "validation.write_rejected=true",
            'rules.blacklist_items=["c"]',
            'rules.blacklist_categories=["toys"]',
            "rules.bot_requests_per_user=1",
        ],
    )
    with pytest.raises(HardRuleViolation, match="blacklisted_item") as err:
        evaluate_day(spark, cfg, DAY, f"{inputs}/in", str(out))
    return out, err.value


def rule_rows(spark, out):
    return {r.rule: r for r in spark.read.parquet(f"{out}/rule_checks/dt={DAY}").collect()}


def test_hard_rule_violation_exits_8_after_writing_every_output(violated):
    out, error = violated
    assert error.exit_code == 8
    for table in ("metrics", "user_metrics", "rule_checks", "rejected", "summary"):
        assert (out / table / f"dt={DAY}").is_dir(), table
    summary = json.loads((out / "summary" / f"dt={DAY}" / "summary.json").read_text())
    assert summary["status"] == "hard_rule_violated"
    assert (out / "summary" / f"dt={DAY}" / "_SUCCESS").exists()


def test_hard_rules(spark, violated):
    rules = rule_rows(spark, violated[0])
    assert rules["duplicate_item_in_request"].violations == 1
    assert rules["duplicate_item_in_request"].examples == ["r1:a"]
    assert rules["blacklisted_item"].violations == 1 and rules["blacklisted_item"].examples == ["c"]
    # toys: b and c, one exposure each
    assert rules["blacklisted_category"].violations == 2 and not rules["blacklisted_category"].passed
    assert rules["item_missing_from_catalog"].violations == 1
    assert rules["item_missing_from_catalog"].examples == ["x"]
    assert rules["non_finite_score"].violations == 1 and rules["non_finite_score"].examples == ["r7:a"]
    assert all(
        r.severity == "hard"
        for name, r in rules.items()
        if name in ("blacklisted_item", "blacklisted_category", "non_finite_score", "no_feedback")
    )
    # real logs have a few duplicates and uncatalogued items: soft rules with a rate threshold
    assert rules["duplicate_item_in_request"].severity == "soft" and not rules["duplicate_item_in_request"].passed
    assert rules["item_missing_from_catalog"].severity == "soft"
    assert rules["item_missing_from_catalog"].rate == pytest.approx(1 / 5)


def test_soft_rules(spark, violated):
    rules = rule_rows(spark, violated[0])
    # kept: r1 a b, r2 c, r3 a x, r4 empty -> 5 item exposures, 4 requests; 11 exposure rows read
    assert rules["duplicate_exposure_rate"].rate == pytest.approx(1 / 11)
    assert not rules["duplicate_exposure_rate"].passed  # above 1 %
    assert rules["orphan_event_rate"].rate == pytest.approx(1 / 3)
    assert rules["empty_response_rate"].rate == pytest.approx(1 / 4)
    assert rules["score_out_of_range_rate"].violations == 1
    assert rules["score_out_of_range_rate"].rate == pytest.approx(1 / 5)
    assert rules["bot_user_rate"].violations == 1 and rules["bot_user_rate"].examples == ["u1"]
    # 11 rows today against 20 yesterday
    assert rules["exposure_change"].rate == pytest.approx(9 / 20) and rules["exposure_change"].passed


def test_rule_verdicts_at_their_boundaries():
    # no Spark: a soft rule passes when its rate is at most the threshold (exactly at it included), a hard
    # rule when it has no violation; no denominator gives no rate (and a soft rule then passes)
    from recsys_spark.steps.rules import hard, soft

    assert soft("r", 1, 4, 0.25).passed and soft("r", 1, 4, 0.25).rate == 0.25
    assert not soft("r", 2, 4, 0.25).passed
    assert soft("r", 0, 0, 0.0).rate is None and soft("r", 0, 0, 0.0).passed
    assert hard("h", 0, 5).passed and hard("h", 0, 5).rate == 0.0
    assert not hard("h", 1, 5).passed and hard("h", 1, 5).rate == 0.2 and hard("h", 1, 5).threshold == 0.0


def test_bad_rows_are_set_aside_counted_and_written(spark, violated):
    out, _ = violated
    summary = json.loads((out / "summary" / f"dt={DAY}" / "summary.json").read_text())
    assert summary["data_quality"]["rejected_exposures"] == {
        "null_user_id": 1,
        "bad_position": 1,
        "bad_score": 1,
        "ts_outside_day": 1,
    }
    rejected = spark.read.parquet(f"{out}/rejected/dt={DAY}")
    assert sorted(r.reason for r in rejected.collect()) == [
        "bad_position",
        "bad_score",
        "null_user_id",
        "ts_outside_day",
    ]
    assert summary["input_rows"]["exposures"] == 11


def test_a_failing_rerun_keeps_the_previous_good_output(spark, inputs, violated, monkeypatch):
    out, _ = violated

    def files():
        return sorted(p.name for p in (out / "metrics" / f"dt={DAY}").iterdir())

    before = files()

    def fail(*args, **kwargs):  # after user_metrics and metrics are staged
        raise RuntimeError("executor lost")

    monkeypatch.setattr("recsys_spark.daily.stages.scan_rules", fail)
    with pytest.raises(RuntimeError, match="executor lost"):
        evaluate_day(spark, load_config(None, ["metrics.k=[1]"]), DAY, f"{inputs}/in", str(out))
    assert files() == before
    assert (out / "summary" / f"dt={DAY}" / "_SUCCESS").exists()
    assert not (out / "_staging").exists()
