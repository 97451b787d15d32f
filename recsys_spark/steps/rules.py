"""Business-rule scanning: is today's recommendation log fit to be trusted?

Hard rules must never be violated; soft rules are rates with a threshold.
Results are data (one row per rule in the ``rule_checks`` table), not log
lines, so a scheduler can alert on them.

The rules are declared once, as a table in :mod:`recsys_spark.kernels.rules` (name, severity, the counts of the
rate, the threshold's config key, when it applies), in the order of the ``rule_checks`` rows; that module
turns counts into verdicts.  This one counts: most counts come from what earlier stages already counted; the
rest from one query over the labelled exposures (which already carry the catalog's ``_category`` and
``_in_catalog``, joined once by the label stage): summed per user where the user partitions hold them, then
over users (:func:`row_counts`).  Examples of violations cost a further small query, and only when there are
violations.  docs/operations.md ("Business-rule scanning") describes each rule.

Rules that cannot be evaluated (no catalog, no score column, no previous day, empty blacklist) are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.kernels.rules import (
    BUILT_IN,
    BUILT_IN_RULES,
    FEEDBACK_RULES,
    N_EXAMPLES,
    RuleResult,
    day_counts,
    hard,
    no_feedback_reason,
    rule_results,
    rule_tuples,
    soft,
    top_counts,
)
from recsys_spark.schema import COPIES, IN_CATALOG, ITEM, ITEM_CATEGORY, REQUEST, RULE_CHECKS_DDL, SCORE, USER

# the rule vocabulary, declared in the kernel, as the day's and the experiments' modules import it from here
__all__ = [
    "BUILT_IN_RULES",
    "FEEDBACK_RULES",
    "N_EXAMPLES",
    "RuleResult",
    "as_dicts",
    "hard",
    "row_counts",
    "rule_tuples",
    "rules_frame",
    "scan_rules",
    "soft",
]

#: counts the earlier stages may leave out: none of them counted
_ABSENT_IS_ZERO = {"bad_score": 0, "rejected_exposures": 0, "rejected_clicks": 0, "click_rows": 0}


def _examples(wanted: Mapping[str, tuple[DataFrame, Column, Column]]) -> dict[str, list[str]]:
    """A few distinct keys of violating rows per rule, sorted: ``wanted`` maps a rule to (rows, condition,
    key), asked only for the rules with violations.

    One job for all of them (a union of top-k's), not one per rule: per rule the ``N_EXAMPLES`` smallest distinct
    keys of its violating rows (:func:`smallest_keys`).  The same rows give the same examples on every run; a
    plain ``limit`` took the first rows a scan met, which depends on the order the partitions' shuffle blocks
    arrived in.
    """
    if not wanted:
        return {}
    parts = [
        smallest_keys(df.where(condition), key).select(F.lit(rule).alias("rule"), "key")
        for rule, (df, condition, key) in wanted.items()
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    found: dict[str, set[str]] = {rule: set() for rule in wanted}
    for row in union.collect():
        found[row["rule"]].add(row["key"])
    return {rule: sorted(keys)[:N_EXAMPLES] for rule, keys in found.items()}


def smallest_keys(rows: DataFrame, key: Column) -> DataFrame:
    """``key`` as a string column ``key``: the ``N_EXAMPLES`` smallest distinct keys of ``rows`` (a null key is no
    example).  What moves is each partition's distinct keys (a partial aggregate), then a top-k of them; never
    the rows."""
    keys = rows.select(key.cast("string").alias("key")).where(F.col("key").isNotNull())
    return keys.distinct().orderBy("key").limit(N_EXAMPLES)


def row_flags(
    has_catalog: bool, has_score: bool, blacklist_items: Sequence[str], blacklist_categories: Sequence[str]
) -> dict[str, Column]:
    """The conditions on a labelled exposure row that the rules count (:func:`row_counts`), by count name:
    ``exposures`` (rows with an item), ``blacklisted``, ``out_of_range`` (a score outside [0, 1]),
    ``duplicated_pairs`` (a (request, item) shown more than once), ``missing`` (not in the catalog),
    ``banned`` (a blacklisted category); a condition that cannot hold on the day is false."""
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
    return {
        "exposures": item_row,
        "blacklisted": item_row & blacklisted,
        "out_of_range": item_row & out_of_range,
        "duplicated_pairs": duplicated,
        "missing": missing,
        "banned": banned,
    }


def _example_rows(
    exposures: DataFrame,
    flags: Mapping[str, Column],
    rejected_exposures: DataFrame | None,
    bot_requests_per_user: int,
) -> dict[str, tuple[DataFrame | None, Column, Column]]:
    """Where each rule with examples finds them: (rows, condition, key), by rule name."""
    pair = F.concat_ws(":", REQUEST, ITEM)
    return {
        "blacklisted_item": (exposures, flags["blacklisted"], F.col(ITEM)),
        "duplicate_item_in_request": (exposures, flags["duplicated_pairs"], pair),
        "item_missing_from_catalog": (exposures, flags["missing"], F.col(ITEM)),
        "blacklisted_category": (exposures, flags["banned"], F.concat_ws(":", ITEM_CATEGORY, ITEM)),
        "non_finite_score": (rejected_exposures, F.col("reject_reason") == "bad_score", pair),
        "score_out_of_range_rate": (exposures, flags["out_of_range"], pair),
        "bot_user_rate": (_requests_per_user(exposures), F.col("requests") > bot_requests_per_user, F.col(USER)),
    }


def scan_rules(
    exposures: DataFrame,
    counts: Mapping[str, int],
    *,
    has_catalog: bool,
    has_score: bool,
    blacklist_items: Sequence[str],
    blacklist_categories: Sequence[str],
    bot_requests_per_user: int,
    thresholds: Mapping[str, float],
    previous_exposure_rows: int | None,
    rejected_exposures: DataFrame | None = None,
    exposure_reasons: Mapping[str, int] | None = None,
    click_reasons: Mapping[str, int] | None = None,
    unweighted_events: Mapping[str, int] | None = None,
    click_counts: Mapping[str, int] | None = None,
) -> list[RuleResult]:
    """Evaluate every built-in rule that applies (:data:`kernels.rules.BUILT_IN`), in its table's order.

    ``exposures`` are the labelled, deduplicated exposures (empty responses
    included, with ``copies``, ``_category`` and ``_in_catalog``); ``counts``
    holds what earlier stages counted: ``exposure_rows``, ``bad_score``,
    ``duplicate_exposures``, ``orphan_events``, ``valid_events``,
    ``empty_responses``.  ``has_catalog``: the items table exists (else the
    catalog rules are left out).  ``thresholds``: the soft rules' thresholds by
    config key (:data:`kernels.rules.THRESHOLD_KEYS`).  ``exposure_reasons`` /
    ``click_reasons``: set-aside rows per reject reason; ``unweighted_events``:
    valid events per event name without a weight (each None: nothing counted); ``click_counts``: the health
    stage's ``top_user_clicks`` and ``clicked_exposures`` of slice ``all`` (None: the ``click_concentration``
    rule is left out).
    """
    unweighted_events = unweighted_events or {}
    facts = {
        fact
        for fact, holds in (
            ("blacklist_items", bool(blacklist_items)),
            ("blacklist_categories", bool(blacklist_categories)),
            ("catalog", has_catalog),
            ("score", has_score),
            ("previous_day", previous_exposure_rows is not None),
            ("clicks_histogram", click_counts is not None),
        )
        if holds
    }
    flags = row_flags(has_catalog, has_score, blacklist_items, blacklist_categories)
    agg = row_counts(exposures, flags, bot_requests_per_user).collect()[0]  # no grouping: always one row
    # the query's counts over the earlier stages' (its ``exposures`` is the rows with an item it just counted)
    day = {**_ABSENT_IS_ZERO, **counts, **{name: agg[name] or 0 for name in (*flags, "users", "requests", "bots")}}
    day |= day_counts(counts, unweighted_events, previous_exposure_rows) | dict(click_counts or {})
    rows = _example_rows(exposures, flags, rejected_exposures, bot_requests_per_user)
    by_name = {rule.name: rule for rule in BUILT_IN}
    examples = _examples(
        {
            name: (df, condition, key)
            for name, (df, condition, key) in rows.items()
            if df is not None and by_name[name].applies(facts) and day[by_name[name].numerator]
        }
    )
    examples["rejected_exposure_rate"] = top_counts(exposure_reasons or {})
    examples["rejected_click_rate"] = top_counts(click_reasons or {})
    examples["unweighted_event_rate"] = top_counts(unweighted_events)
    reason = no_feedback_reason(counts, unweighted_events)
    if reason is not None:
        examples["no_feedback"] = [reason]
    return rule_results(day, thresholds, facts, examples)


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


def rules_frame(spark: SparkSession, results: Sequence[RuleResult]) -> DataFrame:
    return spark.createDataFrame(rule_tuples(results), RULE_CHECKS_DDL)


def as_dicts(results: Sequence[RuleResult]) -> list[dict]:
    return [asdict(r) for r in results]
