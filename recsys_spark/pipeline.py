"""The daily evaluation, end to end: read, validate, label, per-user, aggregate, write.

:func:`evaluate_day` takes the session and plain settings, returns the summary
dict it wrote.  Each stage is one call into a module named for it; this file
only wires them and times them.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from recsys_spark import fs, log
from recsys_spark.aggregate import aggregate_users, metrics_frame
from recsys_spark.config import Config
from recsys_spark.errors import EmptyInputError
from recsys_spark.label import deduplicate_exposures, join_feedback, label_counts, labelled_exposures
from recsys_spark.per_user import bucket_count, ranking_input, user_metrics
from recsys_spark.pooled_auc import pooled_auc
from recsys_spark.read import CLICK_COLUMNS, EXPOSURE_COLUMNS, conform, read_parquet
from recsys_spark.schema import ALL, SCORE
from recsys_spark.validate import click_checks, count_rows, exposure_checks, split_rows, tag_rows
from recsys_spark.write import SUMMARY, DailyOutput

#: metrics printed by the CLI and put first in the summary: (metric, k, aggregation)
HEADLINE = (
    ("auc", None, "global"),
    ("auc", None, "user_avg"),
    ("auc", None, "impression_weighted"),
    ("ndcg", 10, "user_avg"),
    ("map", 10, "user_avg"),
    ("mrr", None, "user_avg"),
    ("precision", 10, "global"),
    ("recall", 10, "global"),
    ("hit_rate", 10, "user_avg"),
)


@dataclass(frozen=True)
class InputPaths:
    exposures: str
    clicks: str
    items: str

    @classmethod
    def resolve(cls, cfg: Config, input_root: str, date: str) -> "InputPaths":
        fill = {"input_root": input_root.rstrip("/"), "date": date}
        return cls(cfg.input.exposures.format(**fill), cfg.input.clicks.format(**fill),
                   cfg.input.items.format(**fill))


def evaluate_day(spark: SparkSession, cfg: Config, date: dt.date, input_root: str, output_root: str) -> dict[str, Any]:
    """Evaluate one day and write its outputs; return the summary."""
    day = date.isoformat()
    paths = InputPaths.resolve(cfg, input_root, day)
    ks = cfg.metrics.k
    timings: dict[str, float] = {}
    out = DailyOutput(spark, output_root, day)

    with log.stage("read", timings, date=day) as info:
        exposures = conform(read_parquet(spark, paths.exposures, "exposures partition"),
                            EXPOSURE_COLUMNS, paths.exposures)
        clicks = conform(read_parquet(spark, paths.clicks, "clicks partition"), CLICK_COLUMNS, paths.clicks)
        has_score = SCORE in exposures.columns
        info["has_score"] = has_score

    with log.stage("validate", timings) as info:
        exposures_tagged = tag_rows(exposures, exposure_checks(has_score))
        clicks_tagged = tag_rows(clicks, click_checks())
        exposure_counts = count_rows(exposures_tagged)
        click_counts = count_rows(clicks_tagged)
        if exposure_counts["rows"] == 0:
            raise EmptyInputError(f"empty input exposures partition (0 rows): {paths.exposures}")
        info.update(exposure_rows=exposure_counts["rows"], click_rows=click_counts["rows"])
        good_exposures, _ = split_rows(exposures_tagged)
        good_clicks, _ = split_rows(clicks_tagged)

    try:
        with log.stage("label", timings) as info:
            joined = join_feedback(deduplicate_exposures(good_exposures), good_clicks,
                                   cfg.attribution.window_minutes, cfg.labels.event_weights,
                                   cfg.labels.click_event).persist(StorageLevel.MEMORY_AND_DISK)
            labels = label_counts(joined)
            info.update(labels)
            ranked = ranking_input(labelled_exposures(joined), cfg.ranking.list_unit, has_score)

        with log.stage("metrics", timings) as info:
            buckets = bucket_count(labels["exposures"], cfg.execution.rows_per_bucket,
                                   spark.sparkContext.defaultParallelism)
            staged_users = out.stage("user_metrics", user_metrics(ranked, ks, cfg.metrics.ndcg_gain, buckets))
            pooled = pooled_auc(ranked)
            rows, unit_counts = aggregate_users(spark.read.parquet(staged_users), ks, pooled)
            out.stage("metrics", metrics_frame(spark, rows).coalesce(1))
            info.update(buckets=buckets, metric_rows=len(rows))
    except BaseException:
        out.abort()
        raise
    finally:
        if "joined" in locals():
            joined.unpersist()

    with log.stage("write", timings):
        summary = build_summary(cfg, day, paths, exposure_counts, click_counts, labels,
                                unit_counts.get(ALL, {}), rows, timings)
        out.stage_text(SUMMARY, "summary.json", json.dumps(summary, indent=2, sort_keys=False))
        out.commit()
    log.event("done", date=day, **{k: summary["headline"][k] for k in list(summary["headline"])[:4]})
    return summary


def build_summary(cfg: Config, day: str, paths: InputPaths, exposure_counts: dict, click_counts: dict,
                  labels: dict, unit_counts: dict, rows: list, timings: dict) -> dict[str, Any]:
    """The one file a scheduler or an alert reads: headline metrics and data-quality counts."""
    by_key = {(r.metric, r.k, r.aggregation): r.value for r in rows if r.slice == ALL}
    headline = {_headline_name(m, k, a): by_key.get((m, k, a)) for m, k, a in HEADLINE}
    return {
        "date": day,
        "status": "ok",
        "config_hash": cfg.fingerprint(),
        "inputs": {"exposures": paths.exposures, "clicks": paths.clicks},
        "headline": headline,
        "input_rows": {"exposures": exposure_counts["rows"], "clicks": click_counts["rows"]},
        "data_quality": {
            "rejected_exposures": {k: v for k, v in exposure_counts.items() if k != "rows"},
            "rejected_clicks": {k: v for k, v in click_counts.items() if k != "rows"},
            **labels,
            **unit_counts,
        },
        "seconds": dict(timings),
        "config": cfg.to_dict(),
    }


def _headline_name(metric: str, k: int | None, aggregation: str) -> str:
    return f"{metric}{'@' + str(k) if k else ''}_{aggregation}"


def read_summary(spark: SparkSession, output_root: str, date: str) -> dict[str, Any]:
    """The summary a previous run wrote for ``date``."""
    return json.loads(fs.read_text(spark, f"{output_root.rstrip('/')}/{SUMMARY}/dt={date}/summary.json"))
