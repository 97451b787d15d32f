"""The experiments' decisions section: each experiment's ship decision with its reasons and the bands of the
metrics it read over the days (docs/report.md, "Decisions"), from the daily ``experiment_decisions``, the
windows' ``experiment_window_decisions``, the ``experiment_cumulative`` (else ``experiments``) tables and the
summary's ``decision_metrics``.

The banner (:func:`banner_decision`): the decision of a window that ends on the report's last day when there is
one (the longest such window), else the last day's decision (on the cumulative sample since the experiment's
first day when its ``basis`` says so), in the three states' words and colours
(:func:`recsys_spark.report.colour_rule.decision_state`: not enough evidence yet is amber, never red).  The
bands: the cumulative lift per day with its always-valid interval when ``experiment_cumulative`` is there
(as GrowthBook draws it), else each day's own lift (outputs of earlier releases)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from recsys_spark import registry
from recsys_spark.report import svg
from recsys_spark.report.colour_rule import decision_state
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


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _window_of(data: RunData, experiment: str, variant: Any, last: str | None) -> dict[str, Any] | None:
    """The decision of ``experiment``'s variant in a window ending on ``last`` (the longest such window; the
    window's one row without a variant when the variant was not compared), else None."""
    frame = data.window_decisions
    if last is None or frame.empty:
        return None
    mine = frame[(frame["experiment"] == experiment) & (frame["window_end"] == last)]
    if mine.empty:
        return None
    start = min(mine["window_start"])
    rows = mine[mine["window_start"] == start].to_dict("records")
    found = [r for r in rows if r.get("variant") == variant] or [r for r in rows if _text(r.get("variant")) is None]
    return found[0] if found else None


def _cumulative_span(cumulative: pd.DataFrame, day: str, experiment: str) -> tuple[str | None, int | None]:
    """The experiment's first day and days of the cumulative sample of ``day`` (None when not written)."""
    if cumulative.empty or "first_day" not in cumulative.columns:
        return None, None
    mine = cumulative[(cumulative["dt"] == day) & (cumulative["experiment"] == experiment)]
    if mine.empty:
        return None, None
    row = mine.iloc[0]
    days = row.get("days")
    return _text(row.get("first_day")), (int(days) if days is not None and not pd.isna(days) else None)


def banner_decision(
    data: RunData, row: dict[str, Any], day: str, cumulative: pd.DataFrame
) -> tuple[dict[str, Any], str, str]:
    """What an experiment's banner says: the row it shows (a window's decision ending on the report's last day,
    else the day's), the sample it was decided on in words, and its basis (``window``, ``cumulative``,
    ``day``, or ``day`` for a decision written before the basis column)."""
    name, variant = row["experiment"], row.get("variant")
    window = _window_of(data, name, variant, data.last_day)
    if window is not None:
        start, end = window["window_start"], window["window_end"]
        return window, f"the window {start}..{end} (each user once)", "window"
    basis = _text(row.get("basis"))
    if basis == "cumulative":
        first, days = _cumulative_span(cumulative, day, name)
        since = f" since {first}" if first else " since the experiment's first day"
        count = f" ({days} days)" if days else ""
        return row, f"every user{since}{count}, to {day}", "cumulative"
    return row, f"the users of {day} alone", "day"


def _band_rows(results: pd.DataFrame, name: str, variant: Any) -> pd.DataFrame:
    if results.empty or variant is None:
        return pd.DataFrame()
    return results[(results["experiment"] == name) & (results["variant"] == variant)]


def decisions_section(data: RunData) -> Section | None:
    """Per experiment and variant (the last day with decisions): the banner's decision (:func:`banner_decision`)
    with its reasons, and a band per goal and guardrail over the range's days (the cumulative lift when
    written)."""
    day, decisions = _latest(data.tables.get("experiment_decisions", pd.DataFrame()))
    if day is None:
        return None
    cumulative = data.tables.get("experiment_cumulative", pd.DataFrame())
    if not cumulative.empty and "slice" in cumulative.columns:
        cumulative = cumulative[cumulative["slice"] == ALL]
    results = data.tables.get("experiments", pd.DataFrame())
    if not results.empty and "slice" in results.columns:
        results = results[results["slice"] == ALL]
    section = Section("decisions", "Decisions")
    section.body = {"day": day, "decisions": []}
    for d in decisions.to_dict("records"):
        name, variant = d["experiment"], d.get("variant")
        shown, sample, basis = banner_decision(data, d, day, cumulative)
        roles = _roles(data, day, name)
        charts = []
        rows = _band_rows(cumulative, name, variant)
        accumulated = not rows.empty
        if not accumulated:
            rows = _band_rows(results, name, variant)
        if not rows.empty:
            wanted: list[tuple[str, bool, float | None, str]] = [
                (key, True, None, f"goal {metric_label(*registry.parse_key(key))}") for key in roles["goals"]
            ]
            for g in roles["guardrails"]:
                relative = g.get("relative_margin") is not None
                allowed = g["relative_margin"] if relative else g["absolute_margin"]
                metric = registry.parse_key(g["metric"])
                sign = -1.0 if registry.higher_is_better(metric[0]) else 1.0
                wanted.append((g["metric"], relative, sign * allowed, f"guardrail {metric_label(*metric)}"))
            for key, relative, margin, label in wanted:
                what = f"{label}, cumulative" if accumulated else label
                chart = _band(data, rows, key, relative, margin, f"{name} {variant}: {what}")
                if chart is not None:
                    chart.data["cumulative"] = accumulated
                    charts.append(chart)
                    section.charts.append(chart)
        reasons = shown.get("reasons")
        section.body["decisions"].append(
            {
                "experiment": name,
                "variant": variant,
                "decision": decision_state(shown.get("decision"))["code"],
                "state": decision_state(shown.get("decision")),
                "basis": basis,
                "sample": sample,
                "day_decision": decision_state(d.get("decision")),
                "reasons": list(reasons if reasons is not None else []),
                "ci_method": shown.get("ci_method"),
                "control_n": shown.get("control_n"),
                "variant_n": shown.get("variant_n"),
                "charts": charts,
                "cumulative": accumulated,
            }
        )
    return section
