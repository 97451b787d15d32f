"""What the report shows, as read from an output root (:mod:`recsys_spark.report.load` fills it): the range's
days, their summaries and daily tables, the experiment windows, the offline runs and comparisons, the OPE runs,
the simulated days, the gates' verdicts, and what was left out (incomplete, or a file that cannot be read).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


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


@dataclass
class OfflineRun:
    """One complete offline run: ``offline/metrics/run=NAME``, its curves and its ``summary.json``."""

    name: str
    summary: dict[str, Any]
    metrics: pd.DataFrame
    #: its ``roc_curve`` and ``pr_curve`` (empty frames when the run wrote none: no predictions)
    roc: pd.DataFrame = field(default_factory=pd.DataFrame)
    pr: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: its metric rows at a threshold (``threshold`` not null; out of ``metrics``, which (metric, k,
    #: aggregation, slice) keys alone) and its ``confusion`` table; empty frames when the run wrote none
    thresholds: pd.DataFrame = field(default_factory=pd.DataFrame)
    confusion: pd.DataFrame = field(default_factory=pd.DataFrame)


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
    #: every gate's verdict under the output root (``gate/NAME/verdict.json``; report/sections/gate.py)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    #: the complete OPE runs (they carry no day: each covers its own window), and the simulated days of the
    #: range; those left out because their ``_SUCCESS`` is missing
    ope_runs: list[OpeRun] = field(default_factory=list)
    simulations: list[SimulatedDay] = field(default_factory=list)
    ope_skipped: list[str] = field(default_factory=list)
    #: what was left out because a file of it cannot be read, each naming the file (module docstring)
    unreadable: list[Unreadable] = field(default_factory=list)
    #: the decisions of the experiment windows ending in the range (``experiment_window_decisions``, with
    #: ``experiment``, ``window_start`` and ``window_end`` from the path); an empty frame when there is none
    window_decisions: pd.DataFrame = field(default_factory=pd.DataFrame)

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
