"""From :class:`~recsys_spark.report.data.RunData` to the page's sections: numbers, charts, and their data.

Each chart is a :class:`Chart`: its SVG and the plain data it was drawn from
(embedded next to it as JSON).  Sections degrade gracefully: no interval
columns, no band or whisker; no experiments table, no experiment section (the
same for the experiment windows, the offline runs and their comparisons, the
OPE runs and the simulated days); no offline AUC table, a note saying how to give one.

Three rules keep the page from misleading (docs/report.md):

* a colour or a word that says "significant" follows the *adjusted* p-value
  (:func:`verdict`), and the metric's better side from the registry;
* an item-level slice dimension (:func:`item_level_dimensions`) is never drawn
  against the ``all`` line it cannot be compared with;
* no metric that is 1 by construction on logged lists takes a headline row
  (:data:`HEADLINE_ROWS`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from recsys_spark import registry
from recsys_spark.kernels.regression import fit_line
from recsys_spark.registry import HEADLINE, LIST_METRICS
from recsys_spark.report import svg
from recsys_spark.report.data import OFFLINE_VALUE, RunData

#: what the slice charts show, the concentration figures, and the online AUC beside the offline one (metric keys,
#: read by the registry)
SLICE_METRICS = (
    registry.parse_key("ndcg@10_user_avg"),
    registry.parse_key("auc_user_avg"),
    registry.parse_key("exposure_ctr_global"),
)
GINI_CATALOG, GINI_EXPOSED = registry.parse_key("gini_catalog"), registry.parse_key("gini_exposed")
ONLINE_AUC = registry.parse_key("auc_global")
#: its ``n`` is the number of catalog items a slice sees: all of them for ``all`` and every dimension that is not
#: item-level, the items of the bucket for an item-level one (recsys_spark/steps/health.py, ``_whole_catalog``)
ITEM_COVERAGE = registry.parse_key("item_coverage_global")
#: slice dimensions that are attributes of the item whatever the input: its popularity bucket and its category
ITEM_DIMENSIONS = ("popularity", "category")
#: metrics that are 1 by construction on logged lists, where every relevant (clicked) item is in the list: recall@k
#: whenever the lists are no longer than k, hit rate@k for every list with a click.  Never a headline row.
ONE_ON_LOGGED_LISTS = (registry.parse_key("recall@10_global")[0], registry.parse_key("hit_rate@10_user_avg")[0])
#: the headline's rows: the registry's HEADLINE without those
HEADLINE_ROWS = tuple(h for h in HEADLINE if h[0] not in ONE_ON_LOGGED_LISTS)
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
ALL = "all"


@dataclass
class Chart:
    id: str
    title: str
    svg: str
    data: Any
    caption: str = ""
    wide: bool = False


@dataclass
class Section:
    id: str
    title: str
    charts: list[Chart] = field(default_factory=list)
    body: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def slug(text: str) -> str:
    """An HTML id from any text: lower case, runs of other characters as one dash.

    >>> slug("ndcg@10 user_avg / platform")
    'ndcg-10-user-avg-platform'
    """
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


#: a name that is an HTML id as it is (the spelling of a run's name, config.PATH_NAME, without its length bound)
_ID_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def name_id(name: str) -> str:
    """An HTML id for a run's name, distinct for distinct names: the name itself when it is spelled as a run's
    name is (letters, digits, ``_``, ``.``, ``-``), else its :func:`slug`, ``--`` and 8 hex digits of its
    SHA-1 (a name never holds ``--`` after a slug, so no other name gives that id by chance).  :func:`slug`
    alone gave ``ranker_v2``, ``ranker.v2`` and ``ranker-v2`` one id.

    >>> name_id("ranker_v2"), name_id("ranker.v2"), name_id("Ranker v2")
    ('ranker_v2', 'ranker.v2', 'ranker-v2--db9a8a72')
    """
    if _ID_NAME.fullmatch(name):
        return name
    return f"{slug(name)}--{hashlib.sha1(name.encode('utf-8')).hexdigest()[:8]}"


def unreadable_note(data: RunData, prefix: str) -> list[str]:
    """The section's note naming what it left out because a file cannot be read (none when nothing was)."""
    lost = data.unreadable_of(prefix)
    return [f"Left out, unreadable: {'; '.join(u.line for u in lost)}."] if lost else []


def metric_key(metric: str, k: int | None, aggregation: str) -> str:
    """The registry's one spelling of a metric row (:func:`recsys_spark.registry.key`)."""
    return registry.key(metric, k, aggregation)


def metric_label(metric: str, k: int | None, aggregation: str) -> str:
    """Reader's name of a metric row: the registry's reader name, the cut-off, the aggregation.

    >>> metric_label("ndcg", 10, "user_avg")
    'NDCG@10 (user avg)'
    >>> metric_label(registry.parse_key("pv_ctr_global")[0], None, "global")
    'clicked exposures per request (PV CTR), global'
    """
    found = registry.find(metric)
    name = found.reader_name if found is not None else metric.replace("_", " ")
    name += f"@{k}" if k else ""
    pooled = AGG_NAMES.get(aggregation, aggregation.replace("_", " "))
    return f"{name}, {pooled}" if name.endswith(")") else f"{name} ({pooled})"


def is_percent(metric: str) -> bool:
    found = registry.find(metric)
    return found is not None and found.percent


def bounds(metric: str) -> tuple[float | None, float | None]:
    """The chart's y floor and ceiling: the metric's range when it is bounded (else the data's)."""
    found = registry.find(metric)
    return (found.low, found.high) if found is not None and found.high is not None else (None, None)


def _num(v: Any) -> float | None:
    """A JSON-safe float: NaN and None become None; exact otherwise (json writes the shortest repr)."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _int(v: Any) -> int | None:
    f = _num(v)
    return None if f is None else int(f)


def _text(v: Any) -> str | None:
    """A string column's value: None for null (pandas gives None or NaN)."""
    return v if isinstance(v, str) else None


# --- the colour rule ----------------------------------------------------------------------------------------
GAIN, LOSS, CHANGE, NOT_SIGNIFICANT = "gain", "loss", "change", "none"
#: the words beside a result, and its colour in the charts (the tables use the CSS classes)
VERDICT_WORDS = {
    GAIN: "significant gain",
    LOSS: "significant loss",
    CHANGE: "significant change",
    NOT_SIGNIFICANT: "not significant",
}
VERDICT_COLORS = {GAIN: svg.GREEN, LOSS: svg.RED, CHANGE: svg.PALETTE[0], NOT_SIGNIFICANT: svg.GREY}
VERDICT_CLASSES = {GAIN: "ok", LOSS: "bad", CHANGE: "changed", NOT_SIGNIFICANT: ""}


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


def is_sequential(ci_method: Any) -> bool:
    """Whether a row's interval is always valid (``ci_method`` starting with ``sequential`` or ``always``): then
    that interval is the one to read, at any time.

    >>> is_sequential("sequential_msprt"), is_sequential("Always-valid"), is_sequential("t"), is_sequential(None)
    (True, True, False, False)
    """
    return isinstance(ci_method, str) and ci_method.strip().lower().startswith(("sequential", "always"))


def verdict(
    metric: str,
    delta: float | None,
    p_adjusted: float | None,
    alpha: float,
    low: float | None = None,
    high: float | None = None,
    ci_method: Any = None,
) -> str:
    """What a comparison's colour and words say: :data:`GAIN`, :data:`LOSS`, :data:`CHANGE` or :data:`NOT_SIGNIFICANT`.

    Significant only when the **adjusted** p-value is below ``alpha`` (an unadjusted p or an unadjusted
    interval never colours a result); when the row's ``ci_method`` says its interval is sequential (always
    valid), that interval [low, high] must exclude 0 as well (with no adjusted p, the interval alone decides).
    A significant result is a gain or a loss by the metric's better side (the registry: a lower failure rate is
    a gain), a change when the metric has none.

    >>> verdict("ndcg", 0.1, 0.002, 0.05), verdict("ndcg", 0.1, 0.495, 0.05, 0.01, 0.2)
    ('gain', 'none')
    >>> verdict("pv_failure_rate", -0.01, 0.01, 0.05), verdict("pv", 5.0, 0.01, 0.05)
    ('gain', 'change')
    >>> verdict("ndcg", 0.1, 0.01, 0.05, -0.02, 0.2, "sequential_msprt")
    'none'
    """
    if is_sequential(ci_method):
        significant = (
            low is not None
            and high is not None
            and (low > 0 or high < 0)
            and (p_adjusted is None or p_adjusted < alpha)
        )
    else:
        significant = p_adjusted is not None and p_adjusted < alpha
    if not significant or delta is None or delta == 0:
        return NOT_SIGNIFICANT
    better = registry.metric(metric).higher_is_better if metric in registry.METRICS else None
    if better is None:
        return CHANGE
    return GAIN if (delta > 0) == better else LOSS


class Metrics:
    """Lookup of metric rows by (dt, slice, metric, k, aggregation)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.has_ci = {"ci_low", "ci_high"} <= set(frame.columns)
        self.rows: dict[tuple, dict[str, Any]] = {}
        if frame.empty:
            return
        cols = [c for c in ("value", "n", "se", "ci_low", "ci_high", "ci_method") if c in frame.columns]
        for rec in frame[["dt", "slice", "metric", "k", "aggregation", *cols]].to_dict("records"):
            key = (rec["dt"], rec["slice"], rec["metric"], _int(rec["k"]), rec["aggregation"])
            self.rows[key] = {c: rec[c] for c in cols}

    def get(self, day: str, slice_: str, metric: str, k: int | None, aggregation: str) -> dict[str, Any] | None:
        return self.rows.get((day, slice_, metric, k, aggregation))

    def value(self, day: str, slice_: str, metric: str, k: int | None, aggregation: str) -> float | None:
        row = self.get(day, slice_, metric, k, aggregation)
        return _num(row["value"]) if row else None

    def interval(self, row: dict[str, Any] | None) -> tuple[float, float] | None:
        if not row or not self.has_ci:
            return None
        lo, hi = _num(row.get("ci_low")), _num(row.get("ci_high"))
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


def _tick_every(n: int) -> int:
    """Label every day up to 14 days, then every 2nd, then every 7th (a small chart holds about 14 labels)."""
    return 1 if n <= 14 else 2 if n <= 28 else 7


MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _day_labels(days: Sequence[str]) -> list[str]:
    """Short axis labels: the day of the month, with the month on the first day and the 1st.

    >>> _day_labels(["2026-11-30", "2026-12-01", "2026-12-02"])
    ['Nov 30', 'Dec 1', '2']
    """
    out = []
    for i, d in enumerate(days):
        day = int(d[8:10])
        out.append(f"{MONTHS[int(d[5:7]) - 1]} {day}" if i == 0 or day == 1 else str(day))
    return out


# --- sections ----------------------------------------------------------------------------------------------
def noise(base: float | None, low: float | None, high: float | None) -> str | None:
    """Whether another day's value lies inside today's interval: ``"within"`` (the change is within the day's
    noise), ``"outside"``, or None without a value or an interval.

    >>> noise(0.50, 0.48, 0.53), noise(0.45, 0.48, 0.53), noise(0.5, None, None)
    ('within', 'outside', None)
    """
    if base is None or low is None or high is None:
        return None
    return "within" if low <= base <= high else "outside"


def set_aside(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows the day's validation set aside, one entry per source and reason: the summary's
    ``data_quality.rejected_exposures`` and ``rejected_clicks`` (the headline's card and the chart read these)."""
    quality = summary.get("data_quality", {})
    return [
        {"source": source, "reason": reason, "rows": int(count)}
        for source in ("exposures", "clicks")
        for reason, count in sorted((quality.get(f"rejected_{source}") or {}).items())
    ]


def rules_of_day(data: RunData, day: str) -> list[dict[str, Any]]:
    """The day's rule checks: the ``rule_checks`` table, else the summary's ``rules``."""
    return _rules_of(data, day) or list(data.summaries.get(day, {}).get("rules", []))


def headline_section(data: RunData, m: Metrics, context: Metrics) -> Section:
    """The last day's headline metrics with intervals, and the change from the day before and a week before,
    each marked within or outside the day's interval.  Recall@k and hit rate@k take no row (1 by construction
    on logged lists)."""
    day = data.last_day
    section = Section("headline", "Headline")
    if day is None:
        section.notes.append("No day of the range has outputs.")
        return section
    prev = (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat()
    week = (dt.date.fromisoformat(day) - dt.timedelta(days=7)).isoformat()
    rows = []
    for metric, k, agg in HEADLINE_ROWS:
        row = m.get(day, ALL, metric, k, agg)
        value = _num(row["value"]) if row else None
        interval = m.interval(row)
        low, high = interval or (None, None)

        def change(
            other: str,
            key: tuple[str, int | None, str] = (metric, k, agg),
            current: float | None = value,
            low: float | None = low,
            high: float | None = high,
        ) -> dict[str, Any]:
            base = m.value(other, ALL, *key)
            if base is None:
                base = context.value(other, ALL, *key)
            delta = current - base if current is not None and base is not None else None
            rel = delta / abs(base) if delta is not None and base else None
            return {"base": base, "delta": delta, "rel": rel, "noise": noise(base, low, high)}

        rows.append(
            {
                "key": metric_key(metric, k, agg),
                "label": metric_label(metric, k, agg),
                "value": value,
                "ci_low": low,
                "ci_high": high,
                "se": _num(row.get("se")) if row else None,
                "n": _int(row.get("n")) if row else None,
                "percent": is_percent(metric),
                "previous_day": {"date": prev, **change(prev)},
                "week_before": {"date": week, **change(week)},
            }
        )
    left_out = [{"key": metric_key(*h), "label": metric_label(*h)} for h in HEADLINE if h[0] in ONE_ON_LOGGED_LISTS]
    summary = data.summaries.get(day, {})
    rules = rules_of_day(data, day)
    hard = [r for r in rules if r["severity"] == "hard"]
    soft = [r for r in rules if r["severity"] == "soft"]
    quality = summary.get("data_quality", {})
    aside = set_aside(summary)
    section.body = {
        "day": day,
        "previous_day": prev,
        "week_before": week,
        "rows": rows,
        "left_out": left_out,
        "has_ci": m.has_ci,
        "status": summary.get("status", "no summary"),
        "hard_rules": len(hard),
        "soft_rules": len(soft),
        "failed_hard": [r["rule"] for r in hard if not r["passed"]],
        "failed_soft": [r["rule"] for r in soft if not r["passed"]],
        "quality": {
            "input_exposures": summary.get("input_rows", {}).get("exposures"),
            "input_clicks": summary.get("input_rows", {}).get("clicks"),
            "rows_set_aside": sum(r["rows"] for r in aside) if summary else None,
            "users": quality.get("users"),
            "lists": quality.get("lists"),
        },
        "notes": summary.get("notes", []),
    }
    section.charts.append(
        Chart("headline", "Headline metrics", "", {"day": day, "rows": rows, "left_out": [r["key"] for r in left_out]})
    )
    return section


def _rules_of(data: RunData, day: str) -> list[dict[str, Any]]:
    frame = data.tables.get("rule_checks", pd.DataFrame())
    if frame.empty:
        return []
    return [
        {
            "rule": r["rule"],
            "severity": r["severity"],
            "violations": _int(r["violations"]),
            "rate": _num(r["rate"]),
            "threshold": _num(r["threshold"]),
            "passed": bool(r["passed"]),
        }
        for r in frame[frame["dt"] == day].to_dict("records")
    ]


def trends_section(data: RunData, m: Metrics) -> Section:
    """One small chart per headline metric over the range; a band when intervals exist; grey columns for gaps."""
    section = Section("trends", "Trends")
    days = data.days
    gaps = [i for i, d in enumerate(days) if d in set(data.missing)]
    labels = _day_labels(days)
    for metric, k, agg in HEADLINE:
        rows = [m.get(d, ALL, metric, k, agg) for d in days]
        values = [_num(r["value"]) if r else None for r in rows]
        if all(v is None for v in values):
            continue
        intervals = [m.interval(r) for r in rows]
        band = intervals if any(i is not None for i in intervals) else None
        title = metric_label(metric, k, agg)
        chart = svg.line_chart(
            list(range(len(days))),
            [svg.Series("", values, band)],
            title=title,
            x_labels=labels,
            tick_every=_tick_every(len(days)),
            gaps=gaps,
            percent=is_percent(metric),
            y_floor=bounds(metric)[0],
            y_ceiling=bounds(metric)[1],
        )
        payload = {"metric": metric, "k": k, "aggregation": agg, "slice": ALL, "dt": days, "value": values}
        if band is not None:
            payload["ci_low"] = [i[0] if i else None for i in intervals]
            payload["ci_high"] = [i[1] if i else None for i in intervals]
        section.charts.append(Chart(f"trend-{slug(metric_key(metric, k, agg))}", title, chart, payload))
    if data.missing:
        section.notes.append(f"No output for {', '.join(data.missing)}: shown as grey columns, never interpolated.")
    if not m.has_ci:
        section.notes.append("No interval columns (ci_low, ci_high) in the metrics table: lines without bands.")
    return section


def curves_section(data: RunData, m: Metrics) -> Section:
    """Metric@k against k (user averages) on the last day."""
    section = Section("curves", "Metrics at k")
    day = data.last_day
    if day is None:
        return section
    series: list[svg.Series] = []
    curves: dict[str, dict[str, list]] = {}
    payload = {"dt": day, "slice": ALL, "aggregation": "user_avg", "curves": curves}
    ks = sorted({k for metric in LIST_METRICS for k in m.ks(day, metric, "user_avg")})
    if not ks:
        section.notes.append("No @k metrics on the last day.")
        return section
    for i, metric in enumerate(LIST_METRICS):
        ys = [m.value(day, ALL, metric, k, "user_avg") for k in ks]
        if all(v is None for v in ys):
            continue
        series.append(svg.Series(metric_label(metric, None, "user_avg").split(" (")[0], ys, color=svg.PALETTE[i]))
        curves[metric] = {"k": ks, "value": ys}
    chart = svg.line_chart(
        [float(k) for k in ks],
        series,
        title=f"Metric@k on {day}",
        x_label="k",
        width=640,
        height=300,
        y_floor=0.0,
        y_ceiling=1.0,
        point_names=[f"@{k}" for k in ks],
    )
    section.charts.append(Chart("curves-at-k", f"Metrics at k, {day} (user averages)", chart, payload, wide=True))
    return section


def top_share(x: Sequence[float], y: Sequence[float], share: float) -> float | None:
    """Share of exposures taken by the ``share`` most exposed items, from Lorenz points: 1 - L(1 - share).

    L is interpolated linearly between the written points (exact when ``1 - share`` is one of them;
    the curve is convex, so between points this slightly understates the concentration).

    >>> top_share([0, 0.5, 1], [0, 0.2, 1], 0.5)
    0.8
    """
    if len(x) < 2:
        return None
    return float(1.0 - np.interp(1.0 - share, np.asarray(x, dtype=float), np.asarray(y, dtype=float)))


def lorenz_section(data: RunData, m: Metrics) -> Section:
    section = Section("lorenz", "Exposure concentration")
    day = data.last_day
    frame = data.tables.get("lorenz", pd.DataFrame())
    if day is None or frame.empty or not ((frame["dt"] == day) & (frame["slice"] == ALL)).any():
        section.notes.append("No Lorenz table for the last day.")
        return section
    points = frame[(frame["dt"] == day) & (frame["slice"] == ALL)].sort_values("x", kind="mergesort")
    x, y = points["x"].astype(float).tolist(), points["y"].astype(float).tolist()
    gini_catalog = m.value(day, ALL, *GINI_CATALOG)
    gini_exposed = m.value(day, ALL, *GINI_EXPOSED)
    stats = {
        registry.key(*GINI_CATALOG): gini_catalog,
        registry.key(*GINI_EXPOSED): gini_exposed,
        "top_1pct_share": top_share(x, y, 0.01),
        "top_10pct_share": top_share(x, y, 0.10),
    }
    chart = svg.lorenz_chart(x, y, title=f"Lorenz curve of exposures over items, {day}")
    section.charts.append(
        Chart("lorenz", f"Lorenz curve, {day}", chart, {"dt": day, "slice": ALL, "x": x, "y": y, **stats})
    )
    section.body = {
        "concentration": [
            {"label": metric_label(*GINI_CATALOG), "value": gini_catalog},
            {"label": metric_label(*GINI_EXPOSED), "value": gini_exposed},
        ],
        "top_1pct_share": stats["top_1pct_share"],
        "top_10pct_share": stats["top_10pct_share"],
    }
    return section


def item_level_dimensions(m: Metrics, day: str, dims: Iterable[str]) -> list[str]:
    """The item-level dimensions among ``dims``: ``popularity`` and ``category`` always; any other (a column of
    the items table) when its slices see part of the catalog, that is when the ``n`` of a slice's item coverage
    (the catalog items it sees) is below that of ``all``: the job gives a dimension only its bucket's items when
    the dimension is an attribute of the item (recsys_spark/steps/health.py), the whole catalog otherwise."""
    catalog = m.get(day, ALL, *ITEM_COVERAGE)
    whole = _int(catalog.get("n")) if catalog else None
    out = []
    for dim in dims:
        seen = [
            _int(row.get("n"))
            for (d, s, *key), row in m.rows.items()
            if d == day and s.split("=", 1)[0] == dim and s != ALL and tuple(key) == ITEM_COVERAGE
        ]
        partial = whole is not None and any(n is not None and n < whole for n in seen)
        if dim in ITEM_DIMENSIONS or partial:
            out.append(dim)
    return out


#: what an item-level slice is, under its charts
ITEM_LEVEL_NOTE = (
    "Item-level dimension: each bucket's metrics are computed on a user's exposures of the items in that bucket, "
    "so a user's list is split by item bucket and a user counts in several buckets (their n add up to more than "
    "the users). A bucket is not a part of the traffic and cannot be compared with the value over all traffic: "
    "no 'all' line is drawn; compare the buckets with each other, or a bucket with itself over time."
)
#: neutral colours for the slice charts (green and red say "significant gain/loss" elsewhere on the page)
SLICE_COLORS = (svg.PALETTE[0], svg.PALETTE[4], svg.PALETTE[6])


def slices_section(data: RunData, m: Metrics) -> Section:
    """Per slice dimension, a dot-and-whisker chart per metric (last day): against the ``all`` value for a
    dimension that partitions the traffic, with no reference line for an item-level one."""
    section = Section("slices", "Slices")
    day = data.last_day
    if day is None:
        return section
    by_dim: dict[str, list[str]] = {}
    for s in m.slices(day):
        by_dim.setdefault(s.split("=", 1)[0], []).append(s)
    if not by_dim:
        section.notes.append("No slices configured (slices.names): only the all value exists.")
        return section
    configured = ((data.summaries.get(day, {}).get("config") or {}).get("slices") or {}).get("names") or []
    order = [d for d in configured if d in by_dim] + sorted(d for d in by_dim if d not in configured)
    item_level = set(item_level_dimensions(m, day, order))
    dimensions = []
    for dim in order:
        slices = by_dim[dim]
        is_item = dim in item_level
        charts = []
        for i, (metric, k, agg) in enumerate(SLICE_METRICS):
            reference = None if is_item else m.value(day, ALL, metric, k, agg)
            rows, payload_rows = [], []
            for s in slices:
                row = m.get(day, s, metric, k, agg)
                interval = m.interval(row)
                value = _num(row["value"]) if row else None
                n = _int(row["n"]) if row else None
                label = s.split("=", 1)[1] + (f" (n={n})" if n is not None else "")
                low, high = interval or (None, None)
                rows.append(svg.Whisker(label, value, low, high, color=SLICE_COLORS[i % len(SLICE_COLORS)]))
                payload_rows.append(
                    {
                        "slice": s,
                        "value": value,
                        "n": n,
                        "ci_low": interval[0] if interval else None,
                        "ci_high": interval[1] if interval else None,
                    }
                )
            if all(r.value is None for r in rows):
                continue
            title = metric_label(metric, k, agg)
            chart = svg.dot_whisker(
                rows,
                title=f"{title} by {dim}",
                reference=reference,
                reference_label="" if is_item else f"all = {svg.fmt(reference)}",
                label_width=130,
                percent=False,
            )
            charts.append(
                Chart(
                    f"slice-{slug(dim)}-{slug(metric_key(metric, k, agg))}",
                    f"{title} by {dim}" + (" (item-level: no 'all' line)" if is_item else ""),
                    chart,
                    {
                        "dt": day,
                        "dimension": dim,
                        "item_level": is_item,
                        "metric": metric,
                        "k": k,
                        "aggregation": agg,
                        "all": reference,
                        "rows": payload_rows,
                    },
                )
            )
        section.charts += charts
        dimensions.append({"name": dim, "item_level": is_item, "charts": charts})
    section.body = {"dimensions": dimensions, "item_level_note": ITEM_LEVEL_NOTE}
    if not m.has_ci:
        section.notes.append("No interval columns in the metrics table: dots without whiskers.")
    return section


REASON_COLORS = {"exposures": svg.PALETTE[0], "clicks": svg.PALETTE[3]}


def quality_section(data: RunData) -> Section:
    """Rows set aside per reason (the same counts as the headline's card), the labelling's counts, the rules."""
    section = Section("quality", "Data quality and rules")
    day = data.last_day
    if day is None:
        return section
    summary = data.summaries.get(day, {})
    quality = summary.get("data_quality", {})
    payload = set_aside(summary)
    if summary and not payload:
        section.notes.append(f"Nothing set aside on {day}: validation rejected no exposure or click row.")
    elif summary:
        total = sum(r["rows"] for r in payload)
        section.charts.append(
            Chart(
                "set-aside",
                f"Rows set aside, {day}: {total}",
                svg.bar_chart(
                    [f"{r['source']}: {r['reason']}" for r in payload],
                    [float(r["rows"]) for r in payload],
                    title=f"Rows set aside per reason, {day}",
                    colors=[REASON_COLORS[r["source"]] for r in payload],
                ),
                {"dt": day, "rows": payload, "total": total},
            )
        )
    section.body["labelling"] = {
        name: _int(quality.get(name)) for name in ("duplicate_exposures", "orphan_events") if name in quality
    }
    rules = rules_of_day(data, day)
    section.body["rules"] = [
        {k: r.get(k) for k in ("rule", "severity", "violations", "rate", "threshold", "passed")} for r in rules
    ]
    section.body["day"] = day
    days = data.days
    missing = set(data.missing)
    hard, soft = [], []
    for d in days:
        day_rules = rules_of_day(data, d)
        present = d not in missing
        hard.append(
            float(sum(1 for r in day_rules if r["severity"] == "hard" and not r["passed"])) if present else None
        )
        soft.append(
            float(sum(1 for r in day_rules if r["severity"] == "soft" and not r["passed"])) if present else None
        )
    chart = svg.day_bars(
        _day_labels(days),
        [svg.Series("hard", hard, color=svg.PALETTE[1]), svg.Series("soft", soft, color=svg.PALETTE[3])],
        title="Failed rules per day",
        gaps=[i for i, d in enumerate(days) if d in missing],
        tick_every=_tick_every(len(days)),
        y_label="failed rules",
    )
    section.charts.append(
        Chart("rule-failures", "Failed rules per day", chart, {"dt": days, "failed_hard": hard, "failed_soft": soft})
    )
    return section


#: the experiments table's columns a result row shows (numbers, except these texts)
RESULT_COLUMNS = (
    "variant",
    "metric",
    "k",
    "aggregation",
    "value",
    "n",
    "control_value",
    "control_n",
    "delta",
    "ci_low",
    "ci_high",
    "rel_delta",
    "rel_ci_low",
    "rel_ci_high",
    "p_value",
    "p_adjusted",
    "method",
    "ci_method",
    "mde",
)
TEXT_COLUMNS = ("variant", "metric", "aggregation", "method", "ci_method")


def _result_row(r: dict[str, Any], alpha: float, label: str) -> dict[str, Any]:
    """One comparison's row for the page and its data block: its numbers, and the verdict of the colour rule."""
    row: dict[str, Any] = {}
    for key in RESULT_COLUMNS:
        if key in ("k", "n", "control_n"):
            row[key] = _int(r.get(key))
        elif key in TEXT_COLUMNS:
            row[key] = _text(r.get(key))
        else:
            row[key] = _num(r.get(key))
    delta = row["delta"] if row["delta"] is not None else row["rel_delta"]
    low, high = (
        (row["rel_ci_low"], row["rel_ci_high"]) if row["rel_ci_low"] is not None else (row["ci_low"], row["ci_high"])
    )
    found = verdict(row["metric"] or "", delta, row["p_adjusted"], alpha, low, high, row["ci_method"])
    row.update(
        label=label,
        verdict=found,
        verdict_words=VERDICT_WORDS[found],
        verdict_class=VERDICT_CLASSES[found],
        sequential=is_sequential(row["ci_method"]),
        significant=found != NOT_SIGNIFICANT,
    )
    return row


def _whisker(row: dict[str, Any], label: str) -> svg.Whisker:
    sequential = ", sequential interval" if row["sequential"] else ""
    return svg.Whisker(
        label,
        row["rel_delta"],
        row["rel_ci_low"],
        row["rel_ci_high"],
        color=VERDICT_COLORS[row["verdict"]],
        note=f" (p adj = {svg.fmt(row['p_adjusted'])}{sequential}: {row['verdict_words']})",
        css=f"verdict-{row['verdict']}",
    )


def _checks(frame: pd.DataFrame, name: str) -> list[dict[str, Any]]:
    if frame.empty:
        return []
    return [
        {
            "check": r["check"],
            "statistic": _num(r.get("statistic")),
            "p_value": _num(r.get("p_value")),
            "passed": bool(r["passed"]),
            "detail": "" if _text(r.get("detail")) is None else str(r.get("detail")),
        }
        for r in frame[frame["experiment"] == name].to_dict("records")
    ]


def experiment_block(
    name: str, rows: pd.DataFrame, checks: pd.DataFrame, alpha: float, chart_id: str, title: str, where: dict[str, Any]
) -> dict[str, Any]:
    """One experiment's part of the page (a day's or a window's): its checks, SRM verdict, forest plot and table.

    ``where``: what the data block says the rows are of (``dt``, or ``window_start`` and ``window_end``).
    """
    exp_checks = _checks(checks, name)
    srm = [c for c in exp_checks if "srm" in c["check"].lower()]
    whiskers, table = [], []
    for r in rows.to_dict("records"):
        label = f"{r['variant']}: {metric_label(r['metric'], _int(r.get('k')), r['aggregation'])}"
        row = _result_row(r, alpha, label)
        table.append(row)
        whiskers.append(_whisker(row, label))
    label_width = svg.label_width([w.label for w in whiskers], 250)
    chart = svg.dot_whisker(
        whiskers,
        title=f"{title}: relative lift against control",
        reference=0.0,
        reference_label="no change",
        width=label_width + 400,
        percent=True,
        label_width=label_width,
        x_label="relative lift (treatment - control) / control",
    )
    figure = Chart(
        chart_id,
        f"{title}: relative lift",
        chart,
        {**where, "experiment": name, "alpha": alpha, "rows": table, "checks": exp_checks},
        wide=True,
    )
    return {
        "name": name,
        "title": title,
        "chart": figure,
        "rows": table,
        "checks": exp_checks,
        "srm": srm,
        "srm_failed": any(not c["passed"] for c in srm),
        "alpha": alpha,
    }


def _all_slice(frame: pd.DataFrame) -> pd.DataFrame:
    if "slice" in frame.columns and (frame["slice"] == ALL).any():
        return frame[frame["slice"] == ALL]
    return frame


def experiments_section(data: RunData) -> Section | None:
    """Per experiment (last day with the table): SRM banner, forest plot of relative lifts, sizes and MDE."""
    frame = data.tables.get("experiments", pd.DataFrame())
    if frame.empty:
        return None
    day = max(frame["dt"])
    frame = _all_slice(frame[frame["dt"] == day])
    checks = data.tables.get("experiment_checks", pd.DataFrame())
    checks = checks[checks["dt"] == day] if not checks.empty else checks
    alpha = 1 - confidence_of(data.summaries.get(day), "config", "stats", "confidence")
    section = Section("experiments", "Experiments")
    section.body = {"day": day, "alpha": alpha, "experiments": []}
    for name in sorted(frame["experiment"].unique()):
        block = experiment_block(
            name, frame[frame["experiment"] == name], checks, alpha, f"forest-{slug(name)}", name, {"dt": day}
        )
        section.charts.append(block["chart"])
        section.body["experiments"].append(block)
    return section


def windows_section(data: RunData) -> Section | None:
    """The experiment windows ending in the range (``recsys-spark experiment``): per experiment and window, the
    same part as a day's experiment."""
    frame = data.windows
    if frame.empty:
        return None
    frame = _all_slice(frame)
    alpha = 1 - confidence_of(data.summaries.get(data.last_day or ""), "config", "stats", "confidence")
    section = Section("windows", "Experiment windows")
    section.body = {"alpha": alpha, "windows": []}
    spans = frame[["experiment", "window_start", "window_end"]].drop_duplicates()
    for name, start, end in sorted(spans.itertuples(index=False, name=None), key=lambda t: (t[0], t[2], t[1])):
        rows = frame[(frame["experiment"] == name) & (frame["window_start"] == start) & (frame["window_end"] == end)]
        checks = data.window_checks
        if not checks.empty:
            checks = checks[(checks["window_start"] == start) & (checks["window_end"] == end)]
        block = experiment_block(
            name,
            rows,
            checks,
            alpha,
            f"window-{slug(name)}-{start}-{end}",
            f"{name}, {start} to {end}",
            {"window_start": start, "window_end": end},
        )
        section.charts.append(block["chart"])
        section.body["windows"].append(block)
    return section


def offline_runs_section(data: RunData) -> Section | None:
    """The complete offline runs side by side: each run's headline (the registry's HEADLINE keys its metrics
    table has, slice ``all``) with its interval."""
    skipped = [s for s in data.offline_skipped if s.startswith("run ")]
    lost = unreadable_note(data, "offline run ")
    if not data.offline_runs and not skipped and not lost:
        return None
    section = Section("offline-runs", "Offline runs", notes=lost)
    runs = data.offline_runs
    found: dict[tuple[str, str, int | None, str], dict[str, Any]] = {}
    for run in runs:
        if run.metrics.empty:
            continue
        for rec in _all_slice(run.metrics).to_dict("records"):
            found[(run.name, rec["metric"], _int(rec.get("k")), rec["aggregation"])] = rec
    rows = []
    for metric, k, agg in HEADLINE:
        values = {}
        for run in runs:
            rec = found.get((run.name, metric, k, agg))
            if rec is not None:
                values[run.name] = {
                    "value": _num(rec.get("value")),
                    "n": _int(rec.get("n")),
                    "ci_low": _num(rec.get("ci_low")),
                    "ci_high": _num(rec.get("ci_high")),
                }
        if values:
            rows.append(
                {
                    "key": metric_key(metric, k, agg),
                    "label": metric_label(metric, k, agg),
                    "percent": is_percent(metric),
                    "runs": values,
                }
            )
    info = [
        {
            "run": run.name,
            "evaluations": [str(e) for e in run.summary.get("evaluations", [])],
            "notes": [str(n) for n in run.summary.get("notes", [])],
            "metrics": len(run.metrics),
        }
        for run in runs
    ]
    section.body = {"runs": info, "rows": rows}
    section.charts.append(Chart("offline-runs", "Offline runs' headline", "", {"runs": info, "rows": rows}))
    if runs and not rows:
        section.notes.append("No headline metric in the runs' metrics tables.")
    if skipped:
        section.notes.append(f"Left out, incomplete (no offline/summary/run=NAME/_SUCCESS): {', '.join(skipped)}.")
    return section


#: the levels of the OPE estimates: the logging policy's observed value each is drawn against
OPE_LEVELS = {"item": ("logged", "per logged position"), "list": ("logged_list", "per list")}
OPE_NUMBERS = ("value", "se", "ci_low", "ci_high", "delta", "delta_se", "delta_ci_low", "delta_ci_high")


def ope_section(data: RunData) -> Section | None:
    """Each complete OPE run (``recsys-spark ope``): its estimates with their intervals against the logging
    policy's observed value at the same level (a dot-whisker chart per level, the difference with its own
    interval in the table), then its diagnostics and notes.  No colour says better or worse: an estimate
    is not a measurement, and the diagnostics say how far to trust it."""
    skipped = [s for s in data.ope_skipped if s.startswith("ope run ")]
    lost = unreadable_note(data, "ope run ")
    if not data.ope_runs and not skipped and not lost:
        return None
    section = Section("ope", "Off-policy estimates", notes=lost)
    blocks = []
    for run in data.ope_runs:
        run_id = name_id(run.name)
        rows = []
        for r in run.estimates.to_dict("records"):
            name = str(r["estimator"])
            known = registry.OPE_ESTIMATORS.get(name)
            row: dict[str, Any] = {
                "estimator": name,
                "label": known.reader_name if known else name,
                "level": _text(r.get("level")) or "item",
                **{c: _num(r.get(c)) for c in OPE_NUMBERS},
                "ci_method": _text(r.get("ci_method")),
                "n": _int(r.get("n")),
                "units": _int(r.get("units")),
                "clip": _num(r.get("clip")),
                "switch_tau": _num(r.get("switch_tau")),
            }
            row["baseline"] = name == OPE_LEVELS.get(row["level"], ("",))[0]
            rows.append(row)
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
            section.charts.append(chart)
        diagnostics = []
        for r in run.diagnostics.to_dict("records"):
            name = str(r["diagnostic"])
            known = registry.OPE_DIAGNOSTICS.get(name)
            diagnostics.append(
                {
                    "diagnostic": name,
                    "label": known.reader_name if known else name,
                    "value": _num(r.get("value")),
                    "percent": bool(known and known.percent),
                }
            )
        summary = run.summary
        blocks.append(
            {
                "run": run.name,
                "id": run_id,
                "start": summary.get("start"),
                "end": summary.get("end"),
                "target": summary.get("target"),
                "parameters": summary.get("parameters", {}),
                "charts": charts,
                "rows": rows,
                "diagnostics": diagnostics,
                "notes": [str(n) for n in summary.get("notes", [])],
                "confidence": confidence_of(summary, "parameters", "confidence"),
            }
        )
    section.body = {"runs": blocks}
    if skipped:
        section.notes.append(f"Left out, incomplete (no ope/summary/run=NAME/_SUCCESS): {', '.join(skipped)}.")
    return section


def simulation_section(data: RunData) -> Section | None:
    """Each simulated day (``recsys-spark simulate``) beside the logged policy on the same requests: every
    metric the simulation wrote (slice ``all``) with the logged day's value and the difference, and the
    rules of both."""
    skipped = [s for s in data.ope_skipped if s.startswith("simulation ")]
    lost = unreadable_note(data, "simulation ")
    if not data.simulations and not skipped and not lost:
        return None
    section = Section("simulation", "Simulated lists", notes=lost)
    logged_metrics = _all_slice(data.tables.get("metrics", pd.DataFrame()))
    logged_rules = data.tables.get("rule_checks", pd.DataFrame())
    blocks = []
    for sim in data.simulations:
        mine = logged_metrics[logged_metrics["dt"] == sim.day] if "dt" in logged_metrics else pd.DataFrame()
        logged = {(r["metric"], _int(r.get("k")), r["aggregation"]): r for r in mine.to_dict("records")}
        rows = []
        for r in _all_slice(sim.metrics).to_dict("records"):
            metric, k, agg = str(r["metric"]), _int(r.get("k")), str(r["aggregation"])
            base = logged.get((metric, k, agg))
            value, before = _num(r.get("value")), _num(base.get("value")) if base else None
            rows.append(
                {
                    "key": metric_key(metric, k, agg),
                    "label": metric_label(metric, k, agg),
                    "percent": is_percent(metric),
                    "candidate": value,
                    "ci_low": _num(r.get("ci_low")),
                    "ci_high": _num(r.get("ci_high")),
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
                "rate": _num(r.get("rate")),
                "threshold": _num(r.get("threshold")),
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
        if not logged:
            section.notes.append(f"{sim.run} {sim.day}: the logged day has no metrics in this report's range.")
        section.charts.append(Chart(block["id"], f"{sim.run} on {sim.day}", "", block))
        blocks.append(block)
    section.body = {"simulations": blocks}
    if skipped:
        section.notes.append(
            f"Left out, incomplete (no simulation/summary/run=NAME/dt=D/_SUCCESS): {', '.join(skipped)}."
        )
    return section


#: a comparison row's numbers beside its sizes and means (recsys_spark/offline/compare.py)
COMPARISON_NUMBERS = ("delta", "ci_low", "ci_high", "rel_delta", "rel_ci_low", "rel_ci_high", "p_value", "p_adjusted")


def comparison_section(data: RunData) -> Section | None:
    """Each complete offline comparison (``recsys-spark offline-compare``): a table of the paired differences per
    metric, coloured by the same rule as the experiments."""
    skipped = [s for s in data.offline_skipped if s.startswith("comparison ")]
    lost = unreadable_note(data, "offline comparison ")
    if not data.comparisons and not skipped and not lost:
        return None
    section = Section("offline-comparison", "Offline comparison", notes=lost)
    blocks = []
    for comp in data.comparisons:
        alpha = 1 - confidence_of(comp.summary, "confidence")
        title = f"{comp.candidate} against {comp.base}"
        rows = []
        for r in comp.rows.to_dict("records"):
            metric, k = str(r["metric"]), _int(r.get("k"))
            # a comparison of per-user values: their means are user averages
            label = metric_label(metric, k, _text(r.get("aggregation")) or "user_avg")
            row: dict[str, Any] = {
                "metric": metric,
                "k": k,
                "aggregation": _text(r.get("aggregation")),
                "column": _text(r.get("column")),
                "label": label,
                "n": _int(r.get("n")),
                "base": _num(r.get("base_mean")),
                "candidate": _num(r.get("candidate_mean")),
                **{c: _num(r.get(c)) for c in COMPARISON_NUMBERS},
                "method": _text(r.get("method")),
                "ci_method": _text(r.get("ci_method")),
                "correction": _text(r.get("correction")),
            }
            found = verdict(
                metric, row["delta"], row["p_adjusted"], alpha, row["ci_low"], row["ci_high"], row["ci_method"]
            )
            row.update(
                verdict=found,
                verdict_words=VERDICT_WORDS[found],
                verdict_class=VERDICT_CLASSES[found],
                sequential=is_sequential(row["ci_method"]),
                significant=found != NOT_SIGNIFICANT,
            )
            rows.append(row)
        where = {"base": comp.base, "candidate": comp.candidate}
        chart = Chart(
            f"comparison-{name_id(comp.base)}-{name_id(comp.candidate)}",
            title,
            "",
            {**where, "alpha": alpha, "rows": rows},
        )
        section.charts.append(chart)
        summary = comp.summary
        blocks.append(
            {
                **where,
                "title": title,
                "chart": chart,
                "rows": rows,
                "alpha": alpha,
                "users_in_both": _int(summary.get("users_in_both")),
                "correction": summary.get("correction"),
            }
        )
    section.body = {"comparisons": blocks}
    if skipped:
        section.notes.append(
            f"Left out, incomplete (no offline/summary/base=A/candidate=B/_SUCCESS): {', '.join(skipped)}."
        )
    return section


def _gap_diagnosis(
    train: float | None, test: float | None, online: float | None, overfit_gap: float, online_gap: float
) -> list[str]:
    out = []
    if train is not None and test is not None and train - test > overfit_gap:
        out.append("overfitting (train much higher than test)")
    if test is not None and online is not None and test - online > online_gap:
        out.append("offline/online inconsistency or leakage (test much higher than online)")
    return out


def offline_section(
    data: RunData,
    m: Metrics,
    *,
    overfit_gap: float,
    online_gap: float,
    x_key: str,
    y_key: str,
    min_days: int,
    level: float,
) -> Section:
    """Offline (train/test) AUC beside the job's online AUC, and the business-on-offline regression."""
    section = Section("offline", "Offline versus online")
    days = data.days
    missing = set(data.missing)
    gaps = [i for i, d in enumerate(days) if d in missing]
    online = [m.value(d, ALL, *ONLINE_AUC) for d in days]
    table: list[dict[str, Any]] = []
    offline = data.offline_auc
    section.body["auc_table_given"] = offline is not None  # without one, the template says how to give one
    if offline is not None and offline.empty:
        section.notes.append("The offline AUC table has no row in this range.")
    elif offline is not None:
        series = [svg.Series("online (job, pooled)", online, color="#333333")]
        payload: dict[str, Any] = {"dt": days, "online_auc": online, "models": {}}
        for i, model in enumerate(sorted(offline["model"].unique())):
            rows = offline[offline["model"] == model]
            by = {(r["dt"], r["split"]): float(r[OFFLINE_VALUE]) for r in rows.to_dict("records")}
            train = [by.get((d, "train")) for d in days]
            test = [by.get((d, "test")) for d in days]
            color = svg.PALETTE[i % len(svg.PALETTE)]
            series += [
                svg.Series(f"{model} train", train, color=color, dashed=True),
                svg.Series(f"{model} test", test, color=color),
            ]
            payload["models"][model] = {"train": train, "test": test}
            for d, tr, te, on in zip(days, train, test, online, strict=True):
                if tr is None and te is None:
                    continue
                table.append(
                    {
                        "dt": d,
                        "model": model,
                        "train": tr,
                        "test": te,
                        "online": on,
                        "train_minus_test": tr - te if tr is not None and te is not None else None,
                        "test_minus_online": te - on if te is not None and on is not None else None,
                        "diagnosis": _gap_diagnosis(tr, te, on, overfit_gap, online_gap),
                    }
                )
        table.sort(key=lambda r: (r["dt"], r["model"]))
        payload["table"] = table
        chart = svg.line_chart(
            list(range(len(days))),
            series,
            title="Train, test and online AUC per day",
            x_labels=_day_labels(days),
            tick_every=_tick_every(len(days)),
            gaps=gaps,
            width=640,
            height=240,
        )
        section.charts.append(Chart("offline-auc", "Train, test and online AUC", chart, payload, wide=True))
    section.body["auc_table"] = table
    section.body["thresholds"] = {"overfit_gap": overfit_gap, "offline_online_gap": online_gap}

    xm, ym = registry.parse_key(x_key), registry.parse_key(y_key)
    xs_all = [m.value(d, ALL, *xm) for d in days]
    ys_all = [m.value(d, ALL, *ym) for d in days]
    pairs = [(d, x, y) for d, x, y in zip(days, xs_all, ys_all, strict=True) if x is not None and y is not None]
    fit = fit_line([p[1] for p in pairs], [p[2] for p in pairs], level=level)
    x_label, y_label = metric_label(*xm), metric_label(*ym)
    verdict = (
        ""
        if fit.n >= min_days
        else f"Too few days to conclude: {fit.n} day(s) with both metrics, at least {min_days} needed "
        f"(report.min_regression_days)."
    )
    section.body["regression"] = {
        "x": x_key,
        "y": y_key,
        "x_label": x_label,
        "y_label": y_label,
        "fit": fit.as_dict(),
        "min_days": min_days,
        "verdict": verdict,
    }
    chart = svg.scatter_fit(
        [p[1] for p in pairs],
        [p[2] for p in pairs],
        [p[0] for p in pairs],
        title=f"{y_label} against {x_label}, one point per day",
        slope=fit.slope,
        intercept=fit.intercept,
        x_label=x_label,
        y_label=y_label,
    )
    section.charts.append(
        Chart(
            "regression",
            f"{y_label} against {x_label}",
            chart,
            {
                "x": x_key,
                "y": y_key,
                "dt": [p[0] for p in pairs],
                "x_values": [p[1] for p in pairs],
                "y_values": [p[2] for p in pairs],
                "fit": fit.as_dict(),
            },
        )
    )
    return section


def build_sections(
    data: RunData,
    context_metrics: pd.DataFrame,
    *,
    overfit_gap: float,
    online_gap: float,
    x_key: str,
    y_key: str,
    min_days: int,
    level: float,
) -> list[Section]:
    m = Metrics(data.tables.get("metrics", pd.DataFrame()))
    context = Metrics(context_metrics)
    sections = [
        headline_section(data, m, context),
        trends_section(data, m),
        curves_section(data, m),
        lorenz_section(data, m),
        slices_section(data, m),
        quality_section(data),
    ]
    for optional in (
        experiments_section(data),
        windows_section(data),
        offline_runs_section(data),
        comparison_section(data),
        ope_section(data),
        simulation_section(data),
    ):
        if optional is not None:
            sections.append(optional)
    sections.append(
        offline_section(
            data,
            m,
            overfit_gap=overfit_gap,
            online_gap=online_gap,
            x_key=x_key,
            y_key=y_key,
            min_days=min_days,
            level=level,
        )
    )
    return sections


def iter_charts(sections: Iterable[Section]) -> Iterable[Chart]:
    for s in sections:
        yield from (c for c in s.charts if c.svg)
