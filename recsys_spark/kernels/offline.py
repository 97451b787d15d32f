"""Offline evaluation of a model before it ships: per-user kernels (pure numpy/pandas, no Spark).

Three families, each scoring a whole batch of users at once (no Python call per user):

* :func:`score_lists` -- top-K lists against held-out truth, through the daily
  job's :func:`ranking.list_metrics`, plus intra-list diversity, novelty and
  serendipity of each list;
* :func:`score_predictions` -- pointwise CTR scores with labels: per-user AUC
  (:func:`auc.grouped_auc`), log loss and calibration sums;
* :func:`rating_errors` -- rating prediction errors, rounding and a custom
  distortion table; per-user and per-item means are plain sums (Spark side).

Definitions (docs/offline.md has them with the edge cases):

* truth T(u) = the user's held-out items with relevance > 0; the list L(u) is
  the model's list after duplicates and train items are removed, ranked 1..|L|;
* recall@k = hits@k / |T(u)|; precision@k = hits@k / k; map@k divides by
  min(|T(u)|, k); ndcg@k's ideal DCG comes from all of T(u) (the truth, not the
  list's own items) with the daily job's gain; mrr = 1 / rank of the first
  relevant list item, 0 when none is in the list (no cut-off);
* a user with truth but no list scores 0 on every accuracy metric; a user with
  a list but no truth has no accuracy value (NaN, excluded and counted);
* beyond accuracy, on the top ``k_max`` = max(ks) items of the list:
  intra_list_diversity = 1 - sum_c n_c (n_c - 1) / (L (L - 1)) (Gini-Simpson),
  the share of pairs of list items in different categories (NaN below 2 items
  or without categories); not the daily job's ``category_diversity``, a
  normalised entropy, hence its own name;
  novelty = mean over the list of the item's self-information
  :func:`health.self_information` from the train popularity;
  serendipity = |{i in top list : i in T(u) and category(i) not in the
  categories of u's train items}| / L, the second source document's
  "unlike the user's history, yet satisfying" made countable (NaN without a
  list, without truth, or without categories; NaN, and flagged in
  ``serendipity_without_history``, for a user none of whose train items has a
  known category: "unlike the history" needs a history, and every category
  would count as new, making serendipity the user's hit share).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from recsys_spark.kernels.auc import grouped_auc
from recsys_spark.kernels.fscores import CONFUSION_COUNTS, confusion_column, user_confusion
from recsys_spark.kernels.ranking import Gain, list_metrics
from recsys_spark.registry import OFFLINE_LIST_METRICS

#: input columns of :func:`score_lists`
LIST_INPUT = ("user_id", "rank", "relevance", "category", "self_info", "new_category", "has_history")
LIST_METRICS = OFFLINE_LIST_METRICS  # the per-user table's k columns


def list_columns(ks: Sequence[int]) -> list[tuple[str, str]]:
    """(name, Spark type) of the per-user output of :func:`score_lists`."""
    cols = [("user_id", "string"), ("n_list", "long"), ("n_truth", "long"), ("mrr", "double")]
    for k in ks:
        cols += [(f"{m}_at_{k}", "double") for m in LIST_METRICS] + [(f"hits_at_{k}", "long")]
    cols += [("intra_list_diversity", "double"), ("novelty", "double"), ("serendipity", "double")]
    return cols + [("serendipity_without_history", "long")]


def empty_table(columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """A table without rows with ``columns`` ((name, Spark type) pairs) and their pandas dtypes.

    >>> empty_table([("user_id", "string"), ("n", "long"), ("x", "double")]).dtypes.astype(str).tolist()
    ['object', 'int64', 'float64']
    """
    dtypes = {"string": object, "long": "int64", "double": "float64"}
    return pd.DataFrame({name: pd.Series(dtype=dtypes[kind]) for name, kind in columns})


def score_lists(frame: pd.DataFrame, ks: Sequence[int], gain: Gain = "exponential") -> pd.DataFrame:
    """One row per user: accuracy of the list against the truth, and beyond-accuracy values.

    Parameters
    ----------
    frame : rows of :data:`LIST_INPUT`; a list row has its 1-based ``rank``
        (distinct within the user), a truth item missing from the list has rank
        NaN; ``relevance`` > 0 marks truth; ``category`` (None = unknown or no
        items table), ``self_info`` (NaN = unknown) and ``new_category`` (1.0
        when the item's category is absent from the user's train history, NaN
        when unknown) describe list rows; ``has_history`` (any row of the user)
        is 0.0 when none of the user's train items has a known category, 1.0
        when one has, NaN when unknown (no train or items table).
    ks : cut-offs; beyond-accuracy values use the top max(ks) items.

    Returns
    -------
    DataFrame with :func:`list_columns`.

    Examples
    --------
    List a, b, c (b relevant), truth {b, d}: hits@2 = 1, recall@2 = 1/2,
    precision@2 = 1/2, mrr = 1/2, ndcg@2 = (1/log2 3) / (1 + 1/log2 3).

    >>> f = pd.DataFrame({"user_id": ["u"] * 4, "rank": [1, 2, 3, np.nan], "relevance": [0, 1, 0, 1.0],
    ...                   "category": None, "self_info": np.nan, "new_category": np.nan, "has_history": np.nan})
    >>> r = score_lists(f, [2], "linear").iloc[0]
    >>> float(r["recall_at_2"]), float(r["precision_at_2"]), float(r["mrr"]), round(float(r["ndcg_at_2"]), 4)
    (0.5, 0.5, 0.5, 0.3869)
    """
    ks = tuple(ks)
    k_max = max(ks)
    if frame.empty:
        return empty_table(list_columns(ks))
    user_code, users = pd.factorize(frame["user_id"])
    rank = frame["rank"].to_numpy(dtype=np.float64, na_value=np.nan)
    rel = frame["relevance"].to_numpy(dtype=np.float64, na_value=0.0)
    in_list = ~np.isnan(rank)
    n_users = len(users)
    order = np.lexsort((np.where(in_list, rank, np.inf), ~in_list, user_code))
    u, r_in, rel_s = user_code[order], in_list[order], rel[order]
    n_list = np.bincount(u, weights=r_in, minlength=n_users).astype(np.int64)
    # each user's rows: its list, then zero-relevance padding up to k_max, then its truth items outside
    # the list (at ranks > k_max, so they count in R and in the ideal DCG but never as hits)
    pad = np.maximum(k_max - n_list, 0)
    n_rows = np.bincount(u, minlength=n_users) + pad
    starts = np.r_[0, np.cumsum(n_rows)[:-1]].astype(np.int64)
    total = int(n_rows.sum())
    seq = np.arange(len(u)) - np.r_[0, np.cumsum(np.bincount(u, minlength=n_users))[:-1]][u]
    dest = starts[u] + seq + np.where(r_in, 0, pad[u])
    rel_flat = np.zeros(total)
    rel_flat[dest] = rel_s
    owner = np.repeat(np.arange(n_users), n_rows)
    ideal = rel_flat[np.lexsort((-rel_flat, owner))]
    per = list_metrics(starts, rel_flat, ideal, ks, gain)
    has_truth = per["n_relevant"] > 0
    nan = np.full(n_users, np.nan)
    out: dict[str, np.ndarray] = {
        "user_id": np.asarray(users, dtype=object),
        "n_list": n_list,
        "n_truth": per["n_relevant"].astype(np.int64),
        # the first relevant row may be a truth item outside the list: then the list has none
        "mrr": np.where(has_truth, np.where(1.0 / per["mrr"] <= n_list, per["mrr"], 0.0), nan),
    }
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in ks:
            p, rc = per[f"precision@{k}"], per[f"recall@{k}"]
            out[f"precision_at_{k}"] = p
            out[f"recall_at_{k}"] = rc
            out[f"f1_at_{k}"] = np.where(has_truth, np.where(p + rc > 0, 2 * p * rc / (p + rc), 0.0), nan)
            out[f"ndcg_at_{k}"] = np.where(has_truth, np.nan_to_num(per[f"ndcg@{k}"]), nan)
            out[f"map_at_{k}"] = per[f"map@{k}"]
            out[f"hit_rate_at_{k}"] = per[f"hit_rate@{k}"]
            out[f"hits_at_{k}"] = per[f"hits@{k}"].astype(np.int64)
        out.update(_beyond_accuracy(frame, user_code, n_users, in_list, rank, rel, k_max, has_truth))
    return pd.DataFrame(out)  # built in list_columns' order


def _beyond_accuracy(
    frame: pd.DataFrame,
    user_code: np.ndarray,
    n_users: int,
    in_list: np.ndarray,
    rank: np.ndarray,
    rel: np.ndarray,
    k_max: int,
    has_truth: np.ndarray,
) -> dict[str, np.ndarray]:
    top = in_list & (rank <= k_max)
    u = user_code[top]
    size = np.bincount(u, minlength=n_users).astype(np.float64)
    category = frame["category"].to_numpy(dtype=object)[top]
    known = pd.notna(category)
    diversity = np.full(n_users, np.nan)
    if known.any():
        cat_code, _ = pd.factorize(np.where(known, category, "\x00unknown"))
        pair_code = u.astype(np.int64) * (int(cat_code.max()) + 1) + cat_code
        _, inverse, counts = np.unique(pair_code, return_inverse=True, return_counts=True)
        first = np.unique(inverse, return_index=True)[1]
        per_pair = counts.astype(np.float64)
        same = np.bincount(u[first], weights=per_pair * (per_pair - 1), minlength=n_users)
        with np.errstate(divide="ignore", invalid="ignore"):
            diversity = np.where(size >= 2, 1.0 - same / (size * (size - 1)), np.nan)
    info = frame["self_info"].to_numpy(dtype=np.float64, na_value=np.nan)[top]
    ok = ~np.isnan(info)
    with np.errstate(divide="ignore", invalid="ignore"):
        novelty = np.bincount(u[ok], weights=info[ok], minlength=n_users) / np.bincount(u[ok], minlength=n_users)
        new = frame["new_category"].to_numpy(dtype=np.float64, na_value=np.nan)[top]
        surprising = (rel[top] > 0) & (new > 0)
        serendipity = np.bincount(u, weights=surprising, minlength=n_users) / size
        has_categories = np.bincount(u, weights=~np.isnan(new), minlength=n_users) > 0
        history = frame["has_history"].to_numpy(dtype=np.float64, na_value=np.nan)
        no_history = np.bincount(user_code, weights=history == 0, minlength=n_users) > 0
        # has_categories implies a non-empty top list (size > 0)
        defined = has_truth & has_categories
        serendipity = np.where(defined & ~no_history, serendipity, np.nan)
    return {
        "intra_list_diversity": diversity,
        "novelty": novelty,
        "serendipity": serendipity,
        "serendipity_without_history": (defined & no_history).astype(np.int64),
    }


# ---------------------------------------------------------------- pointwise predictions

PREDICTION_INPUT = ("user_id", "score", "label")
PREDICTION_COLUMNS = (
    ("user_id", "string"),
    ("n_predictions", "long"),
    ("n_positive", "long"),
    ("auc", "double"),
    ("logloss_sum", "double"),
    ("logloss", "double"),
    ("predicted_sum", "double"),
)
#: predictions are clipped to [EPS, 1 - EPS] in the log loss, as scikit-learn does (float64's eps)
EPS = float(np.finfo(np.float64).eps)


def log_loss_terms(label: np.ndarray, p: np.ndarray) -> np.ndarray:
    """-[y log p + (1 - y) log(1 - p)] per row, p clipped to [EPS, 1 - EPS].

    >>> log_loss_terms(np.array([1, 0]), np.array([0.5, 0.5])).round(6).tolist()   # ln 2 each
    [0.693147, 0.693147]
    """
    p = np.clip(np.asarray(p, dtype=np.float64), EPS, 1 - EPS)
    y = np.asarray(label, dtype=np.float64)
    return -(y * np.log(p) + (1 - y) * np.log1p(-p))


def prediction_columns(thresholds: int = 0) -> tuple[tuple[str, str], ...]:
    """:data:`PREDICTION_COLUMNS` and, per threshold index i < ``thresholds``, the user's confusion counts
    ``tp_ti``, ``fp_ti``, ``tn_ti``, ``fn_ti`` (long; :func:`kernels.fscores.user_confusion`)."""
    counts = tuple((confusion_column(c, i), "long") for i in range(thresholds) for c in CONFUSION_COUNTS)
    return PREDICTION_COLUMNS + counts


def score_predictions(frame: pd.DataFrame, thresholds: Sequence[float] = ()) -> pd.DataFrame:
    """One row per user: counts, AUC (NaN with one class only), log loss sum and mean, sum of predictions,
    and its confusion counts at each of ``thresholds`` (:func:`prediction_columns`).

    ``label`` > 0 is a positive; ``score`` is the predicted probability (the
    log loss and calibration need it in [0, 1]; the AUC only needs its order).
    """
    columns = prediction_columns(len(thresholds))
    names = [n for n, _ in columns]
    if frame.empty:
        return empty_table(columns)
    code, users = pd.factorize(frame["user_id"])
    score = frame["score"].to_numpy(dtype=np.float64)
    label = frame["label"].to_numpy(dtype=np.float64) > 0
    g = len(users)
    auc, n_pos, n_neg = grouped_auc(code, label, score, g)
    loss = np.bincount(code, weights=log_loss_terms(label, score), minlength=g)
    n = n_pos + n_neg
    return pd.DataFrame(
        {
            "user_id": np.asarray(users, dtype=object),
            "n_predictions": n.astype(np.int64),
            "n_positive": n_pos.astype(np.int64),
            "auc": auc,
            "logloss_sum": loss,
            "logloss": loss / n,
            "predicted_sum": np.bincount(code, weights=score, minlength=g),
            **user_confusion(code, score, label, g, thresholds),
        },
        columns=names,
    )


def calibration_bin(p: np.ndarray, bins: int) -> np.ndarray:
    """Equal-width bin of a probability: min(floor(p * bins), bins - 1), p clipped to [0, 1].

    >>> calibration_bin(np.array([0.0, 0.25, 0.999, 1.0]), 4).tolist()
    [0, 1, 3, 3]
    """
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    return np.minimum(np.floor(p * bins), bins - 1).astype(np.int64)


def calibration_table(
    bin_id: np.ndarray, n: np.ndarray, sum_pred: np.ndarray, sum_label: np.ndarray, bins: int
) -> tuple[pd.DataFrame, float]:
    """Reliability table (one row per bin: range, count, mean predicted, observed rate) and the
    expected calibration error ECE = sum_b (n_b / N) |observed_b - predicted_b|.

    >>> t, ece = calibration_table(np.array([0, 1]), np.array([2, 2]), np.array([0.2, 1.6]), np.array([0, 2]), 2)
    >>> t["observed_rate"].tolist(), round(ece, 6)     # |0 - 0.1| and |1 - 0.8|, each weight 1/2
    ([0.0, 1.0], 0.15)
    """
    bin_id = np.asarray(bin_id, dtype=np.int64)
    n = np.asarray(n, dtype=np.float64)
    sp = np.asarray(sum_pred, dtype=np.float64)
    sl = np.asarray(sum_label, dtype=np.float64)
    order = np.argsort(bin_id)
    bin_id, n, sp, sl = bin_id[order], n[order], sp[order], sl[order]
    pred, obs = sp / n, sl / n
    table = pd.DataFrame(
        {
            "bin": bin_id.astype(np.int32),
            "bin_low": bin_id / bins,
            "bin_high": (bin_id + 1) / bins,
            "n": n.astype(np.int64),
            "mean_predicted": pred,
            "observed_rate": obs,
        }
    )
    total = n.sum()
    ece = float(np.sum(n * np.abs(obs - pred)) / total) if total else float("nan")
    return table, ece


# ---------------------------------------------------------------- ratings


def rating_errors(
    rating: np.ndarray,
    prediction: np.ndarray,
    round_predictions: bool = False,
    value_range: tuple[float, float] | None = None,
    distortion: Mapping[tuple[float, float], float] | None = None,
) -> dict[str, np.ndarray]:
    """Per rating: absolute error |p - r|, squared error (p - r)^2, distortion d(p, r), and whether the
    rating r and the prediction p (before any rounding) lie outside ``value_range`` [lo, hi]
    (``rating_out_of_range``: r < lo or r > hi; ``prediction_out_of_range`` likewise; all False
    without a range).

    With ``round_predictions`` the prediction is first rounded half up to an
    integer and clipped to ``value_range`` (the second source document: on
    integer scales rounding lowers MAE).  ``distortion`` maps (predicted,
    actual) pairs to a cost; d(r, r) = 0; a pair absent from a non-empty
    table falls back to |p - r| and is flagged in ``distortion_missing``.
    Without a table, d is NaN.

    >>> e = rating_errors(np.array([1, 1, 2]), np.array([3, 2.4, 2]), True, (1, 3), {(3, 1): 5, (2, 1): 3})
    >>> e["abs"].tolist(), e["sq"].tolist(), e["distortion"].tolist()
    ([2.0, 1.0, 0.0], [4.0, 1.0, 0.0], [5.0, 3.0, 0.0])
    >>> e = rating_errors(np.array([0, 3]), np.array([3.4, 1]), value_range=(1, 3))   # the bounds are inside
    >>> e["rating_out_of_range"].tolist(), e["prediction_out_of_range"].tolist()
    ([True, False], [True, False])
    """
    r = np.asarray(rating, dtype=np.float64)
    p = np.asarray(prediction, dtype=np.float64)
    if value_range is None:
        r_out = p_out = np.zeros(len(r), dtype=bool)
    else:
        lo, hi = value_range
        r_out, p_out = (r < lo) | (r > hi), (p < lo) | (p > hi)
    if round_predictions:
        p = np.floor(p + 0.5)
        if value_range is not None:
            p = np.clip(p, value_range[0], value_range[1])
    err = p - r
    out = {"abs": np.abs(err), "sq": err * err, "rating_out_of_range": r_out, "prediction_out_of_range": p_out}
    if distortion:
        d = np.full(len(r), np.nan)
        for (pp, aa), cost in distortion.items():
            d[(p == pp) & (r == aa)] = cost
        d[p == r] = 0.0
        missing = np.isnan(d)
        out["distortion"] = np.where(missing, np.abs(err), d)
        out["distortion_missing"] = missing
    else:
        out["distortion"] = np.full(len(r), np.nan)
        out["distortion_missing"] = np.zeros(len(r), dtype=bool)
    return out
