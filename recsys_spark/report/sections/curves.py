"""The ROC and precision-recall curves (tables ``roc_curve``, ``pr_curve``; docs/metrics.md, "Curves").

* :func:`roc_section`: the last day's ROC of slice ``all`` with the earlier days of the week before it overlaid
  (thin, lighter), and the last day's PR curve;
* :func:`offline_curves_section`: for each offline comparison whose two runs both wrote curves, the base's and
  the candidate's ROC and PR curves on one chart each.

Each chart embeds its points (and the AUC of each day from the metrics table) as JSON beside it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import pandas as pd

from recsys_spark.report.data import OfflineRun, RunData
from recsys_spark.report.metric_rows import Metrics
from recsys_spark.report.parts import Chart, Section, name_id
from recsys_spark.report.svg import GREY, PALETTE, Plot, Series, _f, _legend
from recsys_spark.schema import ALL

#: the days before the last one drawn under it: the week before
WEEK = 7
_TICKS = [0.0, 0.25, 0.5, 0.75, 1.0]


@dataclass(frozen=True)
class Line:
    """One curve to draw: its legend name, points, colour and stroke width."""

    name: str
    x: list[float]
    y: list[float]
    color: str
    width: float = 2.2
    opacity: float = 1.0


def curve_chart(lines: Sequence[Line], *, title: str, x_label: str, y_label: str, diagonal: bool) -> str:
    """Curves on the unit square (``diagonal``: the chance line of a ROC), a legend of the named ones."""
    plot = Plot(380, 330, (0.0, 1.0), (0.0, 1.0), left=48, right=12, top=30, bottom=34)
    plot.y_axis(_TICKS, y_label)
    plot.x_axis(_TICKS, [f"{t:g}" for t in _TICKS], x_label)
    if diagonal:
        plot.add(
            f'<line class="diagonal" x1="{_f(plot.x(0))}" y1="{_f(plot.y(0))}" x2="{_f(plot.x(1))}" '
            f'y2="{_f(plot.y(1))}" stroke="{GREY}" stroke-dasharray="4 3"/>'
        )
    for line in lines:
        points = " ".join(f"{_f(plot.x(a))},{_f(plot.y(b))}" for a, b in zip(line.x, line.y, strict=True))
        plot.add(
            f'<polyline class="line" points="{points}" fill="none" stroke="{line.color}" '
            f'stroke-width="{line.width}" stroke-opacity="{line.opacity}"><title>{escape(line.name)}</title></polyline>'
        )
    _legend(plot, [Series(line.name, [], color=line.color) for line in lines if line.name])
    return plot.svg(title)


def _points(frame: pd.DataFrame, x: str, y: str) -> tuple[list[float], list[float]]:
    """The curve's points in written (curve) order."""
    return frame[x].astype(float).tolist(), frame[y].astype(float).tolist()


def _of(frame: pd.DataFrame, **where: str) -> pd.DataFrame:
    if frame.empty:
        return frame
    mask = pd.Series(True, index=frame.index)
    for column, value in where.items():
        mask &= frame[column].astype(str) == value
    return frame[mask]


def roc_section(data: RunData, m: Metrics) -> Section:
    """The last day's ROC (slice all) over the earlier days of its week, and its PR curve."""
    section = Section("roc", "ROC and precision-recall")
    day = data.last_day
    roc = data.tables.get("roc_curve", pd.DataFrame())
    pr = data.tables.get("pr_curve", pd.DataFrame())
    today = _of(roc, dt=day, slice=ALL) if day is not None else roc.iloc[0:0]
    if day is None or today.empty:
        section.notes.append("No ROC curve for the last day (no score column, metrics.curve_points = 0, or one class).")
        return section
    first = (dt.date.fromisoformat(day) - dt.timedelta(days=WEEK)).isoformat()
    earlier = sorted({str(d) for d in roc["dt"] if first <= str(d) < day})
    lines, payload = [], []
    for i, d in enumerate(earlier):
        x, y = _points(_of(roc, dt=d, slice=ALL), "fpr", "tpr")
        if x:
            name = "earlier days" if i == len(earlier) - 1 else ""
            lines.append(Line(name, x, y, PALETTE[5], width=1.2, opacity=0.55))
            payload.append({"dt": d, "fpr": x, "tpr": y, "auc": m.value(d, ALL, "auc", None, "global")})
    x, y = _points(today, "fpr", "tpr")
    lines.append(Line(day, x, y, PALETTE[0], width=2.4))
    payload.append({"dt": day, "fpr": x, "tpr": y, "auc": m.value(day, ALL, "auc", None, "global")})
    title = f"ROC, slice all, {day}" + (f" and the {len(earlier)} days before" if earlier else "")
    svg = curve_chart(lines, title=title, x_label="false positive rate", y_label="true positive rate", diagonal=True)
    section.charts.append(Chart("roc", title, svg, {"slice": ALL, "days": payload}))
    pr_today = _of(pr, dt=day, slice=ALL)
    if not pr_today.empty:
        x, y = _points(pr_today, "recall", "precision")
        title = f"Precision-recall, slice all, {day}"
        svg = curve_chart(
            [Line(day, x, y, PALETTE[0])], title=title, x_label="recall", y_label="precision", diagonal=False
        )
        section.charts.append(Chart("pr", title, svg, {"dt": day, "slice": ALL, "recall": x, "precision": y}))
    return section


def _run(data: RunData, name: str) -> OfflineRun | None:
    return next((r for r in data.offline_runs if r.name == name), None)


def offline_curves_section(data: RunData) -> Section | None:
    """Base against candidate: their ROC and PR curves (slice all), one pair of charts per comparison whose two
    runs wrote curves; None when there is none."""
    section = Section("offline-curves", "Offline ROC and precision-recall")
    for comp in data.comparisons:
        base, candidate = _run(data, comp.base), _run(data, comp.candidate)
        if base is None or candidate is None or base.roc.empty or candidate.roc.empty:
            continue
        ids = f"{name_id(comp.base)}-{name_id(comp.candidate)}"
        for table, x_col, y_col, what in (("roc", "fpr", "tpr", "ROC"), ("pr", "recall", "precision", "PR")):
            lines, payload = [], {}
            for run, color in ((base, GREY), (candidate, PALETTE[0])):
                x, y = _points(_of(getattr(run, table), slice=ALL), x_col, y_col)
                lines.append(Line(f"{run.name}", x, y, color))
                payload[run.name] = {x_col: x, y_col: y}
            title = f"{what}: {comp.candidate} against {comp.base}"
            svg = curve_chart(
                lines,
                title=title,
                x_label="false positive rate" if table == "roc" else "recall",
                y_label="true positive rate" if table == "roc" else "precision",
                diagonal=table == "roc",
            )
            data_: dict[str, Any] = {"base": comp.base, "candidate": comp.candidate, "curves": payload}
            section.charts.append(Chart(f"offline-{table}-{ids}", title, svg, data_))
    return section if section.charts else None
