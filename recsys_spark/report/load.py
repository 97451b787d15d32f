"""Read what the commands wrote for a range of days, driver-side, into a :class:`~recsys_spark.report.data.RunData`.

Every path comes from :mod:`recsys_spark.tables`' layouts.  The daily tables are read per day partition,
``{output_root}/{table}/dt={day}``; beside them, the experiment windows that end in the range
(:data:`~recsys_spark.tables.WINDOW`), the offline runs (:data:`~recsys_spark.tables.OFFLINE_RUN`) and their
comparisons (:data:`~recsys_spark.tables.OFFLINE_COMPARISON`), the OPE runs (:data:`~recsys_spark.tables.OPE`),
the simulated days of the range (:data:`~recsys_spark.tables.SIMULATION`) and the gates' verdicts
(:data:`~recsys_spark.tables.GATE`).  A layout's partitions are walked one way (:func:`partitions`) and a run
with a summary is read only when its ``_SUCCESS`` marker says it is complete (:func:`read_complete`).  Every
frame is sorted by its keys, so the report never depends on file or task order.

A file that cannot be read (a truncated or corrupt Parquet file, a ``summary.json`` or ``verdict.json`` cut
short) leaves out what it belongs to -- that day's table, that run, that simulated day, that verdict -- and
becomes an :class:`~recsys_spark.report.data.Unreadable` entry naming the file and why (``RunData.unreadable``,
one line at the top of the page and in the section it belongs to): the rest of the report is still written.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import unquote

import pandas as pd
import pyarrow.parquet as pq

from recsys_spark import tables
from recsys_spark.errors import MissingInputError, SchemaError
from recsys_spark.report.data import Comparison, OfflineRun, OpeRun, RunData, SimulatedDay, Unreadable
from recsys_spark.report.readers import Reader, UnreadableFile, is_local, local_path, parse_json
from recsys_spark.report.values import split_thresholds
from recsys_spark.tables import DAILY, GATE, OFFLINE_COMPARISON, OFFLINE_RUN, OPE, SIMULATION, SUMMARY, WINDOW, Layout

T = TypeVar("T")

#: the daily tables the report draws (:data:`recsys_spark.tables.DAILY`; not the per-user tables, the set-aside
#: rows, nor the summary, read on its own)
TABLES = tuple(t for t in DAILY.tables if t not in ("user_metrics", "experiment_users", "rejected", SUMMARY))
#: sort keys per table (columns absent from a frame are skipped)
KEYS = {
    "metrics": ["dt", "slice", "metric", "k", "aggregation"],
    "lorenz": ["dt", "slice", "x"],
    "rule_checks": ["dt", "severity", "rule"],
    "experiments": ["dt", "experiment", "variant", "metric", "k", "aggregation", "slice"],
    "experiment_cumulative": ["dt", "experiment", "variant", "metric", "k", "aggregation", "slice"],
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
    "experiment_window_decisions": ["experiment", "window_end", "window_start", "variant"],
    "offline_metrics": ["slice", "metric", "k", "aggregation"],
    "offline_thresholds": ["slice", "threshold", "metric"],
    "offline_comparison": ["metric", "k", "aggregation", "column"],
    "experiment_decisions": ["dt", "experiment", "variant"],
    "offline_auc": ["dt", "model", "split"],
}


#: the reading contract: a day's tables are complete, and from one run, only when this file exists
SUCCESS = f"{SUMMARY}/dt={{day}}/{tables.SUCCESS}"


def _sorted(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    keys = [k for k in KEYS.get(name, ["dt"]) if k in frame.columns]
    return frame.sort_values(keys, kind="mergesort", na_position="first").reset_index(drop=True)


def _joined(parts: list[pd.DataFrame], name: str) -> pd.DataFrame:
    return _sorted(pd.concat(parts, ignore_index=True), name) if parts else pd.DataFrame()


def day_range(start: dt.date, end: dt.date) -> list[str]:
    """Every day of ``start`` .. ``end`` (inclusive) as ``YYYY-MM-DD``."""
    return [(start + dt.timedelta(days=i)).isoformat() for i in range((end - start).days + 1)]


def written(reader: Reader, day: str) -> bool:
    """Whether any table the report reads holds ``day`` (complete or not)."""
    return any(reader.exists(DAILY.relative(t, dt=day)) for t in (SUMMARY, *TABLES))


def complete(reader: Reader, day: str) -> bool:
    """Whether ``day``'s tables may be read: its ``summary/dt=D/_SUCCESS`` exists."""
    return reader.exists(SUCCESS.format(day=day))


def read_part(reader: Reader, path: str, what: str, unreadable: list[Unreadable]) -> pd.DataFrame | None:
    """``reader.frame(path)``; None, and an :class:`Unreadable` entry for ``what``, when a file of it cannot
    be read."""
    try:
        return reader.frame(path)
    except UnreadableFile as exc:
        unreadable.append(Unreadable(what, exc.path, exc.reason))
        return None


def _summaries(reader: Reader, days: list[str], unreadable: list[Unreadable]) -> dict[str, dict[str, Any]]:
    """The ``summary.json`` of each of ``days`` (a day whose summary is not valid JSON is left out, named)."""
    summaries: dict[str, dict[str, Any]] = {}
    for day in days:
        try:
            summary = parse_json(reader, f"{DAILY.relative(SUMMARY, dt=day)}/{DAILY.summary_file}")
        except UnreadableFile as exc:
            unreadable.append(Unreadable(f"the summary of {day}", exc.path, exc.reason))
            continue
        if summary is not None:
            summaries[day] = summary
    return summaries


def load(reader: Reader, start: dt.date, end: dt.date, offline_auc: pd.DataFrame | None = None) -> RunData:
    """Read the summaries and tables of every complete day of the range (missing days are simply absent;
    a day with output but no ``_SUCCESS`` is left out and listed in ``skipped``)."""
    days = day_range(start, end)
    readable = [d for d in days if complete(reader, d)]
    skipped = [d for d in days if d not in readable and written(reader, d)]
    unreadable: list[Unreadable] = []
    summaries = _summaries(reader, readable, unreadable)
    frames: dict[str, pd.DataFrame] = {}
    for name in TABLES:
        parts = []
        for day in readable:
            frame = read_part(reader, DAILY.relative(name, dt=day), f"{name} of {day}", unreadable)
            if frame is not None:
                parts.append(frame.assign(dt=day))
        frames[name] = _joined(parts, name)
    if offline_auc is not None:
        offline_auc = _sorted(offline_auc[offline_auc["dt"].isin(days)], "offline_auc")
    windows, window_checks = load_windows(reader, days[0], days[-1], unreadable)
    window_decisions = load_window_decisions(reader, days[0], days[-1], unreadable)
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
        window_decisions=window_decisions,
        ope_runs=ope_runs,
        simulations=simulations,
        ope_skipped=ope_skipped + sim_skipped,
        unreadable=unreadable,
    )


def context_metrics(reader: Reader, data: RunData) -> pd.DataFrame:
    """Metrics of the days before and a week before the last day, when they fall outside the range."""
    day = data.last_day
    if day is None:
        return pd.DataFrame()
    parts = []
    for back in (1, 7):
        other = (dt.date.fromisoformat(day) - dt.timedelta(days=back)).isoformat()
        if other < data.days[0] and complete(reader, other):
            frame = read_part(reader, DAILY.relative("metrics", dt=other), f"metrics of {other}", data.unreadable)
            if frame is not None:
                parts.append(frame.assign(dt=other))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


# --- the partitions of a layout ----------------------------------------------------------------------------
def _partition(entry: str, key: str) -> str | None:
    """The value of a ``key=value`` directory name (Spark escapes special characters: unescaped), else None."""
    name, sep, value = entry.partition("=")
    return unquote(value) if sep and name == key else None


def under(layout: Layout, table: str, part: str = "") -> str:
    """``{root}/{table}[/{part}]`` relative to the output root, for a table ``layout`` owns (``part`` as the
    directories are named, Spark's escapes kept)."""
    if table not in layout.tables:
        raise KeyError(f"{layout.what} owns no table {table!r} (it owns {', '.join(layout.tables)})")
    return "/".join(p for p in (layout.root, table, part) if p)


def partitions(reader: Reader, layout: Layout, table: str) -> list[tuple[dict[str, str], str]]:
    """Every partition of ``layout``'s ``table``: its values (``{"run": "ranker_v2", "dt": "2026-11-20"}``,
    escapes undone) and its path below the table (``run=ranker_v2/dt=2026-11-20``, as named), sorted; a
    directory that is not ``key=value`` for the layout's next key is passed over."""
    found: list[tuple[dict[str, str], str]] = [({}, "")]
    for key in layout.keys:
        found = [
            ({**values, key: value}, f"{part}/{entry}" if part else entry)
            for values, part in found
            for entry in reader.dirs(under(layout, table, part))
            if (value := _partition(entry, key)) is not None
        ]
    return found


def _summary(reader: Reader, layout: Layout, part: str) -> dict[str, Any] | None:
    """The partition's ``summary.json`` when its ``_SUCCESS`` exists (the run is complete), else None;
    :class:`UnreadableFile` when the file is not valid JSON."""
    where = under(layout, SUMMARY, part)
    if not reader.exists(f"{where}/{tables.SUCCESS}"):
        return None
    return parse_json(reader, f"{where}/{layout.summary_file}") or {}


def _frame(reader: Reader, path: str) -> pd.DataFrame:
    """``reader.frame(path)``, an empty frame when absent (:class:`UnreadableFile` passes through)."""
    frame = reader.frame(path)
    return frame if frame is not None else pd.DataFrame()


def read_complete(
    reader: Reader,
    layout: Layout,
    label: Callable[[dict[str, str]], str],
    read: Callable[[dict[str, str], str, dict[str, Any]], T],
    lost: list[Unreadable],
    lost_prefix: str = "",
    keep: Callable[[dict[str, str]], bool] = lambda values: True,
) -> tuple[list[T], list[str]]:
    """``read(values, part, summary)`` of every complete partition of ``layout`` that ``keep`` accepts, and the
    ``label`` of each incomplete one (no ``_SUCCESS``); a partition with a file that cannot be read is left out
    and added to ``lost`` as ``lost_prefix + label``."""
    found: list[T] = []
    skipped: list[str] = []
    for values, part in partitions(reader, layout, SUMMARY):
        if not keep(values):
            continue
        try:
            summary = _summary(reader, layout, part)
            if summary is None:
                skipped.append(label(values))
                continue
            found.append(read(values, part, summary))
        except UnreadableFile as exc:
            lost.append(Unreadable(lost_prefix + label(values), exc.path, exc.reason))
    return found, skipped


# --- the runs beside the days ------------------------------------------------------------------------------
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
    table, checks_table, _ = WINDOW.tables  # the decisions: load_window_decisions
    for values, part in partitions(reader, WINDOW, table):
        experiment, span = values["experiment"], window_span(values["window"])
        if span is None or not first <= span[1] <= last:
            continue
        where = {"experiment": experiment, "window_start": span[0], "window_end": span[1]}
        what = f"the window {span[0]}..{span[1]} of {experiment}"
        frame = read_part(reader, under(WINDOW, table, part), what, lost)
        if frame is None:
            continue
        results.append(frame.assign(**where))
        found = read_part(reader, under(WINDOW, checks_table, part), f"{what}: its checks", lost)
        if found is not None:
            checks.append(found.assign(**where))
    return _joined(results, table), _joined(checks, checks_table)


def load_window_decisions(
    reader: Reader, first: str, last: str, unreadable: list[Unreadable] | None = None
) -> pd.DataFrame:
    """The decisions of the experiment windows whose end falls in ``first`` .. ``last``
    (``experiment_window_decisions``), each row with ``experiment``, ``window_start`` and ``window_end`` from
    its path; an empty frame when there is none."""
    lost = [] if unreadable is None else unreadable
    table = WINDOW.tables[2]
    found = []
    for values, part in partitions(reader, WINDOW, table):
        experiment, span = values["experiment"], window_span(values["window"])
        if span is None or not first <= span[1] <= last:
            continue
        what = f"the window {span[0]}..{span[1]} of {experiment}: its decisions"
        frame = read_part(reader, under(WINDOW, table, part), what, lost)
        if frame is not None:
            found.append(frame.assign(experiment=experiment, window_start=span[0], window_end=span[1]))
    return _joined(found, table)


def load_offline(
    reader: Reader, unreadable: list[Unreadable] | None = None
) -> tuple[list[OfflineRun], list[Comparison], list[str]]:
    """The complete offline runs and comparisons (by name), and the incomplete ones' names; a run or comparison
    with a file that cannot be read is left out and added to ``unreadable``."""
    lost = [] if unreadable is None else unreadable

    def comparison(values: dict[str, str], part: str, summary: dict[str, Any]) -> Comparison:
        rows = _frame(reader, under(OFFLINE_COMPARISON, "comparison", part))
        return Comparison(values["base"], values["candidate"], summary, _sorted(rows, "offline_comparison"))

    def run(values: dict[str, str], part: str, summary: dict[str, Any]) -> OfflineRun:
        metrics, at = split_thresholds(_frame(reader, under(OFFLINE_RUN, "metrics", part)))
        roc, pr, confusion = (
            _frame(reader, under(OFFLINE_RUN, t, part)) for t in ("roc_curve", "pr_curve", "confusion")
        )
        metrics = _sorted(metrics, "offline_metrics")
        return OfflineRun(values["run"], summary, metrics, roc, pr, _sorted(at, "offline_thresholds"), confusion)

    # both under offline/summary: base=A before run=B, as the directories sort
    comparisons, skipped = read_complete(
        reader,
        OFFLINE_COMPARISON,
        lambda v: f"comparison {v['base']} -> {v['candidate']}",
        comparison,
        lost,
        "offline ",
    )
    runs, runs_skipped = read_complete(reader, OFFLINE_RUN, lambda v: f"run {v['run']}", run, lost, "offline ")
    return runs, comparisons, skipped + runs_skipped


def load_ope(reader: Reader, unreadable: list[Unreadable] | None = None) -> tuple[list[OpeRun], list[str]]:
    """The complete OPE runs (by name), and the incomplete ones' names; a run with a file that cannot be read
    is left out and added to ``unreadable`` (``what``: ``ope run NAME``)."""

    def run(values: dict[str, str], part: str, summary: dict[str, Any]) -> OpeRun:
        estimates = _frame(reader, under(OPE, "estimates", part))  # in the order the run wrote them
        diagnostics = _frame(reader, under(OPE, "diagnostics", part))  # in the run's order too
        return OpeRun(values["run"], summary, estimates, diagnostics)

    lost = [] if unreadable is None else unreadable
    return read_complete(reader, OPE, lambda v: f"ope run {v['run']}", run, lost)


def load_simulations(
    reader: Reader, days: list[str], unreadable: list[Unreadable] | None = None
) -> tuple[list[SimulatedDay], list[str]]:
    """The complete simulated days of the range (by run, then day), and the incomplete ones' names; a day with
    a file that cannot be read is left out and added to ``unreadable`` (``what``: ``simulation NAME D``)."""

    def day(values: dict[str, str], part: str, summary: dict[str, Any]) -> SimulatedDay:
        metrics = _frame(reader, under(SIMULATION, "metrics", part))
        rules = _frame(reader, under(SIMULATION, "rule_checks", part))
        return SimulatedDay(
            values["run"], values["dt"], summary, _sorted(metrics, "metrics"), _sorted(rules, "rule_checks")
        )

    lost = [] if unreadable is None else unreadable
    return read_complete(
        reader,
        SIMULATION,
        lambda v: f"simulation {v['run']} {v['dt']}",
        day,
        lost,
        keep=lambda values: values["dt"] in days,
    )


def read_verdicts(reader: Reader, unreadable: list[Unreadable] | None = None) -> list[dict[str, Any]]:
    """Every gate's verdict under the output root, by name (a name whose verdict is being replaced is skipped;
    one that is not valid JSON is left out and added to ``unreadable``)."""
    out = []
    (table,) = GATE.tables
    for name in reader.names(table):
        try:
            verdict = parse_json(reader, f"{table}/{name}/{GATE.summary_file}")
        except UnreadableFile as exc:
            if unreadable is not None:
                unreadable.append(Unreadable(f"gate verdict {name}", exc.path, exc.reason))
            continue
        if verdict is not None:
            out.append(verdict)
    return out


# --- the training pipeline's table -------------------------------------------------------------------------
OFFLINE_VALUE = "auc"  # the training pipeline's table: its AUC column
OFFLINE_COLUMNS = ("dt", "model", "split", OFFLINE_VALUE)


def read_offline_auc(path: str, spark: Any = None) -> pd.DataFrame:
    """The training pipeline's ``dt, model, split, auc`` table (Parquet file or directory, or a .csv file).

    ``dt`` is normalised to YYYY-MM-DD text; ``split`` to lower case.  A missing path or column is an
    :class:`~recsys_spark.errors.MissingInputError` or
    :class:`~recsys_spark.errors.SchemaError` naming it.
    """
    if is_local(path):
        local = local_path(path)
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
