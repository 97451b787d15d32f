"""The ship decision of an experiment's variant, from its result rows and checks (pure Python, no Spark).

Each metric the decision reads is a **goal** (its improvement ships), a **guardrail** (with a margin: the
worsening that may still ship) or **secondary** (reported, never deciding); its better direction is the
registry's (:attr:`recsys_spark.registry.Metric.higher_is_better`).  On the ``all`` slice's row of each metric
(its interval: the confidence sequence by default, ``ci_method``):

* a goal is ``improved`` when its interval excludes 0 on the better side, ``worse`` when it excludes 0 on the
  worse side, else ``inconclusive``;
* a guardrail is ``within`` its margin when the interval's worse end does not cross it (non-inferiority:
  the whole interval is better than the allowed worsening), ``beyond`` it when even the interval's better
  end is past it (significantly worse than the margin allows), else ``inconclusive``; a margin is
  absolute (on Δ) or relative (on Δ / control, the relative interval);
* a metric without a row or without an interval is ``not measured``.

The decision, first match wins:

1. ``invalid``: the experiment was not compared, its SRM test failed, users had several variants, or an arm
   has fewer than ``min_users`` users (the effects are not read);
2. ``do_not_ship``: a goal is worse, or a guardrail is beyond its margin;
3. ``ship``: a goal improved and every guardrail is within its margin;
4. ``not_enough_evidence``: neither yet (a state of its own, never drawn as a failure).

Every decision lists its reasons, one line each (docs/experiments.md, "Decisions").  :data:`DECISION_WORDS` are the
words the terminal and the report show for each code; releases before issue 42 wrote ``keep_running`` for
``not_enough_evidence``: every reader passes a stored code through :func:`normalise_code`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from recsys_spark.registry import key, metric, parse_key

DECISIONS = ("ship", "do_not_ship", "not_enough_evidence", "invalid")
#: what the terminal and the report say for each code (the report's colours: green, red, amber, red-bordered grey)
DECISION_WORDS = {
    "ship": "SHIP",
    "do_not_ship": "DO NOT SHIP",
    "not_enough_evidence": "NOT ENOUGH EVIDENCE YET",
    "invalid": "INVALID EXPERIMENT",
}
#: codes earlier releases wrote, and what they are now (docs/operations.md, "Output tables across upgrades")
OLD_CODES = {"keep_running": "not_enough_evidence"}
#: the columns of ``experiment_decisions`` (the window's ``experiment_window_decisions``: all but experiment)
DECISION_COLUMNS = (
    ("experiment", "string"),
    ("variant", "string"),
    ("decision", "string"),
    ("reasons", "array<string>"),
    ("ci_method", "string"),
    ("control_n", "long"),
    ("variant_n", "long"),
)


def normalise_code(code: str | None) -> str | None:
    """A stored decision code as today's: ``keep_running`` (partitions written before issue 42) is
    ``not_enough_evidence``; every other value (and None) unchanged.

    >>> normalise_code("keep_running"), normalise_code("ship"), normalise_code(None)
    ('not_enough_evidence', 'ship', None)
    """
    return OLD_CODES.get(code, code) if code is not None else None


def decision_words(code: str | None) -> str:
    """The words of a (stored) decision code, ``keep_running`` included; an unknown code in capitals.

    >>> decision_words("keep_running"), decision_words("do_not_ship")
    ('NOT ENOUGH EVIDENCE YET', 'DO NOT SHIP')
    """
    code = normalise_code(code) or ""
    return DECISION_WORDS.get(code, code.upper().replace("_", " "))


@dataclass(frozen=True)
class Margin:
    """A guardrail: the metric key and the worsening allowed, absolute (metric units) or relative (a share)."""

    metric: str
    absolute: float | None = None
    relative: float | None = None


@dataclass(frozen=True)
class Roles:
    """Which metrics (keys: ``ndcg@10_user_avg``) decide, and how."""

    goals: tuple[str, ...] = ()
    guardrails: tuple[Margin, ...] = ()
    secondary: tuple[str, ...] = ()


@dataclass(frozen=True)
class Effect:
    """One metric's comparison on the ``all`` slice: Δ and Δ / control with their intervals."""

    delta: float | None
    ci_low: float | None
    ci_high: float | None
    rel_delta: float | None = None
    rel_ci_low: float | None = None
    rel_ci_high: float | None = None

    @classmethod
    def of(cls, row: Mapping[str, object] | object) -> Effect:
        """From a result row (a :class:`~recsys_spark.kernels.experiments.ResultRow` or a dict of its fields)."""
        get = row.get if isinstance(row, Mapping) else (lambda name: getattr(row, name, None))
        names = ("delta", "ci_low", "ci_high", "rel_delta", "rel_ci_low", "rel_ci_high")
        return cls(*(_num(get(n)) for n in names))


@dataclass(frozen=True)
class Validity:
    """What makes a comparison untrustworthy: the checks' outcomes and the arms' users."""

    compared: bool = True
    not_compared_reason: str | None = None
    srm_passed: bool = True
    srm_p_value: float | None = None
    multiple_assignment: int = 0
    control_users: int = 0
    variant_users: int = 0


@dataclass(frozen=True)
class Decision:
    experiment: str
    variant: str | None
    decision: str
    reasons: list[str] = field(default_factory=list)
    ci_method: str = "sequential"
    control_n: int = 0
    variant_n: int = 0
    states: dict[str, str] = field(default_factory=dict)  # metric key -> its state (goal/guardrail/secondary)
    #: the sample decided on: ``day`` (the day's users), ``cumulative`` (every user since the experiment's first
    #: day) or ``window`` (``recsys-spark experiment``); a column of ``experiment_decisions`` only
    basis: str = "day"

    def as_tuple(self) -> tuple:
        return tuple(getattr(self, name) for name, _ in DECISION_COLUMNS)


def _num(v: object) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def higher_is_better(metric_key: str) -> bool:
    """The registry's direction of a metric key; a ValueError when it has none (a count, a level)."""
    name, _, _ = parse_key(metric_key)
    better = metric(name).higher_is_better
    if better is None:
        raise ValueError(f"{metric_key} has no better direction to decide on")
    return better


def _interval(e: Effect | None, relative: bool) -> tuple[float, float, float] | None:
    if e is None:
        return None
    point, low, high = (e.rel_delta, e.rel_ci_low, e.rel_ci_high) if relative else (e.delta, e.ci_low, e.ci_high)
    if point is None or low is None or high is None:
        return None
    return point, low, high


def _fmt(x: float, relative: bool) -> str:
    return f"{x:+.2%}" if relative else f"{x:+.4g}"


def _show(interval: tuple[float, float, float], relative: bool) -> str:
    point, low, high = interval
    return f"{_fmt(point, relative)} [{_fmt(low, relative)}, {_fmt(high, relative)}]"


def goal_state(e: Effect | None, higher: bool) -> str:
    """``improved``, ``worse``, ``inconclusive`` or ``not measured`` (the absolute interval against 0).

    >>> goal_state(Effect(0.02, 0.01, 0.03), higher=True), goal_state(Effect(0.02, 0.01, 0.03), higher=False)
    ('improved', 'worse')
    """
    iv = _interval(e, relative=False)
    if iv is None:
        return "not measured"
    _, low, high = iv
    better_low, better_high = (low, high) if higher else (-high, -low)  # as if higher were better
    if better_low > 0:
        return "improved"
    if better_high < 0:
        return "worse"
    return "inconclusive"


def guardrail_state(e: Effect | None, higher: bool, margin: Margin) -> str:
    """``within``, ``beyond``, ``inconclusive`` or ``not measured``: the interval against −margin (the worsening
    allowed, on the worse side of 0; relative margins on the relative interval).

    >>> m = Margin("pv_failure_rate_global", absolute=0.005)      # lower is better: worse is up
    >>> [guardrail_state(Effect(d, lo, hi), False, m) for d, lo, hi in ((0.002, -0.001, 0.004),
    ...                                                                  (0.008, 0.006, 0.010), (0.004, 0.0, 0.009))]
    ['within', 'beyond', 'inconclusive']
    """
    relative = margin.relative is not None
    iv = _interval(e, relative)
    if iv is None:
        return "not measured"
    allowed = (margin.relative if relative else margin.absolute) or 0.0
    _, low, high = iv
    worst, best = (low, high) if higher else (-high, -low)  # as if higher were better: worse is down
    if worst >= -allowed:
        return "within"
    if best < -allowed:
        return "beyond"
    return "inconclusive"


def _invalid_reasons(v: Validity, min_users: int) -> list[str]:
    reasons = []
    if not v.compared:
        reasons.append(f"not compared: {v.not_compared_reason or 'no variant met its control'}")
    if not v.srm_passed:
        p = f" (p={v.srm_p_value:.3g})" if v.srm_p_value is not None else " (not tested)"
        reasons.append(f"sample-ratio mismatch{p}: the split is not the planned one")
    if v.multiple_assignment:
        reasons.append(f"multiple assignment: {v.multiple_assignment} user(s) with several variants")
    for arm, n in (("control", v.control_users), ("variant", v.variant_users)):
        if n < min_users:
            reasons.append(f"too few users: {arm} has {n} (experiments.min_users_per_arm = {min_users})")
    return reasons


def decide(
    experiment: str,
    variant: str | None,
    effects: Mapping[str, Effect],
    roles: Roles,
    validity: Validity,
    min_users: int = 100,
    ci_method: str = "sequential",
) -> Decision:
    """The decision of ``variant`` against the control (module docstring), with its reasons.

    ``effects``: metric key -> the ``all`` slice's comparison of that metric (a key without one is not
    measured); ``variant`` None: an experiment with no arm besides the control (not compared).  Reasons:
    the invalidity reasons of an invalid comparison (its effects are not read), else one line per goal and
    guardrail with its state and interval, then the secondary metrics whose interval excludes 0.

    >>> roles = Roles(("exposure_ctr_global",), (Margin("pv_failure_rate_global", absolute=0.005),))
    >>> effects = {"exposure_ctr_global": Effect(0.01, 0.004, 0.016, 0.1, 0.04, 0.16),
    ...            "pv_failure_rate_global": Effect(0.0, -0.002, 0.002)}
    >>> d = decide("ranker_v2", "treatment", effects, roles, Validity(control_users=500, variant_users=510))
    >>> d.decision, d.reasons[0]
    ('ship', 'goal exposure_ctr_global improved: +0.01 [+0.004, +0.016] (+10.00%)')
    """
    base = dict(
        experiment=experiment,
        variant=variant,
        ci_method=ci_method,
        control_n=validity.control_users,
        variant_n=validity.variant_users,
    )
    invalid = _invalid_reasons(validity, min_users)
    if invalid:
        return Decision(decision="invalid", reasons=invalid, **base)  # type: ignore[arg-type]
    reasons: list[str] = []
    states: dict[str, str] = {}
    goals = {}
    for name in roles.goals:
        state = goal_state(effects.get(name), higher_is_better(name))
        goals[name] = state
        states[name] = f"goal:{state}"
        iv = _interval(effects.get(name), relative=False)
        rel = _interval(effects.get(name), relative=True)
        shown = f": {_show(iv, False)}" + (f" ({_fmt(rel[0], True)})" if rel else "") if iv else ""
        reasons.append(f"goal {name} {state}{shown}")
    guards = {}
    for margin in roles.guardrails:
        relative = margin.relative is not None
        state = guardrail_state(effects.get(margin.metric), higher_is_better(margin.metric), margin)
        guards[margin.metric] = state
        states[margin.metric] = f"guardrail:{state}"
        allowed = margin.relative if relative else margin.absolute
        iv = _interval(effects.get(margin.metric), relative)
        word = {"within": "within its margin", "beyond": "beyond its margin"}.get(state, state)
        direction = "+" if not higher_is_better(margin.metric) else "-"
        limit = f"{direction}{allowed:.2%}" if relative else f"{direction}{allowed:g}"
        shown = f": {_show(iv, relative)}" if iv else ""
        reasons.append(f"guardrail {margin.metric} {word} ({limit}){shown}")
    for name in roles.secondary:
        iv = _interval(effects.get(name), relative=False)
        changed = iv is not None and (iv[1] > 0 or iv[2] < 0)
        if iv is not None and changed:
            reasons.append(f"secondary {name} changed: {_show(iv, False)}")
        states[name] = "secondary:" + ("not measured" if iv is None else "changed" if changed else "no change")
    if any(s == "worse" for s in goals.values()) or any(s == "beyond" for s in guards.values()):
        decision = "do_not_ship"
    elif any(s == "improved" for s in goals.values()) and all(s == "within" for s in guards.values()):
        decision = "ship"
    else:
        decision = "not_enough_evidence"
        if not roles.goals:
            reasons.insert(0, "no goal metric (experiments.goals): nothing can ship")
    return Decision(decision=decision, reasons=reasons, states=states, **base)  # type: ignore[arg-type]


def effects_of(rows: Sequence[object], experiment: str, variant: str, slice_value: str = "all") -> dict[str, Effect]:
    """metric key -> :class:`Effect` of ``variant``'s rows of ``experiment`` on ``slice_value``."""
    out = {}
    for r in rows:
        get = r.get if isinstance(r, Mapping) else (lambda name, r=r: getattr(r, name, None))
        if get("experiment") == experiment and get("variant") == variant and get("slice") == slice_value:
            k = _num(get("k"))  # None, or NaN from a table read with pandas: no cut-off
            out[key(str(get("metric")), int(k) if k is not None else None, str(get("aggregation")))] = Effect.of(r)
    return out
