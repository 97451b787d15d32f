"""The HTML report from a hand-written output root (pyarrow, no Spark): sections, embedded data equal
to the tables, nothing outside the file, same bytes on rerun, gaps, graceful degradation."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import report_fixture as fx
from helpers.report_page import EVERY_SECTION, Page, figure, parse, visible_text

from recsys_spark import registry
from recsys_spark.cli import run
from recsys_spark.config import load_config
from recsys_spark.kernels.regression import fit_line
from recsys_spark.registry import HEADLINE
from recsys_spark.report import default_path, load_range, render_html, write_report

START, END = dt.date.fromisoformat(fx.START), dt.date.fromisoformat(fx.END)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return fx.build_root(tmp_path_factory.mktemp("out"))


@pytest.fixture(scope="module")
def offline(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("offline") / "auc.csv"
    fx.write_offline_auc(path)
    return path


def render(root: Path, offline: Path | None = None, overrides: tuple[str, ...] = ()) -> str:
    cfg = load_config(None, list(overrides))
    data, context = load_range(str(root), START, END, str(offline) if offline else "")
    return render_html(data, context, cfg.report)


@pytest.fixture(scope="module")
def html(root, offline) -> str:
    return render(root, offline)


@pytest.fixture(scope="module")
def page(html) -> Page:
    return parse(html)


def metrics(root: Path, day: str) -> pd.DataFrame:
    frame = pd.read_parquet(root / "metrics" / f"dt={day}")
    frame["k"] = frame["k"].astype("Int64")
    return frame


def value(frame: pd.DataFrame, metric: str, k: int | None, agg: str, slice_: str = "all", column: str = "value"):
    sel = (frame.metric == metric) & (frame.aggregation == agg) & (frame.slice == slice_)
    sel &= frame.k.isna() if k is None else frame.k == k
    rows = frame[sel]
    assert len(rows) == 1, (metric, k, agg, slice_)
    return float(rows[column].iloc[0])


def test_every_section_is_present(page):
    assert set(EVERY_SECTION) <= set(page.ids("section"))
    figures = page.ids("figure")
    assert len([f for f in figures if f.startswith("chart-trend-")]) == len(HEADLINE)
    for chart in (
        "chart-curves-at-k",
        "chart-lorenz",
        "chart-set-aside",
        "chart-rule-failures",
        "chart-forest-exp-ranker",
        "chart-forest-exp-srm",
        "chart-offline-auc",
        "chart-regression",
        "chart-slice-platform-ndcg-10-user-avg",
    ):
        assert chart in figures
    # every chart has its data right beside it
    for name in figures:
        assert "data-" + name[len("chart-") :] in page.data


def test_embedded_trend_data_equals_the_parquet_values(root, page):
    trend = page.data["data-trend-ndcg-10-user-avg"]
    assert trend["dt"] == ["2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"]
    for day, got, low, high in zip(trend["dt"], trend["value"], trend["ci_low"], trend["ci_high"], strict=True):
        if day == fx.MISSING:
            assert got is None and low is None and high is None
            continue
        frame = metrics(root, day)
        assert got == value(frame, "ndcg", 10, "user_avg")  # exact: JSON keeps every bit of a double
        assert low == value(frame, "ndcg", 10, "user_avg", column="ci_low")
        assert high == value(frame, "ndcg", 10, "user_avg", column="ci_high")


def test_embedded_curves_slices_and_lorenz_equal_the_parquet_values(root, page):
    last = metrics(root, "2026-11-05")
    curves = page.data["data-curves-at-k"]["curves"]
    assert curves["ndcg"]["k"] == [1, 5, 10]
    assert curves["ndcg"]["value"] == [value(last, "ndcg", k, "user_avg") for k in (1, 5, 10)]
    assert curves["recall"]["value"] == [value(last, "recall", k, "user_avg") for k in (1, 5, 10)]
    sl = page.data["data-slice-platform-auc-user-avg"]
    assert sl["all"] == value(last, "auc", None, "user_avg")
    assert {r["slice"]: r["value"] for r in sl["rows"]} == {
        s: value(last, "auc", None, "user_avg", s) for s in ("platform=ios", "platform=web")
    }
    assert {r["slice"]: r["ci_low"] for r in sl["rows"]} == {
        s: value(last, "auc", None, "user_avg", s, "ci_low") for s in ("platform=ios", "platform=web")
    }
    lorenz = pd.read_parquet(root / "lorenz" / "dt=2026-11-05")
    data = page.data["data-lorenz"]
    assert data["x"] == lorenz["x"].tolist() and data["y"] == lorenz["y"].tolist()
    assert data["gini_catalog"] == value(last, "gini", None, "catalog")
    # top 10 % of items: 1 - L(0.9), L linear between (0.75, 0.32) and (1, 1): 0.32 + 0.15/0.25 * 0.68 = 0.728
    assert data["top_10pct_share"] == pytest.approx(1 - 0.728)


def test_headline_changes_use_the_previous_day_and_the_week_before(root, page):
    rows = {r["key"]: r for r in page.data["data-headline"]["rows"]}
    auc = rows["auc_global"]
    last, week = metrics(root, "2026-11-05"), metrics(root, fx.WEEK_BEFORE)
    assert auc["value"] == value(last, "auc", None, "global")
    assert auc["previous_day"]["date"] == "2026-11-04" and auc["previous_day"]["delta"] is None  # missing day
    assert auc["week_before"]["date"] == fx.WEEK_BEFORE  # outside the range: read for the comparison
    assert auc["week_before"]["delta"] == pytest.approx(
        value(last, "auc", None, "global") - value(week, "auc", None, "global")
    )
    assert auc["week_before"]["delta"] == pytest.approx(0.01 * 3 - 0.01 * -7)
    assert auc["ci_low"] is None  # no se for the pooled AUC, so no interval
    ndcg = rows["ndcg@10_user_avg"]
    assert ndcg["ci_low"] == value(last, "ndcg", 10, "user_avg", column="ci_low")


def test_rules_and_data_quality(page):
    failures = page.data["data-rule-failures"]
    assert failures["failed_hard"] == [0.0, 1.0, None, 0.0]  # 11-03 fails a hard rule; 11-04 has no data
    assert failures["failed_soft"] == [1.0, 1.0, None, 1.0]
    aside = {(r["source"], r["reason"]): r["rows"] for r in page.data["data-set-aside"]["rows"]}
    assert aside[("exposures", "null_key")] == 2 + 3 and aside[("clicks", "null_key")] == 1


def test_missing_day_shows_as_a_gap(html, page):
    assert "no output for 2026-11-04" in html
    trend = re.search(r'<figure id="chart-trend-auc-global".*?</figure>', html, re.DOTALL).group(0)
    assert 'class="gap"' in trend and "no data: 4</title>" in trend
    # the line is broken at the gap: two polylines (11-02..11-03, then 11-05 alone as a point)
    assert trend.count("<polyline") == 1 and trend.count('class="point"') == 3


def test_nothing_points_outside_the_file(html, page):
    for tag, attrs in page.attrs:
        for name in ("src", "href", "xlink:href", "action", "data", "poster", "srcset"):
            target = attrs.get(name)
            if target is not None and not (tag == "svg" and name == "xmlns"):
                assert target.startswith("#"), (tag, name, target)
        assert tag not in ("img", "link", "iframe", "object", "embed", "audio", "video"), tag
    assert "url(" not in html and "@import" not in html
    assert not re.search(r"\bhttps?://(?!www\.w3\.org/2000/svg)", html)  # the SVG namespace is a name, not a fetch


def test_rendering_twice_gives_the_same_bytes(root, offline, html, tmp_path):
    assert render(root, offline) == html
    # in a fresh interpreter with another hash seed (set and dict order), through the CLI
    out = tmp_path / "again.html"
    code = (
        "import sys; from recsys_spark.cli import run; "
        f"sys.exit(run(['report', '--output-root', {str(root)!r}, '--start', {fx.START!r}, '--end', "
        f"{fx.END!r}, '--out', {str(out)!r}, '--offline-auc', {str(offline)!r}]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
    assert out.read_text(encoding="utf-8") == html


def test_experiments_forest_srm_banner_and_sizes(root, html, page):
    table = pd.read_parquet(root / "experiments" / "dt=2026-11-05")
    ranker = page.data["data-forest-exp-ranker"]
    got = {(r["variant"], r["metric"]): r for r in ranker["rows"]}
    for rec in table[table.experiment == "exp_ranker"].to_dict("records"):
        row = got[(rec["variant"], rec["metric"])]
        for key in ("rel_delta", "rel_ci_low", "rel_ci_high", "p_adjusted", "mde", "value", "control_value"):
            assert row[key] == rec[key], key
        assert row["n"] == rec["n"] and row["control_n"] == rec["control_n"]
    assert got[("treatment", "ndcg")]["significant"] and not got[("treatment", "exposure_ctr")]["significant"]
    # exp_srm failed its sample ratio check: a banner that cannot be missed, in that experiment's part only
    exp_srm = html[html.index('id="experiment-exp_srm"') : html.index('id="offline"')]
    exp_ranker = html[html.index('id="experiment-exp_ranker"') : html.index('id="experiment-exp_srm"')]
    assert 'class="banner bad srm-failed"' in exp_srm and "SAMPLE RATIO MISMATCH" in exp_srm
    assert "srm-failed" not in exp_ranker and "Sample ratio check passed" in exp_ranker


def test_offline_online_gaps_and_diagnoses(root, page):
    data = page.data["data-offline-auc"]
    online = [None if d == fx.MISSING else value(metrics(root, d), "auc", None, "global") for d in data["dt"]]
    assert data["online_auc"] == online
    rows = {r["dt"]: r for r in data["table"]}
    assert rows["2026-11-02"]["diagnosis"] == []
    assert rows["2026-11-03"]["train_minus_test"] == pytest.approx(0.10)
    assert rows["2026-11-03"]["diagnosis"] == ["overfitting (train much higher than test)"]
    assert rows["2026-11-05"]["test_minus_online"] == pytest.approx(0.95 - online[3])
    assert rows["2026-11-05"]["diagnosis"] == ["offline/online inconsistency or leakage (test much higher than online)"]


def test_regression_rests_on_the_days_and_says_when_too_few(root, html, page):
    data = page.data["data-regression"]
    days = ["2026-11-02", "2026-11-03", "2026-11-05"]
    xs = [value(metrics(root, d), "auc", None, "impression_weighted") for d in days]
    ys = [value(metrics(root, d), "uv_ctr", None, "global") for d in days]
    assert data["dt"] == days and data["x_values"] == xs and data["y_values"] == ys
    assert data["fit"] == json.loads(json.dumps(fit_line(xs, ys).as_dict()))
    assert data["fit"]["n"] == 3
    assert "Too few days to conclude: 3 day(s)" in html and 'id="too-few-days"' in html
    enough = render(root, None, ("report.min_regression_days=3",))
    assert 'id="too-few-days"' not in enough


def test_without_interval_columns_or_experiments_the_sections_degrade(tmp_path):
    root = fx.build_root(tmp_path / "plain", with_ci=False, experiments=False, ope=False)
    html = render(root)
    page = parse(html)
    assert "experiments" not in page.ids("section")
    assert 'class="band"' not in html and 'class="whisker"' not in html
    assert "No interval columns" in html and 'id="no-offline-auc"' in html
    assert "ci_low" not in page.data["data-trend-ndcg-10-user-avg"]
    with_ci = render(fx.build_root(tmp_path / "ci", with_ci=True, experiments=False, ope=False))
    assert 'class="band"' in with_ci and 'class="whisker"' in with_ci


def test_an_empty_range_still_renders(tmp_path):
    html = render(tmp_path)  # nothing written at all
    assert "No day of the range has outputs." in html
    assert "0 of 4 day(s) with output" in html


def test_cli_writes_the_default_path_without_spark(root, tmp_path):
    code = (
        "import sys; from recsys_spark.cli import run; "
        f"rc = run(['report', '--output-root', {str(root)!r}, '--start', {fx.START!r}, '--end', {fx.END!r}]); "
        "sys.exit(rc if rc else (3 if 'pyspark' in sys.modules else 0))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr  # 3: pyspark was imported for a local root
    path = default_path(str(root), START, END)
    assert done.stdout.strip() == path and Path(path).is_file()


def test_cli_errors_are_one_line(root, tmp_path, capsys):
    assert run(["report", "--output-root", str(root), "--start", fx.END, "--end", fx.START]) == 2
    assert (
        run(
            [
                "report",
                "--output-root",
                str(root),
                "--start",
                fx.START,
                "--end",
                fx.END,
                "--offline-auc",
                str(tmp_path / "absent.parquet"),
            ]
        )
        == 4
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("dt,model,auc\n2026-11-02,m1,0.7\n")
    assert (
        run(["report", "--output-root", str(root), "--start", fx.START, "--end", fx.END, "--offline-auc", str(bad)])
        == 5
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "lacks column(s) split" in err[2]


def test_offline_auc_from_config_and_parquet(root, offline, tmp_path):
    parquet = tmp_path / "auc.parquet"
    pd.read_csv(offline).to_parquet(parquet)
    cfg = load_config(None, [f"report.offline_auc={json.dumps(str(parquet))}"])
    out = write_report(str(root), START, END, cfg, out=str(tmp_path / "r.html"))
    data = parse(Path(out).read_text(encoding="utf-8")).data["data-offline-auc"]
    assert data["models"]["m1"]["train"] == [0.74, 0.83, None, 0.96]


def test_values_are_finite_or_null_in_every_data_block(page):
    def walk(v):
        if isinstance(v, float):
            assert math.isfinite(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for block in page.data.values():
        walk(block)


def test_evaluate_accepts_report():
    from recsys_spark.cli import build_parser

    args = build_parser().parse_args(
        ["evaluate", "--date", "2026-11-05", "--input-root", "in", "--output-root", "o", "--report"]
    )
    assert args.report is True
    plain = build_parser().parse_args(["evaluate", "--date", "2026-11-05", "--input-root", "in", "--output-root", "o"])
    assert plain.report is False


def test_embedded_json_cannot_close_its_script_element():
    from recsys_spark.report import _json

    value = {"slice": "country=</script><script>alert(1)</script>", "x": [0.1, None], "amp": "a&b"}
    text = _json(value)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == value
    with pytest.raises(ValueError):
        _json({"nan": float("nan")})  # a NaN would not be JSON: values are made None first


def test_a_day_without_its_success_marker_is_left_out_and_named(root, tmp_path):
    import shutil

    copy = tmp_path / "out"
    shutil.copytree(root, copy)
    day = fx.DAYS[-1]
    (copy / "summary" / f"dt={day}" / "_SUCCESS").unlink()  # a run killed inside its commit
    data, _ = load_range(str(copy), START, END)
    assert data.skipped == [day]
    assert day not in data.summaries and day not in set(data.tables["metrics"]["dt"])
    html = render(copy)
    assert f'<span id="skipped-days">{day}</span>' in html


def test_a_missing_output_root_is_an_error_naming_it(tmp_path, capsys):
    missing = tmp_path / "ouptut"  # a typo
    assert run(["report", "--output-root", str(missing), "--start", fx.START, "--end", fx.END]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"recsys-spark: error: no output root {missing}: nothing to report (check --output-root)"]
    assert not missing.exists()


# --- a report that never misleads ------------------------------------------------------------------------
SVG_COLOURS = {"#1a7f37": "gain", "#cf222e": "loss", "#4e79a7": "change", "#888": "none"}


def dot_verdicts(html: str, chart: str) -> list[str]:
    """The verdict each forest dot's fill says, in row order."""
    return [SVG_COLOURS[c] for c in re.findall(r'<circle class="dot[^"]*"[^>]*fill="([^"]+)"', figure(html, chart))]


def test_colours_and_words_follow_the_adjusted_p(html, page):
    expected = {(e[0], e[2]): e[-1] for e in fx.EXPERIMENTS}
    for name in ("exp_ranker", "exp_srm"):
        rows = page.data[f"data-forest-{name.replace('_', '-')}"]["rows"]
        assert [r["verdict"] for r in rows] == [expected[(name, r["metric"])] for r in rows]
        assert dot_verdicts(html, f"forest-{name.replace('_', '-')}") == [r["verdict"] for r in rows]
    # the A/A case: the unadjusted interval [0.5 %, 5.5 %] excludes 0, the adjusted p is 0.495: grey, not green;
    # the sequential interval covering 0 keeps its row grey although its adjusted p is 0.012
    aa = page.data["data-window-exp-aa-2026-11-03-2026-11-05"]
    verdicts = {r["metric"]: (r["verdict"], r["verdict_words"]) for r in aa["rows"]}
    assert verdicts == {"ndcg": ("none", "not significant"), "mrr": ("none", "not significant")}
    assert {r["metric"]: r["sequential"] for r in aa["rows"]} == {"ndcg": False, "mrr": True}
    assert dot_verdicts(html, "window-exp-aa-2026-11-03-2026-11-05") == ["none", "none"]
    # a lower failure rate is a gain; the words sit beside the colour in the table
    ranker = {r["metric"]: r for r in page.data["data-forest-exp-ranker"]["rows"]}
    assert ranker["pv_failure_rate"]["verdict_words"] == "significant gain"
    part = html[html.index('id="experiment-exp_ranker"') : html.index('id="experiment-exp_srm"')]
    assert part.count('data-verdict="gain"') == 2 * 2 and part.count('data-verdict="none"') == 2
    assert part.count('class="ok" data-verdict="gain"') == 2 and 'class="bad"' not in part
    # every green or red mark on the page stands beside an adjusted p below the threshold
    for block in (v for k, v in page.data.items() if "rows" in v and "alpha" in v):
        for r in block["rows"]:
            if r["verdict"] in ("gain", "loss", "change"):
                assert r["p_adjusted"] is not None and r["p_adjusted"] < block["alpha"], r
    # and the page holds as many green and red marks as the fixture has significant gains and losses: the day's
    # experiments (all three) and the windows ending in the range (exp_ranker, exp_aa)
    shown = fx.EXPERIMENTS + [e for e in fx.EXPERIMENTS if e[0] != "exp_srm"]
    assert html.count('fill="#1a7f37"') == sum(e[-1] == "gain" for e in shown) == 4
    assert html.count('fill="#cf222e"') == sum(e[-1] == "loss" for e in shown) == 1


def test_the_threshold_is_the_runs_confidence(root, tmp_path):
    import shutil

    copy = tmp_path / "out"
    shutil.copytree(root, copy)
    path = copy / "summary" / f"dt={fx.DAYS[-1]}" / "summary.json"
    summary = json.loads(path.read_text())
    summary["config"]["stats"]["confidence"] = 0.999  # alpha 0.001: no adjusted p of exp_ranker is below it
    path.write_text(json.dumps(summary))
    data = parse(render(copy)).data["data-forest-exp-ranker"]
    assert data["alpha"] == pytest.approx(0.001)
    assert [r["verdict"] for r in data["rows"]] == ["none", "none", "none"]


def test_item_level_slices_are_not_drawn_against_all(html, page):
    slices = {k: v for k, v in page.data.items() if k.startswith("data-slice-")}
    dims = {v["dimension"]: v["item_level"] for v in slices.values()}
    assert dims == {"platform": False, "popularity": True, "brand": True}  # brand: by the catalog it sees
    for key, data in slices.items():
        chart = figure(html, key[len("data-") :])
        if data["item_level"]:
            assert data["all"] is None and 'class="reference"' not in chart and "all =" not in chart
        else:
            assert data["all"] is not None and 'class="reference"' in chart
    assert html.count('class="note item-level-note"') == 2
    assert "a user counts in several buckets" in html
    # the dimensions in the order the run configured them
    order = [i for i in page.ids("h3") if i.startswith("slices-")]
    assert order == [f"slices-{d}" for d in fx.SLICE_NAMES]


def test_item_level_rule():
    from recsys_spark.report.metric_rows import Metrics
    from recsys_spark.report.sections.daily import item_level_dimensions

    def frame(rows):
        return pd.DataFrame(
            [
                {"dt": "d", "slice": s, "metric": "item_coverage", "k": None, "aggregation": "global", "value": 1.0}
                | {"n": n}
                for s, n in rows
            ]
        )

    m = Metrics(frame([("all", 100), ("shelf=a", 30), ("shelf=b", 70), ("country=x", 100), ("category=c", 100)]))
    # popularity and category by name; shelf by the catalog it sees; country sees the whole catalog
    assert item_level_dimensions(m, "d", ["country", "shelf", "category", "popularity"]) == [
        "shelf",
        "category",
        "popularity",
    ]


def test_windows_ending_in_the_range(root, page):
    windows = [k for k in page.data if k.startswith("data-window-")]
    assert sorted(windows) == [
        "data-window-exp-aa-2026-11-03-2026-11-05",
        "data-window-exp-ranker-2026-11-02-2026-11-05",
    ]
    data = page.data["data-window-exp-ranker-2026-11-02-2026-11-05"]
    assert data["experiment"] == "exp_ranker"  # from the path: the table has no experiment column
    assert (data["window_start"], data["window_end"]) == ("2026-11-02", "2026-11-05")
    table = pd.read_parquet(root / "experiment_window" / "experiment=exp_ranker" / "window=2026-11-02_2026-11-05")
    assert "experiment" not in table.columns
    got = {r["metric"]: r for r in data["rows"]}
    for rec in table.to_dict("records"):
        assert got[rec["metric"]]["rel_delta"] == rec["rel_delta"] and got[rec["metric"]]["n"] == rec["n"] == 4000
    assert [c["check"] for c in data["checks"]] == ["srm"]


def test_offline_runs_side_by_side(page, html):
    data = page.data["data-offline-runs"]
    assert [r["run"] for r in data["runs"]] == ["base", "candidate"]  # unfinished: no _SUCCESS
    keys = [r["key"] for r in data["rows"]]
    # the registry's HEADLINE keys the runs have, in its order (recall@10 user_avg and log loss are not in it)
    assert keys == ["auc_global", "ndcg@10_user_avg", "mrr_user_avg", "recall@10_global"]
    ndcg = data["rows"][1]["runs"]
    assert ndcg["candidate"]["value"] == pytest.approx(0.07) and ndcg["base"]["ci_low"] == pytest.approx(
        0.05 - 1.96 * 0.007
    )
    assert "Left out, incomplete (no offline/summary/run=NAME/_SUCCESS): run unfinished." in html


def test_offline_comparison_follows_the_colour_rule(page, html):
    data = page.data["data-comparison-base-candidate"]
    assert data["alpha"] == pytest.approx(0.05)
    assert {(r["metric"], r["k"]): r["verdict"] for r in data["rows"]} == {(c[0], c[1]): c[-1] for c in fx.COMPARISON}
    recall = next(r for r in data["rows"] if r["metric"] == "recall")
    assert recall["ci_low"] > 0 and recall["verdict_words"] == "not significant"  # the adjusted p is 0.2
    table = html[html.index('id="table-comparison-base-candidate"') :]
    table = table[: table.index("</table>")]
    assert table.count('class="ok" data-verdict="gain"') == 2 and table.count('class="bad" data-verdict="loss"') == 1
    assert table.count('class="changed" data-verdict="change"') == 1


def test_an_incomplete_comparison_is_left_out(root, tmp_path):
    import shutil

    copy = tmp_path / "out"
    shutil.copytree(root, copy)
    (copy / "offline" / "summary" / "base=base" / "candidate=candidate" / "_SUCCESS").unlink()
    page = parse(render(copy))
    assert "data-comparison-base-candidate" not in page.data
    assert "offline-comparison" in page.ids("section")  # saying what it left out
    no_offline = parse(render(fx.build_root(tmp_path / "bare", offline=False, experiments=False)))
    assert not {"windows", "offline-runs", "offline-comparison"} & set(no_offline.ids("section"))


def test_cards_count_what_the_charts_count(page, html):
    assert re.search(r'id="card-hard-rules"><div class="k">hard rules</div><div class="v ok">0 of 2 failed<', html)
    assert re.search(r'id="card-soft-rules"><div class="k">soft rules</div><div class="v warn">1 of 2 failed<', html)
    aside = page.data["data-set-aside"]
    assert aside["rows"] == [
        {"source": "exposures", "reason": "null_key", "rows": 5},
        {"source": "exposures", "reason": "ts_outside_day", "rows": 1},
        {"source": "clicks", "reason": "null_key", "rows": 1},
    ]
    card = re.search(r'id="card-set-aside"><div class="k">rows set aside</div><div class="v">(\d+)<', html)
    assert int(card.group(1)) == aside["total"] == 7


def test_nothing_set_aside_is_a_note_and_a_zero(root, tmp_path):
    import shutil

    copy = tmp_path / "out"
    shutil.copytree(root, copy)
    path = copy / "summary" / f"dt={fx.DAYS[-1]}" / "summary.json"
    summary = json.loads(path.read_text())
    summary["data_quality"]["rejected_exposures"] = summary["data_quality"]["rejected_clicks"] = {}
    path.write_text(json.dumps(summary))
    html = render(copy)
    assert "data-set-aside" not in parse(html).data  # no empty chart beside the card
    assert f"Nothing set aside on {fx.DAYS[-1]}" in html
    assert re.search(r'id="card-set-aside"><div class="k">rows set aside</div><div class="v">0<', html)


def test_the_headline_leaves_out_what_is_1_by_construction(page, html):
    rows = [r["key"] for r in page.data["data-headline"]["rows"]]
    left_out = ["recall@10_global", "hit_rate@10_user_avg"]
    assert page.data["data-headline"]["left_out"] == left_out
    assert rows == [registry.key(*h) for h in HEADLINE if registry.key(*h) not in left_out]
    assert "1 by construction on logged lists" in html
    # still in the trends and the curves
    assert "data-trend-recall-10-global" in page.data and "recall" in page.data["data-curves-at-k"]["curves"]


def test_day_over_day_changes_say_whether_they_are_within_noise(page, html):
    rows = {r["key"]: r for r in page.data["data-headline"]["rows"]}
    ndcg, mrr, auc = rows["ndcg@10_user_avg"], rows["mrr_user_avg"], rows["auc_global"]
    # 2026-10-29's ndcg (0.53) lies outside 2026-11-05's interval [0.59, 0.67]; mrr does not move
    assert not ndcg["ci_low"] <= ndcg["week_before"]["base"] <= ndcg["ci_high"]
    assert ndcg["week_before"]["noise"] == "outside" and mrr["week_before"]["noise"] == "within"
    assert auc["week_before"]["noise"] is None and auc["previous_day"]["noise"] is None  # no interval, no data
    table = html[html.index('id="headline-table"') : html.index("</table>", html.index('id="headline-table"'))]
    assert table.count('data-noise="outside"') == sum(
        1 for r in rows.values() for c in ("previous_day", "week_before") if r[c]["noise"] == "outside"
    )
    assert "within noise" in table and "outside today's interval" in table


def test_metrics_are_named_by_the_registrys_reader_names(html):
    text = visible_text(html)
    for m in registry.METRICS.values():
        raw = m.name.replace("_", " ")
        if m.label and raw != m.label:
            assert not re.search(rf"\b{re.escape(raw)}\b", text), raw
    assert "clicked exposures per user (UV CTR)" in text  # the regression's y


def test_the_windows_and_the_offline_outputs_are_read(root):
    data, _ = load_range(str(root), START, END)
    spans = sorted(set(data.windows[["experiment", "window_start", "window_end"]].itertuples(index=False, name=None)))
    assert spans == [("exp_aa", "2026-11-03", "2026-11-05"), ("exp_ranker", "2026-11-02", "2026-11-05")]  # not 10-26
    assert set(data.window_checks["experiment"]) == {"exp_aa", "exp_ranker"}
    assert [r.name for r in data.offline_runs] == ["base", "candidate"]
    assert data.offline_runs[0].summary["notes"] == ["a note of run base"]
    assert data.offline_skipped == ["run unfinished"]  # its metrics are there, its _SUCCESS is not
    assert [(c.base, c.candidate, len(c.rows)) for c in data.comparisons] == [("base", "candidate", len(fx.COMPARISON))]


def test_an_ope_run_shows_its_estimates_against_the_logged_value_and_its_diagnostics(page, html):
    item = page.data["data-ope-reranker-item"]
    assert [r["estimator"] for r in item["rows"]] == ["logged", "ips", "dr"]
    ips = item["rows"][1]
    assert ips["value"] == 0.061 and ips["ci_low"] == 0.052 and ips["delta"] == 0.011 and not ips["baseline"]
    assert item["rows"][0]["baseline"]
    assert [r["estimator"] for r in page.data["data-ope-reranker-list"]["rows"]] == ["logged_list", "iips"]
    figure_svg = figure(html, "ope-reranker-item")
    assert "logged policy" in figure_svg  # the reference line at the logged value
    table = html[html.index('id="table-ope-diagnostics-reranker"') :]
    table = table[: table.index("</table>")]
    assert "effective sample size" in table and "2.0%" in table  # in the run's order, a share as a share
    assert table.index("users") < table.index("effective sample size") < table.index("candidate mass")
    assert "slate_ips skipped: no logged list has a list_propensity" in html
    assert "Left out, incomplete (no ope/summary/run=NAME/_SUCCESS): ope run unfinished." in html
    assert "data-ope-unfinished-item" not in page.data


def test_a_simulated_day_is_shown_beside_the_logged_day(root, page):
    block = page.data[f"data-simulation-reranker-{fx.SIMULATED_DAY}"]
    rows = {r["key"]: r for r in block["rows"]}
    day = metrics(root, fx.SIMULATED_DAY)
    for metric, agg, candidate in fx.SIMULATED_METRICS:
        key = registry.key(metric, None, agg)
        logged = value(day, metric, None, agg)
        assert rows[key]["candidate"] == candidate and rows[key]["logged"] == pytest.approx(logged)
        assert rows[key]["difference"] == pytest.approx(candidate - logged)
    assert block["status"] == "soft_rule_failed" and block["logged_status"] is not None
    rules = {r["rule"]: r for r in block["rules"]}
    assert not rules["empty_response_rate"]["passed"] and rules["duplicate_item_in_request"]["logged_passed"]


def test_the_last_days_roc_over_its_week_and_its_pr_curve_equal_the_tables(root, page):
    # the ROC of the last day (slice all) and of the earlier days of its week present (the missing day has none),
    # each with the day's auc_global; the PR curve of the last day; points in the order written
    data = page.data["data-roc"]
    days = [d["dt"] for d in data["days"]]
    assert days == [d for d in fx.DAYS if d != fx.MISSING]  # earlier days first, the last day drawn on top
    last = pd.read_parquet(root / "roc_curve" / f"dt={fx.END}")
    assert data["days"][-1]["fpr"] == last["fpr"].tolist() and data["days"][-1]["tpr"] == last["tpr"].tolist()
    assert data["days"][-1]["auc"] == value(metrics(root, fx.END), "auc", None, "global")
    pr = pd.read_parquet(root / "pr_curve" / f"dt={fx.END}")
    assert page.data["data-pr"]["recall"] == pr["recall"].tolist()
    assert page.data["data-pr"]["precision"] == pr["precision"].tolist()


def test_offline_base_against_candidate_curves(root, page):
    data = page.data["data-offline-roc-base-candidate"]
    base = pd.read_parquet(root / "offline" / "roc_curve" / "run=base")
    candidate = pd.read_parquet(root / "offline" / "roc_curve" / "run=candidate")
    assert data["curves"]["base"]["tpr"] == base["tpr"].tolist()
    assert data["curves"]["candidate"]["tpr"] == candidate["tpr"].tolist()
    assert "data-offline-pr-base-candidate" in page.data


def test_a_day_without_curves_says_so(tmp_path):
    root = fx.build_root(tmp_path / "out", experiments=False, offline=False, ope=False)
    for table in ("roc_curve", "pr_curve"):
        for part in (root / table).iterdir():
            if part.name == f"dt={fx.END}":
                for f in part.iterdir():
                    f.unlink()
                part.rmdir()
    html = render(root)
    assert "No ROC curve for the last day" in html and "data-roc" not in parse(html).data


def test_offline_threshold_rows_are_shown_at_their_thresholds_and_never_as_a_headline(tmp_path):
    """A run's threshold rows (precision at two thresholds, k null: one name, two rows) go to the "At thresholds"
    table with the confusion counts, not into the lookup by (metric, k, aggregation) that the headline reads; the
    base run, written without the threshold column (an older release), reads as before."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = fx.build_root(tmp_path / "out")
    part = root / "offline" / "metrics" / "run=candidate" / "part-0.parquet"
    metrics = pd.read_parquet(part)
    metrics["threshold"] = float("nan")
    at = pd.DataFrame(
        [
            {
                "metric": m,
                "k": None,
                "aggregation": "global",
                "slice": "all",
                "value": v,
                "n": 300,
                "se": 0.01,
                "ci_low": v - 0.02,
                "ci_high": v + 0.02,
                "ci_method": "delta",
                "threshold": t,
            }
            for m, t, v in [
                ("precision", 0.3, 0.41),
                ("precision", 0.7, 0.93),
                ("recall", 0.3, 0.88),
                ("accuracy", 0.7, 0.61),
                ("auc", 0.7, 0.99),
            ]  # an auc row at a threshold: not the AUC
        ]
    )
    old = pa.Table.from_pandas(metrics, preserve_index=False)
    table = pa.concat_tables([old, pa.Table.from_pandas(at[metrics.columns], schema=old.schema, preserve_index=False)])
    pq.write_table(table, part)
    confusion = root / "offline" / "confusion" / "run=candidate"
    confusion.mkdir(parents=True)
    pd.DataFrame(
        {
            "slice": ["all", "all"],
            "threshold": [0.3, 0.7],
            "tp": [88, 12],
            "fp": [127, 1],
            "tn": [10, 136],
            "fn": [12, 88],
        }
    ).to_parquet(confusion / "part-0.parquet", index=False)
    html = render(root)
    page = parse(html)
    data = page.data["data-offline-runs"]
    auc = next(r for r in data["rows"] if r["key"] == "auc_global")["runs"]
    assert auc["candidate"]["value"] == pytest.approx(0.74)  # the run's AUC, not the 0.99 at a threshold
    assert [(r["run"], r["threshold"]) for r in data["thresholds"]] == [("candidate", 0.3), ("candidate", 0.7)]
    assert data["threshold_metrics"] == ["accuracy", "precision", "recall", "auc"]
    low, high = data["thresholds"]
    assert (low["tp"], low["fp"], low["tn"], low["fn"]) == (88, 127, 10, 12)
    assert low["values"]["precision"]["value"] == 0.41 and high["values"]["precision"]["value"] == 0.93
    assert "recall" not in high["values"]  # undefined there: no row, a dash
    assert 'id="offline-thresholds-table"' in html and "At thresholds" in html
