"""``recsys-spark ope``: a candidate policy's reward estimated from the logged days (off-policy evaluation)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from recsys_spark.cli.common import Command, date_arg, load, start_logging
from recsys_spark.errors import UsageError
from recsys_spark.tables import check_name

HELP = "estimate a candidate policy's reward from the logged days (off-policy evaluation)"
DESCRIPTION = (
    "Label the logged days as the daily job does, weigh each logged row by the candidate's probability of "
    "showing it (ope.target) over the logging policy's propensity, and write the estimates (IPS, SNIPS, DM, DR, "
    "SNDR, Switch-DR, replay; slate IPS, IIPS, RIPS) with intervals and the diagnostics to "
    "ope/{estimates,diagnostics,summary}/run=NAME/ (docs/ope.md)."
)
EXAMPLE = (
    "recsys-spark ope --run ranker_v3 --start 2026-11-14 --end 2026-11-20 --input-root /data/logs "
    "--output-root /data/eval --set 'ope.target=\"/data/candidates/ranker_v3\"'"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="name of this OPE run (letters, digits, . _ -)")
    parser.add_argument("--start", type=date_arg, required=True, help="first logged day")
    parser.add_argument("--end", type=date_arg, required=True, help="last logged day, inclusive")
    parser.add_argument("--input-root", required=True, help="root of the input tables (the logged days)")
    parser.add_argument("--output-root", required=True, help="root of the output tables")


def check_arguments(args: argparse.Namespace) -> None:
    check_name(args.run, "--run", UsageError)
    if args.end < args.start:
        raise UsageError(f"--end {args.end} is before --start {args.start}")


def lines(summary: Mapping[str, Any]) -> list[str]:
    """What the command prints: a line for the run, one per estimate, one per note."""
    out = [
        f"ope run={summary['run']} {summary['start']}..{summary['end']}: {summary['status']}  "
        f"users={int(summary['diagnostics']['users'] or 0)} rows={int(summary['diagnostics']['rows'] or 0)} "
        f"ess={_f(summary['diagnostics']['effective_sample_size'])}"
    ]
    for name, value in summary["estimates"].items():
        out.append(f"  {name:<12} {_f(value)}")
    out += [f"  note: {note}" for note in summary["notes"]]
    return out


def _f(value: float | None) -> str:
    return "null" if value is None else f"{value:.6g}"


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    cfg = load(args)
    from recsys_spark.ope.candidate import target_location

    target_location(cfg, args.input_root, args.run)  # an empty ope.target fails before Spark starts
    start_logging(args)
    from recsys_spark.runtime.session import job_session  # pyspark: only once a command runs

    spark = job_session(cfg, args.master, args.verbose)
    try:
        from recsys_spark.ope.run import run_ope

        summary = run_ope(spark, cfg, args.run, args.start, args.end, args.input_root, args.output_root)
    finally:
        spark.stop()
    for line in lines(summary):
        print(line)
    return 0


COMMAND = Command("ope", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
