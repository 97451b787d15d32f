"""The simulated lists' section: each simulated day beside the logged day of the same date, on the same
requests."""

from __future__ import annotations

import pandas as pd

from recsys_spark import registry
from recsys_spark.report.data import RunData
from recsys_spark.report.parts import Chart, Section, incomplete_note, name_id, runs_section
from recsys_spark.report.values import all_slice, as_float, as_int, is_percent, metric_key, metric_label


def simulation_section(data: RunData) -> Section | None:
    """Each simulated day (``recsys-spark simulate``) beside the logged policy on the same requests: every
    metric the simulation wrote (slice ``all``) with the logged day's value and the difference, and the
    rules of both.  Only what was simulated is compared: a metric that needs feedback
    (:func:`recsys_spark.registry.needs_feedback`) is never a simulated number, so a row of one (the zeros an
    earlier release wrote) is left out, named in a note, and the logged day's feedback metrics are not shown."""
    skipped = [s for s in data.ope_skipped if s.startswith("simulation ")]
    section = runs_section(data, "simulation", "Simulated lists", data.simulations, skipped, "simulation ")
    if section is None:
        return None
    logged_metrics = all_slice(data.tables.get("metrics", pd.DataFrame()))
    logged_rules = data.tables.get("rule_checks", pd.DataFrame())
    blocks = []
    for sim in data.simulations:
        mine = logged_metrics[logged_metrics["dt"] == sim.day] if "dt" in logged_metrics else pd.DataFrame()
        logged = {(r["metric"], as_int(r.get("k")), r["aggregation"]): r for r in mine.to_dict("records")}
        rows = []
        dropped: list[str] = []
        for r in all_slice(sim.metrics).to_dict("records"):
            metric, k, agg = str(r["metric"]), as_int(r.get("k")), str(r["aggregation"])
            if registry.needs_feedback(metric):
                dropped.append(metric_key(metric, k, agg))
                continue
            base = logged.get((metric, k, agg))
            value, before = as_float(r.get("value")), as_float(base.get("value")) if base else None
            rows.append(
                {
                    "key": metric_key(metric, k, agg),
                    "label": metric_label(metric, k, agg),
                    "percent": is_percent(metric),
                    "candidate": value,
                    "ci_low": as_float(r.get("ci_low")),
                    "ci_high": as_float(r.get("ci_high")),
                    "logged": before,
                    "difference": None if value is None or before is None else value - before,
                }
            )
        theirs = logged_rules[logged_rules["dt"] == sim.day] if "dt" in logged_rules else pd.DataFrame()
        their = {str(r["rule"]): bool(r["passed"]) for r in theirs.to_dict("records")}
        rules = [
            {
                "rule": str(r["rule"]),
                "severity": str(r["severity"]),
                "rate": as_float(r.get("rate")),
                "threshold": as_float(r.get("threshold")),
                "passed": bool(r["passed"]),
                "logged_passed": their.get(str(r["rule"])),
            }
            for r in sim.rules.to_dict("records")
        ]
        logged_summary = data.summaries.get(sim.day, {})
        block = {
            "run": sim.run,
            "day": sim.day,
            "status": sim.summary.get("status"),
            "logged_status": logged_summary.get("status"),
            "requests": sim.summary.get("simulation", {}),
            "rows": rows,
            "rules": rules,
            "id": f"simulation-{name_id(sim.run)}-{sim.day}",
        }
        if dropped:
            section.notes.append(
                f"{sim.run} {sim.day}: left out {', '.join(dropped)}: they need feedback, which a simulated day "
                "does not have (an earlier release wrote them as zeros; docs/ope.md)."
            )
        if not logged:
            section.notes.append(f"{sim.run} {sim.day}: the logged day has no metrics in this report's range.")
        section.charts.append(Chart(block["id"], f"{sim.run} on {sim.day}", "", block))
        blocks.append(block)
    section.body = {"simulations": blocks}
    section.notes += incomplete_note(skipped, "simulation/summary/run=NAME/dt=D/_SUCCESS")
    return section
