"""Per-user table -> long metrics rows with intervals, in one aggregation (the user is the unit).

A :class:`Mean` is a user average: its sufficient statistics (n, Σx, Σx²) over
the users whose value is defined (not null, not NaN) give a Student t interval
(:func:`kernels.estimates.t_interval`).  A :class:`Ratio` is a pooled ratio of
per-user sums R = Σx / Σy: (n, Σx, Σy, Σx², Σy², Σxy) give the delta-method
interval (:func:`kernels.estimates.delta_interval`).  Every statistic of every spec
is one expression of a single ``agg``: one pass, one small row to the driver.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels.estimates import Interval, delta_interval, t_interval
from recsys_spark.kernels.sums import MeanStats, RatioStats

ALL = "all"


@dataclass(frozen=True)
class Mean:
    metric: str
    k: int | None
    aggregation: str
    column: str | Column  # a per-user column, or an expression over them
    #: applied to the value and both bounds (monotone increasing), e.g. a scale
    transform: Callable[[float], float] | None = None


@dataclass(frozen=True)
class Ratio:
    metric: str
    k: int | None
    aggregation: str
    x: Column
    y: Column
    transform: Callable[[float], float] | None = None
    #: a threshold metric's cut-off (the row's ``threshold``); such a row is not written when Σy = 0 (undefined)
    threshold: float | None = None


def defined(col: str | Column) -> Column:
    """The value, null when it is null or NaN."""
    c = F.col(col) if isinstance(col, str) else col
    return F.when(c.isNotNull() & ~F.isnan(c), c.cast("double"))


def _exprs(i: int, spec: Mean | Ratio) -> list[Column]:
    if isinstance(spec, Mean):
        x = defined(spec.column)
        return [F.count(x).alias(f"s{i}_n"), F.sum(x).alias(f"s{i}_sx"), F.sum(x * x).alias(f"s{i}_sxx")]
    x, y = defined(spec.x), defined(spec.y)
    both = x.isNotNull() & y.isNotNull()
    x, y = F.when(both, x), F.when(both, y)
    return [
        F.count(x).alias(f"s{i}_n"),
        F.sum(x).alias(f"s{i}_sx"),
        F.sum(y).alias(f"s{i}_sy"),
        F.sum(x * x).alias(f"s{i}_sxx"),
        F.sum(y * y).alias(f"s{i}_syy"),
        F.sum(x * y).alias(f"s{i}_sxy"),
    ]


def _apply(iv: Interval, f: Callable[[float], float] | None) -> Interval:
    if f is None:
        return iv
    value = None if iv.value is None else f(iv.value)
    if iv.ci_low is None or iv.ci_high is None:
        return Interval(value, None, None, None, iv.method)
    lo, hi = f(iv.ci_low), f(iv.ci_high)
    # se through the transform by its secant slope over the interval (exact for a scale)
    slope = (hi - lo) / (iv.ci_high - iv.ci_low) if iv.ci_high != iv.ci_low else 0.0
    return Interval(value, None if iv.se is None else iv.se * slope, lo, hi, iv.method)


def aggregate(
    users: DataFrame, specs: Sequence[Mean | Ratio], confidence: float, slice_value: str = ALL
) -> list[tuple]:
    """Rows of the long metrics table (``schema.METRICS_DDL`` order) for ``specs`` over ``users``."""
    if not specs:
        return []
    row = users.agg(*[e for i, s in enumerate(specs) for e in _exprs(i, s)]).collect()[0]  # no grouping: one row
    return _rows(row, specs, confidence, slice_value)


def aggregate_by(
    users: DataFrame, key: str, specs: Sequence[Mean | Ratio], confidence: float, extra: Sequence[Column] = ()
) -> list[tuple[Any, list[tuple], Any]]:
    """Per value of ``key`` (a slice): (value, its metric rows as :func:`aggregate` writes them, the row of sums
    with ``extra``'s aggregates too).  One grouped aggregation; one small row per key value to the driver."""
    if not specs:
        return []
    exprs = [e for i, s in enumerate(specs) for e in _exprs(i, s)]
    out = []
    for row in users.groupBy(key).agg(*exprs, *extra).collect():  # a row per slice
        out.append((row[key], _rows(row, specs, confidence, str(row[key])), row))
    return out


def _rows(row: Any, specs: Sequence[Mean | Ratio], confidence: float, slice_value: str) -> list[tuple]:
    out = []
    for i, spec in enumerate(specs):
        n = row[f"s{i}_n"] or 0
        sx = row[f"s{i}_sx"] or 0.0
        if isinstance(spec, Mean):
            iv = t_interval(MeanStats(float(n), float(sx), float(row[f"s{i}_sxx"] or 0.0)), confidence)
        else:
            iv = delta_interval(
                RatioStats(
                    float(n),
                    float(sx),
                    float(row[f"s{i}_sy"] or 0.0),
                    float(row[f"s{i}_sxx"] or 0.0),
                    float(row[f"s{i}_syy"] or 0.0),
                    float(row[f"s{i}_sxy"] or 0.0),
                ),
                confidence,
            )
        iv = _apply(iv, spec.transform)
        threshold = spec.threshold if isinstance(spec, Ratio) else None
        if threshold is not None and iv.value is None:
            continue  # an undefined threshold metric (nothing predicted positive, no positive label): no row
        out.append(metric_row(spec.metric, spec.k, spec.aggregation, iv, int(n), slice_value, threshold))
    return out


def finite_or_none(value: float | None) -> float | None:
    """``value`` as a float, None when it is None, NaN or infinite (a table holds null, never NaN).

    >>> finite_or_none(1), finite_or_none(float("nan")), finite_or_none(None)
    (1.0, None, None)
    """
    return None if value is None or not math.isfinite(value) else float(value)


def metric_row(
    metric: str,
    k: int | None,
    aggregation: str,
    iv: Interval,
    n: int,
    slice_value: str = ALL,
    threshold: float | None = None,
) -> tuple:
    """A row of the long metrics table (``schema.METRICS_DDL`` order) from an interval; non-finite values null;
    ``threshold``: a threshold metric's cut-off, None (null) on every other row."""
    return (
        metric,
        k,
        aggregation,
        slice_value,
        finite_or_none(iv.value),
        int(n),
        finite_or_none(iv.se),
        finite_or_none(iv.ci_low),
        finite_or_none(iv.ci_high),
        iv.method,
        threshold,
    )


def point(metric: str, k: int | None, aggregation: str, value: float | None, n: int) -> tuple:
    """A row without an interval (a catalog-level value such as coverage or Gini): method "none"."""
    return metric_row(metric, k, aggregation, Interval.none(value), n)
