"""The report's page read back: every element's attributes, every embedded JSON block, the section ids,
a chart's figure, the text a reader sees."""

from __future__ import annotations

import html as html_lib
import json
import re
from html.parser import HTMLParser

#: the sections of a report of daily runs with experiments
SECTIONS = ("headline", "trends", "curves", "lorenz", "roc", "slices", "quality", "experiments", "offline")
#: and those of a root with experiment windows, offline runs and their comparison, an OPE run and a simulated day too
EVERY_SECTION = (*SECTIONS, "windows", "offline-runs", "offline-comparison", "offline-curves", "ope", "simulation")


class Page(HTMLParser):
    """Every element's attributes, every JSON data block by id, and the section ids."""

    def __init__(self) -> None:
        super().__init__()
        self.attrs: list[tuple[str, dict[str, str | None]]] = []
        self.data: dict[str, object] = {}
        self._script: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.attrs.append((tag, attributes))
        if tag == "script":
            assert attributes.get("type") == "application/json", f"a script that is not data: {attributes}"
            self._script, self._text = attributes["id"], []

    def handle_data(self, data):
        if self._script is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.data[self._script] = json.loads("".join(self._text))
            self._script = None

    def ids(self, tag: str) -> list[str]:
        return [a["id"] for t, a in self.attrs if t == tag and a.get("id")]


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


def figure(html: str, chart: str) -> str:
    """The ``<figure id="chart-CHART">`` element's text."""
    found = re.search(rf'<figure id="chart-{re.escape(chart)}".*?</figure>', html, re.DOTALL)
    assert found is not None, chart
    return found.group(0)


def visible_text(html: str) -> str:
    """What a reader sees: no style, no data blocks, no code (config keys and column names), no tags."""
    text = re.sub(r"<(style|script|code)\b.*?</\1>", " ", html, flags=re.DOTALL)
    return html_lib.unescape(re.sub(r"<[^>]+>", " ", text))
