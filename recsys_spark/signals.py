"""SIGTERM as an exception, and sections it must not cut in two.

Schedulers stop a task with SIGTERM (Airflow, YARN, Kubernetes).  Python's default is to die at once,
leaving the date's lock and staging behind; :func:`terminate_on_sigterm` makes it raise
:class:`Terminated` instead, so that the run's clean-up (``except BaseException: output.abort()``)
runs and the command exits 143 with one line.  Inside :func:`critical` (the commit's renames, a few
file-system calls) the signal is held and raised when the section ends, so a commit is never cut
between two moves.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: the exit code of a process ended by SIGTERM (128 + 15), what a shell and Airflow report
TERMINATED_EXIT = 143


class Terminated(BaseException):
    """Raised in the main thread when the process receives SIGTERM (not an Exception: nothing that
    catches ``Exception`` swallows it)."""


_held = threading.local()
_pending: list[int] = []


def _handler(signum: int, frame: object) -> None:
    if getattr(_held, "depth", 0):
        _pending.append(signum)
        return
    raise Terminated(f"terminated by signal {signum}")


def terminate_on_sigterm() -> None:
    """Install the SIGTERM handler (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _handler)


@contextmanager
def critical() -> Iterator[None]:
    """Hold SIGTERM while the block runs; raise :class:`Terminated` after it if one came."""
    _held.depth = getattr(_held, "depth", 0) + 1
    try:
        yield
    finally:
        _held.depth -= 1
    if not _held.depth and _pending:
        signum = _pending.pop()
        _pending.clear()
        raise Terminated(f"terminated by signal {signum}")
