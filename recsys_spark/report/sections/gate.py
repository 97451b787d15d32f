"""The gates' section: every gate's verdict under the output root (``gate/NAME/verdict.json``,
:func:`recsys_spark.report.load.read_verdicts`) in its state's words and colour (passed green, not enough
evidence yet amber, failed red: :data:`recsys_spark.report.colour_rule.GATE_STATES`), its one line, and every
check with its own state, its numbers as the gate shows them (``shown``: a relative change as a percentage)
grouped by unit, so that each table's header says the unit."""

from __future__ import annotations

from typing import Any

from recsys_spark.kernels.gate import show
from recsys_spark.report.colour_rule import GATE_STATES, gate_state
from recsys_spark.report.parts import Section

#: the units a check's numbers are in (kernels/gate.py CheckResult.unit): the header's words
UNIT_WORDS = {"percent": "%, relative change", "metric": "metric units"}


def _shown(check: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The check's unit and its numbers as text: the verdict's ``shown`` when written, else (a verdict written
    before the units) spelt the gate's way from its numbers."""
    unit = check.get("unit") or ("percent" if check.get("threshold") == "min_relative_change" else "metric")
    shown = check.get("shown")
    if isinstance(shown, dict):
        return str(unit), shown
    relative, change = unit == "percent", str(check.get("threshold", "")).startswith("min_")

    def spell(v: Any, signed: bool) -> str | None:
        return show(float(v), relative, signed) if isinstance(v, (int, float)) else None

    interval = check.get("interval")
    both = [spell(v, change) for v in interval] if isinstance(interval, list) and len(interval) == 2 else None
    return str(unit), {
        "value": spell(check.get("value"), change),
        "interval": f"[{both[0]}, {both[1]}]" if both and None not in both else None,
        "threshold": spell(check.get("threshold_value"), False),
    }


def verdict_block(verdict: dict[str, Any]) -> dict[str, Any]:
    """One verdict for the page: its state, words and class, and its checks grouped by unit (in order)."""
    state = gate_state(verdict)
    words, css = GATE_STATES[state]
    groups: dict[str, list[dict[str, Any]]] = {}
    for check in verdict.get("checks") or []:
        unit, shown = _shown(check)
        mine = gate_state(check)
        groups.setdefault(unit, []).append(
            {**check, "shown": shown, "state": mine, "state_words": GATE_STATES[mine][0], "class": GATE_STATES[mine][1]}
        )
    return {
        **verdict,
        "state": state,
        "state_words": words,
        "class": css,
        "groups": [{"unit": u, "unit_words": UNIT_WORDS.get(u, u), "checks": cs} for u, cs in groups.items()],
    }


def gates_section(verdicts: list[dict[str, Any]]) -> Section | None:
    """One block per gate verdict: its state (never red when inconclusive), its one line, and every check with
    its state, value, interval and threshold in the unit its table's header says, and why."""
    if not verdicts:
        return None
    section = Section("gates", "Gate verdicts")
    section.body = {"verdicts": [verdict_block(v) for v in sorted(verdicts, key=lambda v: str(v.get("name")))]}
    return section
