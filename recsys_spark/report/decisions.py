"""The report's decision pages: each experiment's ship decision with its reasons and the bands of the metrics it
read over the days, and the gates' verdicts (docs/report.md, "Decisions and gates").

Two sections, added after the experiments section by :func:`with_decisions`: ``decisions`` (from the daily
``experiment_decisions`` and ``experiments`` tables and the summary's ``decision_metrics``) and ``gates``
(every ``gate/NAME/verdict.json`` under the output root, :func:`read_verdicts`).
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from recsys_spark import registry
from recsys_spark.report import svg
from recsys_spark.report.build import Chart, Section, _day_labels, _num, _tick_every, metric_label, slug
from recsys_spark.report.data import Reader, RunData, Unreadable, UnreadableFile, parse_json
from recsys_spark.schema import ALL
from recsys_spark.tables import GATE


def _names(reader: Reader, path: str) -> list[str]:
    """The entries of a directory under the reader's root (none when it does not exist)."""
    root = str(getattr(reader, "root", "")).rstrip("/")
    spark = getattr(reader, "spark", None)
    if spark is not None:
        from recsys_spark.runtime import fs

        full = f"{root}/{path}"
        return sorted(fs.children(spark, full)) if fs.exists(spark, full) else []
    full = os.path.join(root, path)
    return sorted(os.listdir(full)) if os.path.isdir(full) else []


def read_verdicts(reader: Reader, unreadable: list[Unreadable] | None = None) -> list[dict[str, Any]]:
    """Every gate's verdict under the output root, by name (a name whose verdict is being replaced is skipped;
    one that is not valid JSON is left out and added to ``unreadable``)."""
    out = []
    (table,) = GATE.tables
    for name in _names(reader, table):
        try:
            verdict = parse_json(reader, f"{table}/{name}/{GATE.summary_file}")
        except UnreadableFile as exc:
            if unreadable is not None:
                unreadable.append(Unreadable(f"gate verdict {name}", exc.path, exc.reason))
            continue
        if verdict is not None:
            out.append(verdict)
    return out


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
    ys = [_num(by_day[d][point]) if d in by_day else None for d in days]
    band: list[tuple[float, float] | None] = []
    for d in days:
        lo, hi = (_num(by_day[d][low]), _num(by_day[d][high])) if d in by_day else (None, None)
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
        x_labels=_day_labels(days),
        tick_every=_tick_every(len(days)),
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


def gates_section(verdicts: list[dict[str, Any]]) -> Section | None:
    """One block per gate verdict: passed or failed, its one line, and every check with value, bound, threshold
    and why."""
    if not verdicts:
        return None
    section = Section("gates", "Gate verdicts")
    section.body = {"verdicts": sorted(verdicts, key=lambda v: str(v.get("name")))}
    return section


def with_decisions(sections: list[Section], data: RunData) -> list[Section]:
    """``sections`` with the decisions after the experiments (or before the offline section) and the gates after
    them, when there is something to show."""
    extra = [s for s in (decisions_section(data), gates_section(getattr(data, "verdicts", []))) if s is not None]
    ids = [s.id for s in sections]
    if "experiments" in ids:
        at = ids.index("experiments") + 1
    else:
        at = ids.index("offline") if "offline" in ids else len(ids)
    return sections[:at] + extra + sections[at:]
