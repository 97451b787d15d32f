"""``[[metrics.composite]]``: one overall metric, a weighted sum of per-user metrics (docs/metrics.md, "Composite
metric").  Checked as the config loads, before any row is read: every component a per-user metric key the
per-user table holds, at a cut-off of ``metrics.k``; a name no metric has yet (registered then:
:func:`recsys_spark.registry.register_composite`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from recsys_spark.errors import ConfigError
from recsys_spark.registry import LIST_METRICS, parse_key, register_composite

#: the per-user table's metric columns a component may name (as ``<metric>[@k]_user_avg``)
PER_USER = (*LIST_METRICS, "mrr", "auc")


@dataclass(frozen=True)
class ComponentConfig:
    """One component: a metric key with a per-user form (``ndcg@10_user_avg``), its weight (> 0), and whether it
    is divided by its per-user standard deviation on the reference day (None: the composite's ``standardise``)."""

    metric: str = ""
    weight: float = 1.0
    standardise: bool | None = None


@dataclass(frozen=True)
class CompositeConfig:
    """``name``: the metric's name (``NAME_user_avg`` its key); ``direction``: which way is better (``higher``
    or ``lower``); ``standardise``: divide every component by its reference spread; ``reference_date``
    (``YYYY-MM-DD``): the day whose spread is the reference, by default the day before the evaluated one."""

    name: str = ""
    components: tuple[ComponentConfig, ...] = ()
    direction: str = "higher"
    standardise: bool = False
    reference_date: str | None = None

    def __post_init__(self) -> None:
        where = f"metrics.composite ({self.name or 'unnamed'})"
        if not self.name:
            raise ConfigError(f"config key {where}: expected a name")
        if self.direction not in ("higher", "lower"):
            raise ConfigError(f"config key {where}.direction: expected higher or lower, got {self.direction!r}")
        if not self.components:
            raise ConfigError(f'config key {where}.components: expected at least one {{ metric = "...", weight = 1 }}')
        for i, component in enumerate(self.components):
            component_key(component.metric, f"{where}.components[{i}]")
        self.reference()

    def reference(self) -> dt.date | None:
        """``reference_date`` as a date (None: the day before the evaluated one)."""
        if self.reference_date is None:
            return None
        try:
            return dt.date.fromisoformat(self.reference_date)
        except ValueError:
            raise ConfigError(
                f"config key metrics.composite ({self.name}).reference_date: expected a date YYYY-MM-DD, got "
                f"{self.reference_date!r}"
            ) from None

    def standardised(self, component: ComponentConfig) -> bool:
        return self.standardise if component.standardise is None else component.standardise


def component_key(key: str, where: str) -> tuple[str, int | None]:
    """(metric, k) of a component's key; a :class:`ConfigError` naming ``where`` and the key when it names no
    metric, or one without a per-user value in the per-user table."""
    try:
        metric, k, aggregation = parse_key(key)
    except ValueError as exc:
        raise ConfigError(f"config key {where}: {exc}") from None
    if metric not in PER_USER or aggregation != "user_avg":
        raise ConfigError(
            f"config key {where}: {key} has no per-user form a composite can combine (one of "
            f"{', '.join(f'{m}@K_user_avg' for m in LIST_METRICS)}, mrr_user_avg, auc_user_avg)"
        )
    return metric, k


def register(composites: Sequence[CompositeConfig], ks: Sequence[int]) -> None:
    """Check the composites against each other and ``metrics.k``, and register their names."""
    seen: set[str] = set()
    for c in composites:
        if c.name in seen:
            raise ConfigError(f"config key metrics.composite: the name {c.name!r} is used twice")
        seen.add(c.name)
        for i, component in enumerate(c.components):
            _, k = component_key(component.metric, f"metrics.composite ({c.name}).components[{i}]")
            if k is not None and k not in ks:
                raise ConfigError(
                    f"config key metrics.composite ({c.name}).components[{i}]: {component.metric} needs k={k} "
                    f"in metrics.k {list(ks)}"
                )
        try:
            register_composite(c.name, c.direction)
        except ValueError as exc:
            raise ConfigError(f"config key metrics.composite: {exc}") from None
