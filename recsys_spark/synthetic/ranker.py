"""The logging ranker: the lists it shows for a day's requests (items by popularity, positions, decreasing
scores; the "lists" and "scores" parts of :mod:`recsys_spark.synthetic.model`) and, when it explores
(``--ope``), the propensities it logs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recsys_spark.synthetic.model import (
    DUPLICATE_LIST_RATE,
    EMPTY_RESPONSE_RATE,
    HEAVY_USER,
    LIST_LENGTH,
    LIST_LENGTH_RANGE,
    SCORE_MEAN_LOGIT,
    SCORE_REQUEST_SIGMA,
    SCORE_SPREAD,
    VARIABLE_LIST_RATE,
    sigmoid,
)
from recsys_spark.synthetic.population import Population
from recsys_spark.synthetic.requests import Requests, group_index


@dataclass(frozen=True)
class Lists:
    """One row per displayed item, or one row per empty response; grouped by request."""

    request: np.ndarray  # request number of the row
    position: np.ndarray  # 1-based
    item: np.ndarray
    score: np.ndarray
    shown: np.ndarray  # False for the row of an empty response
    duplicated_lists: int


def _list_lengths(rng: np.random.Generator, pop: Population, req: Requests, heavy_user_exposures: int) -> np.ndarray:
    """Items of each request's list: 10, or 5-20 for some, 0 for an empty response (at the user's
    ``empty_rate``, else EMPTY_RESPONSE_RATE); the heavy user's lists add up to its exposures."""
    n = len(req.user)
    lo, hi = LIST_LENGTH_RANGE
    lengths = np.where(rng.random(n) < VARIABLE_LIST_RATE, rng.integers(lo, hi + 1, n), LIST_LENGTH)
    empty_rate = EMPTY_RESPONSE_RATE if pop.empty_rate is None else pop.empty_rate[req.user]
    lengths[rng.random(n) < empty_rate] = 0
    if heavy_user_exposures:
        heavy = np.flatnonzero(req.user == HEAVY_USER)
        lengths[heavy] = LIST_LENGTH
        lengths[heavy[-1]] = heavy_user_exposures - LIST_LENGTH * (len(heavy) - 1)
    return lengths


def _repeated_in_list(key: np.ndarray, max_len: int) -> np.ndarray:
    """True where ``key`` (request * n_items + item, rows grouped by request) appeared earlier."""
    seen = np.zeros(len(key), dtype=bool)
    for lag in range(1, max_len):  # one pass per list offset
        seen[lag:] |= key[lag:] == key[:-lag]
    return seen


def _distinct_items(rng: np.random.Generator, pop: Population, request: np.ndarray, max_len: int) -> np.ndarray:
    """Items by popularity, redrawn until no list shows an item twice."""
    items = pop.sample_items(rng, len(request))
    check = np.arange(len(request))
    for _ in range(500):
        if len(check) == 0:
            return items
        key = request[check].astype(np.int64) * pop.n_items + items[check]
        repeated = _repeated_in_list(key, max_len)
        if not repeated.any():
            return items
        items[check[repeated]] = pop.sample_items(rng, int(np.count_nonzero(repeated)))
        redraw = np.zeros(int(request[-1]) + 1, dtype=bool)
        redraw[request[check[repeated]]] = True
        check = check[redraw[request[check]]]
    raise RuntimeError("could not draw distinct items; catalog too small")


def _sorted_scores(rng: np.random.Generator, request: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Scores in (0, 1), decreasing along each list (uniform order statistics via spacings)."""
    spacing = rng.standard_exponential(len(request))
    total = np.cumsum(spacing)
    before = total[starts] - spacing[starts]
    partial = total - before[request]  # u = 1 - partial / whole is sorted uniforms, decreasing
    whole = partial[starts + rows - 1] + rng.standard_exponential(len(rows))
    tiny = 1e-12  # keeps the logs finite; both arguments stay monotone along the list
    logit_u = np.log(np.maximum(whole[request] - partial, tiny)) - np.log(np.maximum(partial, tiny))
    quality = rng.normal(SCORE_MEAN_LOGIT, SCORE_REQUEST_SIGMA, len(rows))
    return sigmoid(quality[request] + SCORE_SPREAD * logit_u)


def draw_lists(
    rng: np.random.Generator, pop: Population, req: Requests, heavy_user_exposures: int = 0, explore: bool = False
) -> Lists:
    """Displayed lists (items, positions, scores), one row per empty response.  ``explore`` (--ope): each
    list's items in a uniformly random order, and no list repeats an item."""
    lengths = _list_lengths(rng, pop, req, heavy_user_exposures)
    rows = np.maximum(lengths, 1)
    request, rank = group_index(rows)
    starts = np.cumsum(rows) - rows
    items = _distinct_items(rng, pop, request, int(rows.max(initial=1)))
    if explore:  # a uniformly random order within each list
        items = items[np.lexsort((rng.random(len(items)), request))]
    # ~0.5% of lists show one item twice, at positions p < q
    dup_rate = 0.0 if explore else DUPLICATE_LIST_RATE
    dup = np.flatnonzero((rng.random(len(rows)) < dup_rate) & (lengths >= 2))
    p = (rng.random(len(dup)) * (lengths[dup] - 1)).astype(np.int64)
    q = p + 1 + (rng.random(len(dup)) * (lengths[dup] - 1 - p)).astype(np.int64)
    items[starts[dup] + q] = items[starts[dup] + p]
    return Lists(
        request=request.astype(np.int64),
        position=(rank + 1).astype(np.int32),
        item=items,
        score=_sorted_scores(rng, request, starts, rows),
        shown=(lengths > 0)[request],
        duplicated_lists=len(dup),
    )


def logged_propensities(lists: Lists) -> np.ndarray:
    """(propensity, list_propensity, prefix_propensity) per row of an exploring logger's lists: the retrieved
    L items in a uniformly random order, so 1/L, 1/L! and (L - k)!/L! (NaN on empty responses)."""
    length = np.bincount(lists.request, weights=lists.shown)[lists.request].astype(np.int64)
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, max(int(length.max(initial=1)), 1) + 1)))])
    k = lists.position.astype(np.int64)
    safe = np.where(lists.shown, length, 1)
    return np.vstack(
        [
            np.where(lists.shown, 1.0 / safe, np.nan),
            np.where(lists.shown, np.exp(-log_factorial[safe]), np.nan),
            np.where(lists.shown, np.exp(log_factorial[np.maximum(safe - k, 0)] - log_factorial[safe]), np.nan),
        ]
    )
