"""The analysis, the day's and the window's alike: which metrics are tested, the arms' sums (:mod:`.arm_sums`)
turned into result rows (:func:`recsys_spark.kernels.experiments.analyse_experiment`), the checks
(:mod:`.checks`) and each experiment's summary section, and the status of it all.

:func:`analyse` takes the exploded per-user rows (one per experiment, slice and user, with CUPED's covariates
when ``experiments.cuped_days`` > 0) and returns ``(result rows, checks, section)``; the section is
``{experiment: {"state", "reason", "users", ...}}``, which :mod:`.decisions` completes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pyspark.sql import DataFrame

from recsys_spark.config import Config
from recsys_spark.errors import ConfigError
from recsys_spark.experiments.arm_sums import arm_sums
from recsys_spark.experiments.assignments import Assigned
from recsys_spark.experiments.checks import compared_check, mismatched, multiple_assignment_check, srm_check
from recsys_spark.experiments.tables import Check
from recsys_spark.kernels.assignment_checks import why_not_compared
from recsys_spark.kernels.experiments import ResultRow, analyse_experiment, overflow_notes
from recsys_spark.kernels.metric_specs import MetricSpec, parse_metric
from recsys_spark.registry import key
from recsys_spark.schema import ALL

#: the arms' sums: {(experiment, variant, slice): {"users": n, f"{metric}|{part}": sum}} (:func:`.arm_sums.arm_sums`)
ArmSums = Mapping[tuple[str, str | None, str], Mapping[str, Any]]


def metric_specs(cfg: Config, available_ks: Sequence[int]) -> tuple[list[MetricSpec], list[str]]:
    """The tested metrics (``experiments.metrics``, then the decisions' goals, guardrails and secondary metrics
    it does not list), and a note for those left out because their cut-off is not in ``metrics.k`` (a run with
    ``--set metrics.k=[5]`` should not fail over the default experiment metrics at @10)."""
    names = dict.fromkeys([*cfg.experiments.metrics, *cfg.experiments.decision_metrics()])
    specs = [parse_metric(m, cfg.metrics.click_cap) for m in names]
    kept = [s for s in specs if s.k is None or s.k in available_ks]
    left = [s.name for s in specs if s not in kept]
    notes = (
        [f"experiments.metrics {left} left out: their cut-off is not in metrics.k {list(available_ks)}"] if left else []
    )
    if not kept:
        raise ConfigError(
            f"config key experiments.metrics: no metric can be tested with metrics.k "
            f"{list(available_ks)}: {list(cfg.experiments.metrics)}"
        )
    return kept, notes


def specs_with_columns(specs: Sequence[MetricSpec], columns: Sequence[str]) -> tuple[list[MetricSpec], list[str]]:
    """The metrics whose per-user sums the table has, and a note naming those left out (a value metric on
    a day whose clicks carry no value, a conversion event not in ``labels.conversion_events``)."""
    kept = [s for s in specs if all(c in columns for c in s.columns)]
    left = [s.name for s in specs if s not in kept]
    note = (
        f"experiments.metrics {left} left out: the per-user table has no sums for them (no value or dwell "
        "column in the clicks, an event not in labels.conversion_events, or a day written before they existed)"
    )
    return kept, [note] if left else []


def _confidence(cfg: Config) -> float:
    """``stats.confidence`` when the config has it, else 0.95."""
    return float(getattr(getattr(cfg, "stats", None), "confidence", 0.95))


class Analysis(NamedTuple):
    """What :func:`analyse` gives: the result rows, the checks, and the summary section
    ``{experiment: {"state", "reason", "users", ...}}`` (:func:`experiment_section`)."""

    results: list[ResultRow]
    checks: list[Check]
    section: dict[str, Any]


@dataclass(frozen=True)
class Counted:
    """An experiment's users in the ``all`` slice: counted per variant, and excluded for several variants."""

    users: dict[str, int]
    excluded: int

    @classmethod
    def of(cls, sums: ArmSums, experiment: str) -> Counted:
        """From the arms' sums (variant None: the users excluded for several variants)."""
        mine = [(v, int(d["users"])) for (e, v, s), d in sums.items() if e == experiment and s == ALL]
        return cls({v: n for v, n in mine if v is not None}, sum(n for v, n in mine if v is None))


def analyse(
    rows: DataFrame,
    cfg: Config,
    specs: Sequence[MetricSpec],
    cuped: bool,
    assigned: Mapping[str, Assigned] | None = None,
    exposure_example: Callable[[], str | None] | None = None,
    population: Callable[[str], tuple[str, int] | None] | None = None,
) -> Analysis:
    """Result rows, checks and the summary section from exploded per-user rows (one per experiment, slice, user).

    ``assigned`` (the daily run): the experiments of the assignments table; one that no user with a
    valid row belongs to is analysed too (not compared, with both sides' ids named: an id format
    mismatch loses every user).  ``exposure_example`` gives a user id of the day, called only then; so is
    ``population`` (an experiment's population condition and its assigned users with a valid row before it was
    applied, None without a population: :func:`kernels.assignment_checks.why_not_compared`).
    """
    ex = cfg.experiments
    sums = arm_sums(rows, specs, cuped)
    results: list[ResultRow] = []
    checks: list[Check] = []
    section: dict[str, Any] = {}
    confidence = _confidence(cfg)
    assigned = assigned or {}
    example: list[str | None] = []  # the exposure example, fetched once
    for name in sorted({e for e, _, _ in sums} | set(assigned)):
        counted = Counted.of(sums, name)
        side = assigned.get(name)
        empty = side is not None and not counted.users and not counted.excluded
        if empty and not example:
            example.append(exposure_example() if exposure_example is not None else None)
        admitted = population(name) if empty and population is not None else None
        reason = why_not_compared(
            counted.users,
            counted.excluded,
            ex.control,
            side.ids if side is not None else None,
            side.example if side is not None else None,
            example[0] if example else None,
            admitted,
        )
        srm = srm_check(name, counted.users, ex.weights, ex.srm_p_threshold)
        checks += [
            compared_check(name, counted.users, ex.control, reason),
            srm,
            multiple_assignment_check(name, counted.excluded, sum(counted.users.values())),
        ]
        by_arm = {(v, s): d for (e, v, s), d in sums.items() if e == name and v is not None}
        rows_of = analyse_experiment(
            name,
            by_arm,
            specs,
            ex.control,
            ex.correction,
            confidence,
            ex.power,
            cuped,
            ex.inference,
            ex.sequential_tuning,
        )
        results += rows_of
        section[name] = experiment_section(counted, reason, srm, rows_of, ex.control, 1 - confidence)
        if overflow := overflow_notes(name, by_arm, specs):
            section[name]["overflow"] = overflow
        if side is not None:
            section[name].update(assigned_ids=side.ids, matched_ids=sum(counted.users.values()) + counted.excluded)
        if cuped:
            section[name]["users_with_covariate"] = {
                _name(r): r.covariate_n for r in rows_of if r.slice == ALL and r.covariate_n is not None
            }
    return Analysis(results, checks, section)


def experiment_section(
    counted: Counted, reason: str | None, srm: Check, rows: Sequence[ResultRow], control: str, alpha: float
) -> dict[str, Any]:
    """An experiment's summary section: its state (``not_compared`` with ``reason``, else ``ok`` or
    ``srm_failed``), its users, the SRM test, and the ``all`` slice's rows whose adjusted p is below ``alpha``."""
    return {
        "state": "not_compared" if reason else "ok" if srm.passed else "srm_failed",
        "reason": reason,
        "users": counted.users,
        "excluded_multiple_variants": counted.excluded,
        "control": control,
        "srm_p_value": srm.p_value,
        "srm_passed": srm.passed,
        "control_missing": control not in counted.users,
        "significant": [
            _brief(r) for r in rows if r.slice == ALL and r.p_adjusted is not None and r.p_adjusted < alpha
        ],
    }


def _name(r: ResultRow) -> str:
    """The row's metric key, ``ndcg@10_user_avg``."""
    return key(r.metric, r.k, r.aggregation)


def _brief(r: ResultRow) -> dict[str, Any]:
    """A significant row in the summary: its variant, metric key, relative lift and interval, adjusted p."""
    return {
        "variant": r.variant,
        "metric": _name(r),
        "rel_delta": r.rel_delta,
        "rel_ci_low": r.rel_ci_low,
        "rel_ci_high": r.rel_ci_high,
        "p_adjusted": r.p_adjusted,
    }


def status_and_notes(section: Mapping[str, Any], checks: Sequence[Check]) -> tuple[str, list[str], list[str]]:
    """(status, not compared experiments, notes) of an analysis: ``srm_failed`` when an SRM test failed,
    else ``not_compared`` when an experiment compared nothing, else ``ok``."""
    failed = mismatched(checks)
    not_compared = [name for name, e in sorted(section.items()) if e["state"] == "not_compared"]
    notes = [f"experiment {name} not compared: {section[name]['reason']}" for name in not_compared]
    notes += [note for _, e in sorted(section.items()) for note in e.get("overflow", [])]
    if failed:
        notes.append(f"sample-ratio mismatch in {', '.join(failed)}: their results are not to be trusted")
    return ("srm_failed" if failed else "not_compared" if not_compared else "ok"), not_compared, notes
