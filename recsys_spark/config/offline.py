"""``[offline]``: offline evaluation's inputs and settings, and the parsers of its ``rating_range`` and
``distortion`` keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from recsys_spark.config.checks import in_open_unit, parsed
from recsys_spark.errors import ConfigError


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

    recommendations: str = ""  # user_id, item_id, score and/or rank (each user's top-K list)
    truth: str = ""  # user_id, item_id [, relevance] (held-out interactions)
    train: str = ""  # user_id, item_id
    items: str = ""  # item_id, category
    predictions: str = ""  # user_id, item_id, score, label
    ratings: str = ""  # user_id, item_id, rating, prediction
    sampled: str = ""  # user_id, item_id, score, is_target
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
    #: thresholds of the predictions' accuracy, precision, recall and F_alpha (docs/offline.md); () = none
    thresholds: tuple[float, ...] = (0.5,)

    def __post_init__(self) -> None:
        if self.calibration_bins < 1:
            raise ConfigError(f"config key offline.calibration_bins: expected at least 1, got {self.calibration_bins}")
        if not 0 < self.sampled_gamma <= 1:
            raise ConfigError(
                f"config key offline.sampled_gamma: expected a number in (0, 1], got {self.sampled_gamma}"
            )
        in_open_unit("offline.confidence", self.confidence)
        parsed("offline.rating_range", parse_range, self.rating_range)
        parsed("offline.distortion", parse_distortion, self.distortion)
