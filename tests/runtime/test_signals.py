"""SIGTERM raised only where it is safe (recsys_spark/runtime/signals.py), without Spark: py4j's entry point is a stub.

The signal is real (``os.kill`` of this process); the JVM call is a stub of ``GatewayClient.send_command`` that
receives it while it runs, as a ``collect`` waiting for the JVM's answer does.  The chaos tests
(tests/ops/test_chaos.py) send it during a real collect.
"""

from __future__ import annotations

import os
import signal

import pytest
from py4j.java_gateway import GatewayClient

from recsys_spark import cli
from recsys_spark.cli.common import Command
from recsys_spark.runtime import signals


@pytest.fixture(autouse=True)
def clean_state(monkeypatch):
    """A fresh signal state, the handler installed, py4j's entry point a stub; all restored afterwards."""
    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(signals, "_state", signals._State())
    monkeypatch.setattr(signals, "_original_send", None)
    monkeypatch.setattr(signals, "_left", set())
    monkeypatch.setattr(GatewayClient, "send_command", GatewayClient.send_command)
    cancels: list[str] = []
    monkeypatch.setattr(signals, "_cancel_jobs_meanwhile", lambda: cancels.append("cancel"))
    signals.terminate_on_sigterm()
    yield cancels
    signal.signal(signal.SIGTERM, before)


def _term() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def _jvm_call(monkeypatch, during) -> list[str]:
    """Make py4j's entry point a stub that runs ``during`` (the JVM "working") and answers; guard it."""
    answered: list[str] = []

    def send_command(self, command, retry=True, binary=False):
        during()
        answered.append(command)
        return "yv"

    monkeypatch.setattr(GatewayClient, "send_command", send_command)
    signals.guard_jvm_calls()
    return answered


def test_a_sigterm_in_python_code_is_raised_at_once():
    with pytest.raises(signals.Terminated):
        _term()
        for _ in range(1000):  # the handler runs between two bytecodes
            pass
        pytest.fail("not raised")
    assert signals.received()


def test_a_sigterm_during_a_jvm_call_is_raised_when_the_call_returns_and_the_jobs_are_cancelled(
    monkeypatch, clean_state
):
    answered = _jvm_call(monkeypatch, lambda: None if answered else _term())  # the first call only
    with pytest.raises(signals.Terminated):
        GatewayClient.send_command(object(), "c\nstatus\ne\n")
    assert answered == ["c\nstatus\ne\n"]  # the call read its answer: the connection is left clean
    assert clean_state == ["cancel"]
    GatewayClient.send_command(object(), "next")  # raised once: the clean-up's calls go through
    assert answered[-1] == "next"


def test_a_call_from_another_thread_is_not_guarded(monkeypatch):
    import threading

    answered = _jvm_call(monkeypatch, lambda: None)
    thread = threading.Thread(target=GatewayClient.send_command, args=(object(), "beat"))
    thread.start()
    thread.join()
    assert answered == ["beat"]


def test_a_sigterm_inside_a_critical_section_waits_for_its_end(monkeypatch, clean_state):
    answered = _jvm_call(monkeypatch, lambda: None)
    done = []
    with pytest.raises(signals.Terminated):
        with signals.critical():
            _term()
            GatewayClient.send_command(object(), "rename")
            GatewayClient.send_command(object(), "rename")
            done.append("moves")
    assert done == ["moves"] and len(answered) == 2
    assert clean_state == []  # nothing to cancel in a critical section (file-system calls)


def test_once_received_a_checkpoint_raises_it_again():
    signals.checkpoint()  # nothing received: nothing raised
    with pytest.raises(signals.Terminated):
        _term()
        for _ in range(1000):
            pass
    try:
        raise ValueError("an error the cancelled job caused, caught by a caller that goes on")
    except ValueError:
        pass
    with pytest.raises(signals.Terminated):
        signals.checkpoint()


def test_a_command_failing_after_a_sigterm_exits_143_with_one_line(monkeypatch, capsys):
    def run(args):
        try:
            _term()
            for _ in range(1000):
                pass
        except signals.Terminated:
            raise RuntimeError("Job 3 cancelled") from None  # what a finally block's JVM call raised instead

    monkeypatch.setitem(cli.COMMANDS, "warm-up", Command("warm-up", "", "", "", lambda p: None, run, spark=False))
    assert cli.run(["warm-up"]) == 143
    err = capsys.readouterr().err
    assert err == "recsys-spark: terminated (SIGTERM): no lock or staging left behind\n"


def test_the_next_command_in_the_same_process_starts_with_nothing_received(monkeypatch, capsys):
    def stopped(args):
        _term()
        for _ in range(1000):
            pass
        return 0

    monkeypatch.setitem(cli.COMMANDS, "warm-up", Command("warm-up", "", "", "", lambda p: None, stopped, spark=False))
    assert cli.run(["warm-up"]) == 143
    monkeypatch.setitem(
        cli.COMMANDS, "warm-up", Command("warm-up", "", "", "", lambda p: None, lambda a: 0, spark=False)
    )
    assert cli.run(["warm-up"]) == 0
    assert capsys.readouterr().err.count("terminated") == 1


def test_the_line_names_what_a_failed_clean_up_left_behind(monkeypatch, capsys):
    def run(args):
        signals.left("/out/_locks/dt=2026-11-20.lock")  # taken, and its release failed
        _term()
        for _ in range(1000):
            pass

    monkeypatch.setitem(cli.COMMANDS, "warm-up", Command("warm-up", "", "", "", lambda p: None, run, spark=False))
    assert cli.run(["warm-up"]) == 143
    assert capsys.readouterr().err == (
        "recsys-spark: terminated (SIGTERM): left behind /out/_locks/dt=2026-11-20.lock "
        "(the next run of the date takes them over)\n"
    )


def test_the_local_jvm_starts_in_a_session_of_its_own(monkeypatch):
    """pyspark launches the JVM with ``java_gateway.Popen``: in a new session, a SIGTERM to this process's group
    leaves it to the clean-up (tests/ops/test_chaos.py sends one: TERMGROUP)."""
    from pyspark import java_gateway

    launched: list[dict] = []
    monkeypatch.setattr(java_gateway, "Popen", lambda command, **kwargs: launched.append(kwargs))
    signals.jvm_in_own_session()
    signals.jvm_in_own_session()  # idempotent: wrapped once
    java_gateway.Popen(["spark-submit"], stdin=None)
    assert launched == [{"stdin": None, "start_new_session": True}]
