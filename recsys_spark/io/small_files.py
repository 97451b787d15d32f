"""The small tables the driver holds (metrics, Lorenz points, rule checks, experiment results), written as one
Parquet file each by pyarrow through Hadoop's file-system API: a Spark job per table is mostly fixed cost
(docs/performance.md)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, DataType, StructType

from recsys_spark.runtime import fs

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
