"""The report over an output root with a file cut short (issue 40, defect 8): the page is still written, what
the file belongs to is left out, and a line names the file; and HTML ids stay distinct for run names that
differ only in ``_``, ``.`` or ``-``.  On the report fixture's root (pyarrow, no Spark)."""

from __future__ import annotations

import collections
import datetime as dt
import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import report_fixture as fx
from helpers.report_page import parse

from recsys_spark.cli import run
from recsys_spark.config import load_config
from recsys_spark.report import load_range, render_html

START, END = dt.date.fromisoformat(fx.START), dt.date.fromisoformat(fx.END)
SIM = f"run=reranker/dt={fx.SIMULATED_DAY}"
DECISION = {
    "experiment": "exp_ranker",
    "variant": "treatment",
    "decision": "keep_running",
    "reasons": ["goal ndcg@10_user_avg improved"],
    "ci_method": "sequential",
    "control_n": 1010,
    "variant_n": 1000,
}
VERDICT = {
    "name": "g",
    "passed": True,
    "summary": "gate g: PASSED 0 of 0 checks",
    "source": "offline",
    "base": "base",
    "candidate": "candidate",
    "written_at": "2026-11-05T03:00:00+00:00",
    "checks": [],
}


def cut_short(path: Path) -> None:
    """What a full disk or a killed copy leaves: the first half of the file."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def data_file(directory: Path) -> Path:
    return next(p for p in sorted(directory.iterdir()) if p.is_file() and not p.name.startswith(("_", ".")))


@pytest.fixture()
def root(tmp_path) -> Path:
    root = fx.build_root(tmp_path / "out")
    decisions = root / "experiment_decisions" / f"dt={fx.DAYS[-1]}"
    decisions.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([DECISION]), decisions / "part-0.parquet")
    (root / "gate" / "g").mkdir(parents=True)
    (root / "gate" / "g" / "verdict.json").write_text(json.dumps(VERDICT))
    return root


def report(root: Path, tmp_path: Path, capsys) -> str:
    """``recsys-spark report`` over the root: exit 0 and the page it wrote."""
    out = tmp_path / "report.html"
    assert run(["report", "--output-root", str(root), "--start", fx.START, "--end", fx.END, "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    return out.read_text()


# (what is cut short, under the root; what the page leaves out, as the line says it; what must be gone)
SIMULATED = (f"simulation reranker {fx.SIMULATED_DAY}", f"data-simulation-reranker-{fx.SIMULATED_DAY}")
PARQUET = [
    ("ope/estimates/run=reranker", "ope run reranker", "data-ope-reranker-item"),
    ("ope/diagnostics/run=reranker", "ope run reranker", "data-ope-reranker-item"),
    (f"simulation/metrics/{SIM}", *SIMULATED),
    (f"simulation/rule_checks/{SIM}", *SIMULATED),
    (f"experiment_decisions/dt={fx.DAYS[-1]}", f"experiment_decisions of {fx.DAYS[-1]}", None),
    (f"metrics/dt={fx.DAYS[0]}", f"metrics of {fx.DAYS[0]}", None),
]  # fmt: skip


@pytest.mark.parametrize("where, what, gone", PARQUET, ids=[p[0].split("/run=")[0].split("/dt=")[0] for p in PARQUET])
def test_a_truncated_parquet_file_leaves_out_what_it_belongs_to_with_a_line_naming_it(
    root, tmp_path, capsys, where, what, gone
):
    # it was exit 1 with nothing written ("Parquet magic bytes not found in footer", no file named)
    bad = data_file(root / where)
    cut_short(bad)
    html = report(root, tmp_path, capsys)
    page = parse(html)
    relative = f"{where}/{bad.name}"
    banner = re.search(r'<div class="banner warn" id="unreadable">(.*?)</div>', html, re.S)
    assert banner is not None
    assert f"{what} ({relative}: " in banner.group(1) and "magic bytes" in banner.group(1)
    if gone is not None:
        assert gone not in page.data
        section = "ope" if where.startswith("ope") else "simulation"
        part = html[html.index(f'<section id="{section}">') :]
        assert f"Left out, unreadable: {what} ({relative}: " in part[: part.index("</section>")]
    if where.startswith("experiment_decisions"):
        assert "decisions" not in page.ids("section")  # its only day: the section is left out
    for section in ("headline", "trends", "offline", "offline-runs"):  # the rest of the report is there
        assert section in page.ids("section")


SUMMARIES = [
    (f"summary/dt={fx.DAYS[-1]}/summary.json", f"the summary of {fx.DAYS[-1]}"),
    ("ope/summary/run=reranker/summary.json", "ope run reranker"),
    (f"simulation/summary/{SIM}/summary.json", f"simulation reranker {fx.SIMULATED_DAY}"),
    ("offline/summary/run=base/summary.json", "offline run base"),
    ("gate/g/verdict.json", "gate verdict g"),
]


@pytest.mark.parametrize("where, what", SUMMARIES, ids=[s[0].split("/")[0] for s in SUMMARIES])
def test_a_truncated_json_file_leaves_out_what_it_belongs_to_with_a_line_naming_it(root, tmp_path, capsys, where, what):
    # it was a JSONDecodeError naming no file, exit 1
    cut_short(root / where)
    html = report(root, tmp_path, capsys)
    banner = re.search(r'<div class="banner warn" id="unreadable">(.*?)</div>', html, re.S)
    assert banner is not None and f"{what} ({where}: not valid JSON (" in banner.group(1), html[:3000]
    data, _ = load_range(str(root), START, END)
    assert [(u.what, u.path) for u in data.unreadable] == [(what, where)]
    if what.startswith("the summary of"):
        assert fx.DAYS[-1] not in data.summaries and fx.DAYS[-1] in data.present  # its metrics are still read


def test_a_readable_root_has_no_unreadable_line(root, tmp_path, capsys):
    html = report(root, tmp_path, capsys)
    assert 'id="unreadable"' not in html and "Left out, unreadable" not in html


# --- HTML ids ----------------------------------------------------------------------------------------------------
SAME_SLUG = ("ranker_v2", "ranker.v2", "ranker-v2")


def test_run_names_that_differ_only_in_underscore_dot_or_dash_get_distinct_ids(tmp_path):
    # slug() made one id of the three: ope-ranker-v2-item three times, and the same for the simulated days
    root = fx.build_root(tmp_path / "out")
    for name in SAME_SLUG:
        for table in ("estimates", "diagnostics", "summary"):
            shutil.copytree(root / "ope" / table / "run=reranker", root / "ope" / table / f"run={name}")
        for table in ("metrics", "rule_checks", "summary"):
            shutil.copytree(root / "simulation" / table / "run=reranker", root / "simulation" / table / f"run={name}")
    data, context = load_range(str(root), START, END)
    html = render_html(data, context, load_config(None).report)
    ids = re.findall(r'\sid="([^"]*)"', html)
    assert [i for i, n in collections.Counter(ids).items() if n > 1] == []
    page = parse(html)
    for name in SAME_SLUG:
        assert f"data-ope-{name}-item" in page.data and f"data-simulation-{name}-{fx.SIMULATED_DAY}" in page.data
        assert page.data[f"data-ope-{name}-item"]["run"] == name
        assert f'<h3 id="ope-{name}">' in html and f'id="table-ope-estimates-{name}"' in html


@pytest.mark.spark
def test_the_spark_reader_leaves_out_a_truncated_file_the_same_way(root, spark):
    """A root on HDFS or S3 is read through Spark: its error names the file too, and the run is left out."""
    from recsys_spark.report.load import load
    from recsys_spark.report.readers import SparkReader

    bad = data_file(root / "ope" / "estimates" / "run=reranker")
    cut_short(bad)
    data = load(SparkReader(spark, str(root)), START, END)
    (lost,) = data.unreadable
    assert (lost.what, lost.path) == ("ope run reranker", "ope/estimates/run=reranker")
    assert bad.name in lost.reason and [r.name for r in data.ope_runs] == []
    assert [s.run for s in data.simulations] == ["reranker"]  # the rest is read
