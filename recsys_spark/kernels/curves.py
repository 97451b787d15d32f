"""ROC and precision-recall curves from a run-length histogram of scores, pure numpy.

The input is what the pooled AUC's sorted stream reduces to (:func:`kernels.auc.sorted_histogram`): the
distinct scores in ascending order with their counts of positives and negatives.  With ``D`` distinct scores
``s_1 > ... > s_D`` (descending), ``TP_i`` and ``FP_i`` count the positives and negatives scored at least
``s_i``; ``P`` and ``N`` are the class totals.

* ROC (:func:`roc_from_histogram`): the points ``(FP_i / N, TP_i / P)`` at threshold ``s_i``, after the origin
  ``(0, 0)``, whose threshold is *null* (above every score: nothing predicted positive; scikit-learn writes
  ``inf``).  A point is dropped, as scikit-learn's ``roc_curve(drop_intermediate=True)`` drops it, when it is
  neither the first nor the last and its step equals the next one's: ``(neg_i, pos_i) == (neg_{i+1},
  pos_{i+1})`` (``diff(fps, 2) == 0`` and ``diff(tps, 2) == 0``).  The trapezoid area under the points is the
  Mann-Whitney AUC with ties counted 1/2 (:mod:`kernels.auc`).
* PR (:func:`pr_from_histogram`): every distinct score, thresholds ascending, ``recall = TP_i / P`` and
  ``precision = TP_i / (TP_i + FP_i)``, then the point ``(recall 0, precision 1)`` with a null threshold, as
  scikit-learn's ``precision_recall_curve`` (no point is dropped).

Both need both classes: with ``P == 0`` or ``N == 0`` there is no curve (:func:`exact_curves` returns
``None``; the callers write no row and a note).

Above a bound (``metrics.curve_points``): a subset of the exact points, the first and the last of cells of
``s = FPR + TPR`` (:func:`cell_of`, :func:`subset_mask`), among candidates that each score bin's summary keeps:
:mod:`kernels.curve_summary` defines it and bounds its area.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the smallest ``metrics.curve_points``: two cells of the subset
MIN_POINTS = 5


@dataclass(frozen=True)
class Curve:
    """One curve's points in curve order; ``threshold`` NaN where the table's threshold is null."""

    threshold: np.ndarray
    x: np.ndarray  # fpr (ROC) or recall (PR)
    y: np.ndarray  # tpr (ROC) or precision (PR)

    def __len__(self) -> int:
        return len(self.x)


@dataclass(frozen=True)
class Curves:
    roc: Curve
    pr: Curve
    #: the exact curves' sizes (ROC vertices, PR points) before any subset
    exact_roc_points: int
    exact_pr_points: int


def descending_counts(
    values: np.ndarray, pos: np.ndarray, neg: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(scores, pos, neg, TP, FP) in descending score order from an ascending histogram."""
    values = np.asarray(values, dtype=np.float64)[::-1]
    pos = np.asarray(pos, dtype=np.float64)[::-1]
    neg = np.asarray(neg, dtype=np.float64)[::-1]
    return values, pos, neg, np.cumsum(pos), np.cumsum(neg)


def roc_vertex_mask(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """Which distinct scores (descending order) scikit-learn's ``drop_intermediate`` keeps: the first, the
    last, and every point whose step ``(neg_i, pos_i)`` differs from the next point's.

    >>> # descending: a positive, two negatives, a positive: the first negative's step equals the second's
    >>> roc_vertex_mask(np.array([1.0, 0.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0, 0.0])).tolist()
    [True, False, True, True]
    """
    pos = np.asarray(pos, dtype=np.float64)
    neg = np.asarray(neg, dtype=np.float64)
    n = len(pos)
    if n <= 2:
        return np.ones(n, dtype=bool)
    inner = (pos[1:-1] != pos[2:]) | (neg[1:-1] != neg[2:])
    return np.r_[True, inner, True]


def cells(bound: int) -> int:
    """``C = (bound - 1) // 2``: the cells of ``s = FPR + TPR`` the subset keeps two points of."""
    return (bound - 1) // 2


def area_bound(bound: int) -> float:
    """How far the trapezoid area of a subset ROC can be from the exact AUC: ``1 / (2 C)``.

    >>> area_bound(1001)
    0.001
    """
    return 1.0 / (2 * cells(bound))


def cell_of(fp: np.ndarray, tp: np.ndarray, n_neg: float, n_pos: float, bound: int) -> np.ndarray:
    """The cell of each point: ``min(floor((FP / N + TP / P) / h), C - 1)``, ``h = 2 / C``.  The Spark side
    (:mod:`recsys_spark.per_user.curves`) evaluates the same expression in the same order."""
    c = cells(bound)
    h = 2.0 / c
    s = np.asarray(fp, dtype=np.float64) / n_neg + np.asarray(tp, dtype=np.float64) / n_pos
    return np.minimum(np.floor(s / h), c - 1).astype(np.int64)


def subset_mask(cell: np.ndarray) -> np.ndarray:
    """Keep the first and the last point of each run of equal ``cell`` (cells never decrease along a curve).

    >>> subset_mask(np.array([0, 0, 0, 1, 3, 3])).tolist()
    [True, False, True, True, True, True]
    """
    cell = np.asarray(cell)
    if len(cell) == 0:
        return np.zeros(0, dtype=bool)
    change = cell[1:] != cell[:-1]
    return np.r_[True, change] | np.r_[change, True]


def roc_from_histogram(values: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> Curve:
    """The exact ROC of an ascending histogram (both classes present), as ``roc_curve(drop_intermediate=True)``
    with the first threshold NaN (null) instead of ``inf``.

    >>> c = roc_from_histogram(np.array([0.1, 0.5, 0.9]), np.array([0, 1, 1]), np.array([1, 1, 0]))
    >>> c.x.tolist(), c.y.tolist()   # P = 2, N = 2: (0, 0), s=.9 (0, 1/2), s=.5 (1/2, 1), s=.1 (1, 1)
    ([0.0, 0.0, 0.5, 1.0], [0.0, 0.5, 1.0, 1.0])
    """
    scores, p, n, tp, fp = descending_counts(values, pos, neg)
    keep = roc_vertex_mask(p, n)
    return Curve(np.r_[np.nan, scores[keep]], np.r_[0.0, fp[keep] / fp[-1]], np.r_[0.0, tp[keep] / tp[-1]])


def pr_from_histogram(values: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> Curve:
    """The exact precision-recall curve of an ascending histogram (both classes present), as
    ``precision_recall_curve``: thresholds ascending, then (recall 0, precision 1) with a null threshold.

    >>> c = pr_from_histogram(np.array([0.1, 0.5, 0.9]), np.array([0, 1, 1]), np.array([1, 1, 0]))
    >>> c.x.tolist(), c.y.tolist()   # s=.1: 2 of 4; s=.5: 2 of 3; s=.9: 1 of 1
    ([1.0, 1.0, 0.5, 0.0], [0.5, 0.6666666666666666, 1.0, 1.0])
    """
    scores, _, _, tp, fp = descending_counts(values, pos, neg)
    return _pr_points(scores[::-1], tp[::-1], fp[::-1], tp[-1])


def _pr_points(thresholds: np.ndarray, tp: np.ndarray, fp: np.ndarray, n_pos: float) -> Curve:
    """PR points at ascending thresholds with their counts, then the (0, 1) end."""
    return Curve(np.r_[thresholds, np.nan], np.r_[tp / n_pos, 0.0], np.r_[tp / (tp + fp), 1.0])


def exact_curves(values: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> Curves | None:
    """Both exact curves of an ascending histogram; ``None`` without both classes.  (Above a bound,
    :func:`kernels.curve_summary.curves_from_histogram` keeps the documented subset instead.)"""
    scores, p, n, tp, fp = descending_counts(values, pos, neg)
    if len(scores) == 0 or tp[-1] <= 0 or fp[-1] <= 0:
        return None
    vertex = roc_vertex_mask(p, n)
    sizes = (int(vertex.sum()) + 1, len(scores) + 1)
    return curves_of((scores[vertex], tp[vertex], fp[vertex]), (scores, tp, fp), tp[-1], fp[-1], sizes)


Points = tuple[np.ndarray, np.ndarray, np.ndarray]


def curves_of(roc: Points, pr: Points, n_pos: float, n_neg: float, exact_sizes: tuple[int, int]) -> Curves:
    """Both curves from points of the exact curves, each ``(scores, TP, FP)`` in descending score order: the ROC
    vertices kept (the origin added), the PR points kept (the (0, 1) end added).  ``exact_sizes``: the exact
    curves' (ROC points, PR points)."""
    v_scores, v_tp, v_fp = roc
    scores, tp, fp = pr
    roc_curve = Curve(np.r_[np.nan, v_scores], np.r_[0.0, v_fp / n_neg], np.r_[0.0, v_tp / n_pos])
    return Curves(roc_curve, _pr_points(scores[::-1], tp[::-1], fp[::-1], n_pos), *exact_sizes)


def trapezoid_area(x: np.ndarray, y: np.ndarray) -> float:
    """Area under the polyline through ``(x, y)`` (x non-decreasing): the AUC of an exact ROC."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2.0))
