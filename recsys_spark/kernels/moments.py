"""Mergeable sums and moments of the per-user table (pure numpy, no Spark).

Each partition of the per-user table reduces to one small :class:`Moments`
per slice; partials merge in any order (Chan et al.'s pairwise update for the
variance), so the driver never sees a row per user.

>>> a = Moments.of({"x": np.array([1.0, 2.0])}, {"x": np.array([1.0, 1.0])}, {})
>>> b = Moments.of({"x": np.array([3.0, np.nan])}, {"x": np.array([2.0, 5.0])}, {})
>>> m = a.merge(b)
>>> m.n["x"], m.mean["x"], round(m.sd("x"), 6), m.wsum["x"], m.w["x"]   # sd of 1, 2, 3 is 1
(3.0, 2.0, 1.0, 9.0, 4.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from recsys_spark.kernels.composite import Composite, table_values
from recsys_spark.kernels.fscores import f_alpha
from recsys_spark.registry import LIST_METRICS, f_score_name, metric_name


@dataclass
class Moments:
    """Per column: count, mean and sum of squared deviations of its non-NaN values,
    the weighted sum and weight of those values; plus plain sums.

    For the delta-method interval of the weighted mean Σ(x w) / Σw (a ratio of
    per-user sums, numerator x w, denominator w) each column also carries
    ``wsq`` = Σ(x w)², ``w2`` = Σw² and ``xw2`` = Σ(x w) w.  Cross products of
    plain sums (``hits_at_10*n_relevant``) are plain sums too (:func:`user_table_moments`).
    """

    n: dict[str, float] = field(default_factory=dict)
    mean: dict[str, float] = field(default_factory=dict)
    m2: dict[str, float] = field(default_factory=dict)
    wsum: dict[str, float] = field(default_factory=dict)
    w: dict[str, float] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=dict)
    wsq: dict[str, float] = field(default_factory=dict)
    w2: dict[str, float] = field(default_factory=dict)
    xw2: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls, values: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray], sums: Mapping[str, np.ndarray]
    ) -> Moments:
        """Moments of ``values[c]`` (NaN = missing) weighted by ``weights[c]``; totals of ``sums``."""
        out = cls()
        for name, column in values.items():
            x = np.asarray(column, dtype=np.float64)
            ok = ~np.isnan(x)
            xs = x[ok]
            ws = np.asarray(weights[name], dtype=np.float64)[ok]
            n = float(len(xs))
            mean = float(xs.mean()) if n else 0.0
            out.n[name], out.mean[name] = n, mean
            out.m2[name] = float(np.sum((xs - mean) ** 2))
            out.wsum[name], out.w[name] = float(np.sum(xs * ws)), float(np.sum(ws))
            xw = xs * ws
            out.wsq[name], out.w2[name], out.xw2[name] = (
                float(np.dot(xw, xw)),
                float(np.dot(ws, ws)),
                float(np.dot(xw, ws)),
            )
        out.sums = {name: float(np.sum(np.asarray(v, dtype=np.float64))) for name, v in sums.items()}
        return out

    def merge(self, other: Moments) -> Moments:
        out = Moments()
        for name in self.n.keys() | other.n.keys():
            na, nb = self.n.get(name, 0.0), other.n.get(name, 0.0)
            ma, mb = self.mean.get(name, 0.0), other.mean.get(name, 0.0)
            n = na + nb
            delta = mb - ma
            out.n[name] = n
            out.mean[name] = ma + delta * nb / n if n else 0.0
            out.m2[name] = self.m2.get(name, 0.0) + other.m2.get(name, 0.0) + (delta**2 * na * nb / n if n else 0.0)
            out.wsum[name] = self.wsum.get(name, 0.0) + other.wsum.get(name, 0.0)
            out.w[name] = self.w.get(name, 0.0) + other.w.get(name, 0.0)
            for attr in ("wsq", "w2", "xw2"):
                getattr(out, attr)[name] = getattr(self, attr).get(name, 0.0) + getattr(other, attr).get(name, 0.0)
        for name in self.sums.keys() | other.sums.keys():
            out.sums[name] = self.sums.get(name, 0.0) + other.sums.get(name, 0.0)
        return out

    def sd(self, name: str) -> float | None:
        """Sample standard deviation (None below two values)."""
        n = self.n.get(name, 0.0)
        return math.sqrt(self.m2[name] / (n - 1)) if n > 1 else None

    def to_rows(self) -> list[tuple[str, str, float]]:
        """(part, name, value) triples: a flat form that travels as an Arrow batch."""
        rows = []
        for part in ("n", "mean", "m2", "wsum", "w", "sums", "wsq", "w2", "xw2"):
            rows += [(part, name, value) for name, value in getattr(self, part).items()]
        return rows

    @classmethod
    def from_rows(cls, rows) -> Moments:
        out = cls()
        for part, name, value in rows:
            getattr(out, part)[name] = value
        return out


def user_table_moments(
    frame, ks, composites: Sequence[Composite] = (), f_alphas: Sequence[float] = (1.0,)
) -> dict[str, Moments]:
    """{slice: Moments} of rows of the per-user table (:data:`~recsys_spark.schema.USER_METRICS_COLUMNS`).

    Means of ``auc`` (weighted by ``n_exposures``) and of every list metric at each k, named
    :func:`~recsys_spark.registry.metric_name` (``ndcg@10``, weighted by ``n_lists_ranked``); sums of the
    counts and of ``hits@k``, of users and of users without a ranked list. NaN or null values are missing.
    Per alpha of ``f_alphas`` and k, the mean of each user's F_alpha@k from its precision@k and recall@k
    (:func:`kernels.fscores.f_alpha`, named ``f1@10``, ``f0.5@10``), weighted by ``n_lists_ranked``.
    A user's values without a cut-off are read from its row of the first k, so the rows of one user may
    arrive in different batches.  Each composite of ``composites`` is one more mean, under its name, of the
    users' composite values (:mod:`recsys_spark.kernels.composite`; those need a user's rows in one frame).
    """
    means = ["auc", "mrr"]
    sums = ["n_lists", "n_lists_ranked", "n_relevant", "n_exposures"]
    out: dict[str, Moments] = {}
    for slice_value, g in frame.groupby("slice", sort=False, observed=True):
        k_of_row = g["k"].to_numpy()
        values: dict[str, np.ndarray] = {}
        weights: dict[str, np.ndarray] = {}
        totals: dict[str, np.ndarray] = {}
        for j, k in enumerate(ks):
            rows = g[k_of_row == k]
            ranked = rows["n_lists_ranked"].to_numpy(dtype=np.float64)
            relevant = rows["n_relevant"].to_numpy(dtype=np.float64)
            if j == 0:
                for c in means:
                    values[c] = rows[c].to_numpy(dtype=np.float64, na_value=np.nan)
                    weights[c] = ranked
                weights["auc"] = rows["n_exposures"].to_numpy(dtype=np.float64)
                totals.update({c: rows[c].to_numpy(dtype=np.float64) for c in sums})
                totals["users"] = np.ones(len(rows))
                totals["users_without_ranked_list"] = ranked == 0
                totals["n_lists_ranked*n_lists_ranked"] = ranked * ranked
                totals["n_relevant*n_relevant"] = relevant * relevant
                totals["n_relevant*n_lists_ranked"] = relevant * ranked  # F_alpha global's interval
            for m in LIST_METRICS:
                values[metric_name(m, k)] = rows[m].to_numpy(dtype=np.float64, na_value=np.nan)
                weights[metric_name(m, k)] = ranked
            for alpha in f_alphas:
                name = metric_name(f_score_name(alpha), k)
                values[name] = f_alpha(values[metric_name("precision", k)], values[metric_name("recall", k)], alpha)
                weights[name] = ranked
            # the per-user products the delta-method intervals of precision and recall ``global`` need
            # (x = hits@k, y = ranked lists or relevant items), from the k row itself: a user's rows of
            # different k may come in different batches, its counts repeat on each of them
            hits, name = rows["hits"].to_numpy(dtype=np.float64), metric_name("hits", k)
            totals[name] = hits
            totals[f"{name}*{name}"] = hits * hits
            totals[f"{name}*n_lists_ranked"] = hits * ranked
            totals[f"{name}*n_relevant"] = hits * relevant
        for name, value in table_values(composites, g, ks).items():
            values[name], weights[name] = value, np.ones(len(value))
        out[str(slice_value)] = Moments.of(values, weights, totals)
    return out


def merge_by_slice(a: dict[str, Moments], b: dict[str, Moments]) -> dict[str, Moments]:
    """Merge two {slice: Moments} maps (``a`` is updated and returned)."""
    for slice_value, m in b.items():
        a[slice_value] = a[slice_value].merge(m) if slice_value in a else m
    return a
