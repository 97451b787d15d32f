"""A real browser opens the report: headless Chromium loads the file, logs no console error, draws
something that is not blank, and its DOM holds every chart.  Skipped, with the reason, without Chromium
(``.ci/run`` installs Debian's ``chromium``)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import browser
from helpers import report_fixture as fx
from helpers.browser import check_page

from recsys_spark.config import load_config
from recsys_spark.report import write_report

pytestmark = pytest.mark.skipif(
    browser.chromium() is None, reason="Chromium not installed (apt-get install chromium; .ci/run does it)"
)


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
