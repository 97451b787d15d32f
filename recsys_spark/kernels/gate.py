"""The model gate's checks on interval bounds (pure Python; :mod:`recsys_spark.gate` reads the tables).

A check is a threshold on one (metric, k, aggregation, slice) of the candidate (docs/gate.md):

* ``lower_bound`` / ``upper_bound`` on the candidate's **value**;
* ``min_absolute_change`` / ``min_relative_change`` on its **change** against the baseline, in the metric's
  better direction (the registry's): the candidate must gain at least that much; with ``guardrail`` the
  threshold is a non-inferiority margin instead, the worsening it may show.

Each is checked on the interval's bound that is least favourable to the candidate (``on = "bound"``, the
default: a noisy run cannot pass on luck) or on the point estimate (``on = "point"``, what TFMA's and MLflow's
thresholds do).  A (metric, slice) missing from the results fails by name, as does a bound asked of a row
without an interval.

>>> from dataclasses import replace
>>> row = Row("ndcg@10_user_avg", "all", value=0.31, delta=0.004, delta_low=-0.001, delta_high=0.009)
>>> check = GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.0)
>>> [r.passed for r in evaluate([check], [row])], [r.passed for r in evaluate([replace(check, on="point")], [row])]
([False], [True])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from recsys_spark.registry import key, metric


@dataclass(frozen=True)
class GateCheck:
    """One ``[[gate.checks]]`` as the config reads it (``gate.checks``, validated in :class:`config.GateConfig`): a
    threshold on a (metric, k, aggregation, slice) of the candidate, see the module docstring."""

    metric: str = ""
    k: int | None = None
    aggregation: str = ""
    slice: str = "all"
    lower_bound: float | None = None
    upper_bound: float | None = None
    min_absolute_change: float | None = None
    min_relative_change: float | None = None
    on: str = "bound"
    guardrail: bool = False

    @property
    def key(self) -> str:
        """The metric's key (``ndcg@10_user_avg``)."""
        return key(self.metric, self.k, self.aggregation)

    @property
    def changes(self) -> bool:
        """A threshold on the change against the baseline (rather than on the value only)."""
        return self.min_absolute_change is not None or self.min_relative_change is not None


@dataclass(frozen=True)
class Row:
    """What the results hold for one (metric key, slice): the candidate's value and its interval, and its change
    against the baseline, absolute and relative, with their intervals (None: not in the results)."""

    key: str
    slice: str
    value: float | None = None
    value_low: float | None = None
    value_high: float | None = None
    delta: float | None = None
    delta_low: float | None = None
    delta_high: float | None = None
    rel: float | None = None
    rel_low: float | None = None
    rel_high: float | None = None
    baseline: float | None = None
    ci_method: str | None = None


@dataclass(frozen=True)
class CheckResult:
    """One threshold of one check: what was compared with what, and why it passed or failed."""

    key: str
    metric: str
    k: int | None
    aggregation: str
    slice: str
    threshold: str  # lower_bound, upper_bound, min_absolute_change, min_relative_change
    threshold_value: float
    on: str
    guardrail: bool
    passed: bool
    why: str
    value: float | None = None  # the point: the candidate's value, or its change
    bound: float | None = None  # the interval's bound the threshold was checked on (with on = "bound")
    interval: tuple[float, float] | None = None
    checked: float | None = None  # the number compared with the threshold (the bound, or the point)
    limit: float | None = None  # the threshold in the compared number's terms (−margin for a guardrail)

    def as_dict(self) -> dict[str, object]:
        out = dict(self.__dict__)
        out["interval"] = list(self.interval) if self.interval is not None else None
        return out


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _fmt(v: float, relative: bool = False) -> str:
    return f"{v:+.2%}" if relative else f"{v:.6g}"


def _one(check: GateCheck, threshold: str, value: float, row: Row | None, slices: Sequence[str]) -> CheckResult:
    """Check one threshold of ``check`` on its ``row`` (None: not in the results)."""
    base = dict(
        key=check.key,
        metric=check.metric,
        k=check.k,
        aggregation=check.aggregation,
        slice=check.slice,
        threshold=threshold,
        threshold_value=value,
        on=check.on,
        guardrail=check.guardrail,
    )
    if row is None:
        return CheckResult(passed=False, why=_missing(check, slices), **base)  # type: ignore[arg-type]
    change = threshold.startswith("min_")
    relative = threshold == "min_relative_change"
    point, low, high = (
        (row.rel, row.rel_low, row.rel_high)
        if relative
        else (row.delta, row.delta_low, row.delta_high)
        if change
        else (row.value, row.value_low, row.value_high)
    )
    point, low, high = _finite(point), _finite(low), _finite(high)
    what = "relative change" if relative else "change" if change else "value"
    interval = (low, high) if low is not None and high is not None else None
    if point is None:
        return CheckResult(passed=False, why=f"{check.key} has no {what} on slice {check.slice}", **base)  # type: ignore[arg-type]
    if check.on == "bound" and interval is None:
        return CheckResult(
            passed=False,
            why=f"{check.key} has no interval on its {what} (ci_method {row.ci_method or 'none'}): "
            'nothing to check the bound on; on = "point" checks the point estimate',
            value=point,
            **base,  # type: ignore[arg-type]
        )
    verdict = (
        _on_change(check, value, relative, point, interval)
        if change
        else _on_value(check, threshold, value, point, interval)
    )
    seen = verdict.bound if check.on == "bound" else point
    assert seen is not None
    why = f"{what} {verdict.rule}: {verdict.subject} is {_fmt(seen, relative)}" + (
        f" (point {_fmt(point, relative)})" if check.on == "bound" else ""
    )
    return CheckResult(
        passed=verdict.passed,
        why=why,
        value=point,
        bound=verdict.bound,
        interval=interval,
        checked=seen,
        limit=verdict.limit,
        **base,  # type: ignore[arg-type]
    )


def _missing(check: GateCheck, slices: Sequence[str]) -> str:
    """Why a check's row is missing from the results: its slice is, or its metric on that slice."""
    if check.slice not in slices:
        found = ", ".join(sorted(slices)) or "none"
        return f"slice {check.slice} is missing from the results (slices found: {found})"
    return f"{check.key} is missing from the results on slice {check.slice}"


@dataclass(frozen=True)
class _Verdict:
    """One threshold's judgement: whether it ``passed``, the ``rule`` and the ``subject`` of the why (the number
    seen is the interval's ``bound`` with ``on = "bound"``, else the point) and the threshold as a ``limit`` in
    the seen number's terms."""

    passed: bool
    rule: str
    subject: str
    bound: float | None
    limit: float


def _on_change(
    check: GateCheck, value: float, relative: bool, point: float, interval: tuple[float, float] | None
) -> _Verdict:
    """A change threshold, as a gain in the metric's better direction (the registry's): the least favourable
    end of the interval is its worse end; a guardrail's threshold is the worsening it may show."""
    higher = metric(check.metric).higher_is_better  # the config refused a change threshold without one
    sign = 1.0 if higher else -1.0
    gain_point = sign * point
    gain_bound = min(sign * interval[0], sign * interval[1]) if interval is not None else None
    limit = -value if check.guardrail else value
    checked = gain_bound if check.on == "bound" else gain_point
    assert checked is not None
    better = "higher" if higher else "lower"
    if check.guardrail:
        rule = f"may be worse ({better} is better) by at most {_fmt(value, relative)}"
    else:
        rule = f"must gain at least {_fmt(value, relative)} ({better} is better)"
    return _Verdict(
        passed=checked >= limit,
        rule=rule,
        subject="the interval's worse end" if check.on == "bound" else "the point",
        bound=(interval[0] if higher else interval[1]) if interval is not None else None,
        limit=sign * limit,
    )


def _on_value(
    check: GateCheck, threshold: str, value: float, point: float, interval: tuple[float, float] | None
) -> _Verdict:
    """A bound on the value: ``lower_bound`` checked on the interval's low end, ``upper_bound`` on its high
    end (or both on the point)."""
    at_least = threshold == "lower_bound"
    bound = (interval[0] if at_least else interval[1]) if interval is not None else None
    seen = bound if check.on == "bound" else point
    assert seen is not None
    return _Verdict(
        passed=seen >= value if at_least else seen <= value,
        rule=f"must be {'at least' if at_least else 'at most'} {_fmt(value)}",
        subject=f"the interval's {'low' if at_least else 'high'} end" if check.on == "bound" else "the point",
        bound=bound,
        limit=value,
    )


THRESHOLDS = ("lower_bound", "upper_bound", "min_absolute_change", "min_relative_change")


def evaluate(checks: Sequence[GateCheck], rows: Sequence[Row]) -> list[CheckResult]:
    """Every threshold of every check against the results ``rows``, in the checks' order."""
    by_key = {(r.key, r.slice): r for r in rows}
    slices = sorted({r.slice for r in rows})
    out = []
    for check in checks:
        for threshold in THRESHOLDS:
            value = getattr(check, threshold)
            if value is not None:
                out.append(_one(check, threshold, float(value), by_key.get((check.key, check.slice)), slices))
    return out


def summary_line(name: str, results: Sequence[CheckResult], extra_failures: Sequence[str] = ()) -> str:
    """The one line the command prints: PASSED or FAILED, how many, and the failures by name."""
    failed = [r for r in results if not r.passed]
    total = len(results) + len(extra_failures)
    if not failed and not extra_failures:
        return f"gate {name}: PASSED {total} of {total} checks"
    named = [*extra_failures, *(f"{r.key} on {r.slice} {r.threshold}: {r.why}" for r in failed)]
    return f"gate {name}: FAILED {len(failed) + len(extra_failures)} of {total} checks: " + "; ".join(named)
