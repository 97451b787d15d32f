"""A real browser opens the report: headless Chromium loads the file, logs no console error, draws
something that is not blank, and its DOM holds every chart; at 800 px wide nothing is cut off (wide tables
scroll inside their section) and every mark coloured as a significant gain or loss stands beside an adjusted
p below the threshold.  Skipped, with the reason, without Chromium (``.ci/run`` installs Debian's
``chromium``)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import browser
from helpers import report_fixture as fx
from helpers.browser import check_page
from helpers.report_page import EVERY_SECTION, parse

from recsys_spark import registry
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


#: the colours the browser computes for the marks and cells of each verdict (CSS --ok and --bad, the grey)
GREEN, RED, GREY = "rgb(26, 127, 55)", "rgb(207, 34, 46)", "rgb(136, 136, 136)"


def expected_colour(row: dict, alpha: float) -> str:
    """The colour rule, written again from the row's numbers: green or red only when the adjusted p is below
    alpha (and a sequential interval excludes 0), by the metric's better side."""
    p = row["p_adjusted"]
    significant = p is not None and p < alpha
    if str(row.get("ci_method") or "").startswith("sequential"):
        significant = significant and (row["rel_ci_low"] > 0 or row["rel_ci_high"] < 0)
    if not significant:
        return GREY
    better = registry.metric(row["metric"]).higher_is_better
    return GREEN if (row["rel_delta"] > 0) == better else RED


@pytest.fixture(scope="module")
def full_report(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("full")
    root = fx.build_root(tmp / "out")  # days, experiments, windows, offline runs and their comparison
    return Path(
        write_report(
            str(root),
            dt.date.fromisoformat(fx.START),
            dt.date.fromisoformat(fx.END),
            load_config(),
            out=str(tmp / "report.html"),
        )
    )


def test_every_section_at_800_px_wide(full_report):
    html = full_report.read_text(encoding="utf-8")
    check_page(full_report, len(re.findall(r'<svg class="chart"', html)))  # no console error, charts, not blank
    found = browser.measure(full_report, width=800)
    assert found.console_errors == []
    got = found.data
    assert set(EVERY_SECTION) <= set(got["sections"])
    assert {"windows", "offline-runs", "offline-comparison"} <= set(got["sections"])
    assert got["width"] == 800
    # nothing widens the page: a table wider than the window scrolls inside its own box, which fits
    assert got["scroll_width"] <= got["width"], got["scroll_width"]
    wide = [t for t in got["tables"] if t["right"] > got["width"]]
    assert any(t["section"] == "experiments" for t in wide)  # the case: the experiments' table is wider than 800 px
    for t in wide:
        assert t["overflow"] == "auto" and t["box_right"] <= got["width"], t
    # no chart's text runs out of the window (a long metric name in a forest plot)
    assert 0 <= got["text_left"] and got["text_right"] <= got["width"], (got["text_left"], got["text_right"])


def test_green_and_red_only_where_the_adjusted_p_is_below_the_threshold(full_report):
    page = parse(full_report.read_text(encoding="utf-8"))
    got = browser.measure(full_report, width=1100).data
    forests = {k[len("data-") :]: v for k, v in page.data.items() if k.startswith(("data-forest-", "data-window-"))}
    assert len(forests) == 5  # three experiments of the day, two windows
    coloured = 0
    for chart, data in forests.items():
        fills = [m["fill"] for m in got["marks"] if m["figure"] == f"chart-{chart}"]
        expected = [expected_colour(r, data["alpha"]) for r in data["rows"]]
        assert fills == expected, chart
        assert sum(f in (GREEN, RED) for f in fills) == sum(
            r["p_adjusted"] < data["alpha"] and not str(r["ci_method"] or "").startswith("sequential")
            for r in data["rows"]
        )
        coloured += sum(f in (GREEN, RED) for f in fills)
    assert coloured == 5  # and the A/A rows (an unadjusted interval above 0, a sequential one over 0) are grey
    # the tables' words and colours: a coloured cell only on a significant row, by the same rule
    for cell in got["cells"]:
        colour = {"gain": GREEN, "loss": RED}.get(cell["verdict"])
        if colour is not None:
            assert cell["color"] == colour, cell
        else:
            assert cell["color"] not in (GREEN, RED), cell
    comparison = page.data["data-comparison-base-candidate"]
    significant = sum(
        r["p_adjusted"] < comparison["alpha"] and r["verdict"] in ("gain", "loss") for r in comparison["rows"]
    )
    shown = [c for c in got["cells"] if c["section"] == "offline-comparison" and c["color"] in (GREEN, RED)]
    assert len(shown) == 2 * significant == 6
