"""``[rules]``: the built-in business rules' thresholds and the rules of the user's own (``[[rules.custom]]``)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recsys_spark.config.checks import MAX_NOVELTY_DAYS, NAME_PATTERN
from recsys_spark.config.sql_guard import UnsafeSql, check_expression
from recsys_spark.errors import ConfigError

CUSTOM_LEVELS = ("exposure", "list", "user", "day")
CUSTOM_RULE_KEYS = ("name", "severity", "level", "when", "threshold", "description")


@dataclass(frozen=True)
class CustomRule:
    """A business rule of the user's own (``[[rules.custom]]``; docs/operations.md, "Rules you write").

    ``when`` is Spark SQL, never Python: at level ``exposure`` a boolean over one exposure's columns, at
    ``list`` (a request), ``user`` and ``day`` an aggregate over the level's exposures; true is a violation.
    ``severity`` ``hard``: any violation fails the day (exit 8); ``soft``: the rate of violations must stay at
    or below ``threshold``, or, with ``threshold = "baseline"`` (``baseline``), within ``rules.baseline_sigmas``
    standard deviations above its mean rate of the last ``rules.baseline_days`` days.  The expression is checked
    here against the grammar of :mod:`recsys_spark.config.sql_guard` (no query, no Java call, listed functions only),
    and against the level's columns before the day is computed (:mod:`recsys_spark.steps.custom_rules`).
    """

    name: str
    severity: str
    level: str
    when: str
    threshold: float | None = None
    baseline: bool = False
    description: str = ""

    @classmethod
    def parse(cls, table: Any, where: str) -> CustomRule:
        """One ``[[rules.custom]]`` table, checked; ``where`` names it in errors (``rules.custom[2]``)."""
        if not isinstance(table, Mapping):
            raise ConfigError(f"config key {where}: expected a table ([[rules.custom]]), got {table!r}")
        name = table.get("name")
        if isinstance(name, str) and NAME_PATTERN.fullmatch(name):
            where = f"rules.custom[{name}]"
        for key in table:
            if key not in CUSTOM_RULE_KEYS:
                near = difflib.get_close_matches(str(key), CUSTOM_RULE_KEYS, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise ConfigError(f"unknown config key: {where}.{key}{hint}")
        for key in ("name", "severity", "level", "when"):
            if not isinstance(table.get(key), str) or not table[key].strip():
                raise ConfigError(f"config key {where}.{key}: expected a non-empty string, got {table.get(key)!r}")
        if not NAME_PATTERN.fullmatch(table["name"]):
            raise ConfigError(
                f"config key {where}.name: expected lower-case letters, digits and _, got {table['name']!r}"
            )
        if table["severity"] not in ("hard", "soft"):
            raise ConfigError(f"config key {where}.severity: expected hard or soft, got {table['severity']!r}")
        if table["level"] not in CUSTOM_LEVELS:
            raise ConfigError(
                f"config key {where}.level: expected one of {', '.join(CUSTOM_LEVELS)}, got {table['level']!r}"
            )
        try:
            check_expression(table["when"])
        except UnsafeSql as exc:
            raise ConfigError(
                f"config key {where}.when: {exc} (a rule is an expression over its level's columns): {table['when']!r}"
            ) from None
        threshold, baseline = table.get("threshold"), False
        if table["severity"] == "hard":
            if threshold is not None:
                raise ConfigError(
                    f"config key {where}.threshold: a hard rule has no threshold (any violation fails the day)"
                )
        elif threshold == "baseline":
            threshold, baseline = None, True
        elif isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise ConfigError(
                f'config key {where}.threshold: a soft rule needs a rate between 0 and 1 or "baseline", '
                f"got {threshold!r}"
            )
        description = table.get("description", "")
        if not isinstance(description, str):
            raise ConfigError(f"config key {where}.description: expected a string, got {description!r}")
        return cls(
            table["name"],
            table["severity"],
            table["level"],
            table["when"].strip(),
            None if threshold is None else float(threshold),
            baseline,
            description,
        )


@dataclass(frozen=True)
class RulesConfig:
    fail_on_hard: bool = True
    blacklist_items: tuple[str, ...] = ()
    blacklist_categories: tuple[str, ...] = ()
    max_duplicate_item_rate: float = 0.01
    max_missing_item_rate: float = 0.05
    max_rejected_rate: float = 0.02
    max_unweighted_event_rate: float = 0.2
    max_duplicate_rate: float = 0.01
    max_orphan_rate: float = 0.05
    max_empty_response_rate: float = 0.02
    max_score_out_of_range_rate: float = 0.0
    bot_requests_per_user: int = 500
    max_bot_user_rate: float = 0.001
    max_exposure_change: float = 0.5
    max_click_concentration: float = 0.25  # clicks of the top 1 % of clicking users, per click (kernels.robustness)
    custom: tuple[CustomRule, ...] = ()
    columns: tuple[str, ...] = ()
    baseline_days: int = 14
    baseline_sigmas: float = 3.0
    baseline_min_days: int = 3

    def __post_init__(self) -> None:
        if not 0 <= self.max_click_concentration <= 1:
            raise ConfigError(
                "config key rules.max_click_concentration: expected a share of the clicks in [0, 1], "
                f"got {self.max_click_concentration}"
            )
        names = [r.name for r in self.custom]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigError(f"config key rules.custom: two rules named {', '.join(twice)} (a name is unique)")
        if not 1 <= self.baseline_days <= MAX_NOVELTY_DAYS:
            raise ConfigError(
                f"config key rules.baseline_days: expected 1 to {MAX_NOVELTY_DAYS} (days of rule_checks read), "
                f"got {self.baseline_days}"
            )
        if not 2 <= self.baseline_min_days <= self.baseline_days:
            raise ConfigError(
                "config key rules.baseline_min_days: expected at least 2 (a standard deviation needs two days) and "
                f"at most rules.baseline_days ({self.baseline_days}), got {self.baseline_min_days}"
            )
