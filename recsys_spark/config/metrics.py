"""The sections of what the day measures: ``[attribution]``, ``[labels]``, ``[ranking]``, ``[metrics]``,
``[health]``, ``[slices]``, and ``[stats]`` (the confidence of every interval and the bootstrap)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from recsys_spark.config.checks import MAX_K, MAX_NOVELTY_DAYS, MAX_WINDOW_MINUTES, NAME_PATTERN, at_most, in_open_unit
from recsys_spark.errors import ConfigError

#: the largest alpha of metrics.f_alphas: beyond it F_alpha is recall to the printed digits
MAX_F_ALPHA = 100.0


@dataclass(frozen=True)
class AttributionConfig:
    window_minutes: float = 30.0

    def __post_init__(self) -> None:
        at_most(
            "attribution.window_minutes",
            self.window_minutes,
            MAX_WINDOW_MINUTES,
            "two days: the job reads the day's clicks and the next day's, no further",
        )


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
    f_alphas: tuple[float, ...] = (1.0,)  # F_alpha@k written at each k: f1, f0.5... (docs/metrics.md)
    click_cap: int = 10  # capped_ctr: a user's clicked exposures counted up to this many (docs/metrics.md)

    def __post_init__(self) -> None:
        at_most("metrics.k", max(self.k, default=0), MAX_K, "a cut-off deeper than any ranked list")
        at_most("metrics.f_alphas", max(self.f_alphas, default=0.0), MAX_F_ALPHA, "F would be recall alone")
        if self.click_cap < 1:
            raise ConfigError(
                f"config key metrics.click_cap: expected a whole number of at least 1, got {self.click_cap}"
            )


@dataclass(frozen=True)
class HealthConfig:
    min_list_length: int = 5
    lorenz_points: int = 101
    novelty_days: int = 7

    def __post_init__(self) -> None:
        if self.lorenz_points < 2:
            raise ConfigError(f"config key health.lorenz_points: expected at least 2, got {self.lorenz_points}")
        at_most("health.novelty_days", self.novelty_days, MAX_NOVELTY_DAYS, "a year of clicks partitions")


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
class StatsConfig:
    confidence: float = 0.95  # of the two-sided interval on every metrics row
    bootstrap_replicates: int = 0  # 0: no bootstrap (the rows without a closed form get no interval)
    seed: int = 20240501  # a bootstrap weight is Poisson(1) from a hash of (user_id, replicate, seed)

    def __post_init__(self) -> None:
        in_open_unit("stats.confidence", self.confidence)
        if self.bootstrap_replicates == 1:
            raise ConfigError("config key stats.bootstrap_replicates: expected 0 (off) or at least 2, got 1")
