"""The built-in business rules as one declarative table, and their verdicts from counts (pure Python).

A rule is a row of :data:`BUILT_IN`: its name, its severity, the count of its violations (``numerator``), the
count its rate is over (``denominator``), the ``rules.*`` config key of a soft rule's threshold, and the facts of
the day it needs (``when``: a catalog, a score column, a previous day, a non-empty blacklist; a rule that cannot
be evaluated is left out).  The table's order is the order of the ``rule_checks`` rows.
:mod:`recsys_spark.steps.rules` counts the day (one Spark query) and finds the examples;
:func:`rule_results` turns the counts into verdicts:

* a hard rule passes when it has no violation (threshold 0);
* a soft rule passes when its rate, numerator / denominator, is at most its threshold, or has no rate (a
  denominator of 0: nothing to rate, never a rate of 0).

>>> counts = dict.fromkeys(COUNTS, 0) | {"exposures": 10, "duplicated_pairs": 1, "day": 1}
>>> results = rule_results(counts, dict.fromkeys(THRESHOLD_KEYS, 0.05), facts=set(), examples={})
>>> [(r.rule, r.violations, r.rate, r.passed) for r in results[:2]]  # 1 / 10 > 0.05; no_feedback 0 / 1
[('duplicate_item_in_request', 1, 0.1, False), ('no_feedback', 0, 0.0, True)]
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

#: the most examples a rule row holds
N_EXAMPLES = 5


@dataclass(frozen=True)
class RuleResult:
    """One ``rule_checks`` row: the rule, its verdict and up to :data:`N_EXAMPLES` examples."""

    rule: str
    severity: str  # "hard" | "soft"
    violations: int
    rate: float | None
    threshold: float | None
    passed: bool
    examples: list[str] = field(default_factory=list)


def _rate(num: float, den: float) -> float | None:
    return num / den if den else None


def hard(rule: str, violations: int, total: int, examples: list[str] | None = None) -> RuleResult:
    """A hard rule's row: passed when ``violations`` is 0; rate violations / total (None when total is 0)."""
    return RuleResult(rule, "hard", int(violations), _rate(violations, total), 0.0, violations == 0, examples or [])


def soft(rule: str, violations: int, total: int, threshold: float, examples: list[str] | None = None) -> RuleResult:
    """A soft rule's row: passed when violations / total is at most ``threshold``, or when total is 0 (no rate)."""
    rate = _rate(violations, total)
    return RuleResult(rule, "soft", int(violations), rate, threshold, rate is None or rate <= threshold, examples or [])


#: the facts of a day a rule may need (:attr:`BuiltInRule.when`)
FACTS = ("blacklist_items", "blacklist_categories", "catalog", "score", "previous_day", "clicks_histogram")


@dataclass(frozen=True)
class BuiltInRule:
    """One built-in rule: ``counts[numerator]`` violations over ``counts[denominator]``, hard (must be 0) or soft
    (its rate at most the config's ``rules.<threshold>``), evaluated when every fact of ``when`` holds;
    ``feedback``: a rule about the day's feedback events (a simulation, without feedback by design, leaves it
    out)."""

    name: str
    severity: str  # "hard" | "soft"
    numerator: str
    denominator: str
    threshold: str | None = None  # the RulesConfig key of a soft rule's threshold; None for a hard rule
    when: tuple[str, ...] = ()  # facts of FACTS, all needed
    feedback: bool = False

    def applies(self, facts: Collection[str]) -> bool:
        """Whether the rule can be evaluated on a day where ``facts`` hold (every fact of :attr:`when`)."""
        return all(fact in facts for fact in self.when)


#: the built-in rules, in the order of the ``rule_checks`` rows (docs/operations.md, "Business-rule scanning")
BUILT_IN: tuple[BuiltInRule, ...] = (
    BuiltInRule("blacklisted_item", "hard", "blacklisted", "exposures", when=("blacklist_items",)),
    BuiltInRule("duplicate_item_in_request", "soft", "duplicated_pairs", "exposures", "max_duplicate_item_rate"),
    BuiltInRule("item_missing_from_catalog", "soft", "missing", "exposures", "max_missing_item_rate", ("catalog",)),
    BuiltInRule("blacklisted_category", "hard", "banned", "exposures", when=("catalog", "blacklist_categories")),
    BuiltInRule("non_finite_score", "hard", "bad_score", "exposure_rows", when=("score",)),
    BuiltInRule("no_feedback", "hard", "no_feedback", "day", feedback=True),
    BuiltInRule("rejected_exposure_rate", "soft", "rejected_exposures", "exposure_rows", "max_rejected_rate"),
    BuiltInRule("rejected_click_rate", "soft", "rejected_clicks", "click_rows", "max_rejected_rate", feedback=True),
    BuiltInRule(
        "unweighted_event_rate", "soft", "unweighted_events", "valid_events", "max_unweighted_event_rate", feedback=True
    ),
    BuiltInRule("duplicate_exposure_rate", "soft", "duplicate_exposures", "exposure_rows", "max_duplicate_rate"),
    BuiltInRule("orphan_event_rate", "soft", "orphan_events", "valid_events", "max_orphan_rate", feedback=True),
    BuiltInRule("empty_response_rate", "soft", "empty_responses", "requests", "max_empty_response_rate"),
    BuiltInRule(
        "score_out_of_range_rate", "soft", "out_of_range", "exposures", "max_score_out_of_range_rate", ("score",)
    ),
    BuiltInRule("bot_user_rate", "soft", "bots", "users", "max_bot_user_rate"),
    BuiltInRule(
        "exposure_change", "soft", "exposure_change", "previous_exposure_rows", "max_exposure_change", ("previous_day",)
    ),
    # the share of the day's clicks made by the top 1 % of clicking users (kernels.robustness, slice all)
    BuiltInRule(
        "click_concentration",
        "soft",
        "top_user_clicks",
        "clicked_exposures",
        "max_click_concentration",
        ("clicks_histogram",),
        feedback=True,
    ),
)

#: the names of the built-in rules (a custom rule may not take one; the experiments' are ``experiment_*:NAME``)
BUILT_IN_RULES = tuple(rule.name for rule in BUILT_IN)
#: the rules about the day's feedback events: a simulation (no feedback by design) leaves them out
FEEDBACK_RULES = tuple(rule.name for rule in BUILT_IN if rule.feedback)
#: the config keys (``rules.*``) of the soft rules' thresholds, each once
THRESHOLD_KEYS = tuple(dict.fromkeys(rule.threshold for rule in BUILT_IN if rule.threshold is not None))
#: every count a rule reads, each once
COUNTS = tuple(dict.fromkeys(name for rule in BUILT_IN for name in (rule.numerator, rule.denominator)))


def rule_results(
    counts: Mapping[str, int],
    thresholds: Mapping[str, float],
    facts: Collection[str],
    examples: Mapping[str, list[str]],
) -> list[RuleResult]:
    """The rows of the rules of :data:`BUILT_IN` whose facts all hold, in the table's order.

    ``counts``: every count the rules that apply read (:data:`COUNTS`); ``thresholds``: the soft rules'
    thresholds by config key; ``facts``: the facts (:data:`FACTS`) that hold for the day; ``examples``: a rule's
    examples by its name (none: no example).
    """
    out = []
    for rule in BUILT_IN:
        if not rule.applies(facts):
            continue
        violations, total, found = counts[rule.numerator], counts[rule.denominator], examples.get(rule.name)
        if rule.severity == "hard":
            out.append(hard(rule.name, violations, total, found))
        else:
            assert rule.threshold is not None  # a soft rule names its threshold's key (tests/kernels/test_rules.py)
            out.append(soft(rule.name, violations, total, thresholds[rule.threshold], found))
    return out


def top_counts(counts: Mapping[str, int]) -> list[str]:
    """The largest counts as ``"name: n"`` examples (ties by name), at most :data:`N_EXAMPLES`.

    >>> top_counts({"b": 2, "a": 2, "c": 5})
    ['c: 5', 'a: 2', 'b: 2']
    """
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:N_EXAMPLES]
    return [f"{name}: {n}" for name, n in top]


def no_feedback_reason(counts: Mapping[str, int], unweighted_events: Mapping[str, int]) -> str | None:
    """Why no exposure got feedback (relevance > 0), the ``no_feedback`` rule's example; None when one did.

    Without feedback CTR is 0 and every ranking metric null: a broken feed, not a day to report as ok.  The
    reason says which case it is: no events at all, every event set aside by validation, no event name with a
    weight, or no event matched an exposure.
    """
    if counts.get("relevant_exposures", 0) > 0:
        return None
    events = counts.get("valid_events", 0) + counts.get("late_events", 0)
    if counts.get("click_rows", 0) == 0:
        return "no feedback events in the clicks partition"
    if events == 0:
        return "every feedback event was set aside by validation"
    if sum(unweighted_events.values()) >= counts.get("valid_events", 0):
        names = ", ".join(sorted(unweighted_events)[:N_EXAMPLES])
        return f"no event name has a weight in labels.event_weights (names seen: {names})"
    return "no event matched an exposure"


def day_counts(
    counts: Mapping[str, int], unweighted_events: Mapping[str, int], previous_exposure_rows: int | None
) -> dict[str, int]:
    """The counts the rules read that come from the day's other counts: ``no_feedback`` (1 when no exposure
    got feedback), ``day`` (1), ``unweighted_events`` (their sum over the event names), ``exposure_change``
    (|exposure rows − the previous day's|, with a previous day) and ``previous_exposure_rows``."""
    out = {
        "no_feedback": 0 if no_feedback_reason(counts, unweighted_events) is None else 1,
        "day": 1,
        "unweighted_events": sum(unweighted_events.values()),
    }
    if previous_exposure_rows is not None:
        out["exposure_change"] = abs(counts["exposure_rows"] - previous_exposure_rows)
        out["previous_exposure_rows"] = previous_exposure_rows
    return out


def rule_tuples(results: Sequence[RuleResult]) -> list[tuple]:
    """The ``rule_checks`` rows, in :data:`schema.RULE_CHECKS_DDL`'s column order."""
    return [(r.rule, r.severity, r.violations, r.rate, r.threshold, r.passed, r.examples) for r in results]
