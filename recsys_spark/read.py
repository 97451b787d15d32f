"""Read one day of input and bring it to the contract's column names and types.

Missing partitions, missing columns and types that cannot be cast are
reported as :mod:`recsys_spark.errors` exceptions naming the path and column,
before any Spark job runs.  Ids may arrive as strings or integers and become
strings; extra columns are kept only when asked for (``keep``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark import compat, fs
from recsys_spark.errors import EmptyInputError, MissingInputError, SchemaError, UnreadableInputError
from recsys_spark.schema import (
    CATEGORY,
    EVENT,
    ITEM,
    POSITION,
    REQUEST,
    SCORE,
    SESSION,
    TS,
    USER,
)


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    kind: str  # "id", "int", "double", "timestamp", "string"
    required: bool = True


EXPOSURE_COLUMNS = (
    ColumnSpec(USER, "id"),
    ColumnSpec(SESSION, "id"),
    ColumnSpec(REQUEST, "id"),
    ColumnSpec(ITEM, "id"),
    ColumnSpec(POSITION, "int"),
    ColumnSpec(SCORE, "double", required=False),
    ColumnSpec(TS, "timestamp"),
)
CLICK_COLUMNS = (
    ColumnSpec(USER, "id"),
    ColumnSpec(SESSION, "id"),
    ColumnSpec(REQUEST, "id"),
    ColumnSpec(ITEM, "id"),
    ColumnSpec(TS, "timestamp"),
    ColumnSpec(EVENT, "string", required=False),
)
ITEM_COLUMNS = (ColumnSpec(ITEM, "id"), ColumnSpec(CATEGORY, "string"))

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_NUMERIC = _INTEGRAL + (T.FloatType, T.DoubleType, T.DecimalType)
_ACCEPTS = {
    "id": (T.StringType,) + _INTEGRAL,
    "int": _NUMERIC,
    "double": _NUMERIC,
    "timestamp": (T.TimestampType, T.TimestampNTZType, T.DateType, T.StringType),
    "string": (T.StringType,) + _INTEGRAL,
}
_TARGET = {
    "id": T.StringType(),
    "int": T.IntegerType(),
    "double": T.DoubleType(),
    "timestamp": T.TimestampType(),
    "string": T.StringType(),
}


def read_parquet(spark: SparkSession, path: str, what: str) -> DataFrame:
    """Read a Parquet directory, or raise a one-line error naming ``what`` and ``path``."""
    # [catalog hook, issue 17] table:NAME[col=value] inputs and input.columns (recsys_spark/catalog.py)
    from recsys_spark import catalog
    return catalog.read_input(spark, path, what, _read_parquet_files)


def _read_parquet_files(spark: SparkSession, path: str, what: str) -> DataFrame:
    if not fs.exists(spark, path):
        raise MissingInputError(f"missing input {what}: {path}")
    try:
        return spark.read.parquet(path)
    except AnalysisException as exc:
        if "UNABLE_TO_INFER_SCHEMA" in str(exc):
            raise EmptyInputError(f"empty input {what} (no Parquet files): {path}") from None
        raise UnreadableInputError(f"unreadable input {what}: {path}: {_first_line(exc)}") from None
    except Exception as exc:  # corrupt footers surface as Java exceptions
        raise UnreadableInputError(f"unreadable input {what}: {path}: {_first_line(exc)}") from None


def conform(df: DataFrame, columns: Sequence[ColumnSpec], path: str, keep: Sequence[str] = ()) -> DataFrame:
    """Select the contract's columns cast to their types, plus ``keep``.

    A missing optional column is left out (callers decide its default).
    """
    fields = {f.name: f.dataType for f in df.schema.fields}
    selected: list[Column] = []
    for spec in columns:
        if spec.name not in fields:
            if spec.required:
                raise SchemaError(f"missing column {spec.name!r} in {path}")
            continue
        source = fields[spec.name]
        if not isinstance(source, _ACCEPTS[spec.kind]):
            raise SchemaError(
                f"column {spec.name!r} in {path} has type {source.simpleString()}, "
                f"which cannot be read as {spec.kind}"
            )
        selected.append(_cast(F.col(spec.name), source, spec.kind).alias(spec.name))
    for name in keep:
        if name not in fields:
            raise SchemaError(f"missing column {name!r} in {path} (named in the config)")
        if name not in {s.name for s in columns}:
            selected.append(F.col(name).cast("string").alias(name))
    return df.select(*selected)


def _cast(col: Column, source: T.DataType, kind: str) -> Column:
    if kind == "timestamp" and isinstance(source, T.StringType):
        return F.try_to_timestamp(col)
    # [compat hook, issue 17] compat.try_cast: Column.try_cast is Spark 4 only
    if kind == "int" and not isinstance(source, _INTEGRAL):  # 2.0 is 2; 2.5 becomes null
        return F.when(col == F.floor(col), compat.try_cast(col, T.IntegerType()))
    if kind == "int" and not isinstance(source, T.IntegerType):
        return compat.try_cast(col, T.IntegerType())
    return col.cast(_TARGET[kind])


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
