"""What an offline evaluation is given (:class:`RunContext`) and what it gives back (:class:`Evaluation`), and
the one way it scores users (:func:`per_user`).

An evaluation (:mod:`~recsys_spark.offline.lists`, :mod:`~recsys_spark.offline.predictions`,
:mod:`~recsys_spark.offline.ratings`, :mod:`~recsys_spark.offline.sampled`) is a function
``RunContext -> Evaluation``; :mod:`recsys_spark.offline.run` merges the per-user frames of all of them into
one table, aggregates every spec over it in one pass, and writes the metric rows, the extra tables and the
summary (counts, notes, the evaluation's own keys).  A new evaluation is a new module with such a function,
added to :data:`recsys_spark.offline.run.EVALUATIONS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession

from recsys_spark.config import Config
from recsys_spark.offline.aggregate import Mean, Ratio
from recsys_spark.schema import USER

Spec = Mean | Ratio


@dataclass(frozen=True)
class RunContext:
    """One offline run's session, config, inputs as read (:func:`~recsys_spark.offline.inputs.read_inputs`)
    and their paths (:func:`~recsys_spark.offline.inputs.input_paths`)."""

    spark: SparkSession
    cfg: Config
    inputs: Mapping[str, DataFrame]
    paths: Mapping[str, str]

    def partitions(self, rows: int) -> int:
        """User partitions for ``rows`` input rows: twice the parallelism, at most ~200,000 rows each."""
        return max(2 * self.spark.sparkContext.defaultParallelism, math.ceil(rows / 200_000), 1)


def no_notes(counts: Mapping[str, int]) -> list[str]:
    """The default :attr:`Evaluation.late_notes`: nothing to say once the counts are known."""
    return []


@dataclass(frozen=True)
class Evaluation:
    """What one evaluation gives the run, every part optional but its name.

    ``users``: its per-user rows (``user_id`` and its own columns), full-joined on the user with the other
    evaluations' into the run's ``user_metrics``; None when it did not run (``notes`` say why).
    ``specs``: the metric rows aggregated over that merged table (:func:`offline.aggregate.aggregate`).
    ``rows``: metric rows it computed itself (``schema.METRICS_DDL`` order: catalog values, pooled AUC).
    ``aggregates``: other frames and their specs, aggregated after the merged table (per-item ratings).
    ``tables``: small extra tables written beside (``lorenz``, ``calibration``), an empty one not written.
    ``counts``, ``notes``, ``summary``: its counts, notes and keys of the run's summary.
    ``user_counts``: named aggregations over the merged table whose values join ``counts`` (one row).
    ``late_notes``: notes that need those final counts.
    ``late_tables``: small tables built from those final counts (the predictions' ``confusion``).
    """

    name: str
    users: DataFrame | None
    specs: list[Spec] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    aggregates: list[tuple[DataFrame, list[Spec]]] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    user_counts: list[Column] = field(default_factory=list)
    late_notes: Callable[[Mapping[str, int]], list[str]] = no_notes
    late_tables: Callable[[Mapping[str, int]], dict[str, pd.DataFrame]] = lambda counts: {}


def _ddl(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in columns)


def per_user(
    rows: DataFrame,
    inputs: Sequence[str],
    columns: Sequence[tuple[str, str]],
    kernel: Callable[[pd.DataFrame], pd.DataFrame],
    partitions: int,
) -> DataFrame:
    """Hash-partition ``rows`` by user; one ``kernel`` call per partition (whole users) -> per-user rows."""
    kinds = {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}
    arrow_schema = pa.schema([(name, kinds[kind]) for name, kind in columns])
    names = list(inputs)

    def score(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # on the executors
        kept = [b for b in batches if b.num_rows]
        frame = pa.Table.from_batches(kept).select(names).to_pandas() if kept else pd.DataFrame(columns=names)
        result = kernel(frame)
        yield from pa.Table.from_pandas(result, schema=arrow_schema, preserve_index=False).to_batches()

    return rows.select(*names).repartition(partitions, USER).mapInArrow(score, _ddl(columns))
