"""Run ``recsys-spark`` in this process and kill it at a chosen moment (the chaos tests' driver).

``python tests/helpers/chaos.py SIGNAL WHEN -- ARGS...`` runs ``recsys_spark.cli.run(ARGS)`` and sends
itself ``SIGNAL`` (``KILL`` or ``TERM``; ``TERMGROUP``: SIGTERM to its whole process group, as Airflow's
BashOperator stops a task: start it as a group leader) when ``WHEN`` comes:

* ``commit:N``: just before the N-th file-system call (0-based) of the commit, counted from the moment
  the commit's journal is written: every ``fs`` call the commit and its clean-up make;
* ``collect:N``: during the N-th ``DataFrame.collect`` (0-based) made once the run holds its lock: that
  collect runs through an identity ``mapInPandas`` whose first task sends the signal to the driver and then
  waits (five minutes), so that the signal comes while the driver waits inside the collect for Spark (a
  py4j call), and only a cancelled job ends it early;
* ``write:N``: the same during the N-th table the run stages with a Spark job (``DailyOutput.stage``);
* ``after:S``: S seconds after the start (a random moment of the computation).

With ``RECSYS_CHAOS_MARK`` set, the task that sends the signal writes the moment it did (``time.time()``)
to that file.  Exits with the command's code, or dies by the signal.  The signal is real: SIGKILL leaves
everything as it was at that call; SIGTERM goes through the handler the command installs.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time

from recsys_spark import cli
from recsys_spark.io import staged as write
from recsys_spark.runtime import fs

OPERATIONS = ("delete", "rename", "write_text", "write_bytes", "mkdirs", "delete_if_empty", "exists", "touch")
WAIT_SECONDS = 300.0  # how long the signalling task waits: far longer than the run left alone would take


def _arm_commit(send, target: int) -> None:
    state = {"calls": -1}  # -1: the commit has not started (the journal write starts it)

    def counted(name: str, real):
        def call(spark, *args, **kwargs):
            path = str(args[0]) if args else ""
            if state["calls"] < 0 and name == "write_text" and path.endswith("/_commit.json"):
                state["calls"] = 0
            elif state["calls"] >= 0:
                if state["calls"] == target:
                    send()
                state["calls"] += 1
            return real(spark, *args, **kwargs)

        return call

    for name in OPERATIONS:
        setattr(fs, name, counted(name, getattr(fs, name)))


def _send(signum: int, group: bool):
    """What sends the signal: ``send()`` signals this process, or its process group."""
    if group:
        return functools.partial(os.killpg, os.getpgid(0), signum)
    return functools.partial(os.kill, os.getpid(), signum)


def _signalling(df, send):
    """``df`` unchanged, through a task that signals this process first and then waits (see the docstring)."""
    mark = os.environ.get("RECSYS_CHAOS_MARK")

    def signal_then_wait(batches):
        from pyspark import TaskContext

        if TaskContext.get().partitionId() == 0:
            if mark:
                with open(mark, "w") as f:
                    f.write(repr(time.time()))
            send()
            time.sleep(WAIT_SECONDS)
        yield from batches

    return df.mapInPandas(signal_then_wait, df.schema)


def _arm_spark(send, kind: str, target: int) -> None:
    """``collect:N`` and ``write:N``: counted from the moment the run's lock is taken."""
    from pyspark.sql.classic.dataframe import DataFrame  # the classic session's (pyspark.sql's is abstract)

    state = {"locked": False, "n": 0}
    acquire, collect, stage = write.DailyOutput.acquire, DataFrame.collect, write.DailyOutput.stage

    def locking(self):
        acquire(self)
        state["locked"] = True

    def chosen(name: str) -> bool:
        if not state["locked"] or kind != name:
            return False
        state["n"] += 1
        return state["n"] - 1 == target

    def collecting(self):
        return collect(_signalling(self, send) if chosen("collect") else self)

    def staging(self, table, df):
        return stage(self, table, _signalling(df, send) if chosen("write") else df)

    write.DailyOutput.acquire = locking
    DataFrame.collect = collecting
    write.DailyOutput.stage = staging


def main(argv: list[str]) -> int:
    name, when, rest = argv[0], argv[1], argv[argv.index("--") + 1 :]
    signum = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM, "TERMGROUP": signal.SIGTERM}[name]
    send = _send(signum, group=name == "TERMGROUP")
    kind, _, value = when.partition(":")
    if kind == "commit":
        _arm_commit(send, int(value))
    elif kind in ("collect", "write"):
        _arm_spark(send, kind, int(value))
    else:
        timer = threading.Timer(float(value), send)
        timer.daemon = True
        timer.start()
    return cli.run(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
