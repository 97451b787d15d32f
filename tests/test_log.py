"""The driver log is JSON lines with run/app ids, a start and an end per stage, and progress lines."""

from __future__ import annotations

import io
import json
import threading

import pytest

from recsys_spark import log


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
