"""Idempotent daily output: stage every table, then move them into place together.

Each run writes its tables under ``{output_root}/_staging/{run_id}/``.  Only
when all of them are written does :meth:`DailyOutput.commit` replace, table
by table, ``{output_root}/{table}/dt={date}`` (the old partition is moved aside
first and deleted at the end); the ``summary`` table goes last and ends with a
``_SUCCESS`` file.  A failure before the commit leaves the previous output
untouched; other dates are never touched.

**Reading contract: a date's tables are complete and from one run if and only
if ``summary/dt=D/_SUCCESS`` exists; read a date only then** (it is removed
first when a rerun starts to commit, and written last).

Concurrency and faults:

* one run per (output root, date): :meth:`DailyOutput.acquire` creates
  ``_locks/dt=D.lock`` atomically (run id, host, pid, start time) before any
  computation -- which also proves the output root is writable -- and a second
  run of the date fails with :class:`~recsys_spark.errors.ConcurrentRunError`;
  a lock older than ``output.stale_minutes``, or held by a dead process on
  this host, is taken over;
* the rename into place refuses an existing target (Hadoop would nest it);
* staging directories of dead runs (older than ``output.stale_minutes``, and
  not a live lock's run) are swept by the next run of the output root;
* a rerun replaces every table the date has, including tables it no longer
  writes (e.g. an old ``rejected/dt=D`` after ``write_rejected`` is turned off).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, DataType, StructType

from recsys_spark import fs
from recsys_spark.errors import ConcurrentRunError, OutputError, root_cause

SUMMARY = "summary"
STAGING = "_staging"
LOCKS = "_locks"


class DailyOutput:
    def __init__(self, spark: SparkSession, output_root: str, date: str, stale_minutes: float = 240.0) -> None:
        self.spark = spark
        self.root = output_root.rstrip("/")
        self.date = date
        self.run_id = f"{date}-{uuid.uuid4().hex[:8]}"
        self.run_dir = f"{self.root}/{STAGING}/{self.run_id}"
        self.lock = f"{self.root}/{LOCKS}/dt={date}.lock"
        self.stale_seconds = stale_minutes * 60.0
        self.tables: list[str] = []
        self.locked = False
        self.created_root = False
        self.swept: list[str] = []

    def final_path(self, table: str) -> str:
        return f"{self.root}/{table}/dt={self.date}"

    def staged_path(self, table: str) -> str:
        return f"{self.run_dir}/{table}/dt={self.date}"

    # --- one run per date ----------------------------------------------------------------------
    def acquire(self) -> None:
        """Take the date's lock (proving the output root is writable), then sweep dead runs' staging."""
        try:
            self.created_root = not fs.exists(self.spark, self.root)
            fs.mkdirs(self.spark, f"{self.root}/{LOCKS}")
            for _ in range(2):
                if fs.create_new(self.spark, self.lock, self._lock_text()):
                    self.locked = True
                    break
                holder = self._holder()
                if holder is not None and not self._stale(holder):
                    raise ConcurrentRunError(
                        f"{self.date}: another run ({holder.get('run_id')}, pid {holder.get('pid')} on "
                        f"{holder.get('host')}, started {holder.get('started')}) is writing this date to "
                        f"{self.root}; wait for it, or delete {self.lock} if that run is dead"
                    )
                fs.delete(self.spark, self.lock)  # a dead run's lock (or unreadable): take it over
            else:
                raise ConcurrentRunError(
                    f"{self.date}: could not take the lock {self.lock} (another run took it at the same moment)"
                )
        except ConcurrentRunError:
            self._tidy_root()
            raise
        except Exception as exc:  # noqa: BLE001 - permissions, Mkdirs failed, read-only file system
            self._tidy_root()
            raise OutputError(f"output root {self.root} is not writable: {root_cause(exc)}") from None
        self.swept = self.sweep_staging()

    def _lock_text(self) -> str:
        now = time.time()
        return json.dumps(
            {
                "run_id": self.run_id,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started": dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat(),
                "epoch": now,
            }
        )

    def _holder(self) -> dict | None:
        try:
            return json.loads(fs.read_small(self.spark, self.lock))
        except Exception:  # noqa: BLE001 - vanished or half-written: treated as stale after its age
            try:
                return None if fs.age_seconds(self.spark, self.lock) > self.stale_seconds else {}
            except Exception:  # noqa: BLE001
                return None

    def _stale(self, holder: dict) -> bool:
        """A lock is stale when older than output.stale_minutes, or its process is gone (same host)."""
        if not holder:
            return False
        if time.time() - float(holder.get("epoch", 0)) > self.stale_seconds:
            return True
        if holder.get("host") == socket.gethostname():
            try:
                os.kill(int(holder["pid"]), 0)
            except ProcessLookupError:
                return True
            except (PermissionError, KeyError, ValueError, TypeError):
                return False
        return False

    def _live_runs(self) -> set[str]:
        locks = f"{self.root}/{LOCKS}"
        live: set[str] = set()
        if not fs.exists(self.spark, locks):
            return live
        for name in fs.children(self.spark, locks):
            try:
                holder = json.loads(fs.read_small(self.spark, f"{locks}/{name}"))
            except Exception:  # noqa: BLE001
                continue
            if not self._stale(holder):
                live.add(str(holder.get("run_id")))
        return live

    def sweep_staging(self) -> list[str]:
        """Delete staging directories left by dead runs: older than output.stale_minutes and not the run
        of a live lock.  Returns their names."""
        staging = f"{self.root}/{STAGING}"
        if not fs.exists(self.spark, staging):
            return []
        live = self._live_runs() | {self.run_id}
        swept = []
        for name in fs.children(self.spark, staging):
            path = f"{staging}/{name}"
            if name in live or fs.age_seconds(self.spark, path) <= self.stale_seconds:
                continue
            fs.delete(self.spark, path)
            swept.append(name)
        return swept

    # --- staging and commit --------------------------------------------------------------------
    def stage(self, table: str, df: DataFrame) -> str:
        """Write ``df`` as Parquet into the staging area; return the staged path."""
        path = self.staged_path(table)
        df.write.mode("overwrite").parquet(path)
        self.tables.append(table)
        return path

    def stage_rows(self, table: str, rows: Iterable[Sequence[Any]], ddl: str) -> str:
        """Stage a small table the driver holds (tuples in the columns of the Spark DDL ``ddl``) as one
        Parquet file, written here rather than by a Spark job (:func:`small_parquet`); return the path."""
        path = self.staged_path(table)
        write_small_table(self.spark, path, rows, ddl)
        self.tables.append(table)
        return path

    def stage_text(self, table: str, filename: str, text: str) -> str:
        path = self.staged_path(table)
        fs.write_text(self.spark, f"{path}/{filename}", text)
        self.tables.append(table)
        return path

    def existing_tables(self) -> list[str]:
        """Tables of the output root that hold this date (a partition ``dt=D``)."""
        if not fs.exists(self.spark, self.root):
            return []
        return [
            name
            for name in fs.children(self.spark, self.root)
            if not name.startswith(("_", ".")) and fs.exists(self.spark, self.final_path(name))
        ]

    def commit(self) -> None:
        """Replace this date's partition of every table the date has: the staged ones, and any other
        table that still holds the date from an earlier run (removed); summary last, then _SUCCESS."""
        trash = f"{self.run_dir}/_replaced"
        staged = [t for t in self.tables if t != SUMMARY]
        leftover = [t for t in self.existing_tables() if t not in self.tables]
        # the summary's marker goes first, so no reader trusts a day while it changes
        fs.delete(self.spark, f"{self.final_path(SUMMARY)}/_SUCCESS")
        for table in leftover:
            fs.rename(self.spark, self.final_path(table), f"{trash}/{table}")
        for table in staged + [t for t in self.tables if t == SUMMARY]:
            final = self.final_path(table)
            if fs.exists(self.spark, final):
                fs.rename(self.spark, final, f"{trash}/{table}")
            fs.rename(self.spark, self.staged_path(table), final)
        if SUMMARY in self.tables:
            fs.write_text(self.spark, f"{self.final_path(SUMMARY)}/_SUCCESS", "")
        self.abort()

    def abort(self) -> None:
        """Forget everything staged by this run and release the date's lock."""
        fs.delete(self.spark, self.run_dir)
        staging = f"{self.root}/{STAGING}"
        if fs.exists(self.spark, staging) and not fs.children(self.spark, staging):
            fs.delete(self.spark, staging)
        if self.locked:
            fs.delete(self.spark, self.lock)
            self.locked = False
        self._tidy_root()

    def _tidy_root(self) -> None:
        """Remove the empty lock directory, and the output root when this run created it and left it empty."""
        locks = f"{self.root}/{LOCKS}"
        if fs.exists(self.spark, locks) and not fs.children(self.spark, locks):
            fs.delete(self.spark, locks)
        if self.created_root and fs.exists(self.spark, self.root) and not fs.children(self.spark, self.root):
            fs.delete(self.spark, self.root)


_ARROW_TYPES = {
    "string": pa.string(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
}


def arrow_type(spark_type: DataType) -> pa.DataType:
    """The Arrow type Spark's Parquet writer would give a column of ``spark_type`` (the types of the small tables)."""
    if isinstance(spark_type, ArrayType):
        return pa.list_(arrow_type(spark_type.elementType))
    name = spark_type.simpleString()
    if name not in _ARROW_TYPES:
        raise ValueError(f"no Arrow type for a small table's column of type {name}")
    return _ARROW_TYPES[name]


def write_small_table(spark: SparkSession, path: str, rows: Iterable[Sequence[Any]], ddl: str) -> None:
    """Replace the directory ``path`` with one Parquet file of ``rows`` (:func:`small_parquet`), no Spark job."""
    data = small_parquet(rows, spark.createDataFrame([], ddl).schema)  # the DDL parsed by Spark; no job runs
    fs.delete(spark, path)  # only once the rows are known to convert
    fs.write_bytes(spark, f"{path}/part-00000-{uuid.uuid4()}.snappy.parquet", data)


def small_parquet(rows: Iterable[Sequence[Any]], schema: StructType) -> bytes:
    """The bytes of one Parquet file (snappy, as Spark writes) of ``rows``, tuples in ``schema``'s order.

    For the tables of a few hundred rows the driver computes (metrics, Lorenz points, rule checks,
    experiment results), where a Spark job per table is mostly fixed cost (docs/performance.md).  Spark
    reads the file back with ``schema``'s types; NaN stays NaN, None is null.
    """
    columns = list(zip(*rows, strict=True)) or [() for _ in schema.fields]
    table = pa.Table.from_arrays(
        [pa.array(list(values), type=arrow_type(f.dataType)) for values, f in zip(columns, schema.fields, strict=True)],
        schema=pa.schema([pa.field(f.name, arrow_type(f.dataType)) for f in schema.fields]),
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    return sink.getvalue().to_pybytes()
