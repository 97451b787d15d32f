"""``recsys-spark gate``: check a candidate against thresholds on the bounds of its intervals (docs/gate.md)."""

from __future__ import annotations

import argparse

from recsys_spark.cli.common import Command, load, start_logging
from recsys_spark.errors import GateFailed, GateInconclusive

HELP = "check a candidate model against thresholds on its interval bounds (exit 12 failed, 13 not enough evidence)"
DESCRIPTION = (
    "Read an offline comparison (offline-compare: candidate against base, paired over users) or an experiment "
    "window (recsys-spark experiment: a variant against the control), check each [[gate.checks]] threshold of "
    'the config on the interval\'s least favourable bound (or on the point with on = "point"), write the '
    "verdict to OUT/gate/NAME/verdict.json and print one line. Exit 0: every check passed; 13: not enough evidence "
    "yet (no check failed, an interval straddles its threshold); 12: a check failed (a missing slice or metric "
    "fails by name); 3: a bad config. With --set gate.fail_on_verdict=false: 0 once the verdict is written "
    "(docs/gate.md)."
)
EXAMPLE = "recsys-spark gate --name ranker_v2 --output-root /data/eval --config gate.toml --set gate.end=2026-11-20"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", required=True, help="the gate's name: its verdict is OUT/gate/NAME/verdict.json")
    parser.add_argument(
        "--output-root", required=True, help="the output root the other commands wrote (read, and the verdict written)"
    )


def run(args: argparse.Namespace) -> int:
    """Load the [gate] config, check it, write the verdict, print its one line; exit as its state says."""
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
    if verdict.get("worth"):  # information beside the checks (report.regression_model), never the exit code
        print(verdict["worth"]["line"])
    return exit_code(verdict["state"], cfg.gate.fail_on_verdict)


#: the command's exit code per verdict state (docs/operations.md, "Exit codes")
EXIT_CODES = {"passed": 0, "inconclusive": GateInconclusive.exit_code, "failed": GateFailed.exit_code}


def exit_code(state: str, fail_on_verdict: bool = True) -> int:
    """0 passed, 13 inconclusive, 12 failed; 0 whatever the state with ``gate.fail_on_verdict = false``."""
    return EXIT_CODES[state] if fail_on_verdict else 0


COMMAND = Command("gate", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
