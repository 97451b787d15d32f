"""Where offline runs and comparisons are written: ``{output_root}/offline/{table}/{partition}``.

Each table has its own root, as the daily tables do, so that it reads whole with pandas, Spark or DuckDB
(``run`` or ``base``/``candidate`` become columns)::

    offline/metrics/run=NAME/        offline/user_metrics/run=NAME/      offline/lorenz/run=NAME/
    offline/calibration/run=NAME/    offline/summary/run=NAME/summary.json and _SUCCESS
    offline/comparison/base=A/candidate=B/    offline/summary/base=A/candidate=B/summary.json and _SUCCESS

Written through the daily tables' own output (:class:`recsys_spark.io.output.DailyOutput`: a lock per run,
staging, the journalled commit, ``_SUCCESS`` last): a run or comparison is complete when its summary's
``_SUCCESS`` exists.  A rerun replaces the run's partition of every table and removes the ones it no
longer writes.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession

from recsys_spark.config import Config, check_name
from recsys_spark.io.output import SUMMARY, DailyOutput

#: the tables of an offline run (``run=NAME``) and of a comparison (``base=A/candidate=B``)
RUN_TABLES = ("metrics", "user_metrics", "lorenz", "calibration", SUMMARY)
COMPARE_TABLES = ("comparison", SUMMARY)


def root_of(output_root: str) -> str:
    return f"{output_root.rstrip('/')}/offline"


def run_partition(run: str) -> str:
    return f"run={check_name(run, 'offline run')}"


def compare_partition(base: str, candidate: str) -> str:
    return f"base={check_name(base, 'offline base run')}/candidate={check_name(candidate, 'offline candidate run')}"


def run_complete(output_root: str, run: str) -> str:
    """The marker of a complete run: ``offline/summary/run=NAME/_SUCCESS``."""
    return f"{root_of(output_root)}/{SUMMARY}/{run_partition(run)}/_SUCCESS"


def open_run(spark: SparkSession, cfg: Config, output_root: str, run: str) -> DailyOutput:
    """The output of one offline run, its lock taken (a second run of the same name fails clearly)."""
    return _open(spark, cfg, output_root, f"run {run}", RUN_TABLES, run_partition(run))


def open_comparison(spark: SparkSession, cfg: Config, output_root: str, base: str, candidate: str) -> DailyOutput:
    return _open(spark, cfg, output_root, f"{base} vs {candidate}", COMPARE_TABLES, compare_partition(base, candidate))


def _open(spark: SparkSession, cfg: Config, output_root: str, label: str, owned, partition: str) -> DailyOutput:
    out = DailyOutput(
        spark,
        root_of(output_root),
        label,
        cfg.output.stale_minutes,
        owned=owned,
        heartbeat_seconds=cfg.output.heartbeat_seconds,
        partition=partition,
    )
    out.acquire()
    return out


def commit(out: DailyOutput, summary: dict[str, Any]) -> None:
    """Stage the summary (``summary.json``) and commit every staged table; ``_SUCCESS`` last."""
    out.stage_text(SUMMARY, "summary.json", json.dumps(summary, indent=2, sort_keys=True))
    out.commit()
