"""The day's summary: the one file a scheduler or an alert reads (status, headline, counts, notes)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession

from recsys_spark.config import Config
from recsys_spark.daily.day import Day, Labelled, Metrics, Simulation
from recsys_spark.io.output import Output
from recsys_spark.per_user.aggregate import MetricRow
from recsys_spark.registry import HEADLINE, key, needs_feedback
from recsys_spark.runtime import fs
from recsys_spark.schema import ALL
from recsys_spark.steps.rules import RuleResult, as_dicts
from recsys_spark.tables import DAILY, SUMMARY


def status_of(results: Sequence[RuleResult]) -> str:
    """``ok`` only when every rule passed; else ``hard_rule_violated`` or ``soft_rule_failed``."""
    if any(r.severity == "hard" and not r.passed for r in results):
        return "hard_rule_violated"
    if any(not r.passed for r in results):
        return "soft_rule_failed"
    return "ok"


def day_notes(day: Day, out: Output) -> list[str]:
    """Notes on the day's inputs that are not metrics' own."""
    notes = []
    n, examples = day.valid.catalog_conflicts
    if n:
        notes.append(
            f"{n} items are listed under several categories in the items table; each keeps its "
            f"smallest category (e.g. {', '.join(examples)})"
        )
    if day.valid.unweighted_events:
        names = ", ".join(f"{k} ({v})" for k, v in day.valid.unweighted_events.items())
        notes.append(f"events whose name has no weight in labels.event_weights (they weigh 0): {names}")
    if out.swept:
        notes.append(f"removed staging directories of dead runs: {', '.join(out.swept)}")
    if out.recovered:
        notes.append(f"finished the commit a killed run had started: {', '.join(out.recovered)}")
    return notes


def build_summary(
    cfg: Config,
    day: Day,
    labelled: Labelled,
    metrics: Metrics,
    rows: Sequence[MetricRow],
    results: Sequence[RuleResult],
    notes: Sequence[str],
    experiments: Mapping[str, Any],
    timings: Mapping[str, float],
    simulation: Simulation | None = None,
) -> dict[str, Any]:
    """The one file a scheduler or an alert reads: status, headline metrics, data-quality counts, rules,
    notes, the experiments' section, seconds per stage and the config.  A simulated day's has a
    ``simulation`` section (run, lists, request counts), and no feedback metric or count."""
    valid = day.valid
    by_key = {(r.metric, r.k, r.aggregation): r.value for r in rows if r.slice == ALL}
    summary: dict[str, Any] = {
        "date": day.iso,
        "status": status_of(results),
        "config_hash": cfg.fingerprint(),
        "inputs": {"exposures": day.paths.exposures, "clicks": day.paths.clicks},
        "headline": {key(m, k, a): by_key.get((m, k, a)) for m, k, a in HEADLINE},
        "input_rows": {"exposures": valid.exposure_counts["rows"], "clicks": valid.click_counts["rows"]},
        "data_quality": {
            "rejected_exposures": {k: v for k, v in valid.exposure_counts.items() if k != "rows"},
            "rejected_clicks": {k: v for k, v in valid.click_counts.items() if k != "rows"},
            **labelled.labels,
            **metrics.unit_counts.get(ALL, {}),
            "unweighted_events": dict(valid.unweighted_events),
            "items_in_several_categories": valid.catalog_conflicts[0],
        },
        "seconds": dict(timings),
        "config": cfg.to_dict(),
        "rules": as_dicts(results),
        "provisional": day.history.provisional,
        "notes": list(notes),
        "experiments": dict(experiments),
    }
    if simulation is not None:
        summary["headline"] = {key(m, k, a): by_key.get((m, k, a)) for m, k, a in HEADLINE if not needs_feedback(m)}
        summary["inputs"] = {"exposures": day.paths.exposures, "lists": simulation.lists}
        summary["input_rows"] = {"exposures": valid.exposure_counts["rows"]}
        quality = summary["data_quality"]
        for name in ("attributed_events", "orphan_events", "relevant_exposures", "clicked_exposures", "late_events"):
            quality.pop(name, None)
        quality.pop("rejected_clicks", None)
        quality.pop("unweighted_events", None)
        summary["simulation"] = {"run": simulation.run, "lists": simulation.lists, **(day.inputs.simulated or {})}
    return summary


def read_summary(spark: SparkSession, output_root: str, date: str) -> dict[str, Any]:
    """The summary a previous run wrote for ``date``."""
    return json.loads(fs.read_text(spark, f"{DAILY.path(output_root, SUMMARY, dt=date)}/{DAILY.summary_file}"))
