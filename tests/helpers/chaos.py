"""Run ``recsys-spark`` in this process and kill it at a chosen moment (the chaos tests' driver).

``python tests/helpers/chaos.py SIGNAL WHEN -- ARGS...`` runs ``recsys_spark.cli.run(ARGS)`` and sends
itself ``SIGNAL`` (``KILL`` or ``TERM``) when ``WHEN`` comes:

* ``commit:N``: just before the N-th file-system call (0-based) of the commit, counted from the moment
  the commit's journal is written: every ``fs`` call the commit and its clean-up make;
* ``after:S``: S seconds after the start (a random moment of the computation).

Exits with the command's code, or dies by the signal.  The signal is real: SIGKILL leaves everything as
it was at that call; SIGTERM goes through the handler the command installs.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from recsys_spark import cli, fs

OPERATIONS = ("delete", "rename", "write_text", "write_bytes", "mkdirs", "delete_if_empty", "exists", "touch")


def _arm_commit(signum: int, target: int) -> None:
    state = {"calls": -1}  # -1: the commit has not started (the journal write starts it)

    def counted(name: str, real):
        def call(spark, *args, **kwargs):
            path = str(args[0]) if args else ""
            if state["calls"] < 0 and name == "write_text" and path.endswith("/_commit.json"):
                state["calls"] = 0
            elif state["calls"] >= 0:
                if state["calls"] == target:
                    os.kill(os.getpid(), signum)
                state["calls"] += 1
            return real(spark, *args, **kwargs)

        return call

    for name in OPERATIONS:
        setattr(fs, name, counted(name, getattr(fs, name)))


def main(argv: list[str]) -> int:
    name, when, rest = argv[0], argv[1], argv[argv.index("--") + 1 :]
    signum = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM}[name]
    kind, _, value = when.partition(":")
    if kind == "commit":
        _arm_commit(signum, int(value))
    else:
        timer = threading.Timer(float(value), os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()
    return cli.run(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
