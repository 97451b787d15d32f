"""``recsys-spark simulate``: a candidate's lists for the logged requests, judged for all that needs no feedback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from recsys_spark.cli.common import PROG, Command, date_arg, load, start_logging
from recsys_spark.cli.evaluate import dates_of
from recsys_spark.errors import BACKFILL_FAILED, JobError, UsageError, root_cause
from recsys_spark.runtime import signals
from recsys_spark.tables import check_name

HELP = "judge a candidate's lists for the logged requests for all that needs no feedback (offline simulation)"
DESCRIPTION = (
    "Give each logged request of the day the candidate's list (simulation.lists), then compute everything that "
    "needs no feedback -- coverage, failure rates, Gini and Lorenz, diversity, novelty, personalization, update "
    "rate against the logged day, every business rule but the feedback ones -- and write it to "
    "simulation/{metrics,lorenz,rule_checks,summary}/run=NAME/dt=D/ (docs/ope.md)."
)
EXAMPLE = (
    "recsys-spark simulate --run ranker_v3 --date 2026-11-20 --input-root /data/logs --output-root /data/eval "
    "--set 'simulation.lists=\"/data/candidates/ranker_v3/lists/dt={date}\"'"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="name of the candidate (letters, digits, . _ -)")
    parser.add_argument("--date", type=date_arg, help="the logged day to simulate (YYYY-MM-DD)")
    parser.add_argument("--start", type=date_arg, help="first day of a range (with --end)")
    parser.add_argument("--end", type=date_arg, help="last day of a range, inclusive")
    parser.add_argument("--input-root", required=True, help="root of the input tables (the logged days)")
    parser.add_argument("--output-root", required=True, help="root of the output tables")


def lines(label: str, summary: Mapping[str, Any]) -> list[str]:
    """The simulated day's status, its headline (the metrics that need no feedback) and its requests."""
    parts = [f"{k}={v:.4f}" for k, v in summary["headline"].items() if v is not None]
    sim = summary["simulation"]
    out = [f"{label}: {summary['status']} (simulation {sim['run']})  " + "  ".join(parts)]
    failed = [r["rule"] for r in summary.get("rules", []) if not r["passed"]]
    if failed:
        out.append(f"{label}: rules failed: {', '.join(failed)}")
    out.append(
        f"{label}: requests logged={sim.get('logged_requests')} answered={sim.get('answered')} "
        f"candidate rows for unlogged requests={sim.get('rows_not_logged')}"
    )
    return out


def run(args: argparse.Namespace) -> int:
    from recsys_spark import daily

    check_name(args.run, "--run", UsageError)
    dates = dates_of(args)
    cfg = load(args)
    start_logging(args)
    from recsys_spark.runtime.session import job_session  # pyspark: only once a command runs

    spark = job_session(cfg, args.master, args.verbose)
    failed: list[str] = []
    try:
        for day in dates:
            try:
                summary = daily.evaluate_day(spark, cfg, day, args.input_root, args.output_root, args.run)
            except Exception as exc:  # noqa: BLE001 - a range names every failed date and goes on
                signals.checkpoint()  # but not past an error a SIGTERM caused: it stops
                if len(dates) == 1:
                    raise
                failed.append(day.isoformat())
                reason = (
                    str(exc) if isinstance(exc, JobError) else f"unexpected {type(exc).__name__}: {root_cause(exc)}"
                )
                print(f"{day}: failed: {reason}", file=sys.stderr)
                continue
            for line in lines(str(day), summary):
                print(line)
    finally:
        spark.stop()
    if failed:
        print(f"{PROG}: error: {len(failed)} of {len(dates)} dates failed: {', '.join(failed)}", file=sys.stderr)
        return BACKFILL_FAILED
    return 0


COMMAND = Command("simulate", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
