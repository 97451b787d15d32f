"""The nightly decision's sample: every user of an experiment since its first day, each counted once.

Always-valid intervals are made to be looked at every night on the data accumulated since the start, so that
they narrow as users accumulate (a day's users alone give a band as wide on day 7 as on day 1).
:func:`accumulate`, called by the day's stage (:func:`.stage.experiment_stage`) after the day's analysis:

1. each analysed experiment's first day (:func:`starts`): ``experiments.per_experiment.NAME.start``, else the
   day of its earliest ``assigned_at`` in the day's assignments, else the first day of the lookback on which the
   experiment has users in ``experiment_users``; never before the lookback (the ``experiments.max_cumulative_days``
   days ending on the day) nor after the day;
2. the ``experiment_users`` of the complete earlier days from the earliest first day
   (:func:`.user_sums.complete_days`) and the day's own table, their common columns (:func:`.user_sums.union_days`),
   each experiment's rows from its first day on;
3. each user counted once over those days as the window counts it (:func:`.window.count_once`), CUPED's
   pre-period before each first day (:func:`.covariates.add_pre_period`), and the same analysis
   (:func:`.analysis.analyse`): the sequence's interval at the accumulated users.

An experiment whose sample holds users of one day only (it started that day, or no earlier day was found)
keeps the day's analysis (``basis`` ``day``); the others are decided on the accumulated one (``cumulative``).
Only per-experiment counts and the arms' sums reach the driver.  docs/experiments.md, "Decisions on the
accumulated data".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config
from recsys_spark.experiments.analysis import Analysis, analyse, specs_with_columns
from recsys_spark.experiments.assignments import Assigned, explode_variants
from recsys_spark.experiments.covariates import add_pre_period
from recsys_spark.experiments.decisions import decisions
from recsys_spark.experiments.tables import EXPERIMENT, USERS_TABLE
from recsys_spark.experiments.user_sums import complete_days, read_user_table, skipped_note, union_days
from recsys_spark.experiments.window import count_once
from recsys_spark.kernels.decisions import Decision
from recsys_spark.kernels.metric_specs import MetricSpec
from recsys_spark.schema import ALL, SLICE

#: the ISO day of each per-user row while the days are read together
DAY_COLUMN = "_dt"
CUMULATIVE, DAY = "cumulative", "day"


@dataclass(frozen=True)
class Span:
    """An experiment's accumulated sample: its first day, how that day was found (``config``, ``assigned_at``,
    ``experiment_users``, or ``day`` when nothing earlier names one) and the days whose users it holds."""

    first_day: dt.date
    source: str
    days: int

    @property
    def basis(self) -> str:
        """``cumulative`` when the sample holds users of more than one day, else ``day``."""
        return CUMULATIVE if self.days > 1 else DAY


@dataclass
class Cumulative:
    """What :func:`accumulate` gives: the analysis of the experiments decided on their accumulated users (None
    when there is none), every analysed experiment's :class:`Span`, and notes."""

    analysis: Analysis | None
    spans: dict[str, Span]
    notes: list[str] = field(default_factory=list)

    def basis(self, experiment: str) -> str:
        span = self.spans.get(experiment)
        return span.basis if span is not None and self.analysis is not None else DAY


def starts(
    experiments: Sequence[str],
    configured: Mapping[str, dt.date | None],
    assigned: Mapping[str, Assigned],
    date: dt.date,
    max_days: int,
) -> tuple[dict[str, tuple[dt.date | None, str]], list[str]]:
    """Each experiment's first day and its source (None and ``experiment_users``: to be found in the tables),
    within [the lookback's first day, ``date``], and a note for each first day moved into it.

    >>> day = dt.date(2026, 11, 20)
    >>> got, notes = starts(["a", "b", "c"], {"a": dt.date(2026, 11, 14)}, {"b": Assigned(3, "u", day)}, day, 90)
    >>> got["a"], got["b"], got["c"]
    ((datetime.date(2026, 11, 14), 'config'), (datetime.date(2026, 11, 20), 'assigned_at'), (None, 'experiment_users'))
    >>> starts(["a"], {"a": dt.date(2026, 1, 1)}, {}, day, 7)[0]["a"]
    (datetime.date(2026, 11, 14), 'config')
    """
    floor = date - dt.timedelta(days=max_days - 1)
    out: dict[str, tuple[dt.date | None, str]] = {}
    notes = []
    for name in experiments:
        side = assigned.get(name)
        start, source = configured.get(name), "config"
        if start is None and side is not None and side.first_day is not None:
            start, source = side.first_day, "assigned_at"
        if start is None:
            out[name] = (None, "experiment_users")
            continue
        if start > date:
            notes.append(f"experiment {name}: its first day {start} ({source}) is after {date}: decided on the day")
            start = date
        elif start < floor:
            notes.append(
                f"experiment {name}: its first day {start} ({source}) is more than experiments.max_cumulative_days = "
                f"{max_days} days before {date}: its users are accumulated from {floor}"
            )
            start = floor
        out[name] = (start, source)
    return out, notes


def accumulate(
    spark: SparkSession,
    cfg: Config,
    date: dt.date,
    output_root: str,
    today: DataFrame,
    experiments: Sequence[str],
    assigned: Mapping[str, Assigned],
    specs: Sequence[MetricSpec],
) -> Cumulative:
    """The accumulated analysis of ``experiments`` (the day's), from the complete earlier days' ``experiment_users``
    and the day's own table ``today`` (module docstring)."""
    ex = cfg.experiments
    first, notes = starts(experiments, {e: ex.start_of(e) for e in experiments}, assigned, date, ex.max_cumulative_days)
    floor = date - dt.timedelta(days=ex.max_cumulative_days - 1)
    since = {e: start or floor for e, (start, _) in first.items()}
    single = {e: Span(start or date, source if start else DAY, 1) for e, (start, source) in first.items()}
    earliest = min(since.values(), default=date)
    incomplete: list[dt.date] = []
    earlier = complete_days(spark, output_root, _days(earliest, date), incomplete)
    if incomplete:
        notes.append(f"accumulated users: {len(earlier)} earlier day(s) read{skipped_note(incomplete)}")
    if not earlier:
        return Cumulative(None, single, notes)
    frames = {d: read_user_table(spark, output_root, d) for d in earlier}
    partial: list[str] = []
    users = union_days({**frames, date: today}, partial, day_column=DAY_COLUMN)
    own = F.create_map(*[F.lit(x) for e, d in sorted(since.items()) for x in (e, d.isoformat())])
    rows = explode_variants(users).where(
        F.col(EXPERIMENT).isin(list(experiments)) & (F.col(DAY_COLUMN) >= F.element_at(own, F.col(EXPERIMENT)))
    )
    spans = _spans(rows, first, single)
    several = sorted(e for e, s in spans.items() if s.basis == CUMULATIVE)
    if not several:
        return Cumulative(None, spans, notes)
    kept, missing = specs_with_columns(specs, users.columns)
    notes += [f"accumulated users: {note}" for note in (*partial, *missing)]
    counted = count_once(rows.where(F.col(EXPERIMENT).isin(several)).drop(DAY_COLUMN))
    cuped = ex.cuped_days > 0
    if cuped:
        counted = _with_pre_period(
            spark, output_root, counted, kept, {e: spans[e] for e in several}, ex.cuped_days, notes
        )
    if ex.inference != "sequential":
        notes.append(
            "accumulated users decided with fixed-horizon intervals (experiments.inference = fixed): looked at every "
            "night they do not hold their error rate; the sequence does"
        )
    return Cumulative(analyse(counted, cfg, kept, cuped), spans, notes)


def _days(first: dt.date, date: dt.date) -> list[dt.date]:
    """The days from ``first`` to the day before ``date``."""
    return [first + dt.timedelta(days=i) for i in range((date - first).days)]


def _spans(
    rows: DataFrame, first: Mapping[str, tuple[dt.date | None, str]], single: Mapping[str, Span]
) -> dict[str, Span]:
    """Each experiment's :class:`Span` from one small aggregation of its rows in the ``all`` slice: the days with
    users and the first of them (the first day of an experiment whose start nothing names)."""
    seen = {
        r[EXPERIMENT]: (dt.date.fromisoformat(r["first"]), int(r["days"]))
        for r in rows.where(F.col(SLICE) == ALL)
        .groupBy(EXPERIMENT)
        .agg(F.min(DAY_COLUMN).alias("first"), F.count_distinct(DAY_COLUMN).alias("days"))
        .collect()
    }
    spans = dict(single)
    for name, (found, days) in seen.items():
        start, source = first[name]
        spans[name] = Span(start, source, days) if start is not None else Span(found, "experiment_users", days)
    return spans


def _with_pre_period(
    spark: SparkSession,
    output_root: str,
    counted: DataFrame,
    specs: Sequence[MetricSpec],
    spans: Mapping[str, Span],
    cuped_days: int,
    notes: list[str],
) -> DataFrame:
    """CUPED's covariates of each experiment from the ``cuped_days`` days before its own first day (one read per
    distinct first day), as the window takes them before its start."""
    by_day: dict[dt.date, list[str]] = {}
    for name, span in sorted(spans.items()):
        by_day.setdefault(span.first_day, []).append(name)
    parts = []
    for first_day, names in sorted(by_day.items()):
        part = counted if len(by_day) == 1 else counted.where(F.col(EXPERIMENT).isin(names))
        part, pre = add_pre_period(spark, output_root, part, specs, first_day, cuped_days)
        notes.append(
            f"accumulated users of {', '.join(names)}: CUPED covariate from {len(pre.found)} of the {cuped_days} "
            f"{USERS_TABLE} day(s) before {first_day}" + skipped_note(pre.incomplete)
        )
        notes += pre.notes
        parts.append(part)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def decide(day: Sequence[Decision], analysis: Analysis, cumulative: Cumulative, cfg: Config) -> list[Decision]:
    """The day's decisions (``day``, on ``analysis``) with those of the experiments whose sample spans several days
    replaced by the decisions on their accumulated users (``basis`` ``cumulative``); each experiment's summary
    section gets its ``cumulative`` span (first day, its source, days, basis; with the accumulated users, SRM and
    excluded users when decided on them) and its ``decisions`` the basis, first day and days."""
    own: list[Decision] = []
    if cumulative.analysis is not None:
        own = [
            replace(d, basis=CUMULATIVE)
            for d in decisions(cumulative.analysis, cfg)
            if cumulative.basis(d.experiment) == CUMULATIVE
        ]
    mine = {d.experiment for d in own}
    out = sorted([*(d for d in day if d.experiment not in mine), *own], key=lambda d: (d.experiment, d.variant or ""))
    for name, e in analysis.section.items():
        span = cumulative.spans.get(name)
        if span is None:
            continue
        e["cumulative"] = _section(span, cumulative.basis(name), cumulative.analysis, name)
        e["decisions"] = {
            d.variant or "": {
                "decision": d.decision,
                "reasons": d.reasons,
                "basis": d.basis,
                "first_day": span.first_day.isoformat(),
                "days": span.days if d.basis == CUMULATIVE else 1,
            }
            for d in out
            if d.experiment == name
        }
    return out


def _section(span: Span, basis: str, analysis: Analysis | None, name: str) -> dict[str, Any]:
    """An experiment's ``cumulative`` summary entry."""
    entry: dict[str, Any] = {
        "first_day": span.first_day.isoformat(),
        "first_day_from": span.source,
        "days": span.days,
        "basis": basis,
    }
    if basis == CUMULATIVE and analysis is not None:
        e = analysis.section[name]
        entry.update(
            {k: e[k] for k in ("state", "reason", "users", "excluded_multiple_variants", "srm_p_value", "srm_passed")}
        )
    return entry


def cumulative_rows(day: Analysis, cumulative: Cumulative) -> list[tuple]:
    """The ``experiment_cumulative`` rows (:data:`.tables.CUMULATIVE_SCHEMA`): each experiment's accumulated result
    rows, or the day's for one whose sample is the day's, with its first day and days."""
    decided = {e for e in cumulative.spans if cumulative.basis(e) == CUMULATIVE}
    rows = [r for r in day.results if r.experiment not in decided]
    if cumulative.analysis is not None:
        rows += [r for r in cumulative.analysis.results if r.experiment in decided]
    out = []
    for r in rows:
        span = cumulative.spans[r.experiment]
        out.append((*r.as_tuple(), span.first_day.isoformat(), span.days if r.experiment in decided else 1))
    return out
