"""``recsys-spark evaluate``: one day, or each day of a range, by the daily wing; a line per day."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Mapping
from typing import Any

from recsys_spark.cli.common import PROG, Command, date_arg, import_meanwhile, load, start_logging
from recsys_spark.cli.lines import experiment_lines, headline_lines
from recsys_spark.errors import BACKFILL_FAILED, HardRuleViolation, JobError, UsageError, root_cause
from recsys_spark.runtime import log, signals

HELP = "evaluate one day (or each day of a range) of exposure and click logs"
DESCRIPTION = (
    "Read the day's exposures and clicks, label them, compute every metric with its interval, scan the business "
    "rules and write the day's tables under --output-root (docs/operations.md)."
)
EXAMPLE = "recsys-spark evaluate --date 2026-11-20 --input-root /data/logs --output-root /data/eval"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--date", type=date_arg, help="the day to evaluate (YYYY-MM-DD)")
    parser.add_argument("--start", type=date_arg, help="first day of a backfill (with --end)")
    parser.add_argument("--end", type=date_arg, help="last day of a backfill, inclusive")
    parser.add_argument("--fail-fast", action="store_true", help="stop a backfill at the first failed date")
    parser.add_argument("--input-root", required=True, help="root of the input tables")
    parser.add_argument("--output-root", required=True, help="root of the output tables")
    parser.add_argument("--report", action="store_true", help="then write the HTML report ending on the last day")


def dates_of(args: argparse.Namespace) -> list[dt.date]:
    if args.date and (args.start or args.end):
        raise UsageError("give either --date or --start/--end, not both")
    if args.date:
        return [args.date]
    if not (args.start and args.end):
        raise UsageError("--date (or --start and --end) is required")
    if args.end < args.start:
        raise UsageError(f"--end {args.end} is before --start {args.start}")
    return [args.start + dt.timedelta(days=i) for i in range((args.end - args.start).days + 1)]


def run(args: argparse.Namespace) -> int:
    """Evaluate each date in one session; a backfill names every failed date and goes on (unless
    ``--fail-fast``), exit 9 when some failed; a single date exits with its own code."""
    dates = dates_of(args)
    cfg = load(args)
    start_logging(args)
    from recsys_spark.config import templates
    from recsys_spark.runtime import jvm
    from recsys_spark.runtime.session import job_session  # pyspark: only once a command runs

    # one small day: a short process, where the optimizing compiler costs more than it gives (a backfill runs on)
    options = templates.InputSettings.of(cfg.input)
    first = templates.resolve(cfg.input.exposures, args.input_root, dates[0], "exposures", options)
    size = None if len(dates) > 1 else jvm.input_bytes([first])
    meanwhile = import_meanwhile("recsys_spark.daily", "scipy.stats")  # while the JVM starts
    try:
        small = size is not None and size < jvm.SMALL_INPUT_BYTES
        spark = job_session(cfg, args.master, args.verbose, small_input=small)
    finally:  # never an interpreter that exits mid-import (a refused session exits at once)
        meanwhile.join()
    from recsys_spark import daily

    failed: list[str] = []
    written: list[dt.date] = []  # dates whose outputs were committed (a hard rule violation commits them)
    started = time.monotonic()
    try:
        for index, day in enumerate(dates):
            if len(dates) > 1:  # a backfill: where it is, and an estimate from the days done
                per_day = (time.monotonic() - started) / index if index else None
                eta = None if per_day is None else round(per_day * (len(dates) - index))
                log.event("day", index=index + 1, of=len(dates), date=day.isoformat(), eta_seconds=eta)
            try:
                summary = daily.evaluate_day(spark, cfg, day, args.input_root, args.output_root)
            except Exception as exc:  # noqa: BLE001 - a backfill names every failed date and goes on
                signals.checkpoint()  # but not past an error a SIGTERM caused: it stops
                if isinstance(exc, HardRuleViolation):
                    written.append(day)
                if len(dates) == 1:
                    raise
                failed.append(day.isoformat())
                reason = (
                    str(exc)
                    if isinstance(exc, JobError)
                    else f"unexpected {type(exc).__name__}: {root_cause(exc, 500)}"
                )
                print(f"{day}: failed: {reason}", file=sys.stderr)
                if args.fail_fast:
                    break
                continue
            written.append(day)
            _print_day(day, summary)
    finally:
        report = args.report and not signals.received()  # stopped by SIGTERM: no report, no line about it
        if report and dates[-1] in written:  # never a report of a day that was not written
            from recsys_spark.cli.report import write_day_report

            write_day_report(spark, cfg, args.output_root, dates[-1])
        elif report:
            print(f"{PROG}: no report: {dates[-1]} was not written", file=sys.stderr)
        spark.stop()
    if failed:
        print(f"{PROG}: error: {len(failed)} of {len(dates)} dates failed: {', '.join(failed)}", file=sys.stderr)
        return BACKFILL_FAILED
    return 0


def _print_day(day: dt.date, summary: Mapping[str, Any]) -> None:
    for line in headline_lines(str(day), summary):
        print(line)
    for line in experiment_lines(str(day), summary.get("experiments")):
        print(line)


COMMAND = Command("evaluate", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
