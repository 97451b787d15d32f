"""The daily wing's sections, from the days' metrics, Lorenz and rule tables and their summaries: the headline,
the trends, the metrics at k, the exposure concentration, the slices, data quality and rules.

Two of the report's rules live here (docs/report.md): an item-level slice dimension
(:func:`item_level_dimensions`) is never drawn against the ``all`` line it cannot be compared with, and no
metric that is 1 by construction on logged lists takes a headline row (:data:`HEADLINE_ROWS`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from recsys_spark import registry
from recsys_spark.registry import HEADLINE, LIST_METRICS
from recsys_spark.report import svg
from recsys_spark.report.data import RunData
from recsys_spark.report.metric_rows import Metrics
from recsys_spark.report.parts import Chart, Section, slug
from recsys_spark.report.values import (
    as_float,
    as_int,
    bounds,
    day_labels,
    is_percent,
    metric_key,
    metric_label,
    tick_every,
)
from recsys_spark.schema import ALL

#: what the slice charts show, the concentration figures, and the online AUC beside the offline one (metric keys,
#: read by the registry)
SLICE_METRICS = (
    registry.parse_key("ndcg@10_user_avg"),
    registry.parse_key("auc_user_avg"),
    registry.parse_key("exposure_ctr_global"),
)

GINI_CATALOG, GINI_EXPOSED = registry.parse_key("gini_catalog"), registry.parse_key("gini_exposed")

#: its ``n`` is the number of catalog items a slice sees: all of them for ``all`` and every dimension that is not
#: item-level, the items of the bucket for an item-level one (recsys_spark/steps/health.py, ``_whole_catalog``)
ITEM_COVERAGE = registry.parse_key("item_coverage_global")

#: slice dimensions that are attributes of the item whatever the input: its popularity bucket and its category
ITEM_DIMENSIONS = ("popularity", "category", "item_age", "item_new")

#: metrics that are 1 by construction on logged lists, where every relevant (clicked) item is in the list: recall@k
#: whenever the lists are no longer than k, hit rate@k for every list with a click.  Never a headline row.
ONE_ON_LOGGED_LISTS = (registry.parse_key("recall@10_global")[0], registry.parse_key("hit_rate@10_user_avg")[0])

#: the headline's rows: the registry's HEADLINE without those
HEADLINE_ROWS = tuple(h for h in HEADLINE if h[0] not in ONE_ON_LOGGED_LISTS)

#: trends drawn after the headline's: how much the clicks lean on a few users (docs/metrics.md, "Robustness";
#: click_concentration and clicks_gini are lower-is-better in the registry)
ROBUSTNESS_TRENDS = registry.ROBUSTNESS

#: the metric@k curves: the list metrics and F1 (docs/metrics.md, "F-scores and thresholds")
CURVE_METRICS = (*LIST_METRICS, registry.f_score_name(1.0))


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


def configured_rows(m: Metrics, day: str) -> list[tuple[str, int | None, str]]:
    """The day's composite and survey metrics (slice ``all``, ``user_avg``), composites first, each by name: a
    composite of the config (:func:`registry.is_composite`), or a ``user_avg`` metric without k that the
    registry does not know (a composite of a config the report was not given); then the survey questions."""
    names = {mt for (d, s, mt, k, a) in m.rows if d == day and s == ALL and a == "user_avg" and k is None}
    composites = sorted(n for n in names if registry.is_composite(n) or registry.lookup(n) is None)
    surveys = sorted(n for n in names if registry.survey_metric(n) is not None)
    return [(n, None, "user_avg") for n in (*composites, *surveys)]


def headline_rows(m: Metrics, context: Metrics, day: str, prev: str, week: str) -> list[dict[str, Any]]:
    """The headline's rows (:data:`HEADLINE_ROWS`, then the composite and survey metrics of the day:
    :func:`configured_rows`) on ``day``: value, interval, ``se``, ``n``, and the change from ``prev`` and
    ``week`` (read from ``context`` when outside the range), each marked within or outside the day's interval
    (:func:`noise`)."""
    rows = []
    for metric, k, agg in (*HEADLINE_ROWS, *configured_rows(m, day)):
        row = m.get(day, ALL, metric, k, agg)
        value = as_float(row["value"]) if row else None
        low, high = m.interval(row) or (None, None)

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
                "se": as_float(row.get("se")) if row else None,
                "n": as_int(row.get("n")) if row else None,
                "percent": is_percent(metric),
                "previous_day": {"date": prev, **change(prev)},
                "week_before": {"date": week, **change(week)},
            }
        )
    return rows


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
    rows = headline_rows(m, context, day, prev, week)
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
            "violations": as_int(r["violations"]),
            "rate": as_float(r["rate"]),
            "threshold": as_float(r["threshold"]),
            "passed": bool(r["passed"]),
        }
        for r in frame[frame["dt"] == day].to_dict("records")
    ]


def trends_section(data: RunData, m: Metrics) -> Section:
    """One small chart per headline metric, then per robustness metric (:data:`ROBUSTNESS_TRENDS`), over the range;
    a band when intervals exist; grey columns for gaps."""
    section = Section("trends", "Trends")
    days = data.days
    gaps = [i for i, d in enumerate(days) if d in set(data.missing)]
    labels = day_labels(days)
    for metric, k, agg in (*HEADLINE, *ROBUSTNESS_TRENDS):
        rows = [m.get(d, ALL, metric, k, agg) for d in days]
        values = [as_float(r["value"]) if r else None for r in rows]
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
            tick_every=tick_every(len(days)),
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
    for i, metric in enumerate(CURVE_METRICS):
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
    """The last day's Lorenz curve of exposures over items (slice ``all``), the Gini coefficients and the share
    of exposures taken by the top 1 % and 10 % of items."""
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
    whole = as_int(catalog.get("n")) if catalog else None
    out = []
    for dim in dims:
        seen = [
            as_int(row.get("n"))
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


def slice_chart(
    m: Metrics, day: str, dim: str, slices: list[str], is_item: bool, key: tuple[str, int | None, str], color: str
) -> Chart | None:
    """One metric (``key``) over the ``slices`` of dimension ``dim`` on ``day``: a row per value with its ``n``
    and interval, against the ``all`` value unless the dimension is item-level; None when no slice has it."""
    metric, k, agg = key
    reference = None if is_item else m.value(day, ALL, metric, k, agg)
    rows, payload_rows = [], []
    for s in slices:
        row = m.get(day, s, metric, k, agg)
        interval = m.interval(row)
        value = as_float(row["value"]) if row else None
        n = as_int(row["n"]) if row else None
        label = s.split("=", 1)[1] + (f" (n={n})" if n is not None else "")
        low, high = interval or (None, None)
        rows.append(svg.Whisker(label, value, low, high, color=color))
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
        return None
    title = metric_label(metric, k, agg)
    chart = svg.dot_whisker(
        rows,
        title=f"{title} by {dim}",
        reference=reference,
        reference_label="" if is_item else f"all = {svg.fmt(reference)}",
        label_width=130,
        percent=False,
    )
    return Chart(
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
        is_item = dim in item_level
        drawn = (
            slice_chart(m, day, dim, by_dim[dim], is_item, key, SLICE_COLORS[i % len(SLICE_COLORS)])
            for i, key in enumerate(SLICE_METRICS)
        )
        charts = [chart for chart in drawn if chart is not None]
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
        name: as_int(quality.get(name)) for name in ("duplicate_exposures", "orphan_events") if name in quality
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
        day_labels(days),
        [svg.Series("hard", hard, color=svg.PALETTE[1]), svg.Series("soft", soft, color=svg.PALETTE[3])],
        title="Failed rules per day",
        gaps=[i for i, d in enumerate(days) if d in missing],
        tick_every=tick_every(len(days)),
        y_label="failed rules",
    )
    section.charts.append(
        Chart("rule-failures", "Failed rules per day", chart, {"dt": days, "failed_hard": hard, "failed_soft": soft})
    )
    return section
