"""How the report spells values: a table's cell as JSON-safe number or text, a metric's key and reader's name,
the axis labels of a range of days, the confidence a run wrote."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from recsys_spark import registry
from recsys_spark.schema import ALL

#: the confidence when a run does not say its own (``stats.confidence``, ``offline.confidence``)
DEFAULT_CONFIDENCE = 0.95
AGG_NAMES = {
    "user_avg": "user avg",
    "list_avg": "list avg",
    "global": "global",
    "impression_weighted": "impression-weighted",
    "catalog": "catalog",
    "exposed": "exposed",
}


def metric_key(metric: str, k: int | None, aggregation: str) -> str:
    """The registry's one spelling of a metric row (:func:`recsys_spark.registry.key`)."""
    return registry.key(metric, k, aggregation)


def metric_label(metric: str, k: int | None, aggregation: str) -> str:
    """Reader's name of a metric row: the registry's reader name, the cut-off, the aggregation.

    >>> metric_label("ndcg", 10, "user_avg")
    'NDCG@10 (user avg)'
    >>> metric_label(registry.parse_key("pv_ctr_global")[0], None, "global")
    'clicked exposures per request (PV CTR), global'
    >>> metric_label("corrected_ndcg", 10, "user_avg"), metric_label("rating_mae", None, "user_avg")
    ('corrected NDCG@10 (user avg)', 'rating MAE (user avg)')
    """
    found = registry.find(metric)
    name = found.reader_name if found is not None else metric.replace("_", " ")
    same = registry.lookup(metric) if found is None else None
    if same is not None and metric.endswith(same.name):  # an offline column's name: corrected NDCG, rating MAE
        name = f"{metric[: -len(same.name)].replace('_', ' ')}{same.reader_name}"
    name += f"@{k}" if k else ""
    pooled = AGG_NAMES.get(aggregation, aggregation.replace("_", " "))
    return f"{name}, {pooled}" if name.endswith(")") else f"{name} ({pooled})"


def is_percent(metric: str) -> bool:
    """Whether the registry shows ``metric`` as a percentage."""
    found = registry.find(metric)
    return found is not None and found.percent


def bounds(metric: str) -> tuple[float | None, float | None]:
    """The chart's y floor and ceiling: the metric's range when it is bounded (else the data's)."""
    found = registry.find(metric)
    return (found.low, found.high) if found is not None and found.high is not None else (None, None)


def as_float(v: Any) -> float | None:
    """A JSON-safe float: NaN and None become None; exact otherwise (json writes the shortest repr)."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def as_int(v: Any) -> int | None:
    """A JSON-safe int (:func:`as_float`, truncated); None for a missing value."""
    f = as_float(v)
    return None if f is None else int(f)


def as_text(v: Any) -> str | None:
    """A string column's value: None for null (pandas gives None or NaN)."""
    return v if isinstance(v, str) else None


def confidence_of(summary: dict[str, Any] | None, *path: str) -> float:
    """The confidence a run wrote in its summary at ``path`` (e.g. ``config, stats, confidence``), else 0.95.

    >>> confidence_of({"config": {"stats": {"confidence": 0.9}}}, "config", "stats", "confidence")
    0.9
    >>> confidence_of({}, "confidence")
    0.95
    """
    value: Any = summary or {}
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1
    return float(value) if ok else DEFAULT_CONFIDENCE


def tick_every(n: int) -> int:
    """Label every day up to 14 days, then every 2nd, then every 7th (a small chart holds about 14 labels)."""
    return 1 if n <= 14 else 2 if n <= 28 else 7


MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def day_labels(days: Sequence[str]) -> list[str]:
    """Short axis labels: the day of the month, with the month on the first day and the 1st.

    >>> day_labels(["2026-11-30", "2026-12-01", "2026-12-02"])
    ['Nov 30', 'Dec 1', '2']
    """
    out = []
    for i, d in enumerate(days):
        day = int(d[8:10])
        out.append(f"{MONTHS[int(d[5:7]) - 1]} {day}" if i == 0 or day == 1 else str(day))
    return out


def all_slice(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of slice ``all`` when the frame has them, else the frame as it is."""
    if "slice" in frame.columns and (frame["slice"] == ALL).any():
        return frame[frame["slice"] == ALL]
    return frame


def split_thresholds(metrics: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A ``metrics`` frame as (its rows without a threshold, its rows with one): the first keyed by (metric, k,
    aggregation, slice) alone, the second one row per threshold of a name.  A frame without the column (a
    partition written before it) has no threshold row."""
    if "threshold" not in metrics.columns:
        return metrics, metrics.iloc[0:0]
    at = metrics["threshold"].notna()
    return metrics[~at].reset_index(drop=True), metrics[at].reset_index(drop=True)
