"""The demo's own lines (recsys_spark/cli/demo.py): a day's decisions in words, and the closing lines that say
which of the tour's experiments shipped, which must not and which needs more time, with their gates' exits."""

from __future__ import annotations

import pytest

from recsys_spark.cli import demo

SHIP = {
    "decision": "ship",
    "reasons": [
        "goal ndcg@10_user_avg inconclusive: +0.001 [-0.01, +0.012] (+0.15%)",
        "goal exposure_ctr_global improved: +0.025 [+0.012, +0.038] (+48.00%)",
        "guardrail pv_failure_rate_global within its margin (+0.005): -0.0098 [-0.012, -0.0076]",
    ],
}
NO = {
    "decision": "do_not_ship",
    "reasons": [
        "goal ndcg@10_user_avg inconclusive: +0.002 [-0.01, +0.014] (+0.30%)",
        "goal exposure_ctr_global improved: +0.013 [+0.004, +0.022] (+25.00%)",
        "guardrail pv_failure_rate_global beyond its margin (+0.005): +0.07 [+0.06, +0.08]",
    ],
}
MORE = {
    "decision": "keep_running",  # the code of releases before not_enough_evidence: the same words
    "reasons": [
        "goal ndcg@10_user_avg inconclusive: -0.001 [-0.012, +0.01] (-0.15%)",
        "goal exposure_ctr_global inconclusive: +0.001 [-0.006, +0.008] (+2.00%)",
        "guardrail pv_failure_rate_global within its margin (+0.005): +0.0002 [-0.003, +0.0034]",
    ],
}


def window(name: str, decision: dict) -> dict:
    return {"experiments": {name: {"decisions": {"treatment": decision}}}}


def test_the_closing_lines_say_what_shipped_what_must_not_and_what_needs_more_time():
    windows = {"ranker_v2": window("ranker_v2", SHIP), "fast_retrieval": window("fast_retrieval", NO)}
    windows["hd_images"] = window("hd_images", MORE)
    states = {"ranker_v2": "passed", "fast_retrieval": "failed", "hd_images": "inconclusive"}
    lines = demo.tour_lines(windows, states)
    assert lines[0].startswith("what the week decided")
    assert lines[1] == f"  ranker_v2 treatment: SHIP (gate passed, exit 0): {SHIP['reasons'][1]}"
    assert lines[2] == f"  fast_retrieval treatment: DO NOT SHIP (gate failed, exit 12): {NO['reasons'][2]}"
    assert lines[3] == (
        "  hd_images treatment: NOT ENOUGH EVIDENCE YET (gate inconclusive, exit 13): " + "; ".join(MORE["reasons"][:2])
    )


def test_an_experiment_without_a_window_is_left_out_and_one_without_a_gate_says_nothing_of_one():
    lines = demo.tour_lines({"ranker_v2": window("ranker_v2", SHIP)}, {})
    assert lines[1:] == [f"  ranker_v2 treatment: SHIP: {SHIP['reasons'][1]}"]


def test_an_invalid_experiment_gives_every_reason():
    invalid = {"decision": "invalid", "reasons": ["multiple assignment: 12 user(s) with several variants"]}
    assert demo.deciding_reasons(invalid) == invalid["reasons"]
    assert demo.deciding_reasons({"decision": "do_not_ship", "reasons": ["goal x worse: -1 [-2, -0.5]"]}) == [
        "goal x worse: -1 [-2, -0.5]"
    ]


def test_a_day_says_each_experiments_decision_on_one_line():
    section = {
        "status": "ok",
        "experiments": {
            "ui_aa": {"decisions": {"treatment": {"decision": "invalid", "reasons": []}}},
            "ranker_v2": {"decisions": {"treatment": SHIP}},
            "hd_images": {"decisions": {"treatment": {"decision": "not_enough_evidence", "reasons": []}}},
        },
    }
    assert demo.day_decisions("2026-11-20", section) == [
        "2026-11-20: decisions: hd_images treatment NOT ENOUGH EVIDENCE YET, ranker_v2 treatment SHIP, "
        "ui_aa treatment INVALID EXPERIMENT"
    ]
    skipped = {"status": "skipped", "note": "no assignments"}
    assert demo.day_decisions("2026-11-20", skipped) == ["2026-11-20: experiments: skipped (no assignments)"]
    assert demo.day_decisions("2026-11-20", None) == []


@pytest.mark.spark
def test_a_generated_day_with_the_demos_population_shows_interactions_and_a_plan(spark, tmp_path, capsys):
    """The demo's pieces on one small generated day: the tour's layers give an interaction table, hd_images is
    analysed on its population (platform <> 'web'), and the plan reads the day's exposure CTR."""
    import datetime as dt

    from recsys_spark.config import load_config
    from recsys_spark.daily import evaluate_day
    from recsys_spark.synthetic import generate

    inputs, out = tmp_path / "in", tmp_path / "out"
    args = ["--date", demo.END.isoformat(), "--output-root", str(inputs), "--users", "1500"]
    generate.main([*args, "--exposures", "10500", "--days", "1", "--seed", "7"])
    cfg = load_config(None, [demo.DEMO_METRICS, demo.POPULATION, "experiments.min_users_per_cell=20"])
    summary = evaluate_day(spark, cfg, demo.END, str(inputs), str(out))
    section = summary["experiments"]
    assert section["experiments"]["hd_images"]["population"] == "platform <> 'web'"
    assert 0 < section["experiments"]["hd_images"]["matched_ids"] < section["experiments"]["hd_images"]["assigned_ids"]
    assert "population" not in section["experiments"]["ranker_v2"]
    pairs = section["interactions"]["pairs"]
    assert {"ranker_v2 x ui_aa", "hd_images x ui_aa"} <= set(pairs)
    rows = spark.read.parquet(f"{out}/experiment_interactions/dt={demo.END}")
    assert rows.where("experiment_a = 'ranker_v2' AND experiment_b = 'ui_aa'").count() > 0
    capsys.readouterr()
    demo._plan(spark, cfg, out)
    said = capsys.readouterr().out
    assert "users per arm (fixed horizon)" in said and "users per arm with the always-valid intervals" in said
    assert spark.read.parquet(f"{out}/plan/metric=exposure_ctr_global").count() == 1
    assert dt.date.fromisoformat(spark.read.parquet(f"{out}/plan/metric=exposure_ctr_global").first()["last_day"])
