"""One way to write a wing's output: open a partition of a layout's tables, take its lock, stage the tables,
write the summary as strict JSON, commit them together, or abort and leave nothing.

Every command writes through :func:`open_wing` (a :class:`~recsys_spark.tables.Layout` and its partition's
values), inside :func:`writing` (the lock taken on entry; on any exception, SIGTERM included, the output
aborted: lock and staging released, the old partition untouched), and ends with :func:`commit_summary`.  On a
classic session the output is :class:`~recsys_spark.io.staged.DailyOutput` (the lock, the staging, the
journalled atomic commit, ``_SUCCESS`` last: :mod:`recsys_spark.io.staged` says how); on Spark Connect,
:class:`~recsys_spark.io.scratch.ScratchOutput` (plain overwrites).

**Reading contract: a partition's tables are complete and from one run if and only if its marker exists**
(:meth:`~recsys_spark.tables.Layout.marker`: ``summary/dt=D/_SUCCESS`` for a day).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession

from recsys_spark.config import OutputConfig
from recsys_spark.io.scratch import ScratchOutput
from recsys_spark.io.staged import DailyOutput
from recsys_spark.runtime import engine, fs
from recsys_spark.tables import DAILY, SUMMARY, Layout


class Output(Protocol):
    """Where the day's orchestrator writes its tables: staged, then committed together.

    :class:`DailyOutput` (a classic session: lock, staging, journalled atomic commit) and
    :class:`ScratchOutput` (Spark Connect: plain overwrites) are the two; :func:`open_output` picks.
    """

    root: str
    date: str
    tables: list[str]
    swept: list[str]
    recovered: list[str]

    def refuse_inputs_inside(self, inputs: Iterable[str]) -> None: ...

    def acquire(self) -> None: ...

    def staged_path(self, table: str) -> str: ...

    def stage(self, table: str, df: DataFrame) -> str: ...

    def stage_rows(self, table: str, rows: Iterable[Sequence[Any]], ddl: str) -> str: ...

    def stage_text(self, table: str, filename: str, text: str) -> str: ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...


def open_output(
    spark: SparkSession,
    output_root: str,
    date: str,
    settings: OutputConfig,
    partition: str | None = None,
    owned: Sequence[str] = DAILY.tables,
) -> Output:
    """The day's output: :class:`DailyOutput` on a classic session, :class:`ScratchOutput` on Spark Connect
    (which has no file-system API for the lock, the staging and the renames).  ``partition`` (default
    ``dt=D``) and ``owned``: as :class:`DailyOutput`'s (a simulated day writes ``run=NAME/dt=D``)."""
    if engine.is_connect(spark):
        return ScratchOutput(spark, output_root, date, partition, owned)
    return DailyOutput(
        spark,
        output_root,
        date,
        settings.stale_minutes,
        owned=owned,
        heartbeat_seconds=settings.heartbeat_seconds,
        partition=partition,
    )


def open_wing(spark: SparkSession, layout: Layout, output_root: str, settings: OutputConfig, **values: str) -> Output:
    """The output of one partition of ``layout``'s tables (``values``: the partition's, checked as names), its
    lock not yet taken: :func:`writing` takes it.

    ``open_wing(spark, tables.OPE, "/out", cfg.output, run="ranker_v2")`` writes
    ``/out/ope/{estimates,diagnostics,summary}/run=ranker_v2``.
    """
    partition = layout.spell(**values)
    if layout.keys == ("dt",):  # a day: named by its date, in the default dt=D partition
        return open_output(spark, layout.root_of(output_root), values["dt"], settings, None, layout.tables)
    label = f"{layout.what} {partition}"
    return open_output(spark, layout.root_of(output_root), label, settings, partition, layout.tables)


@contextlib.contextmanager
def writing(out: Output, acquire: bool = True) -> Iterator[Output]:
    """Take ``out``'s lock (unless ``acquire`` is false: the caller took it), yield it, and abort it on any
    exception (SIGTERM included) before the exception goes on: the lock and the staging released, nothing
    half-written.  The block ends with :func:`commit_summary` (or ``out.commit()``)."""
    if acquire:
        out.acquire()
    try:
        yield out
    except BaseException:
        out.abort()
        raise


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) replaced by None, in dicts and lists at any depth."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def strict_json(value: Any) -> str:
    """JSON that every parser reads: a non-finite number is ``null`` (:func:`finite`), never ``NaN``."""
    return json.dumps(finite(value), indent=2, allow_nan=False)


def commit_summary(out: Output, layout: Layout, summary: Mapping[str, Any]) -> None:
    """Stage ``summary`` as strict JSON in the layout's marker table (``summary/.../summary.json``; a gate's
    ``verdict.json``) and commit every staged table; ``_SUCCESS`` last."""
    out.stage_text(layout.marker_table, layout.summary_file, strict_json(summary))
    out.commit()


def complete_days(spark: SparkSession, output_root: str) -> list[str]:
    """The days of ``output_root`` that a reader may read (``summary/dt=D/_SUCCESS`` exists), sorted.

    The reading contract as a list, for readers that take every day at once (Spark SQL over a table's
    root); Spark's own listing hides ``_SUCCESS``, so it is listed here through the file system.
    """
    root = f"{DAILY.root_of(output_root)}/{SUMMARY}"
    if not fs.exists(spark, root):
        return []
    days = [n[len("dt=") :] for n, is_dir in fs.entries(spark, root) if is_dir and n.startswith("dt=")]
    return [d for d in sorted(days) if fs.exists(spark, DAILY.marker(output_root, dt=d))]
