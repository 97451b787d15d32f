"""Layers that interact: the 2×2 interaction contrast of two experiments in different layers, from the four
cells' sufficient statistics (:func:`interaction`), and the rows of one pair of experiments
(:func:`pair_rows`).  docs/experiments.md, "Interactions".

A user in both experiments is in one cell (a, b) of the 2×2: a = 1 when it has experiment A's variant, 0 when
A's control; b likewise for B.  With m_ab the metric in cell (a, b) (the mean of the per-user values, or the
ratio of sums of a ratio metric), the contrast is the change A's variant makes when B's variant is on minus
the change it makes when B's control is on::

    contrast = (m_11 − m_01) − (m_10 − m_00) = m_11 − m_01 − m_10 + m_00

The cells hold different users, so their estimates are independent and::

    Var(contrast) = Σ_ab Var(m_ab),   Var(m_ab) = s²_ab / n_ab

with s²_ab the sample variance (n − 1) of the cell's per-user values, or for a ratio of sums the delta-method
variance (:attr:`~recsys_spark.kernels.sums.RatioStats.var_ratio`: the sample variance of the per-user
linearisation (x − R y)/ȳ over n).  This is the interaction coefficient of the saturated OLS ``y ~ a * b`` on the
users with the HC2 heteroscedasticity-consistent variance (in a saturated 2×2 each user's leverage is 1/n_ab,
so HC2's e²/(1 − h) gives exactly s²_ab/n_ab), and its normal p-value; a test checks it against statsmodels.
With ``inference = "sequential"`` the interval and p-value are the experiments' confidence sequence at N = the
users of the four cells (:mod:`~recsys_spark.kernels.sequential`) around the same estimate and variance.

Pure numpy; no Spark.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from recsys_spark.kernels.comparisons import adjust_p
from recsys_spark.kernels.experiments import arm_stats
from recsys_spark.kernels.metric_specs import MetricSpec
from recsys_spark.kernels.quantiles import p_value_z, z_quantile
from recsys_spark.kernels.sequential import SEQUENTIAL_TUNING, sequential_half_width, sequential_p_value
from recsys_spark.kernels.sums import MeanStats, RatioStats

#: the four cells, (a, b): 1 = the experiment's variant, 0 = its control; the contrast's sign of each
CELLS = {(1, 1): 1.0, (0, 1): -1.0, (1, 0): -1.0, (0, 0): 1.0}


@dataclass(frozen=True)
class Contrast:
    """The interaction contrast, its standard error, interval and two-sided p (NaN where undefined)."""

    contrast: float
    se: float
    ci_low: float
    ci_high: float
    p_value: float


def cell_estimate(stats: MeanStats | RatioStats) -> tuple[float, float]:
    """(m, Var(m)) of one cell: the mean and s²/n, or the ratio of sums and its delta-method variance."""
    if isinstance(stats, MeanStats):
        return stats.mean, (stats.var / stats.n if stats.n >= 2 else math.nan)
    return stats.ratio, stats.var_ratio


def interaction(
    cells: Mapping[tuple[int, int], MeanStats | RatioStats],
    confidence: float = 0.95,
    inference: str = "fixed",
    tuning: float = SEQUENTIAL_TUNING,
) -> Contrast:
    """The contrast m_11 − m_01 − m_10 + m_00 of the four ``cells`` with Var = Σ Var(m_ab), a normal interval
    and p (``fixed``), or the confidence sequence at N = Σ n_ab and its always-valid p (``sequential``).
    NaN when a cell has fewer than two users with the metric (or a ratio's denominators sum to 0).

    >>> cells = {c: MeanStats.from_values(np.array(v, float)) for c, v in
    ...          {(1, 1): [4, 6], (0, 1): [1, 3], (1, 0): [2, 4], (0, 0): [1, 1]}.items()}
    >>> r = interaction(cells)                  # 5 − 2 − 3 + 1 = 1; Var = 2/2 + 2/2 + 2/2 + 0/2 = 3
    >>> round(r.contrast, 6), round(r.se ** 2, 6)
    (1.0, 3.0)
    """
    estimates = [cell_estimate(cells[c]) for c in CELLS]
    contrast = sum(sign * m for sign, (m, _) in zip(CELLS.values(), estimates, strict=True))
    variance = sum(v for _, v in estimates)
    if not (math.isfinite(contrast) and math.isfinite(variance)):
        return Contrast(math.nan, math.nan, math.nan, math.nan, math.nan)
    se = math.sqrt(max(variance, 0.0))
    if inference == "sequential":
        units = sum(float(s.n) for s in cells.values())
        w = float(sequential_half_width(variance, units, confidence, tuning))
        p = float(sequential_p_value(contrast, variance, units, confidence, tuning))
    else:
        w = z_quantile(confidence) * se
        stat = contrast / se if se else (math.nan if contrast == 0 else math.copysign(math.inf, contrast))
        p = p_value_z(stat)
    return Contrast(contrast, se, contrast - w, contrast + w, p)


@dataclass(frozen=True)
class Pair:
    """Two experiments in different layers (A's layer first by name) and the variant of each compared with its
    control."""

    layer_a: str
    experiment_a: str
    variant_a: str
    layer_b: str
    experiment_b: str
    variant_b: str


def _clean(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def pair_rows(
    pairs: Sequence[tuple[Pair, Mapping[tuple[int, int], Mapping[str, float]]]],
    specs: Sequence[MetricSpec],
    correction: str = "holm",
    confidence: float = 0.95,
    inference: str = "fixed",
    tuning: float = SEQUENTIAL_TUNING,
) -> list[tuple]:
    """The ``experiment_interactions`` rows (``schema.EXPERIMENT_INTERACTIONS_DDL``'s order) of ONE pair of
    experiments: each (variant pair, metric) of ``pairs`` (a variant pair and its four cells' named sums,
    ``"users"`` and ``f"{metric}|{part}"`` as :mod:`~recsys_spark.kernels.experiments` reads them).  ``p_adjusted``:
    ``correction`` over the pair's rows (one family per pair of experiments).  ``users``: the users of the four
    cells with the metric defined.  A metric undefined in some cell writes no row."""
    family: list[tuple] = []
    for pair, cells in pairs:
        for spec in specs:
            stats = {c: arm_stats(cells[c], spec) for c in CELLS}
            with np.errstate(all="ignore"):
                r = interaction(stats, confidence, inference, tuning)
            if math.isnan(r.contrast):
                continue
            users = int(sum(s.n for s in stats.values()))
            family.append(
                (
                    pair.layer_a,
                    pair.experiment_a,
                    pair.variant_a,
                    pair.layer_b,
                    pair.experiment_b,
                    pair.variant_b,
                    spec.metric,
                    spec.k,
                    spec.aggregation,
                    r.contrast,
                    _clean(r.ci_low),
                    _clean(r.ci_high),
                    _clean(r.p_value),
                    users,
                )
            )
    p = [math.nan if row[12] is None else row[12] for row in family]
    adjusted: Sequence[float] = list(adjust_p(p, correction)) if family else []
    return [(*row[:13], _clean(float(pa)), row[13]) for row, pa in zip(family, adjusted, strict=True)]
