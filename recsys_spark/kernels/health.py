"""Health (exploration) indicators of a day's exposures, pure numpy.

Inequality of exposure over items (Gini, Lorenz curve), diversity of
categories (normalised entropy), novelty, personalization and the popularity
buckets used as a slice.  The Spark layer (:mod:`recsys_spark.steps.health`)
reduces the day to small sufficient statistics -- a histogram of exposure
counts, sums per slice -- and everything here works from those, so each
function is exact and checkable by hand.

A *histogram* is two arrays: ``values`` (distinct exposure counts, any order)
and ``items`` (how many items have that count).  Its size is the number of
distinct counts, at most sqrt(2 * exposures) (the distinct positive counts
1 + 2 + ... + d cannot exceed the exposures), whatever the number of items.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
from numpy.typing import ArrayLike

#: rows of :func:`health_values`: (metric, aggregation, value, n, se)
Row = tuple[str, str, float | None, int, float | None]


def _histogram(values: ArrayLike, items: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Histogram sorted by value ascending, runs of zero items dropped."""
    values = np.asarray(values, dtype=np.float64)
    items = np.asarray(items, dtype=np.float64)
    if values.shape != items.shape:
        raise ValueError("values and items must have the same length")
    if (values < 0).any() or (items < 0).any():
        raise ValueError("counts must be >= 0")
    keep = items > 0
    order = np.argsort(values[keep], kind="stable")
    return values[keep][order], items[keep][order]


def gini_from_histogram(values: ArrayLike, items: ArrayLike) -> float:
    """Gini coefficient of exposures over items, from a histogram of counts.

    Items sorted by count ascending (rank i = 1..n), p_i = c_i / T with
    T = sum c_i::

        G = sum_i (2 i - n - 1) p_i / (n - 1)

    Items with equal counts are interchangeable, so a run of m items of count
    c at ranks r + 1 .. r + m contributes c * m * (2 r + m - n) / ((n - 1) T):
    exact, one term per distinct count.

    Returns
    -------
    float in [0, 1]: 0 when every item has the same count, 1 when one item
    has every exposure.

    Notes
    -----
    Dividing by n - 1 (not n) makes the maximum exactly 1 for any n.  One
    item (n = 1): 0 by definition -- there is no inequality among one item
    (the formula would be 0 / 0).  No items or no exposures (T = 0): NaN.

    >>> gini_from_histogram([1], [4])            # counts 1, 1, 1, 1
    0.0
    >>> gini_from_histogram([0, 1], [3, 1])      # counts 0, 0, 0, 1: 1 * 1 * (2*3 + 1 - 4) / (3 * 1)
    1.0
    """
    values, items = _histogram(values, items)
    n = items.sum()
    total = float(np.dot(values, items))
    if n == 0 or total == 0:
        return float("nan")
    if n == 1:
        return 0.0
    before = np.cumsum(items) - items  # r: items ranked before the run
    return float(np.sum(values * items * (2 * before + items - n)) / ((n - 1) * total))


def lorenz_curve(values: ArrayLike, items: ArrayLike, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Points of the Lorenz curve of exposures over items, exact vertices only.

    Items sorted by count ascending; the curve joins the n + 1 vertices
    (i / n, C_i / T), i = 0..n, where C_i is the exposures of the i least
    exposed items.  When n + 1 <= ``max_points`` every vertex is returned.
    Otherwise, for each point of the grid g / (max_points - 1), g = 0..max_points - 1,
    the vertex of the nearest item rank i = floor(g n / (max_points - 1) + 1/2)
    is returned: x is within 1 / (2 n) of the grid, and (x, y) lies exactly on
    the curve (C_i comes from the run of equal counts that holds rank i, no
    interpolation of y).  Always starts at (0, 0) and ends at (1, 1).

    Returns
    -------
    (x, y) arrays of equal length, at most ``max_points``; empty when there
    are no items or no exposures.

    >>> x, y = lorenz_curve([0, 1], [3, 1], 101)    # counts 0, 0, 0, 1
    >>> x.tolist(), y.tolist()
    ([0.0, 0.25, 0.5, 0.75, 1.0], [0.0, 0.0, 0.0, 0.0, 1.0])
    >>> x, y = lorenz_curve([1, 2], [2, 2], 3)      # counts 1, 1, 2, 2; grid 0, 1/2, 1
    >>> x.tolist(), y.tolist()                      # C = 0, 1, 2, 4, 6
    ([0.0, 0.5, 1.0], [0.0, 0.3333333333333333, 1.0])
    """
    if max_points < 2:
        raise ValueError("max_points must be at least 2")
    values, items = _histogram(values, items)
    n = int(items.sum())
    total = float(np.dot(values, items))
    if n == 0 or total == 0:
        return np.zeros(0), np.zeros(0)
    if n + 1 <= max_points:
        ranks = np.arange(n + 1, dtype=np.int64)
    else:
        grid = np.arange(max_points, dtype=np.float64) * n / (max_points - 1)
        ranks = np.unique(np.floor(grid + 0.5).astype(np.int64))
    run_end = np.cumsum(items)  # ranks covered up to the end of each run
    run_start = run_end - items
    cum_before = np.cumsum(values * items) - values * items
    run = np.minimum(np.searchsorted(run_end, ranks, side="left"), len(items) - 1)
    cum = cum_before[run] + (ranks - run_start[run]) * values[run]
    cum[ranks == 0] = 0.0
    return ranks / n, cum / total


def category_diversity(n: float, s: float, n_categories: int) -> float:
    """Normalised entropy of exposures over categories, from N = sum_k c_k and S = sum_k c_k ln c_k.

    With c_k the exposures of category k (0 ln 0 = 0)::

        H = -sum_k (c_k / N) ln(c_k / N) = ln N - S / N
        diversity = H / ln K

    Parameters
    ----------
    n : N, the exposures.
    s : S = sum_k c_k ln c_k (natural log), summed by the Spark layer.
    n_categories : K, the number of categories the exposures could fall in
        (the catalog's, plus one ``unknown`` for items missing from it).

    Returns
    -------
    float in [0, 1]: 0 when all exposures fall in one category, 1 when they
    spread evenly over all K.

    Notes
    -----
    K <= 1 (one category): 0 by definition -- every exposure is in the only
    category, there is no diversity to have (ln 1 = 0 would give 0 / 0).
    No exposures (N = 0): NaN.

    >>> category_diversity(2, 0.0, 2)                       # counts 1, 1: H = ln 2
    1.0
    >>> category_diversity(4, 2 * math.log(2), 4)           # counts 2, 1, 1: H = 1.5 ln 2, ln 4 = 2 ln 2
    0.75
    >>> category_diversity(5, 5 * math.log(5), 1)           # one category
    0.0
    """
    if n <= 0:
        return float("nan")
    if n_categories <= 1:
        return 0.0
    return (math.log(n) - s / n) / math.log(n_categories)


def personalization(overlap: float, user_items: float, n_users: int) -> float:
    """1 - (mean overlap of the item sets of two users) / (mean item-set size), from two sums.

    With c_i the number of users shown item i (among U users with at least
    one exposure), ``user_items`` = sum_i c_i (the user-item pairs) and
    ``overlap`` = sum_i c_i (c_i - 1).  The sum over unordered pairs of users
    of |A ∩ B| is overlap / 2 and the mean set size is user_items / U, so::

        personalization = 1 - overlap / ((U - 1) * user_items)

    It is also 1 - the chance that another user, drawn at random, was shown
    the item of a random (user, item) pair.  When every user sees the same
    number of items L this equals 1 - the mean over pairs of |A ∩ B| / L,
    which is the usual "1 - mean cosine similarity" of binary item vectors.

    Returns
    -------
    float in [0, 1]: 0 when every user saw the same items, 1 when no two
    users share an item.  NaN with fewer than 2 users or no pairs.

    >>> personalization(2, 4, 2)     # A = {a, b}, B = {b, c}: c = 1, 2, 1; 1 - 2 / (1 * 4)
    0.5
    >>> personalization(12, 6, 3)    # everyone saw {a, b}: c = 3, 3; 1 - 12 / (2 * 6)
    0.0
    """
    if n_users < 2 or not user_items:
        return float("nan")
    return 1.0 - overlap / ((n_users - 1) * user_items)


def self_information(clickers: ArrayLike, n_clickers: int) -> np.ndarray:
    """Self-information of items, log2((U + 1) / (k_i + 1)) bits, item by item (the offline evaluation's novelty
    of a list is its mean); :func:`novelty` is its exposure-weighted mean computed from the Spark layer's sums.

    >>> self_information([3, 1, 0], 3).tolist()
    [0.0, 1.0, 2.0]
    """
    k = np.asarray(clickers, dtype=np.float64)
    return np.log2((n_clickers + 1.0) / (k + 1.0))


def novelty(log_sum: float, exposures: float, n_clickers: int) -> float:
    """Mean self-information of the exposed items, weighted by their exposures, from two sums.

    The self-information of item i is log2((U + 1) / (k_i + 1)) bits, with k_i
    the users who clicked item i in the popularity window and U the users who
    clicked anything in it: -log2 of the item's popularity among users with
    add-one smoothing, so an item nobody clicked is finite (log2(U + 1), the
    most novel) and an item everyone clicked scores 0.  With e_i the item's
    exposures and ``log_sum`` = sum_i e_i log2(k_i + 1)::

        novelty = log2(U + 1) - log_sum / sum_i e_i

    NaN when there are no exposures or nobody clicked in the window (U = 0).

    >>> novelty(1 * 2 + 1 * 1 + 2 * 0, 4, 3)   # e = 1, 1, 2; k = 3, 1, 0: (0 + 1 + 2 * 2) / 4
    1.25
    """
    if not exposures or n_clickers <= 0:
        return float("nan")
    return math.log2(n_clickers + 1) - log_sum / exposures


def popularity_thresholds(
    values: ArrayLike, items: ArrayLike, head_share: float, tail_share: float
) -> tuple[float, float]:
    """(head_min, tail_max): an item is ``head`` when its count >= head_min, ``tail`` when <= tail_max.

    An item is *head* when the items exposed strictly more than it take less
    than ``head_share`` of the exposures, and *tail* when they take at least
    1 - ``tail_share`` (so an item that was never exposed is always tail);
    the rest is *mid*.  Items with equal counts always share a bucket.

    >>> popularity_thresholds([10, 5, 3, 1], [1, 1, 1, 2], 0.2, 0.2)   # T = 20; above: 0, .5, .75, .9
    (10.0, 1.0)
    """
    if not (0 < head_share and 0 < tail_share and head_share + tail_share <= 1):  # so each share is < 1
        raise ValueError("need 0 < head_share, tail_share < 1 and head_share + tail_share <= 1")
    values, items = _histogram(values, items)
    total = float(np.dot(values, items))
    if total == 0:
        return math.inf, 0.0
    mass = values * items
    above = (mass.sum() - np.cumsum(mass)) / total  # share of items with a larger count
    head = values[above < head_share]  # never empty: nothing is above the largest count
    tail = values[above >= 1 - tail_share]
    return float(head.min()), (float(tail.max()) if len(tail) else -1.0)


# --- from sufficient statistics to metric rows --------------------------------------------------
def _ratio(num: float | None, den: float | None) -> float | None:
    return float(num) / float(den) if num is not None and den else None


def _mean_se(
    total: float | None, squares: float | None, n: int, scale: float = 1.0
) -> tuple[float | None, float | None]:
    """Mean and its standard error from sum, sum of squares and count (values divided by ``scale``)."""
    if not n or total is None:
        return None, None
    mean = total / n
    se = None
    if n > 1 and squares is not None:
        var = max(squares - total * total / n, 0.0) / (n - 1)
        se = math.sqrt(var / n) / scale
    return mean / scale, se


def _nan_to_none(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def health_values(
    stats: Mapping[str, float],
    hist: Mapping[tuple[float, bool], float],
    catalog_items: int | None,
    n_categories: int | None,
    n_clickers: int | None,
    has_previous_day: bool,
    lorenz_points: int,
    has_novel: bool = False,
) -> tuple[list[Row], tuple[np.ndarray, np.ndarray]]:
    """Health rows and the Lorenz curve of one slice, from its sufficient statistics.

    Parameters
    ----------
    stats : sums over the slice (names as in :mod:`recsys_spark.steps.health`):
        ``pv``, ``pv_covered``, ``pv_empty``, ``uv``, ``uv_covered``, ``uv_empty``,
        ``exposures``, ``lists``, ``list_h``, ``list_h2``, ``users_exposed``,
        ``user_h``, ``user_h2``, ``cat_n``, ``cat_s``, ``user_overlap``,
        ``user_items``, ``novelty_log``, ``returning``, ``update_sum``,
        ``update_sum2``, ``update_new``, ``update_items``, ``update_prev``,
        ``update_prev_sum``, ``update_prev_sum2``, ``novel_users``,
        ``novel_items``, ``novel_item_new``, ``novel_item_sum``,
        ``novel_item_sum2`` and the same ``novel_category_*``.  Missing sums are 0.
    hist : {(exposure count, in catalog): items} of the exposed items.
    catalog_items : catalog items of the slice (None: no items table).
    n_categories : K for the diversity (None: no items table).
    n_clickers : users in the novelty popularity window (None: not computed).
    has_previous_day : whether update_rate (and update_rate_previous) can be computed.
    lorenz_points : at most this many Lorenz points.
    has_novel : whether the clicks of earlier days were read: novel_item_share (and, with
        ``n_categories``, novel_category_share).

    Returns
    -------
    (rows, (x, y)): rows of (metric, aggregation, value, n, se).
    """
    s = {k: (v or 0) for k, v in stats.items()}

    def get(name: str) -> float:
        return s.get(name, 0)

    pv, uv = int(get("pv")), int(get("uv"))
    rows: list[Row] = [
        ("pv", "global", float(pv), pv, None),
        ("uv", "global", float(uv), uv, None),
        ("pv_coverage", "global", _ratio(get("pv_covered"), pv), pv, None),
        ("uv_coverage", "global", _ratio(get("uv_covered"), uv), uv, None),
        ("pv_failure_rate", "global", _ratio(get("pv_empty"), pv), pv, None),
        ("uv_failure_rate", "global", _ratio(get("uv_empty"), uv), uv, None),
    ]
    exposure_rows, curve = _exposure_rows(hist, catalog_items, lorenz_points)
    rows += exposure_rows
    if n_categories is not None:
        rows += _diversity_rows(get, n_categories)
    if n_clickers is not None:
        exposures = get("exposures")
        mean_information = _nan_to_none(novelty(get("novelty_log"), exposures, n_clickers))
        rows.append(("novelty", "global", mean_information, int(exposures), None))
    users = int(get("users_exposed"))
    overlap = personalization(get("user_overlap"), get("user_items"), users)
    rows.append(("personalization", "global", _nan_to_none(overlap), users, None))
    if has_previous_day:
        rows += _update_rows(get)
    if has_novel:
        rows += _novel_rows(get, n_categories is not None)
    return rows, curve


def _exposure_rows(
    hist: Mapping[tuple[float, bool], float], catalog_items: int | None, lorenz_points: int
) -> tuple[list[Row], tuple[np.ndarray, np.ndarray]]:
    """Gini over the exposed items and, with a catalog, item coverage and Gini over the catalog (its items never
    exposed count 0); the Lorenz curve over the catalog's items when there is one, else over the exposed."""
    exposed_values = np.array([c for (c, _), m in hist.items() if m > 0], dtype=np.float64)
    exposed_items = np.array([m for (c, _), m in hist.items() if m > 0], dtype=np.float64)
    in_catalog = int(sum(m for (_, cat), m in hist.items() if cat))
    n_exposed = int(exposed_items.sum())
    gini = _nan_to_none(gini_from_histogram(exposed_values, exposed_items))
    rows: list[Row] = [("gini", "exposed", gini, n_exposed, None)]
    if catalog_items is not None:
        zeros = max(int(catalog_items) - in_catalog, 0)
        values = np.r_[exposed_values, 0.0]
        items = np.r_[exposed_items, float(zeros)]
        population = n_exposed + zeros
        rows.append(("item_coverage", "global", _ratio(in_catalog, catalog_items), int(catalog_items), None))
        rows.append(("gini", "catalog", _nan_to_none(gini_from_histogram(values, items)), population, None))
    else:
        values, items = exposed_values, exposed_items
    return rows, lorenz_curve(values, items, lorenz_points)


def _diversity_rows(get: Callable[[str], float], n_categories: int) -> list[Row]:
    """Category diversity: global (from cat_n, cat_s), and the mean per list and per user with its standard
    error (the entropies H come summed from Spark, sum H and sum H^2, divided by ln K); K <= 1 makes every
    diversity 0 (see :func:`category_diversity`)."""
    cat_n = get("cat_n")
    diversity = _nan_to_none(category_diversity(cat_n, get("cat_s"), n_categories))
    rows: list[Row] = [("category_diversity", "global", diversity, int(cat_n), None)]
    log_k = math.log(n_categories) if n_categories > 1 else 0.0
    for agg, n_key, sum_key in (("list_avg", "lists", "list_h"), ("user_avg", "users_exposed", "user_h")):
        n = int(get(n_key))
        if log_k:
            mean, se = _mean_se(get(sum_key), get(sum_key + "2"), n, log_k)
        else:
            mean, se = (0.0 if n else None), (0.0 if n > 1 else None)
        rows.append(("category_diversity", agg, mean, n, se))
    return rows


def _update_rows(get: Callable[[str], float]) -> list[Row]:
    """update_rate (new items over today's, per returning user and global) and update_rate_previous (the seed's
    UPDATE = dN_diff / N_last: the new items over the previous day's items, docs/metrics.md)."""
    returning = int(get("returning"))
    mean, se = _mean_se(get("update_sum"), get("update_sum2"), returning)
    rows: list[Row] = [("update_rate", "user_avg", mean, returning, se)]
    items = get("update_items")
    rows.append(("update_rate", "global", _ratio(get("update_new"), items), int(items), None))
    mean, se = _mean_se(get("update_prev_sum"), get("update_prev_sum2"), returning)
    rows.append(("update_rate_previous", "user_avg", mean, returning, se))
    prev = get("update_prev")
    rows.append(("update_rate_previous", "global", _ratio(get("update_new"), prev), int(prev), None))
    return rows


def _novel_rows(get: Callable[[str], float], with_categories: bool) -> list[Row]:
    """novel_item_share (and, ``with_categories``, novel_category_share): per user and global."""
    rows: list[Row] = []
    users, items = int(get("novel_users")), get("novel_items")
    for metric, part in (("novel_item_share", "novel_item"), ("novel_category_share", "novel_category")):
        if part == "novel_category" and not with_categories:
            continue
        mean, se = _mean_se(get(f"{part}_sum"), get(f"{part}_sum2"), users)
        rows.append((metric, "user_avg", mean, users, se))
        rows.append((metric, "global", _ratio(get(f"{part}_new"), items), int(items), None))
    return rows
