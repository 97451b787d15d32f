"""The report shows a day's composite and survey metrics beside the headline metrics (issue 43, items 3 and 9): rows
of the headline table with their intervals, read from the metrics table; and a headless browser draws them."""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import browser
from helpers import report_fixture as fx

from recsys_spark.config import load_config
from recsys_spark.report import write_report
from recsys_spark.report.metric_rows import Metrics
from recsys_spark.report.sections.daily import configured_rows

COMPOSITE = 'metrics.composite=[{name = "overall", components = [{metric = "ndcg@10_user_avg", weight = 1}]}]'
EXTRA = [
    # metric, value, se, n: a configured composite, one the report's config does not name, a survey question
    ("overall", 0.42, 0.01, 300),
    ("engagement_mix", 1.7, 0.05, 280),
    ("survey_satisfaction", 4.1, 0.08, 60),
]


def _root_with_extra_rows(tmp_path: Path) -> Path:
    root = fx.build_root(tmp_path / "out", experiments=False, offline=False, ope=False)
    rows = pd.DataFrame(
        {
            "metric": [m for m, *_ in EXTRA],
            "k": [None] * len(EXTRA),
            "aggregation": ["user_avg"] * len(EXTRA),
            "slice": ["all"] * len(EXTRA),
            "value": [v for _, v, _, _ in EXTRA],
            "n": [n for *_, n in EXTRA],
            "se": [se for _, _, se, _ in EXTRA],
        }
    )
    rows["ci_low"], rows["ci_high"], rows["ci_method"] = rows["value"] - 0.1, rows["value"] + 0.1, "t"
    schema = pa.schema(list(fx.METRICS_SCHEMA) + [pa.field(*f) for f in fx.CI_FIELDS])
    pq.write_table(
        pa.Table.from_pandas(rows, schema=schema, preserve_index=False),
        root / "metrics" / f"dt={fx.END}" / "part-00002.parquet",
    )
    return root


def test_the_day_s_composites_then_its_survey_questions_take_headline_rows():
    load_config(None, [COMPOSITE])  # registers "overall"
    frame = pd.DataFrame(
        [
            {"dt": "d", "slice": "all", "metric": m, "k": None, "aggregation": "user_avg", "value": 1.0}
            for m in ("survey_b", "overall", "auc", "survey_a", "engagement_mix")
        ]
        + [{"dt": "d", "slice": "platform=ios", "metric": "survey_c", "k": None, "aggregation": "user_avg"}]
    )
    assert configured_rows(Metrics(frame), "d") == [
        ("engagement_mix", None, "user_avg"),
        ("overall", None, "user_avg"),
        ("survey_a", None, "user_avg"),
        ("survey_b", None, "user_avg"),
    ]


def _report(tmp_path: Path) -> Path:
    root = _root_with_extra_rows(tmp_path)
    start, end = dt.date.fromisoformat(fx.START), dt.date.fromisoformat(fx.END)
    cfg = load_config(None, [COMPOSITE])
    return Path(write_report(str(root), start, end, cfg, out=str(tmp_path / "report.html")))


def test_the_report_lists_them_with_their_values(tmp_path):
    page = html.unescape(_report(tmp_path).read_text(encoding="utf-8"))
    for label in ("overall (composite), user avg", "engagement mix (user avg)", "survey: satisfaction (user avg)"):
        assert label in page, label


@pytest.mark.skipif(browser.chromium() is None, reason="Chromium not installed (apt-get install chromium)")
def test_a_browser_draws_them_in_the_headline(tmp_path):
    page = browser.load(_report(tmp_path))
    assert not page.console_errors
    dom = html.unescape(page.dom)
    headline = dom[dom.index('id="headline"') :]
    headline = headline[: headline.index("</section>")]
    for label in ("overall (composite)", "engagement mix", "survey: satisfaction"):
        assert label in headline, label
