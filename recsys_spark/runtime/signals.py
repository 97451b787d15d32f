"""SIGTERM as an exception, raised only where it is safe, and sections it must not cut in two.

Schedulers stop a task with SIGTERM (Airflow, YARN, Kubernetes).  Python's default is to die at once,
leaving the date's lock and staging behind; :func:`terminate_on_sigterm` makes it raise
:class:`Terminated` instead, so that the run's clean-up (``except BaseException: output.abort()``)
runs and the command exits 143 with one line.

Where it is raised:

* in Python code: at once (the handler raises it, as Python raises ``KeyboardInterrupt``);
* during a call into the JVM (a py4j call: a ``collect``, a write, a file-system call): never inside it.
  An exception raised while py4j waits for the JVM's answer leaves that answer unread on the connection,
  and the next call (the clean-up's) reads it instead of its own (``unexpected KeyError``).  The handler
  only records the signal; a helper thread cancels the running Spark jobs (its own py4j connection: py4j
  gives each thread its own), so that the call returns soon, and :class:`Terminated` is raised as the call
  returns (:func:`guard_jvm_calls` wraps py4j's one entry point to know when).  A call that runs no job
  (a file listing) runs to its end first;
* inside :func:`critical` (the commit's renames, taking and releasing the lock): held, and raised when the
  section ends, so a commit is never cut between two moves and a clean-up never half done.

A SIGTERM sent to the whole process group reaches this process alone: the local JVM runs in a session of its
own (:func:`jvm_in_own_session`), so that it is still there for the clean-up.

A signal once received stays received (:func:`received`): a command that sees any error after it (an
error the cancelled job caused, raised in place of :class:`Terminated`) still exits 143, and
:func:`checkpoint` raises it again where a caller went on past an error (a backfill's next date, a commit).
The command's one line says what the run left behind (:func:`left_behind`: normally nothing).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: the exit code of a process ended by SIGTERM (128 + 15), what a shell and Airflow report
TERMINATED_EXIT = 143
#: how often the helper thread cancels the Spark jobs while the main thread waits in a JVM call
CANCEL_EVERY_SECONDS = 0.5


class Terminated(BaseException):
    """Raised in the main thread when the process receives SIGTERM (not an Exception: nothing that
    catches ``Exception`` swallows it)."""


class _State:
    """The main thread's state; the handler runs in the main thread, between two of its bytecodes."""

    held = 0  # depth of critical() sections
    in_jvm = 0  # depth of py4j calls
    pending: int | None = None  # a signal received and not raised yet
    received: int | None = None  # the last signal received (stays set)
    canceller: threading.Thread | None = None


_state = _State()
_original_send: Callable[..., Any] | None = None
_left: set[str] = set()  # what a stopped run would leave behind: the locks held, the staging kept


def _terminated(signum: int) -> Terminated:
    return Terminated(f"terminated by signal {signum}")


def _handler(signum: int, frame: object) -> None:
    _state.received = signum
    if _state.held or _state.in_jvm:
        _state.pending = signum
        if _state.in_jvm and not _state.held:
            _cancel_jobs_meanwhile()
        return
    _state.pending = None
    raise _terminated(signum)


def _raise_pending() -> None:
    if _state.pending is not None and not _state.held and not _state.in_jvm:
        signum, _state.pending = _state.pending, None
        raise _terminated(signum)


def terminate_on_sigterm() -> None:
    """Install the SIGTERM handler, a command's start: nothing received yet (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is threading.main_thread():
        _state.pending = _state.received = None
        signal.signal(signal.SIGTERM, _handler)


def received() -> bool:
    """Whether this process received SIGTERM since :func:`terminate_on_sigterm` (once received, always)."""
    return _state.received is not None


def checkpoint() -> None:
    """Raise :class:`Terminated` when a SIGTERM was received: a point between stages where a run that went
    on past an error the signal caused stops (the signal was raised once already, or held)."""
    if _state.received is not None and not _state.held and not _state.in_jvm:
        _state.pending = None
        raise _terminated(_state.received)


def left(path: str) -> None:
    """Note ``path`` (a lock taken, a staging directory kept for the next run) as something this process would
    leave behind if it stopped now, until :func:`released`."""
    _left.add(path)


def released(path: str) -> None:
    _left.discard(path)


def left_behind() -> list[str]:
    """What this process would leave behind (:func:`left`), sorted: empty once every run committed or aborted."""
    return sorted(_left)


@contextmanager
def critical() -> Iterator[None]:
    """Hold SIGTERM while the block runs; raise :class:`Terminated` after it if one came."""
    main = threading.current_thread() is threading.main_thread()
    if main:
        _state.held += 1
    try:
        yield
    finally:
        if main:
            _state.held -= 1
    if main:
        _raise_pending()


def guard_jvm_calls() -> None:
    """Wrap py4j's entry point (every call into the JVM goes through ``GatewayClient.send_command``) so that
    a SIGTERM arriving during a call of the main thread is raised when the call returns (module docstring).
    Idempotent; imports py4j, so called where the session is built, not at start-up."""
    global _original_send
    from py4j.java_gateway import GatewayClient  # type: ignore[import-untyped]

    if _original_send is not None:
        return
    original = GatewayClient.send_command
    _original_send = original

    def send_command(self: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return original(self, *args, **kwargs)
        _state.in_jvm += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _state.in_jvm -= 1
            _raise_pending()

    GatewayClient.send_command = send_command


def jvm_in_own_session() -> None:
    """Start the local driver JVM (the one pyspark launches for a session built here) in a session of its own,
    so that a SIGTERM sent to this process's whole group (Airflow's BashOperator stops a task so, as does a
    shell's ``kill -- -PGID``) reaches this process only: the JVM must outlive the signal for the clean-up to
    reach the file system, and it ends when this process does (pyspark's JVM stops when its stdin closes).
    Idempotent; imports pyspark, so called where the session is built."""
    from pyspark import java_gateway

    launch = java_gateway.Popen
    if getattr(launch, "own_session", False):
        return

    def popen(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("start_new_session", True)
        return launch(*args, **kwargs)

    popen.own_session = True  # type: ignore[attr-defined]
    java_gateway.Popen = popen  # type: ignore[misc, assignment]


def _cancel_jobs_meanwhile() -> None:
    """Start (once) the thread that cancels every Spark job while the main thread waits in a JVM call."""
    if _state.canceller is not None and _state.canceller.is_alive():
        return
    _state.canceller = threading.Thread(target=_cancel_jobs, name="recsys-spark-sigterm", daemon=True)
    _state.canceller.start()


def _cancel_jobs() -> None:
    """Cancel the active context's jobs until the main thread's JVM call returns (a job submitted just after
    a cancel is cancelled by the next); silence the JVM's log first: its warnings and errors about the tasks and
    writes it aborts ("Aborting job", "TaskKilledException") say nothing the command's one line does not."""
    try:
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        if context is not None:
            _silence(context)
        while context is not None and _state.in_jvm and _state.pending is not None:
            context.cancelAllJobs()
            time.sleep(CANCEL_EVERY_SECONDS)
    except Exception:  # noqa: BLE001, S110 - a context stopping meanwhile: the call returns by itself
        pass


def _silence(context: Any) -> None:
    """Every logger of the driver's JVM off (the loggers a log4j2 file sets a level of too, which
    ``setLogLevel`` leaves as they are)."""
    try:
        log4j = context._jvm.org.apache.logging.log4j
        log4j.core.config.Configurator.setAllLevels(log4j.LogManager.ROOT_LOGGER_NAME, log4j.Level.OFF)
    except Exception:  # noqa: BLE001 - another logging backend: the root logger at least
        context.setLogLevel("OFF")
