"""The off-policy estimates' section: each complete OPE run led by its recommended estimate (the summary's
``recommended``: the estimator, its interval and its difference to the logged value, with the rule's reason in
words; or none, and why), with the generator's true value beside the estimates when the run knows it
(``truth``), then every estimate against the logging policy's observed value, its diagnostics and notes.  A run's
status other than ``ok`` (``no_propensities``, ``overflow``) is shown as such, amber.  No colour says better or
worse: an estimate is not a measurement."""

from __future__ import annotations

from typing import Any

from recsys_spark import registry
from recsys_spark.report import svg
from recsys_spark.report.data import OpeRun, RunData
from recsys_spark.report.parts import Chart, Section, incomplete_note, name_id, runs_section
from recsys_spark.report.values import as_float, as_int, as_text, confidence_of

#: the levels of the OPE estimates: the logging policy's observed value each is drawn against
OPE_LEVELS = {"item": ("logged", "per logged position"), "list": ("logged_list", "per list")}
#: an estimate's numbers (recsys_spark/ope/)
OPE_NUMBERS = ("value", "se", "ci_low", "ci_high", "delta", "delta_se", "delta_ci_low", "delta_ci_high")


def estimate_rows(run: OpeRun) -> list[dict[str, Any]]:
    """The run's estimates in the order it wrote them, each with its reader's name, level and numbers;
    ``baseline`` marks the logging policy's observed value at its level."""
    rows = []
    for r in run.estimates.to_dict("records"):
        name = str(r["estimator"])
        known = registry.OPE_ESTIMATORS.get(name)
        row: dict[str, Any] = {
            "estimator": name,
            "label": known.reader_name if known else name,
            "level": as_text(r.get("level")) or "item",
            **{c: as_float(r.get(c)) for c in OPE_NUMBERS},
            "ci_method": as_text(r.get("ci_method")),
            "n": as_int(r.get("n")),
            "units": as_int(r.get("units")),
            "clip": as_float(r.get("clip")),
            "switch_tau": as_float(r.get("switch_tau")),
        }
        row["baseline"] = name == OPE_LEVELS.get(row["level"], ("",))[0]
        rows.append(row)
    return rows


def level_charts(run: OpeRun, run_id: str, rows: list[dict[str, Any]]) -> list[Chart]:
    """A dot-and-whisker chart per level with estimates: each estimate with its interval, a dashed line at the
    logging policy's observed value (grey, as its own row)."""
    charts = []
    for level, (baseline, words) in OPE_LEVELS.items():
        at_level = [row for row in rows if row["level"] == level]
        if not at_level:
            continue
        logged = next((row["value"] for row in at_level if row["estimator"] == baseline), None)
        whiskers = [
            svg.Whisker(
                row["label"],
                row["value"],
                row["ci_low"],
                row["ci_high"],
                color=svg.GREY if row["baseline"] else svg.PALETTE[0],
                note=f" ({row['units']} units, {row['n']} users)",
            )
            for row in at_level
        ]
        width = svg.label_width([w.label for w in whiskers], 200)
        chart = Chart(
            f"ope-{run_id}-{level}",
            f"{run.name}: reward {words}",
            svg.dot_whisker(
                whiskers,
                title=f"{run.name}: estimated reward {words}",
                reference=logged,
                reference_label="logged policy" if logged is not None else "",
                width=width + 380,
                label_width=width,
                x_label=f"expected reward {words}",
            ),
            {"run": run.name, "level": level, "rows": at_level},
            wide=True,
        )
        charts.append(chart)
    return charts


def diagnostic_rows(run: OpeRun) -> list[dict[str, Any]]:
    """The run's diagnostics in its order, each with its reader's name and whether it is a rate."""
    diagnostics = []
    for r in run.diagnostics.to_dict("records"):
        name = str(r["diagnostic"])
        known = registry.OPE_DIAGNOSTICS.get(name)
        diagnostics.append(
            {
                "diagnostic": name,
                "label": known.reader_name if known else name,
                "value": as_float(r.get("value")),
                "percent": bool(known and known.percent),
            }
        )
    return diagnostics


#: the recommended estimate's numbers (ope/summary.json ``recommended``)
RECOMMENDED_NUMBERS = ("value", "ci_low", "ci_high", "delta", "delta_ci_low", "delta_ci_high")


def recommended(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The run's recommended estimate: ``{estimator, label, value, ci_low, ci_high, delta, delta_ci_low,
    delta_ci_high, reason}`` (``estimator`` None when none can be recommended, with the reason); None for a run
    written before the rule (no ``recommended`` key)."""
    if "recommended" not in summary:
        return None
    found = summary.get("recommended")
    found = found if isinstance(found, dict) else {}
    name = as_text(found.get("estimator"))
    known = registry.OPE_ESTIMATORS.get(name or "")
    reason = found.get("reason") or summary.get("recommended_reason") or summary.get("reason")
    return {
        "estimator": name,
        "label": known.reader_name if known else name,
        **{c: as_float(found.get(c)) for c in RECOMMENDED_NUMBERS},
        "reason": str(reason) if reason else None,
    }


def truth_values(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The generator's true value(s) of the candidate the run read (``truth``, optional: the demo's truth.json),
    as ``{name, value}``: one unnamed number, or each number of an object by its key."""
    truth = summary.get("truth")
    if isinstance(truth, (int, float)) and not isinstance(truth, bool):
        return [{"name": "true value", "value": as_float(truth)}]
    if not isinstance(truth, dict):
        return []
    return [
        {"name": TRUTH_NAMES.get(str(k), str(k).replace("_", " ")), "value": as_float(v)}
        for k, v in truth.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]


#: the reader's names of the generator's truth.json keys (recsys_spark/synthetic/candidate.py)
TRUTH_NAMES = {
    "value": "true value of the candidate",
    "logged": "true value of the logging policy",
    "delta": "true difference (candidate − logging policy)",
    "value_per_list": "true value of the candidate, per list",
    "logged_per_list": "true value of the logging policy, per list",
}


def run_block(run: OpeRun) -> dict[str, Any]:
    """One run's part of the page: its window and target, charts, estimates, diagnostics and notes."""
    run_id = name_id(run.name)
    rows = estimate_rows(run)
    summary = run.summary
    return {
        "run": run.name,
        "id": run_id,
        "start": summary.get("start"),
        "end": summary.get("end"),
        "target": summary.get("target"),
        "parameters": summary.get("parameters", {}),
        "charts": level_charts(run, run_id, rows),
        "rows": rows,
        "diagnostics": diagnostic_rows(run),
        "notes": [str(n) for n in summary.get("notes", [])],
        "confidence": confidence_of(summary, "parameters", "confidence"),
        "status": as_text(summary.get("status")),
        "recommended": recommended(summary),
        "truth": truth_values(summary),
    }


def ope_section(data: RunData) -> Section | None:
    """Each complete OPE run (``recsys-spark ope``): its estimates with their intervals against the logging
    policy's observed value at the same level (a dot-whisker chart per level, the difference with its own
    interval in the table), then its diagnostics and notes.  No colour says better or worse: an estimate
    is not a measurement, and the diagnostics say how far to trust it."""
    skipped = [s for s in data.ope_skipped if s.startswith("ope run ")]
    section = runs_section(data, "ope", "Off-policy estimates", data.ope_runs, skipped, "ope run ")
    if section is None:
        return None
    blocks = [run_block(run) for run in data.ope_runs]
    section.charts = [chart for block in blocks for chart in block["charts"]]
    section.body = {"runs": blocks}
    section.notes += incomplete_note(skipped, "ope/summary/run=NAME/_SUCCESS")
    return section
