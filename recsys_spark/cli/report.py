"""``recsys-spark report`` and ``recsys-spark evaluate --report``: the HTML report of a range of days."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from recsys_spark.cli.common import Command, date_arg, load
from recsys_spark.config import Config

HELP = "write the HTML report of a range of days"
DESCRIPTION = (
    "Read the tables the daily runs wrote for the range (complete days only) and render one self-contained "
    "HTML page: trends, curves, slices, experiments, offline runs (docs/report.md). Prints the page's path."
)
EXAMPLE = "recsys-spark report --output-root /data/eval --start 2026-10-22 --end 2026-11-20"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-root", required=True, help="root of the daily job's output tables")
    parser.add_argument("--start", type=date_arg, required=True, help="first day of the report (YYYY-MM-DD)")
    parser.add_argument("--end", type=date_arg, required=True, help="last day, inclusive")
    parser.add_argument("--out", help="the HTML file to write (default {output_root}/reports/{start}_{end}.html)")
    parser.add_argument(
        "--offline-auc",
        help="table dt, model, split, auc of the training pipeline (Parquet or .csv; default: report.offline_auc)",
    )


def run(args: argparse.Namespace) -> int:
    """``recsys-spark report``: write the page, print its path.  A SparkSession only for a non-local root."""
    from recsys_spark.report import write_report
    from recsys_spark.report.readers import is_local

    cfg = load(args)
    spark = None
    if not is_local(args.output_root) or (args.out and not is_local(args.out)):
        from recsys_spark.runtime.session import job_session  # pyspark: only once a command runs

        spark = job_session(cfg, app_name="recsys-spark-report")
    try:
        path = write_report(
            args.output_root, args.start, args.end, cfg, out=args.out, offline_auc=args.offline_auc, spark=spark
        )
    finally:
        if spark is not None:
            spark.stop()
    print(path)
    return 0


def write_day_report(spark: Any, cfg: Config, output_root: str, day: dt.date) -> str | None:
    """``evaluate --report``: the report of the ``report.window_days`` days ending on ``day``; print its path.

    Never raises: the day's tables are already written, so a report that fails is one warning line.
    """
    from recsys_spark.report import write_report

    start = day - dt.timedelta(days=cfg.report.window_days - 1)
    try:
        path = write_report(output_root, start, day, cfg, spark=spark, rolling=True)
    except Exception as exc:  # noqa: BLE001 - the evaluation itself succeeded or failed on its own
        print(f"{day}: report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    print(f"{day}: report {path}")
    return path


COMMAND = Command("report", HELP, DESCRIPTION, EXAMPLE, add_arguments, run, spark=False)
