"""The model gate's checks on interval bounds (pure Python; :mod:`recsys_spark.gate` reads the tables).

A check is a threshold on one (metric, k, aggregation, slice) of the candidate (docs/gate.md):

* ``lower_bound`` / ``upper_bound`` on the candidate's **value**;
* ``min_absolute_change`` / ``min_relative_change`` on its **change** against the baseline, in the metric's
  better direction (the registry's): the candidate must gain at least that much; with ``guardrail`` the
  threshold is a non-inferiority margin instead, the worsening it may show.

Each is checked on the interval's bound that is least favourable to the candidate (``on = "bound"``, the
default: a noisy run cannot pass on luck) or on the point estimate (``on = "point"``, what TFMA's and MLflow's
thresholds do).  A check has one of three states (:data:`STATES`, docs/gate.md):

* ``passed``: the least favourable end of the interval clears the threshold (with ``on = "point"``: the point);
* ``failed``: even the most favourable end does not clear it (with ``on = "point"``: the point does not);
* ``inconclusive``: the interval straddles the threshold: not enough evidence yet, either way.

A (metric, slice) missing from the results fails by name, as does a bound asked of a row without an interval.
The gate's state (:func:`gate_state`) is ``failed`` when a check failed, else ``inconclusive`` when one is, else
``passed``.

>>> from dataclasses import replace
>>> row = Row("ndcg@10_user_avg", "all", value=0.31, delta=0.004, delta_low=-0.001, delta_high=0.009)
>>> check = GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.0)
>>> [r.state for r in evaluate([check], [row])], [r.state for r in evaluate([replace(check, on="point")], [row])]
(['inconclusive'], ['passed'])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from recsys_spark.registry import key, metric

#: the states of a check and of a gate, in the order a gate takes the worst of (docs/gate.md)
PASSED, INCONCLUSIVE, FAILED = "passed", "inconclusive", "failed"
STATES = (PASSED, INCONCLUSIVE, FAILED)
#: how the terminal and the report word a gate's state (the decisions' words: a gate that cannot tell is not
#: a failure, ISSUE 42's contract)
STATE_WORDS = {PASSED: "PASSED", INCONCLUSIVE: "NOT ENOUGH EVIDENCE YET", FAILED: "FAILED"}


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
    state: str  # passed, failed or inconclusive (STATES)
    why: str
    value: float | None = None  # the point: the candidate's value, or its change
    bound: float | None = None  # the interval's bound the threshold was checked on (with on = "bound")
    interval: tuple[float, float] | None = None
    checked: float | None = None  # the number compared with the threshold (the bound, or the point)
    limit: float | None = None  # the threshold in the compared number's terms (−margin for a guardrail)
    favourable: float | None = None  # the interval's other end, the most favourable (with on = "bound")

    @property
    def passed(self) -> bool:
        """Whether the check passed (the verdict's old boolean: an inconclusive check has not)."""
        return self.state == PASSED

    @property
    def unit(self) -> str:
        """The unit of ``value``, ``interval``, ``bound``, ``checked``, ``limit`` and ``threshold_value``:
        ``percent`` for a relative change (a fraction: 0.012 is +1.2 %), ``metric`` (the metric's own units)
        otherwise."""
        return "percent" if self.threshold == "min_relative_change" else "metric"

    def shown(self) -> dict[str, str | None]:
        """The numbers as a table shows them, with their unit: a relative change as a percentage (``+1.2 %``),
        anything else in the metric's units (``0.0042``, a change signed: ``+0.0042``)."""
        relative, change = self.unit == "percent", self.threshold.startswith("min_")
        interval = self.interval
        return {
            "value": None if self.value is None else show(self.value, relative, signed=change),
            "interval": None
            if interval is None
            else f"[{show(interval[0], relative, change)}, {show(interval[1], relative, change)}]",
            "threshold": show(self.threshold_value, relative, signed=False),
            "unit": "%" if relative else "metric units",
        }

    def as_dict(self) -> dict[str, object]:
        out = dict(self.__dict__)
        out["interval"] = list(self.interval) if self.interval is not None else None
        out["passed"] = self.passed
        out["unit"] = self.unit
        out["shown"] = self.shown()
        return out


def show(v: float, relative: bool = False, signed: bool = True) -> str:
    """A number with its unit: a relative change as a percentage (``+1.2 %``), else in the metric's units
    (``+0.0042``; ``signed``: a change carries its sign).

    >>> show(0.0123, relative=True), show(-3.46, relative=True), show(12.5, relative=True), show(-0.001)
    ('+1.23 %', '-346 %', '+1250 %', '-0.001')
    >>> show(0.31, signed=False)
    '0.31'
    """
    sign = "+" if signed else ""
    if relative:
        pct = 100 * v
        return f"{pct:{sign}.3g} %" if abs(pct) < 1000 else f"{pct:{sign}.0f} %"  # no exponent: 1250 %, not 1.25e+03
    return f"{v:{sign}.6g}"


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _fmt(v: float, relative: bool = False) -> str:
    return show(v, relative) if relative else f"{v:.6g}"


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
        return CheckResult(state=FAILED, why=_missing(check, slices), **base)  # type: ignore[arg-type]
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
        return CheckResult(state=FAILED, why=f"{check.key} has no {what} on slice {check.slice}", **base)  # type: ignore[arg-type]
    if check.on == "bound" and interval is None:
        return CheckResult(
            state=FAILED,
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
    if verdict.state == INCONCLUSIVE:
        assert verdict.favourable is not None
        why += f"; its better end is {_fmt(verdict.favourable, relative)}: the interval straddles the threshold"
    elif verdict.state == FAILED and check.on == "bound":
        assert verdict.favourable is not None
        why += f"; even its better end is {_fmt(verdict.favourable, relative)}"
    return CheckResult(
        state=verdict.state,
        why=why,
        value=point,
        bound=verdict.bound,
        interval=interval,
        checked=seen,
        limit=verdict.limit,
        favourable=verdict.favourable,
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
    """One threshold's judgement: its ``state``, the ``rule`` and the ``subject`` of the why (the number seen is
    the interval's ``bound`` with ``on = "bound"``, else the point), the threshold as a ``limit`` in the seen
    number's terms, and the interval's ``favourable`` end (None with ``on = "point"``)."""

    state: str
    rule: str
    subject: str
    bound: float | None
    limit: float
    favourable: float | None = None


def _state(worst_clears: bool, best_clears: bool) -> str:
    """passed when the least favourable number clears the threshold, failed when even the most favourable does
    not, inconclusive between (with ``on = "point"`` both are the point: passed or failed)."""
    return PASSED if worst_clears else INCONCLUSIVE if best_clears else FAILED


def _on_change(
    check: GateCheck, value: float, relative: bool, point: float, interval: tuple[float, float] | None
) -> _Verdict:
    """A change threshold, as a gain in the metric's better direction (the registry's): the least favourable
    end of the interval is its worse end; a guardrail's threshold is the worsening it may show."""
    higher = metric(check.metric).higher_is_better  # the config refused a change threshold without one
    sign = 1.0 if higher else -1.0
    gain_point = sign * point
    gain_bound = min(sign * interval[0], sign * interval[1]) if interval is not None else None
    gain_best = max(sign * interval[0], sign * interval[1]) if interval is not None else None
    limit = -value if check.guardrail else value
    checked = gain_bound if check.on == "bound" else gain_point
    best = gain_best if check.on == "bound" else gain_point
    assert checked is not None and best is not None
    better = "higher" if higher else "lower"
    if check.guardrail:
        rule = f"may be worse ({better} is better) by at most {_fmt(value, relative)}"
    else:
        rule = f"must gain at least {_fmt(value, relative)} ({better} is better)"
    return _Verdict(
        state=_state(checked >= limit, best >= limit),
        rule=rule,
        subject="the interval's worse end" if check.on == "bound" else "the point",
        bound=(interval[0] if higher else interval[1]) if interval is not None else None,
        limit=sign * limit,
        favourable=(interval[1] if higher else interval[0]) if check.on == "bound" and interval is not None else None,
    )


def _on_value(
    check: GateCheck, threshold: str, value: float, point: float, interval: tuple[float, float] | None
) -> _Verdict:
    """A bound on the value: ``lower_bound`` checked on the interval's low end, ``upper_bound`` on its high
    end (or both on the point)."""
    at_least = threshold == "lower_bound"
    bound = (interval[0] if at_least else interval[1]) if interval is not None else None
    other = (interval[1] if at_least else interval[0]) if interval is not None else None
    seen = bound if check.on == "bound" else point
    best = other if check.on == "bound" else point
    assert seen is not None and best is not None

    def clears(x: float) -> bool:
        return x >= value if at_least else x <= value

    return _Verdict(
        state=_state(clears(seen), clears(best)),
        rule=f"must be {'at least' if at_least else 'at most'} {_fmt(value)}",
        subject=f"the interval's {'low' if at_least else 'high'} end" if check.on == "bound" else "the point",
        bound=bound,
        limit=value,
        favourable=other if check.on == "bound" else None,
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


def gate_state(results: Sequence[CheckResult], extra_failures: Sequence[str] = ()) -> str:
    """The gate's state: failed when a check failed (or the experiment cannot be read: ``extra_failures``),
    else inconclusive when a check is, else passed.

    >>> gate_state([]), gate_state([], ["experiment invalid: ..."])
    ('passed', 'failed')
    """
    states = {r.state for r in results} | ({FAILED} if extra_failures else set())
    return FAILED if FAILED in states else INCONCLUSIVE if INCONCLUSIVE in states else PASSED


def summary_line(name: str, results: Sequence[CheckResult], extra_failures: Sequence[str] = ()) -> str:
    """The one line the command prints, in the state's words (:data:`STATE_WORDS`): PASSED and how many;
    FAILED, how many and the failures by name (then the inconclusive ones); NOT ENOUGH EVIDENCE YET, how many
    are inconclusive and why.  An inconclusive gate is never worded as a failure."""
    total = len(results) + len(extra_failures)
    state = gate_state(results, extra_failures)
    head = f"gate {name}: {STATE_WORDS[state]}"
    if state == PASSED:
        return f"{head} {total} of {total} checks"

    def named(rs: Sequence[CheckResult]) -> list[str]:
        return [f"{r.key} on {r.slice} {r.threshold}: {r.why}" for r in rs]

    failed = [r for r in results if r.state == FAILED]
    open_ = [r for r in results if r.state == INCONCLUSIVE]
    if state == INCONCLUSIVE:
        return f"{head}: {len(open_)} of {total} checks inconclusive: " + "; ".join(named(open_))
    line = f"{head} {len(failed) + len(extra_failures)} of {total} checks: " + "; ".join(
        [*extra_failures, *named(failed)]
    )
    if open_:
        line += f" (and {len(open_)} inconclusive: " + "; ".join(named(open_)) + ")"
    return line
