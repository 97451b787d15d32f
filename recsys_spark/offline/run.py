"""``recsys-spark offline``: evaluate a model on held-out data before it ships (Spark wiring only).

Each input named in ``[offline]`` enables its evaluation; at least one must run:

* recommendations + truth -> top-K accuracy, beyond-accuracy (train and items refine it);
* predictions -> AUC (exact pooled, per user, impression-weighted), log loss, PCOC, calibration;
* ratings -> MAE / RMSE overall, user- and item-averaged, normalised, distortion;
* sampled -> naive and Krichene-Rendle corrected sampled metrics, sampled AUC.

Every per-user computation is one ``mapInArrow`` call per partition of users
(hash-partitioned by user) into a kernel of :mod:`kernels.offline` or
:mod:`kernels.sampled`; the per-user table is written, then one aggregation
over it gives every metric row with its interval (:mod:`offline.aggregate`).
The driver receives sums, histograms of counts and one row per sampled
negative count: nothing per user or per item.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import cast

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark import registry
from recsys_spark.config import Config, parse_distortion, parse_range
from recsys_spark.errors import ConfigError, SchemaError
from recsys_spark.io.output import commit_summary, open_wing, writing
from recsys_spark.io.read import ColumnSpec, conform, read_parquet
from recsys_spark.kernels import health
from recsys_spark.kernels import offline as K
from recsys_spark.kernels import sampled as S
from recsys_spark.kernels.ranking import Gain
from recsys_spark.offline.aggregate import Mean, Ratio, aggregate, point
from recsys_spark.per_user.pooled_auc import exact_auc
from recsys_spark.runtime import log
from recsys_spark.runtime.session import apply_time_zone
from recsys_spark.schema import CATEGORY, ITEM, METRICS_DDL, RELEVANCE, SCORE, SLICE, USER
from recsys_spark.steps.validate import Check, count_rows, split_rows, tag_rows
from recsys_spark.tables import OFFLINE_RUN

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


def read_inputs(spark: SparkSession, cfg: Config, run: str) -> dict[str, DataFrame]:
    """Every configured input, conformed to its contract ({run} filled in); absent ones are left out."""
    out: dict[str, DataFrame] = {}
    for key, columns in INPUTS.items():
        template = getattr(cfg.offline, key)
        if not template:
            continue
        path = template.replace("{run}", run)
        raw = read_parquet(spark, path, f"offline.{key}", {})  # its own contract (docs/offline.md): no input.columns
        df = conform(raw, columns, path, keep=(IS_TARGET,) if key == "sampled" else ())
        if key == "recommendations" and SCORE not in df.columns and RANK not in df.columns:
            raise SchemaError(f"offline.recommendations {path}: needs a 'score' or a 'rank' column")
        if key == "sampled":
            field = {f.name: f.dataType for f in raw.schema.fields}.get(IS_TARGET)
            if field is None:
                raise SchemaError(f"missing column {IS_TARGET!r} in {path}")
            if not isinstance(field, (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
                raise SchemaError(
                    f"column {IS_TARGET!r} in {path} has type {field.simpleString()}, which cannot be read as boolean"
                )
            df = df.withColumn(IS_TARGET, F.col(IS_TARGET).cast("boolean"))  # kept as "true"/"1" strings
        out[key] = df
    return out


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


def _partitions(spark: SparkSession, rows: int) -> int:
    return max(2 * spark.sparkContext.defaultParallelism, math.ceil(rows / 200_000), 1)


# --------------------------------------------------------------------------- rows that cannot be evaluated


def finite_checks(column: str, what: str, null: bool = True) -> list[Check]:
    """``null_<what>`` (unless ``null`` is False), ``nan_<what>``, ``infinite_<what>`` of a double column.

    Spark sorts NaN above every number and sums it into NaN: such a value is
    never ranked or averaged, it is set aside and counted (as the daily job's
    ``bad_score``).
    """
    c = F.col(column)
    checks: list[Check] = [(f"null_{what}", c.isNull())] if null else []
    return checks + [(f"nan_{what}", F.isnan(c)), (f"infinite_{what}", F.abs(c) == float("inf"))]


def input_checks(key: str, columns: Sequence[str]) -> list[Check]:
    """Why a row of offline input ``key`` cannot be evaluated, in order (the first failed check is its reason).

    A recommendation needs its user and item, and a finite score when it has
    one: a null score is set aside only when the score orders the list (no
    ``rank`` column); beside a rank it is only a missing tie-break and sorts
    last.
    """
    has_id = [("null_user_id", F.col(USER).isNull())]
    if key == "recommendations":
        checks = has_id + [("null_item_id", F.col(ITEM).isNull())]
        if SCORE in columns:
            checks += finite_checks(SCORE, "score", null=RANK not in columns)
        return checks
    if key == "predictions":
        return has_id + finite_checks(SCORE, "score") + finite_checks(LABEL, "label")[:2]
    if key == "ratings":
        return (
            has_id
            + [("null_item_id", F.col(ITEM).isNull())]
            + finite_checks(RATING, "rating")
            + finite_checks(PREDICTION, "prediction")
        )
    if key == "sampled":
        return has_id + [("null_is_target", F.col(IS_TARGET).isNull())] + finite_checks(SCORE, "score")
    raise ValueError(f"no row checks for offline input {key!r}")


def set_aside(
    df: DataFrame, key: str, path: str, flag: Column | None = None
) -> tuple[DataFrame, int, dict[str, int], dict[str, int]]:
    """Split offline input ``key`` into the rows that can be evaluated and the rows set aside, in one pass.

    Returns (kept rows, rows read, ``{"set_aside_<key>_<reason>": n}`` for every
    reason of :func:`input_checks` (zeros included), counts of the kept rows per
    non-null value of ``flag``).
    """
    checks = input_checks(key, df.columns)
    tagged = tag_rows(df, checks)
    counts, flagged = count_rows(tagged, f"offline.{key}", path, flag)
    kept, _ = split_rows(tagged)
    aside = {f"set_aside_{key}_{reason}": int(counts.get(reason, 0)) for reason, _ in checks}
    return kept, int(counts["rows"]), aside, flagged


def set_aside_note(key: str, counts: dict[str, int]) -> str | None:
    """The summary's note on the rows of ``key`` set aside, or None when none was.

    >>> set_aside_note("predictions", {"set_aside_predictions_nan_score": 2, "set_aside_predictions_null_label": 0})
    'predictions: 2 rows set aside, never ranked or averaged (nan_score 2)'
    """
    prefix = f"set_aside_{key}_"
    parts = {k[len(prefix) :]: v for k, v in counts.items() if k.startswith(prefix) and v}
    if not parts:
        return None
    detail = ", ".join(f"{reason} {n}" for reason, n in parts.items())
    return f"{key}: {sum(parts.values())} rows set aside, never ranked or averaged ({detail})"


# --------------------------------------------------------------------------- top-K lists


def clean_lists(
    recs: DataFrame, train: DataFrame | None, exclude_train: bool, path: str = "offline.recommendations"
) -> tuple[DataFrame, dict[str, int]]:
    """Each user's list: rows that cannot be ranked set aside (:func:`input_checks`), duplicates dropped
    (best position kept), train items removed, ranked 1..L.

    Order: ``rank`` ascending, then ``score`` descending, then item id.
    """
    order = [
        F.col(c).asc_nulls_last() if c == RANK else F.col(c).desc_nulls_last()
        for c in (RANK, SCORE)
        if c in recs.columns
    ] + [F.col(ITEM).asc()]
    recs, rows, aside, _ = set_aside(recs, "recommendations", path)
    usable = rows - sum(aside.values())
    first = (
        recs.withColumn("_n", F.row_number().over(Window.partitionBy(USER, ITEM).orderBy(*order)))
        .where(F.col("_n") == 1)
        .drop("_n")
    )
    deduped = first.count()
    kept = first
    if train is not None and exclude_train:
        kept = first.join(train.select(USER, ITEM).distinct(), on=[USER, ITEM], how="left_anti")
    kept = kept.persist()
    remaining = kept.count()
    ranked = kept.withColumn(RANK, F.row_number().over(Window.partitionBy(USER).orderBy(*order)).cast("double"))
    counts = {
        "recommendation_rows": rows,
        **aside,
        "duplicate_recommendations": usable - deduped,
        "train_items_removed": deduped - remaining,
    }
    return ranked.select(USER, ITEM, RANK), counts


def list_rows(ranked: DataFrame, truth: DataFrame, train: DataFrame | None, items: DataFrame | None) -> DataFrame:
    """List rows (rank) outer-joined with relevant truth (relevance), with category, self-information
    of the item's train popularity, whether its category is new to the user and whether the user has
    a train item of a known category (kernel inputs)."""
    rel = F.coalesce(F.col(RELEVANCE), F.lit(1.0)) if RELEVANCE in truth.columns else F.lit(1.0)
    truth = (
        truth.where(F.col(USER).isNotNull() & F.col(ITEM).isNotNull())
        .groupBy(USER, ITEM)
        .agg(F.max(rel).alias(RELEVANCE))
        .where(F.col(RELEVANCE) > 0)
    )
    rows = ranked.join(truth, on=[USER, ITEM], how="full").withColumn(
        RELEVANCE, F.coalesce(F.col(RELEVANCE), F.lit(0.0))
    )
    if items is not None:
        rows = rows.join(items.select(ITEM, CATEGORY).dropDuplicates([ITEM]), on=ITEM, how="left")
    else:
        rows = rows.withColumn(CATEGORY, F.lit(None).cast("string"))
    if train is not None:
        pairs = train.select(USER, ITEM).distinct()
        n_train_users = pairs.select(USER).distinct().count()
        popularity = pairs.groupBy(ITEM).agg(F.count("*").cast("double").alias("_k"))

        def info(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            for f in frames:
                yield pd.DataFrame({ITEM: f[ITEM], "self_info": health.self_information(f["_k"], n_train_users)})

        unseen = float(health.self_information([0.0], n_train_users)[0])
        rows = rows.join(
            popularity.mapInPandas(info, f"{ITEM} string, self_info double"), on=ITEM, how="left"
        ).withColumn("self_info", F.coalesce(F.col("self_info"), F.lit(unseen)))
        if items is not None:
            seen = (
                pairs.join(items.select(ITEM, CATEGORY).dropDuplicates([ITEM]), on=ITEM, how="inner")
                .select(USER, CATEGORY)
                .distinct()
                .withColumn("_seen", F.lit(True))
            )
            history = seen.select(USER).distinct().withColumn("has_history", F.lit(1.0))
            rows = (
                rows.join(seen, on=[USER, CATEGORY], how="left")
                .withColumn(
                    "new_category",
                    F.when(F.col(CATEGORY).isNull(), F.lit(None).cast("double"))
                    .when(F.col("_seen"), 0.0)
                    .otherwise(1.0),
                )
                .join(history, on=USER, how="left")
                .withColumn("has_history", F.coalesce(F.col("has_history"), F.lit(0.0)))
            )
        else:
            rows = rows.withColumn("new_category", F.lit(None).cast("double"))
    else:
        rows = rows.withColumn("self_info", F.lit(None).cast("double")).withColumn(
            "new_category", F.lit(None).cast("double")
        )
    if "has_history" not in rows.columns:
        rows = rows.withColumn("has_history", F.lit(None).cast("double"))
    return rows


def list_specs(ks: Sequence[int]) -> list[Mean | Ratio]:
    has_truth = F.col("n_truth") > 0
    specs: list[Mean | Ratio] = [Mean("mrr", None, "user_avg", "mrr")]
    for k in ks:
        specs += [Mean(m, k, "user_avg", f"{m}_at_{k}") for m in K.LIST_METRICS]
        hits = F.when(has_truth, F.col(f"hits_at_{k}"))
        specs += [
            # k in the denominator, as precision@k per list and the daily job's global precision (docs/offline.md)
            Ratio("precision", k, "global", hits, F.when(has_truth, F.lit(float(k)))),
            Ratio("recall", k, "global", hits, F.when(has_truth, F.col("n_truth"))),
        ]
    # beyond accuracy, on the top max(ks) items of each list: no cut-off in the name (the registry's, the daily
    # job's), the depth is in the summary (beyond_accuracy_depth)
    specs += [Mean(m, None, "user_avg", m) for m in ("intra_list_diversity", "novelty", "serendipity")]
    # the daily job's novelty global: the mean self-information over every listed item, Σ_u L_u novelty_u / Σ_u L_u
    # (every item of a top list has its self-information when there is a train table; without one, none has)
    top = F.least(F.col("n_list"), F.lit(max(ks))).cast("double")
    specs.append(Ratio("novelty", None, "global", F.col("novelty") * top, top))  # users with a novelty only
    return specs


#: the daily job's health rows that the top-K lists also have (:func:`kernels.health.health_values`)
CATALOG_METRICS = (("item_coverage", "global"), ("gini", "catalog"), ("gini", "exposed"), ("personalization", "global"))


def catalog_rows(
    ranked: DataFrame, k_max: int, items: DataFrame | None, lorenz_points: int
) -> tuple[list[tuple], pd.DataFrame, dict[str, int]]:
    """Item coverage, Gini, Lorenz curve and personalization of the top-``k_max`` lists.

    The daily job's formulas, by the same function (:func:`kernels.health.health_values`), with the
    recommendations as the exposures: item coverage = recommended catalog items / catalog items; Gini
    ``catalog`` over the recommended items and the catalog items never recommended (count 0), ``exposed``
    over the recommended items; personalization from the users per item.  Without ``items`` there is no
    catalog: no item coverage and no catalog Gini, and the Lorenz curve is over the recommended items.
    """
    top = ranked.where(F.col(RANK) <= k_max)
    per_item = top.groupBy(ITEM).agg(F.count("*").alias("c"))  # one list per user, duplicates dropped: c_i users
    catalog = None
    if items is not None:
        ids = items.select(ITEM).where(F.col(ITEM).isNotNull()).distinct()
        catalog = ids.count()
        per_item = per_item.join(ids.withColumn("_in_catalog", F.lit(True)), on=ITEM, how="left")
        in_catalog = F.coalesce(F.col("_in_catalog"), F.lit(False))
    else:
        in_catalog = F.lit(False)
    hist = (
        per_item.groupBy("c", in_catalog.alias("in_catalog")).agg(F.count("*").alias("items")).collect()
    )  # distinct counts: small
    histogram = {(float(r["c"]), bool(r["in_catalog"])): float(r["items"]) for r in hist}
    values = np.array([c for c, _ in histogram], dtype=np.float64)
    n_items = np.array(list(histogram.values()), dtype=np.float64)
    users = top.select(USER).distinct().count()
    # personalization's sums from the histogram: the c_i of one histogram bucket are equal
    stats = {
        "users_exposed": float(users),
        "user_overlap": float(np.dot(n_items, values * (values - 1))),
        "user_items": float(np.dot(n_items, values)),
    }
    values_rows, (x, y) = health.health_values(stats, histogram, catalog, None, None, False, lorenz_points)
    wanted = set(CATALOG_METRICS)
    rows = [point(m, None, a, v, n) for m, a, v, n, _ in values_rows if (m, a) in wanted]
    lorenz = pd.DataFrame({"k": np.full(len(x), k_max, dtype=np.int32), "item_share": x, "recommendation_share": y})
    recommended = int(n_items.sum())
    counts = {
        "catalog_items": catalog or 0,
        "recommended_items": recommended,
        "recommended_items_outside_catalog": 0
        if catalog is None
        else recommended - int(sum(m for (_, cat), m in histogram.items() if cat)),
        "users_with_list": users,
    }
    return rows, lorenz, counts


# --------------------------------------------------------------------------- predictions


def prediction_specs() -> list[Mean | Ratio]:
    n = F.col("n_predictions")
    return [
        Mean("auc", None, "user_avg", "auc"),
        Ratio("auc", None, "impression_weighted", F.col("auc") * n, F.when(~F.isnan("auc"), n)),
        Mean("logloss", None, "user_avg", "logloss"),
        Ratio("logloss", None, "global", F.col("logloss_sum"), n),
        Ratio("pcoc", None, "global", F.col("predicted_sum"), F.col("n_positive")),
        Ratio("observed_rate", None, "global", F.col("n_positive"), n),
        Ratio("mean_predicted", None, "global", F.col("predicted_sum"), n),
    ]


def calibration(predictions: DataFrame, bins: int) -> tuple[pd.DataFrame, float]:
    def bin_of(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for f in frames:
            yield pd.DataFrame(
                {
                    "bin": K.calibration_bin(f[SCORE].to_numpy(), bins),
                    SCORE: f[SCORE],
                    LABEL: (f[LABEL] > 0).astype(np.float64),
                }
            )

    per_bin = (
        predictions.select(SCORE, LABEL)
        .mapInPandas(bin_of, f"bin long, {SCORE} double, {LABEL} double")
        .groupBy("bin")
        .agg(F.count("*").alias("n"), F.sum(SCORE).alias("p"), F.sum(LABEL).alias("y"))
        .collect()
    )  # at most `bins` rows
    return K.calibration_table(
        np.array([r["bin"] for r in per_bin], dtype=np.int64),
        np.array([r["n"] for r in per_bin], dtype=np.float64),
        np.array([r["p"] for r in per_bin], dtype=np.float64),
        np.array([r["y"] for r in per_bin], dtype=np.float64),
        bins,
    )


# --------------------------------------------------------------------------- ratings


def rating_tables(
    ratings: DataFrame, cfg: Config, path: str = "offline.ratings"
) -> tuple[DataFrame, DataFrame, tuple[float, float] | None, dict[str, int]]:
    """(per-user sums and means, per-item sums and means, rating range, rows set aside per reason)
    of the rating errors.  The per-user and per-item sums also count the kept ratings and predictions
    outside the range (``{prefix}_rating_out``, ``{prefix}_prediction_out``)."""
    value_range = parse_range(cfg.offline.rating_range)
    ratings, _, aside, _ = set_aside(ratings, "ratings", path)
    if value_range is None:
        lo_hi = ratings.agg(F.min(RATING), F.max(RATING)).collect()[0]  # no grouping: one row
        value_range = (float(lo_hi[0]), float(lo_hi[1])) if lo_hi[0] is not None and lo_hi[0] < lo_hi[1] else None
    table = parse_distortion(cfg.offline.distortion)
    rounding = cfg.offline.round_predictions

    def errors(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for f in frames:
            e = K.rating_errors(f[RATING].to_numpy(), f[PREDICTION].to_numpy(), rounding, value_range, table)
            yield pd.DataFrame(
                {
                    USER: f[USER],
                    ITEM: f[ITEM],
                    "abs": e["abs"],
                    "sq": e["sq"],
                    "d": e["distortion"],
                    "d_missing": e["distortion_missing"].astype(np.int64),
                    "rating_out": e["rating_out_of_range"].astype(np.int64),
                    "prediction_out": e["prediction_out_of_range"].astype(np.int64),
                }
            )

    rows = ratings.select(USER, ITEM, RATING, PREDICTION).mapInPandas(
        errors,
        f"{USER} string, {ITEM} string, abs double, sq double, d double, d_missing long, "
        "rating_out long, prediction_out long",
    )

    def sums(key: str, prefix: str) -> DataFrame:
        return (
            rows.groupBy(key)
            .agg(
                F.count("*").alias(f"n_{prefix}"),
                F.sum("abs").alias(f"{prefix}_abs_sum"),
                F.sum("sq").alias(f"{prefix}_sq_sum"),
                F.sum("d").alias(f"{prefix}_d_sum"),
                F.sum("d_missing").alias(f"{prefix}_d_missing"),
                F.sum("rating_out").alias(f"{prefix}_rating_out"),
                F.sum("prediction_out").alias(f"{prefix}_prediction_out"),
            )
            .withColumn("mae", F.col(f"{prefix}_abs_sum") / F.col(f"n_{prefix}"))
            .withColumn("rmse", F.sqrt(F.col(f"{prefix}_sq_sum") / F.col(f"n_{prefix}")))
            .withColumn("distortion", F.col(f"{prefix}_d_sum") / F.col(f"n_{prefix}"))
        )

    return sums(USER, "ratings"), sums(ITEM, "item_ratings"), value_range, aside


def rating_specs(value_range: tuple[float, float] | None, has_distortion: bool, item_level: bool) -> list[Mean | Ratio]:
    agg = "item_avg" if item_level else "user_avg"
    n = "n_item_ratings" if item_level else "n_ratings"
    pre = "item_ratings" if item_level else "ratings"

    def sqrt(v: float) -> float:
        return math.sqrt(max(v, 0.0))

    specs: list[Mean | Ratio] = [Mean("mae", None, agg, "mae"), Mean("rmse", None, agg, "rmse")]
    if not item_level:
        specs += [
            Ratio("mae", None, "global", F.col(f"{pre}_abs_sum"), F.col(n)),
            Ratio("rmse", None, "global", F.col(f"{pre}_sq_sum"), F.col(n), sqrt),
        ]
    if value_range is not None:
        width = value_range[1] - value_range[0]

        def scale(v: float) -> float:
            return v / width

        specs += [Mean("nmae", None, agg, "mae", scale), Mean("nrmse", None, agg, "rmse", scale)]
        if not item_level:
            specs += [
                Ratio("nmae", None, "global", F.col(f"{pre}_abs_sum"), F.col(n), scale),
                Ratio("nrmse", None, "global", F.col(f"{pre}_sq_sum"), F.col(n), lambda v: sqrt(v) / width),
            ]
    if has_distortion:
        specs.append(Mean("distortion", None, agg, "distortion"))
        if not item_level:
            specs.append(Ratio("distortion", None, "global", F.col(f"{pre}_d_sum"), F.col(n)))
    return specs


# --------------------------------------------------------------------------- sampled


def sampled_specs(ks: Sequence[int]) -> list[Mean | Ratio]:
    specs: list[Mean | Ratio] = []
    for name, k in S.metric_names(ks):
        specs.append(Mean(name, k, "sampled_naive", S.column(name, k, "sampled")))
        if name != "auc":
            specs.append(Mean(name, k, "sampled_corrected", S.column(name, k, "corrected")))
    return specs


def catalog_size(cfg: Config, inputs: dict[str, DataFrame]) -> tuple[int, str]:
    """n for the sampled metrics: config, else the items table, else distinct items seen in any input."""
    if cfg.offline.catalog_size:
        return cfg.offline.catalog_size, "config offline.catalog_size"
    if "items" in inputs:
        return inputs["items"].select(ITEM).distinct().count(), "items table"
    seen = None
    for df in inputs.values():
        part = df.select(ITEM)
        seen = part if seen is None else seen.union(part)
    return (seen.distinct().count() if seen is not None else 0), "distinct items in the inputs (no items table)"


# --------------------------------------------------------------------------- the run


def _merge_users(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for f in frames[1:]:
        out = out.join(f, on=USER, how="full")
    return out


def check_evaluable(cfg: Config) -> None:
    """Raise :class:`ConfigError` unless the configured inputs allow at least one evaluation."""
    o = cfg.offline
    if not ((o.recommendations and o.truth) or o.predictions or o.ratings or o.sampled):
        raise ConfigError(
            "offline: nothing to evaluate; set offline.recommendations and offline.truth, "
            "offline.predictions, offline.ratings or offline.sampled"
        )


def _stage(name: str, timings: dict[str, float], active: bool) -> contextlib.AbstractContextManager:
    """A logged, timed stage (:func:`log.stage`) for an evaluation the run makes; nothing otherwise."""
    return log.stage(name, timings) if active else contextlib.nullcontext()


def run_offline(spark: SparkSession, cfg: Config, run: str, output_root: str) -> dict:
    """Evaluate one offline run and write its partition ``run=NAME`` of ``{output_root}/offline/{table}``
    (:data:`recsys_spark.tables.OFFLINE_RUN`); return the summary."""
    check_evaluable(cfg)
    apply_time_zone(spark, cfg.validation.time_zone)
    timings: dict[str, float] = {}
    with log.stage("read", timings, run=run):
        inputs = read_inputs(spark, cfg, run)
    ks = cfg.metrics.k
    k_max = max(ks)
    conf = cfg.offline.confidence
    summary: dict = {
        "run": run,
        "inputs": {k: getattr(cfg.offline, k).replace("{run}", run) for k in INPUTS if getattr(cfg.offline, k)},
        "evaluations": [],
        "counts": {},
        "notes": [],
        "config_fingerprint": cfg.fingerprint(),
        "confidence": conf,
        "ks": list(ks),
    }
    counts = summary["counts"]
    user_frames: list[DataFrame] = []
    specs: list[Mean | Ratio] = []
    extra_rows: list[tuple] = []
    tables: dict[str, pd.DataFrame] = {}
    item_ratings = None
    train, items = inputs.get("train"), inputs.get("items")

    with _stage("lists", timings, "recommendations" in inputs or "truth" in inputs):
        if "recommendations" in inputs and "truth" in inputs:
            recs_path = summary["inputs"]["recommendations"]
            ranked, c = clean_lists(inputs["recommendations"], train, cfg.offline.exclude_train_items, recs_path)
            counts.update(c)
            _note_set_aside(summary, "recommendations")
            rows = list_rows(ranked, inputs["truth"], train, items)
            gain = cast(Gain, cfg.metrics.ndcg_gain)  # config checked it is one of Gain's values
            users = per_user(
                rows,
                K.LIST_INPUT,
                K.list_columns(ks),
                lambda f: K.score_lists(f, ks, gain),
                _partitions(spark, c["recommendation_rows"]),
            )
            user_frames.append(users)
            specs += list_specs(ks)
            crows, tables["lorenz"], ccounts = catalog_rows(ranked, k_max, items, cfg.health.lorenz_points)
            extra_rows += crows
            counts.update(ccounts)
            summary["beyond_accuracy_depth"] = k_max
            summary["evaluations"].append("lists")
            if items is None:
                summary["notes"].append(
                    "no offline.items: item_coverage and gini (catalog) are not computed (catalog unknown), the "
                    "Lorenz curve is over the items recommended; intra_list_diversity and serendipity are not computed"
                )
            if train is None:
                summary["notes"].append(
                    "no offline.train: novelty and serendipity are not computed, "
                    "and no train item was removed from the lists"
                )
        elif "recommendations" in inputs or "truth" in inputs:
            summary["notes"].append("top-K evaluation needs both offline.recommendations and offline.truth: skipped")

    with _stage("predictions", timings, "predictions" in inputs):
        if "predictions" in inputs:
            outside = (F.col(SCORE) < 0) | (F.col(SCORE) > 1)
            preds, read, aside, flagged = set_aside(
                inputs["predictions"],
                "predictions",
                summary["inputs"]["predictions"],
                F.when(outside, F.lit("score_out_of_range")),
            )
            n_rows = read - sum(aside.values())
            counts.update(aside)
            _note_set_aside(summary, "predictions")
            out_of_range = flagged.get("score_out_of_range", 0)
            counts["predictions_score_out_of_range"] = out_of_range
            if out_of_range:
                summary["notes"].append(
                    f"predictions: {out_of_range} of {n_rows} scores outside [0, 1] (kept): AUC uses only their "
                    "order, but log loss (clipped to [eps, 1 - eps]), calibration (clipped to [0, 1]), PCOC and "
                    "mean_predicted read them as probabilities"
                )
            users = per_user(
                preds, K.PREDICTION_INPUT, K.PREDICTION_COLUMNS, K.score_predictions, _partitions(spark, n_rows)
            )
            user_frames.append(users)
            specs += prediction_specs()
            pooled = exact_auc(preds.select(F.lit("all").alias(SLICE), SCORE, F.col(LABEL).alias(RELEVANCE)), (SLICE,))
            part = pooled.get(("all",))
            value = part.auc if part is not None else float("nan")
            extra_rows.append(point("auc", None, "global", None if math.isnan(value) else value, n_rows))
            tables["calibration"], ece = calibration(preds, cfg.offline.calibration_bins)
            extra_rows.append(point("ece", None, "global", ece, n_rows))
            counts["prediction_rows"] = n_rows
            summary["evaluations"].append("predictions")

    value_range = None
    with _stage("ratings", timings, "ratings" in inputs):
        if "ratings" in inputs:
            user_ratings, item_ratings, value_range, aside = rating_tables(
                inputs["ratings"], cfg, summary["inputs"]["ratings"]
            )
            counts.update(aside)
            _note_set_aside(summary, "ratings")
            user_frames.append(
                user_ratings.select(
                    USER,
                    "n_ratings",
                    "ratings_abs_sum",
                    "ratings_sq_sum",
                    "ratings_d_sum",
                    "ratings_d_missing",
                    "ratings_rating_out",
                    "ratings_prediction_out",
                    F.col("mae").alias("rating_mae"),
                    F.col("rmse").alias("rating_rmse"),
                    F.col("distortion").alias("rating_distortion"),
                )
            )
            has_d = bool(cfg.offline.distortion)
            specs += [_renamed(s) for s in rating_specs(value_range, has_d, False)]
            summary["rating_range"] = list(value_range) if value_range else None
            summary["evaluations"].append("ratings")

    tables_by_m: dict[int, dict[str, np.ndarray]] = {}
    with _stage("sampled", timings, "sampled" in inputs):
        if "sampled" in inputs:
            smp, _, aside, _ = set_aside(inputs["sampled"], "sampled", summary["inputs"]["sampled"])
            counts.update(aside)
            _note_set_aside(summary, "sampled")
            n, source = catalog_size(cfg, inputs)
            per_m = (
                smp.groupBy(USER)
                .agg(
                    F.sum(F.when(~F.col(IS_TARGET), 1).otherwise(0)).alias("m"),
                    F.sum(F.when(F.col(IS_TARGET), 1).otherwise(0)).alias("t"),
                )
                .groupBy("m")
                .agg(F.count("*").alias("users"), F.sum("t").alias("targets"))
                .collect()
            )
            ms = sorted(int(r["m"]) for r in per_m)
            unusable = [m for m in ms if m < 1 or m >= n]
            tables_by_m = S.tables_for(n, ms, ks, cfg.offline.sampled_gamma, cfg.offline.sampled_replacement)
            users = per_user(
                smp,
                (USER, SCORE, IS_TARGET),
                S.user_columns(ks),
                lambda f: S.score_sampled(f, ks, tables_by_m),
                _partitions(spark, sum(int(r["m"]) * int(r["users"]) + int(r["targets"]) for r in per_m)),
            )
            user_frames.append(users)
            specs += sampled_specs(ks)
            summary["sampled"] = {
                "catalog_size": n,
                "catalog_size_from": source,
                "gamma": cfg.offline.sampled_gamma,
                "law": "binomial (with replacement)"
                if cfg.offline.sampled_replacement
                else "hypergeometric (without replacement)",
                "negatives": {str(r["m"]): {"users": r["users"], "targets": r["targets"]} for r in per_m},
            }
            if any(m >= 1 and n / m > 20 for m in ms):
                summary["notes"].append(
                    f"sampled: catalog n={n} is more than 20x the negatives m={[m for m in ms if m]}: "
                    "the corrected values remove most of the naive bias but can underestimate the "
                    "top-k metrics (docs/offline.md, simulation); compare models on sampled AUC"
                )
            if unusable:
                summary["notes"].append(
                    f"sampled: users with m in {unusable} negatives (m = 0 or m >= catalog size "
                    f"{n}) have no corrected values"
                )
            summary["evaluations"].append("sampled")

    if not user_frames:
        raise ConfigError(
            "offline: nothing to evaluate; set offline.recommendations and offline.truth, "
            "offline.predictions, offline.ratings or offline.sampled"
        )

    with log.stage("write", timings):
        out = open_wing(spark, OFFLINE_RUN, output_root, cfg.output, run=run)
        with writing(out):  # the run's lock: one run of a name at a time
            merged = _merge_users(user_frames)
            path = out.stage("user_metrics", merged)
            users = spark.read.schema(merged.schema).parquet(path)  # read back as written: no inference job
            metric_rows = aggregate(users, specs, conf) + extra_rows
            if item_ratings is not None:
                metric_rows += aggregate(
                    item_ratings, rating_specs(value_range, bool(cfg.offline.distortion), True), conf
                )
            counts.update(_user_counts(users, summary["evaluations"]))
            if "ratings" in summary["evaluations"]:
                _note_ratings_out_of_range(summary, value_range, cfg)
            out.stage_rows("metrics", metric_rows, METRICS_DDL)
            for name, frame in tables.items():
                if len(frame):
                    out.stage(name, spark.createDataFrame(frame).coalesce(1))
            summary["headline"] = _headline(metric_rows, ks)
            summary["tables"] = sorted(out.tables) + ["summary"]
            commit_summary(out, OFFLINE_RUN, summary)
    return summary


def _note_set_aside(summary: dict, key: str) -> None:
    note = set_aside_note(key, summary["counts"])
    if note:
        summary["notes"].append(note)


def _note_ratings_out_of_range(summary: dict, value_range: tuple[float, float] | None, cfg: Config) -> None:
    counts = summary["counts"]
    ratings, predictions = counts["ratings_rating_out_of_range"], counts["ratings_prediction_out_of_range"]
    if value_range is None or not (ratings or predictions):
        return
    lo, hi = value_range
    where = "offline.rating_range" if cfg.offline.rating_range.strip() else "the observed range of the ratings"
    what = " and ".join(f"{n} {name}" for n, name in ((ratings, "ratings"), (predictions, "predictions")) if n)
    summary["notes"].append(
        f"ratings: {what} outside [{lo:g}, {hi:g}] ({where}), kept: "
        "MAE and RMSE measure them as they are; NMAE and NRMSE divide by the range's width"
        + (", and rounded predictions are clipped to it" if cfg.offline.round_predictions else "")
    )


def _renamed(spec: Mean | Ratio) -> Mean | Ratio:
    """Rating specs read the per-user columns under their ``rating_`` names in the merged table."""
    if isinstance(spec, Mean):
        return Mean(spec.metric, spec.k, spec.aggregation, f"rating_{spec.column}", spec.transform)
    return spec


def _user_counts(users: DataFrame, evaluations: Sequence[str]) -> dict[str, int]:
    exprs = [F.count("*").alias("users")]
    if "lists" in evaluations:
        exprs += [
            F.sum(F.when((F.col("n_truth") > 0) & (F.col("n_list") == 0), 1).otherwise(0)).alias(
                "users_with_truth_without_list"
            ),
            F.sum(F.when((F.col("n_truth") == 0) & (F.col("n_list") > 0), 1).otherwise(0)).alias(
                "users_with_list_without_truth_excluded"
            ),
            F.sum(F.when(F.col("n_truth") > 0, 1).otherwise(0)).alias("users_with_truth"),
            F.sum("serendipity_without_history").alias("serendipity_users_without_history"),
        ]
    if "predictions" in evaluations:
        # the kernel's NaN AUC (one class) reaches the table as a null: Arrow writes pandas' NaN as null
        no_auc = F.col("auc").isNull() | F.isnan("auc")
        exprs += [F.sum(F.when(F.col("n_predictions").isNotNull() & no_auc, 1).otherwise(0)).alias("users_without_auc")]
    if "ratings" in evaluations:
        exprs += [
            F.sum("ratings_d_missing").alias("ratings_distortion_pairs_not_in_table"),
            F.sum("ratings_rating_out").alias("ratings_rating_out_of_range"),
            F.sum("ratings_prediction_out").alias("ratings_prediction_out_of_range"),
        ]
    if "sampled" in evaluations:
        exprs += [F.sum("n_targets").alias("sampled_targets")]
    row = users.agg(*exprs).collect()[0].asDict()  # no grouping: one row
    return {k: int(v or 0) for k, v in row.items()}


def _headline(rows: list[tuple], ks: Sequence[int]) -> dict[str, float | None]:
    k = 10 if 10 in ks else max(ks)
    wanted = {
        ("ndcg", k, "user_avg"),
        ("recall", k, "user_avg"),
        ("precision", k, "user_avg"),
        ("mrr", None, "user_avg"),
        ("item_coverage", None, "global"),
        ("auc", None, "global"),
        ("auc", None, "user_avg"),
        ("logloss", None, "global"),
        ("pcoc", None, "global"),
        ("mae", None, "global"),
        ("rmse", None, "global"),
        ("ndcg", k, "sampled_naive"),
        ("ndcg", k, "sampled_corrected"),
        ("auc", None, "sampled_naive"),
    }
    return {registry.key(r[0], r[1], r[2]): r[4] for r in rows if (r[0], r[1], r[2]) in wanted}
