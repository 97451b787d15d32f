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
import pyarrow as pa
import pyarrow.parquet as pq
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
#: offline-compare's rows under their per-user column names: (column, metric, k, delta, p, p_adjusted); a lower
#: rating error is a gain, a lower corrected NDCG a loss
OFFLINE_EXTRA = (
    ("rating_mae", "rating_mae", None, -0.05, 1e-6, 1e-5),
    ("rating_rmse", "rating_rmse", None, -0.04, 1e-6, 1e-5),
    ("sampled_ndcg_at_10", "sampled_ndcg", 10, 0.03, 1e-6, 1e-5),
    ("corrected_ndcg_at_10", "corrected_ndcg", 10, -0.03, 1e-6, 1e-5),
)
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
    # the offline comparison as offline-compare names its per-user columns: rating_*, sampled_*, corrected_*
    rows = fx.comparison_rows()
    extra = []
    for column, metric, k, delta, p, p_adj in OFFLINE_EXTRA:
        extra.append({**rows.iloc[0].to_dict(), "column": column, "metric": metric, "k": k, "delta": delta})
        extra[-1].update(ci_low=delta - 0.01, ci_high=delta + 0.01, rel_delta=delta / 0.5, p_value=p, p_adjusted=p_adj)
        extra[-1].update(rel_ci_low=(delta - 0.01) / 0.5, rel_ci_high=(delta + 0.01) / 0.5, candidate_mean=0.5 + delta)
    where = root / "offline" / "comparison" / "base=base" / "candidate=candidate" / "part-0.parquet"
    table = pd.concat([rows, pd.DataFrame(extra)], ignore_index=True)
    pq.write_table(pa.Table.from_pandas(table, schema=fx.COMPARISON_SCHEMA, preserve_index=False), where)
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
    assert (
        "the generator&#39;s true value of the candidate: 0.0587" in block
        or "the generator's true value of the candidate: 0.0587" in block
    )
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


def test_offline_names_take_their_direction_from_the_registry(html):
    """ISSUE 42: an MAE or RMSE improvement was "no better side" (``rating_mae`` is not a registry name)."""
    rows = {r["metric"]: r for r in parse(html).data["data-comparison-base-candidate"]["rows"]}
    assert rows["rating_mae"]["verdict"] == rows["rating_rmse"]["verdict"] == "gain"
    assert rows["sampled_ndcg"]["verdict"] == "gain" and rows["corrected_ndcg"]["verdict"] == "loss"
    assert rows["rating_mae"]["label"] == "rating MAE (user avg)"
    assert rows["corrected_ndcg"]["label"] == "corrected NDCG@10 (user avg)"


def test_sampled_and_corrected_rows_stand_under_a_heading_that_explains_them(html):
    table = html[html.index('id="table-comparison-base-candidate"') :]
    table = table[: table.index("</table>")]
    for prefix, words in (
        ("rating_", "Rating errors"),
        ("sampled_", "Sampled, naive"),
        ("corrected_", "Sampled, corrected"),
    ):
        heading = table.index(
            f'<tr class="row-group" data-group="{prefix}"><th colspan="13" class="text"><div class="group-note">{words}'
        )
        label = {"rating_": "rating MAE", "sampled_": "sampled NDCG@10", "corrected_": "corrected NDCG@10"}[prefix]
        assert heading < table.index(label), prefix
    assert table.index("NDCG@10 (user avg)") < table.index("Rating errors")  # the plain metrics first


def test_each_interval_beside_an_adjusted_p_is_adjusted_the_same_way(html):
    """ISSUE 42: an unadjusted interval excluding 0 stood beside "not significant" from a Holm-adjusted p.  Now
    the interval beside the adjusted p excludes 0 exactly when that p is below alpha, the headers say so, and
    the unadjusted pair stands together at the end of the row."""
    page = parse(html)
    rows = list(page.data["data-comparison-base-candidate"]["rows"])
    alpha = page.data["data-comparison-base-candidate"]["alpha"]
    recall = next(r for r in rows if r["metric"] == "recall")
    assert recall["ci_low"] > 0 and recall["p_adjusted"] > alpha  # the fixture's A/A-like row
    assert recall["adj_ci_low"] < 0 < recall["adj_ci_high"] and recall["verdict"] == "none"
    for r in rows:
        assert r["interval_basis"] == "adjusted", r["metric"]
        excludes = r["adj_ci_low"] > 0 or r["adj_ci_high"] < 0
        assert excludes == (r["p_adjusted"] < alpha) == r["significant"], r["metric"]
    assert "<th>interval, Holm-adjusted as its p</th><th>p, Holm-adjusted</th>" in html
    assert "<th>p, unadjusted</th><th>interval, unadjusted</th>" in html


def test_the_experiments_intervals_are_adjusted_as_their_p(tmp_path):
    root = fx.build_root(tmp_path / "out", offline=False, ope=False)
    data, context = load_range(str(root), START, END)
    page = parse(render_html(data, context, load_config(None).report))
    checked = 0
    for name, block in page.data.items():
        if not name.startswith(("data-forest-", "data-window-")):
            continue
        for r in block["rows"]:
            if r["sequential"]:
                assert r["interval_basis"] == "always valid" and r["adj_rel_ci_low"] == r["rel_ci_low"]
                continue
            excludes = r["adj_rel_ci_low"] > 0 or r["adj_rel_ci_high"] < 0
            assert excludes == (r["p_adjusted"] < block["alpha"]), (name, r["metric"])
            checked += 1
    assert checked >= 6
    aa = next(r for r in page.data["data-forest-exp-aa"]["rows"] if r["metric"] == "ndcg")
    assert aa["rel_ci_low"] > 0 and aa["adj_rel_ci_low"] < 0  # the A/A row: not significant, its interval says so
