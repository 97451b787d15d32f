"""``[execution]`` and ``[output]``: how the job runs (buckets, Arrow batches, its log level) and where and how
it writes its tables."""

from __future__ import annotations

import re
from dataclasses import dataclass

from recsys_spark.errors import ConfigError


@dataclass(frozen=True)
class ExecutionConfig:
    rows_per_bucket: int = 200_000
    max_user_rows: int = 200_000
    arrow_batch_rows: int = 10_000
    log_level: str = "WARN"
    adaptive_outside_label: bool = False
    labelling: str = "spark"


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
