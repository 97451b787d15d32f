"""ISSUE 42 in the report beyond the decisions: the OPE run led by its recommended estimate (or none, and why)
with the generator's truth beside the estimates and ``no_propensities`` not shown as ok; a simulated day compared
on what it simulated only; the offline comparison coloured by the registry's one direction lookup
(``rating_mae`` is ``mae``) with each row's interval adjusted as its p is, and its sampled/corrected rows
explained where they stand.  Hand-built output roots (pyarrow), no Spark."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers import report_fixture as fx
from helpers.report_page import parse

from recsys_spark.config import load_config
from recsys_spark.report import load_range, render_html

START, END = dt.date.fromisoformat(fx.START), dt.date.fromisoformat(fx.END)
RECOMMENDED = {
    "estimator": "dr",
    "value": 0.060,
    "ci_low": 0.054,
    "ci_high": 0.066,
    "delta": 0.010,
    "delta_ci_low": 0.002,
    "delta_ci_high": 0.018,
    "reason": "SLOPE kept ips and dr: dr is the narrowest interval that agrees with every wider one",
}
NONE_REASON = "no logged row has a propensity: nothing weighs the logs, so no off-policy estimate can be made"


def _summary(root: Path, run: str) -> Path:
    return root / "ope" / "summary" / f"run={run}" / "summary.json"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = fx.build_root(tmp_path_factory.mktemp("out"), experiments=False)
    for table in ("estimates", "diagnostics", "summary"):
        shutil.copytree(root / "ope" / table / "run=reranker", root / "ope" / table / "run=nolog")
    text = json.loads(_summary(root, "reranker").read_text())
    _summary(root, "reranker").write_text(
        json.dumps({**text, "status": "ok", "recommended": RECOMMENDED, "truth": {"value": 0.0587}})
    )
    empty = dict.fromkeys(RECOMMENDED) | {"reason": NONE_REASON}
    _summary(root, "nolog").write_text(
        json.dumps({**text, "run": "nolog", "status": "no_propensities", "recommended": empty})
    )
    # an earlier release's simulated day: feedback metrics written as measured zeros
    where = root / "simulation" / "metrics" / f"run=reranker/dt={fx.SIMULATED_DAY}" / "part-0.parquet"
    frame = pd.read_parquet(where)
    zeros = pd.DataFrame(
        [
            {"metric": m, "k": None, "aggregation": a, "slice": "all", "value": 0.0, "n": 600, "se": 0.0}
            for m, a in (("exposure_ctr", "global"), ("gmv_per_user", "user_avg"), ("purchase_user_rate", "global"))
        ]
    )
    pd.concat([frame, zeros], ignore_index=True).astype({"k": "Int32"}).to_parquet(where, index=False)
    return root


@pytest.fixture(scope="module")
def html(root) -> str:
    data, context = load_range(str(root), START, END)
    return render_html(data, context, load_config(None).report)


def _block(html: str, anchor: str) -> str:
    start = html.index(anchor)
    end = html.find("<h3", start + 4)
    return html[start : end if end > 0 else None]


def test_an_ope_run_leads_with_its_recommended_estimate_and_the_truth(html):
    block = _block(html, '<h3 id="ope-reranker">')
    assert (
        '<div class="banner ok ope-recommended" data-estimator="dr">Recommended estimate: DR 0.06 [0.054, 0.066]'
        in block
    )
    assert "the generator&#39;s value: 0.0587" in block or "the generator's value: 0.0587" in block
    assert f"Why: {RECOMMENDED['reason']}." in block
    assert block.index("ope-recommended") < block.index('class="ope-estimates"')  # the answer first, the others below
    assert 'class="ope-truth-row"' in block and "<b>0.0587</b>" in block
    assert 'data-status="ok"' in block


def test_an_ope_run_without_propensities_is_not_ok_and_recommends_nothing(html):
    block = _block(html, '<h3 id="ope-nolog">')
    assert '<span class="badge warn ope-status" data-status="no_propensities">no propensities</span>' in block
    assert 'class="banner warn ope-no-propensities"' in block
    assert '<div class="banner warn ope-recommended" data-estimator="">No estimate can be recommended' in block
    assert NONE_REASON in block and "Recommended estimate:" not in block


def test_a_simulated_day_is_compared_only_on_what_it_simulated(html):
    page = parse(html)
    rows = page.data[f"data-simulation-reranker-{fx.SIMULATED_DAY}"]["rows"]
    assert [r["key"] for r in rows] == [f"{m}_{a}" for m, a, _ in sorted(fx.SIMULATED_METRICS)]
    table = html[html.index(f'id="table-simulation-reranker-{fx.SIMULATED_DAY}"') :]
    table = table[: table.index("</table>")]
    assert "CTR" not in table and "GMV" not in table and "purchase" not in table
    assert "left out exposure_ctr_global, gmv_per_user_user_avg, purchase_user_rate_global: they need feedback" in html
