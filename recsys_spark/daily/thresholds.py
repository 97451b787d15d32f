"""The daily threshold metrics (``metrics.score_is_probability``): accuracy, precision, recall and F_alpha of the
day's scored exposures at each of ``metrics.thresholds``, per slice, and the confusion table.

An exposure (an item shown, with a score that is not null or NaN) is predicted positive when its score >= t and is
positive when its relevance > 0 (docs/metrics.md, "F-scores and thresholds").  One aggregation over the user
partitions (a user's rows are in one partition: no shuffle of rows) gives each (slice, user) its confusion counts
at every threshold; one grouped aggregation of those gives each slice the sums of the delta-method interval (the
user the unit) and its confusion counts: a few rows per slice reach the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.config.metrics import MetricsConfig
from recsys_spark.kernels.fscores import CONFUSION_COUNTS, confusion_column
from recsys_spark.offline.aggregate import aggregate_by
from recsys_spark.offline.predictions import threshold_specs
from recsys_spark.per_user.aggregate import MetricRow
from recsys_spark.schema import ALL, ITEM, RELEVANCE, SCORE, SLICE, USER

OUTSIDE = "_outside"  # a user's scored exposures with a score outside [0, 1]


@dataclass
class ThresholdResult:
    """The metric rows (with their ``threshold``), the ``confusion`` rows (``schema.CONFUSION_DDL``) and notes."""

    rows: list[MetricRow] = field(default_factory=list)
    confusion: list[tuple] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def user_confusion(rows: DataFrame, thresholds: Sequence[float]) -> DataFrame:
    """(slice, user, tp_ti, fp_ti, tn_ti, fn_ti for each threshold index i) over the scored item rows."""
    score = F.col(SCORE).cast("double")
    scored = rows.where(F.col(ITEM).isNotNull() & score.isNotNull() & ~F.isnan(score))
    positive = F.col(RELEVANCE) > 0
    counts: list[Column] = []
    for i, t in enumerate(thresholds):
        predicted = score >= F.lit(float(t))
        cells = {
            "tp": predicted & positive,
            "fp": predicted & ~positive,
            "tn": ~predicted & ~positive,
            "fn": ~predicted & positive,
        }
        counts += [F.sum(F.when(cells[c], 1).otherwise(0)).alias(confusion_column(c, i)) for c in CONFUSION_COUNTS]
    outside = F.sum(F.when((score < 0) | (score > 1), 1).otherwise(0)).alias(OUTSIDE)
    return scored.groupBy(SLICE, USER).agg(*counts, outside)


def threshold_stage(
    by_user: DataFrame, thresholds: Sequence[float], alphas: Sequence[float], confidence: float
) -> ThresholdResult:
    """The rows of every slice with a scored exposure (module docstring); an undefined ratio writes no row, a
    slice without a scored exposure writes neither rows nor confusion counts."""
    if not thresholds:
        return ThresholdResult()
    users = user_confusion(by_user, thresholds)
    names = [confusion_column(c, i) for i in range(len(thresholds)) for c in CONFUSION_COUNTS]
    out = ThresholdResult()
    specs = threshold_specs(thresholds, alphas)
    extra = [F.sum(n).alias(n) for n in (*names, OUTSIDE)]
    for slice_value, rows, sums in aggregate_by(users, SLICE, specs, confidence, extra):
        out.rows += [MetricRow(*row) for row in rows]
        if slice_value == ALL and sums[OUTSIDE]:
            out.notes.append(
                f"metrics.score_is_probability: {sums[OUTSIDE]} scored exposures have a score outside [0, 1] "
                "(kept: a threshold still cuts them, but they are not probabilities)"
            )
        for i, t in enumerate(thresholds):
            cells = [int(sums[confusion_column(c, i)] or 0) for c in CONFUSION_COUNTS]
            if sum(cells):
                out.confusion.append((str(slice_value), float(t), *cells))
    out.rows.sort(key=lambda r: (r.slice, r.threshold or 0.0, r.metric))
    out.confusion.sort()
    return out


def day_thresholds(by_user: DataFrame, has_score: bool, metrics: MetricsConfig, confidence: float) -> ThresholdResult:
    """:func:`threshold_stage` with ``metrics.score_is_probability``; nothing when it is off, a note without a score
    column (a position is no probability)."""
    if not metrics.score_is_probability:
        return ThresholdResult()
    if not has_score:
        return ThresholdResult(notes=["threshold metrics not written: the exposures have no score column"])
    return threshold_stage(by_user, metrics.thresholds, metrics.f_alphas, confidence)
