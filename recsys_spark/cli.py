"""Command line: ``recsys-spark evaluate --date YYYY-MM-DD --input-root DIR --output-root DIR ...``.

Parses arguments, loads the config, builds the one SparkSession, runs the
pipeline for each date and turns expected failures into one line on stderr
and a documented exit code (see :mod:`recsys_spark.errors`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Sequence
from typing import NoReturn

from recsys_spark import signals
from recsys_spark.errors import BACKFILL_FAILED, HardRuleViolation, JobError, UsageError, root_cause

PROG = "recsys-spark"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        raise UsageError(message)


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date in YYYY-MM-DD form: {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Daily evaluation of recommender exposure/click logs.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    ev = commands.add_parser("evaluate", help="evaluate one day (or a range of days)")
    ev.add_argument("--date", type=_date, help="the day to evaluate (YYYY-MM-DD)")
    ev.add_argument("--start", type=_date, help="first day of a backfill (with --end)")
    ev.add_argument("--end", type=_date, help="last day of a backfill, inclusive")
    ev.add_argument("--fail-fast", action="store_true", help="stop a backfill at the first failed date")
    ev.add_argument("--input-root", required=True, help="root of the input tables")
    ev.add_argument("--output-root", required=True, help="root of the output tables")
    ev.add_argument("--config", help="TOML settings file (default: built-in defaults, as conf/default.toml)")
    ev.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting, VALUE in TOML (repeatable): --set metrics.k=[5,10]",
    )
    ev.add_argument("--master", help="Spark master URL (default local[*]; spark-submit's when submitted)")
    ev.add_argument("--verbose", action="store_true", help="full tracebacks and INFO logs")
    ev.add_argument("--report", action="store_true", help="then write the HTML report ending on the last day")
    xp = commands.add_parser("experiment", help="analyse one experiment over a window of days already evaluated")
    xp.add_argument("--experiment", required=True, help="the experiment's name in the assignments table")
    xp.add_argument("--start", type=_date, required=True, help="first day of the window")
    xp.add_argument("--end", type=_date, required=True, help="last day of the window, inclusive")
    xp.add_argument("--output-root", required=True, help="the daily job's output root (read and written)")
    xp.add_argument("--config", help="TOML settings file ([experiments] is what matters here)")
    xp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one setting")
    xp.add_argument("--master", help="Spark master URL (default local[*])")
    xp.add_argument("--verbose", action="store_true", help="full tracebacks and INFO logs")

    from recsys_spark.offline.cli import add_parsers as add_offline_parsers

    add_offline_parsers(commands)

    from recsys_spark.report.cli import add_arguments

    add_arguments(commands.add_parser("report", help="write the HTML report of a range of days"), _date)
    return parser


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


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command; return the exit code."""
    verbose = "--verbose" in (argv if argv is not None else sys.argv[1:])
    signals.terminate_on_sigterm()
    try:
        args = build_parser().parse_args(argv)
        if args.command == "experiment":
            from recsys_spark.experiments import window_command

            return window_command(args)
        if args.command in ("offline", "offline-compare"):
            from recsys_spark.offline.cli import main as offline_main

            return offline_main(args)
        if args.command == "report":
            from recsys_spark.report.cli import run_report

            return run_report(args)
        return _evaluate(args)
    except JobError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except signals.Terminated:
        print(f"{PROG}: terminated (SIGTERM): the date's lock and staging were released", file=sys.stderr)
        return signals.TERMINATED_EXIT
    except Exception as exc:  # noqa: BLE001 - last resort: still one line, with the root cause
        if verbose:
            import traceback

            traceback.print_exc()
        print(
            f"{PROG}: error: unexpected {type(exc).__name__}: {root_cause(exc, 500)} (rerun with --verbose)",
            file=sys.stderr,
        )
        return 1


def _evaluate(args: argparse.Namespace) -> int:
    from recsys_spark import log
    from recsys_spark.config import load_config

    dates = dates_of(args)
    cfg = load_config(args.config, args.set)
    log.setup_logging(args.verbose)
    from recsys_spark.daily import evaluate_day
    from recsys_spark.experiments import experiment_lines
    from recsys_spark.schema import HEADLINE, summary_key
    from recsys_spark.session import build_session, job_settings

    settings = {
        "spark.sql.session.timeZone": cfg.validation.time_zone,
        **job_settings(cfg.execution.arrow_batch_rows, cfg.spark),
    }
    spark = build_session(
        master=args.master, settings=settings, log_level="INFO" if args.verbose else cfg.execution.log_level
    )
    failed: list[str] = []
    written: list[dt.date] = []  # dates whose outputs were committed (a hard rule violation commits them)
    try:
        for day in dates:
            try:
                summary = evaluate_day(spark, cfg, day, args.input_root, args.output_root)
            except Exception as exc:  # noqa: BLE001 - a backfill names every failed date and goes on
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
            _print_headline(day, summary, HEADLINE, summary_key)
            for line in experiment_lines(str(day), summary.get("experiments")):
                print(line)
    finally:
        if args.report and dates[-1] in written:  # never a report of a day that was not written
            from recsys_spark.report.cli import write_day_report

            write_day_report(spark, cfg, args.output_root, dates[-1])
        elif args.report:
            print(f"{PROG}: no report: {dates[-1]} was not written", file=sys.stderr)
        spark.stop()
    if failed:
        print(f"{PROG}: error: {len(failed)} of {len(dates)} dates failed: {', '.join(failed)}", file=sys.stderr)
        return BACKFILL_FAILED
    return 0


def _print_headline(day: dt.date, summary: dict, headline, name) -> None:
    values = summary["headline"]
    parts = [
        f"{name(m, k, a)}={values[name(m, k, a)]:.4f}" for m, k, a in headline if values.get(name(m, k, a)) is not None
    ]
    quality = summary["data_quality"]
    failed = [r["rule"] for r in summary.get("rules", []) if not r["passed"]]
    print(f"{day}: {summary['status']}  " + "  ".join(parts))
    if summary.get("provisional"):
        print(f"{day}: provisional: the next day's clicks are not there yet (late feedback); rerun to complete it")
    if failed:
        print(f"{day}: rules failed: {', '.join(failed)} (see rule_checks/dt={day})")
    print(
        f"{day}: rows exposures={summary['input_rows']['exposures']} clicks={summary['input_rows']['clicks']} "
        f"duplicates={quality['duplicate_exposures']} orphan_events={quality['orphan_events']} "
        f"lists_without_relevant={quality.get('lists_without_relevant')} "
        f"users_without_auc={quality.get('users_without_auc')}"
    )


def main() -> NoReturn:
    sys.exit(run())


if __name__ == "__main__":
    main()
