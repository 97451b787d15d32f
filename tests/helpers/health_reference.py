"""Brute-force references for the health kernels, used by the tests only.

Production computes each health formula once, from sufficient statistics
(:mod:`recsys_spark.kernels.health`).  These are the textbook definitions,
per item, per category or per pair of users, written independently so that
a test can compare the two on random inputs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np


def histogram_of(counts: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(values, items) of raw per-item counts: the histogram the Spark layer collects.

    >>> [a.tolist() for a in histogram_of([3, 0, 3, 1])]
    [[0.0, 1.0, 3.0], [1.0, 1.0, 2.0]]
    """
    values, items = np.unique(np.asarray(counts, dtype=np.float64), return_counts=True)
    return values, items.astype(np.float64)


def gini_per_item(counts: Sequence[float]) -> float:
    """G = sum_i (2 i - n - 1) p_i / (n - 1) over items sorted ascending (i = 1..n); 0 for one item."""
    c = np.sort(np.asarray(counts, dtype=np.float64))
    n = len(c)
    if n == 0 or c.sum() == 0:
        return float("nan")
    if n == 1:
        return 0.0
    p = c / c.sum()
    return float(np.sum((2 * np.arange(1, n + 1) - n - 1) * p) / (n - 1))


def entropy_sums(counts: Sequence[float]) -> tuple[float, float]:
    """(N, S) of category counts: N = sum c, S = sum c ln c (what the Spark layer sums)."""
    c = np.asarray(counts, dtype=np.float64)
    c = c[c > 0]
    return float(c.sum()), float(np.sum(c * np.log(c)))


def normalised_entropy(counts: Sequence[float], n_categories: int) -> float:
    """-sum p ln p / ln K, term by term; 0 for K <= 1, NaN without counts."""
    c = np.asarray(counts, dtype=np.float64)
    c = c[c > 0]
    if c.sum() == 0:
        return float("nan")
    if n_categories <= 1:
        return 0.0
    p = c / c.sum()
    return float(-np.sum(p * np.log(p)) / math.log(n_categories))


def personalization_pairs(item_sets: Sequence[Iterable]) -> float:
    """1 - mean over pairs |A ∩ B| / mean |A|, by brute force (quadratic).

    >>> personalization_pairs([{"a", "b"}, {"b", "c"}])
    0.5
    """
    sets = [set(s) for s in item_sets]
    u = len(sets)
    if u < 2:
        return float("nan")
    overlap = sum(len(sets[i] & sets[j]) for i in range(u) for j in range(i + 1, u))
    mean_overlap = overlap / (u * (u - 1) / 2)
    mean_size = sum(len(s) for s in sets) / u
    return 1.0 - mean_overlap / mean_size


def overlap_sums(item_sets: Sequence[Iterable]) -> tuple[float, float, int]:
    """(sum_i c_i (c_i - 1), sum_i c_i, U) of item sets, c_i = users shown item i (what Spark sums)."""
    c = np.array(list(Counter(i for s in item_sets for i in set(s)).values()), dtype=np.float64)
    return float(np.sum(c * (c - 1))), float(c.sum()), len(item_sets)


def novelty_per_item(exposures: Sequence[float], clickers: Sequence[float], n_clickers: int) -> float:
    """Exposure-weighted mean of log2((U + 1) / (k_i + 1)), item by item; NaN without exposures or clickers."""
    e = np.asarray(exposures, dtype=np.float64)
    k = np.asarray(clickers, dtype=np.float64)
    if e.sum() == 0 or n_clickers <= 0:
        return float("nan")
    return float(np.dot(e, np.log2((n_clickers + 1.0) / (k + 1.0))) / e.sum())
