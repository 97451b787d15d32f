"""The gates' section: every gate's verdict under the output root (``gate/NAME/verdict.json``,
:func:`recsys_spark.report.load.read_verdicts`), passed or failed with its one line and every check."""

from __future__ import annotations

from typing import Any

from recsys_spark.report.parts import Section


def gates_section(verdicts: list[dict[str, Any]]) -> Section | None:
    """One block per gate verdict: passed or failed, its one line, and every check with value, bound, threshold
    and why."""
    if not verdicts:
        return None
    section = Section("gates", "Gate verdicts")
    section.body = {"verdicts": sorted(verdicts, key=lambda v: str(v.get("name")))}
    return section
