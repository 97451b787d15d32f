"""The report's decision pages: each variant's decision with its reasons and the bands of the metrics it read
over the days, and the gates' verdicts (report/sections/decisions.py, gate.py).  On the report fixture's output
root, with an ``experiment_decisions`` table and two verdicts added; no Spark."""

from __future__ import annotations

import datetime as dt
import json
import re
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
    {
        "experiment": "exp_ship",
        "variant": "treatment",
        "decision": "ship",
        "reasons": ["goal ndcg@10_user_avg improved: +0.05 [+0.03, +0.07] (+8.33%)"],
        "ci_method": "sequential",
        "control_n": 3000,
        "variant_n": 3010,
        "basis": "cumulative",
    },
    {
        "experiment": "exp_bad",
        "variant": "treatment",
        "decision": "not_enough_evidence",
        "reasons": ["goal ndcg@10_user_avg inconclusive: +0.01 [-0.02, +0.04]"],
        "ci_method": "sequential",
        "control_n": 2000,
        "variant_n": 2000,
        "basis": "cumulative",
    },
]
#: exp_bad's window ending on the report's last day: its decision is the banner's, not the day's
WINDOW_DECISION = {
    "variant": "treatment",
    "decision": "do_not_ship",
    "reasons": ["guardrail pv_failure_rate_global beyond its margin (+0.005): +0.9 pp [+0.6 pp, +1.2 pp]"],
    "ci_method": "sequential",
    "control_n": 5000,
    "variant_n": 5000,
}
#: exp_ship's cumulative sample per day: the always-valid interval narrows as users accumulate
CUMULATIVE = [
    (fx.DAYS[0], 1, 0.09, -0.05, 0.25),
    (fx.DAYS[1], 2, 0.085, 0.01, 0.17),
    (fx.DAYS[2], 4, 0.083, 0.04, 0.13),
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
    "open": {
        "name": "open",
        "state": "inconclusive",
        "passed": False,
        "summary": "gate open: NOT ENOUGH EVIDENCE YET: 1 of 1 checks inconclusive: ndcg@10_user_avg ...",
        "source": "offline",
        "base": "base",
        "candidate": "candidate",
        "written_at": "2026-11-05T03:00:00+00:00",
        "checks": [
            {
                "key": "ndcg@10_user_avg",
                "slice": "all",
                "threshold": "min_relative_change",
                "threshold_value": 0.01,
                "guardrail": False,
                "value": 0.012,
                "interval": [-0.004, 0.028],
                "on": "bound",
                "state": "inconclusive",
                "passed": False,
                "unit": "percent",
                "shown": {"value": "+1.2 %", "interval": "[-0.4 %, +2.8 %]", "threshold": "1 %", "unit": "%"},
                "why": "relative change must gain at least +1 %: the interval straddles the threshold",
            },
        ],
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
    pq.write_table(pa.Table.from_pylist([{"basis": None, **d} for d in DECISIONS]), last / "part-0.parquet")
    window = root / "experiment_window_decisions" / f"experiment=exp_bad/window={fx.DAYS[0]}_{fx.DAYS[-1]}"
    window.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([WINDOW_DECISION]), window / "part-0.parquet")
    for day, days, rel, low, high in CUMULATIVE:
        frame = fx.experiment_rows(["exp_ranker"]).head(1).assign(experiment="exp_ship", first_day=fx.DAYS[0])
        frame = frame.assign(days=days, rel_delta=rel, rel_ci_low=low, rel_ci_high=high, ci_method="sequential")
        (root / "experiment_cumulative" / f"dt={day}").mkdir(parents=True)
        frame.to_parquet(root / "experiment_cumulative" / f"dt={day}" / "part-0.parquet", index=False)
    summary = root / "summary" / f"dt={fx.DAYS[-1]}" / "summary.json"
    text = json.loads(summary.read_text())
    goal_only = {"goals": ["ndcg@10_user_avg"], "guardrails": [], "secondary": []}
    text["experiments"] = {
        "experiments": {"exp_ranker": {"decision_metrics": ROLES}, "exp_ship": {"decision_metrics": goal_only}}
    }
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


def banners(html: str) -> dict[str, tuple[str, str, str]]:
    """Each decision banner's experiment -> (class, code, text)."""
    found = re.findall(r'<h3 id="decision-([^"]+)-[^"]+">.*?</h3>\n<div class="banner (\w+) decision" '
                       r'data-decision="(\w+)" data-basis="\w+">([^<]*)</div>', html)  # fmt: skip
    return {name: (css, code, text) for name, css, code, text in found}


def test_each_decision_shows_in_its_state_words_and_colour(html):
    """ISSUE 42: the three states and invalid in the contract's words; an old partition's keep_running is not
    enough evidence yet, amber (never red)."""
    got = banners(html)
    assert got["exp_ranker"][:2] == ("warn", "not_enough_evidence")
    assert got["exp_ranker"][2].startswith("NOT ENOUGH EVIDENCE YET: control 1010 users, variant 1000 users")
    assert "KEEP RUNNING" not in html
    assert got["exp_srm"][:2] == ("invalid", "invalid") and got["exp_srm"][2].startswith("INVALID EXPERIMENT")
    assert got["exp_ship"][:2] == ("ok", "ship") and got["exp_ship"][2].startswith("SHIP: control 3000 users")
    assert got["exp_bad"][:2] == ("bad", "do_not_ship") and got["exp_bad"][2].startswith("DO NOT SHIP")
    for d in DECISIONS[:3]:
        for reason in d["reasons"]:
            assert f"<li>{reason}</li>" in html


def test_the_banner_is_the_window_ending_on_the_last_day_else_the_cumulative_decision(html):
    got = banners(html)
    # exp_bad: the day's cumulative decision is not enough evidence, the window ending on the last day says no
    assert f"decided on the window {fx.DAYS[0]}..{fx.DAYS[-1]} (each user once)" in got["exp_bad"][2]
    assert "control 5000 users" in got["exp_bad"][2]
    assert f"<li>{WINDOW_DECISION['reasons'][0]}</li>" in html
    assert "The day's decision on 2026-11-05: NOT ENOUGH EVIDENCE YET." in html
    assert f"decided on every user since {fx.DAYS[0]} (4 days), to {fx.DAYS[-1]}" in got["exp_ship"][2]
    assert "decided on the users of 2026-11-05 alone" in got["exp_ranker"][2]  # no basis: an older release's day


def test_the_cumulative_lift_is_drawn_with_its_always_valid_band(html):
    page = parse(html)
    band = page.data["data-band-exp-ship-treatment-goal-ndcg-10-user-avg-cumulative"]
    assert band["cumulative"] is True and band["ci_method"] == ["sequential"]
    assert band["rel_delta"] == [0.09, 0.085, None, 0.083]
    assert band["rel_ci_low"] == [-0.05, 0.01, None, 0.04] and band["rel_ci_high"] == [0.25, 0.17, None, 0.13]
    assert "(sequential interval)" in html


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
    assert '<div class="banner bad verdict" data-state="failed">gate candidate: FAILED 1 of 2 checks' in html
    assert '<div class="banner ok verdict" data-state="passed">gate ranker: PASSED 1 of 1 checks</div>' in html
    assert "offline run candidate against base" in html
    assert "experiment exp_ranker, treatment against the control, 2026-11-02..2026-11-05" in html
    assert "the interval&#39;s worse end is -0.001" in html and "[-0.001, +0.009]" in html


def test_an_inconclusive_gate_is_amber_with_its_units_in_the_header(html):
    """ISSUE 42: the gate's three states by ``state`` (an old verdict by ``passed``), the result cell by the
    check's own state, the numbers as ``shown`` with the unit in the table's header."""
    start = html.index('<h3 id="gate-open">')
    block = html[start : html.index("</section>", start)]
    block = block[: block.find("<h3", 4)]
    assert '<div class="banner warn verdict" data-state="inconclusive">gate open: NOT ENOUGH EVIDENCE YET' in block
    assert "<th>value (%, relative change)</th><th>interval (%, relative change)</th>" in block
    assert "<td>+1.2 %</td><td>[-0.4 %, +2.8 %]</td>" in block and "min_relative_change 1 %" in block
    assert '<td class="text warn" data-state="inconclusive">NOT ENOUGH EVIDENCE YET</td>' in block
    assert "bad" not in block
    old = html[html.index('<h3 id="gate-candidate">') : html.index('<h3 id="gate-open">')]
    assert '<td class="text bad" data-state="failed">FAILED</td>' in old  # passed False, no state: failed
    assert '<td class="text ok" data-state="passed">PASSED</td>' in old
    assert "<th>value (metric units)</th>" in old and "<td>+0.004</td>" in old  # spelt the gate's way
    assert "<td>+1 %</td><td>[+0 %, +2 %]</td>" in old


def test_without_decisions_or_verdicts_there_is_no_such_section(tmp_path):
    root = fx.build_root(tmp_path / "plain")
    data, context = load_range(str(root), START, END)
    sections = parse(render_html(data, context, load_config(None).report)).ids("section")
    assert "decisions" not in sections and "gates" not in sections
