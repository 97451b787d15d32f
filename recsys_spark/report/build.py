"""From :class:`~recsys_spark.report.data.RunData` to the page's sections: numbers, charts, and their data.

Each chart is a :class:`Chart`: its SVG and the plain data it was drawn from
(embedded next to it as JSON).  Sections degrade gracefully: no interval
columns, no band or whisker; no experiments table, no experiment section; no
offline AUC table, a note saying how to give one.
"""

from __future__ import annotations

import datetime as dt
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


def metric_key(metric: str, k: int | None, aggregation: str) -> str:
    """The registry's one spelling of a metric row (:func:`recsys_spark.registry.key`)."""
    return registry.key(metric, k, aggregation)


def metric_label(metric: str, k: int | None, aggregation: str) -> str:
    """Reader's name of a metric row.

    >>> metric_label("ndcg", 10, "user_avg")
    'NDCG@10 (user avg)'
    """
    found = registry.find(metric)
    name = found.reader_name if found is not None else metric.replace("_", " ")
    return f"{name}{'@' + str(k) if k else ''} ({AGG_NAMES.get(aggregation, aggregation.replace('_', ' '))})"


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
def headline_section(data: RunData, m: Metrics, context: Metrics) -> Section:
    """The last day's headline metrics with intervals, and the change from the day before and a week before."""
    day = data.last_day
    section = Section("headline", "Headline")
    if day is None:
        section.notes.append("No day of the range has outputs.")
        return section
    prev = (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat()
    week = (dt.date.fromisoformat(day) - dt.timedelta(days=7)).isoformat()
    rows = []
    for metric, k, agg in HEADLINE:
        row = m.get(day, ALL, metric, k, agg)
        value = _num(row["value"]) if row else None
        interval = m.interval(row)

        def change(
            other: str, key: tuple[str, int | None, str] = (metric, k, agg), current: float | None = value
        ) -> dict[str, float | None]:
            base = m.value(other, ALL, *key)
            if base is None:
                base = context.value(other, ALL, *key)
            delta = current - base if current is not None and base is not None else None
            rel = delta / abs(base) if delta is not None and base else None
            return {"base": base, "delta": delta, "rel": rel}

        rows.append(
            {
                "key": metric_key(metric, k, agg),
                "label": metric_label(metric, k, agg),
                "value": value,
                "ci_low": interval[0] if interval else None,
                "ci_high": interval[1] if interval else None,
                "se": _num(row.get("se")) if row else None,
                "n": _int(row.get("n")) if row else None,
                "percent": is_percent(metric),
                "previous_day": {"date": prev, **change(prev)},
                "week_before": {"date": week, **change(week)},
            }
        )
    summary = data.summaries.get(day, {})
    rules = summary.get("rules") or _rules_of(data, day)
    failed_hard = [r["rule"] for r in rules if not r["passed"] and r["severity"] == "hard"]
    failed_soft = [r["rule"] for r in rules if not r["passed"] and r["severity"] == "soft"]
    quality = summary.get("data_quality", {})
    rejected = sum(quality.get("rejected_exposures", {}).values()) + sum(quality.get("rejected_clicks", {}).values())
    section.body = {
        "day": day,
        "previous_day": prev,
        "week_before": week,
        "rows": rows,
        "has_ci": m.has_ci,
        "status": summary.get("status", "no summary"),
        "rules_checked": len(rules),
        "failed_hard": failed_hard,
        "failed_soft": failed_soft,
        "quality": {
            "input_exposures": summary.get("input_rows", {}).get("exposures"),
            "input_clicks": summary.get("input_rows", {}).get("clicks"),
            "rows_set_aside": rejected,
            "duplicate_exposures": quality.get("duplicate_exposures"),
            "orphan_events": quality.get("orphan_events"),
            "users": quality.get("users"),
            "lists": quality.get("lists"),
        },
        "notes": summary.get("notes", []),
    }
    section.charts.append(Chart("headline", "Headline metrics", "", {"day": day, "rows": rows}))
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
    section.body = stats
    return section


def slices_section(data: RunData, m: Metrics) -> Section:
    """Per slice dimension, a dot-and-whisker chart per metric against the ``all`` value (last day)."""
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
    for dim, slices in sorted(by_dim.items()):
        for i, (metric, k, agg) in enumerate(SLICE_METRICS):
            reference = m.value(day, ALL, metric, k, agg)
            rows, payload_rows = [], []
            for s in slices:
                row = m.get(day, s, metric, k, agg)
                interval = m.interval(row)
                value = _num(row["value"]) if row else None
                n = _int(row["n"]) if row else None
                label = s.split("=", 1)[1] + (f" (n={n})" if n is not None else "")
                low, high = interval or (None, None)
                rows.append(svg.Whisker(label, value, low, high, color=svg.PALETTE[i]))
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
                reference_label=f"all = {svg.fmt(reference)}",
                label_width=130,
                percent=False,
            )
            section.charts.append(
                Chart(
                    f"slice-{slug(dim)}-{slug(metric_key(metric, k, agg))}",
                    f"{title} by {dim}",
                    chart,
                    {
                        "dt": day,
                        "dimension": dim,
                        "metric": metric,
                        "k": k,
                        "aggregation": agg,
                        "all": reference,
                        "rows": payload_rows,
                    },
                )
            )
    if not m.has_ci:
        section.notes.append("No interval columns in the metrics table: dots without whiskers.")
    return section


REASON_COLORS = {"exposures": svg.PALETTE[0], "clicks": svg.PALETTE[3], "join": svg.PALETTE[4]}


def quality_section(data: RunData) -> Section:
    section = Section("quality", "Data quality and rules")
    day = data.last_day
    if day is None:
        return section
    summary = data.summaries.get(day, {})
    quality = summary.get("data_quality", {})
    labels, values, colors, payload = [], [], [], []
    for source in ("exposures", "clicks"):
        for reason, count in sorted(quality.get(f"rejected_{source}", {}).items()):
            labels.append(f"{source}: {reason}")
            values.append(float(count))
            colors.append(REASON_COLORS[source])
            payload.append({"source": source, "reason": reason, "rows": int(count)})
    for name in ("duplicate_exposures", "orphan_events"):
        if quality.get(name) is not None:
            labels.append(name.replace("_", " "))
            values.append(float(quality[name]))
            colors.append(REASON_COLORS["join"])
            payload.append({"source": "labelling", "reason": name, "rows": int(quality[name])})
    if summary:
        section.charts.append(
            Chart(
                "set-aside",
                f"Rows set aside, {day}",
                svg.bar_chart(labels, values, title=f"Rows set aside per reason, {day}", colors=colors),
                {"dt": day, "rows": payload},
            )
        )
    rules = _rules_of(data, day) or summary.get("rules", [])
    section.body["rules"] = [
        {k: r.get(k) for k in ("rule", "severity", "violations", "rate", "threshold", "passed")} for r in rules
    ]
    section.body["day"] = day
    days = data.days
    missing = set(data.missing)
    hard, soft = [], []
    for d in days:
        day_rules = _rules_of(data, d) or data.summaries.get(d, {}).get("rules", [])
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


def experiments_section(data: RunData) -> Section | None:
    """Per experiment (last day with the table): SRM banner, forest plot of relative lifts, sizes and MDE."""
    frame = data.tables.get("experiments", pd.DataFrame())
    if frame.empty:
        return None
    day = max(frame["dt"])
    frame = frame[frame["dt"] == day]
    checks = data.tables.get("experiment_checks", pd.DataFrame())
    checks = checks[checks["dt"] == day] if not checks.empty else checks
    section = Section("experiments", "Experiments")
    section.body = {"day": day, "experiments": []}
    if "slice" in frame.columns and (frame["slice"] == ALL).any():
        frame = frame[frame["slice"] == ALL]
    for name in sorted(frame["experiment"].unique()):
        rows = frame[frame["experiment"] == name]
        exp_checks = []
        if not checks.empty:
            for r in checks[checks["experiment"] == name].to_dict("records"):
                exp_checks.append(
                    {
                        "check": r["check"],
                        "statistic": _num(r.get("statistic")),
                        "p_value": _num(r.get("p_value")),
                        "passed": bool(r["passed"]),
                        "detail": "" if r.get("detail") is None else str(r.get("detail")),
                    }
                )
        srm = [c for c in exp_checks if "srm" in c["check"].lower()]
        whiskers, table = [], []
        for r in rows.to_dict("records"):
            k = _int(r.get("k"))
            label = f"{r['variant']}: {metric_label(r['metric'], k, r['aggregation'])}"
            rel, lo, hi = _num(r.get("rel_delta")), _num(r.get("rel_ci_low")), _num(r.get("rel_ci_high"))
            significant = lo is not None and hi is not None and (lo > 0 or hi < 0)
            color = (
                svg.PALETTE[2]
                if significant and rel is not None and rel > 0
                else svg.PALETTE[1]
                if significant
                else svg.GREY
            )
            whiskers.append(
                svg.Whisker(label, rel, lo, hi, color=color, note=f" (p adj = {svg.fmt(_num(r.get('p_adjusted')))})")
            )
            table.append(
                {
                    key: (
                        _num(r.get(key))
                        if key not in ("variant", "metric", "aggregation", "method", "k")
                        else (k if key == "k" else r.get(key))
                    )
                    for key in (
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
                        "mde",
                    )
                }
            )
            table[-1]["label"] = label
            table[-1]["significant"] = significant
        chart = svg.dot_whisker(
            whiskers,
            title=f"{name}: relative lift against control",
            reference=0.0,
            reference_label="no change",
            width=640,
            percent=True,
            label_width=250,
            x_label="relative lift (treatment - control) / control",
        )
        section.charts.append(
            Chart(
                f"forest-{slug(name)}",
                f"{name}: relative lift",
                chart,
                {"dt": day, "experiment": name, "rows": table, "checks": exp_checks},
                wide=True,
            )
        )
        section.body["experiments"].append(
            {
                "name": name,
                "chart": section.charts[-1],
                "rows": table,
                "checks": exp_checks,
                "srm": srm,
                "srm_failed": any(not c["passed"] for c in srm),
            }
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
    if offline is None:
        section.notes.append(
            "No offline AUC table: give one with report.offline_auc (config) or --offline-auc "
            "(a table dt, model, split, auc with split train or test)."
        )
    elif offline.empty:
        section.notes.append("The offline AUC table has no row in this range.")
    else:
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
    experiments = experiments_section(data)
    if experiments is not None:
        sections.append(experiments)
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
