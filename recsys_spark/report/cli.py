"""The report's command-line bodies: ``recsys-spark report`` and ``recsys-spark evaluate --report``.

:mod:`recsys_spark.cli` only parses the arguments and calls these.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from recsys_spark.config import Config


def add_arguments(parser: argparse.ArgumentParser, date_type: Any) -> None:
    """The ``report`` subcommand's arguments."""
    parser.add_argument("--output-root", required=True, help="root of the daily job's output tables")
    parser.add_argument("--start", type=date_type, required=True, help="first day of the report (YYYY-MM-DD)")
    parser.add_argument("--end", type=date_type, required=True, help="last day, inclusive")
    parser.add_argument("--out", help="the HTML file to write (default {output_root}/reports/{start}_{end}.html)")
    parser.add_argument(
        "--offline-auc",
        help="table dt, model, split, auc of the training pipeline (Parquet or .csv; default: report.offline_auc)",
    )
    parser.add_argument("--config", help="TOML settings file (the [report] section is read)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting: --set report.min_regression_days=14",
    )
    parser.add_argument("--verbose", action="store_true", help="full tracebacks")


def run_report(args: argparse.Namespace) -> int:
    """``recsys-spark report``: write the page, print its path.  A SparkSession only for a non-local root."""
    from recsys_spark.config import load_config
    from recsys_spark.report import write_report
    from recsys_spark.report.data import is_local

    cfg = load_config(args.config, args.set)
    spark = None
    if not is_local(args.output_root) or (args.out and not is_local(args.out)):
        from recsys_spark.session import build_session

        spark = build_session(app_name="recsys-spark-report", log_level="ERROR")
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
