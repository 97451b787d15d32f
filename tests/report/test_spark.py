"""The report from a real multi-day run: the generator writes four days, the daily job evaluates three
of them (the third day is left out: a gap), and the report shows what the job wrote."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import browser
from helpers.report_page import SECTIONS, parse

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.report import load_range, render_html, write_report
from recsys_spark.synthetic.assignments import EXPERIMENTS

pytestmark = pytest.mark.spark

DAYS = [dt.date(2026, 11, 17) + dt.timedelta(days=i) for i in range(4)]
SKIPPED = DAYS[2]
SETTINGS = ["rules.fail_on_hard=false", 'slices.names=["platform"]', "metrics.k=[1, 5, 10]"]


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report_run")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "recsys_spark.synthetic.generate",
            "--date",
            DAYS[-1].isoformat(),
            "--days",
            "4",
            "--users",
            "300",
            "--seed",
            "11",
            "--output-root",
            str(root / "in"),
        ],
        check=True,
        capture_output=True,
    )
    cfg = load_config(None, SETTINGS)
    for day in DAYS:
        if day != SKIPPED:
            evaluate_day(spark, cfg, day, str(root / "in"), str(root / "out"))
    return root


@pytest.fixture(scope="module")
def html(run) -> str:
    cfg = load_config(None, SETTINGS)
    path = write_report(str(run / "out"), DAYS[0], DAYS[-1], cfg)
    return Path(path).read_text(encoding="utf-8")


def test_every_section_from_a_real_run(html):
    page = parse(html)
    assert set(SECTIONS) <= set(page.ids("section"))  # the generator writes assignments: experiments too
    figures = page.ids("figure")
    for chart in (
        "chart-trend-ndcg-10-user-avg",
        "chart-curves-at-k",
        "chart-lorenz",
        "chart-rule-failures",
        "chart-slice-platform-ndcg-10-user-avg",
        "chart-regression",
    ):
        assert chart in figures
    # the rows set aside: a chart when validation rejected some, else a note (never an empty chart)
    assert ("chart-set-aside" in figures) != ("Nothing set aside on" in html)
    for figure in figures:
        assert "data-" + figure[len("chart-") :] in page.data


def test_embedded_data_equals_what_the_job_wrote(run, html):
    page = parse(html)
    out = run / "out"
    metrics = pd.concat(
        [pd.read_parquet(out / "metrics" / f"dt={d}").assign(dt=d.isoformat()) for d in DAYS if d != SKIPPED]
    )

    def value(day, metric, k, agg, slice_="all"):
        sel = (
            (metrics.dt == day)
            & (metrics.metric == metric)
            & (metrics.aggregation == agg)
            & (metrics.slice == slice_)
            & (metrics.k.isna() if k is None else metrics.k == k)
        )
        assert sel.sum() == 1
        v = metrics[sel]["value"].iloc[0]
        return None if pd.isna(v) else float(v)

    robustness = (("click_concentration", None, "global"), ("capped_ctr", None, "global"))
    for metric, k, agg in (("ndcg", 10, "user_avg"), ("auc", None, "global"), ("gini", None, "catalog"), *robustness):
        trend = page.data[f"data-trend-{metric.replace('_', '-')}{'-' + str(k) if k else ''}-{agg.replace('_', '-')}"]
        assert trend["value"] == [None if d == SKIPPED else value(d.isoformat(), metric, k, agg) for d in DAYS]
    last = DAYS[-1].isoformat()
    curves = page.data["data-curves-at-k"]["curves"]
    assert curves["map"]["value"] == [value(last, "map", k, "user_avg") for k in (1, 5, 10)]
    assert curves["f1"]["value"] == [value(last, "f1", k, "user_avg") for k in (1, 5, 10)]
    lorenz = pd.read_parquet(out / "lorenz" / f"dt={last}")
    lorenz = lorenz[lorenz.slice == "all"].sort_values("x")
    assert page.data["data-lorenz"]["x"] == lorenz["x"].tolist()
    assert page.data["data-lorenz"]["y"] == lorenz["y"].tolist()
    rules = pd.read_parquet(out / "rule_checks" / f"dt={last}")
    failed_hard = float(((rules.severity == "hard") & ~rules.passed).sum())
    assert page.data["data-rule-failures"]["failed_hard"][-1] == failed_hard
    summary = json.loads((out / "summary" / f"dt={last}" / "summary.json").read_text())
    headline = {r["key"]: r["value"] for r in page.data["data-headline"]["rows"]}
    assert headline["ndcg@10_user_avg"] == summary["headline"]["ndcg@10_user_avg"]
    slices = {r["slice"]: r["value"] for r in page.data["data-slice-platform-auc-user-avg"]["rows"]}
    assert slices == {s: value(last, "auc", None, "user_avg", s) for s in slices}
    assert len(slices) >= 2


def test_the_skipped_day_is_a_gap_and_reruns_are_identical(run, html):
    assert f"no output for {SKIPPED.isoformat()}" in html
    assert html.count(f"<title>no data: {SKIPPED.day}</title>") >= 12  # one grey column per trend chart
    cfg = load_config(None, SETTINGS)
    data, context = load_range(str(run / "out"), DAYS[0], DAYS[-1])
    assert render_html(data, context, cfg.report) == html


def test_the_spark_reader_gives_the_same_page(run, spark, html):
    """For non-local roots the tables are read through Spark: the page must not depend on the reader."""
    from recsys_spark.report.load import context_metrics, load
    from recsys_spark.report.readers import SparkReader

    reader = SparkReader(spark, str(run / "out"))
    data = load(reader, DAYS[0], DAYS[-1])
    assert data.missing == [SKIPPED.isoformat()]
    assert render_html(data, context_metrics(reader, data), load_config(None, SETTINGS).report) == html


def test_evaluate_report_writes_the_days_report(run, spark, tmp_path):
    from recsys_spark.cli.report import write_day_report

    cfg = load_config(None, SETTINGS + ["report.window_days=10"])
    path = write_day_report(spark, cfg, str(run / "out"), DAYS[-1])
    # the window starts on the first day with output, not 10 days back
    assert path == str(run / "out" / "reports" / f"{DAYS[0].isoformat()}_{DAYS[-1].isoformat()}.html")
    # 12 trends and 3 of robustness (click concentration, clicks Gini, capped CTR), the curves, the Lorenz curve, the
    # ROC and PR curves, 3 slice charts (platform), the failed rules per day (and the rows set aside when some were),
    # the regression, a forest plot for each of the generator's experiments, and for each experiment's treatment the
    # sequential interval of its two goals and one guardrail
    text = Path(path).read_text(encoding="utf-8")
    experiments = len(EXPERIMENTS)  # the tour's three in the ranking layer and the A/A one
    assert len(re.findall(r'<svg class="chart"[^>]*\(sequential interval', text)) == experiments * 3
    assert text.count('<svg class="chart"') == 24 + experiments + experiments * 3 + ('id="chart-set-aside"' in text)


@pytest.mark.skipif(browser.chromium() is None, reason="Chromium not installed (apt-get install chromium)")
def test_chromium_renders_the_real_report(run, html, tmp_path):
    path = tmp_path / "real.html"
    path.write_text(html, encoding="utf-8")
    browser.check_page(path, html.count('<svg class="chart"'))


@pytest.mark.process
def test_cli_evaluate_report_fills_the_gap_last(run):
    """Runs last (it evaluates the skipped day): ``evaluate --report`` prints the report it wrote, gapless now."""
    import os

    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "recsys_spark.cli",
            "evaluate",
            "--date",
            SKIPPED.isoformat(),
            "--input-root",
            str(run / "in"),
            "--output-root",
            str(run / "out"),
            "--master",
            "local[2]",
            "--report",
            *[a for s in SETTINGS + ["report.window_days=3"] for a in ("--set", s)],
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    path = run / "out" / "reports" / f"{DAYS[0].isoformat()}_{SKIPPED.isoformat()}.html"  # 3 days ending there
    assert f"{SKIPPED}: report {path}" in proc.stdout
    page = path.read_text(encoding="utf-8")
    assert "3 of 3 day(s) with output." in page and "no data:" not in page
