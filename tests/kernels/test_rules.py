"""kernels/rules.py (no Spark): the built-in rules' table, its declarations, and the verdicts it gives from counts."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from recsys_spark.config import load_config
from recsys_spark.config.rules import RulesConfig
from recsys_spark.kernels.rules import (
    BUILT_IN,
    BUILT_IN_RULES,
    COUNTS,
    FACTS,
    FEEDBACK_RULES,
    THRESHOLD_KEYS,
    RuleResult,
    day_counts,
    hard,
    no_feedback_reason,
    rule_results,
    soft,
    top_counts,
)

#: the rule_checks rows' order before the rules were a table (scan_rules appended them in this order)
RULE_CHECKS_ORDER = (
    "blacklisted_item",
    "duplicate_item_in_request",
    "item_missing_from_catalog",
    "blacklisted_category",
    "non_finite_score",
    "no_feedback",
    "rejected_exposure_rate",
    "rejected_click_rate",
    "unweighted_event_rate",
    "duplicate_exposure_rate",
    "orphan_event_rate",
    "empty_response_rate",
    "score_out_of_range_rate",
    "bot_user_rate",
    "exposure_change",
    "click_concentration",
)


def every_count(value: int = 0) -> dict[str, int]:
    return dict.fromkeys(COUNTS, value)


def test_a_hard_rule_passes_only_without_violations():
    assert hard("r", 0, 10) == RuleResult("r", "hard", 0, 0.0, 0.0, True, [])
    failed = hard("r", 2, 10, ["x"])
    assert (failed.rate, failed.passed, failed.examples) == (2 / 10, False, ["x"])
    assert hard("r", 0, 0).rate is None  # nothing to rate: no rate, and no violation


def test_a_soft_rule_passes_at_its_threshold_and_without_a_denominator():
    assert soft("r", 1, 100, 0.01).passed  # 1 % against at most 1 %
    assert not soft("r", 2, 100, 0.01).passed
    assert soft("r", 3, 0, 0.01).rate is None and soft("r", 3, 0, 0.01).passed


def test_the_names_are_unique_and_the_table_is_in_the_rule_checks_order():
    assert len(set(BUILT_IN_RULES)) == len(BUILT_IN_RULES) == 16
    assert BUILT_IN_RULES == RULE_CHECKS_ORDER
    # every rule applies on a day where every fact holds: the rows come in the table's order
    got = rule_results(every_count(1), load_config().to_dict()["rules"], set(FACTS), {})
    assert tuple(r.rule for r in got) == RULE_CHECKS_ORDER


def test_every_threshold_key_is_a_rate_of_the_rules_config():
    fields = {f.name: f for f in dataclasses.fields(RulesConfig)}
    defaults = RulesConfig()
    for rule in BUILT_IN:
        assert rule.severity in ("hard", "soft"), rule
        assert (rule.threshold is None) == (rule.severity == "hard"), rule  # a hard rule's threshold is 0
        if rule.threshold is not None:
            assert rule.threshold in fields, rule
            assert isinstance(getattr(defaults, rule.threshold), float), rule
        assert set(rule.when) <= set(FACTS), rule
    # every max_* rate of the config is some rule's threshold (the keys the day read by their prefix before)
    assert set(THRESHOLD_KEYS) == {name for name in fields if name.startswith("max_")}
    assert len(THRESHOLD_KEYS) == len(set(THRESHOLD_KEYS))


def test_the_declarations_of_each_rule():
    # (name, severity, numerator / denominator, threshold key, when): docs/operations.md's table, as data
    table = {
        r.name: (r.severity, f"{r.numerator} / {r.denominator}", r.threshold, r.when, r.feedback) for r in BUILT_IN
    }
    assert table == {
        "blacklisted_item": ("hard", "blacklisted / exposures", None, ("blacklist_items",), False),
        "duplicate_item_in_request": ("soft", "duplicated_pairs / exposures", "max_duplicate_item_rate", (), False),
        "item_missing_from_catalog": ("soft", "missing / exposures", "max_missing_item_rate", ("catalog",), False),
        "blacklisted_category": ("hard", "banned / exposures", None, ("catalog", "blacklist_categories"), False),
        "non_finite_score": ("hard", "bad_score / exposure_rows", None, ("score",), False),
        "no_feedback": ("hard", "no_feedback / day", None, (), True),
        "rejected_exposure_rate": ("soft", "rejected_exposures / exposure_rows", "max_rejected_rate", (), False),
        "rejected_click_rate": ("soft", "rejected_clicks / click_rows", "max_rejected_rate", (), True),
        "unweighted_event_rate": ("soft", "unweighted_events / valid_events", "max_unweighted_event_rate", (), True),
        "duplicate_exposure_rate": ("soft", "duplicate_exposures / exposure_rows", "max_duplicate_rate", (), False),
        "orphan_event_rate": ("soft", "orphan_events / valid_events", "max_orphan_rate", (), True),
        "empty_response_rate": ("soft", "empty_responses / requests", "max_empty_response_rate", (), False),
        "score_out_of_range_rate": (
            "soft",
            "out_of_range / exposures",
            "max_score_out_of_range_rate",
            ("score",),
            False,
        ),
        "bot_user_rate": ("soft", "bots / users", "max_bot_user_rate", (), False),
        "exposure_change": (
            "soft",
            "exposure_change / previous_exposure_rows",
            "max_exposure_change",
            ("previous_day",),
            False,
        ),
        "click_concentration": (
            "soft",
            "top_user_clicks / clicked_exposures",
            "max_click_concentration",
            ("clicks_histogram",),
            True,
        ),
    }
    assert FEEDBACK_RULES == (
        "no_feedback",
        "rejected_click_rate",
        "unweighted_event_rate",
        "orphan_event_rate",
        "click_concentration",
    )


def test_docs_list_every_built_in_rule():
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    section = text.split("## Business-rule scanning", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z_]+)`", section, flags=re.M)) | set(re.findall(r", `([a-z_]+)` \|", section))
    assert set(BUILT_IN_RULES) <= listed


@pytest.mark.parametrize(
    ("facts", "left_out"),
    [
        (set(FACTS), set()),
        (
            set(),
            {"blacklisted_item", "item_missing_from_catalog", "blacklisted_category", "non_finite_score"}
            | {"score_out_of_range_rate", "exposure_change", "click_concentration"},
        ),
        (
            {"catalog"},
            {"blacklisted_item", "blacklisted_category", "non_finite_score", "score_out_of_range_rate"}
            | {"exposure_change", "click_concentration"},
        ),
        (
            {"blacklist_categories"},
            {"blacklisted_item", "item_missing_from_catalog", "blacklisted_category"}
            | {"non_finite_score", "score_out_of_range_rate", "exposure_change", "click_concentration"},
        ),
    ],
)
def test_a_rule_is_left_out_unless_every_fact_it_needs_holds(facts, left_out):
    got = [r.rule for r in rule_results(every_count(1), load_config().to_dict()["rules"], facts, {})]
    assert got == [name for name in RULE_CHECKS_ORDER if name not in left_out]


def test_the_verdicts_of_a_day_by_hand():
    counts = every_count() | {
        "exposures": 200,
        "blacklisted": 1,  # hard: 1 / 200
        "duplicated_pairs": 2,  # soft 0.01: 2 / 200 = 0.01 passes (at the threshold)
        "missing": 11,  # soft 0.05: 11 / 200 = 0.055 fails
        "exposure_rows": 250,
        "bad_score": 0,  # hard: 0 / 250 passes
        "day": 1,
        "rejected_exposures": 5,  # soft 0.02: 5 / 250 passes
        "click_rows": 0,  # no rate: passes
        "rejected_clicks": 0,
        "valid_events": 40,
        "unweighted_events": 10,  # soft 0.2: 10 / 40 fails
        "requests": 50,
        "empty_responses": 2,  # soft 0.02: 2 / 50 = 0.04 fails
        "users": 1000,
        "bots": 1,  # soft 0.001: passes
        "exposure_change": 125,
        "previous_exposure_rows": 125,  # soft 0.5: 1.0 fails
    }
    thresholds = {key: getattr(RulesConfig(), key) for key in THRESHOLD_KEYS}
    examples = {"blacklisted_item": ["c"], "rejected_exposure_rate": []}
    got = {
        r.rule: r for r in rule_results(counts, thresholds, {"blacklist_items", "catalog", "previous_day"}, examples)
    }
    assert got["blacklisted_item"] == RuleResult("blacklisted_item", "hard", 1, 1 / 200, 0.0, False, ["c"])
    assert got["duplicate_item_in_request"] == RuleResult("duplicate_item_in_request", "soft", 2, 0.01, 0.01, True)
    assert (got["item_missing_from_catalog"].rate, got["item_missing_from_catalog"].passed) == (11 / 200, False)
    assert "blacklisted_category" not in got and "non_finite_score" not in got
    assert got["no_feedback"] == RuleResult("no_feedback", "hard", 0, 0.0, 0.0, True)
    assert got["rejected_exposure_rate"] == RuleResult("rejected_exposure_rate", "soft", 5, 5 / 250, 0.02, True)
    assert (got["rejected_click_rate"].rate, got["rejected_click_rate"].passed) == (None, True)
    assert (got["unweighted_event_rate"].rate, got["unweighted_event_rate"].passed) == (0.25, False)
    assert (got["duplicate_exposure_rate"].rate, got["orphan_event_rate"].rate) == (0.0, 0.0)
    assert (got["empty_response_rate"].rate, got["empty_response_rate"].passed) == (0.04, False)
    assert (got["bot_user_rate"].rate, got["bot_user_rate"].passed) == (0.001, True)
    assert got["exposure_change"] == RuleResult("exposure_change", "soft", 125, 1.0, 0.5, False)


def test_the_counts_derived_from_the_day():
    assert day_counts({"exposure_rows": 70, "relevant_exposures": 3}, {"view": 2, "like": 5}, 100) == {
        "no_feedback": 0,
        "day": 1,
        "unweighted_events": 7,
        "exposure_change": 30,  # |70 - 100|: a drop is a change too
        "previous_exposure_rows": 100,
    }
    without = day_counts({"exposure_rows": 70}, {}, None)
    assert without == {"no_feedback": 1, "day": 1, "unweighted_events": 0}  # no previous day: no change counted


@pytest.mark.parametrize(
    ("counts", "unweighted", "why"),
    [
        ({"relevant_exposures": 1, "click_rows": 0}, {}, None),
        ({"click_rows": 0}, {}, "no feedback events in the clicks partition"),
        (
            {"click_rows": 4, "valid_events": 0, "late_events": 0},
            {},
            "every feedback event was set aside by validation",
        ),
        (
            {"click_rows": 4, "valid_events": 3},
            {"view": 2, "like": 1},
            "no event name has a weight in labels.event_weights (names seen: like, view)",
        ),
        ({"click_rows": 4, "valid_events": 3}, {}, "no event matched an exposure"),
        ({"click_rows": 4, "valid_events": 3}, {"view": 2}, "no event matched an exposure"),
    ],
)
def test_the_no_feedback_reason_names_the_case(counts, unweighted, why):
    assert no_feedback_reason(counts, unweighted) == why


def test_the_top_counts_are_the_largest_first_ties_by_name_at_most_five():
    assert top_counts({}) == []
    assert top_counts({"b": 1, "a": 1, "c": 3}) == ["c: 3", "a: 1", "b: 1"]
    assert (
        len(top_counts({f"n{i}": i for i in range(9)})) == 5
        and top_counts({f"n{i}": i for i in range(9)})[0] == "n8: 8"
    )
