"""recsys-spark simulate: a candidate's lists for the logged requests of a day without feedback are judged
for everything that needs none, with the status the rules give, and no feedback metric."""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.registry import FEEDBACK_METRICS, needs_feedback
from recsys_spark.steps.rules import FEEDBACK_RULES
from recsys_spark.synthetic import generate

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 20)


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """Two generated days of logs (the day before: the update rate's), and two candidates' lists for the
    day's requests: ``full`` answers every request (each logged list reversed), ``partial`` leaves a tenth
    of them unanswered and lists a request the day never logged."""
    root = tmp_path_factory.mktemp("sim")
    generate.write_days(root / "in", DAY, days=2, users=80, seed=3, experiments=False)
    exposures = pd.read_parquet(root / "in" / "exposures" / f"dt={DAY}")
    shown = exposures.dropna(subset=["item_id"])
    lengths = shown.groupby("request_id")["position"].transform("max")
    full = shown.assign(  # exposure-shaped: the simulation reads only request_id, item_id, position, score
        position=(lengths - shown["position"] + 1).astype("int32"),
        score=1.0 / (lengths - shown["position"] + 1),
    )
    requests = sorted(full["request_id"].unique())
    dropped = set(requests[::10])
    partial = full[~full["request_id"].isin(dropped)]
    stray = pd.DataFrame(
        {"request_id": ["never-logged"], "item_id": [full["item_id"].iloc[0]], "position": [1], "score": [0.5]}
    )
    partial = pd.concat([partial[stray.columns], stray.astype({"position": "int32"})], ignore_index=True)
    for name, frame in (("full", full), ("partial", partial)):
        path = root / "in" / "simulation" / name / f"dt={DAY}"
        path.mkdir(parents=True)
        frame.to_parquet(path / "part-0.parquet", index=False)
    return root, exposures["request_id"].nunique(), len(requests), len(dropped)


def _simulate(spark, root, run):
    return evaluate_day(spark, load_config(), DAY, str(root / "in"), str(root / "out"), simulation_run=run)


def _metrics(root, run):
    return pd.read_parquet(root / "out" / "simulation" / "metrics" / f"run={run}" / f"dt={DAY}")


def test_a_full_candidate_is_ok_and_writes_health_and_rules_but_no_feedback_metric(spark, logged):
    root, n_logged, n_answered, _ = logged
    summary = _simulate(spark, root, "full")
    assert summary["status"] == "ok", [r for r in summary["rules"] if not r["passed"]]
    # the logged empty responses stay unanswered (the candidate's lists come from the shown items)
    assert summary["simulation"]["logged_requests"] == n_logged and summary["simulation"]["answered"] == n_answered
    metrics = _metrics(root, "full")
    names = set(metrics["metric"])
    assert {"pv_coverage", "pv_failure_rate", "item_coverage", "gini", "category_diversity"} <= names
    assert {"personalization", "novelty", "update_rate"} <= names  # update rate against the logged day before
    assert not names & set(FEEDBACK_METRICS)  # no CTR of 0, no NDCG of null: not written at all
    # nor clicks, GMV, dwell or a conversion rate of 0 with a [0, 0] interval (issue 42): nothing needs feedback
    assert not names & {"clicks_per_exposure", "gmv_per_user", "dwell_per_user", "purchase_user_rate"}
    assert [n for n in sorted(names) if needs_feedback(n)] == []
    assert {"novel_item_share", "uv_failure_rate", "pv", "uv"} <= names  # measured without feedback
    rules = pd.read_parquet(root / "out" / "simulation" / "rule_checks" / f"run=full/dt={DAY}")
    assert not set(rules["rule"]) & set(FEEDBACK_RULES) and "duplicate_item_in_request" in set(rules["rule"])
    assert not any(k.startswith(m) for k in summary["headline"] for m in ("auc", "ndcg", "exposure_ctr"))
    assert "clicked_exposures" not in summary["data_quality"] and "clicks" not in summary["input_rows"]
    out = root / "out" / "simulation"
    assert (out / "summary" / "run=full" / f"dt={DAY}" / "_SUCCESS").exists()
    assert not (out / "user_metrics").exists() and not (root / "out" / "metrics").exists()
    written = json.loads((out / "summary" / "run=full" / f"dt={DAY}" / "summary.json").read_text())
    assert written["simulation"]["run"] == "full" and written["status"] == "ok"


def test_unanswered_requests_are_failures_and_fail_the_soft_rule_as_the_rules_say(spark, logged):
    root, n_logged, n_answered, n_dropped = logged
    summary = _simulate(spark, root, "partial")
    failed = {r["rule"]: r for r in summary["rules"] if not r["passed"]}
    assert summary["status"] == "soft_rule_failed" and set(failed) == {"empty_response_rate"}
    unanswered = n_logged - n_answered + n_dropped
    assert failed["empty_response_rate"]["violations"] == unanswered
    sim = summary["simulation"]
    assert sim["answered"] == n_answered - n_dropped and sim["requests_not_logged"] == 1 and sim["rows_not_logged"] == 1
    metrics = _metrics(root, "partial").query("slice == 'all' and aggregation == 'global'")
    failure = metrics.set_index("metric").loc["pv_failure_rate", "value"]
    assert failure == pytest.approx(unanswered / n_logged)


def test_the_same_click_free_day_evaluated_as_logs_fails_the_hard_no_feedback_rule(spark, logged, tmp_path):
    """What the simulation declares away: run as a logged day, lists without clicks are a broken feed."""
    from recsys_spark.errors import HardRuleViolation

    root = logged[0]
    clicks = tmp_path / "clicks" / f"dt={DAY}"
    clicks.mkdir(parents=True)
    pq.write_table(generate.CLICK_SCHEMA.empty_table(), clicks / "part-0.parquet")  # a day without a click
    overrides = [
        f'input.exposures="{root}/in/simulation/full/dt={{date}}"',
        f'input.clicks="{tmp_path}/clicks/dt={{date}}"',
    ]
    with pytest.raises(HardRuleViolation, match="no_feedback"):
        evaluate_day(spark, load_config(None, overrides), DAY, str(root / "in"), str(tmp_path / "out"))


def test_an_experiments_population_does_not_stop_a_simulated_day(spark, logged, tmp_path):
    """A simulated day has no experiment, and its inputs keep no population column: the population is not checked
    there (the demo's hd_images population failed its simulated day with exit 3 before)."""
    root, *_ = logged
    population = "experiments.per_experiment={hd_images={population=\"platform <> 'web'\"}}"
    cfg = load_config(None, [population])
    summary = evaluate_day(spark, cfg, DAY, str(root / "in"), str(tmp_path / "out"), simulation_run="full")
    assert summary["status"] == "ok"
