"""The driver log is JSON lines with run/app ids, a start and an end per stage, and progress lines."""

from __future__ import annotations

import io
import json
import re
import threading

import pytest

from recsys_spark.runtime import log


@pytest.fixture
def lines(monkeypatch):
    monkeypatch.setenv(log.RUN_ID_ENV, "run-42")
    log.reset()
    stream = io.StringIO()
    log.setup_logging(stream=stream)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    log.reset()


def test_every_line_is_one_json_object_with_the_run_id(lines):
    log.event("done", date="2026-11-20", auc=0.75)
    log.LOGGER.info("plain text")
    first, second = lines()
    assert first["event"] == "done" and first["auc"] == 0.75 and first["date"] == "2026-11-20"
    assert first["run_id"] == second["run_id"] == "run-42"
    assert "app_id" in first and first["level"] == "INFO" and first["ts"].endswith("Z")
    assert second == {**second, "event": "message", "message": "plain text"}


def test_a_stage_logs_its_start_and_its_end_with_counts(lines):
    timings: dict[str, float] = {}
    with log.stage("read", timings, date="2026-11-20") as info:
        info["rows"] = 3
    start, end = lines()
    assert (start["event"], start["stage"], start["date"]) == ("stage_start", "read", "2026-11-20")
    assert (end["event"], end["stage"], end["status"], end["rows"]) == ("stage_end", "read", "ok", 3)
    assert end["seconds"] == timings["read"] >= 0


def test_a_failed_stage_still_logs_its_end(lines):
    with pytest.raises(ValueError), log.stage("label", {}):
        raise ValueError("boom")
    end = lines()[-1]
    assert (end["event"], end["status"], end["error"]) == ("stage_end", "failed", "ValueError")


def test_a_long_stage_logs_progress_while_it_runs(lines):
    seen = threading.Event()

    class Watch(log.logging.Handler):
        def emit(self, record):
            if getattr(record, "fields", {}).get("event") == "progress":
                seen.set()

    log.LOGGER.addHandler(Watch())
    with log.stage("metrics", {}, progress_seconds=0.01):
        assert seen.wait(30), "no progress line while the stage ran"
    events = [line["event"] for line in lines()]
    assert events[0] == "stage_start" and events[-1] == "stage_end"
    assert "progress" in events[1:-1]
    progress = next(line for line in lines() if line["event"] == "progress")
    assert progress["stage"] == "metrics" and progress["elapsed"] >= 0 and progress["run_id"] == "run-42"
    assert log.PROGRESS_SECONDS <= 30  # the default interval keeps the promise of a line every 30 s


@pytest.mark.spark
@pytest.mark.process
def test_a_cli_run_logs_nothing_but_json_lines_spark_s_own_lines_included(tmp_path):
    """Issue 17: "Logs are JSON lines (nothing before the brace)": the job's lines and Spark's (log4j2,
    recsys_spark/runtime/log4j2-local.properties), at INFO (--verbose: hundreds of Spark lines), with Python's
    warnings on. stdout is the run's result for a person (the headline lines), not the log."""
    import os
    import subprocess
    import sys

    date = "2026-11-20"
    subprocess.run(
        [sys.executable, "-m", "recsys_spark.synthetic.generate", "--date", date, "--output-root", str(tmp_path / "in")]
        + ["--users", "60", "--seed", "3"],
        check=True,
        capture_output=True,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "SPARK_REMOTE")}
    proc = subprocess.run(
        [sys.executable, "-m", "recsys_spark.cli", "evaluate", "--date", date, "--verbose"]
        + ["--input-root", str(tmp_path / "in"), "--output-root", str(tmp_path / "out"), "--master", "local[1]"]
        + ["--set", "rules.fail_on_hard=false", "--set", "spark.spark.sql.shuffle.partitions=2"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    not_json = []
    for line in lines:
        try:
            assert isinstance(json.loads(line), dict)
        except (ValueError, AssertionError):
            not_json.append(line)
    assert not not_json, f"{len(not_json)} of {len(lines)} stderr lines are not JSON objects: {not_json[:5]}"
    records = [json.loads(line) for line in lines]
    spark_lines = [r for r in records if r["event"] == "spark_log"]
    assert len(spark_lines) > 20 and all(r["level"] and r["ts"].endswith("Z") for r in spark_lines)
    assert any(r["logger"].startswith("org.apache.spark") for r in spark_lines)
    assert [r["stage"] for r in records if r["event"] == "stage_end"][0] == "read"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_stage_is_one_line_for_a_person():
    terminal = _Terminal()
    log.setup_logging(stream=terminal, fmt="auto")  # a terminal: the human format
    try:
        with log.stage("label", {}, progress_seconds=3600) as info:
            info.update(rows=9, duplicates=1)
        log.event("day", index=3, of=7, date="2026-11-16", eta_seconds=125)
        with pytest.raises(RuntimeError), log.stage("metrics", {}, progress_seconds=3600):
            raise RuntimeError("x")
    finally:
        log.setup_logging(stream=io.StringIO())
    lines = terminal.getvalue().splitlines()
    assert len(lines) == 3 and not any(line.startswith("{") for line in lines)
    assert re.fullmatch(r"\d\d:\d\d:\d\d  label\s+\d+\.\d s  rows=9 duplicates=1", lines[0])
    assert lines[1].endswith("day 3 of 7: 2026-11-16, about 2 min left")
    assert lines[2].endswith("metrics      failed after 0.0 s (RuntimeError)")


def test_not_a_terminal_stays_json_and_a_terminal_sees_spark_only_from_warn():
    plain = io.StringIO()
    log.setup_logging(stream=plain, fmt="auto")
    log.event("day", index=1, of=2, date="2026-11-16", eta_seconds=None)
    assert json.loads(plain.getvalue())["event"] == "day"
    spark_info = json.dumps({"level": "INFO", "event": "spark_log", "logger": "org.apache.spark.SparkContext"})
    spark_warn = json.dumps(
        {"level": "WARN", "event": "spark_log", "logger": "org.apache.spark.util.Utils", "message": "slow disk"}
    )
    assert log._as_human_line(spark_info, verbose=False) is None
    assert log._as_human_line(spark_info, verbose=True) is not None
    assert log._as_human_line(spark_warn, verbose=False) == "spark warn Utils: slow disk"
    assert log._as_human_line("WARNING: Using incubator modules: jdk.incubator.vector", verbose=False) is None
