"""Settings: one frozen, typed object loaded once from TOML plus ``--set`` overrides.

The defaults below are the single source of truth; ``conf/default.toml``
spells every one of them out with a comment (a test keeps the two equal).
Library functions never receive this object whole: the pipeline hands each
step the plain values it needs.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from recsys_spark.config.sql_guard import UnsafeSql, check_expression
from recsys_spark.config.zones import is_portable_zone
from recsys_spark.errors import ConfigError
from recsys_spark.kernels.gate import GateCheck
from recsys_spark.registry import EXPERIMENT_GOALS, EXPERIMENT_GUARDRAILS, metric, parse_key
from recsys_spark.registry import EXPERIMENT_METRICS as DEFAULT_EXPERIMENT_METRICS
from recsys_spark.tables import check_name

if sys.version_info >= (3, 11):  # Python 3.10: the tomli backport, same API
    import tomllib
else:  # pragma: no cover - exercised by make test-compat
    import tomli as tomllib


@dataclass(frozen=True)
class InputConfig:
    """Input locations; ``{input_root}`` and ``{date}`` are filled in per run."""

    exposures: str = "{input_root}/exposures/dt={date}"
    clicks: str = "{input_root}/clicks/dt={date}"
    items: str = "{input_root}/items"
    users: str = "{input_root}/users"
    # catalog inputs (recsys_spark/config/templates.py): table:NAME inputs' partition column and its format
    partition_column: str = "dt"
    partition_format: str = "%Y-%m-%d"
    # contract column name -> the input's column name, e.g. {user_id = "uid"}
    columns: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        from recsys_spark.config.templates import check_template  # {input_root}, {date}, {date:FORMAT}, table:NAME

        for name in ("exposures", "clicks", "items", "users"):
            check_template(getattr(self, name), f"input.{name}")


#: upper bounds of the keys whose larger values mean nothing here and would overflow a date, an interval
#: or a 32-bit column after Spark has started (conf/default.toml says why each bound is where it is)
MAX_WINDOW_MINUTES = 2880.0  # two days: an exposure's clicks are read from its day and the next, no further
MAX_TOLERANCE_MINUTES = 1440.0  # a day: a row further from its partition's day belongs to another partition
MAX_NOVELTY_DAYS = 366  # a year of clicks partitions, each one read
MAX_K = 1_000_000  # deeper than any ranked list (the tables' k is a 32-bit int)


def _at_most(key: str, value: float, bound: float, why: str) -> None:
    if value > bound:
        raise ConfigError(
            f"config key {key}: expected at most {_plain_number(bound)} ({why}), got {_plain_number(value)}"
        )


def _plain_number(value: float) -> str:
    """2880.0 -> 2880, 1e13 -> 10000000000000: what an operator typed, not an exponent."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e18 else repr(value)


@dataclass(frozen=True)
class AttributionConfig:
    window_minutes: float = 30.0

    def __post_init__(self) -> None:
        _at_most(
            "attribution.window_minutes",
            self.window_minutes,
            MAX_WINDOW_MINUTES,
            "two days: the job reads the day's clicks and the next day's, no further",
        )


#: the spelling of a name that becomes part of a metric or rule name (a conversion event, a custom rule)
NAME_PATTERN = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class LabelsConfig:
    event_weights: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({"click": 1.0}))
    click_event: str = "click"
    conversion_events: tuple[str, ...] = ("purchase",)

    def __post_init__(self) -> None:
        for name in self.conversion_events:
            if not NAME_PATTERN.fullmatch(name):
                raise ConfigError(
                    f"config key labels.conversion_events: {name!r} is not a name of lower-case letters, digits and "
                    f"_ (it names the metrics {name}_user_rate and {name}_exposure_rate)"
                )


@dataclass(frozen=True)
class RankingConfig:
    list_unit: str = "request"


@dataclass(frozen=True)
class MetricsConfig:
    k: tuple[int, ...] = (1, 3, 5, 10, 20)
    ndcg_gain: str = "exponential"

    def __post_init__(self) -> None:
        _at_most("metrics.k", max(self.k, default=0), MAX_K, "a cut-off deeper than any ranked list")


@dataclass(frozen=True)
class ExecutionConfig:
    rows_per_bucket: int = 200_000
    max_user_rows: int = 200_000
    arrow_batch_rows: int = 10_000
    log_level: str = "WARN"
    adaptive_outside_label: bool = False


@dataclass(frozen=True)
class HealthConfig:
    min_list_length: int = 5
    lorenz_points: int = 101
    novelty_days: int = 7

    def __post_init__(self) -> None:
        if self.lorenz_points < 2:
            raise ConfigError(f"config key health.lorenz_points: expected at least 2, got {self.lorenz_points}")
        _at_most("health.novelty_days", self.novelty_days, MAX_NOVELTY_DAYS, "a year of clicks partitions")


@dataclass(frozen=True)
class SlicesConfig:
    names: tuple[str, ...] = ()
    new_user_days: int = 7
    popularity_head_share: float = 0.2
    popularity_tail_share: float = 0.2

    def __post_init__(self) -> None:
        head, tail = self.popularity_head_share, self.popularity_tail_share
        if not (head < 1 and tail < 1 and head + tail <= 1):
            raise ConfigError(
                "config keys slices.popularity_head_share and slices.popularity_tail_share: "
                f"expected shares below 1 that add up to at most 1, got {head} and {tail}"
            )


@dataclass(frozen=True)
class ValidationConfig:
    ts_tolerance_minutes: float = 60.0
    write_rejected: bool = False
    time_zone: str = "UTC"

    def __post_init__(self) -> None:
        if not is_portable_zone(self.time_zone):  # Python (the day's bounds) and Java (Spark's session) both
            raise ConfigError(
                f"config key validation.time_zone: unknown time zone {self.time_zone!r}: expected an IANA region "
                "name that both Python and Java know, such as UTC, Asia/Shanghai or America/New_York "
                "(Etc/GMT-8 for a fixed UTC+08:00; not localtime, posix/... or right/...)"
            )
        _at_most(
            "validation.ts_tolerance_minutes",
            self.ts_tolerance_minutes,
            MAX_TOLERANCE_MINUTES,
            "a day: a row further than that from its partition's day belongs to another partition",
        )


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
    custom: tuple[CustomRule, ...] = ()
    columns: tuple[str, ...] = ()
    baseline_days: int = 14
    baseline_sigmas: float = 3.0
    baseline_min_days: int = 3

    def __post_init__(self) -> None:
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


@dataclass(frozen=True)
class OutputConfig:
    """Where and how the tables are written: ``stale_minutes`` ages a dead run's lock and staging, a lock whose
    ``heartbeat_seconds`` stopped for four beats is a dead run's; ``catalog``
    "" keeps path output only, else every table is also written to that database (recsys_spark/io/catalog.py)."""

    stale_minutes: float = 240.0
    heartbeat_seconds: float = 30.0
    catalog: str = ""
    table_format: str = "parquet"
    write_mode: str = "auto"

    def __post_init__(self) -> None:
        import re

        if not self.heartbeat_seconds > 0:
            raise ConfigError(
                f"config key output.heartbeat_seconds: expected a number > 0, got {self.heartbeat_seconds}"
            )
        if self.catalog and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?", self.catalog):
            raise ConfigError(
                f"config key output.catalog: expected a database name such as eval_db (or "
                f"catalog.database), got {self.catalog!r}"
            )
        # a name, never SQL: it is the USING clause of the CREATE TABLE the job runs (docs/catalog.md)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", self.table_format):
            raise ConfigError(
                "config key output.table_format: expected a data source name such as parquet, iceberg or delta "
                f"(the USING clause of the tables the job creates), got {self.table_format!r}"
            )


@dataclass(frozen=True)
class GuardrailConfig:
    """One of ``experiments.guardrails``: a metric key and the worsening a variant may show on it and still ship,
    as ``absolute_margin`` (in the metric's units) or ``relative_margin`` (a share of the control's value)."""

    metric: str = ""
    absolute_margin: float | None = None
    relative_margin: float | None = None


@dataclass(frozen=True)
class DecisionConfig:
    """``experiments.per_experiment.NAME``: the goals, guardrails and secondary metrics of one experiment;
    a key left out takes ``experiments``' own."""

    goals: tuple[str, ...] | None = None
    guardrails: tuple[GuardrailConfig, ...] | None = None
    secondary: tuple[str, ...] | None = None


def _default_guardrails() -> tuple[GuardrailConfig, ...]:
    return tuple(GuardrailConfig(m, a, r) for m, a, r in EXPERIMENT_GUARDRAILS)


@dataclass(frozen=True)
class ExperimentsConfig:
    """A/B analysis (docs/experiments.md); skipped, with a note, when the assignments path does not exist."""

    assignments: str = "{input_root}/assignments/dt={date}"
    control: str = "control"
    correction: str = "holm"
    metrics: tuple[str, ...] = DEFAULT_EXPERIMENT_METRICS
    srm_p_threshold: float = 0.001
    srm_severity: str = "soft"
    weights: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    cuped_days: int = 0
    power: float = 0.8
    inference: str = "sequential"
    sequential_tuning: float = 5000.0
    goals: tuple[str, ...] = EXPERIMENT_GOALS
    guardrails: tuple[GuardrailConfig, ...] = field(default_factory=_default_guardrails)
    secondary: tuple[str, ...] = ()
    min_users_per_arm: int = 100
    per_experiment: Mapping[str, DecisionConfig] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        from recsys_spark.kernels.experiments import CORRECTIONS, parse_metric

        if self.correction not in CORRECTIONS:
            raise ConfigError(
                f"config key experiments.correction: expected one of {', '.join(CORRECTIONS)}, got {self.correction!r}"
            )
        if self.srm_severity not in ("soft", "hard"):
            raise ConfigError(f"config key experiments.srm_severity: expected soft or hard, got {self.srm_severity!r}")
        for name in self.metrics:
            try:
                parse_metric(name)
            except ValueError as exc:
                raise ConfigError(f"config key experiments.metrics: {exc}") from None
        for key_ in self.weights:
            if "/" not in key_:
                raise ConfigError(f"config key experiments.weights: expected EXPERIMENT/VARIANT keys, got {key_!r}")
        if not 0 < self.power < 1 or not 0 < self.srm_p_threshold < 1:
            raise ConfigError(
                "config keys experiments.power and experiments.srm_p_threshold: expected a number "
                f"between 0 and 1, got {self.power} and {self.srm_p_threshold}"
            )
        if not self.sequential_tuning > 0:
            raise ConfigError(
                f"config key experiments.sequential_tuning: expected a positive number of users, got "
                f"{self.sequential_tuning}"
            )
        _check_roles("experiments", self.goals, self.guardrails, self.secondary)
        for name, roles in self.per_experiment.items():
            _check_roles(f"experiments.per_experiment.{name}", roles.goals, roles.guardrails, roles.secondary)

    def roles(self, experiment: str) -> tuple[tuple[str, ...], tuple[GuardrailConfig, ...], tuple[str, ...]]:
        """(goals, guardrails, secondary) of ``experiment``: its ``per_experiment`` entry's, else the defaults."""
        own = self.per_experiment.get(experiment, DecisionConfig())
        return (
            self.goals if own.goals is None else own.goals,
            self.guardrails if own.guardrails is None else own.guardrails,
            self.secondary if own.secondary is None else own.secondary,
        )

    def decision_metrics(self) -> tuple[str, ...]:
        """Every metric some experiment's decision reads (tested whether or not ``metrics`` lists it)."""
        names: list[str] = []
        for goals, guardrails, secondary in [
            (self.goals, self.guardrails, self.secondary),
            *(self.roles(name) for name in self.per_experiment),
        ]:
            names += [*goals, *(g.metric for g in guardrails), *secondary]
        return tuple(dict.fromkeys(names))


def _check_roles(
    where: str,
    goals: tuple[str, ...] | None,
    guardrails: tuple[GuardrailConfig, ...] | None,
    secondary: tuple[str, ...] | None,
) -> None:
    """Each goal, guardrail and secondary metric is a key with a per-user form (an interval in an experiment);
    goals and guardrails have a better direction; a guardrail has one margin."""
    from recsys_spark.kernels.experiments import parse_metric

    def testable(name: str, role: str) -> None:
        try:
            spec = parse_metric(name)
        except ValueError as exc:
            raise ConfigError(
                f"config key {where}.{role}: {exc}; a decision reads an interval, which only a metric with a "
                "per-user form has in an experiment"
            ) from None
        if role != "secondary" and metric(spec.metric).higher_is_better is None:
            raise ConfigError(f"config key {where}.{role}: {name} has no better direction to decide on")

    for name in goals or ():
        testable(name, "goals")
    for name in secondary or ():
        testable(name, "secondary")
    for i, g in enumerate(guardrails or ()):
        testable(g.metric, f"guardrails[{i}]")
        margins = [m for m in (g.absolute_margin, g.relative_margin) if m is not None]
        if len(margins) != 1:
            raise ConfigError(
                f"config key {where}.guardrails[{i}] ({g.metric}): expected one margin, absolute_margin or "
                f"relative_margin (the worsening that may ship), got {len(margins)}"
            )


def parse_range(text: str) -> tuple[float, float] | None:
    """``"1,5"`` -> (1.0, 5.0); ``""`` -> None (use the observed range).

    >>> parse_range("1, 5"), parse_range("")
    ((1.0, 5.0), None)
    """
    if not text.strip():
        return None
    parts = [float(x) for x in text.split(",")]
    if len(parts) != 2 or not parts[0] < parts[1]:
        raise ValueError(f"expected 'LOW,HIGH' with LOW < HIGH, got {text!r}")
    return parts[0], parts[1]


def parse_distortion(table: Mapping[str, float]) -> dict[tuple[float, float], float]:
    """Config ``{"3,1" = 5, ...}`` (key = predicted,actual) -> {(3.0, 1.0): 5.0, ...}.

    >>> parse_distortion({"3,1": 5, "2,1": 3})
    {(3.0, 1.0): 5.0, (2.0, 1.0): 3.0}
    """
    out = {}
    for key, value in table.items():
        parts = [float(x) for x in str(key).split(",")]
        if len(parts) != 2:
            raise ValueError(f"distortion key {key!r}: expected 'PREDICTED,ACTUAL'")
        out[(parts[0], parts[1])] = float(value)
    return out


@dataclass(frozen=True)
class OfflineConfig:
    """Offline evaluation (``recsys-spark offline``): input paths ({run} is replaced by the run name; "" = absent)."""

    recommendations: str = ""
    truth: str = ""
    train: str = ""
    items: str = ""
    predictions: str = ""
    ratings: str = ""
    sampled: str = ""
    exclude_train_items: bool = True
    calibration_bins: int = 10
    rating_range: str = ""
    round_predictions: bool = False
    distortion: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    sampled_gamma: float = 0.01
    sampled_replacement: bool = False
    catalog_size: int = 0
    confidence: float = 0.95
    multiple_testing: str = "holm"

    def __post_init__(self) -> None:
        if self.calibration_bins < 1:
            raise ConfigError(f"config key offline.calibration_bins: expected at least 1, got {self.calibration_bins}")
        if not 0 < self.sampled_gamma <= 1:
            raise ConfigError(
                f"config key offline.sampled_gamma: expected a number in (0, 1], got {self.sampled_gamma}"
            )
        if not 0 < self.confidence < 1:
            raise ConfigError(f"config key offline.confidence: expected a number in (0, 1), got {self.confidence}")
        try:
            parse_range(self.rating_range)
        except ValueError as exc:
            raise ConfigError(f"config key offline.rating_range: {exc}") from None
        try:
            parse_distortion(self.distortion)
        except ValueError as exc:
            raise ConfigError(f"config key offline.distortion: {exc}") from None


def _ope_estimators() -> tuple[str, ...]:
    from recsys_spark.kernels.ope import ESTIMATORS

    return tuple(ESTIMATORS)


@dataclass(frozen=True)
class OpeConfig:
    """Off-policy evaluation (``recsys-spark ope``, docs/ope.md): the candidate (a path or ``table:NAME``,
    ``{input_root}`` and ``{run}`` filled in), the estimators, weight clipping (0: none), Switch-DR's τ, and
    the smallest share of the logged requests the candidate must answer (below it the run fails, exit 7)."""

    target: str = ""
    estimators: tuple[str, ...] = field(default_factory=_ope_estimators)
    clip: float = 0.0
    switch_tau: float = 10.0
    min_matched_share: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.min_matched_share <= 1:
            raise ConfigError(
                "config key ope.min_matched_share: expected a share of the logged requests in (0, 1], got "
                f"{self.min_matched_share}"
            )
        known = _ope_estimators()
        for name in self.estimators:
            if name not in known:
                near = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise ConfigError(
                    f"config key ope.estimators: unknown estimator {name!r}{hint}; expected some of {', '.join(known)}"
                )


@dataclass(frozen=True)
class SimulationConfig:
    """Offline simulation (``recsys-spark simulate``, docs/ope.md): where the candidate's lists for the logged
    requests are (``{input_root}``, ``{date}`` and ``{run}`` filled in)."""

    lists: str = "{input_root}/simulation/{run}/dt={date}"

    def __post_init__(self) -> None:
        from recsys_spark.config.templates import check_template

        check_template(self.lists.replace("{run}", "run"), "simulation.lists")


@dataclass(frozen=True)
class ReportConfig:
    """The HTML report (:mod:`recsys_spark.report`); see docs/report.md."""

    offline_auc: str = ""
    window_days: int = 30
    overfit_gap: float = 0.05
    offline_online_gap: float = 0.05
    regression_x: str = "auc_impression_weighted"
    regression_y: str = "uv_ctr_global"
    min_regression_days: int = 7
    regression_level: float = 0.95

    def __post_init__(self) -> None:
        if not 0 < self.regression_level < 1:
            raise ConfigError(
                f"config key report.regression_level: expected a number in (0, 1), got {self.regression_level}"
            )
        for key in ("regression_x", "regression_y"):
            try:
                parse_key(getattr(self, key))
            except ValueError as exc:
                raise ConfigError(f"config key report.{key}: {exc}") from None


@dataclass(frozen=True)
class StatsConfig:
    confidence: float = 0.95
    bootstrap_replicates: int = 0
    seed: int = 20240501

    def __post_init__(self) -> None:
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(f"config key stats.confidence: expected a number in (0, 1), got {self.confidence}")
        if self.bootstrap_replicates == 1:
            raise ConfigError("config key stats.bootstrap_replicates: expected 0 (off) or at least 2, got 1")


#: ``gate.source``: what a gate compares (docs/gate.md)
GATE_SOURCES = ("offline", "experiment")
#: ``gate.checks[i].on``: the interval's bound (the default) or the point estimate (as TFMA and MLflow)
GATE_ON = ("bound", "point")


@dataclass(frozen=True)
class GateConfig:
    """``recsys-spark gate`` (docs/gate.md): what it compares and its checks.

    ``source = "offline"``: the offline runs ``candidate`` against ``base`` (``offline-compare``'s output);
    ``source = "experiment"``: ``variant`` against the control in the window ``start``..``end`` of
    ``experiment`` (``recsys-spark experiment``'s output).  "" (the default): no gate configured.
    """

    source: str = ""
    base: str = ""
    candidate: str = ""
    experiment: str = ""
    variant: str = "treatment"
    start: str = ""
    end: str = ""
    checks: tuple[GateCheck, ...] = ()  # [[gate.checks]], docs/gate.md

    def __post_init__(self) -> None:
        if self.source and self.source not in GATE_SOURCES:
            raise ConfigError(f"config key gate.source: expected one of {', '.join(GATE_SOURCES)}, got {self.source!r}")
        for key in ("base", "candidate", "experiment"):  # each becomes a directory the gate reads
            if getattr(self, key):
                check_name(getattr(self, key), f"config key gate.{key}")
        for i, c in enumerate(self.checks):
            where = f"config key gate.checks[{i}]"
            if not c.metric or not c.aggregation:
                raise ConfigError(f"{where}: expected a metric and an aggregation (and k where the metric takes one)")
            try:
                name, _, _ = parse_key(c.key)
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            if c.k is not None and c.k <= 0:
                raise ConfigError(f"{where} ({c.key}): k must be a positive integer, got {c.k}")
            if c.on not in GATE_ON:
                raise ConfigError(f"{where} ({c.key}): on: expected one of {', '.join(GATE_ON)}, got {c.on!r}")
            if c.lower_bound is None and c.upper_bound is None and not c.changes:
                raise ConfigError(
                    f"{where} ({c.key}): no threshold: expected lower_bound, upper_bound, min_absolute_change "
                    "or min_relative_change"
                )
            if c.guardrail and not c.changes:
                raise ConfigError(
                    f"{where} ({c.key}): guardrail = true needs its margin, min_absolute_change or "
                    "min_relative_change (the worsening allowed)"
                )
            if c.changes and metric(name).higher_is_better is None:
                raise ConfigError(f"{where} ({c.key}): {name} has no better direction: only lower_bound/upper_bound")
            if not c.slice or not (c.slice == "all" or "=" in c.slice):
                raise ConfigError(f'{where} ({c.key}): slice: expected "all" or NAME=VALUE, got {c.slice!r}')


@dataclass(frozen=True)
class Config:
    input: InputConfig = field(default_factory=InputConfig)
    attribution: AttributionConfig = field(default_factory=AttributionConfig)
    labels: LabelsConfig = field(default_factory=LabelsConfig)
    ranking: RankingConfig = field(default_factory=RankingConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    health: HealthConfig = field(default_factory=HealthConfig)
    slices: SlicesConfig = field(default_factory=SlicesConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    experiments: ExperimentsConfig = field(default_factory=ExperimentsConfig)
    offline: OfflineConfig = field(default_factory=OfflineConfig)
    ope: OpeConfig = field(default_factory=OpeConfig)
    simulation: SimulationConfig = field(default_factory=SimulationConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    spark: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON-able) of every setting."""
        return json.loads(json.dumps(_plain(self)))

    def fingerprint(self) -> str:
        """Short hash of the settings, to tell runs with different configurations apart."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


_CHOICES: dict[tuple[str, ...], tuple[str, ...]] = {
    ("ranking", "list_unit"): ("request", "session", "user"),
    ("metrics", "ndcg_gain"): ("exponential", "linear"),
    ("execution", "log_level"): ("ERROR", "WARN", "INFO", "DEBUG"),
    ("offline", "multiple_testing"): ("holm", "bh", "none"),
    ("output", "write_mode"): ("auto", "insert_overwrite", "overwrite_partitions"),
    ("experiments", "inference"): ("sequential", "fixed"),
}


def load_config(path: str | Path | None = None, overrides: typing.Sequence[str] = ()) -> Config:
    """Defaults, then the TOML file at ``path``, then each ``KEY=VALUE`` override.

    VALUE is read as a TOML value (``[5, 10]``, ``{click = 1}``, ``3``); a bare
    word that is not valid TOML is taken as a string.  Unknown keys and values
    of the wrong type raise :class:`ConfigError` naming the key.
    """
    tree: dict[str, Any] = {}
    if path is not None:
        try:
            tree = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except IsADirectoryError:
            raise ConfigError(f"config file {path} is a directory, not a TOML file") from None
        except PermissionError:
            raise ConfigError(f"config file {path} cannot be read (permission denied)") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start})") from None
        except OSError as exc:
            raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        parts = key.strip().split(".")
        if parts[0] == "spark" and len(parts) > 1:  # Spark's own keys contain dots
            parts = ["spark", ".".join(parts[1:])]
        _assign(tree, parts, _parse_value(raw.strip(), key.strip(), _expects_structure(parts)))
    if isinstance(tree.get("spark"), Mapping):  # every Spark key starts with "spark.": the prefix may be left out
        tree["spark"] = {(k if str(k).startswith("spark.") else f"spark.{k}"): v for k, v in tree["spark"].items()}
    return _build(Config, tree, ())


def _expects_structure(parts: Sequence[str]) -> bool:
    """Whether the config key ``parts`` holds a table or a list (not a string nor a number)."""
    node: Any = Config
    for part in parts:
        if not (isinstance(node, type) and dataclasses.is_dataclass(node)):
            return False
        hints = typing.get_type_hints(node)
        if part not in hints:
            return False
        node = hints[part]
    origin = typing.get_origin(node)
    return (isinstance(node, type) and dataclasses.is_dataclass(node)) or origin in (tuple, list, dict, Mapping)


def _parse_value(raw: str, key: str = "", structured: bool = False) -> Any:
    """``raw`` read as a TOML value; a bare word that is not TOML is a string (``{input_root}/logs``), but
    for a key that holds a table or a list, a value that is not valid TOML is an error that says so
    (``{user_id=uid}``: its string needs quotes)."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError as exc:
        if structured:
            reason = str(exc).replace("(at line 1, column", "(at column")
            raise ConfigError(
                f"config key {key}: --set value {raw!r} is not valid TOML: {reason} (strings inside a table or a "
                'list need quotes: {user_id = "uid"}, ["platform"])'
            ) from None
        return raw


def _assign(tree: dict[str, Any], parts: list[str], value: Any) -> None:
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"config key {'.'.join(parts)}: {part} is not a table")
    node[parts[-1]] = value


def _build(cls: type, tree: Mapping[str, Any], prefix: tuple[str, ...]) -> Any:
    if not isinstance(tree, Mapping):
        raise ConfigError(f"config key {'.'.join(prefix)} must be a table")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in tree:
        if key not in names:
            near = difflib.get_close_matches(str(key), sorted(names), n=1)
            hint = f" (did you mean {'.'.join(prefix + (near[0],))}?)" if near else ""
            raise ConfigError(f"unknown config key: {'.'.join(prefix + (key,))}{hint}")
    values = {}
    for name in names & set(tree):
        values[name] = _coerce(hints[name], tree[name], prefix + (name,))
    return cls(**values)


def _coerce(hint: Any, value: Any, key: tuple[str, ...]) -> Any:
    dotted = ".".join(key)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):  # X | None: TOML has no null, a value is an X
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value, key)
    origin = typing.get_origin(hint)
    if origin is tuple and typing.get_args(hint)[0] is CustomRule:  # [[rules.custom]]: a list of tables
        if not isinstance(value, list):
            raise ConfigError(f"config key {dotted}: expected a list of tables ([[{dotted}]]), got {value!r}")
        return tuple(CustomRule.parse(table, f"{dotted}[{i + 1}]") for i, table in enumerate(value))
    args = typing.get_args(hint)
    if origin is tuple and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):  # an array of tables
        if not isinstance(value, list):
            raise ConfigError(f"config key {dotted}: expected an array of tables, got {value!r}")
        return tuple(_build(args[0], v, (*key[:-1], f"{key[-1]}[{i}]")) for i, v in enumerate(value))
    if origin in (Mapping, dict) and isinstance(args[1], type) and dataclasses.is_dataclass(args[1]):
        if not isinstance(value, Mapping):
            raise ConfigError(f"config key {dotted}: expected a table, got {value!r}")
        return MappingProxyType({str(k): _build(args[1], v, (*key, str(k))) for k, v in value.items()})
    try:
        if origin is tuple and typing.get_args(hint)[0] is str:  # names: may be empty, order kept
            if not isinstance(value, list):
                raise TypeError("a list of strings")
            return tuple(dict.fromkeys(_scalar(str, v) for v in value))
        if origin is tuple:
            if not isinstance(value, list) or not value:
                raise TypeError("a non-empty list")
            items = tuple(_scalar(typing.get_args(hint)[0], v) for v in value)
            if any(i <= 0 for i in items):
                raise TypeError("positive numbers")
            return tuple(sorted(set(items)))
        if origin in (Mapping, dict) or origin is typing.get_origin(Mapping[str, str]):
            if not isinstance(value, Mapping):
                raise TypeError("a table")
            val_type = typing.get_args(hint)[1]
            out = {str(k): _scalar(val_type, v) for k, v in value.items()}
            if val_type is float and any(v < 0 for v in out.values()):
                raise TypeError("non-negative numbers")
            return MappingProxyType(out)
        result = _scalar(hint, value)
    except TypeError as exc:
        raise ConfigError(f"config key {dotted}: expected {exc}, got {value!r}") from None
    choices = _CHOICES.get(key)
    if choices and result not in choices:
        raise ConfigError(f"config key {dotted}: expected one of {', '.join(choices)}, got {value!r}")
    if isinstance(result, (int, float)) and not isinstance(result, bool):
        # thresholds and tolerances may be 0
        zero_ok = key[0] in ("rules", "validation", "experiments", "offline", "stats", "gate", "ope")
        if result < 0 or (result == 0 and not zero_ok):
            raise ConfigError(
                f"config key {dotted}: expected a {'non-negative' if zero_ok else 'positive'} number, got {value!r}"
            )
    return result


def _scalar(hint: Any, value: Any) -> Any:
    if hint is bool:
        if not isinstance(value, bool):
            raise TypeError("true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("an integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError("a number")
        if not math.isfinite(value):  # NaN compares false both ways and would pass every range check
            raise TypeError("a finite number")
        return float(value)
    if hint is str:
        if isinstance(value, (dict, list)):
            raise TypeError("a string")
        return str(value).lower() if isinstance(value, bool) else str(value)
    raise TypeError(f"a value of type {hint}")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
