"""Poisson bootstrap keyed by user for the item-level health metrics (pure numpy, no Spark).

Each user u carries, in replicate r, the weight w_ur = Poisson(1) of
:func:`kernels.bootstrap_weights.poisson_weights` (a hash of user id, replicate, seed), the
same in every slice and on every executor.  An item's statistics in a
replicate are the weighted sums over the users it was shown to:

* e_ir = Σ_u w_ur n_ui   (exposures of item i),
* c_ir = Σ_u w_ur        (users shown item i; a user drawn twice counts twice),

and U_r = Σ_u w_ur over the users with an exposure.  From them, per replicate,
exactly the formulas of :mod:`kernels.health`:

* personalization_r = 1 − Σ_i c_ir (c_ir − 1) / ((U_r − 1) Σ_i c_ir);
* novelty_r = log2(N + 1) − Σ_i e_ir log2(k_i + 1) / Σ_i e_ir (the popularity
  window, k_i and N, is held fixed: it comes from other days);
* Gini_r from the histogram of the e_ir (weights and counts are integers, so
  the histogram has at most sqrt(2 Σ e_ir) distinct values), over the exposed
  items (e_ir > 0) or over the catalog (never-exposed catalog items add zeros).

Partials are sums over items, so each Spark partition (items hashed to it)
reduces to a few numbers per (slice, replicate) plus a histogram.
"""

from __future__ import annotations

import numpy as np

from recsys_spark.kernels.health import gini_from_histogram


def item_replicates(
    item_codes: np.ndarray, n_items: int, exposures: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(e, c), each (n_items, R): per item and replicate, Σ w n and Σ w over its (user, item) rows.

    >>> w = np.array([[1, 2], [0, 1], [3, 0]])          # three (user, item) rows, two replicates
    >>> e, c = item_replicates(np.array([0, 0, 1]), 2, np.array([2.0, 1.0, 5.0]), w)
    >>> e.tolist(), c.tolist()                          # item 0: 1*2 + 0*1, 2*2 + 1*1; item 1: 3*5, 0
    ([[2.0, 5.0], [15.0, 0.0]], [[1.0, 3.0], [3.0, 0.0]])
    """
    w = np.asarray(weights, dtype=np.float64)
    reps = w.shape[1]
    e = np.empty((n_items, reps))
    c = np.empty((n_items, reps))
    n = np.asarray(exposures, dtype=np.float64)
    for r in range(reps):
        e[:, r] = np.bincount(item_codes, weights=w[:, r] * n, minlength=n_items)
        c[:, r] = np.bincount(item_codes, weights=w[:, r], minlength=n_items)
    return e, c


def histogram_rows(e: np.ndarray, in_catalog: np.ndarray) -> list[tuple[int, bool, float, float]]:
    """(replicate, in catalog, exposure count, items) of the per-replicate exposure counts, zeros included."""
    out = []
    for r in range(e.shape[1]):
        for flag in (True, False):
            values, items = np.unique(e[in_catalog == flag, r], return_counts=True)
            out += [(r, flag, float(v), float(m)) for v, m in zip(values, items, strict=True)]
    return out


def personalization_replicates(overlap: np.ndarray, pairs: np.ndarray, users: np.ndarray) -> np.ndarray:
    """1 − Σ c(c − 1) / ((U − 1) Σ c) per replicate; NaN where U < 2 or Σ c = 0.

    >>> personalization_replicates(np.array([2.0]), np.array([4.0]), np.array([2.0])).tolist()   # 1 - 2 / 4
    [0.5]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1.0 - overlap / ((users - 1.0) * pairs)
    return np.where((users >= 2) & (pairs > 0), out, np.nan)


def novelty_replicates(log_sum: np.ndarray, exposures: np.ndarray, n_clickers: int) -> np.ndarray:
    """log2(N + 1) − Σ e log2(k + 1) / Σ e per replicate; NaN where Σ e = 0 or N = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log2(n_clickers + 1.0) - log_sum / exposures
    return np.where((exposures > 0) & (n_clickers > 0), out, np.nan)


def gini_replicates(
    hist: dict[int, dict[tuple[float, bool], float]], replicates: int, catalog_zeros: float | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """(Gini over exposed items, Gini over the catalog) per replicate from {replicate: {(count, in catalog): items}}.

    ``catalog_zeros``: catalog items never exposed in the day (None without a catalog); a day's
    exposed item drawn zero times in a replicate is a zero count there: left out of the exposed
    Gini, kept (like every item exposed that day, in the catalog or not) in the catalog Gini.
    """
    exposed = np.full(replicates, np.nan)
    catalog = np.full(replicates, np.nan) if catalog_zeros is not None else None
    for r in range(replicates):
        h = hist.get(r, {})
        values = np.array([v for (v, _), m in h.items() if v > 0], dtype=np.float64)
        items = np.array([m for (v, _), m in h.items() if v > 0], dtype=np.float64)
        exposed[r] = gini_from_histogram(values, items)
        if catalog is not None:
            # as kernels.health.health_values: every item exposed that day (in the catalog or not, its count
            # in this replicate, 0 included) plus the catalog items never exposed
            all_values = np.array([v for (v, _) in h], dtype=np.float64)
            all_items = np.array(list(h.values()), dtype=np.float64)
            catalog[r] = gini_from_histogram(np.r_[all_values, 0.0], np.r_[all_items, catalog_zeros])
    return exposed, catalog


class WeightedU:
    """Streaming weighted Mann–Whitney sums of one key, one value per replicate.

    Rows arrive in ascending score order (any batch split).  Each row carries
    its user's weights w_r; a run of equal scores has P_r = Σ w over its
    positives and N_r = Σ w over its negatives, and

        U_r = Σ_runs P_r · (N_r of all earlier runs) + ½ P_r N_r,   AUC_r = U_r / (P_r,total · N_r,total)

    (ties count ½, as in :func:`kernels.auc.auc`).  The last run of a batch is
    held back until the next batch shows whether it continues.

    >>> u = WeightedU(1)
    >>> u.add(np.array([0.1, 0.5, 0.5]), np.array([False, True, False]), np.array([[2], [1], [1]]))
    >>> u.add(np.array([0.9]), np.array([True]), np.array([[3]]))
    >>> u.finish(); u.u.tolist(), u.pos.tolist(), u.neg.tolist()   # .5 beats 2 (w of .1), ties 1 half: 2.5; .9: 3*3
    ([11.5], [4.0], [3.0])
    """

    def __init__(self, replicates: int) -> None:
        self.u = np.zeros(replicates)
        self.pos = np.zeros(replicates)
        self.neg = np.zeros(replicates)
        self.pending: tuple[float, np.ndarray, np.ndarray] | None = None

    def _runs(self, p: np.ndarray, n: np.ndarray) -> None:
        """Fold runs (rows of p, n: runs × R) that are complete, in ascending score order."""
        before = np.cumsum(n, axis=0) - n + self.neg
        self.u += (p * before + 0.5 * p * n).sum(axis=0)
        self.pos += p.sum(axis=0)
        self.neg += n.sum(axis=0)

    def add(self, scores: np.ndarray, positive: np.ndarray, weights: np.ndarray) -> None:
        if len(scores) == 0:
            return
        w = np.asarray(weights, dtype=np.float64)
        starts = np.flatnonzero(np.r_[True, scores[1:] != scores[:-1]])
        p = np.add.reduceat(w * positive[:, None], starts, axis=0)
        n = np.add.reduceat(w * ~positive[:, None], starts, axis=0)
        values = scores[starts]
        if self.pending is not None:
            score, pp, pn = self.pending
            if values[0] == score:
                p[0] += pp
                n[0] += pn
            else:
                self._runs(pp[None, :], pn[None, :])
        self._runs(p[:-1], n[:-1])
        self.pending = (float(values[-1]), p[-1], n[-1])

    def finish(self) -> None:
        if self.pending is not None:
            _, pp, pn = self.pending
            self._runs(pp[None, :], pn[None, :])
            self.pending = None


def merge_weighted_u(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """AUC per replicate from (U, P, N) partials of score ranges in ascending order (each range above the last).

    U = Σ_b U_b + P_b · Σ_{b' < b} N_b'; AUC = U / (P N), NaN where P or N is 0.
    """
    if not parts:
        return np.zeros(0)
    u = np.zeros_like(parts[0][0])
    pos = np.zeros_like(u)
    neg = np.zeros_like(u)
    for ub, pb, nb in parts:
        u = u + ub + pb * neg
        pos, neg = pos + pb, neg + nb
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((pos > 0) & (neg > 0), u / (pos * neg), np.nan)
