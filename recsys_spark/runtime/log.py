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

Spark's own lines are JSON objects too (``"event": "spark_log"``, the log4j2 layout of
``log4j2-local.properties`` and ``conf/log4j2.properties``), and what a local JVM or a Python
worker writes to stderr outside log4j2 is wrapped as ``"event": "stderr"``
(:func:`child_stderr`): the driver's stderr holds nothing but JSON lines, except the
one-line ``recsys-spark: error: ...`` of a failed run.

On a terminal the same events are written for a person instead (``--log-format``, default ``auto``:
human on a terminal, JSON otherwise; :class:`HumanFormatter`): one line a stage (stage, seconds, counts),
progress as ``day 3 of 7`` with an estimate, Spark's own lines only from WARN up (all with ``--verbose``).

The run id is, first found: the Spark setting ``spark.recsys.runId`` (the Airflow DAG passes
``{{ run_id }}``), the environment variable ``RECSYS_RUN_ID``, else a random 12-hex-digit id
made once per process. The same id goes into the catalog rows (:mod:`recsys_spark.io.catalog`).
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

_state: dict[str, str | None] = {"run_id": None, "app_id": None, "stderr_json": None, "format": "json"}
#: the --log-format choices
FORMATS = ("auto", "human", "json")
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
        if fields is None:  # a plain LOGGER.info("text"), a warning, another library's record
            body.update(event="message", message=record.getMessage())
            if record.name != LOGGER.name:
                body["logger"] = record.name
        else:
            body.update(fields)
        body.setdefault("run_id", run_id())
        body.setdefault("app_id", app_id())
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(body, default=str)


class HumanFormatter(logging.Formatter):
    """One short line per record for a person at a terminal (the JSON fields, rendered)."""

    SKIP = ("stage_start", "done")

    def format(self, record: logging.LogRecord) -> str:
        fields = dict(getattr(record, "fields", None) or {})
        clock = time.strftime("%H:%M:%S", time.localtime(record.created))
        name = fields.pop("event", None)
        if name is None:  # a plain message, a warning
            return f"{clock}  {record.levelname.lower()}: {record.getMessage()}"
        if name == "stage_end":
            stage, seconds, status = fields.pop("stage"), fields.pop("seconds"), fields.pop("status", "ok")
            if status != "ok":
                return f"{clock}  {stage:<12} failed after {seconds:.1f} s ({fields.get('error')})"
            return f"{clock}  {stage:<12} {seconds:6.1f} s  {_short(fields)}".rstrip()
        if name == "progress":
            tasks = f", tasks {fields['tasks_done']}/{fields['tasks_total']}" if fields.get("tasks_total") else ""
            return f"{clock}  {fields['stage']:<12} ... {fields['elapsed']:.0f} s{tasks}"
        if name == "day":
            eta = fields.get("eta_seconds")
            left = f", about {_duration(eta)} left" if eta else ""
            return f"{clock}  day {fields['index']} of {fields['of']}: {fields['date']}{left}"
        return f"{clock}  {name} {_short(fields)}".rstrip()

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return self.format(record)


def _short(fields: dict[str, Any], width: int = 100) -> str:
    """``k=v`` pairs of the scalar fields, cut at ``width`` characters."""
    parts = [
        f"{k}={v}"
        for k, v in fields.items()
        if k not in ("run_id", "app_id") and isinstance(v, (int, float, str, bool)) and v != ""
    ]
    text = " ".join(parts)
    return text if len(text) <= width else text[: width - 3] + "..."


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def human() -> bool:
    """True when the job's lines go to a person (``--log-format human``, or ``auto`` on a terminal)."""
    return _state["format"] == "human"


def _as_human_line(line: str, verbose: bool) -> str | None:
    """A child's stderr line for a person: Spark's JSON lines from WARN up (all when ``verbose``), the JVM's
    start-up notice dropped, anything else as it is."""
    text = line.strip()
    if text.startswith("WARNING: Using incubator modules"):
        return None
    if text.startswith("{"):
        try:
            body = json.loads(text)
        except ValueError:
            return text
        if isinstance(body, dict):
            level = str(body.get("level", "INFO"))
            if not verbose and level not in ("WARN", "WARNING", "ERROR", "FATAL"):
                return None
            logger = str(body.get("logger", "spark")).rsplit(".", 1)[-1]
            return f"spark {level.lower()} {logger}: {body.get('message', '')}"
    return text


def _as_json_line(line: str) -> str:
    """``line`` if it is a JSON object already, else the line wrapped in one (``event``: ``stderr``)."""
    text = line.strip()
    if text.startswith("{"):
        try:
            if isinstance(json.loads(text), dict):
                return text
        except ValueError:
            pass
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    level = "WARNING" if text.startswith(("WARN", "Warning")) else "ERROR" if "ERROR" in text[:40] else "INFO"
    # the ids as known so far: asking for them here could fix the run id before the session says it
    body: dict[str, str | None] = {"ts": now, "level": level, "event": "stderr", "message": text}
    body.update(run_id=_state["run_id"], app_id=_state["app_id"])
    return json.dumps(body, default=str)


class _ChildStderr(threading.Thread):
    """Copies what child processes write to the pipe onto the real stderr, one JSON line per line."""

    def __init__(self, read_fd: int, out_fd: int) -> None:
        super().__init__(name="recsys-child-stderr", daemon=True)
        self.read_fd, self.out_fd = read_fd, out_fd

    def run(self) -> None:
        with os.fdopen(self.read_fd, "rb") as pipe:
            for raw in pipe:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not line.strip():
                    continue
                out = _as_human_line(line, _state["stderr_json"] == "verbose") if human() else _as_json_line(line)
                if out is None:
                    continue
                try:
                    os.write(self.out_fd, (out + "\n").encode("utf-8"))
                except OSError:  # stderr gone: nothing left to tell
                    return


@contextmanager
def child_stderr() -> Iterator[None]:
    """Processes started inside (the local Spark JVM and, through it, the Python workers) write their
    stderr through a pipe whose lines reach this process's stderr as JSON objects (or, in the human
    format, as short lines from WARN up: :func:`_as_human_line`): the JVM's own start-up
    line (``WARNING: Using incubator modules: jdk.incubator.vector``, printed before log4j2 starts) and
    anything a worker prints become ``{"event": "stderr", "message": ...}``; log4j2's lines, JSON already
    (log4j2-local.properties), pass as they are.  This process's own stderr is restored on leaving, so the
    one-line ``recsys-spark: error: ...`` stays as it is.  Lines a child writes after this process has
    exited (the JVM's shutdown hooks, at INFO) are lost."""
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    saved, out_fd = os.dup(2), os.dup(2)
    _ChildStderr(read_fd, out_fd).start()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def setup_logging(verbose: bool = False, stream: IO[str] | None = None, fmt: str = "json") -> None:
    """The job's lines on ``stream`` (stderr): JSON, or for a person (``fmt = "human"``, or ``"auto"`` when
    stderr is a terminal); so are Python's warnings and other libraries' records of level WARNING and up
    (through the root logger), so that the driver's stderr holds nothing but JSON lines in the JSON format
    (Spark's own lines: the log4j2 layout in log4j2-local.properties / conf/log4j2.properties)."""
    target = stream or sys.stderr
    if fmt == "auto":
        fmt = "human" if getattr(target, "isatty", lambda: False)() else "json"
    _state["format"] = fmt
    formatter: logging.Formatter = HumanFormatter() if fmt == "human" else JsonFormatter()
    handler = logging.StreamHandler(target)
    handler.setFormatter(formatter)
    if fmt == "human":  # a stage is one line, at its end; the day's result is the command's stdout
        handler.addFilter(lambda r: (getattr(r, "fields", None) or {}).get("event") not in HumanFormatter.SKIP)
    LOGGER.handlers[:] = [handler]
    LOGGER.setLevel(logging.DEBUG if verbose else logging.INFO)
    LOGGER.propagate = False
    _state["stderr_json"] = ("verbose" if verbose else "yes") if stream is None else None
    logging.captureWarnings(True)  # warnings.warn(...) -> the "py.warnings" logger -> the root's handler
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if not getattr(h, "recsys_json", False)]
    other = logging.StreamHandler(target)
    other.setFormatter(formatter)
    other.setLevel(logging.WARNING)
    other.recsys_json = True  # type: ignore[attr-defined]
    root.addHandler(other)


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


def stderr_is_json() -> bool:
    """True once :func:`setup_logging` sends the job's lines to the real stderr (the commands do)."""
    return _state["stderr_json"] is not None


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
