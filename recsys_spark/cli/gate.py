"""``recsys-spark gate``: check a candidate against thresholds on the bounds of its intervals (docs/gate.md)."""

from __future__ import annotations

import argparse

from recsys_spark.cli.common import Command, load, start_logging
from recsys_spark.errors import GateFailed

HELP = "check a candidate model against thresholds on its interval bounds (exit 12 when a check fails)"
DESCRIPTION = (
    "Read an offline comparison (offline-compare: candidate against base, paired over users) or an experiment "
    "window (recsys-spark experiment: a variant against the control), check each [[gate.checks]] threshold of "
    'the config on the interval\'s least favourable bound (or on the point with on = "point"), write the '
    "verdict to OUT/gate/NAME/verdict.json and print one line. Exit 0: every check passed; 12: a check failed "
    "(a missing slice or metric fails by name); 3: a bad config (docs/gate.md)."
)
EXAMPLE = "recsys-spark gate --name ranker_v2 --output-root /data/eval --config gate.toml --set gate.end=2026-11-20"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", required=True, help="the gate's name: its verdict is OUT/gate/NAME/verdict.json")
    parser.add_argument(
        "--output-root", required=True, help="the output root the other commands wrote (read, and the verdict written)"
    )


def run(args: argparse.Namespace) -> int:
    """Load the [gate] config, check it, write the verdict, print its one line; 12 when a check failed."""
    from recsys_spark.gate import check_name, run_gate, validate

    check_name(args.name)
    cfg = load(args)
    validate(cfg.gate)  # a bad config: one line and exit 3 before Spark starts
    start_logging(args)
    from recsys_spark.runtime.session import job_session  # pyspark: only once a command runs

    spark = job_session(cfg, args.master, args.verbose, app_name=f"recsys-spark-gate-{args.name}")
    try:
        verdict = run_gate(spark, cfg, args.name, args.output_root)
    finally:
        spark.stop()
    print(f"{verdict['summary']} -> {verdict['path']}")
    return 0 if verdict["passed"] else GateFailed.exit_code


COMMAND = Command("gate", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
