"""The rating evaluation: ratings (rating, prediction) -> MAE and RMSE global, user- and item-averaged,
NMAE and NRMSE over the rating range, and the distortion of a custom cost table.

The per-rating errors are :func:`kernels.offline.rating_errors`; the per-user sums join the run's per-user
table under ``ratings_*`` and ``rating_*`` names, the per-item sums are aggregated on their own
(``item_avg``).  Ratings and predictions outside the range are kept, counted and noted.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.config import Config, parse_distortion, parse_range
from recsys_spark.kernels import offline as K
from recsys_spark.offline.aggregate import Mean, Ratio
from recsys_spark.offline.evaluation import Evaluation, RunContext, Spec
from recsys_spark.offline.inputs import PREDICTION, RATING
from recsys_spark.offline.set_aside import set_aside, set_aside_notes
from recsys_spark.schema import ITEM, USER

ValueRange = tuple[float, float]


def evaluate_ratings(run: RunContext) -> Evaluation:
    """The rating evaluation of ``offline.ratings`` (docs/offline.md, "Ratings")."""
    cfg = run.cfg
    user_ratings, item_ratings, value_range, counts = rating_tables(run.inputs["ratings"], cfg, run.paths["ratings"])
    has_d = bool(cfg.offline.distortion)
    users = user_ratings.select(
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
    return Evaluation(
        "ratings",
        users,
        specs=[renamed(s) for s in rating_specs(value_range, has_d, False)],
        aggregates=[(item_ratings, rating_specs(value_range, has_d, True))],
        counts=counts,
        notes=set_aside_notes("ratings", counts),
        summary={"rating_range": list(value_range) if value_range else None},
        user_counts=rating_user_counts(),
        late_notes=lambda final: out_of_range_notes(final, value_range, cfg),
    )


def rating_user_counts() -> list[Column]:
    """Distortion pairs not in the table, ratings and predictions outside the range, over the per-user table."""
    return [
        F.sum("ratings_d_missing").alias("ratings_distortion_pairs_not_in_table"),
        F.sum("ratings_rating_out").alias("ratings_rating_out_of_range"),
        F.sum("ratings_prediction_out").alias("ratings_prediction_out_of_range"),
    ]


def out_of_range_notes(counts: Mapping[str, int], value_range: ValueRange | None, cfg: Config) -> list[str]:
    """The note on the kept ratings and predictions outside the range, from the run's final counts."""
    ratings, predictions = counts["ratings_rating_out_of_range"], counts["ratings_prediction_out_of_range"]
    if value_range is None or not (ratings or predictions):
        return []
    lo, hi = value_range
    where = "offline.rating_range" if cfg.offline.rating_range.strip() else "the observed range of the ratings"
    what = " and ".join(f"{n} {name}" for n, name in ((ratings, "ratings"), (predictions, "predictions")) if n)
    return [
        f"ratings: {what} outside [{lo:g}, {hi:g}] ({where}), kept: "
        "MAE and RMSE measure them as they are; NMAE and NRMSE divide by the range's width"
        + (", and rounded predictions are clipped to it" if cfg.offline.round_predictions else "")
    ]


def renamed(spec: Spec) -> Spec:
    """Rating specs read the per-user columns under their ``rating_`` names in the merged table."""
    if isinstance(spec, Mean):
        return Mean(spec.metric, spec.k, spec.aggregation, f"rating_{spec.column}", spec.transform)
    return spec


def rating_tables(
    ratings: DataFrame, cfg: Config, path: str = "offline.ratings"
) -> tuple[DataFrame, DataFrame, ValueRange | None, dict[str, int]]:
    """(per-user sums and means, per-item sums and means, rating range, rows set aside per reason)
    of the rating errors.  The per-user and per-item sums also count the kept ratings and predictions
    outside the range (``{prefix}_rating_out``, ``{prefix}_prediction_out``)."""
    value_range = parse_range(cfg.offline.rating_range)
    ratings, _, aside, _ = set_aside(ratings, "ratings", path)
    if value_range is None:
        lo_hi = ratings.agg(F.min(RATING), F.max(RATING)).collect()[0]  # no grouping: one row
        value_range = (float(lo_hi[0]), float(lo_hi[1])) if lo_hi[0] is not None and lo_hi[0] < lo_hi[1] else None
    rows = rating_errors(ratings, value_range, parse_distortion(cfg.offline.distortion), cfg.offline.round_predictions)
    return error_sums(rows, USER, "ratings"), error_sums(rows, ITEM, "item_ratings"), value_range, aside


def rating_errors(
    ratings: DataFrame,
    value_range: ValueRange | None,
    table: Mapping[tuple[float, float], float] | None,
    rounding: bool,
) -> DataFrame:
    """One row per rating: user, item, absolute and squared error, distortion and its flags
    (:func:`kernels.offline.rating_errors`, one call per Arrow batch)."""

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

    return ratings.select(USER, ITEM, RATING, PREDICTION).mapInPandas(
        errors,
        f"{USER} string, {ITEM} string, abs double, sq double, d double, d_missing long, "
        "rating_out long, prediction_out long",
    )


def error_sums(rows: DataFrame, key: str, prefix: str) -> DataFrame:
    """Per ``key`` (user or item): n, the sums of the errors and flags under ``{prefix}_*`` names, and
    mae = Σ|e| / n, rmse = sqrt(Σe² / n), distortion = Σd / n."""
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


def rating_specs(value_range: ValueRange | None, has_distortion: bool, item_level: bool) -> list[Spec]:
    """MAE, RMSE (user or item averages; global pooled ratios at the user level), NMAE and NRMSE (divided by
    the range's width) when there is a range, the distortion when there is a table."""
    agg = "item_avg" if item_level else "user_avg"
    n = "n_item_ratings" if item_level else "n_ratings"
    pre = "item_ratings" if item_level else "ratings"

    def sqrt(v: float) -> float:
        return math.sqrt(max(v, 0.0))

    specs: list[Spec] = [Mean("mae", None, agg, "mae"), Mean("rmse", None, agg, "rmse")]
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
