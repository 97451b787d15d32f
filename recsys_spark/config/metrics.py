"""The sections of what the day measures: ``[attribution]``, ``[labels]``, ``[ranking]``, ``[metrics]``,
``[health]``, ``[slices]``, and ``[stats]`` (the confidence of every interval and the bootstrap)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from recsys_spark.config.checks import MAX_K, MAX_NOVELTY_DAYS, MAX_WINDOW_MINUTES, NAME_PATTERN, at_most, in_open_unit
from recsys_spark.config.composite import CompositeConfig, register
from recsys_spark.errors import ConfigError

#: metrics.curve_points: the smallest bound but 0 (kernels.curves.MIN_POINTS) and the largest
MIN_CURVE_POINTS = 5
MAX_CURVE_POINTS = 1_000_000
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
    composite: tuple[CompositeConfig, ...] = ()  # [[metrics.composite]] (config/composite.py)
    #: points of roc_curve and pr_curve per slice (docs/metrics.md, "Curves"); 0: no curves
    curve_points: int = 1001

    f_alphas: tuple[float, ...] = (1.0,)  # F_alpha@k written at each k: f1, f0.5... (docs/metrics.md)
    click_cap: int = 10  # capped_ctr: a user's clicked exposures counted up to this many (docs/metrics.md)
    #: the exposures' scores are probabilities: accuracy, precision, recall and F_alpha at each of ``thresholds``
    #: per slice, and the confusion table (docs/metrics.md, "F-scores and thresholds"); off: no threshold rows
    score_is_probability: bool = False
    thresholds: tuple[float, ...] = (0.5,)  # in [0, 1], refused outside it even while score_is_probability is off

    def __post_init__(self) -> None:
        at_most("metrics.k", max(self.k, default=0), MAX_K, "a cut-off deeper than any ranked list")
        if self.curve_points != 0 and self.curve_points < MIN_CURVE_POINTS:
            raise ConfigError(
                f"config key metrics.curve_points: expected 0 (no curves) or at least {MIN_CURVE_POINTS} (two cells "
                f"of the subset above the bound), got {self.curve_points}"
            )
        at_most("metrics.curve_points", self.curve_points, MAX_CURVE_POINTS, "points per slice sent to the driver")
        register(self.composite, self.k)
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


#: a year of exposures partitions, each one read (the activity slice's history window)
MAX_ACTIVITY_DAYS = 366


@dataclass(frozen=True)
class SlicesConfig:
    """``[slices]``: the dimensions and the cut points of the derived ones (docs/metrics.md, "Slices")."""

    names: tuple[str, ...] = ()
    new_user_days: int = 7
    popularity_head_share: float = 0.2
    popularity_tail_share: float = 0.2
    activity_window_days: int = 28  # activity: the days before the day whose exposures partitions are read
    activity_cuts: tuple[int, ...] = (3, 10)  # light: 1..a, medium: a+1..b, heavy: above b exposed days
    item_date_column: str = "first_seen"  # item_age / item_new: the items table's first-seen or publish date
    item_age_cuts: tuple[int, ...] = (7, 30, 365)  # item_age buckets: [0, c1), [c1, c2), ..., [c_last, inf) days
    new_item_days: int = 7  # item_new: "new" when the item is less than this many days old
    hemisphere: str = "north"  # season: meteorological seasons of the northern or southern hemisphere
    day_part_hours: tuple[int, ...] = (6, 12, 18, 22)  # day_part: morning, afternoon, evening, night start

    def __post_init__(self) -> None:
        head, tail = self.popularity_head_share, self.popularity_tail_share
        if not (head < 1 and tail < 1 and head + tail <= 1):
            raise ConfigError(
                "config keys slices.popularity_head_share and slices.popularity_tail_share: "
                f"expected shares below 1 that add up to at most 1, got {head} and {tail}"
            )
        window = self.activity_window_days
        if window < 1:
            raise ConfigError(f"config key slices.activity_window_days: expected at least 1, got {window}")
        at_most("slices.activity_window_days", window, MAX_ACTIVITY_DAYS, "a year of exposures partitions")
        cuts = self.activity_cuts
        if len(cuts) != 2 or not 1 <= cuts[0] < cuts[1] < window:
            raise ConfigError(
                f"config key slices.activity_cuts: expected two days a < b with 1 <= a and b below "
                f"slices.activity_window_days ({window}), got {list(cuts)}"
            )
        _increasing("slices.item_age_cuts", self.item_age_cuts, 1, None)
        if self.new_item_days < 1:
            raise ConfigError(f"config key slices.new_item_days: expected at least 1, got {self.new_item_days}")
        if not self.item_date_column:
            raise ConfigError("config key slices.item_date_column: expected a column name, got ''")
        hours = self.day_part_hours
        _increasing("slices.day_part_hours", hours, 1, 24)
        if len(hours) != 4:
            raise ConfigError(
                "config key slices.day_part_hours: expected the four hours morning, afternoon, evening and night "
                f"start at, got {list(hours)}"
            )


def _increasing(key: str, values: tuple[int, ...], low: int, high: int | None) -> None:
    """Refuse an empty or not strictly increasing list, or a value below ``low`` (above ``high``)."""
    ok = bool(values) and all(a < b for a, b in zip(values, values[1:], strict=False)) and values[0] >= low
    if not ok or (high is not None and values[-1] > high):
        bound = f" and at most {high}" if high is not None else ""
        raise ConfigError(
            f"config key {key}: expected strictly increasing whole numbers of at least {low}{bound}, got {list(values)}"
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
