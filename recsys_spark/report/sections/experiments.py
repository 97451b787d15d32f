"""The experiments' sections: a day's experiments (the last day with the ``experiments`` table) and the
experiment windows ending in the range, each experiment as one block (:func:`experiment_block`): its SRM
verdict, a forest plot of relative lifts coloured by the colour rule, and its table."""

from __future__ import annotations

from typing import Any

import pandas as pd

from recsys_spark.report import svg
from recsys_spark.report.colour_rule import VERDICT_COLORS, correction_words, shown_intervals, verdict, verdict_fields
from recsys_spark.report.data import RunData
from recsys_spark.report.parts import Chart, Section, slug
from recsys_spark.report.values import all_slice, as_float, as_int, as_text, confidence_of, metric_label

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
            row[key] = as_int(r.get(key))
        elif key in TEXT_COLUMNS:
            row[key] = as_text(r.get(key))
        else:
            row[key] = as_float(r.get(key))
    delta = row["delta"] if row["delta"] is not None else row["rel_delta"]
    low, high = (
        (row["rel_ci_low"], row["rel_ci_high"]) if row["rel_ci_low"] is not None else (row["ci_low"], row["ci_high"])
    )
    found = verdict(row["metric"] or "", delta, row["p_adjusted"], alpha, low, high, row["ci_method"])
    row.update(label=label, **verdict_fields(found, row["ci_method"]))
    row.update(shown_intervals(row, alpha))
    return row


def _whisker(row: dict[str, Any], label: str) -> svg.Whisker:
    sequential = ", sequential interval" if row["sequential"] else ""
    return svg.Whisker(
        label,
        row["rel_delta"],
        row["adj_rel_ci_low"],
        row["adj_rel_ci_high"],
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
            "statistic": as_float(r.get("statistic")),
            "p_value": as_float(r.get("p_value")),
            "passed": bool(r["passed"]),
            "detail": "" if as_text(r.get("detail")) is None else str(r.get("detail")),
        }
        for r in frame[frame["experiment"] == name].to_dict("records")
    ]


def correction_of(summary: dict[str, Any] | None) -> str:
    """The p-value adjustment the day's run used (the summary's ``config.experiments.correction``), in words.

    >>> correction_of({"config": {"experiments": {"correction": "holm"}}}), correction_of(None)
    ('Holm-adjusted', 'adjusted')
    """
    return correction_words(((summary or {}).get("config") or {}).get("experiments", {}).get("correction"))


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
        label = f"{r['variant']}: {metric_label(r['metric'], as_int(r.get('k')), r['aggregation'])}"
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


def experiments_section(data: RunData) -> Section | None:
    """Per experiment (last day with the table): SRM banner, forest plot of relative lifts, sizes and MDE."""
    frame = data.tables.get("experiments", pd.DataFrame())
    if frame.empty:
        return None
    day = max(frame["dt"])
    frame = all_slice(frame[frame["dt"] == day])
    checks = data.tables.get("experiment_checks", pd.DataFrame())
    checks = checks[checks["dt"] == day] if not checks.empty else checks
    alpha = 1 - confidence_of(data.summaries.get(day), "config", "stats", "confidence")
    section = Section("experiments", "Experiments")
    section.body = {"day": day, "alpha": alpha, "experiments": []}
    for name in sorted(frame["experiment"].unique()):
        block = experiment_block(
            name, frame[frame["experiment"] == name], checks, alpha, f"forest-{slug(name)}", name, {"dt": day}
        )
        block["correction"] = correction_of(data.summaries.get(day))
        section.charts.append(block["chart"])
        section.body["experiments"].append(block)
    section.body["interactions"] = interaction_rows(
        data.tables.get("experiment_interactions", pd.DataFrame()), day, alpha
    )
    return section


def interaction_rows(frame: pd.DataFrame, day: str, alpha: float) -> list[dict[str, Any]]:
    """The day's ``experiment_interactions`` rows for the page (docs/experiments.md, "Interactions"): each pair's
    contrast, interval and adjusted p, ``flagged`` when the adjusted p is below ``alpha`` (the soft rule's)."""
    if frame.empty or "dt" not in frame.columns:
        return []
    rows = []
    for r in frame[frame["dt"] == day].to_dict("records"):
        p_adjusted = as_float(r.get("p_adjusted"))
        rows.append(
            {
                "a": f"{r['experiment_a']} {r['variant_a']} ({r['layer_a']})",
                "b": f"{r['experiment_b']} {r['variant_b']} ({r['layer_b']})",
                "metric": metric_label(r["metric"], as_int(r.get("k")), r["aggregation"]),
                "contrast": as_float(r.get("contrast")),
                "ci_low": as_float(r.get("ci_low")),
                "ci_high": as_float(r.get("ci_high")),
                "p_value": as_float(r.get("p_value")),
                "p_adjusted": p_adjusted,
                "users": as_int(r.get("users")),
                "flagged": p_adjusted is not None and p_adjusted < alpha,
            }
        )
    return rows


def windows_section(data: RunData) -> Section | None:
    """The experiment windows ending in the range (``recsys-spark experiment``): per experiment and window, the
    same part as a day's experiment."""
    frame = data.windows
    if frame.empty:
        return None
    frame = all_slice(frame)
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
        block["correction"] = correction_of(data.summaries.get(data.last_day or ""))
        section.charts.append(block["chart"])
        section.body["windows"].append(block)
    return section
