"""The last day's threshold metrics (``metrics.score_is_probability``): accuracy, precision, recall and F_alpha at
each of ``metrics.thresholds`` per slice, beside the ``confusion`` table's counts (docs/metrics.md, "F-scores and
thresholds").  Left out of the page on a day that wrote none."""

from __future__ import annotations

from typing import Any

import pandas as pd

from recsys_spark import registry
from recsys_spark.report.data import RunData
from recsys_spark.report.parts import Section
from recsys_spark.report.values import as_float, as_int
from recsys_spark.schema import ALL


def _of_day(frame: pd.DataFrame, day: str) -> pd.DataFrame:
    if frame.empty or "dt" not in frame.columns or "threshold" not in frame.columns:
        return frame.iloc[0:0]
    return frame[(frame["dt"] == day) & frame["threshold"].notna()]


def thresholds_section(data: RunData) -> Section | None:
    """A row per (slice, threshold) of the last day, slice ``all`` first: tp, fp, tn, fn and each threshold
    metric with its interval; None when the day wrote no threshold row (the switch off, or no score)."""
    day = data.last_day
    if day is None:
        return None
    rows = _of_day(data.tables.get("metrics", pd.DataFrame()), day)
    counts = _of_day(data.tables.get("confusion", pd.DataFrame()), day)
    if rows.empty and counts.empty:
        return None
    order = {name: i for i, name in enumerate(registry.THRESHOLD_METRICS)}
    names = sorted({str(m) for m in rows["metric"]}, key=lambda n: (order.get(n, len(order)), n))
    table: dict[tuple[str, float], dict[str, Any]] = {}
    for rec in rows.to_dict("records"):
        entry = table.setdefault((str(rec["slice"]), float(rec["threshold"])), {"values": {}})
        entry["values"][str(rec["metric"])] = {
            "value": as_float(rec.get("value")),
            "ci_low": as_float(rec.get("ci_low")),
            "ci_high": as_float(rec.get("ci_high")),
        }
    for rec in counts.to_dict("records"):
        entry = table.setdefault((str(rec["slice"]), float(rec["threshold"])), {"values": {}})
        entry.update({c: as_int(rec.get(c)) for c in ("tp", "fp", "tn", "fn")})
    ordered = sorted(table, key=lambda key: (key[0] != ALL, key[0], key[1]))
    section = Section("thresholds", f"At thresholds, {day}")
    section.body = {
        "day": day,
        "metrics": names,
        "rows": [{"slice": s, "threshold": t, **table[(s, t)]} for s, t in ordered],
    }
    return section
