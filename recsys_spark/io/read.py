"""Read one day of input and bring it to the contract's column names and types.

Missing partitions, missing columns and types that cannot be cast are
reported as :mod:`recsys_spark.errors` exceptions naming the path and column,
before any Spark job runs.  Ids may arrive as strings or integers and become
strings; extra columns are kept only when asked for (``keep``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark.config.input import MAPPED_INPUTS, ColumnMappings, columns_for
from recsys_spark.errors import (
    EmptyInputError,
    JobError,
    MissingInputError,
    SchemaError,
    UnreadableInputError,
    root_cause,
)
from recsys_spark.io import catalog
from recsys_spark.runtime import compat, engine, fs

# the input contract lives in recsys_spark.schema; these names stay importable from here for callers
from recsys_spark.schema import POSITION, ColumnSpec

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


def read_parquet(
    spark: SparkSession, path: str, what: str, columns: ColumnMappings, source: str | None = None
) -> DataFrame:
    """Read a Parquet directory, a single Parquet file or a ``table:`` location, or raise a one-line error
    naming ``what`` and ``path``; its columns renamed by ``columns`` (the run's ``input.columns``, ``{}`` for
    files read as they are, :func:`recsys_spark.io.catalog.read_input`): the shared mapping overridden by the
    input's own, ``input.columns.<source>`` (:func:`recsys_spark.config.input.columns_for`), ``source``
    being by default the input ``what`` names (:func:`input_of`).  This is the one place an input's mapping
    is chosen.

    The partition's files are known before Spark reads them: their footers are read on the driver
    (:func:`footers`, pyarrow, no Spark job), so that a partition whose files disagree is read file
    group by file group and never misread by whichever file Spark would infer the schema from:

    * nanosecond timestamps (pandas' and pyarrow's default ``TIMESTAMP(NANOS)``, which Spark refuses)
      are read as int64 (``spark.sql.legacy.parquet.nanosAsLong``) in exactly the files and columns that
      have them, and become microsecond timestamps here (:func:`_from_nanos`): a partition mixing such
      files with microsecond ones reads every row at its time, whichever file sorts first;
    * a zero-row file contributes no row and does not decide the schema (an empty pandas frame has
      columns of Parquet's Null type, which Spark reads as int); a partition of zero-row files only is
      read as they are, or, when they have untyped columns, is an empty input naming a file;
    * a column of Parquet's Null type (every value null) is read as null;
    * files whose types differ for a column are read apart and brought to one type when that is
      exact (integers of several widths: the widest; float and double: double; timestamps with and
      without zone: with zone, a wall clock read in the session's time zone); any other difference is
      a :class:`SchemaError` naming the column, the two types and a file of each;
    * a file with two columns that differ only in case is a :class:`SchemaError` naming it (unless
      ``spark.sql.caseSensitive``).

    A Spark Connect session has no file-system API: it reads the directory as Spark does, and
    marks nanosecond columns (column metadata ``recsys_nanos``) for :func:`conform`.
    """
    mapping = columns_for(columns, source if source is not None else input_of(what))
    return catalog.read_input(spark, path, what, _read_parquet_files, mapping)  # table:NAME inputs, input.columns


def input_of(what: str) -> str | None:
    """The input (of :data:`~recsys_spark.config.input.MAPPED_INPUTS`) a reader's ``what`` names: its first
    word that is one; None when none is (the shared mapping alone applies).

    >>> input_of("next day's clicks partition"), input_of("ope.target"), input_of("previous exposures partition")
    ('clicks', 'target', 'exposures')
    """
    return next((word for word in re.findall(r"[a-z]+", what.lower()) if word in MAPPED_INPUTS), None)


def exists(spark: SparkSession, location: str) -> bool:
    """Whether an input location exists: a ``table:`` (partition) is asked of the catalog, a path of the
    file system."""
    return catalog.exists(spark, location) if catalog.is_table(location) else fs.exists(spark, location)


@dataclass(frozen=True)
class Footer:
    """What the driver knows of one Parquet file from its footer."""

    path: str
    rows: int
    columns: tuple[str, ...]  # the top-level columns, in order
    nanos: tuple[tuple[str, str], ...]  # (column, "utc" or "local") of TIMESTAMP(NANOS) columns
    untyped: tuple[str, ...]  # columns of Parquet's Null type (every value null: pandas' object columns)
    layout: tuple[tuple[str, ...], ...]  # every leaf column's path and types: files read as one share it
    arrow: Any = dataclasses.field(default=None, compare=False)  # the file's Arrow schema (pyarrow.Schema)


def footers(spark: SparkSession, files: Sequence[str], what: str) -> list[Footer]:
    """The footer of each file (local files directly, others through Hadoop's FileSystem), or an
    :class:`UnreadableInputError` naming the first file that is not Parquet.  A few files at a time:
    on an object store each footer costs a round trip or two."""
    from concurrent.futures import ThreadPoolExecutor

    if len(files) <= 1:
        return [_footer(spark, path, what) for path in files]
    with ThreadPoolExecutor(max_workers=min(8, len(files))) as pool:
        return list(pool.map(lambda path: _footer(spark, path, what), files))


def _footer(spark: SparkSession, path: str, what: str) -> Footer:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with fs.open_input(spark, path) as handle:
            meta = pq.read_metadata(handle)
    except pa.ArrowInvalid as exc:  # no magic bytes, a footer longer than the file, an empty file
        raise UnreadableInputError(f"unreadable input {what}: {path}: corrupted file or not Parquet ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - permissions, a file gone meanwhile: all name the file
        raise UnreadableInputError(f"unreadable input {what}: {path}: {root_cause(exc)}") from None
    schema = meta.schema
    leaves = [schema.column(i) for i in range(len(schema))]
    nanos, untyped = [], []
    for column in leaves:
        if "." in column.path:  # a field of a nested column
            continue
        logical = json.loads(column.logical_type.to_json())
        if logical.get("Type") == "Timestamp" and logical.get("timeUnit") == "nanoseconds":
            nanos.append((column.path, "utc" if logical.get("isAdjustedToUTC") else "local"))
        elif logical.get("Type") == "Null":
            untyped.append(column.path)
    layout = tuple(
        (c.path, c.physical_type, str(c.logical_type), str(c.converted_type), str(c.max_definition_level))
        for c in leaves
    )
    names = tuple(dict.fromkeys(c.path.split(".", 1)[0] for c in leaves))
    try:
        arrow = schema.to_arrow_schema()
    except Exception:  # noqa: BLE001 - a type Arrow cannot map: Spark infers the schema itself
        arrow = None
    return Footer(path, meta.num_rows, names, tuple(nanos), tuple(untyped), layout, arrow)


def spark_schema(footer: Footer) -> T.StructType | None:
    """The schema Spark would infer for the file of ``footer`` (nanosecond timestamps as int64, as
    ``spark.sql.legacy.parquet.nanosAsLong`` reads them), so that reading needs no inference job; None
    when a type has no exact Spark counterpart here (Spark then infers it)."""
    from pyspark.sql.pandas.types import from_arrow_type

    if footer.arrow is None or footer.untyped:
        return None
    nanos = dict(footer.nanos)
    fields = []
    try:
        for f in footer.arrow:
            kind = T.LongType() if f.name in nanos else from_arrow_type(f.type)
            fields.append(T.StructField(f.name, kind, True))
    except Exception:  # noqa: BLE001 - unsigned integers, dictionaries, ...: let Spark decide
        return None
    return T.StructType(fields)


def footer_rows(spark: SparkSession, path: str, what: str) -> int:
    """The rows of a partition from its files' footers (no Spark job): the data files under ``path``."""
    return sum(f.rows for f in footers(spark, check_layout(spark, path, what), what))


def _read_parquet_files(spark: SparkSession, path: str, what: str) -> DataFrame:
    if not fs.exists(spark, path):
        raise MissingInputError(f"missing input {what}: {path}")
    if engine.is_connect(spark):
        return _read_directory(spark, path, what)
    files = check_layout(spark, path, what)
    if not files:
        raise EmptyInputError(f"empty input {what} (no Parquet files): {path}")
    found = footers(spark, files, what)
    used = [f for f in found if f.rows] or [f for f in found if not f.untyped]
    if not used:
        others = f" (and {len(found) - 1} more such files)" if len(found) > 1 else ""
        raise EmptyInputError(
            f"empty input {what}: {found[0].path} has no rows{others}, and columns without a type "
            f"({', '.join(found[0].untyped)}: Parquet's Null type, as pandas writes an empty frame)"
        )
    sensitive = spark.conf.get("spark.sql.caseSensitive", "false") == "true"
    for footer in used:
        _check_names(footer, sensitive)
    groups: dict[tuple, list[Footer]] = {}
    for footer in used:
        groups.setdefault(footer.layout, []).append(footer)
    spark.conf.set(NANOS_AS_LONG, "true")  # only the columns that are TIMESTAMP(NANOS) change
    try:
        flat = all(f.path.rsplit("/", 1)[0].rstrip("/") == path.rstrip("/") for f in found)
        if files == [path]:  # a single file: no folder to discover partition columns in
            frames = [(used[0], _read(spark, [path], None, spark_schema(used[0])), used)]
        elif len(groups) == 1 and len(used) == len(found):
            # no partition columns below the day: the footer's schema spares Spark its inference job
            frames = [(used[0], _read(spark, [path], path, spark_schema(used[0]) if flat else None), used)]
        else:
            frames = [(g[0], _read(spark, [f.path for f in g], path), g) for g in groups.values()]
        typed = [(_typed(df, first), group) for first, df, group in frames]
        return _union(typed, path, what, sensitive)
    except AnalysisException as exc:
        raise UnreadableInputError(f"unreadable input {what}: {path}: {root_cause(exc)}") from None
    except JobError:
        raise
    except Exception as exc:  # corrupt footers surface as Java exceptions
        raise UnreadableInputError(f"unreadable input {what}: {path}: {root_cause(exc)}") from None


def _read(spark: SparkSession, paths: Sequence[str], base: str | None, schema: T.StructType | None = None) -> DataFrame:
    """The files (or the directory) ``paths``; ``base`` keeps the ``name=value`` sub-folders as columns (None:
    a single file); with ``schema`` Spark reads without inferring one (a job fewer)."""
    reader = spark.read if base is None else spark.read.option("basePath", base)
    return (reader.schema(schema) if schema is not None else reader).parquet(*paths)


def _check_names(footer: Footer, case_sensitive: bool) -> None:
    seen: dict[str, str] = {}
    for name in footer.columns:
        key = name if case_sensitive else name.lower()
        if key in seen:
            raise SchemaError(
                f"file {footer.path} has the columns {seen[key]!r} and {name!r}, which differ only in case "
                "(Spark's column names are case-insensitive): rename or drop one of them"
            )
        seen[key] = name


def _typed(df: DataFrame, footer: Footer) -> DataFrame:
    """``df`` with its TIMESTAMP(NANOS) columns (read as int64) as timestamps, and its untyped columns
    (Parquet's Null type, read as int) as nulls."""
    nanos = dict(footer.nanos)
    if not nanos and not footer.untyped:
        return df
    selected = []
    for field in df.schema.fields:
        if field.name in nanos and isinstance(field.dataType, T.LongType):
            selected.append(_from_nanos(F.col(field.name), nanos[field.name]).alias(field.name))
        elif field.name in footer.untyped:
            selected.append(F.lit(None).alias(field.name))
        else:
            selected.append(F.col(field.name))
    return df.select(*selected)


_WIDTH = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def _common_type(types: Sequence[T.DataType]) -> T.DataType | None:
    """The one type that holds every value of ``types`` exactly, or None."""
    real = [t for t in types if not isinstance(t, T.NullType)]
    if not real:
        return T.NullType()
    if all(t == real[0] for t in real):
        return real[0]
    if all(isinstance(t, _WIDTH) for t in real):
        return max(real, key=lambda t: [isinstance(t, w) for w in _WIDTH].index(True))
    if all(isinstance(t, (T.FloatType, T.DoubleType)) for t in real):
        return T.DoubleType()
    if all(isinstance(t, (T.TimestampType, T.TimestampNTZType)) for t in real):
        return T.TimestampType()
    return None


def _union(frames: Sequence[tuple[DataFrame, list[Footer]]], path: str, what: str, sensitive: bool) -> DataFrame:
    """One frame of the groups' rows: every column of any group, each of one type (:func:`_common_type`);
    a column a group lacks is null there."""
    if len(frames) == 1:
        return frames[0][0]
    columns: dict[str, list[tuple[str, T.DataType, str]]] = {}
    for df, group in frames:
        for field in df.schema.fields:
            key = field.name if sensitive else field.name.lower()
            columns.setdefault(key, []).append((field.name, field.dataType, group[0].path))
    targets = {}
    for key, seen in columns.items():
        target = _common_type([t for _, t, _ in seen])
        if target is None:
            (name, a, file_a), (_, b, file_b) = next(
                (x, y) for x in seen for y in seen if _common_type([x[1], y[1]]) is None
            )
            raise SchemaError(
                f"column {name!r} of {what} {path} has type {a.simpleString()} in {_relative(file_a, path)} "
                f"but {b.simpleString()} in {_relative(file_b, path)}: the partition's files disagree"
            )
        targets[key] = (seen[0][0], target)
    aligned = []
    for df, _group in frames:
        present = {(f.name if sensitive else f.name.lower()): f for f in df.schema.fields}
        selected = []
        for key, (name, target) in targets.items():
            have = present.get(key)
            if have is None:
                selected.append(F.lit(None).cast(target).alias(name))
            elif have.dataType != target:
                selected.append(F.col(have.name).cast(target).alias(name))
            else:
                selected.append(F.col(have.name).alias(name))
        aligned.append(df.select(*selected))
    return functools.reduce(DataFrame.union, aligned)


def _relative(file: str, directory: str) -> str:
    prefix = directory.rstrip("/") + "/"
    return file[len(prefix) :] if file.startswith(prefix) else file


def _read_directory(spark: SparkSession, path: str, what: str) -> DataFrame:
    """The directory as Spark reads it (a Connect session, which has no file-system API): nanosecond
    columns are found from Spark's refusal and every int64 column then marked for :func:`conform`."""
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


def check_layout(spark: SparkSession, path: str, what: str) -> list[str]:
    """The data files Spark would read under ``path``, by name (``[path]`` when it is a single file); refuse a
    directory that Spark would read only in part, with one line naming the sub-folder.

    Spark's partition discovery turns a sub-folder ``name=value`` into a column and then reads only the
    files under such folders: data files beside an ``hour=23/`` folder (or beside a nested ``dt=.../``
    left by a rename onto an existing partition) vanish without a trace, and files beside a folder that
    is not ``name=value`` hide that folder's files.  Allowed: data files only, or only ``name=value``
    sub-folders of one name (e.g. ``hour=00`` .. ``hour=23``), each of them obeying the same rule.
    Names starting with ``_`` or ``.`` (and files still being copied, ``._COPYING_``) are ignored, as
    Spark ignores them.  A classic session only (Spark Connect has no file-system API).
    """
    if engine.is_connect(spark):
        return []
    if not fs.is_directory(spark, path):
        return [path]
    last = path.rstrip("/").rsplit("/", 1)[-1]
    pending = [(path.rstrip("/"), last.split("=", 1)[0] if "=" in last else None)]
    data: list[str] = []
    while pending:
        directory, parent_column = pending.pop(0)
        listed = [
            (n, d)
            for n, d in fs.entries(spark, directory)
            if not n.startswith(("_", ".")) and not n.endswith("._COPYING_")
        ]
        folders = [n for n, is_dir in listed if is_dir]
        files = [n for n, is_dir in listed if not is_dir]
        if not folders:
            data.extend(f"{directory}/{n}" for n in files)
            continue
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
    return data


def _analysed(df: DataFrame) -> DataFrame:
    """``df`` once Spark has resolved it: a classic session does it when the frame is made, a Connect
    session only when asked (here its schema), so that a missing or unreadable file fails here too."""
    df.schema  # noqa: B018 - the call is the point
    return df


def empty_frame(spark: SparkSession, columns: Sequence[ColumnSpec]) -> DataFrame:
    """No rows, with the contract's columns and types (what an empty partition holds)."""
    schema = T.StructType([T.StructField(c.name, _TARGET[c.kind]) for c in columns])
    return spark.createDataFrame([], schema)


def conform(
    df: DataFrame,
    columns: Sequence[ColumnSpec],
    path: str,
    keep: Sequence[str] = (),
    typed: Sequence[str] = (),
    position_base: int = 1,
) -> DataFrame:
    """Select the contract's columns cast to their types, plus ``keep`` (as strings: slice values) and
    ``typed`` (with their own types: the columns the custom rules read; one of both is kept typed).

    ``position_base`` (``input.position_base``): the input's first position; 0 reads ``position`` p as p + 1
    (the contract's 1-based positions; a value past the integer range becomes null, a bad position).
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
        if isinstance(source, T.NullType):  # every value null (an untyped column, see read_parquet)
            selected.append(F.lit(None).cast(_TARGET[spec.kind]).alias(spec.name))
            continue
        nanos = df.schema[spec.name].metadata.get(NANOS)
        if spec.kind == "timestamp" and nanos and isinstance(source, T.LongType):
            selected.append(_from_nanos(F.col(spec.name), nanos).alias(spec.name))
            continue
        if not isinstance(source, _ACCEPTS[spec.kind]):
            raise SchemaError(
                f"column {spec.name!r} in {path} has type {source.simpleString()}, which cannot be read as {spec.kind}"
            )
        value = _cast(F.col(spec.name), source, spec.kind)
        if spec.name == POSITION and position_base != 1:
            value = F.try_add(value, F.lit(1 - position_base).cast(T.IntegerType()))
        if spec.blank_is_null:
            value = F.when(F.trim(value) != "", value)
        selected.append(value.alias(spec.name))
    contract = {s.name for s in columns}
    for name in dict.fromkeys([*keep, *typed]):
        if name not in fields:
            raise SchemaError(f"missing column {name!r} in {path} (named in the config)")
        if name not in contract:
            selected.append(F.col(name) if name in typed else F.col(name).cast("string").alias(name))
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


def unthresholded(metrics: DataFrame) -> DataFrame:
    """The rows of a ``metrics`` table without a ``threshold`` (``schema.METRICS_DDL``): the rows that
    (metric, k, aggregation, slice) names alone.  A threshold row (accuracy, precision, recall, F_alpha of
    predictions at ``offline.thresholds``) is one of several of that name, one per threshold; a partition
    written before the column has none."""
    return metrics.where(F.col("threshold").isNull()) if "threshold" in metrics.columns else metrics
