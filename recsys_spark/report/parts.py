"""The pieces of the page: a :class:`Section` (an id, a title, its charts, the numbers the template shows, its
notes) and a :class:`Chart` (its SVG and the plain data it was drawn from, embedded next to it as JSON), and
the ids and notes every section spells the same way."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recsys_spark.report.data import RunData


@dataclass
class Chart:
    """One figure: ``id`` (``chart-ID`` and ``data-ID`` on the page), its SVG (empty for a table-only block) and
    the plain ``data`` it was drawn from, embedded beside it as JSON."""

    id: str
    title: str
    svg: str
    data: Any
    caption: str = ""
    wide: bool = False


@dataclass
class Section:
    """One section of the page: ``id`` (the template's key), its charts, the numbers the template shows
    (``body``) and its notes."""

    id: str
    title: str
    charts: list[Chart] = field(default_factory=list)
    body: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def slug(text: str) -> str:
    """An HTML id from any text: lower case, runs of other characters as one dash.

    >>> slug("ndcg@10 user_avg / platform")
    'ndcg-10-user-avg-platform'
    """
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


#: a name that is an HTML id as it is (the spelling of a run's name, config.PATH_NAME, without its length bound)
_ID_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def name_id(name: str) -> str:
    """An HTML id for a run's name, distinct for distinct names: the name itself when it is spelled as a run's
    name is (letters, digits, ``_``, ``.``, ``-``), else its :func:`slug`, ``--`` and 8 hex digits of its
    SHA-1 (a name never holds ``--`` after a slug, so no other name gives that id by chance).  :func:`slug`
    alone gave ``ranker_v2``, ``ranker.v2`` and ``ranker-v2`` one id.

    >>> name_id("ranker_v2"), name_id("ranker.v2"), name_id("Ranker v2")
    ('ranker_v2', 'ranker.v2', 'ranker-v2--db9a8a72')
    """
    if _ID_NAME.fullmatch(name):
        return name
    return f"{slug(name)}--{hashlib.sha1(name.encode('utf-8')).hexdigest()[:8]}"


def unreadable_note(data: RunData, prefix: str) -> list[str]:
    """The section's note naming what it left out because a file cannot be read (none when nothing was)."""
    lost = data.unreadable_of(prefix)
    return [f"Left out, unreadable: {'; '.join(u.line for u in lost)}."] if lost else []


def runs_section(
    data: RunData, section_id: str, title: str, found: Sequence[object], skipped: list[str], lost_prefix: str
) -> Section | None:
    """The section of a family of runs (offline runs, comparisons, OPE runs, simulated days): None when it has
    nothing to show (no run ``found``, none left out as incomplete, ``skipped``, nor as unreadable, whose
    ``what`` starts with ``lost_prefix``); else an empty section whose first note names the unreadable ones."""
    lost = unreadable_note(data, lost_prefix)
    if not found and not skipped and not lost:
        return None
    return Section(section_id, title, notes=lost)


def incomplete_note(skipped: list[str], marker: str) -> list[str]:
    """The section's note naming what it left out because its ``marker`` (``ope/summary/run=NAME/_SUCCESS``) is
    missing (none when nothing was)."""
    return [f"Left out, incomplete (no {marker}): {', '.join(skipped)}."] if skipped else []


def iter_charts(sections: Iterable[Section]) -> Iterable[Chart]:
    """The charts drawn on the page (those with an SVG), in the sections' order."""
    for s in sections:
        yield from (c for c in s.charts if c.svg)
