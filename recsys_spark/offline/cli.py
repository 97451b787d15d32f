"""Bodies of ``recsys-spark offline`` and ``recsys-spark offline-compare`` (the parser lives in :mod:`cli`)."""

from __future__ import annotations

import argparse
import re

from recsys_spark.errors import UsageError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def add_parsers(commands) -> None:
    """Register both subcommands on the ``add_subparsers`` object of :func:`cli.build_parser`."""
    off = commands.add_parser("offline", help="evaluate a model offline (lists, predictions, ratings, sampled)")
    off.add_argument("--run", required=True, help="name of this offline run (letters, digits, . _ -)")
    cmp = commands.add_parser("offline-compare", help="paired comparison of two offline runs, user by user")
    cmp.add_argument("--base", required=True, help="run name of the base model")
    cmp.add_argument("--candidate", required=True, help="run name of the candidate model")
    for p in (off, cmp):
        p.add_argument("--output-root", required=True, help="root of the output tables")
        p.add_argument("--config", help="TOML settings file ([offline] section)")
        p.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override one setting, VALUE in TOML (repeatable): --set offline.truth=/data/test",
        )
        p.add_argument("--master", help="Spark master URL (default local[*]; spark-submit's when submitted)")
        p.add_argument("--verbose", action="store_true", help="full tracebacks and INFO logs")


def _check_name(flag: str, name: str) -> None:
    if not _NAME.match(name):
        raise UsageError(f"{flag} {name!r}: use letters, digits, '.', '_' and '-' only")


def main(args: argparse.Namespace) -> int:
    from recsys_spark import log
    from recsys_spark.config import load_config
    from recsys_spark.session import build_session, job_settings

    names = (
        [("--run", args.run)] if args.command == "offline" else [("--base", args.base), ("--candidate", args.candidate)]
    )
    for flag, name in names:
        _check_name(flag, name)
    cfg = load_config(args.config, args.set)
    if args.command == "offline":
        from recsys_spark.offline.pipeline import check_evaluable

        check_evaluable(cfg)  # before Spark starts: a config with nothing to evaluate fails in a second
    log.setup_logging(args.verbose)
    spark = build_session(
        master=args.master,
        settings=job_settings(cfg.execution.arrow_batch_rows, cfg.spark),
        log_level="INFO" if args.verbose else cfg.execution.log_level,
    )
    try:
        if args.command == "offline":
            from recsys_spark.offline.pipeline import run_offline

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
