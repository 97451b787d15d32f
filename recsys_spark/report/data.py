"""Read what the daily runs wrote for a range of days, driver-side, into small pandas frames.

Tables are read per day partition, ``{output_root}/{table}/dt={day}``; beside them, the experiment
windows that end in the range (``experiment_window/experiment=NAME/window=S_E``), the offline runs
(``offline/metrics/run=NAME``) and their comparisons (``offline/comparison/base=A/candidate=B``), the OPE
runs (``ope/estimates/run=NAME``) and the simulated days of the range
(``simulation/metrics/run=NAME/dt=D``), each read only when its ``_SUCCESS`` marker says it is complete.
On a local or mounted path (no URL scheme, or ``file:``) pyarrow reads them directly and no SparkSession
is started; any other scheme (``hdfs://``, ``s3a://``, ...) goes through one SparkSession, which reads the
same partitions and hands them to pandas.  Every frame is sorted by its keys, so the report never depends
on file or task order.

A file that cannot be read (a truncated or corrupt Parquet file, a ``summary.json`` or ``verdict.json`` cut
short) leaves out what it belongs to -- that day's table, that run, that simulated day, that verdict -- and
becomes an :class:`Unreadable` entry naming the file and why (``RunData.unreadable``, one line at the top of
the page and in the section it belongs to): the rest of the report is still written.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from recsys_spark import tables
from recsys_spark.errors import MissingInputError, SchemaError, is_unreadable_input, root_cause
from recsys_spark.tables import SUMMARY

#: the daily tables the report draws (:data:`recsys_spark.tables.DAILY`; not the per-user tables, the set-aside
#: rows, nor the summary, read on its own)
TABLES = tuple(t for t in tables.DAILY.tables if t not in ("user_metrics", "experiment_users", "rejected", SUMMARY))
#: the offline runs and their comparisons (:data:`recsys_spark.tables.OFFLINE_RUN`, ``OFFLINE_COMPARISON``), the
#: OPE runs (:data:`recsys_spark.tables.OPE`) and the simulated days (:data:`recsys_spark.tables.SIMULATION`):
#: each read only when its summary's ``_SUCCESS`` exists
OFFLINE = tables.OFFLINE_RUN.root
OPE = tables.OPE.root
SIMULATION = tables.SIMULATION.root
#: sort keys per table (columns absent from a frame are skipped)
KEYS = {
    "metrics": ["dt", "slice", "metric", "k", "aggregation"],
    "lorenz": ["dt", "slice", "x"],
    "rule_checks": ["dt", "severity", "rule"],
    "experiments": ["dt", "experiment", "variant", "metric", "k", "aggregation", "slice"],
    "experiment_checks": ["dt", "experiment", "check"],
    "experiment_window": [
        "experiment",
        "window_end",
        "window_start",
        "variant",
        "metric",
        "k",
        "aggregation",
        "slice",
    ],
    "experiment_window_checks": ["experiment", "window_end", "window_start", "check"],
    "offline_metrics": ["slice", "metric", "k", "aggregation"],
    "offline_comparison": ["metric", "k", "aggregation", "column"],
    "experiment_decisions": ["dt", "experiment", "variant"],
    "offline_auc": ["dt", "model", "split"],
}


#: the reading contract: a day's tables are complete, and from one run, only when this file exists
SUCCESS = f"{SUMMARY}/dt={{day}}/{tables.SUCCESS}"


class UnreadableFile(Exception):
    """A file under the output root that cannot be read: ``path`` (relative to the root) and why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


@dataclass(frozen=True)
class Unreadable:
    """What the report left out (``what``: ``metrics of 2026-11-03``, ``ope run NAME``, ...) because ``path``
    (relative to the output root) cannot be read, and why."""

    what: str
    path: str
    reason: str

    @property
    def line(self) -> str:
        return f"{self.what} ({self.path}: {self.reason})"


def _first_line(text: str, limit: int = 200) -> str:
    return (text.strip().splitlines() or [""])[0][:limit]


def parse_json(reader: Reader, path: str) -> Any | None:
    """The JSON file ``path`` (None when absent); :class:`UnreadableFile` when it is not valid JSON (a
    ``summary.json`` cut short by a full disk)."""
    text = reader.text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UnreadableFile(path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


class Reader(Protocol):
    def frame(self, path: str) -> pd.DataFrame | None: ...

    def table(self, name: str, day: str) -> pd.DataFrame | None: ...

    def text(self, path: str) -> str | None: ...

    def exists(self, path: str) -> bool: ...

    def dirs(self, path: str) -> list[str]: ...


def is_local(path: str) -> bool:
    """A path pyarrow can open itself: no URL scheme (or a one-letter Windows drive), or ``file:``."""
    scheme = urlparse(path).scheme
    return len(scheme) <= 1 or scheme == "file"


def _local(path: str) -> str:
    return urlparse(path).path if path.startswith("file:") else path


def _hidden(name: str) -> bool:
    """Files and directories Spark and the job's staging leave aside (``_SUCCESS``, ``_staging``, ``.crc``)."""
    return name.startswith(("_", "."))


class LocalReader:
    """Reads partitions with pyarrow (files starting with ``_`` or ``.`` are skipped, as Spark does)."""

    def __init__(self, root: str) -> None:
        self.root = _local(root).rstrip("/")

    def frame(self, path: str) -> pd.DataFrame | None:
        """The Parquet directory ``path`` (under the root) as one frame; None when absent or without data files."""
        full = f"{self.root}/{path}"
        if not os.path.isdir(full) or not any(not _hidden(name) for name in os.listdir(full)):
            return None
        try:
            return pq.read_table(full).to_pandas()
        except (pa.ArrowException, OSError) as exc:  # truncated, not Parquet, a corrupt page
            raise self._culprit(path, exc) from None

    def _culprit(self, path: str, exc: BaseException) -> UnreadableFile:
        """The first data file of ``path`` that cannot be read alone, with its own error (else the directory)."""
        full = f"{self.root}/{path}"
        for name in sorted(n for n in os.listdir(full) if not _hidden(n) and os.path.isfile(f"{full}/{n}")):
            try:
                pq.read_table(f"{full}/{name}")
            except (pa.ArrowException, OSError) as own:
                return UnreadableFile(f"{path}/{name}", _first_line(str(own)))
        return UnreadableFile(path, _first_line(str(exc)))

    def table(self, name: str, day: str) -> pd.DataFrame | None:
        return self.frame(tables.DAILY.relative(name, dt=day))

    def text(self, path: str) -> str | None:
        path = f"{self.root}/{path}"
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as handle:
            return handle.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(f"{self.root}/{path}")

    def dirs(self, path: str) -> list[str]:
        """Names of the sub-directories of ``path``, sorted (``_`` and ``.`` ones left out); [] when absent."""
        full = f"{self.root}/{path}"
        if not os.path.isdir(full):
            return []
        return sorted(n for n in os.listdir(full) if not _hidden(n) and os.path.isdir(f"{full}/{n}"))


class SparkReader:
    """Reads partitions through a SparkSession (for HDFS, S3 and other Hadoop file systems)."""

    def __init__(self, spark: Any, root: str) -> None:
        self.spark = spark
        self.root = root.rstrip("/")

    def frame(self, path: str) -> pd.DataFrame | None:
        from recsys_spark.runtime import fs

        full = f"{self.root}/{path}"
        if not fs.exists(self.spark, full) or not any(not _hidden(n) for n, _ in fs.entries(self.spark, full)):
            return None
        try:
            return self.spark.read.parquet(full).toPandas()
        except Exception as exc:
            if is_unreadable_input(exc):  # the root cause names the file
                raise UnreadableFile(path, root_cause(exc, 300)) from None
            raise

    def table(self, name: str, day: str) -> pd.DataFrame | None:
        return self.frame(tables.DAILY.relative(name, dt=day))

    def text(self, path: str) -> str | None:
        from recsys_spark.runtime import fs

        full = f"{self.root}/{path}"
        return fs.read_text(self.spark, full) if fs.exists(self.spark, full) else None

    def exists(self, path: str) -> bool:
        from recsys_spark.runtime import fs

        return fs.exists(self.spark, f"{self.root}/{path}")

    def dirs(self, path: str) -> list[str]:
        from recsys_spark.runtime import fs

        full = f"{self.root}/{path}"
        if not fs.exists(self.spark, full):
            return []
        return sorted(n for n, is_dir in fs.entries(self.spark, full) if is_dir and not _hidden(n))


@dataclass
class OfflineRun:
    """One complete offline run: ``offline/metrics/run=NAME`` and its ``summary.json``."""

    name: str
    summary: dict[str, Any]
    metrics: pd.DataFrame


@dataclass
class Comparison:
    """One complete offline comparison: ``offline/comparison/base=A/candidate=B`` and its ``summary.json``."""

    base: str
    candidate: str
    summary: dict[str, Any]
    rows: pd.DataFrame


@dataclass
class OpeRun:
    """One complete OPE run: ``ope/{estimates,diagnostics}/run=NAME`` and its ``summary.json``."""

    name: str
    summary: dict[str, Any]
    estimates: pd.DataFrame
    diagnostics: pd.DataFrame


@dataclass
class SimulatedDay:
    """One complete simulated day of a candidate: ``simulation/{metrics,rule_checks}/run=NAME/dt=D`` and its
    ``summary.json``."""

    run: str
    day: str
    summary: dict[str, Any]
    metrics: pd.DataFrame
    rules: pd.DataFrame


@dataclass
class RunData:
    """Everything the report shows, for the days ``start`` .. ``end`` (inclusive)."""

    start: dt.date
    end: dt.date
    days: list[str]  # every day of the range, present or not
    summaries: dict[str, dict[str, Any]]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # empty frame when no day has the table
    offline_auc: pd.DataFrame | None = None
    #: days with output but without ``summary/dt=D/_SUCCESS`` (a run killed in its commit, or still
    #: committing): left out, as the reading contract says, and named in the report
    skipped: list[str] = field(default_factory=list)
    #: the experiment windows ending in the range: the ``experiments`` columns plus ``window_start`` and
    #: ``window_end`` (from the path), and their checks; empty frames when there is none
    windows: pd.DataFrame = field(default_factory=pd.DataFrame)
    window_checks: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: the complete offline runs and comparisons under the output root (they carry no day), by name
    offline_runs: list[OfflineRun] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    #: offline runs and comparisons left out because their ``_SUCCESS`` is missing
    offline_skipped: list[str] = field(default_factory=list)
    #: every gate's verdict under the output root (``gate/NAME/verdict.json``; report/decisions.py)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    #: the complete OPE runs (they carry no day: each covers its own window), and the simulated days of the
    #: range; those left out because their ``_SUCCESS`` is missing
    ope_runs: list[OpeRun] = field(default_factory=list)
    simulations: list[SimulatedDay] = field(default_factory=list)
    ope_skipped: list[str] = field(default_factory=list)
    #: what was left out because a file of it cannot be read, each naming the file (module docstring)
    unreadable: list[Unreadable] = field(default_factory=list)

    def unreadable_of(self, prefix: str) -> list[Unreadable]:
        """The unreadable entries whose ``what`` starts with ``prefix`` (a section's own)."""
        return [u for u in self.unreadable if u.what.startswith(prefix)]

    @property
    def present(self) -> list[str]:
        """Days with a summary or a metrics partition."""
        metrics = self.tables.get("metrics", pd.DataFrame())
        have = set(self.summaries) | (set(metrics["dt"]) if "dt" in metrics else set())
        return [d for d in self.days if d in have]

    @property
    def missing(self) -> list[str]:
        present = set(self.present)
        return [d for d in self.days if d not in present]

    @property
    def last_day(self) -> str | None:
        present = self.present
        return present[-1] if present else None


def _sorted(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    keys = [k for k in KEYS.get(name, ["dt"]) if k in frame.columns]
    return frame.sort_values(keys, kind="mergesort", na_position="first").reset_index(drop=True)


def day_range(start: dt.date, end: dt.date) -> list[str]:
    return [(start + dt.timedelta(days=i)).isoformat() for i in range((end - start).days + 1)]


def written(reader: Reader, day: str) -> bool:
    """Whether any table the report reads holds ``day`` (complete or not)."""
    return any(reader.exists(tables.DAILY.relative(t, dt=day)) for t in (SUMMARY, *TABLES))


def complete(reader: Reader, day: str) -> bool:
    """Whether ``day``'s tables may be read: its ``summary/dt=D/_SUCCESS`` exists."""
    return reader.exists(SUCCESS.format(day=day))


def load(reader: Reader, start: dt.date, end: dt.date, offline_auc: pd.DataFrame | None = None) -> RunData:
    """Read the summaries and tables of every complete day of the range (missing days are simply absent;
    a day with output but no ``_SUCCESS`` is left out and listed in ``skipped``)."""
    days = day_range(start, end)
    readable = [d for d in days if complete(reader, d)]
    skipped = [d for d in days if d not in readable and written(reader, d)]
    unreadable: list[Unreadable] = []
    summaries: dict[str, dict[str, Any]] = {}
    for day in readable:
        try:
            summary = parse_json(reader, f"{tables.DAILY.relative(SUMMARY, dt=day)}/{tables.DAILY.summary_file}")
        except UnreadableFile as exc:
            unreadable.append(Unreadable(f"the summary of {day}", exc.path, exc.reason))
            continue
        if summary is not None:
            summaries[day] = summary
    frames: dict[str, pd.DataFrame] = {}
    for name in TABLES:
        parts = []
        for day in readable:
            frame = read_part(reader, tables.DAILY.relative(name, dt=day), f"{name} of {day}", unreadable)
            if frame is not None:
                parts.append(frame.assign(dt=day))
        frames[name] = _joined(parts, name)
    if offline_auc is not None:
        offline_auc = _sorted(offline_auc[offline_auc["dt"].isin(days)], "offline_auc")
    windows, window_checks = load_windows(reader, days[0], days[-1], unreadable)
    runs, comparisons, offline_skipped = load_offline(reader, unreadable)
    ope_runs, ope_skipped = load_ope(reader, unreadable)
    simulations, sim_skipped = load_simulations(reader, days, unreadable)
    return RunData(
        start,
        end,
        days,
        summaries,
        frames,
        offline_auc,
        skipped,
        windows,
        window_checks,
        runs,
        comparisons,
        offline_skipped,
        ope_runs=ope_runs,
        simulations=simulations,
        ope_skipped=ope_skipped + sim_skipped,
        unreadable=unreadable,
    )


def read_part(reader: Reader, path: str, what: str, unreadable: list[Unreadable]) -> pd.DataFrame | None:
    """``reader.frame(path)``; None, and an :class:`Unreadable` entry for ``what``, when a file of it cannot
    be read."""
    try:
        return reader.frame(path)
    except UnreadableFile as exc:
        unreadable.append(Unreadable(what, exc.path, exc.reason))
        return None


def _partition(entry: str, key: str) -> str | None:
    """The value of a ``key=value`` directory name (Spark escapes special characters: unescaped), else None."""
    name, sep, value = entry.partition("=")
    return unquote(value) if sep and name == key else None


def window_span(text: str) -> tuple[str, str] | None:
    """``2026-11-14_2026-11-20`` -> (start, end); None for anything else.

    >>> window_span("2026-11-14_2026-11-20"), window_span("last_week")
    (('2026-11-14', '2026-11-20'), None)
    """
    start, _, end = text.partition("_")
    try:
        first, last = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
    except ValueError:
        return None
    return (start, end) if first <= last else None


def load_windows(
    reader: Reader, first: str, last: str, unreadable: list[Unreadable] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The experiment windows whose end falls in ``first`` .. ``last``, and their checks.

    Each partition ``experiment=NAME/window=S_E`` gets ``experiment``, ``window_start`` and ``window_end``
    from its path.
    """
    results, checks = [], []
    lost = [] if unreadable is None else unreadable
    table, checks_table, _ = tables.WINDOW.tables  # the decisions: report/decisions.py
    for entry in reader.dirs(table):
        experiment = _partition(entry, "experiment")
        if experiment is None:
            continue
        for sub in reader.dirs(f"{table}/{entry}"):
            value = _partition(sub, "window")
            span = window_span(value) if value is not None else None
            if span is None or not first <= span[1] <= last:
                continue
            where = {"experiment": experiment, "window_start": span[0], "window_end": span[1]}
            what = f"the window {span[0]}..{span[1]} of {experiment}"
            frame = read_part(reader, f"{table}/{entry}/{sub}", what, lost)
            if frame is None:
                continue
            results.append(frame.assign(**where))
            found = read_part(reader, f"{checks_table}/{entry}/{sub}", f"{what}: its checks", lost)
            if found is not None:
                checks.append(found.assign(**where))
    return _joined(results, table), _joined(checks, checks_table)


def _joined(parts: list[pd.DataFrame], name: str) -> pd.DataFrame:
    return _sorted(pd.concat(parts, ignore_index=True), name) if parts else pd.DataFrame()


def _summary(reader: Reader, where: str) -> dict[str, Any] | None:
    """``where/summary.json`` when ``where/_SUCCESS`` exists (the run is complete), else None;
    :class:`UnreadableFile` when the file is not valid JSON."""
    if not reader.exists(f"{where}/_SUCCESS"):
        return None
    return parse_json(reader, f"{where}/summary.json") or {}


def _frame(reader: Reader, path: str) -> pd.DataFrame:
    """``reader.frame(path)``, an empty frame when absent (:class:`UnreadableFile` passes through)."""
    frame = reader.frame(path)
    return frame if frame is not None else pd.DataFrame()


def load_offline(
    reader: Reader, unreadable: list[Unreadable] | None = None
) -> tuple[list[OfflineRun], list[Comparison], list[str]]:
    """The complete offline runs and comparisons (by name), and the incomplete ones' names; a run or comparison
    with a file that cannot be read is left out and added to ``unreadable``."""
    runs: list[OfflineRun] = []
    comparisons: list[Comparison] = []
    skipped: list[str] = []
    lost = [] if unreadable is None else unreadable
    summaries = f"{OFFLINE}/summary"
    for entry in reader.dirs(summaries):
        run = _partition(entry, "run")
        if run is not None:
            try:
                summary = _summary(reader, f"{summaries}/{entry}")
                if summary is None:
                    skipped.append(f"run {run}")
                else:
                    metrics = _frame(reader, f"{OFFLINE}/metrics/{entry}")
                    runs.append(OfflineRun(run, summary, _sorted(metrics, "offline_metrics")))
            except UnreadableFile as exc:
                lost.append(Unreadable(f"offline run {run}", exc.path, exc.reason))
        base = _partition(entry, "base")
        if base is None:
            continue
        for sub in reader.dirs(f"{summaries}/{entry}"):
            candidate = _partition(sub, "candidate")
            if candidate is None:
                continue
            try:
                summary = _summary(reader, f"{summaries}/{entry}/{sub}")
                if summary is None:
                    skipped.append(f"comparison {base} -> {candidate}")
                    continue
                rows = _frame(reader, f"{OFFLINE}/comparison/{entry}/{sub}")
            except UnreadableFile as exc:
                lost.append(Unreadable(f"offline comparison {base} -> {candidate}", exc.path, exc.reason))
                continue
            comparisons.append(Comparison(base, candidate, summary, _sorted(rows, "offline_comparison")))
    return runs, comparisons, skipped


def load_ope(reader: Reader, unreadable: list[Unreadable] | None = None) -> tuple[list[OpeRun], list[str]]:
    """The complete OPE runs (by name), and the incomplete ones' names; a run with a file that cannot be read
    is left out and added to ``unreadable`` (``what``: ``ope run NAME``)."""
    runs: list[OpeRun] = []
    skipped: list[str] = []
    lost = [] if unreadable is None else unreadable
    for entry in reader.dirs(f"{OPE}/summary"):
        run = _partition(entry, "run")
        if run is None:
            continue
        try:
            summary = _summary(reader, f"{OPE}/summary/{entry}")
            if summary is None:
                skipped.append(f"ope run {run}")
                continue
            estimates = _frame(reader, f"{OPE}/estimates/{entry}")  # in the order the run wrote them
            diagnostics = _frame(reader, f"{OPE}/diagnostics/{entry}")  # in the run's order too
        except UnreadableFile as exc:
            lost.append(Unreadable(f"ope run {run}", exc.path, exc.reason))
            continue
        runs.append(OpeRun(run, summary, estimates, diagnostics))
    return runs, skipped


def load_simulations(
    reader: Reader, days: list[str], unreadable: list[Unreadable] | None = None
) -> tuple[list[SimulatedDay], list[str]]:
    """The complete simulated days of the range (by run, then day), and the incomplete ones' names; a day with
    a file that cannot be read is left out and added to ``unreadable`` (``what``: ``simulation NAME D``)."""
    found: list[SimulatedDay] = []
    skipped: list[str] = []
    lost = [] if unreadable is None else unreadable
    for entry in reader.dirs(f"{SIMULATION}/summary"):
        run = _partition(entry, "run")
        if run is None:
            continue
        for sub in reader.dirs(f"{SIMULATION}/summary/{entry}"):
            day = _partition(sub, "dt")
            if day is None or day not in days:
                continue
            try:
                summary = _summary(reader, f"{SIMULATION}/summary/{entry}/{sub}")
                if summary is None:
                    skipped.append(f"simulation {run} {day}")
                    continue
                metrics = _frame(reader, f"{SIMULATION}/metrics/{entry}/{sub}")
                rules = _frame(reader, f"{SIMULATION}/rule_checks/{entry}/{sub}")
            except UnreadableFile as exc:
                lost.append(Unreadable(f"simulation {run} {day}", exc.path, exc.reason))
                continue
            found.append(SimulatedDay(run, day, summary, _sorted(metrics, "metrics"), _sorted(rules, "rule_checks")))
    return found, skipped


OFFLINE_VALUE = "auc"  # the training pipeline's table: its AUC column
OFFLINE_COLUMNS = ("dt", "model", "split", OFFLINE_VALUE)


def read_offline_auc(path: str, spark: Any = None) -> pd.DataFrame:
    """The training pipeline's ``dt, model, split, auc`` table (Parquet file or directory, or a .csv file).

    ``dt`` is normalised to YYYY-MM-DD text; ``split`` to lower case.  A missing path or column is an
    :class:`~recsys_spark.errors.MissingInputError` or
    :class:`~recsys_spark.errors.SchemaError` naming it.
    """
    if is_local(path):
        local = _local(path)
        if not os.path.exists(local):
            raise MissingInputError(f"report.offline_auc: no such file or directory: {path}")
        frame = pd.read_csv(local) if local.endswith(".csv") else pq.read_table(local).to_pandas()
    else:
        if spark is None:
            raise MissingInputError(f"report.offline_auc: {path} is not a local path and no SparkSession was given")
        reader = spark.read.option("header", True).option("inferSchema", True)
        frame = (reader.csv(path) if path.endswith(".csv") else reader.parquet(path)).toPandas()
    missing = [c for c in OFFLINE_COLUMNS if c not in frame.columns]
    if missing:
        raise SchemaError(
            f"report.offline_auc: {path} lacks column(s) {', '.join(missing)} (expected {', '.join(OFFLINE_COLUMNS)})"
        )
    frame = frame[list(OFFLINE_COLUMNS)].copy()
    frame["dt"] = pd.to_datetime(frame["dt"]).dt.strftime("%Y-%m-%d")
    frame["split"] = frame["split"].astype(str).str.lower()
    frame["model"] = frame["model"].astype(str)
    frame[OFFLINE_VALUE] = frame[OFFLINE_VALUE].astype(float)
    return frame
