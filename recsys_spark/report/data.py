"""Read what the daily runs wrote for a range of days, driver-side, into small pandas frames.

Tables are read per day partition, ``{output_root}/{table}/dt={day}``.  On a
local or mounted path (no URL scheme, or ``file:``) pyarrow reads them
directly and no SparkSession is started; any other scheme (``hdfs://``,
``s3a://``, ...) goes through one SparkSession, which reads the same
partitions and hands them to pandas.  Every frame gets a ``dt`` column and
is sorted by its keys, so the report never depends on file or task order.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlparse

import pandas as pd
import pyarrow.parquet as pq

from recsys_spark.errors import MissingInputError, SchemaError

TABLES = ("metrics", "lorenz", "rule_checks", "experiments", "experiment_checks", "experiment_decisions")
#: sort keys per table (columns absent from a frame are skipped)
KEYS = {
    "metrics": ["dt", "slice", "metric", "k", "aggregation"],
    "lorenz": ["dt", "slice", "x"],
    "rule_checks": ["dt", "severity", "rule"],
    "experiments": ["dt", "experiment", "variant", "metric", "k", "aggregation", "slice"],
    "experiment_checks": ["dt", "experiment", "check"],
    "experiment_decisions": ["dt", "experiment", "variant"],
    "offline_auc": ["dt", "model", "split"],
}


#: the reading contract: a day's tables are complete, and from one run, only when this file exists
SUCCESS = "summary/dt={day}/_SUCCESS"


class Reader(Protocol):
    def table(self, name: str, day: str) -> pd.DataFrame | None: ...

    def text(self, path: str) -> str | None: ...

    def exists(self, path: str) -> bool: ...


def is_local(path: str) -> bool:
    """A path pyarrow can open itself: no URL scheme (or a one-letter Windows drive), or ``file:``."""
    scheme = urlparse(path).scheme
    return len(scheme) <= 1 or scheme == "file"


def _local(path: str) -> str:
    return urlparse(path).path if path.startswith("file:") else path


class LocalReader:
    """Reads partitions with pyarrow (files starting with ``_`` or ``.`` are skipped, as Spark does)."""

    def __init__(self, root: str) -> None:
        self.root = _local(root).rstrip("/")

    def table(self, name: str, day: str) -> pd.DataFrame | None:
        path = f"{self.root}/{name}/dt={day}"
        if not os.path.isdir(path):
            return None
        return pq.read_table(path).to_pandas()

    def text(self, path: str) -> str | None:
        path = f"{self.root}/{path}"
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as handle:
            return handle.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(f"{self.root}/{path}")


class SparkReader:
    """Reads partitions through a SparkSession (for HDFS, S3 and other Hadoop file systems)."""

    def __init__(self, spark: Any, root: str) -> None:
        self.spark = spark
        self.root = root.rstrip("/")

    def table(self, name: str, day: str) -> pd.DataFrame | None:
        from recsys_spark import fs

        path = f"{self.root}/{name}/dt={day}"
        if not fs.exists(self.spark, path):
            return None
        return self.spark.read.parquet(path).toPandas()

    def text(self, path: str) -> str | None:
        from recsys_spark import fs

        full = f"{self.root}/{path}"
        return fs.read_text(self.spark, full) if fs.exists(self.spark, full) else None

    def exists(self, path: str) -> bool:
        from recsys_spark import fs

        return fs.exists(self.spark, f"{self.root}/{path}")


@dataclass
class RunData:
    """Everything the report shows, for the days ``start`` .. ``end`` (inclusive)."""

    start: dt.date
    end: dt.date
    days: list[str]  # every day of the range, present or not
    summaries: dict[str, dict[str, Any]]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # empty frame when no day has the table
    offline_auc: pd.DataFrame | None = None
    #: days with output but without ``summary/dt=D/_SUCCESS`` (a run killed in its commit, or still
    #: committing): left out, as the reading contract says, and named in the report
    skipped: list[str] = field(default_factory=list)
    #: every gate's verdict under the output root (``gate/NAME/verdict.json``; report/decisions.py)
    verdicts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def present(self) -> list[str]:
        """Days with a summary or a metrics partition."""
        metrics = self.tables.get("metrics", pd.DataFrame())
        have = set(self.summaries) | (set(metrics["dt"]) if "dt" in metrics else set())
        return [d for d in self.days if d in have]

    @property
    def missing(self) -> list[str]:
        present = set(self.present)
        return [d for d in self.days if d not in present]

    @property
    def last_day(self) -> str | None:
        present = self.present
        return present[-1] if present else None


def _sorted(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    keys = [k for k in KEYS.get(name, ["dt"]) if k in frame.columns]
    return frame.sort_values(keys, kind="mergesort", na_position="first").reset_index(drop=True)


def day_range(start: dt.date, end: dt.date) -> list[str]:
    return [(start + dt.timedelta(days=i)).isoformat() for i in range((end - start).days + 1)]


def complete(reader: Reader, day: str) -> bool:
    """Whether ``day``'s tables may be read: its ``summary/dt=D/_SUCCESS`` exists."""
    return reader.exists(SUCCESS.format(day=day))


def load(reader: Reader, start: dt.date, end: dt.date, offline_auc: pd.DataFrame | None = None) -> RunData:
    """Read the summaries and tables of every complete day of the range (missing days are simply absent;
    a day with output but no ``_SUCCESS`` is left out and listed in ``skipped``)."""
    days = day_range(start, end)
    readable = [d for d in days if complete(reader, d)]
    skipped = [d for d in days if d not in readable and any(reader.exists(f"{t}/dt={d}") for t in ("summary", *TABLES))]
    summaries: dict[str, dict[str, Any]] = {}
    for day in readable:
        text = reader.text(f"summary/dt={day}/summary.json")
        if text is not None:
            summaries[day] = json.loads(text)
    tables: dict[str, pd.DataFrame] = {}
    for name in TABLES:
        parts = []
        for day in readable:
            frame = reader.table(name, day)
            if frame is not None:
                parts.append(frame.assign(dt=day))
        tables[name] = _sorted(pd.concat(parts, ignore_index=True), name) if parts else pd.DataFrame()
    if offline_auc is not None:
        offline_auc = _sorted(offline_auc[offline_auc["dt"].isin(days)], "offline_auc")
    return RunData(start, end, days, summaries, tables, offline_auc, skipped)


OFFLINE_VALUE = "auc"  # the training pipeline's table: its AUC column
OFFLINE_COLUMNS = ("dt", "model", "split", OFFLINE_VALUE)


def read_offline_auc(path: str, spark: Any = None) -> pd.DataFrame:
    """The training pipeline's ``dt, model, split, auc`` table (Parquet file or directory, or a .csv file).

    ``dt`` is normalised to YYYY-MM-DD text; ``split`` to lower case.  A missing path or column is an
    :class:`~recsys_spark.errors.MissingInputError` or
    :class:`~recsys_spark.errors.SchemaError` naming it.
    """
    if is_local(path):
        local = _local(path)
        if not os.path.exists(local):
            raise MissingInputError(f"report.offline_auc: no such file or directory: {path}")
        frame = pd.read_csv(local) if local.endswith(".csv") else pq.read_table(local).to_pandas()
    else:
        if spark is None:
            raise MissingInputError(f"report.offline_auc: {path} is not a local path and no SparkSession was given")
        reader = spark.read.option("header", True).option("inferSchema", True)
        frame = (reader.csv(path) if path.endswith(".csv") else reader.parquet(path)).toPandas()
    missing = [c for c in OFFLINE_COLUMNS if c not in frame.columns]
    if missing:
        raise SchemaError(
            f"report.offline_auc: {path} lacks column(s) {', '.join(missing)} (expected {', '.join(OFFLINE_COLUMNS)})"
        )
    frame = frame[list(OFFLINE_COLUMNS)].copy()
    frame["dt"] = pd.to_datetime(frame["dt"]).dt.strftime("%Y-%m-%d")
    frame["split"] = frame["split"].astype(str).str.lower()
    frame["model"] = frame["model"].astype(str)
    frame[OFFLINE_VALUE] = frame[OFFLINE_VALUE].astype(float)
    return frame
