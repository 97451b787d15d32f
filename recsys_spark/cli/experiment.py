"""``recsys-spark experiment``: one experiment over a window of days already evaluated."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from recsys_spark.cli.common import Command, date_arg, load, start_logging
from recsys_spark.cli.lines import experiment_lines
from recsys_spark.errors import HardRuleViolation, UsageError
from recsys_spark.tables import check_name

HELP = "analyse one experiment over a window of days already evaluated"
DESCRIPTION = (
    "Count each user of the experiment once over the days the daily runs analysed, compare every variant with "
    "the control, and write experiment_window/ and experiment_window_checks/ (docs/experiments.md)."
)
EXAMPLE = "recsys-spark experiment --experiment ranker_v2 --start 2026-11-14 --end 2026-11-20 --output-root /data/eval"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--experiment", required=True, help="the experiment's name in the assignments table (letters, digits, . _ -)"
    )
    parser.add_argument("--start", type=date_arg, required=True, help="first day of the window")
    parser.add_argument("--end", type=date_arg, required=True, help="last day of the window, inclusive")
    parser.add_argument("--output-root", required=True, help="the daily job's output root (read and written)")


def run(args: argparse.Namespace) -> int:
    """Build the session, analyse the window, print its lines."""
    from recsys_spark.experiments.window import run_window

    check_name(args.experiment, "--experiment", UsageError)  # it names the window's directory
    if args.end < args.start:
        raise UsageError(f"--end {args.end} is before --start {args.start}")
    cfg = load(args)
    start_logging(args)
    from recsys_spark.runtime.session import job_session  # pyspark: only once a command runs

    spark = job_session(cfg, args.master, args.verbose)
    try:
        section = run_window(spark, cfg, args.experiment, args.start, args.end, args.output_root)
    finally:
        spark.stop()
    label = f"{args.start}..{args.end}"
    print(
        f"{label}: {section['status']}  experiment={args.experiment} days={len(section['days_found'])} "
        f"rows={section['rows']}"
    )
    for line in experiment_lines(label, section):
        print(line)
    fail_on_hard_rules(section, cfg.experiments.srm_severity)
    return 0


def fail_on_hard_rules(section: Mapping[str, Any], severity: str) -> None:
    """Exit 8 (:class:`HardRuleViolation`, after the window's tables are written) when the window's SRM test
    failed or nothing was compared and ``experiments.srm_severity`` is ``hard``: what the daily job does for
    its rules ``experiment_srm:<name>`` and ``experiment_compared:<name>``."""
    if severity == "hard" and section["status"] in ("srm_failed", "not_compared"):
        raise HardRuleViolation(
            f"experiment {section['experiment']} {section['start']}..{section['end']}: {section['status']} with "
            "experiments.srm_severity = hard (outputs written; see experiment_window_checks)"
        )


COMMAND = Command("experiment", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
