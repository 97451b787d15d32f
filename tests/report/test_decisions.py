"""The report's decision pages: each variant's decision with its reasons and the bands of the metrics it read
over the days, and the gates' verdicts (report/sections/decisions.py, gate.py).  On the report fixture's output
root, with an ``experiment_decisions`` table and two verdicts added; no Spark."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import report_fixture as fx
from helpers.report_page import parse

from recsys_spark.config import load_config
from recsys_spark.report import load_range, render_html

START, END = dt.date.fromisoformat(fx.START), dt.date.fromisoformat(fx.END)
ROLES = {
    "goals": ["ndcg@10_user_avg"],
    "guardrails": [{"metric": "exposure_ctr_global", "absolute_margin": None, "relative_margin": 0.05}],
    "secondary": [],
}
DECISIONS = [
    {
        "experiment": "exp_ranker",
        "variant": "treatment",
        "decision": "keep_running",
        "reasons": [
            "goal ndcg@10_user_avg improved: +0.06 [+0.05, +0.07] (+10.00%)",
            "guardrail exposure_ctr_global inconclusive (-5.00%): -2.50% [-8.00%, +3.00%]",
        ],
        "ci_method": "sequential",
        "control_n": 1010,
        "variant_n": 1000,
    },
    {
        "experiment": "exp_srm",
        "variant": "b",
        "decision": "invalid",
        "reasons": ["sample-ratio mismatch (p=1e-10): the split is not the planned one"],
        "ci_method": "sequential",
        "control_n": 1300,
        "variant_n": 1000,
    },
]
VERDICTS = {
    "candidate": {
        "name": "candidate",
        "passed": False,
        "summary": "gate candidate: FAILED 1 of 2 checks: ndcg@10_user_avg on all min_absolute_change: ...",
        "source": "offline",
        "base": "base",
        "candidate": "candidate",
        "written_at": "2026-11-05T03:00:00+00:00",
        "checks": [
            {
                "key": "ndcg@10_user_avg",
                "slice": "all",
                "threshold": "min_absolute_change",
                "threshold_value": 0.0,
                "guardrail": False,
                "value": 0.004,
                "interval": [-0.001, 0.009],
                "on": "bound",
                "passed": False,
                "why": "change must gain at least 0 (higher is better): the interval's worse end is -0.001",
            },
            {
                "key": "mrr_user_avg",
                "slice": "all",
                "threshold": "min_relative_change",
                "threshold_value": 0.02,
                "guardrail": True,
                "value": 0.01,
                "interval": [0.0, 0.02],
                "on": "bound",
                "passed": True,
                "why": "relative change may be worse by at most +2.00%",
            },
        ],  # fmt: skip
    },
    "ranker": {
        "name": "ranker",
        "passed": True,
        "summary": "gate ranker: PASSED 1 of 1 checks",
        "source": "experiment",
        "experiment": "exp_ranker",
        "variant": "treatment",
        "start": "2026-11-02",
        "end": "2026-11-05",
        "written_at": "2026-11-05T03:00:00+00:00",
        "checks": [],
    },
}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = fx.build_root(tmp_path_factory.mktemp("out"))
    for day in fx.DAYS[:-1]:  # the experiments on every day: a band over the range
        fx.write_experiments(root, day)
    last = root / "experiment_decisions" / f"dt={fx.DAYS[-1]}"
    last.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(DECISIONS), last / "part-0.parquet")
    summary = root / "summary" / f"dt={fx.DAYS[-1]}" / "summary.json"
    text = json.loads(summary.read_text())
    text["experiments"] = {"experiments": {"exp_ranker": {"decision_metrics": ROLES}}}
    summary.write_text(json.dumps(text))
    for name, verdict in VERDICTS.items():
        (root / "gate" / name).mkdir(parents=True)
        (root / "gate" / name / "verdict.json").write_text(json.dumps(verdict))
    return root


@pytest.fixture(scope="module")
def html(root) -> str:
    data, context = load_range(str(root), START, END)
    return render_html(data, context, load_config(None).report)


def test_the_decisions_and_the_gates_follow_the_experiments(html):
    page = parse(html)
    sections = page.ids("section")
    assert sections.index("experiments") + 1 == sections.index("decisions") < sections.index("gates")
    assert sections.index("gates") < sections.index("offline")
    assert '<a href="#decisions">Decisions</a>' in html and '<a href="#gates">Gate verdicts</a>' in html


def test_each_decision_shows_with_its_reasons(html):
    assert '<div class="banner warn decision">KEEP RUNNING: control 1010 users, variant 1000 users' in html
    assert '<div class="banner bad decision">INVALID: control 1300 users' in html
    for d in DECISIONS:
        for reason in d["reasons"]:
            assert f"<li>{reason}</li>" in html


def test_the_bands_are_the_intervals_of_the_goals_and_guardrails_over_the_days(root, html):
    page = parse(html)
    goal = page.data["data-band-exp-ranker-treatment-goal-ndcg-10-user-avg"]
    guard = page.data["data-band-exp-ranker-treatment-guardrail-exposure-ctr-global"]
    assert goal["dt"] == ["2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"]  # the missing day: a gap
    assert goal["rel_delta"] == [0.10, 0.10, None, 0.10]
    assert goal["rel_ci_low"] == [0.04, 0.04, None, 0.04] and goal["rel_ci_high"][-1] == 0.16
    assert guard["rel_ci_low"][0] == -0.08
    assert 'id="chart-band-exp-ranker-treatment-guardrail-exposure-ctr-global"' in html
    assert "(fixed interval)" in html  # the fixture's rows say nothing: the fixed-horizon intervals


def test_every_verdict_has_its_checks(html):
    assert '<div class="banner bad verdict">gate candidate: FAILED 1 of 2 checks' in html
    assert '<div class="banner ok verdict">gate ranker: PASSED 1 of 1 checks</div>' in html
    assert "offline run candidate against base" in html
    assert "experiment exp_ranker, treatment against the control, 2026-11-02..2026-11-05" in html
    assert "the interval&#39;s worse end is -0.001" in html and "[-0.001, 0.009]" in html


def test_without_decisions_or_verdicts_there_is_no_such_section(tmp_path):
    root = fx.build_root(tmp_path / "plain")
    data, context = load_range(str(root), START, END)
    sections = parse(render_html(data, context, load_config(None).report)).ids("section")
    assert "decisions" not in sections and "gates" not in sections
