"""A real browser opens the report: headless Chromium loads the file, logs no console error, draws
something that is not blank, and its DOM holds every chart; at 800 px wide nothing is cut off (wide tables
scroll inside their section) and every mark coloured as a significant gain or loss stands beside an adjusted
p below the threshold.  Skipped, with the reason, without Chromium (``.ci/run`` installs Debian's
``chromium``)."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
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


#: the banners' and cells' colours the browser computes per state (CSS --ok, --bad, --warn; the banners'
#: backgrounds; the invalid banner's grey with a red border)
OK, BAD, WARN = GREEN, RED, "rgb(154, 103, 0)"
BACKGROUNDS = {
    "ship": "rgb(218, 251, 225)",
    "do_not_ship": "rgb(255, 235, 233)",
    "not_enough_evidence": "rgb(255, 248, 197)",
    "invalid": "rgb(234, 238, 242)",
    "passed": "rgb(218, 251, 225)",
    "failed": "rgb(255, 235, 233)",
    "inconclusive": "rgb(255, 248, 197)",
}


def test_every_state_is_shown_once_in_its_words_and_colour(tmp_path):
    """ISSUE 42: ship, do not ship, not enough evidence yet (an old keep_running) and invalid; a gate passed,
    failed and inconclusive: each shown once, in a screenshot of the decisions and the gates, in its colour;
    not enough evidence and inconclusive amber, never red.  The screenshot is kept as decisions-and-gates.png
    beside the report (``REPORT_SCREENSHOTS=DIR`` copies it there to look at)."""
    root = fx.build_root(tmp_path / "out", offline=False, ope=False)
    fx.write_states(root)
    report = Path(
        write_report(
            str(root),
            dt.date.fromisoformat(fx.START),
            dt.date.fromisoformat(fx.END),
            load_config(),
            out=str(tmp_path / "report.html"),
        )
    )
    page = browser.only_sections(report, ("decisions", "gates"), tmp_path / "states.html")
    shot = browser.load(page, width=1100, height=2000, scale=1.0)
    assert shot.console_errors == []
    (tmp_path / "decisions-and-gates.png").write_bytes(shot.png)
    if os.environ.get("REPORT_SCREENSHOTS"):
        shutil.copy(tmp_path / "decisions-and-gates.png", Path(os.environ["REPORT_SCREENSHOTS"]))
    pixels = browser.decode_png(shot.png)[..., :3].reshape(-1, 3)
    colours = {f"rgb({r}, {g}, {b})" for r, g, b in np.unique(pixels, axis=0)}
    for state, background in BACKGROUNDS.items():
        assert background in colours, state  # every banner's colour is on the screenshot
    got = browser.measure(page, width=1100).data["states"]
    banners = [s for s in got if s["kind"] == "div"]
    assert sorted(s["state"] for s in banners) == sorted(BACKGROUNDS)  # each state once
    for s in banners:
        assert s["background"] == BACKGROUNDS[s["state"]], s
        if s["state"] in ("not_enough_evidence", "inconclusive"):
            assert s["color"] == WARN and RED not in (s["color"], s["border"]), s
        if s["state"] == "invalid":
            assert s["border"] == RED and s["color"] != RED, s
    cells = {s["state"]: s["color"] for s in got if s["kind"] == "td"}
    assert cells == {"passed": OK, "failed": BAD, "inconclusive": WARN}
    words = visible_words(page)
    for text in ("SHIP:", "DO NOT SHIP:", "NOT ENOUGH EVIDENCE YET:", "INVALID EXPERIMENT:", "PASSED", "FAILED"):
        assert text in words, text
    assert "KEEP RUNNING" not in words


def visible_words(page: Path) -> str:
    return re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))
