"""Ranking metrics of one list and of many lists at once (pure numpy).

Every function here takes the relevances of a list *already in ranked order*
(rank 1 first).  Ranking itself (score descending, ties by position, then
item id) is done by the caller, once, for all lists: see
:func:`recsys_spark.kernels.users.score_users`.

Conventions, shared by the single-list reference functions and the
vectorised :func:`list_metrics` (tests check that the two agree):

* an item is *relevant* when its relevance is > 0;
* ``k`` cuts the ranked list; a list shorter than ``k`` is scored on the
  items it has, except ``precision@k`` whose denominator stays ``k``;
* metrics of a list with no relevant item (R = 0) are undefined (NaN): such
  lists carry no ranking signal and are left out of every average, and
  counted, by the callers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import numpy as np

Gain = Literal["exponential", "linear"]


def gain(rel: np.ndarray, kind: Gain = "exponential") -> np.ndarray:
    """Gain of a graded relevance: ``2**rel - 1`` (exponential) or ``rel`` (linear)."""
    rel = np.asarray(rel, dtype=np.float64)
    if kind == "exponential":
        return np.exp2(rel) - 1.0
    if kind == "linear":
        return rel
    raise ValueError(f"unknown gain {kind!r}: use 'exponential' or 'linear'")


def discount(n: int) -> np.ndarray:
    """``1 / log2(i + 1)`` for ranks i = 1..n."""
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def dcg_at_k(rel_ranked: np.ndarray, k: int, kind: Gain = "exponential") -> float:
    """DCG@k = sum_{i <= min(k, n)} gain(rel_i) / log2(i + 1)."""
    top = np.asarray(rel_ranked, dtype=np.float64)[:k]
    return float(np.sum(gain(top, kind) * discount(len(top))))


def ndcg_at_k(rel_ranked: np.ndarray, k: int, kind: Gain = "exponential") -> float:
    """NDCG@k = DCG@k / IDCG@k, the ideal from the same list's items sorted by relevance.

    Returns NaN when the list has no relevant item (IDCG = 0).

    >>> round(ndcg_at_k([7, 2, 5, 10, 1], 5, "linear"), 4)
    0.8509
    >>> round(ndcg_at_k([7, 2, 5, 10, 1], 5, "exponential"), 4)
    0.5225
    """
    rel = np.asarray(rel_ranked, dtype=np.float64)
    ideal = dcg_at_k(np.sort(rel)[::-1], k, kind)
    return dcg_at_k(rel, k, kind) / ideal if ideal > 0 else float("nan")


def average_precision_at_k(rel_ranked: np.ndarray, k: int) -> float:
    """AP@k = (1 / min(R, k)) * sum_{i <= k} P@i * [item i relevant].

    R counts the relevant items of the whole list.  NaN when R = 0.

    >>> average_precision_at_k([1, 0, 0, 1, 1, 0, 0, 1, 0, 0], 10)
    0.65
    >>> round(average_precision_at_k([1, 1, 0, 1], 10), 4)
    0.9167
    """
    relevant = np.asarray(rel_ranked, dtype=np.float64) > 0
    n_relevant = int(relevant.sum())
    if n_relevant == 0:
        return float("nan")
    top = relevant[:k]
    precision_at_i = np.cumsum(top) / np.arange(1, len(top) + 1)
    return float(np.sum(precision_at_i * top) / min(n_relevant, k))


def precision_at_k(rel_ranked: np.ndarray, k: int) -> float:
    """precision@k = hits@k / k (the denominator stays k for lists shorter than k)."""
    relevant = np.asarray(rel_ranked, dtype=np.float64) > 0
    if not relevant.any():
        return float("nan")
    return float(relevant[:k].sum() / k)


def recall_at_k(rel_ranked: np.ndarray, k: int) -> float:
    """recall@k = hits@k / R."""
    relevant = np.asarray(rel_ranked, dtype=np.float64) > 0
    if not relevant.any():
        return float("nan")
    return float(relevant[:k].sum() / relevant.sum())


def hit_rate_at_k(rel_ranked: np.ndarray, k: int) -> float:
    """hit_rate@k = 1 if hits@k > 0 else 0."""
    relevant = np.asarray(rel_ranked, dtype=np.float64) > 0
    if not relevant.any():
        return float("nan")
    return float(relevant[:k].any())


def reciprocal_rank(rel_ranked: np.ndarray) -> float:
    """RR = 1 / rank of the first relevant item (no cut-off).

    >>> round((reciprocal_rank([0, 0, 1]) + reciprocal_rank([0, 0, 0, 1])) / 2, 4)
    0.2917
    """
    relevant = np.flatnonzero(np.asarray(rel_ranked, dtype=np.float64) > 0)
    return 1.0 / float(relevant[0] + 1) if len(relevant) else float("nan")


def segment_starts(keys: np.ndarray) -> np.ndarray:
    """Start offsets of the runs of equal values in ``keys`` (contiguous groups)."""
    keys = np.asarray(keys)
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def list_metrics(
    list_starts: np.ndarray,
    rel_ranked: np.ndarray,
    ideal_ranked: np.ndarray,
    ks: Iterable[int],
    kind: Gain = "exponential",
) -> dict[str, np.ndarray]:
    """Score many ranked lists at once with segment operations.

    Parameters
    ----------
    list_starts : offsets where each list starts in the flat arrays (increasing,
        first is 0, no empty list).
    rel_ranked : relevances of all lists, concatenated, each list in ranked order.
    ideal_ranked : the same relevances, each list sorted by relevance descending.
    ks : cut-offs.
    kind : NDCG gain.

    Returns
    -------
    dict of arrays, one value per list: ``n`` (length), ``n_relevant`` (R),
    ``mrr`` and, for each k, ``ndcg@k``, ``map@k``, ``precision@k``,
    ``recall@k``, ``hit_rate@k`` and ``hits@k``.  Metrics of lists with R = 0
    are NaN (``hits@k`` is 0).
    """
    rel = np.asarray(rel_ranked, dtype=np.float64)
    ideal = np.asarray(ideal_ranked, dtype=np.float64)
    starts = np.asarray(list_starts, dtype=np.int64)
    total = len(rel)
    lengths = np.diff(np.r_[starts, total])
    rank = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths) + 1
    relevant = (rel > 0).astype(np.float64)
    n_relevant = np.add.reduceat(relevant, starts) if total else np.zeros(0)
    has_relevant = n_relevant > 0
    # hits up to and including each rank, restarted at every list
    cum = np.cumsum(relevant)
    before = np.repeat(cum[starts] - relevant[starts], lengths)
    cum_hits = cum - before
    disc = 1.0 / np.log2(rank + 1.0)
    dcg_terms = gain(rel, kind) * disc
    idcg_terms = gain(ideal, kind) * disc
    ap_terms = cum_hits / rank * relevant

    def per_list(values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(values, starts) if total else np.zeros(0)

    nan = np.full(len(starts), np.nan)
    out: dict[str, np.ndarray] = {"n": lengths, "n_relevant": n_relevant}
    first = np.minimum.reduceat(np.where(relevant > 0, rank, total + 1), starts) if total else nan
    out["mrr"] = np.where(has_relevant, 1.0 / first, nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in ks:
            top = rank <= k
            hits = per_list(relevant * top)
            idcg = per_list(idcg_terms * top)
            out[f"hits@{k}"] = hits
            out[f"ndcg@{k}"] = np.where(idcg > 0, per_list(dcg_terms * top) / idcg, nan)
            out[f"map@{k}"] = np.where(has_relevant, per_list(ap_terms * top) / np.minimum(n_relevant, k), nan)
            out[f"precision@{k}"] = np.where(has_relevant, hits / k, nan)
            out[f"recall@{k}"] = np.where(has_relevant, hits / n_relevant, nan)
            out[f"hit_rate@{k}"] = np.where(has_relevant, (hits > 0).astype(np.float64), nan)
    return out
