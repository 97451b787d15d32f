"""What every command shares: the arguments declared once, the config, the session, the exit codes.

Each command module adds its own arguments to the parent parser's (:func:`parent`), loads its config
with :func:`load` and builds its session with :func:`recsys_spark.runtime.session.job_session`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import importlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from recsys_spark.config import Config, load_config
from recsys_spark.errors import UsageError

PROG = "recsys-spark"


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, its help (a line, a paragraph, an example) and what it adds and runs."""

    name: str
    help: str
    description: str
    example: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    spark: bool = True  # takes --master (it starts Spark)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found:  # did you mean: a mistyped command
            choices = [c.strip(" '") for c in found[2].split(",")]
            near = difflib.get_close_matches(found[1], choices, n=1)
            if near:
                message += f"; did you mean {near[0]!r}?"
        raise UsageError(message)


def import_meanwhile(*modules: str) -> threading.Thread:
    """Start importing ``modules`` on a thread of their own: a command starts it before the JVM and joins it
    after (the JVM's start leaves the interpreter idle for a second or more; the imports fill it).  Errors are
    left to the command's own import after the join, which raises them as usual."""

    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S110 - raised again by the command's own import
                pass

    thread = threading.Thread(target=run, name="import-meanwhile", daemon=True)
    thread.start()
    return thread


def date_arg(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date in YYYY-MM-DD form: {text!r}") from None


def parent(spark: bool = True) -> Parser:
    """The arguments every command takes: ``--config``, ``--set``, ``--verbose`` and, for the commands that
    start Spark, ``--master``."""
    shared = Parser(add_help=False)
    shared.add_argument("--config", help="TOML settings file (default: built-in defaults, as conf/default.toml)")
    shared.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting, VALUE in TOML (repeatable): --set metrics.k=[5,10]",
    )
    if spark:
        shared.add_argument("--master", help="Spark master URL (default local[*]; spark-submit's when submitted)")
    shared.add_argument("--verbose", action="store_true", help="full tracebacks and INFO logs")
    shared.add_argument(
        "--log-format",
        choices=("auto", "human", "json"),
        default="auto",
        help="stderr for a person (one line a stage) or JSON lines; auto: human on a terminal, else JSON",
    )
    return shared


def start_logging(args: argparse.Namespace) -> None:
    """The command's log lines on stderr, as ``--log-format`` says."""
    from recsys_spark.runtime import log

    log.setup_logging(args.verbose, fmt=getattr(args, "log_format", "auto"))


def load(args: argparse.Namespace) -> Config:
    """The command's config: ``--config`` then each ``--set`` (a bad key or value: exit 3, one line)."""
    return load_config(args.config, args.set)
