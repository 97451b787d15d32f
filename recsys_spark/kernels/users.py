"""Per-user metrics of a batch of many users (pandas in, pandas out, no Spark).

:func:`score_users` is what the Spark layer calls once per batch of users; it
ranks every list, scores all lists at once (:func:`ranking.list_metrics`),
computes every user's AUC at once (:func:`auc.grouped_auc`) and reduces lists
to users.  Everything is segment arithmetic on sorted arrays: no Python call
per user, list or row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from recsys_spark.kernels.auc import grouped_auc
from recsys_spark.kernels.ranking import Gain, list_metrics, segment_starts
from recsys_spark.registry import LIST_METRICS, metric_name
from recsys_spark.schema import USER, USER_COLUMNS, USER_K_COLUMNS, USER_METRICS_COLUMNS

_DTYPES = {"string": object, "int": np.int32, "long": np.int64, "double": np.float64}

#: input columns of :func:`score_users`
INPUT_COLUMNS = ("slice", "user_id", "list_id", "item_id", "position", "score", "relevance")


def user_table(per_user: Mapping[str, Any], per_k: Mapping[str, np.ndarray], ks: Sequence[int]) -> pd.DataFrame:
    """The per-user table's layout (:data:`~recsys_spark.schema.USER_METRICS_COLUMNS`): one row per (slice, user, k).

    This function is the one place that layout is built; every writer of ``user_metrics`` goes through it.

    Parameters
    ----------
    per_user : ``slice``, ``user_id`` and :data:`~recsys_spark.schema.USER_COLUMNS`, one value per user
        (arrays of length U).
    per_k : :data:`~recsys_spark.schema.USER_K_COLUMNS`, arrays of shape (U, len(ks)), column j for ``ks[j]``.
    ks : the cut-offs.

    Returns
    -------
    DataFrame of U * len(ks) rows, a user's rows together in ``ks`` order; the values that have no cut-off
    repeat on each of them. Pure reshaping (``np.repeat``, ``ravel``): no Python call per user.

    Examples
    --------
    >>> t = user_table({"slice": ["all"], "user_id": ["u"], "n_exposures": [4], "n_relevant": [1], "n_lists": [1],
    ...                 "n_lists_ranked": [1], "auc": [0.5], "mrr": [0.5]},
    ...                {m: np.array([[0.0, 1.0]]) for m in LIST_METRICS} | {"hits": np.array([[0, 1]])}, (1, 3))
    >>> t[["user_id", "k", "auc", "ndcg", "hits"]].to_dict("list")
    {'user_id': ['u', 'u'], 'k': [1, 3], 'auc': [0.5, 0.5], 'ndcg': [0.0, 1.0], 'hits': [0, 1]}
    """
    n_k = len(ks)
    n_users = len(per_user[USER])
    out: dict[str, np.ndarray] = {}
    for name, kind in USER_METRICS_COLUMNS:
        if name == "k":
            values = np.tile(np.asarray(ks, dtype=np.int32), n_users)
        elif name in USER_K_COLUMNS:
            values = np.asarray(per_k[name]).reshape(n_users, n_k).ravel()
        else:
            values = np.repeat(np.asarray(per_user[name], dtype=_DTYPES[kind]), n_k)
        out[name] = values.astype(_DTYPES[kind], copy=False)
    return pd.DataFrame(out, columns=[name for name, _ in USER_METRICS_COLUMNS])


def _rank_order(
    unit: np.ndarray, lst: np.ndarray, score: np.ndarray, position: np.ndarray, item: pd.Series
) -> np.ndarray:
    """Row order that ranks every list: unit, list, score desc, position asc, item id asc.

    The item id is only consulted (it costs a string sort) when some list has
    two rows with equal score and position.
    """
    order = np.lexsort((position, -score, lst, unit))
    u, li, s, p = unit[order], lst[order], score[order], position[order]
    tied = (u[1:] == u[:-1]) & (li[1:] == li[:-1]) & (s[1:] == s[:-1]) & (p[1:] == p[:-1])
    if tied.any():
        # by the ids' own order, whatever the dtype (a categorical would sort by its categories)
        item_code, _ = pd.factorize(np.asarray(item, dtype=object), sort=True)
        order = np.lexsort((item_code, position, -score, lst, unit))
    return order


def score_users(frame: pd.DataFrame, ks: Sequence[int], gain: Gain = "exponential") -> pd.DataFrame:
    """One row per (slice, user) with counts, AUC and the mean of each list metric.

    Parameters
    ----------
    frame : one row per exposed item with :data:`INPUT_COLUMNS`; ``list_id``
        names the list the row belongs to (request, session or user), ``score``
        is non-null (higher ranks first), ``position`` is the displayed 1-based
        position, ``relevance`` >= 0.  Rows of a user may come in any order.
    ks : cut-offs.
    gain : NDCG gain, ``exponential`` (2^rel - 1) or ``linear``.

    Returns
    -------
    The per-user table (:func:`user_table`), one row per (slice, user, k): ``auc`` is the user's AUC over all
    their exposures (NaN with only positives or only negatives); ``mrr`` and the list metrics are means over
    the user's lists that hold at least one relevant item (``n_lists_ranked``; NaN when there is none);
    ``hits`` is the sum over those lists.
    """
    return user_table(*score_units(frame, ks, gain), ks)


def score_units(
    frame: pd.DataFrame, ks: Sequence[int], gain: Gain = "exponential"
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """:func:`score_users` before the table's layout: ``(per_user, per_k)`` as :func:`user_table` takes them, one
    value (one row of ``len(ks)`` values) per (slice, user) unit, units in the order of their codes (slice, then
    user, each in order of first appearance); ``slice`` and ``user_id`` hold the frame's own values.
    """
    if frame.empty:
        empty = np.empty(0)
        return (
            {name: empty for name in ("slice", USER, *USER_COLUMNS)},
            {name: np.empty((0, len(ks))) for name in USER_K_COLUMNS},
        )
    slice_code, slices = pd.factorize(frame["slice"])
    user_code, users = pd.factorize(frame["user_id"])
    unit = slice_code.astype(np.int64) * len(users) + user_code
    list_code, _ = pd.factorize(frame["list_id"])
    score = frame["score"].to_numpy(dtype=np.float64, na_value=-np.inf)
    position = frame["position"].to_numpy(dtype=np.float64, na_value=np.inf)
    relevance = frame["relevance"].to_numpy(dtype=np.float64, na_value=0.0)

    order = _rank_order(unit, list_code, score, position, frame["item_id"])
    unit_s, list_s, rel_s = unit[order], list_code[order], relevance[order]
    starts = segment_starts(_run_ids(unit_s, list_s))
    list_index = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(order)]))
    ideal = rel_s[np.lexsort((-rel_s, list_index))]
    per_list = list_metrics(starts, rel_s, ideal, ks, gain)

    # reduce lists to units (slice, user)
    unit_of_list = unit_s[starts]
    units, unit_idx = np.unique(unit_of_list, return_inverse=True)
    n_units = len(units)
    ranked = per_list["n_relevant"] > 0

    def unit_sum(values: np.ndarray) -> np.ndarray:
        return np.bincount(unit_idx, weights=np.where(ranked, values, 0.0), minlength=n_units)

    n_ranked = np.bincount(unit_idx, weights=ranked, minlength=n_units)
    with np.errstate(divide="ignore", invalid="ignore"):

        def unit_mean(values: np.ndarray) -> np.ndarray:
            return np.where(n_ranked > 0, unit_sum(values) / n_ranked, np.nan)

        # AUC per unit over all its rows (codes of ``units`` remapped to 0..U-1)
        row_unit = np.searchsorted(units, unit)
        auc, n_pos, n_neg = grouped_auc(row_unit, relevance > 0, score, n_units)
        per_user = {
            "slice": np.asarray(slices, dtype=object)[units // len(users)],
            USER: np.asarray(users, dtype=object)[units % len(users)],
            "n_exposures": (n_pos + n_neg).astype(np.int64),
            "n_relevant": n_pos.astype(np.int64),
            "n_lists": np.bincount(unit_idx, minlength=n_units).astype(np.int64),
            "n_lists_ranked": n_ranked.astype(np.int64),
            "auc": auc,
            "mrr": unit_mean(per_list["mrr"]),
        }
        per_k = {m: np.column_stack([unit_mean(per_list[metric_name(m, k)]) for k in ks]) for m in LIST_METRICS}
        per_k["hits"] = np.column_stack([unit_sum(per_list[metric_name("hits", k)]) for k in ks]).astype(np.int64)
    return per_user, per_k


def _run_ids(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Id of each run of equal (a, b) pairs in sorted arrays."""
    new = np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])]
    return np.cumsum(new)
