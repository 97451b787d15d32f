"""The offline wing's sections: the offline runs side by side, their comparisons (coloured by the same rule as
the experiments), and the offline (train/test) AUC beside the job's online AUC with the business-on-offline
regression."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from recsys_spark import registry
from recsys_spark.config import ReportConfig
from recsys_spark.kernels.offline_online import TEST, run_day, worth
from recsys_spark.kernels.regression import fit_line
from recsys_spark.registry import HEADLINE
from recsys_spark.report import svg
from recsys_spark.report.colour_rule import correction_words, shown_intervals, verdict, verdict_fields
from recsys_spark.report.data import OfflineRun, RunData
from recsys_spark.report.load import OFFLINE_VALUE
from recsys_spark.report.metric_rows import Metrics
from recsys_spark.report.parts import Chart, Section, incomplete_note, name_id, runs_section
from recsys_spark.report.values import (
    all_slice,
    as_float,
    as_int,
    as_text,
    confidence_of,
    day_labels,
    is_percent,
    metric_key,
    metric_label,
    tick_every,
)
from recsys_spark.schema import ALL

ONLINE_AUC = registry.parse_key("auc_global")


def offline_runs_section(data: RunData) -> Section | None:
    """The complete offline runs side by side: each run's headline (the registry's HEADLINE keys its metrics
    table has, slice ``all``) with its interval."""
    skipped = [s for s in data.offline_skipped if s.startswith("run ")]
    section = runs_section(data, "offline-runs", "Offline runs", data.offline_runs, skipped, "offline run ")
    if section is None:
        return None
    runs = data.offline_runs
    found: dict[tuple[str, str, int | None, str], dict[str, Any]] = {}
    for run in runs:
        if run.metrics.empty:
            continue
        for rec in all_slice(run.metrics).to_dict("records"):
            found[(run.name, rec["metric"], as_int(rec.get("k")), rec["aggregation"])] = rec
    rows = []
    for metric, k, agg in HEADLINE:
        values = {}
        for run in runs:
            rec = found.get((run.name, metric, k, agg))
            if rec is not None:
                values[run.name] = {
                    "value": as_float(rec.get("value")),
                    "n": as_int(rec.get("n")),
                    "ci_low": as_float(rec.get("ci_low")),
                    "ci_high": as_float(rec.get("ci_high")),
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
    names, at = threshold_rows(runs)
    section.body = {"runs": info, "rows": rows, "threshold_metrics": names, "thresholds": at}
    section.charts.append(Chart("offline-runs", "Offline runs' headline", "", section.body))
    if runs and not rows:
        section.notes.append("No headline metric in the runs' metrics tables.")
    section.notes += incomplete_note(skipped, "offline/summary/run=NAME/_SUCCESS")
    return section


def threshold_rows(runs: list[OfflineRun]) -> tuple[list[str], list[dict[str, Any]]]:
    """The runs' threshold metrics (accuracy, precision, recall, F_alpha of the predictions, slice ``all``) and
    confusion counts, a row per (run, threshold): (the metric names in column order, the rows).  A metric
    undefined at a threshold has no row in the table, and no value here."""
    order = {name: i for i, name in enumerate(registry.THRESHOLD_METRICS)}
    names: set[str] = set()
    out = []
    for run in runs:
        values: dict[float, dict[str, Any]] = {}
        for rec in all_slice(run.thresholds).to_dict("records") if not run.thresholds.empty else []:
            names.add(str(rec["metric"]))
            values.setdefault(float(rec["threshold"]), {})[str(rec["metric"])] = {
                "value": as_float(rec.get("value")),
                "ci_low": as_float(rec.get("ci_low")),
                "ci_high": as_float(rec.get("ci_high")),
            }
        counts = {}
        for rec in all_slice(run.confusion).to_dict("records") if not run.confusion.empty else []:
            counts[float(rec["threshold"])] = {c: as_int(rec.get(c)) for c in ("tp", "fp", "tn", "fn")}
        for t in sorted(set(values) | set(counts)):
            out.append({"run": run.name, "threshold": t, "values": values.get(t, {}), **counts.get(t, {})})
    return sorted(names, key=lambda n: (order.get(n, 3), n)), out


#: a comparison row's numbers beside its sizes and means (recsys_spark/offline/compare.py)
COMPARISON_NUMBERS = ("delta", "ci_low", "ci_high", "rel_delta", "rel_ci_low", "rel_ci_high", "p_value", "p_adjusted")


#: the comparison's groups of rows, in the page's order: (the per-user column's prefix, the heading that explains
#: the rows under it, where they stand); the plain metrics first, with no heading
ROW_GROUPS: tuple[tuple[str, str], ...] = (
    ("", ""),
    ("rating_", "Rating errors (rating_…): the error of predicted against held-out ratings; lower is better"),
    (
        "sampled_",
        "Sampled, naive (sampled …): each target ranked among m sampled negatives only, not the whole catalog; "
        "biased (NDCG and recall far above the full-catalog value), compare models on these with care "
        "(docs/offline.md); the sampled AUC is unbiased",
    ),
    (
        "corrected_",
        "Sampled, corrected (corrected …): Krichene & Rendle's estimate of the full-catalog value from the same "
        "sampled ranks; close to the truth when the catalog is at most about 20 times the negatives "
        "(docs/offline.md); corrected AUC is the sampled AUC",
    ),
)


def row_group(metric: str) -> str:
    """The group of a comparison row (:data:`ROW_GROUPS`): the prefix its metric's name carries, else ``""``.

    >>> row_group("corrected_ndcg"), row_group("rating_mae"), row_group("ndcg")
    ('corrected_', 'rating_', '')
    """
    return next((p for p, _ in ROW_GROUPS if p and metric.startswith(p)), "")


def comparison_section(data: RunData) -> Section | None:
    """Each complete offline comparison (``recsys-spark offline-compare``): a table of the paired differences per
    metric, coloured by the same rule as the experiments."""
    skipped = [s for s in data.offline_skipped if s.startswith("comparison ")]
    section = runs_section(
        data, "offline-comparison", "Offline comparison", data.comparisons, skipped, "offline comparison "
    )
    if section is None:
        return None
    blocks = []
    for comp in data.comparisons:
        alpha = 1 - confidence_of(comp.summary, "confidence")
        title = f"{comp.candidate} against {comp.base}"
        rows = []
        for r in comp.rows.to_dict("records"):
            metric, k = str(r["metric"]), as_int(r.get("k"))
            # a comparison of per-user values: their means are user averages
            label = metric_label(metric, k, as_text(r.get("aggregation")) or "user_avg")
            row: dict[str, Any] = {
                "metric": metric,
                "k": k,
                "aggregation": as_text(r.get("aggregation")),
                "column": as_text(r.get("column")),
                "label": label,
                "n": as_int(r.get("n")),
                "base": as_float(r.get("base_mean")),
                "candidate": as_float(r.get("candidate_mean")),
                **{c: as_float(r.get(c)) for c in COMPARISON_NUMBERS},
                "method": as_text(r.get("method")),
                "ci_method": as_text(r.get("ci_method")),
                "correction": as_text(r.get("correction")),
            }
            found = verdict(
                metric, row["delta"], row["p_adjusted"], alpha, row["ci_low"], row["ci_high"], row["ci_method"]
            )
            row.update(verdict_fields(found, row["ci_method"]))
            df = row["n"] - 1.0 if row["method"] == "paired_t" and row["n"] and row["n"] >= 2 else None
            row.update(shown_intervals(row, alpha, df), group=row_group(metric))
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
        groups = [
            {"prefix": prefix, "heading": heading, "rows": [r for r in rows if r["group"] == prefix]}
            for prefix, heading in ROW_GROUPS
        ]
        blocks.append(
            {
                **where,
                "title": title,
                "chart": chart,
                "rows": rows,
                "groups": [g for g in groups if g["rows"]],
                "alpha": alpha,
                "users_in_both": as_int(summary.get("users_in_both")),
                "correction": correction_words(summary.get("correction")),
            }
        )
    section.body = {"comparisons": blocks}
    section.notes += incomplete_note(skipped, "offline/summary/base=A/candidate=B/_SUCCESS")
    return section


@dataclass(frozen=True)
class OnlineSettings:
    """What offline versus online reads of ``[report]`` (docs/report.md), named as there: the gaps that name a
    diagnosis (train - test above ``overfit_gap``: overfitting; test - online above ``offline_online_gap``:
    inconsistency or leakage), and the regression of ``regression_y`` on ``regression_x`` (metric keys) at
    ``regression_level``, concluded from ``min_regression_days`` days; x from the offline runs
    ``regression_model.YYYY-MM-DD`` when ``regression_model`` is set, and the offline run
    ``regression_candidate``'s predicted y (:mod:`recsys_spark.kernels.offline_online`)."""

    overfit_gap: float
    offline_online_gap: float
    regression_x: str
    regression_y: str
    min_regression_days: int
    regression_level: float
    regression_model: str = ""
    regression_candidate: str = ""

    @classmethod
    def of(cls, settings: ReportConfig) -> OnlineSettings:
        """The fields of the same names in ``settings``."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})


def _gap_diagnosis(
    train: float | None, test: float | None, online: float | None, overfit_gap: float, online_gap: float
) -> list[str]:
    out = []
    if train is not None and test is not None and train - test > overfit_gap:
        out.append("overfitting (train much higher than test)")
    if test is not None and online is not None and test - online > online_gap:
        out.append("offline/online inconsistency or leakage (test much higher than online)")
    return out


def _auc_rows(
    model: str,
    days: list[str],
    train: list[float | None],
    test: list[float | None],
    online: list[float | None],
    overfit_gap: float,
    online_gap: float,
) -> list[dict[str, Any]]:
    """One model's rows of the AUC table: the days with a train or test AUC, their gaps and diagnoses."""
    table = []
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
    return table


def auc_chart(
    data: RunData, offline: pd.DataFrame, online: list[float | None], overfit_gap: float, online_gap: float
) -> tuple[Chart, list[dict[str, Any]]]:
    """Train and test AUC per model (the training pipeline's table) beside the job's online AUC per day, with
    missing days as grey columns; and the table of their gaps, by day and model."""
    days = data.days
    missing = set(data.missing)
    series = [svg.Series("online (job, pooled)", online, color="#333333")]
    payload: dict[str, Any] = {"dt": days, "online_auc": online, "models": {}}
    table: list[dict[str, Any]] = []
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
        table += _auc_rows(model, days, train, test, online, overfit_gap, online_gap)
    table.sort(key=lambda r: (r["dt"], r["model"]))
    payload["table"] = table
    chart = svg.line_chart(
        list(range(len(days))),
        series,
        title="Train, test and online AUC per day",
        x_labels=day_labels(days),
        tick_every=tick_every(len(days)),
        gaps=[i for i, d in enumerate(days) if d in missing],
        width=640,
        height=240,
    )
    return Chart("offline-auc", "Train, test and online AUC", chart, payload, wide=True), table


def run_value(run: OfflineRun, metric: str, k: int | None, aggregation: str) -> float | None:
    """The value of (``metric``, ``k``, ``aggregation``) in an offline run's metrics table, slice ``all``
    (None: no such row, or a null value)."""
    if run.metrics.empty:
        return None
    for rec in all_slice(run.metrics).to_dict("records"):
        if rec["metric"] == metric and as_int(rec.get("k")) == k and rec["aggregation"] == aggregation:
            return as_float(rec.get("value"))
    return None


def runs_by_day(runs: list[OfflineRun], model: str, split: str = TEST) -> dict[str, OfflineRun]:
    """The offline runs of ``model``'s ``split`` by the day their name spells (``MODEL.YYYY-MM-DD``)."""
    out = {}
    for run in runs:
        found = run_day(run.name)
        if found is not None and found.model == model and found.split == split:
            out[found.dt] = run
    return out


def auc_from_runs(runs: list[OfflineRun], days: list[str]) -> pd.DataFrame | None:
    """The train/test AUC table (``dt, model, split, auc``) from the offline runs whose name spells a day of
    ``days`` (their ``auc`` ``global``, slice ``all``); None when no run does."""
    rows = []
    for run in runs:
        found = run_day(run.name)
        value = run_value(run, *ONLINE_AUC) if found is not None and found.dt in days else None
        if found is not None and value is not None:
            rows.append({"dt": found.dt, "model": found.model, "split": found.split, OFFLINE_VALUE: value})
    return pd.DataFrame(rows) if rows else None


def _xs(data: RunData, m: Metrics, settings: OnlineSettings) -> list[float | None]:
    """x of each day: its online ``regression_x``, or that of ``regression_model``'s offline run of the day."""
    xm = registry.parse_key(settings.regression_x)
    if not settings.regression_model:
        return [m.value(d, ALL, *xm) for d in data.days]
    runs = runs_by_day(data.offline_runs, settings.regression_model)
    return [run_value(runs[d], *xm) if d in runs else None for d in data.days]


def prediction(data: RunData, settings: OnlineSettings, xs: list, ys: list) -> dict[str, Any] | None:
    """The candidate run's predicted ``regression_y`` (:func:`kernels.offline_online.worth`), or None when no
    candidate is configured.  Only from offline x (``regression_model``): an offline value read on a line fit
    to online values would be a different quantity."""
    name = settings.regression_candidate
    if not name:
        return None
    runs = {r.name: r for r in data.offline_runs}
    if not settings.regression_model or name not in runs:
        why = (
            "set report.regression_model (the x of the days must be offline values, as the candidate's)"
            if settings.regression_model == ""
            else f"no complete offline run {name} under the output root"
        )
        empty = {"candidate": name, "x": None, "y": None, "low": None, "high": None}
        return empty | {"level": settings.regression_level, "n": 0, "note": why}
    x0 = run_value(runs[name], *registry.parse_key(settings.regression_x))
    return worth(xs, ys, x0, settings.regression_level, settings.min_regression_days, name)


def regression(data: RunData, m: Metrics, settings: OnlineSettings) -> tuple[dict[str, Any], Chart]:
    """The regression of the business metric ``y_key`` on the offline metric ``x_key`` across the days with
    both (slice ``all``): its fit, and the verdict "too few days" below ``min_days``; the candidate's
    prediction; and its scatter chart."""
    x_key, y_key = settings.regression_x, settings.regression_y
    min_days, level = settings.min_regression_days, settings.regression_level
    days = data.days
    xm, ym = registry.parse_key(x_key), registry.parse_key(y_key)
    xs_all = _xs(data, m, settings)
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
    body = {
        "x": x_key,
        "y": y_key,
        "x_label": x_label,
        "y_label": y_label,
        "fit": fit.as_dict(),
        "min_days": min_days,
        "verdict": verdict,
        "model": settings.regression_model,  # "": x from the days' online values
        "prediction": prediction(data, settings, xs_all, ys_all),
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
    payload = {
        "x": x_key,
        "y": y_key,
        "dt": [p[0] for p in pairs],
        "x_values": [p[1] for p in pairs],
        "y_values": [p[2] for p in pairs],
        "fit": fit.as_dict(),
        "model": settings.regression_model,
        "prediction": body["prediction"],
    }
    return body, Chart("regression", f"{y_label} against {x_label}", chart, payload)


def offline_section(data: RunData, m: Metrics, settings: OnlineSettings) -> Section:
    """Offline (train/test) AUC beside the job's online AUC, and the business-on-offline regression."""
    section = Section("offline", "Offline versus online")
    overfit_gap, online_gap = settings.overfit_gap, settings.offline_online_gap
    online = [m.value(d, ALL, *ONLINE_AUC) for d in data.days]
    table: list[dict[str, Any]] = []
    offline = data.offline_auc
    from_runs = auc_from_runs(data.offline_runs, data.days)  # runs named MODEL.YYYY-MM-DD: no table to keep
    if from_runs is not None:
        offline = from_runs if offline is None else pd.concat([offline, from_runs], ignore_index=True)
        section.notes.append(
            f"{len(from_runs)} AUC value(s) from the offline runs named MODEL.YYYY-MM-DD "
            "(or MODEL.train.YYYY-MM-DD): their auc (global)."
        )
    section.body["auc_table_given"] = offline is not None  # without one, the template says how to give one
    if offline is not None and offline.empty:
        section.notes.append("The offline AUC table has no row in this range.")
    elif offline is not None:
        chart, table = auc_chart(data, offline, online, overfit_gap, online_gap)
        section.charts.append(chart)
    section.body["auc_table"] = table
    section.body["thresholds"] = {"overfit_gap": overfit_gap, "offline_online_gap": online_gap}
    section.body["regression"], chart = regression(data, m, settings)
    section.charts.append(chart)
    return section
