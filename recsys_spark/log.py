"""Structured driver log: JSON lines, one object per line, nothing before the brace.

Every line carries ``ts`` (UTC, ISO 8601), ``level``, ``event``, the ``run_id`` and the Spark
``app_id`` (``null`` until a session exists), so a log shipper can index it as is::

    {"ts": "2026-11-23T13:30:01.123Z", "level": "INFO", "event": "stage_start", "stage": "read",
     "run_id": "scheduled__2026-11-21T02:30:00+00:00", "app_id": "local-1763904601000", "date": "2026-11-20"}

Events
  * ``stage_start`` / ``stage_end`` around each stage of the pipeline (:func:`stage`); the end
    carries ``seconds``, ``status`` (``ok`` or ``failed``, with ``error`` naming the exception
    type) and the counts the stage added;
  * ``progress`` while a stage runs, every ``PROGRESS_SECONDS`` (20 s: "at least every 30 s"
    with room for a slow scheduler): elapsed seconds and, on a classic session, Spark's active
    jobs and completed/total tasks of the active stages (from the status tracker; nothing on
    Spark Connect, which has none);
  * anything else the job logs with :func:`event`.

The run id is, first found: the Spark setting ``spark.recsys.runId`` (the Airflow DAG passes
``{{ run_id }}``), the environment variable ``RECSYS_RUN_ID``, else a random 12-hex-digit id
made once per process. The same id goes into the catalog rows (:mod:`recsys_spark.catalog`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

LOGGER = logging.getLogger("recsys_spark")

#: seconds between two progress lines of a running stage
PROGRESS_SECONDS = 20.0
RUN_ID_CONF = "spark.recsys.runId"
RUN_ID_ENV = "RECSYS_RUN_ID"

_state: dict[str, str | None] = {"run_id": None, "app_id": None}
_lock = threading.Lock()


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, event, run_id, app_id, then the event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        body: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
        }
        if fields is None:  # a plain LOGGER.info("text")
            body.update(event="message", message=record.getMessage())
        else:
            body.update(fields)
        body.setdefault("run_id", run_id())
        body.setdefault("app_id", app_id())
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(body, default=str)


def setup_logging(verbose: bool = False, stream: IO[str] | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    LOGGER.handlers[:] = [handler]
    LOGGER.setLevel(logging.DEBUG if verbose else logging.INFO)
    LOGGER.propagate = False


def _active_session() -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return None
    return SparkSession.getActiveSession()


def run_id() -> str:
    """This run's id (see the module docstring); fixed once a session or the environment gave one."""
    with _lock:
        if _state["run_id"] is None:
            spark = _active_session()
            configured = None
            if spark is not None:
                try:
                    configured = spark.conf.get(RUN_ID_CONF, None)
                except Exception:  # noqa: BLE001 - a stopped session: fall through
                    configured = None
            _state["run_id"] = configured or os.environ.get(RUN_ID_ENV) or uuid.uuid4().hex[:12]
        return str(_state["run_id"])


def app_id() -> str | None:
    """The Spark application id of the active session (``spark.app.id``), or None before it exists."""
    if _state["app_id"] is None:
        spark = _active_session()
        if spark is not None:
            try:
                _state["app_id"] = spark.conf.get("spark.app.id", None)
            except Exception:  # noqa: BLE001 - Connect sessions may not expose it
                _state["app_id"] = None
    return _state["app_id"]


def reset() -> None:
    """Forget the run and application ids (a new session or run in the same process; tests)."""
    with _lock:
        _state.update(run_id=None, app_id=None)


def event(name: str, **fields: Any) -> None:
    LOGGER.info(name, extra={"fields": {"event": name, **fields}})


def spark_progress() -> dict[str, Any]:
    """Active jobs and the completed/total tasks of the active stages (classic sessions only)."""
    spark = _active_session()
    if spark is None:
        return {}
    try:
        tracker = spark.sparkContext.statusTracker()
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return {}
    done = total = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return {"active_jobs": len(tracker.getActiveJobsIds()), "tasks_done": done, "tasks_total": total}


class _Progress(threading.Thread):
    """Logs a ``progress`` line every ``interval`` seconds until stopped."""

    def __init__(self, name: str, interval: float, start: float) -> None:
        super().__init__(name=f"recsys-progress-{name}", daemon=True)
        self.stage, self.interval, self.start_time = name, interval, start
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                extra = spark_progress()
            except Exception:  # noqa: BLE001 - progress is best effort, never fails the job
                extra = {}
            event("progress", stage=self.stage, elapsed=round(time.perf_counter() - self.start_time, 1), **extra)


@contextmanager
def stage(
    name: str, timings: dict[str, float], progress_seconds: float | None = None, **fields: Any
) -> Iterator[dict[str, Any]]:
    """Time a stage: a ``stage_start`` line, ``progress`` lines while it runs, a ``stage_end`` line.

    The caller may add counts to the yielded dict; they go into ``stage_end``. ``stage_end`` is
    logged on failure too (``status = "failed"``) and the exception propagates.
    """
    extra: dict[str, Any] = dict(fields)
    event("stage_start", stage=name, **fields)
    start = time.perf_counter()
    ticker = _Progress(name, progress_seconds or PROGRESS_SECONDS, start)
    ticker.start()
    status: dict[str, Any] = {"status": "ok"}
    try:
        yield extra
    except BaseException as exc:
        status = {"status": "failed", "error": type(exc).__name__}
        raise
    finally:
        ticker.stopped.set()
        ticker.join()
        seconds = round(time.perf_counter() - start, 3)
        timings[name] = seconds
        event("stage_end", stage=name, seconds=seconds, **status, **extra)
