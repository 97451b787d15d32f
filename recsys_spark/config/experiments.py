"""``[experiments]``: the A/B analysis, and each experiment's goals, guardrails and secondary metrics."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from recsys_spark.config.checks import parsed
from recsys_spark.config.sql_guard import AGGREGATE_FUNCTIONS, UnsafeSql, check_expression
from recsys_spark.errors import ConfigError
from recsys_spark.registry import EXPERIMENT_GOALS, EXPERIMENT_GUARDRAILS, metric
from recsys_spark.registry import EXPERIMENT_METRICS as DEFAULT_EXPERIMENT_METRICS


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
    a key left out takes ``experiments``' own.  ``start`` (``"YYYY-MM-DD"``): the experiment's first day, from
    which the nightly decision accumulates its users (docs/experiments.md, "Decisions on the accumulated data").
    ``population``: a Spark SQL condition on the exposures' or the users table's columns; the experiment is
    analysed on the users with an exposure of the day that meets it (docs/experiments.md, "Populations")."""

    goals: tuple[str, ...] | None = None
    guardrails: tuple[GuardrailConfig, ...] | None = None
    secondary: tuple[str, ...] | None = None
    start: str | None = None
    population: str | None = None


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
    min_users_per_cell: int = 100
    per_experiment: Mapping[str, DecisionConfig] = field(default_factory=lambda: MappingProxyType({}))
    max_cumulative_days: int = 90

    def __post_init__(self) -> None:
        from recsys_spark.kernels.experiments import CORRECTIONS
        from recsys_spark.kernels.metric_specs import parse_metric

        if self.correction not in CORRECTIONS:
            raise ConfigError(
                f"config key experiments.correction: expected one of {', '.join(CORRECTIONS)}, got {self.correction!r}"
            )
        if self.srm_severity not in ("soft", "hard"):
            raise ConfigError(f"config key experiments.srm_severity: expected soft or hard, got {self.srm_severity!r}")
        for name in self.metrics:
            parsed("experiments.metrics", parse_metric, name)
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
        if self.max_cumulative_days < 1:
            raise ConfigError(
                "config key experiments.max_cumulative_days: expected a positive number of days, got "
                f"{self.max_cumulative_days}"
            )
        if self.min_users_per_cell < 2:
            raise ConfigError(
                "config key experiments.min_users_per_cell: expected at least 2 users (a cell's variance needs two), "
                f"got {self.min_users_per_cell}"
            )
        _check_roles("experiments", self.goals, self.guardrails, self.secondary)
        for name, roles in self.per_experiment.items():
            _check_roles(f"experiments.per_experiment.{name}", roles.goals, roles.guardrails, roles.secondary)
            self.start_of(name)  # a start that is not a date fails as the config loads
            self.population_columns(name)  # a population outside the grammar fails as the config loads

    def populations(self) -> dict[str, str]:
        """{experiment: its ``population`` condition}, for the experiments that have one."""
        return {n: d.population for n, d in sorted(self.per_experiment.items()) if d.population is not None}

    def population_columns(self, experiment: str) -> tuple[str, ...]:
        """The columns ``per_experiment.NAME.population`` reads (none without one), after
        :func:`~recsys_spark.config.sql_guard.check_expression` (the grammar every user's SQL goes through): a
        :class:`ConfigError` naming the key for an expression outside it, an aggregate, or an empty string."""
        own = self.per_experiment.get(experiment)
        if own is None or own.population is None:
            return ()
        where = f"config key experiments.per_experiment.{experiment}.population"
        if not isinstance(own.population, str) or not own.population.strip():
            raise ConfigError(
                f"{where}: expected a Spark SQL condition on user or exposure columns, got {own.population!r}"
            )
        try:
            checked = check_expression(own.population)
        except UnsafeSql as exc:
            raise ConfigError(f"{where}: {exc} (a population is a condition on one exposure's columns)") from None
        if aggregates := sorted(checked.functions & AGGREGATE_FUNCTIONS):
            raise ConfigError(
                f"{where}: {', '.join(aggregates)} is an aggregate; a population is a condition on one exposure's "
                f"or user's columns: {own.population!r}"
            )
        if not checked.columns:
            raise ConfigError(f"{where}: reads no column; a population is a condition on user or exposure columns")
        return tuple(sorted(checked.columns))

    def start_of(self, experiment: str) -> dt.date | None:
        """``per_experiment.NAME.start`` as a date, None when not configured; a :class:`ConfigError` naming the key
        when it is not an ISO date."""
        own = self.per_experiment.get(experiment)
        if own is None or own.start is None:
            return None
        try:
            return dt.date.fromisoformat(own.start)
        except ValueError:
            raise ConfigError(
                f"config key experiments.per_experiment.{experiment}.start: expected a date YYYY-MM-DD, got "
                f"{own.start!r}"
            ) from None

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
    from recsys_spark.kernels.metric_specs import parse_metric

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
