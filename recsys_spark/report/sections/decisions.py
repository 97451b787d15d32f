"""The experiments' decisions section: each experiment's ship decision with its reasons and the bands of the
metrics it read over the days (docs/report.md, "Decisions and gates"), from the daily ``experiment_decisions``
and ``experiments`` tables and the summary's ``decision_metrics``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from recsys_spark import registry
from recsys_spark.report import svg
from recsys_spark.report.data import RunData
from recsys_spark.report.parts import Chart, Section, slug
from recsys_spark.report.values import as_float, day_labels, metric_label, tick_every
from recsys_spark.schema import ALL


def _latest(frame: pd.DataFrame) -> tuple[str | None, pd.DataFrame]:
    if frame.empty:
        return None, frame
    day = max(frame["dt"])
    return day, frame[frame["dt"] == day]


def _roles(data: RunData, day: str, experiment: str) -> dict[str, Any]:
    section = data.summaries.get(day, {}).get("experiments", {}).get("experiments", {}).get(experiment, {})
    return section.get("decision_metrics") or {"goals": [], "guardrails": [], "secondary": []}


def _band(
    data: RunData, rows: pd.DataFrame, key: str, relative: bool, margin: float | None, title: str
) -> Chart | None:
    """The change of one metric over the days with its interval (the sequence or the fixed one, as written),
    0 and, for a guardrail, its margin as dashed lines."""
    metric, k, aggregation = registry.parse_key(key)
    sel = rows[(rows["metric"] == metric) & (rows["aggregation"] == aggregation)]
    if k is not None and "k" in sel.columns:
        sel = sel[sel["k"] == k]
    by_day = {r["dt"]: r for r in sel.to_dict("records")}
    if not by_day:
        return None
    point, low, high = ("rel_delta", "rel_ci_low", "rel_ci_high") if relative else ("delta", "ci_low", "ci_high")
    days = data.days
    ys = [as_float(by_day[d][point]) if d in by_day else None for d in days]
    band: list[tuple[float, float] | None] = []
    for d in days:
        lo, hi = (as_float(by_day[d][low]), as_float(by_day[d][high])) if d in by_day else (None, None)
        band.append((lo, hi) if lo is not None and hi is not None else None)
    methods = sorted({str(r.get("ci_method") or "fixed") for r in by_day.values()})
    series = [
        svg.Series("relative lift" if relative else "change", ys, band),
        svg.Series("no change", [0.0] * len(days), color=svg.GREY, dashed=True),
    ]
    if margin is not None:
        series.append(svg.Series("margin", [margin] * len(days), color=svg.PALETTE[1], dashed=True))
    chart = svg.line_chart(
        list(range(len(days))),
        series,
        title=f"{title} ({'/'.join(methods)} interval)",
        x_labels=day_labels(days),
        tick_every=tick_every(len(days)),
        percent=relative,
        width=420,
    )
    payload = {"metric": key, "dt": days, point: ys, low: [b[0] if b else None for b in band]}
    payload[high] = [b[1] if b else None for b in band]
    payload["ci_method"] = methods
    return Chart(f"band-{slug(title)}", title, chart, payload)


def decisions_section(data: RunData) -> Section | None:
    """Per experiment and variant (the last day with decisions): the decision, its reasons, and a band per
    goal and guardrail over the range's days."""
    day, decisions = _latest(data.tables.get("experiment_decisions", pd.DataFrame()))
    if day is None:
        return None
    results = data.tables.get("experiments", pd.DataFrame())
    if not results.empty and "slice" in results.columns:
        results = results[results["slice"] == ALL]
    section = Section("decisions", "Decisions")
    section.body = {"day": day, "decisions": []}
    for d in decisions.to_dict("records"):
        name, variant = d["experiment"], d.get("variant")
        roles = _roles(data, day, name)
        charts = []
        rows = (
            results[(results["experiment"] == name) & (results["variant"] == variant)]
            if not results.empty and variant is not None
            else pd.DataFrame()
        )
        if not rows.empty:
            wanted: list[tuple[str, bool, float | None, str]] = [
                (key, True, None, f"goal {metric_label(*registry.parse_key(key))}") for key in roles["goals"]
            ]
            for g in roles["guardrails"]:
                relative = g.get("relative_margin") is not None
                allowed = g["relative_margin"] if relative else g["absolute_margin"]
                metric = registry.parse_key(g["metric"])
                sign = -1.0 if registry.metric(metric[0]).higher_is_better else 1.0
                wanted.append((g["metric"], relative, sign * allowed, f"guardrail {metric_label(*metric)}"))
            for key, relative, margin, label in wanted:
                chart = _band(data, rows, key, relative, margin, f"{name} {variant}: {label}")
                if chart is not None:
                    charts.append(chart)
                    section.charts.append(chart)
        section.body["decisions"].append(
            {
                "experiment": name,
                "variant": variant,
                "decision": d["decision"],
                "reasons": list(d.get("reasons") if d.get("reasons") is not None else []),
                "ci_method": d.get("ci_method"),
                "control_n": d.get("control_n"),
                "variant_n": d.get("variant_n"),
                "charts": charts,
            }
        )
    return section
