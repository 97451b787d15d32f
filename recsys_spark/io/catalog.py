"""Catalog tables in and out: ``table:db.name`` inputs, date-format path templates, mapped input
columns, and the outputs published as partitioned tables (docs/catalog.md).

Inputs
  An input setting is either a path template or ``table:<name>``, optionally with an explicit
  partition spec ``table:<name>[col=value]`` (``{date}`` placeholders allowed in the value)::

      input.exposures = "{input_root}/exposures/ds={date:%Y%m%d}"   # a path, date formatted
      input.exposures = "table:logs.rec_exposures"                  # a table
      input.items     = "table:dim.items[dt={date}]"                # a snapshot table, one partition

  The exposures and clicks tables get the partition filter ``input.partition_column =
  <the day in input.partition_format>`` (default ``dt = '2026-11-20'``) unless they name one;
  the items and users tables are read whole unless they name one. The value is compared after
  a cast to the column's own type, so a ``DATE`` column, a string ``'20261120'`` or an integer
  ``20261120`` all work, and Spark pushes the filter down as a partition filter (Hive, Iceberg
  and Delta alike: the read goes through ``spark.table`` and the session's catalog).

  A resolved input is a string (``table:logs.rec_exposures[dt=2026-11-20]``), so it travels
  wherever a path did; :func:`exists` and :func:`read_table` take it.

  ``input.columns`` maps the contract's column names to the input's (``user_id = "uid"``):
  every input read through :func:`rename_columns` is renamed before its columns are checked.

Outputs
  With ``output.catalog = "eval_db"`` (or ``"my_catalog.eval_db"``) every table the run wrote
  under ``--output-root`` is published, after the path commit, as ``eval_db.<table>``
  partitioned by ``dt DATE``: :func:`publish`. Only the day's partition is replaced (dynamic
  partition overwrite; ``writeTo(...).overwritePartitions()`` for Iceberg and Delta tables), a
  table is created on the first run (:func:`create_table_ddl`), and every row carries
  ``run_id``, ``config_hash``, ``recsys_spark_version`` and, beside ``slice``, ``slice_name``
  and ``slice_value``. ``summary`` becomes a one-row table (:data:`SUMMARY_SCHEMA`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark._version import __version__
from recsys_spark.config import OutputConfig
from recsys_spark.config.templates import TABLE_SPEC, is_table
from recsys_spark.errors import ConfigError, EmptyInputError, MissingInputError, SchemaError
from recsys_spark.runtime import log

PARTITION = "dt"  # the partition column of every output table
SLICE = "slice"
#: columns every published row carries (besides dt)
RUN_COLUMNS = ("run_id", "config_hash", "recsys_spark_version")


# --- inputs -----------------------------------------------------------------------------------
def _spec(location: str) -> tuple[str, str | None, str | None]:
    match = TABLE_SPEC.match(location)
    if not match:
        raise ConfigError(f"expected table:NAME or table:NAME[column=value], got {location!r}")
    return match["name"], match["column"], match["value"]


def _partition_filter(df: DataFrame, location: str, column: str, value: str) -> Column:
    fields = {f.name.lower(): f for f in df.schema.fields}
    if column.lower() not in fields:
        raise SchemaError(f"missing partition column {column!r} in {location} (input.partition_column)")
    source = fields[column.lower()]
    return F.col(source.name) == F.lit(value).cast(source.dataType)


def _table(spark: SparkSession, name: str, location: str, what: str) -> DataFrame:
    from pyspark.errors import AnalysisException

    try:
        return spark.table(name)
    except AnalysisException as exc:
        text = str(exc)
        if "TABLE_OR_VIEW_NOT_FOUND" in text or "not found" in text.lower() or "SCHEMA_NOT_FOUND" in text:
            raise MissingInputError(f"missing input {what}: {location} (no such table)") from None
        raise


def table_frame(spark: SparkSession, location: str, what: str = "input") -> DataFrame:
    """The rows of a ``table:`` location: ``spark.table`` with its partition filter (pushed down)."""
    name, column, value = _spec(location)
    df = _table(spark, name, location, what)
    if column is not None:
        df = df.where(_partition_filter(df, location, column, value or ""))
    return df


def exists(spark: SparkSession, location: str) -> bool:
    """Does the table exist and, with a partition spec, hold at least one row in it? (one tiny job)"""
    name, column, _value = _spec(location)
    if not spark.catalog.tableExists(name):
        return False
    if column is None:
        return True
    return bool(table_frame(spark, location).limit(1).count())


def read_input(spark: SparkSession, location: str, what: str, read_files, columns: Mapping[str, str]) -> DataFrame:
    """Any input: a ``table:`` location or files (``read_files(spark, location, what)``), its columns
    renamed by ``columns`` (the run's ``input.columns``, handed down by its orchestrator; ``{}``: as they are,
    :func:`rename_columns`)."""
    df = read_table(spark, location, what) if is_table(location) else read_files(spark, location, what)
    return rename_columns(df, columns)


def read_table(spark: SparkSession, location: str, what: str) -> DataFrame:
    """Read a ``table:`` location, or raise the same one-line errors as a missing/empty path."""
    df = table_frame(spark, location, what)
    name, column, _ = _spec(location)
    if column is not None and not df.limit(1).count():
        if not spark.table(name).limit(1).count():
            raise EmptyInputError(f"empty input {what} (table has no rows): {location}")
        raise MissingInputError(f"missing input {what}: {location} (no rows in that partition)")
    return df


def rename_columns(df: DataFrame, columns: Mapping[str, str]) -> DataFrame:
    """Rename the input's columns to the contract's (``columns``: contract name -> input name).

    Applies to every input read (exposures, clicks, items, users, previous days): an input
    without the mapped column keeps its own (the items table has no ``uid``), and a contract
    column still missing then is reported by :func:`recsys_spark.io.read.conform`. A contract
    column the input also has under its own name is dropped first (the mapping wins).
    """
    if not columns:
        return df
    present = {c.lower(): c for c in df.columns}
    out = df
    for contract, source in columns.items():
        if source.lower() not in present:
            continue
        if contract.lower() in present and contract.lower() != source.lower():
            out = out.drop(present[contract.lower()])
        out = out.withColumnRenamed(present[source.lower()], contract)
    return out


# --- outputs ----------------------------------------------------------------------------------
#: the one-row ``summary`` table (besides the run columns and dt)
SUMMARY_SCHEMA = T.StructType(
    [
        T.StructField("status", T.StringType()),
        T.StructField("hard_rule_violated", T.BooleanType()),
        T.StructField("failed_rules", T.ArrayType(T.StringType())),
        T.StructField("headline", T.MapType(T.StringType(), T.DoubleType())),
        T.StructField("exposure_rows", T.LongType()),
        T.StructField("click_rows", T.LongType()),
        T.StructField("summary_json", T.StringType()),
    ]
)


def split_slice(slice_col: Column) -> tuple[Column, Column]:
    """``"all"`` -> (all, all); ``"platform=ios"`` -> (platform, ios); split at the first ``=``."""
    has_eq = F.instr(slice_col, "=") > 0
    name = F.when(has_eq, F.substring_index(slice_col, "=", 1)).otherwise(slice_col)
    value = F.when(has_eq, F.expr(f"substr({SLICE}, instr({SLICE}, '=') + 1)")).otherwise(slice_col)
    return name, value


def enrich(df: DataFrame, day: str, run_id: str, config_hash: str, version: str) -> DataFrame:
    """Add the run columns, slice_name/slice_value (when there is a slice) and dt DATE last."""
    out = df.drop(PARTITION) if PARTITION in df.columns else df
    if SLICE in out.columns:
        name, value = split_slice(F.col(SLICE))
        out = out.withColumn("slice_name", name).withColumn("slice_value", value)
    return (
        out.withColumn("run_id", F.lit(run_id))
        .withColumn("config_hash", F.lit(config_hash))
        .withColumn("recsys_spark_version", F.lit(version))
        .withColumn(PARTITION, F.lit(day).cast(T.DateType()))
    )


def summary_frame(spark: SparkSession, summary: Mapping[str, Any]) -> DataFrame:
    """The run's summary as one row of :data:`SUMMARY_SCHEMA`."""
    rules = summary.get("rules", [])
    hard = any(r.get("severity") == "hard" and not r.get("passed") for r in rules)
    headline = {k: (None if v is None else float(v)) for k, v in summary.get("headline", {}).items()}
    rows = summary.get("input_rows", {})
    row = (
        summary.get("status"),
        hard or summary.get("status") == "hard_rule_violated",
        [r["rule"] for r in rules if not r.get("passed")],
        headline,
        rows.get("exposures"),
        rows.get("clicks"),
        json.dumps(summary, sort_keys=False, default=str),
    )
    return spark.createDataFrame([row], SUMMARY_SCHEMA)


def quote(name: str) -> str:
    """``a.b`` -> ```a`.`b```."""
    return ".".join(f"`{part.strip('`')}`" for part in name.split("."))


def create_table_ddl(table: str, schema: T.StructType, table_format: str = "parquet") -> str:
    """``CREATE TABLE IF NOT EXISTS`` for a published table: the frame's columns, partitioned by dt.

    >>> schema = T.StructType([T.StructField("metric", T.StringType()), T.StructField("dt", T.DateType())])
    >>> print(create_table_ddl("eval_db.metrics", schema))
    CREATE TABLE IF NOT EXISTS `eval_db`.`metrics` (
      `metric` STRING,
      `dt` DATE)
    USING parquet
    PARTITIONED BY (`dt`)
    """
    columns = ",\n".join(f"  `{f.name}` {_ddl_type(f.dataType)}" for f in schema.fields)
    return (
        f"CREATE TABLE IF NOT EXISTS {quote(table)} (\n{columns})\nUSING {table_format}\nPARTITIONED BY (`{PARTITION}`)"
    )


def _ddl_type(data_type: T.DataType) -> str:
    """``bigint`` -> ``BIGINT``; struct types keep their field names' case."""
    text = data_type.simpleString()
    return text if "struct<" in text else text.upper()


def _namespace(catalog: str) -> str:
    return f"CREATE NAMESPACE IF NOT EXISTS {quote(catalog)}"


def _align(spark: SparkSession, table: str, df: DataFrame) -> DataFrame:
    """Add the frame's new columns to the table (ALTER TABLE), select the table's columns in order."""
    existing = spark.table(table).schema
    names = {f.name.lower() for f in existing.fields}
    new = [f for f in df.schema.fields if f.name.lower() not in names]
    if new:
        spark.sql(
            f"ALTER TABLE {quote(table)} ADD COLUMNS ("
            + ", ".join(f"`{f.name}` {_ddl_type(f.dataType)}" for f in new)
            + ")"
        )
        existing = spark.table(table).schema
    have = {c.lower(): c for c in df.columns}
    return df.select(
        *[
            (F.col(have[f.name.lower()]) if f.name.lower() in have else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in existing.fields
        ]
    )


def write_partition(
    spark: SparkSession, table: str, df: DataFrame, table_format: str = "parquet", mode: str = "auto"
) -> None:
    """Replace the partitions of ``table`` that ``df`` holds (one day), creating the table first.

    ``mode``: ``insert_overwrite`` (``INSERT OVERWRITE`` with dynamic partition overwrite: Hive
    and file-source tables of the session catalog), ``overwrite_partitions``
    (``writeTo(table).overwritePartitions()``: DataSource V2 tables such as Iceberg and Delta),
    or ``auto``: the latter for ``iceberg``/``delta`` table formats, the former otherwise.
    """
    spark.sql(create_table_ddl(table, df.schema, table_format))
    aligned = _align(spark, table, df)
    if mode == "overwrite_partitions" or (mode == "auto" and table_format.lower() in ("iceberg", "delta")):
        aligned.writeTo(table).overwritePartitions()
        return
    key = "spark.sql.sources.partitionOverwriteMode"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, "dynamic")
    try:
        spark.sql("SET hive.exec.dynamic.partition.mode=nonstrict")  # Hive SerDe tables created by others
        aligned.write.insertInto(table, overwrite=True)
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def publish(
    spark: SparkSession,
    settings: OutputConfig,
    output_root: str,
    day: str,
    tables: Sequence[str],
    summary: Mapping[str, Any],
    run_id: str,
    config_hash: str,
) -> list[str]:
    """Publish the day's committed ``tables`` as ``{settings.catalog}.{table}`` partitions; summary last.

    Reads each table back from ``{output_root}/{table}/dt={day}`` (already committed, so the files are the
    run's final result), adds the run columns and replaces that day's partition.  Only the tables the run
    wrote are published (never another folder under the output root).  Returns the table names written.
    The summary table goes last: a reader that sees the day in ``{catalog}.summary`` sees every other
    table's partition of that day.
    """
    catalog, table_format, mode = settings.catalog, settings.table_format, settings.write_mode
    spark.sql(_namespace(catalog))
    root = output_root.rstrip("/")
    written = []
    for table in sorted(t for t in set(tables) if t != "summary"):
        frame = spark.read.parquet(f"{root}/{table}/{PARTITION}={day}")
        name = f"{catalog}.{table}"
        with log.stage(f"publish_{table}", {}, table=name, date=day):
            write_partition(spark, name, enrich(frame, day, run_id, config_hash, __version__), table_format, mode)
        written.append(name)
    name = f"{catalog}.summary"
    with log.stage("publish_summary", {}, table=name, date=day):
        write_partition(
            spark,
            name,
            enrich(summary_frame(spark, summary), day, run_id, config_hash, __version__),
            table_format,
            mode,
        )
    return [*written, name]
