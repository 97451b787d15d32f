"""The command line: ``recsys-spark COMMAND ...`` (``evaluate``, ``experiment``, ``offline``, ``offline-compare``,
``plan``, ``gate``, ``ope``, ``simulate``, ``report``, ``demo``, ``warm-up``).

Parses the arguments (each command's module adds its own to the shared ones of
:func:`recsys_spark.cli.common.parent`), runs the command and turns expected failures into one line on
stderr and a documented exit code (:mod:`recsys_spark.errors`; docs/operations.md, "Exit codes").
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from recsys_spark._version import __version__
from recsys_spark.cli import demo, evaluate, experiment, gate, offline, ope, plan, report, simulate, warm_up
from recsys_spark.cli.common import PROG, Command, Parser, parent
from recsys_spark.errors import JobError, root_cause
from recsys_spark.runtime import signals

EXIT_CODES = """exit codes: 0 success, 1 unexpected error, 2 bad arguments, 3 bad configuration, 4 missing input,
5 bad schema, 6 unreadable input, 7 empty input, 8 a hard business rule was violated (outputs written),
9 some dates of a backfill failed, 10 output not writable, 11 another run holds the date's lock,
12 a gate check failed (the verdict written), 13 a gate without enough evidence yet (inconclusive; the verdict
written), 14 ope over logs without propensities (no off-policy estimate; the summary written),
143 stopped by SIGTERM (docs/operations.md)"""


#: every command, in the order ``recsys-spark --help`` lists them
COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        evaluate.COMMAND,
        experiment.COMMAND,
        plan.COMMAND,
        offline.COMMAND,
        offline.COMPARE,
        gate.COMMAND,
        ope.COMMAND,
        simulate.COMMAND,
        report.COMMAND,
        demo.COMMAND,
        warm_up.COMMAND,
    )
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Nightly evaluation of recommender exposure and click logs on Spark.",
        epilog=f"run '{PROG} COMMAND --help' for a command's arguments, an example and the exit codes",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    shared = {True: parent(spark=True), False: parent(spark=False)}
    for command in COMMANDS.values():
        sub = commands.add_parser(
            command.name,
            help=command.help,
            description=command.description,
            epilog=f"example:\n  {command.example}\n\n{EXIT_CODES}",
            parents=[shared[command.spark]],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(sub)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command; return the exit code."""
    verbose = "--verbose" in (argv if argv is not None else sys.argv[1:])
    signals.terminate_on_sigterm()
    words = list(sys.argv[1:] if argv is None else argv)
    if not words:  # a bare call: what there is to run
        build_parser().print_help()
        return 2
    try:
        args = build_parser().parse_args(words)
        code = COMMANDS[args.command].run(args)
    except signals.Terminated:
        return _terminated()
    except JobError as exc:
        if signals.received():  # an error the signal caused (e.g. a cancelled job), raised in its place
            return _terminated(exc if verbose else None)
        if verbose:
            import traceback

            traceback.print_exc()
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last resort: still one line, with the root cause
        if signals.received():
            return _terminated(exc if verbose else None)
        if verbose:
            import traceback

            traceback.print_exc()
        print(
            f"{PROG}: error: unexpected {type(exc).__name__}: {root_cause(exc, 500)} (rerun with --verbose)",
            file=sys.stderr,
        )
        return 1
    return _terminated() if signals.received() else code  # a SIGTERM in the command's last moments


def _terminated(exc: BaseException | None = None) -> int:
    """The one line of a command stopped by SIGTERM (``exc``: the error that came in the signal's place, shown
    with ``--verbose``); exit 143.  Says what the run left behind: normally nothing (its clean-up released the
    lock and removed its staging), else the paths, which the next run of the date takes over."""
    if exc is not None:
        import traceback

        traceback.print_exception(exc)
    left = signals.left_behind()
    if left:
        what = f"left behind {', '.join(left)} (the next run of the date takes them over)"
    else:
        what = "no lock or staging left behind"
    print(f"{PROG}: terminated (SIGTERM): {what}", file=sys.stderr)
    return signals.TERMINATED_EXIT


def main() -> NoReturn:
    sys.exit(run())
