"""F-scores of ranked lists and of thresholded scores, and the confusion counts behind them (pure numpy).

docs/metrics.md, "F-scores and thresholds".  With precision P and recall R,

    F_alpha = (1 + alpha^2) P R / (alpha^2 P + R)          (van Rijsbergen's F_beta, beta = alpha)

so that alpha > 1 weighs recall more, alpha < 1 precision, and F_1 is their harmonic mean.  Seed 002
§3.1.2.3 writes F_alpha = (alpha^2 + 1) P R / (alpha^2 (P + R)); the two agree only at alpha = 1 (the
seed's denominator is the slip: its value is not a weighted harmonic mean, and exceeds 1 for alpha < 1).
P = R = 0 gives F = 0 (no hit: the worst F, not an undefined one); a missing P or R (a user without a
ranked list) gives NaN (left out of every average, as the other list metrics).

Examples
--------
>>> f_alpha(np.array([0.5, 0.0, np.nan]), np.array([0.25, 0.0, 1.0]), 1.0).tolist()[:2]
[0.3333333333333333, 0.0]
>>> round(float(f_alpha(np.array([0.5]), np.array([0.25]), 0.5)[0]), 6)   # 1.25 * 0.125 / (0.125 + 0.25)
0.416667
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recsys_spark.kernels.sums import RatioStats
from recsys_spark.registry import f_score_name


def f_alpha(precision: np.ndarray, recall: np.ndarray, alpha: float) -> np.ndarray:
    """F_alpha of each (P, R) pair (module docstring): 0 where P = R = 0, NaN where either is NaN."""
    p = np.asarray(precision, dtype=np.float64)
    r = np.asarray(recall, dtype=np.float64)
    a2 = float(alpha) ** 2
    den = a2 * p + r
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, (1.0 + a2) * p * r / den, 0.0)
    return np.where(np.isnan(p) | np.isnan(r), np.nan, out)


def global_f_stats(
    alpha: float,
    k: int,
    users: float,
    hits: float,
    relevant: float,
    lists: float,
    products: dict[str, float],
) -> RatioStats:
    """F_alpha@k ``global`` as a ratio of per-user sums, for the delta-method interval (the user as unit).

    From the global precision@k P = Σ H / (k Σ L) and recall@k R = Σ H / Σ Rel (H: a user's hits@k over its
    ranked lists, L: its ranked lists, Rel: its relevant items)::

        F = (1 + a^2) P R / (a^2 P + R) = Σ (1 + a^2) H / Σ (a^2 Rel + k L)

    so x_u = (1 + a^2) H_u and y_u = a^2 Rel_u + k L_u.  ``products``: the per-user sums of products
    ``hh``, ``rr``, ``ll``, ``hr``, ``hl``, ``rl`` (Σ H², Σ Rel², Σ L², Σ H Rel, Σ H L, Σ Rel L).

    >>> s = global_f_stats(1.0, 2, 2, 2, 3, 2, {"hh": 2, "rr": 5, "ll": 2, "hr": 3, "hl": 2, "rl": 3})
    >>> s.ratio   # 2 * 2 / (3 + 2 * 2): P = 2 / 4, R = 2 / 3, F1 = 2 * (1/2)(2/3) / (1/2 + 2/3) = 4 / 7
    0.5714285714285714
    """
    a2 = float(alpha) ** 2
    c = 1.0 + a2
    p = products
    yy = a2 * a2 * p["rr"] + 2.0 * a2 * k * p["rl"] + k * k * p["ll"]
    xy = c * (a2 * p["hr"] + k * p["hl"])
    return RatioStats(users, c * hits, a2 * relevant + k * lists, c * c * p["hh"], yy, xy)


@dataclass(frozen=True)
class Confusion:
    """The confusion counts of scores cut at ``threshold`` (predicted positive: score >= threshold)."""

    threshold: float
    tp: int
    fp: int
    tn: int
    fn: int

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.tn + self.fn


def confusion_counts(scores: np.ndarray, labels: np.ndarray, thresholds: Sequence[float]) -> list[Confusion]:
    """One :class:`Confusion` per threshold: a row is predicted positive when its score >= the threshold
    (scikit-learn's ``y_pred = score >= t``), positive when its label > 0.  NaN scores are left out.

    >>> (c,) = confusion_counts(np.array([0.9, 0.6, 0.4, 0.2]), np.array([1, 0, 1, 0]), [0.5])
    >>> c.tp, c.fp, c.tn, c.fn
    (1, 1, 1, 1)
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64) > 0
    ok = ~np.isnan(s)
    s, y = s[ok], y[ok]
    out = []
    for t in thresholds:
        pred = s >= t
        tp = int(np.sum(pred & y))
        fp = int(np.sum(pred & ~y))
        fn = int(np.sum(~pred & y))
        out.append(Confusion(float(t), tp, fp, int(len(s) - tp - fp - fn), fn))
    return out


def threshold_metrics(c: Confusion, alphas: Sequence[float] = (1.0,)) -> dict[str, float | None]:
    """accuracy, precision, recall and each F_alpha (name :func:`registry.f_score_name`) of one
    :class:`Confusion`; None where undefined.

    accuracy = (tp + tn) / n (None when n = 0); precision = tp / (tp + fp) (None when nothing is predicted
    positive); recall = tp / (tp + fn) (None without a positive label); F_alpha in its count form
    (1 + a²) tp / ((1 + a²) tp + a² fn + fp), which is the module docstring's formula where P and R are
    defined, and stays defined (0) when nothing is predicted positive but some label is (scikit-learn's
    ``fbeta_score`` does the same); None when tp + fp + fn = 0 (no positive anywhere).  scikit-learn's
    ``zero_division`` writes 0 where we write None: an undefined ratio is not measured (no row), not a zero.

    >>> threshold_metrics(Confusion(0.5, tp=3, fp=1, tn=4, fn=2))
    {'accuracy': 0.7, 'precision': 0.75, 'recall': 0.6, 'f1': 0.6666666666666666}
    """

    def ratio(num: float, den: float) -> float | None:
        return num / den if den > 0 else None

    out: dict[str, float | None] = {
        "accuracy": ratio(c.tp + c.tn, c.n),
        "precision": ratio(c.tp, c.tp + c.fp),
        "recall": ratio(c.tp, c.tp + c.fn),
    }
    for alpha in alphas:
        a2 = float(alpha) ** 2
        out[f_score_name(alpha)] = ratio((1 + a2) * c.tp, (1 + a2) * c.tp + a2 * c.fn + c.fp)
    return out


#: the confusion counts of a threshold, in the order of the ``confusion`` table's columns
CONFUSION_COUNTS = ("tp", "fp", "tn", "fn")


def confusion_column(count: str, index: int) -> str:
    """The per-user column of a confusion count at the ``index``-th threshold: ``tp_t0``, ``fn_t2``."""
    return f"{count}_t{index}"


def user_confusion(
    code: np.ndarray, scores: np.ndarray, labels: np.ndarray, groups: int, thresholds: Sequence[float]
) -> dict[str, np.ndarray]:
    """Per group (a user, ``code`` in 0..groups-1) and per threshold (its index i): ``tp_ti``, ``fp_ti``,
    ``tn_ti``, ``fn_ti`` as :func:`confusion_counts` counts them (score >= t predicted positive, label > 0
    positive, NaN scores left out), int64, one bincount each.

    >>> out = user_confusion(np.array([0, 0, 1, 1]), np.array([0.9, 0.6, 0.4, 0.2]), np.array([1, 0, 1, 0]), 2, [0.5])
    >>> [out[c].tolist() for c in ("tp_t0", "fp_t0", "tn_t0", "fn_t0")]
    [[1, 0], [1, 0], [0, 1], [0, 1]]
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64) > 0
    ok = ~np.isnan(s)
    out: dict[str, np.ndarray] = {}
    for i, t in enumerate(thresholds):
        pred = ok & (s >= t)
        cells = {"tp": pred & y, "fp": pred & ~y, "tn": ok & ~pred & ~y, "fn": ok & ~pred & y}
        for name in CONFUSION_COUNTS:
            out[confusion_column(name, i)] = np.bincount(code, weights=cells[name], minlength=groups).astype(np.int64)
    return out
