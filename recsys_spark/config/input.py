"""``[input]`` and ``[validation]``: where the day's inputs are and how their rows are checked (the day's
tolerance and time zone)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from recsys_spark.config.checks import MAX_TOLERANCE_MINUTES, at_most
from recsys_spark.config.templates import check_template  # {input_root}, {date}, {date:FORMAT}, table:NAME
from recsys_spark.config.zones import is_portable_zone
from recsys_spark.errors import ConfigError


@dataclass(frozen=True)
class InputConfig:
    """Input locations; ``{input_root}`` and ``{date}`` are filled in per run."""

    exposures: str = "{input_root}/exposures/dt={date}"
    clicks: str = "{input_root}/clicks/dt={date}"
    items: str = "{input_root}/items"  # optional (item_id, category), not partitioned
    users: str = "{input_root}/users"  # optional, read only when a slice or a custom rule needs its columns
    # catalog inputs (recsys_spark/config/templates.py): table:NAME inputs' partition column and its format
    partition_column: str = "dt"
    partition_format: str = "%Y-%m-%d"
    # contract column name -> the input's column name, e.g. {user_id = "uid"}
    columns: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        for name in ("exposures", "clicks", "items", "users"):
            check_template(getattr(self, name), f"input.{name}")


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
        at_most(
            "validation.ts_tolerance_minutes",
            self.ts_tolerance_minutes,
            MAX_TOLERANCE_MINUTES,
            "a day: a row further than that from its partition's day belongs to another partition",
        )
