"""Sampled ranking metrics and their Krichene-Rendle correction (pure numpy + scipy.stats).

Protocol.  For each held-out target of a user the model scores the target and
m negatives sampled from the items the user did not interact with.  The
*sampled rank* of the target is

    r~ = 1 + (negatives scored above the target) + 1/2 (negatives scored equal to it)

Under uniform sampling of the m negatives without replacement from the n - 1
other items, a target at full-catalog rank r has r~ - 1 ~ Hypergeometric(
population n - 1, successes r - 1, draws m) (Binomial(m, (r - 1)/(n - 1)) with
replacement); E[r~ | r] = 1 + m (r - 1)/(n - 1) (Krichene & Rendle, KDD 2020).

Metrics of one target at rank r (|R| = 1, the formulas of the seed document):
recall@k = hit_rate@k = [r <= k]; precision@k = [r <= k] / k;
ndcg@k = [r <= k] / log2(r + 1); map@k = [r <= k] / r; mrr = 1 / r;
auc = (n - r) / (n - 1).

* *naive*: the metric at the sampled rank, with a catalog of m + 1 items
  (so ``auc`` is (m + 1 - r~) / m, which is unbiased for the full AUC);
* *corrected*: a value M^(j) for each sampled rank j = 1..m+1, fitted so that
  E[M^(r~) | r] tracks M(r) over r = 1..n (Krichene & Rendle's bias-variance
  estimator, section 5.3): with A[r, j] = P(r~ = j | r), c_j = sum_r A[r, j],

      M^ = argmin ||A x - M||^2 + gamma * sum_r Var(x_{r~} | r)
         = ((1 - gamma) A'A + gamma diag(c))^-1 A' M

  (the r are weighted uniformly; gamma in (0, 1] trades bias for variance;
  gamma -> 0 is the unregularised least squares that oscillates).

A fractional r~ (ties) takes the mean of the values at its two neighbouring
integer ranks, the expectation under a random tie-break when one negative ties.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from scipy import special, stats

#: metrics of a single target, by name: function of (rank array, k, catalog size) -> values
_METRIC_NAMES = ("recall", "precision", "ndcg", "map", "hit_rate")


def metric_at_rank(name: str, rank: np.ndarray, n: int, k: int | None = None) -> np.ndarray:
    """Value of metric ``name`` (``recall``, ``precision``, ``ndcg``, ``map``, ``hit_rate``
    at ``k``; ``mrr``, ``auc`` without) for one relevant item at (integer or fractional) ``rank``
    in a catalog of ``n`` items.

    >>> metric_at_rank("ndcg", np.array([1.0, 3.0, 11.0]), 100, 10).round(4).tolist()   # 1, 1/log2(4), 0
    [1.0, 0.5, 0.0]
    >>> metric_at_rank("auc", np.array([1.0, 100.0]), 100).tolist()
    [1.0, 0.0]
    """
    r = np.asarray(rank, dtype=np.float64)
    if name == "mrr":
        return 1.0 / r
    if name == "auc":
        return (n - r) / (n - 1.0)
    if k is None:
        raise ValueError(f"{name} needs k")
    top = r <= k
    if name in ("recall", "hit_rate"):
        return top.astype(np.float64)
    if name == "precision":
        return top / float(k)
    if name == "ndcg":
        return np.where(top, 1.0 / np.log2(r + 1.0), 0.0)
    if name == "map":
        return np.where(top, 1.0 / r, 0.0)
    raise ValueError(f"unknown metric {name!r}")


def rank_distribution(n: int, m: int, ranks: np.ndarray, replace: bool = False) -> np.ndarray:
    """A[i, j] = P(r~ = j + 1 | r = ranks[i]) for j = 0..m: the law of the sampled rank.

    >>> A = rank_distribution(100, 9, np.array([20]))
    >>> A[0, :4].round(4).tolist()              # REFERENCES.md golden values
    [0.134, 0.3182, 0.3138, 0.1682]
    """
    r = np.asarray(ranks, dtype=np.float64)[:, None]
    j = np.arange(m + 1, dtype=np.float64)[None, :]
    good = r - 1.0  # items the model ranks above the target: the draws that push it down
    if replace:
        return stats.binom.pmf(j, m, good / (n - 1.0))
    # log C(good, j) + log C(n - 1 - good, m - j) - log C(n - 1, m), by log-gamma (scipy's hypergeom.pmf
    # is elementwise and ~100x slower); impossible j (j > good or m - j > n - 1 - good) get 0
    bad = n - 1.0 - good
    ok = (j <= good) & (m - j <= bad)
    with np.errstate(invalid="ignore"):
        logp = _log_choose(good, j) + _log_choose(bad, m - j) - _log_choose(np.float64(n - 1), np.float64(m))
    return np.where(ok, np.exp(np.where(ok, logp, 0.0)), 0.0)


def _log_choose(a: npt.ArrayLike, b: npt.ArrayLike) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return special.gammaln(a + 1) - special.gammaln(b + 1) - special.gammaln(np.maximum(a - b, 0) + 1)


def correction_tables(
    metrics: Sequence[tuple[str, int | None]],
    n: int,
    m: int,
    gamma: float = 0.01,
    replace: bool = False,
    chunk: int = 20_000,
) -> list[np.ndarray]:
    """M^(j), j = 1..m+1, of each (metric, k): the Krichene-Rendle bias-variance estimator.

    One pass over the ranks in chunks (memory O(chunk * m), time O(n m)) builds
    A'A, c and A'M for every metric at once.  ``gamma`` in (0, 1].
    """
    if not 0 < gamma <= 1:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    if m < 1 or n < m + 1:
        raise ValueError(f"need 1 <= m < n, got m={m}, n={n}")
    ata = np.zeros((m + 1, m + 1))
    atb = np.zeros((m + 1, len(metrics)))
    col = np.zeros(m + 1)
    for lo in range(1, n + 1, chunk):
        ranks = np.arange(lo, min(lo + chunk, n + 1))
        a = rank_distribution(n, m, ranks, replace)
        b = np.column_stack([metric_at_rank(name, ranks, n, k) for name, k in metrics])
        ata += a.T @ a
        atb += a.T @ b
        col += a.sum(axis=0)
    solved = np.linalg.solve((1.0 - gamma) * ata + gamma * np.diag(col), atb)
    return [solved[:, i] for i in range(len(metrics))]


def correction_table(
    name: str, n: int, m: int, k: int | None = None, gamma: float = 0.01, replace: bool = False
) -> np.ndarray:
    """M^(j), j = 1..m+1, of one metric (see :func:`correction_tables`).

    gamma -> 0 gives the unregularised least squares, whose values oscillate:

    >>> correction_table("ndcg", 100, 9, 10, 1e-9).round(1)[:4].tolist()
    [0.9, -0.7, 0.4, -0.4]
    """
    return correction_tables([(name, k)], n, m, gamma, replace)[0]


def expected_naive(name: str, n: int, m: int, rank: int, k: int | None = None, replace: bool = False) -> float:
    """E[naive metric at r~ | r]: what the naive sampled metric converges to for a target at full rank r.

    REFERENCES.md's golden naive value 0.878856 (exact 0.386853) is the binomial law
    (sampling with replacement, the seed document's); without replacement it is 0.876023:

    >>> round(expected_naive("ndcg", 100, 9, 5, 10, replace=True), 6), round(expected_naive("ndcg", 100, 9, 5, 10), 6)
    (0.878856, 0.876023)
    """
    a = rank_distribution(n, m, np.array([rank]), replace)[0]
    return float(a @ metric_at_rank(name, np.arange(1, m + 2), m + 1, k))


def at_fractional(table: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Value of a per-sampled-rank ``table`` (index 0 = rank 1) at ranks that may end in .5."""
    r = np.asarray(rank, dtype=np.float64) - 1.0
    lo = np.floor(r).astype(np.int64)
    hi = np.ceil(r).astype(np.int64)
    return (table[lo] + table[hi]) / 2.0


def sampled_ranks(
    user: np.ndarray, score: np.ndarray, is_target: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sampled rank of every target among its user's negatives, all users at once.

    Parameters
    ----------
    user : integer code of each row's user.
    score : model score of each row (higher ranks first).
    is_target : True for held-out targets, False for sampled negatives.

    Returns
    -------
    (row index of each target, m, above, ties): every target of a user is ranked
    against all of that user's negatives; ``m`` = the user's negatives,
    ``above`` = negatives scored higher, ``ties`` = negatives scored equal.
    The sampled rank is 1 + above + ties / 2.

    >>> idx, m, above, ties = sampled_ranks(np.array([0, 0, 0, 0, 1, 1]),
    ...     np.array([0.5, 0.9, 0.5, 0.1, 0.3, 0.7]), np.array([1, 0, 0, 0, 1, 0], bool))
    >>> idx.tolist(), m.tolist(), above.tolist(), ties.tolist()
    ([0, 4], [3, 1], [1, 1], [1, 0])
    """
    user = np.asarray(user, dtype=np.int64)
    score = np.asarray(score, dtype=np.float64)
    target = np.asarray(is_target).astype(bool)
    neg = (~target).astype(np.int64)
    order = np.lexsort((score, user))
    u, s, ng = user[order], score[order], neg[order]
    total = len(u)
    if total == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    new_user = np.r_[True, u[1:] != u[:-1]]
    new_run = new_user | np.r_[True, s[1:] != s[:-1]]
    cum = np.cumsum(ng)
    idx = np.arange(total)
    user_start = np.maximum.accumulate(np.where(new_user, idx, 0))
    run_start = np.maximum.accumulate(np.where(new_run, idx, 0))
    run_id = np.cumsum(new_run) - 1
    run_neg = np.bincount(run_id, weights=ng).astype(np.int64)
    neg_before_user = cum[user_start] - ng[user_start]
    neg_before_run = cum[run_start] - ng[run_start] - neg_before_user
    user_id = np.cumsum(new_user) - 1
    m_user = np.bincount(user_id, weights=ng).astype(np.int64)[user_id]
    ties = run_neg[run_id]
    above = m_user - neg_before_run - ties
    t = ng == 0
    rows = order[t]
    back = np.argsort(rows, kind="stable")
    return rows[back], m_user[t][back], above[t][back], ties[t][back]


def metric_names(ks: Sequence[int]) -> list[tuple[str, int | None]]:
    """(metric, k) pairs reported for sampled evaluation, in order."""
    return [("auc", None), ("mrr", None)] + [(name, k) for k in ks for name in _METRIC_NAMES]


def column(name: str, k: int | None, kind: str) -> str:
    """Per-user column: ``sampled_ndcg_at_10`` (naive), ``corrected_ndcg_at_10``."""
    base = name if k is None else f"{name}_at_{k}"
    return f"{kind}_{base}"


def tables_for(
    n: int, ms: Sequence[int], ks: Sequence[int], gamma: float, replace: bool = False
) -> dict[int, dict[str, np.ndarray]]:
    """{m: {corrected column: M^ table}} for every distinct number of negatives ``m`` (driver side).

    AUC is not corrected: its naive value is already unbiased; its "corrected"
    column is the naive one.
    """
    out: dict[int, dict[str, np.ndarray]] = {}
    for m in sorted({int(x) for x in ms}):
        if m < 1 or m >= n:
            continue
        fitted = [(name, k) for name, k in metric_names(ks) if name != "auc"]
        tables = {
            column(name, k, "corrected"): t
            for (name, k), t in zip(fitted, correction_tables(fitted, n, m, gamma, replace), strict=True)
        }
        tables[column("auc", None, "corrected")] = metric_at_rank("auc", np.arange(1, m + 2), m + 1)
        out[m] = tables
    return out


def target_metrics(
    rank: np.ndarray, m: np.ndarray, ks: Sequence[int], tables: Mapping[int, Mapping[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Naive and corrected metric values of each target from its sampled rank and m.

    Targets whose m has no table (m = 0, or m >= n) get NaN corrected values.
    """
    rank = np.asarray(rank, dtype=np.float64)
    m = np.asarray(m, dtype=np.int64)
    out: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for name, k in metric_names(ks):
            if name == "auc":
                naive = np.where(m > 0, (m + 1 - rank) / m, np.nan)
            else:  # a half rank (one tie) takes the mean of its two neighbours, as the corrected values do
                naive = (metric_at_rank(name, np.floor(rank), 0, k) + metric_at_rank(name, np.ceil(rank), 0, k)) / 2
            out[column(name, k, "sampled")] = np.where(m > 0, naive, np.nan)
            corrected = np.full(len(rank), np.nan)
            for mm, tabs in tables.items():
                at = m == mm
                if at.any():
                    corrected[at] = at_fractional(tabs[column(name, k, "corrected")], rank[at])
            out[column(name, k, "corrected")] = corrected
    return out


def user_columns(ks: Sequence[int]) -> list[tuple[str, str]]:
    """(name, Spark type) of :func:`score_sampled`'s per-user rows."""
    cols = [("user_id", "string"), ("n_targets", "long"), ("n_negatives", "long"), ("sampled_rank", "double")]
    for name, k in metric_names(ks):
        cols += [(column(name, k, "sampled"), "double"), (column(name, k, "corrected"), "double")]
    return cols


def score_sampled(frame, ks: Sequence[int], tables: Mapping[int, Mapping[str, np.ndarray]]):
    """One row per user: targets, negatives, mean sampled rank and the means over the user's
    targets of every naive (``sampled_*``) and corrected (``corrected_*``) metric.

    ``frame``: pandas rows ``user_id, score, is_target`` (all rows of each user
    present).  A user without negatives has NaN metrics; without targets, no row.
    """
    import pandas as pd

    names = [n for n, _ in user_columns(ks)]
    code, users = pd.factorize(frame["user_id"])
    rows, m, above, ties = sampled_ranks(
        code, frame["score"].to_numpy(dtype=np.float64), frame["is_target"].to_numpy(dtype=bool)
    )
    if len(rows) == 0:
        return pd.DataFrame(
            {
                n: pd.Series(dtype={"string": object, "long": "int64", "double": "float64"}[t])
                for n, t in user_columns(ks)
            }
        )
    owner = code[rows]
    uniq, idx = np.unique(owner, return_inverse=True)
    count = np.bincount(idx).astype(np.float64)
    rank = 1.0 + above + ties / 2.0
    values = target_metrics(rank, m, ks, tables)

    def mean(x: np.ndarray) -> np.ndarray:
        ok = ~np.isnan(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.bincount(idx[ok], weights=x[ok], minlength=len(uniq)) / np.bincount(idx[ok], minlength=len(uniq))

    out = {
        "user_id": np.asarray(users, dtype=object)[uniq],
        "n_targets": count.astype(np.int64),
        "n_negatives": np.bincount(idx, weights=m).astype(np.int64) // count.astype(np.int64),
        "sampled_rank": mean(rank),
    }
    out.update({name: mean(v) for name, v in values.items()})
    return pd.DataFrame(out, columns=names)
