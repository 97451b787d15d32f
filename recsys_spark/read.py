"""Read one day of input and bring it to the contract's column names and types.

Missing partitions, missing columns and types that cannot be cast are
reported as :mod:`recsys_spark.errors` exceptions naming the path and column,
before any Spark job runs.  Ids may arrive as strings or integers and become
strings; extra columns are kept only when asked for (``keep``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark import catalog, compat, engine, fs
from recsys_spark.errors import EmptyInputError, MissingInputError, SchemaError, UnreadableInputError, root_cause

# the input contract lives in recsys_spark.schema; these names stay importable from here for callers
from recsys_spark.schema import ColumnSpec

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


NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"
#: column metadata key set on int64 columns of a file written with nanosecond timestamps
NANOS = "recsys_nanos"


def read_parquet(spark: SparkSession, path: str, what: str) -> DataFrame:
    """Read a Parquet directory, or raise a one-line error naming ``what`` and ``path``.

    Nanosecond timestamps (pandas' and pyarrow's default ``TIMESTAMP(NANOS)``), which Spark
    refuses ("Illegal Parquet type"), are read as int64 nanoseconds and marked (column metadata
    ``recsys_nanos``: ``utc`` or ``local``) so that :func:`conform` turns them into microsecond
    timestamps; ``spark.sql.legacy.parquet.nanosAsLong`` stays on for the scans (it changes
    nothing for files without nanoseconds).
    """
    return catalog.read_input(spark, path, what, _read_parquet_files)  # table:NAME inputs, input.columns


def exists(spark: SparkSession, location: str) -> bool:
    """Whether an input location exists: a ``table:`` (partition) is asked of the catalog, a path of the
    file system."""
    return catalog.exists(spark, location) if catalog.is_table(location) else fs.exists(spark, location)


def _read_parquet_files(spark: SparkSession, path: str, what: str) -> DataFrame:
    if not fs.exists(spark, path):
        raise MissingInputError(f"missing input {what}: {path}")
    check_layout(spark, path, what)
    try:
        spark.conf.set(NANOS_AS_LONG, "false")  # so that a nanosecond column is seen, and marked
        try:
            return _analysed(spark.read.parquet(path))
        except AnalysisException as exc:
            if "NANOS" not in str(exc):
                raise
            spark.conf.set(NANOS_AS_LONG, "true")
            df = _analysed(spark.read.parquet(path))
            zone = "utc" if "NANOS,true" in str(exc).replace(" ", "") else "local"
            return df.select(
                *[
                    F.col(f.name).alias(f.name, metadata={NANOS: zone})
                    if isinstance(f.dataType, T.LongType)
                    else F.col(f.name)
                    for f in df.schema.fields
                ]
            )
        finally:
            spark.conf.set(NANOS_AS_LONG, "true")
    except AnalysisException as exc:
        if "UNABLE_TO_INFER_SCHEMA" in str(exc):
            raise EmptyInputError(f"empty input {what} (no Parquet files): {path}") from None
        raise UnreadableInputError(f"unreadable input {what}: {path}: {root_cause(exc)}") from None
    except Exception as exc:  # corrupt footers surface as Java exceptions
        raise UnreadableInputError(f"unreadable input {what}: {path}: {root_cause(exc)}") from None


def check_layout(spark: SparkSession, path: str, what: str) -> None:
    """Refuse a directory that Spark would read only in part, with one line naming the sub-folder.

    Spark's partition discovery turns a sub-folder ``name=value`` into a column and then reads only the
    files under such folders: data files beside an ``hour=23/`` folder (or beside a nested ``dt=.../``
    left by a rename onto an existing partition) vanish without a trace, and files beside a folder that
    is not ``name=value`` hide that folder's files.  Allowed: data files only, or only ``name=value``
    sub-folders of one name (e.g. ``hour=00`` .. ``hour=23``), each of them obeying the same rule.
    Names starting with ``_`` or ``.`` are ignored, as Spark ignores them.  A classic session only
    (Spark Connect has no file-system API).
    """
    if engine.is_connect(spark):
        return
    last = path.rstrip("/").rsplit("/", 1)[-1]
    pending = [(path.rstrip("/"), last.split("=", 1)[0] if "=" in last else None)]
    while pending:
        directory, parent_column = pending.pop()
        listed = [(n, d) for n, d in fs.entries(spark, directory) if not n.startswith(("_", "."))]
        folders = [n for n, is_dir in listed if is_dir]
        if not folders:
            continue
        files = [n for n, is_dir in listed if not is_dir]
        plain = [n for n in folders if "=" not in n]
        names = {n.split("=", 1)[0] for n in folders if "=" in n}
        why = None
        if files:
            why = f"holds data files ({files[0]}, ...) beside the sub-folder {folders[0]}/"
        elif plain:
            why = f"holds a sub-folder that is not name=value ({plain[0]}/)"
        elif len(names) > 1:
            why = f"holds sub-folders of several partition columns ({', '.join(sorted(names))})"
        elif names == {parent_column}:
            why = f"holds a nested {folders[0]}/ (left by a rename onto an existing partition?)"
        if why:
            raise UnreadableInputError(
                f"unreadable input {what}: {directory} {why}: Spark would read only part of it; keep either "
                "data files or name=value sub-folders of one column (docs/operations.md, input layout)"
            )
        (column,) = names
        pending.extend((f"{directory}/{n}", column) for n in folders)


def _analysed(df: DataFrame) -> DataFrame:
    """``df`` once Spark has resolved it: a classic session does it when the frame is made, a Connect
    session only when asked (here its schema), so that a missing or unreadable file fails here too."""
    df.schema  # noqa: B018 - the call is the point
    return df


def empty_frame(spark: SparkSession, columns: Sequence[ColumnSpec]) -> DataFrame:
    """No rows, with the contract's columns and types (what an empty partition holds)."""
    schema = T.StructType([T.StructField(c.name, _TARGET[c.kind]) for c in columns])
    return spark.createDataFrame([], schema)


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
        nanos = df.schema[spec.name].metadata.get(NANOS)
        if spec.kind == "timestamp" and nanos and isinstance(source, T.LongType):
            selected.append(_from_nanos(F.col(spec.name), nanos).alias(spec.name))
            continue
        if not isinstance(source, _ACCEPTS[spec.kind]):
            raise SchemaError(
                f"column {spec.name!r} in {path} has type {source.simpleString()}, which cannot be read as {spec.kind}"
            )
        value = _cast(F.col(spec.name), source, spec.kind)
        if spec.blank_is_null:
            value = F.when(F.trim(value) != "", value)
        selected.append(value.alias(spec.name))
    for name in keep:
        if name not in fields:
            raise SchemaError(f"missing column {name!r} in {path} (named in the config)")
        if name not in {s.name for s in columns}:
            selected.append(F.col(name).cast("string").alias(name))
    return df.select(*selected)


def _from_nanos(col: Column, zone: str) -> Column:
    """int64 nanoseconds since the epoch -> timestamp (microseconds; the last three digits are dropped,
    rounding down).  ``local`` (Parquet's isAdjustedToUTC=false, pandas' naive timestamps) is a wall
    clock, read in the session's time zone like any timestamp without zone."""
    micros = F.timestamp_micros(F.floor(col / 1000).cast("long"))
    return micros if zone == "utc" else F.to_utc_timestamp(micros, F.current_timezone())


def _cast(col: Column, source: T.DataType, kind: str) -> Column:
    if kind == "timestamp" and isinstance(source, T.StringType):
        return F.try_to_timestamp(col)
    if kind == "int" and not isinstance(source, _INTEGRAL):
        # 2.0 is 2; 2.5, NaN, inf and 1e20 become null (then bad_position), never an overflow under ANSI:
        # fmod instead of floor (floor(inf) overflows a bigint), the cast guarded by the range
        value = col.cast(T.DoubleType())
        whole = ~F.isnan(value) & (F.abs(value) < 2.0**31) & ((value % 1) == 0)
        return F.when(whole, value.cast(T.IntegerType()))
    if kind == "int" and not isinstance(source, T.IntegerType):
        return compat.try_cast(col, T.IntegerType())
    return col.cast(_TARGET[kind])
