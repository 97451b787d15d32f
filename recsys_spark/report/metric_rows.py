"""The daily metrics table as a lookup by (day, slice, metric, k, aggregation)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from recsys_spark.report.values import as_float, as_int
from recsys_spark.schema import ALL


class Metrics:
    """Lookup of metric rows by (dt, slice, metric, k, aggregation)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.has_ci = {"ci_low", "ci_high"} <= set(frame.columns)
        self.rows: dict[tuple, dict[str, Any]] = {}
        if frame.empty:
            return
        if "threshold" in frame.columns:  # a threshold metric's rows: one per threshold, not keyed here
            frame = frame[frame["threshold"].isna()]
        cols = [c for c in ("value", "n", "se", "ci_low", "ci_high", "ci_method") if c in frame.columns]
        for rec in frame[["dt", "slice", "metric", "k", "aggregation", *cols]].to_dict("records"):
            key = (rec["dt"], rec["slice"], rec["metric"], as_int(rec["k"]), rec["aggregation"])
            self.rows[key] = {c: rec[c] for c in cols}

    def get(self, day: str, slice_: str, metric: str, k: int | None, aggregation: str) -> dict[str, Any] | None:
        return self.rows.get((day, slice_, metric, k, aggregation))

    def value(self, day: str, slice_: str, metric: str, k: int | None, aggregation: str) -> float | None:
        row = self.get(day, slice_, metric, k, aggregation)
        return as_float(row["value"]) if row else None

    def interval(self, row: dict[str, Any] | None) -> tuple[float, float] | None:
        if not row or not self.has_ci:
            return None
        lo, hi = as_float(row.get("ci_low")), as_float(row.get("ci_high"))
        return (lo, hi) if lo is not None and hi is not None else None

    def ks(self, day: str, metric: str, aggregation: str) -> list[int]:
        return sorted(
            {
                k
                for (d, s, m, k, a) in self.rows
                if d == day and s == ALL and m == metric and a == aggregation and k is not None
            }
        )

    def slices(self, day: str) -> list[str]:
        return sorted({s for (d, s, *_rest) in self.rows if d == day and s != ALL})
