"""A real browser opens the report: headless Chromium loads the file, logs no console error, draws
something that is not blank, and its DOM holds every chart.  Skipped, with the reason, without Chromium
(``.ci/run`` installs Debian's ``chromium``)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import browser
import numpy as np
import pytest
import report_fixture as fx

from recsys_spark.config import load_config
from recsys_spark.report import write_report

pytestmark = pytest.mark.skipif(
    browser.chromium() is None, reason="Chromium not installed (apt-get install chromium; .ci/run does it)"
)


def check_page(path: Path, expected_charts: int) -> np.ndarray:
    """Load ``path`` in Chromium, assert what every report must satisfy, return the screenshot's pixels."""
    page = browser.load(path, width=1100, height=1400)
    assert page.console_errors == []
    charts = re.findall(
        r'<figure id="chart-[^"]+"[^>]*>\s*<figcaption>[^<]*</figcaption>\s*<svg class="chart"', page.dom
    )
    assert len(charts) == expected_charts, "the rendered DOM lacks charts"
    for figure in re.findall(r'<figure id="chart-.*?</figure>', page.dom, re.DOTALL):
        assert re.search(r"<(polyline|circle|rect|polygon)\b", figure), figure[:80]  # every chart draws marks
    pixels = browser.decode_png(page.png)[..., :3]
    assert pixels.shape[:2] == (700, 550)  # 1100 x 1400 CSS pixels at half scale
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    ink = (pixels.min(axis=2) < 160).mean()  # share of pixels darker than light grey: text, lines, marks
    assert len(colours) > 50 and 0.005 < ink < 0.5, (len(colours), ink)
    return pixels


def test_console_errors_are_seen(tmp_path):
    """The scan can fail: a page with a console error and a script error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><p>x</p><script>console.error("boom"); nope();</script></body></html>')
    page = browser.load(bad, width=300, height=200)
    assert any('"boom"' in line for line in page.console_errors)
    assert any("Uncaught ReferenceError" in line for line in page.console_errors)


def test_blank_pages_are_seen(tmp_path):
    """The screenshot check can fail: an empty page decodes to one colour."""
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    pixels = browser.decode_png(browser.load(blank, width=300, height=200).png)[..., :3]
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) == 1


def test_chromium_renders_the_report(tmp_path):
    root = fx.build_root(tmp_path / "out")
    offline = tmp_path / "auc.csv"
    fx.write_offline_auc(offline)
    path = Path(
        write_report(
            str(root),
            dt.date.fromisoformat(fx.START),
            dt.date.fromisoformat(fx.END),
            load_config(),
            out=str(tmp_path / "report.html"),
            offline_auc=str(offline),
        )
    )
    html = path.read_text(encoding="utf-8")
    expected = len(re.findall(r'<svg class="chart"', html))
    assert expected >= 20
    check_page(path, expected)
