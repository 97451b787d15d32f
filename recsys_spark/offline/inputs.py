"""The offline run's inputs: their contracts, where each is read, and the check that one evaluation can run.

Each input named in ``[offline]`` is a Parquet path (``{run}`` replaced by the run name) read with its own
contract (docs/offline.md, "Inputs"): the columns of :data:`INPUTS`, no ``input.columns`` mapping.  An input
left ``""`` is absent; :func:`read_inputs` leaves it out.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark.config import Config
from recsys_spark.errors import ConfigError, SchemaError
from recsys_spark.io.read import ColumnSpec, conform, read_parquet
from recsys_spark.schema import CATEGORY, ITEM, RELEVANCE, SCORE, USER

RANK = "rank"
LABEL = "label"
RATING = "rating"
PREDICTION = "prediction"
IS_TARGET = "is_target"

INPUTS: dict[str, tuple[ColumnSpec, ...]] = {
    "recommendations": (
        ColumnSpec(USER, "id"),
        ColumnSpec(ITEM, "id"),
        ColumnSpec(SCORE, "double", False),
        ColumnSpec(RANK, "double", False),
    ),
    "truth": (ColumnSpec(USER, "id"), ColumnSpec(ITEM, "id"), ColumnSpec(RELEVANCE, "double", False)),
    "train": (ColumnSpec(USER, "id"), ColumnSpec(ITEM, "id")),
    "items": (ColumnSpec(ITEM, "id"), ColumnSpec(CATEGORY, "string")),
    "predictions": (
        ColumnSpec(USER, "id"),
        ColumnSpec(ITEM, "id"),
        ColumnSpec(SCORE, "double"),
        ColumnSpec(LABEL, "double"),
    ),
    "ratings": (
        ColumnSpec(USER, "id"),
        ColumnSpec(ITEM, "id"),
        ColumnSpec(RATING, "double"),
        ColumnSpec(PREDICTION, "double"),
    ),
    "sampled": (ColumnSpec(USER, "id"), ColumnSpec(ITEM, "id"), ColumnSpec(SCORE, "double")),
}

NOTHING_TO_EVALUATE = (
    "offline: nothing to evaluate; set offline.recommendations and offline.truth, "
    "offline.predictions, offline.ratings or offline.sampled"
)


def check_evaluable(cfg: Config) -> None:
    """Raise :class:`ConfigError` unless the configured inputs allow at least one evaluation."""
    o = cfg.offline
    if not ((o.recommendations and o.truth) or o.predictions or o.ratings or o.sampled):
        raise ConfigError(NOTHING_TO_EVALUATE)


def input_paths(cfg: Config, run: str) -> dict[str, str]:
    """``{input: path}`` of every configured input, ``{run}`` filled in, in :data:`INPUTS` order."""
    return {key: getattr(cfg.offline, key).replace("{run}", run) for key in INPUTS if getattr(cfg.offline, key)}


def read_inputs(spark: SparkSession, cfg: Config, run: str) -> dict[str, DataFrame]:
    """Every configured input, conformed to its contract ({run} filled in); absent ones are left out."""
    out: dict[str, DataFrame] = {}
    for key, path in input_paths(cfg, run).items():
        raw = read_parquet(spark, path, f"offline.{key}", {})  # its own contract (docs/offline.md): no input.columns
        df = conform(raw, INPUTS[key], path, keep=(IS_TARGET,) if key == "sampled" else ())
        if key == "recommendations" and SCORE not in df.columns and RANK not in df.columns:
            raise SchemaError(f"offline.recommendations {path}: needs a 'score' or a 'rank' column")
        out[key] = with_target_flag(raw, df, path) if key == "sampled" else df
    return out


def with_target_flag(raw: DataFrame, df: DataFrame, path: str) -> DataFrame:
    """The sampled rows with ``is_target`` read as a boolean (a boolean or integer column of ``raw``)."""
    field = {f.name: f.dataType for f in raw.schema.fields}.get(IS_TARGET)
    if field is None:
        raise SchemaError(f"missing column {IS_TARGET!r} in {path}")
    if not isinstance(field, (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        raise SchemaError(
            f"column {IS_TARGET!r} in {path} has type {field.simpleString()}, which cannot be read as boolean"
        )
    return df.withColumn(IS_TARGET, F.col(IS_TARGET).cast("boolean"))  # kept as "true"/"1" strings
