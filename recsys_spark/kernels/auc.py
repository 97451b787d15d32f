"""Exact ROC AUC (Mann-Whitney U with average ranks for ties), pure numpy.

AUC = P(score of a random positive > score of a random negative)
      + 1/2 P(the two scores are equal)
    = (S_pos - P (P + 1) / 2) / (P N)

where S_pos is the sum of the (tie-averaged, 1-based, ascending) ranks of the
P positives among all P + N scores.  It is undefined (NaN) when P = 0 or N = 0.
No binning: two scores that differ by any amount are ordered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


def grouped_auc(
    group: np.ndarray, labels: np.ndarray, scores: np.ndarray, n_groups: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """AUC of every group at once.

    Parameters
    ----------
    group : integer codes 0..G-1 (any order).
    labels : truthy for positives.
    scores : higher means ranked first.
    n_groups : G (default ``group.max() + 1``).

    Returns
    -------
    (auc, n_pos, n_neg), arrays of length G; ``auc`` is NaN for groups with
    only positives or only negatives.
    """
    group = np.asarray(group, dtype=np.int64)
    pos = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=np.float64)
    g = int(group.max()) + 1 if n_groups is None and len(group) else (n_groups or 0)
    order = np.lexsort((scores, group))
    grp, scr, lab = group[order], scores[order], pos[order]
    total = len(grp)
    idx = np.arange(total, dtype=np.int64)
    new_group = np.r_[True, grp[1:] != grp[:-1]] if total else np.zeros(0, bool)
    group_start = np.maximum.accumulate(np.where(new_group, idx, 0)) if total else idx
    # runs of equal (group, score): every member gets the run's average rank
    new_run = new_group | np.r_[True, scr[1:] != scr[:-1]] if total else new_group
    run_id = np.cumsum(new_run) - 1
    run_first = idx[new_run]
    run_last = np.r_[run_first[1:] - 1, total - 1] if total else run_first
    avg_rank = (run_first + run_last) / 2.0 - group_start[run_first] + 1.0
    rank = avg_rank[run_id] if total else np.zeros(0)
    n_pos = np.bincount(grp, weights=lab, minlength=g)
    n_all = np.bincount(grp, minlength=g).astype(np.float64)
    n_neg = n_all - n_pos
    rank_sum = np.bincount(grp, weights=np.where(lab, rank, 0.0), minlength=g)
    with np.errstate(divide="ignore", invalid="ignore"):
        auc = (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
    auc[(n_pos == 0) | (n_neg == 0)] = np.nan
    return auc, n_pos, n_neg


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """AUC of one set of scores (NaN without both classes).

    >>> auc([1, 0, 1, 0], [0.9, 0.1, 0.5, 0.5])   # pairs: 1, 1, 1/2, 1 of 4
    0.875
    """
    labels = np.asarray(labels)
    values, _, _ = grouped_auc(np.zeros(len(labels), np.int64), labels, scores, 1)
    return float(values[0])


@dataclass(frozen=True)
class UPartial:
    """Mann-Whitney counts of one slice of the score axis.

    ``u`` counts (positive, negative) pairs where the positive scores higher
    (1) or equal (1/2); ``n_pos`` and ``n_neg`` are the class counts.
    """

    u: float
    n_pos: float
    n_neg: float

    @property
    def auc(self) -> float:
        """U / (P N); NaN without both classes."""
        return self.u / (self.n_pos * self.n_neg) if self.n_pos > 0 and self.n_neg > 0 else float("nan")


def u_from_histogram(pos: np.ndarray, neg: np.ndarray) -> UPartial:
    """U over distinct scores given in ascending order with their class counts.

    U = sum_s pos_s * (negatives below s + neg_s / 2).

    >>> u_from_histogram([0, 1, 1], [1, 1, 0]).auc   # pos at 2, 3; neg at 1, 2: (1 + 1/2 + 1 + 1) / 4
    0.875
    """
    pos = np.asarray(pos, dtype=np.float64)
    neg = np.asarray(neg, dtype=np.float64)
    below = np.cumsum(neg) - neg
    return UPartial(float(np.sum(pos * (below + neg / 2.0))), float(pos.sum()), float(neg.sum()))


def sorted_histogram(scores: np.ndarray, positives: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct scores, positives, negatives) of scores already sorted ascending.

    One run-length pass, no sort: what a range-partitioned, sorted stream of
    (score, label) rows reduces to before :func:`u_from_histogram`.

    >>> sorted_histogram([0.1, 0.1, 0.5, 0.7, 0.7, 0.7], [1, 0, 0, 1, 1, 0])
    (array([0.1, 0.5, 0.7]), array([1., 0., 2.]), array([1., 1., 1.]))
    """
    scores = np.asarray(scores, dtype=np.float64)
    positives = np.asarray(positives).astype(np.float64)
    if len(scores) == 0:
        return scores, np.zeros(0), np.zeros(0)
    starts = np.flatnonzero(np.r_[True, scores[1:] != scores[:-1]])
    size = np.diff(np.r_[starts, len(scores)]).astype(np.float64)
    pos = np.add.reduceat(positives, starts)
    return scores[starts], pos, size - pos


def merge_u(partials: Iterable[UPartial]) -> UPartial:
    """Merge partials of disjoint slices of the score axis, given in ascending order.

    U = sum_p (U_p + P_p * N_{q < p}): each slice's positives beat every
    negative of the slices below it.
    """
    u = n_pos = n_neg = 0.0
    for part in partials:
        u += part.u + part.n_pos * n_neg
        n_pos += part.n_pos
        n_neg += part.n_neg
    return UPartial(u, n_pos, n_neg)
