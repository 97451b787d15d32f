"""The pointwise evaluation: predictions (score, label) -> AUC (exact pooled, per user, impression-weighted),
log loss, PCOC, observed rate, mean predicted, the reliability table with its ECE, and at each of
``offline.thresholds`` accuracy, precision, recall and F_alpha (rows with a ``threshold``) and the confusion table.

A score outside [0, 1] is kept (the AUC needs only its order) and counted with a note: the log loss
(clipped to [eps, 1 - eps]), calibration (clipped to [0, 1]), PCOC and mean_predicted read it as a
probability.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from functools import partial

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels import offline as K
from recsys_spark.kernels.auc import UPartial
from recsys_spark.kernels.curves import Curves
from recsys_spark.kernels.fscores import CONFUSION_COUNTS, confusion_column
from recsys_spark.offline.aggregate import Mean, Ratio, point
from recsys_spark.offline.evaluation import Evaluation, RunContext, Spec, per_user
from recsys_spark.offline.inputs import LABEL
from recsys_spark.offline.set_aside import set_aside, set_aside_notes
from recsys_spark.per_user.curves import PooledCurves, curve_rows, pooled_curves
from recsys_spark.per_user.pooled_auc import exact_auc
from recsys_spark.registry import THRESHOLD_METRICS, f_score_name
from recsys_spark.schema import ALL, RELEVANCE, SCORE, SLICE


def evaluate_predictions(run: RunContext) -> Evaluation:
    """The pointwise evaluation of ``offline.predictions`` (docs/offline.md, "Pointwise predictions")."""
    outside = (F.col(SCORE) < 0) | (F.col(SCORE) > 1)
    preds, read, counts, flagged = set_aside(
        run.inputs["predictions"], "predictions", run.paths["predictions"], F.when(outside, F.lit("score_out_of_range"))
    )
    n_rows = read - sum(counts.values())
    notes = set_aside_notes("predictions", counts)
    out_of_range = flagged.get("score_out_of_range", 0)
    counts["predictions_score_out_of_range"] = out_of_range
    if out_of_range:
        notes.append(
            f"predictions: {out_of_range} of {n_rows} scores outside [0, 1] (kept): AUC uses only their "
            "order, but log loss (clipped to [eps, 1 - eps]), calibration (clipped to [0, 1]), PCOC and "
            "mean_predicted read them as probabilities"
        )
    thresholds = run.cfg.offline.thresholds
    kernel = partial(K.score_predictions, thresholds=thresholds)
    columns = K.prediction_columns(len(thresholds))
    users = per_user(preds, K.PREDICTION_INPUT, columns, kernel, run.partitions(n_rows))
    pooled, curves = pooled_curves_of(preds, run.cfg.metrics.curve_points)
    notes += curves.notes if curves is not None else []
    part = pooled.get(("all",))
    auc = part.auc if part is not None else float("nan")
    table, ece = calibration(preds, run.cfg.offline.calibration_bins)
    counts["prediction_rows"] = n_rows
    return Evaluation(
        "predictions",
        users,
        specs=prediction_specs() + threshold_specs(thresholds, run.cfg.metrics.f_alphas),
        rows=[
            point("auc", None, "global", None if math.isnan(auc) else auc, n_rows),
            point("ece", None, "global", ece, n_rows),
        ],
        tables={"calibration": table, **(curve_tables(curves.curves) if curves is not None else {})},
        counts=counts,
        notes=notes,
        user_counts=[users_without_auc(), *confusion_sums(thresholds)],
        late_tables=partial(confusion_table, thresholds),
    )


def pooled_curves_of(preds: DataFrame, bound: int) -> tuple[dict[tuple, UPartial], PooledCurves | None]:
    """The exact pooled AUC and, with ``metrics.curve_points`` (``bound``), the ROC and PR curves of every
    prediction pooled (slice ``all``), from one sorted stream (:mod:`recsys_spark.per_user.curves`)."""
    rows = preds.select(F.lit(ALL).alias(SLICE), SCORE, F.col(LABEL).alias(RELEVANCE))
    if not bound:
        return exact_auc(rows, (SLICE,)), None
    curves = pooled_curves(rows, (SLICE,), bound, what="predictions")
    return curves.auc, curves


def curve_tables(curves: Mapping[tuple, Curves]) -> dict[str, pd.DataFrame]:
    """``roc_curve`` and ``pr_curve`` as the daily job's (slice, threshold, fpr, tpr / recall, precision); a
    null threshold at the ends no score reaches."""
    roc, pr = curve_rows(curves)
    return {
        "roc_curve": pd.DataFrame(roc, columns=["slice", "threshold", "fpr", "tpr"]).astype({"threshold": object}),
        "pr_curve": pd.DataFrame(pr, columns=["slice", "threshold", "recall", "precision"]).astype(
            {"threshold": object}
        ),
    }


def users_without_auc() -> Column:
    """Users with predictions and no AUC (one class only), over the merged per-user table."""
    # the kernel's NaN AUC (one class) reaches the table as a null: Arrow writes pandas' NaN as null
    no_auc = F.col("auc").isNull() | F.isnan("auc")
    return F.sum(F.when(F.col("n_predictions").isNotNull() & no_auc, 1).otherwise(0)).alias("users_without_auc")


def prediction_specs() -> list[Spec]:
    """AUC per user and impression-weighted, log loss per user and global, PCOC, observed rate, mean predicted."""
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


def threshold_specs(thresholds: Sequence[float], alphas: Sequence[float]) -> list[Spec]:
    """accuracy, precision, recall and each F_alpha (:func:`registry.f_score_name`) at each threshold, k null,
    ``global``: ratios of the users' confusion counts (the user the unit of the delta-method interval)::

        accuracy = Σ(tp + tn) / Σn      precision = Σtp / Σ(tp + fp)      recall = Σtp / Σ(tp + fn)
        F_alpha  = Σ(1 + a²) tp / Σ((1 + a²) tp + a² fn + fp)

    the pooled values of :func:`kernels.fscores.threshold_metrics`; an undefined one (Σy = 0) writes no row."""
    specs: list[Spec] = []
    for i, t in enumerate(thresholds):
        tp, fp, tn, fn = (F.col(confusion_column(c, i)) for c in CONFUSION_COUNTS)
        ratios = dict(zip(THRESHOLD_METRICS, ((tp + tn, tp + fp + tn + fn), (tp, tp + fp), (tp, tp + fn)), strict=True))
        specs += [Ratio(name, None, "global", x, y, threshold=t) for name, (x, y) in ratios.items()]
        for alpha in alphas:
            c, a2 = 1.0 + alpha * alpha, alpha * alpha
            specs.append(Ratio(f_score_name(alpha), None, "global", c * tp, c * tp + a2 * fn + fp, threshold=t))
    return specs


def confusion_sums(thresholds: Sequence[float]) -> list[Column]:
    """The confusion counts summed over the users (``confusion_tp_t0``, ...), for the run's counts."""
    names = [confusion_column(c, i) for i in range(len(thresholds)) for c in CONFUSION_COUNTS]
    return [F.sum(name).alias(f"confusion_{name}") for name in names]


def confusion_table(thresholds: Sequence[float], counts: Mapping[str, int]) -> dict[str, pd.DataFrame]:
    """``confusion`` (slice, threshold, tp, fp, tn, fn; ``schema.CONFUSION_DDL``) from the run's counts: a row
    per threshold with a scored prediction (none without one: nothing measured)."""
    rows = []
    for i, t in enumerate(thresholds):
        cells = [int(counts.get(f"confusion_{confusion_column(c, i)}", 0)) for c in CONFUSION_COUNTS]
        if sum(cells):
            rows.append((ALL, float(t), *cells))
    frame = pd.DataFrame(rows, columns=["slice", "threshold", *CONFUSION_COUNTS])
    return {"confusion": frame.astype({"threshold": "float64", **{c: "int64" for c in CONFUSION_COUNTS}})}


def calibration(predictions: DataFrame, bins: int) -> tuple[pd.DataFrame, float]:
    """The reliability table over ``bins`` equal-width bins and its ECE (:func:`kernels.offline.calibration_table`):
    one aggregation, at most ``bins`` rows to the driver."""

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
