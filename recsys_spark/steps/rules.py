"""Business-rule scanning: is today's recommendation log fit to be trusted?

Hard rules must never be violated; soft rules are rates with a threshold.
Results are data (one row per rule in the ``rule_checks`` table), not log
lines, so a scheduler can alert on them.  Most counts come from what earlier
stages already counted; the rest from one query over the labelled exposures
(which already carry the catalog's ``_category`` and ``_in_catalog``, joined
once by the label stage): summed per user where the user partitions hold
them, then over users (:func:`row_counts`).  Examples of violations cost a
further small query each, and only when there are violations.

Each rule, its severity, what it counts and the denominator of its rate are
in the table of docs/operations.md ("Business-rule scanning"), the only copy;
:func:`scan_rules` below computes them in the same order.

A hard rule passes when it has no violation; a soft rule passes when its rate
is at most its threshold.  Hard rules are what must never happen (blacklists, a
day without feedback); duplicates and uncatalogued items happen in real logs at
a baseline rate, so they are soft, with a rate threshold.  Rules that cannot be evaluated (no catalog, no
score column, no previous day, empty blacklist) are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.schema import COPIES, IN_CATALOG, ITEM, ITEM_CATEGORY, REQUEST, RULE_CHECKS_DDL, SCORE, USER

N_EXAMPLES = 5
#: the names of the built-in rules (a custom rule may not take one; the experiments' are ``experiment_*:NAME``)
BUILT_IN_RULES = (
    "blacklisted_item",
    "blacklisted_category",
    "non_finite_score",
    "no_feedback",
    "duplicate_item_in_request",
    "item_missing_from_catalog",
    "rejected_exposure_rate",
    "rejected_click_rate",
    "unweighted_event_rate",
    "duplicate_exposure_rate",
    "orphan_event_rate",
    "empty_response_rate",
    "score_out_of_range_rate",
    "bot_user_rate",
    "exposure_change",
)
#: the rules about the day's feedback events: a simulation (no feedback by design) leaves them out
FEEDBACK_RULES = ("no_feedback", "rejected_click_rate", "unweighted_event_rate", "orphan_event_rate")


@dataclass(frozen=True)
class RuleResult:
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
    return RuleResult(rule, "hard", int(violations), _rate(violations, total), 0.0, violations == 0, examples or [])


def soft(rule: str, violations: int, total: int, threshold: float, examples: list[str] | None = None) -> RuleResult:
    rate = _rate(violations, total)
    return RuleResult(rule, "soft", int(violations), rate, threshold, rate is None or rate <= threshold, examples or [])


def _examples(wanted: Mapping[str, tuple[DataFrame, Column, Column]]) -> dict[str, list[str]]:
    """A few distinct keys of violating rows per rule, sorted: ``wanted`` maps a rule to (rows, condition,
    key), asked only for the rules with violations.

    One job for all of them (a union of limits), not one per rule: a ``limit`` without ``distinct`` per
    rule, no shuffle of rows, each scan stops early.
    """
    if not wanted:
        return {}
    parts = [
        df.where(condition).select(F.lit(rule).alias("rule"), key.cast("string").alias("key")).limit(10 * N_EXAMPLES)
        for rule, (df, condition, key) in wanted.items()
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    found: dict[str, set[str]] = {rule: set() for rule in wanted}
    for row in union.collect():
        found[row["rule"]].add(row["key"])
    return {rule: sorted(keys)[:N_EXAMPLES] for rule, keys in found.items()}


def scan_rules(
    exposures: DataFrame,
    counts: Mapping[str, int],
    *,
    has_catalog: bool,
    has_score: bool,
    blacklist_items: Sequence[str],
    blacklist_categories: Sequence[str],
    bot_requests_per_user: int,
    thresholds: dict[str, float],
    previous_exposure_rows: int | None,
    rejected_exposures: DataFrame | None = None,
    exposure_reasons: Mapping[str, int] | None = None,
    click_reasons: Mapping[str, int] | None = None,
    unweighted_events: Mapping[str, int] | None = None,
) -> list[RuleResult]:
    """Evaluate every rule that applies; see the module docstring for the definitions.

    ``exposures`` are the labelled, deduplicated exposures (empty responses
    included, with ``copies``, ``_category`` and ``_in_catalog``); ``counts``
    holds what earlier stages counted: ``exposure_rows``, ``bad_score``,
    ``duplicate_exposures``, ``orphan_events``, ``valid_events``,
    ``empty_responses``.  ``has_catalog``: the items table exists (else the
    catalog rules are left out).  ``exposure_reasons`` / ``click_reasons``:
    set-aside rows per reject reason; ``unweighted_events``: valid events per
    event name without a weight (each None: nothing counted).
    """
    exposure_reasons = exposure_reasons or {}
    click_reasons = click_reasons or {}
    unweighted_events = unweighted_events or {}
    item_row = F.col(ITEM).isNotNull()
    blacklisted = F.col(ITEM).isin(list(blacklist_items)) if blacklist_items else F.lit(False)
    out_of_range = (F.col(SCORE) < 0) | (F.col(SCORE) > 1) if has_score else F.lit(False)
    duplicated = item_row & (F.col(COPIES) > 1)
    missing = item_row & ~F.col(IN_CATALOG) if has_catalog else F.lit(False)
    banned = (
        item_row & F.col(IN_CATALOG) & F.col(ITEM_CATEGORY).isin(list(blacklist_categories))
        if has_catalog and blacklist_categories
        else F.lit(False)
    )
    agg = row_counts(
        exposures,
        {
            "exposures": item_row,
            "blacklisted": item_row & blacklisted,
            "out_of_range": item_row & out_of_range,
            "duplicated_pairs": duplicated,
            "missing": missing,
            "banned": banned,
        },
        bot_requests_per_user,
    ).collect()[0]  # an aggregation without grouping: always one row
    n_exp = agg["exposures"] or 0
    bots = agg["bots"] or 0
    bad = counts.get("bad_score", 0) if has_score else 0
    pair = F.concat_ws(":", REQUEST, ITEM)
    candidates = {
        "blacklisted_item": (
            bool(blacklist_items and agg["blacklisted"]),
            exposures,
            item_row & blacklisted,
            F.col(ITEM),
        ),
        "duplicate_item_in_request": (bool(agg["duplicated_pairs"]), exposures, duplicated, pair),
        "item_missing_from_catalog": (bool(has_catalog and agg["missing"]), exposures, missing, F.col(ITEM)),
        "blacklisted_category": (
            bool(has_catalog and blacklist_categories and agg["banned"]),
            exposures,
            banned,
            F.concat_ws(":", ITEM_CATEGORY, ITEM),
        ),
        "non_finite_score": (
            bool(bad and rejected_exposures is not None),
            rejected_exposures,
            F.col("reject_reason") == "bad_score",
            pair,
        ),
        "score_out_of_range_rate": (bool(has_score and agg["out_of_range"]), exposures, item_row & out_of_range, pair),
        "bot_user_rate": (
            bool(bots),
            _requests_per_user(exposures),
            F.col("requests") > bot_requests_per_user,
            F.col(USER),
        ),
    }
    examples = _examples(
        {rule: (df, cond, key) for rule, (ask, df, cond, key) in candidates.items() if ask and df is not None}
    )
    results: list[RuleResult] = []

    if blacklist_items:
        results.append(hard("blacklisted_item", agg["blacklisted"] or 0, n_exp, examples.get("blacklisted_item")))
    results.append(
        soft(
            "duplicate_item_in_request",
            agg["duplicated_pairs"] or 0,
            n_exp,
            thresholds["max_duplicate_item_rate"],
            examples.get("duplicate_item_in_request"),
        )
    )
    if has_catalog:
        results.append(
            soft(
                "item_missing_from_catalog",
                agg["missing"] or 0,
                n_exp,
                thresholds["max_missing_item_rate"],
                examples.get("item_missing_from_catalog"),
            )
        )
        if blacklist_categories:
            results.append(
                hard("blacklisted_category", agg["banned"] or 0, n_exp, examples.get("blacklisted_category"))
            )
    if has_score:
        results.append(hard("non_finite_score", bad, counts["exposure_rows"], examples.get("non_finite_score")))

    results.append(feedback_rule(counts, unweighted_events))
    results.append(
        soft(
            "rejected_exposure_rate",
            counts.get("rejected_exposures", 0),
            counts["exposure_rows"],
            thresholds["max_rejected_rate"],
            _reasons(exposure_reasons),
        )
    )
    results.append(
        soft(
            "rejected_click_rate",
            counts.get("rejected_clicks", 0),
            counts.get("click_rows", 0),
            thresholds["max_rejected_rate"],
            _reasons(click_reasons),
        )
    )
    results.append(
        soft(
            "unweighted_event_rate",
            sum(unweighted_events.values()),
            counts["valid_events"],
            thresholds["max_unweighted_event_rate"],
            _reasons(unweighted_events),
        )
    )
    results.append(
        soft(
            "duplicate_exposure_rate",
            counts["duplicate_exposures"],
            counts["exposure_rows"],
            thresholds["max_duplicate_rate"],
        )
    )
    results.append(
        soft("orphan_event_rate", counts["orphan_events"], counts["valid_events"], thresholds["max_orphan_rate"])
    )
    requests = int(agg["requests"] or 0)
    results.append(
        soft("empty_response_rate", counts["empty_responses"], requests, thresholds["max_empty_response_rate"])
    )
    if has_score:
        results.append(
            soft(
                "score_out_of_range_rate",
                agg["out_of_range"] or 0,
                n_exp,
                thresholds["max_score_out_of_range_rate"],
                examples.get("score_out_of_range_rate"),
            )
        )
    results.append(
        soft("bot_user_rate", bots, agg["users"] or 0, thresholds["max_bot_user_rate"], examples.get("bot_user_rate"))
    )
    if previous_exposure_rows is not None:
        change = abs(counts["exposure_rows"] - previous_exposure_rows)
        results.append(soft("exposure_change", change, previous_exposure_rows, thresholds["max_exposure_change"]))
    return results


def _reasons(counts: Mapping[str, int]) -> list[str]:
    """The largest counts as "name: n" examples."""
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:N_EXAMPLES]
    return [f"{name}: {n}" for name, n in top]


def feedback_rule(counts: Mapping[str, int], unweighted_events: Mapping[str, int]) -> RuleResult:
    """Hard: at least one exposure got feedback (relevance > 0).  Without it CTR is 0 and every ranking
    metric null -- a broken feed, not a day to report as ok.  The example says which case it is."""
    if counts.get("relevant_exposures", 0) > 0:
        return hard("no_feedback", 0, 1)
    events = counts.get("valid_events", 0) + counts.get("late_events", 0)
    unweighted = sum(unweighted_events.values())
    if counts.get("click_rows", 0) == 0:
        why = "no feedback events in the clicks partition"
    elif events == 0:
        why = "every feedback event was set aside by validation"
    elif unweighted >= counts.get("valid_events", 0):
        names = ", ".join(sorted(unweighted_events)[:N_EXAMPLES])
        why = f"no event name has a weight in labels.event_weights (names seen: {names})"
    else:
        why = "no event matched an exposure"
    return hard("no_feedback", 1, 1, [why])


def _requests_per_user(exposures: DataFrame) -> DataFrame:
    """(user_id, requests): the user's distinct requests, empty responses included."""
    return exposures.groupBy(USER).agg(F.count_distinct(REQUEST).alias("requests"))


def row_counts(exposures: DataFrame, flags: Mapping[str, Column], max_requests: int) -> DataFrame:
    """One row: the number of rows where each flag holds (a column per flag), the users, their requests
    and the users with more than ``max_requests`` requests (``bots``).

    One query, one job: the rows are summed per user first, where the user partitions hold them (an
    aggregation by user needs no shuffle of exposure rows), then the per-user rows are summed.
    """
    per_user = exposures.groupBy(USER).agg(
        F.count_distinct(REQUEST).alias("requests"),
        *[F.sum(flag.cast("long")).alias(name) for name, flag in flags.items()],
    )
    return per_user.agg(
        *[F.sum(name).alias(name) for name in flags],
        F.count(F.lit(1)).alias("users"),
        F.sum("requests").alias("requests"),
        F.sum((F.col("requests") > max_requests).cast("long")).alias("bots"),
    )


def rule_tuples(results: Sequence[RuleResult]) -> list[tuple]:
    """The ``rule_checks`` rows, in :data:`schema.RULE_CHECKS_DDL`'s column order."""
    return [(r.rule, r.severity, r.violations, r.rate, r.threshold, r.passed, r.examples) for r in results]


def rules_frame(spark: SparkSession, results: Sequence[RuleResult]) -> DataFrame:
    return spark.createDataFrame(rule_tuples(results), RULE_CHECKS_DDL)


def as_dicts(results: Sequence[RuleResult]) -> list[dict]:
    return [asdict(r) for r in results]
