"""``recsys-spark offline`` and ``recsys-spark offline-compare``: a model evaluated before it ships."""

from __future__ import annotations

import argparse

from recsys_spark.cli.common import Command, load, start_logging
from recsys_spark.errors import UsageError
from recsys_spark.tables import check_name

HELP = "evaluate a model offline (lists, predictions, ratings, sampled)"
DESCRIPTION = (
    "Evaluate a candidate's top-K lists against held-out truth, its CTR predictions, its ratings and sampled "
    "metrics done right; write offline/{metrics,user_metrics,...}/run=NAME/ (docs/offline.md)."
)
EXAMPLE = "recsys-spark offline --run model_b --output-root /data/eval --config offline.toml"
COMPARE_HELP = "paired comparison of two offline runs, user by user"
COMPARE_DESCRIPTION = (
    "The paired difference of every metric of two offline runs over the users both scored, with intervals "
    "and adjusted p-values; write offline/comparison/base=A/candidate=B/ (docs/offline.md)."
)
COMPARE_EXAMPLE = "recsys-spark offline-compare --output-root /data/eval --base model_a --candidate model_b"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="name of this offline run (letters, digits, . _ -)")
    parser.add_argument("--output-root", required=True, help="root of the output tables")


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, help="run name of the base model")
    parser.add_argument("--candidate", required=True, help="run name of the candidate model")
    parser.add_argument("--output-root", required=True, help="root of the output tables")


def run(args: argparse.Namespace) -> int:
    names = (
        [("--run", args.run)] if args.command == "offline" else [("--base", args.base), ("--candidate", args.candidate)]
    )
    for flag, name in names:
        check_name(name, flag, UsageError)
    cfg = load(args)
    if args.command == "offline":
        from recsys_spark.offline.inputs import check_evaluable

        check_evaluable(cfg)  # before Spark starts: a config with nothing to evaluate fails in a second
    start_logging(args)
    from recsys_spark.runtime.session import job_session  # pyspark: only once a command runs

    spark = job_session(cfg, args.master, args.verbose)
    try:
        if args.command == "offline":
            from recsys_spark.offline.run import run_offline

            summary = run_offline(spark, cfg, args.run, args.output_root)
            print(f"offline run={args.run}: evaluated {', '.join(summary['evaluations'])}")
            for name, value in summary["headline"].items():
                print(f"  {name} = {'null' if value is None else f'{value:.4f}'}")
            for note in summary["notes"]:
                print(f"  note: {note}")
        else:
            from recsys_spark.offline.compare import compare_runs

            summary = compare_runs(spark, cfg, args.output_root, args.base, args.candidate)
            print(
                f"offline-compare base={args.base} candidate={args.candidate}: {summary['users_in_both']} users "
                f"in both, {summary['metrics']} metrics, p adjusted by {summary['correction']}"
            )
            for r in summary["rows"]:
                if r[6] is not None:
                    print(f"  {r[0]:<28} delta={r[6]:+.4f} [{_f(r[8])}, {_f(r[9])}] p_adj={_f(r[14])}")
    finally:
        spark.stop()
    return 0


def _f(v) -> str:
    return "null" if v is None else f"{v:.4f}"


COMMAND = Command("offline", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
COMPARE = Command("offline-compare", COMPARE_HELP, COMPARE_DESCRIPTION, COMPARE_EXAMPLE, add_compare_arguments, run)
