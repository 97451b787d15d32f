"""Synthetic, reproducible days of recommender logs written as Parquet (pyarrow, no Spark).

    python -m recsys_spark.synthetic.generate --date 2026-11-20 --output-root build/demo/input --users 2000 --days 2

Part of the library because it is how a user makes a sample day in the job's input layout (as
scikit-learn's ``make_*`` functions are part of it), and the tests and the benchmark use it too. The job
never imports it, so it stays out of the ``--py-files`` zip (jobs/package.py).

Model of the data
-----------------
Population (depends only on the seed and sizes; shared by every generated day):

* users ``u000000``..: a persistent activity weight ~ LogNormal(0, 1.2) (a long tail with a
  few very heavy users), a preferred platform, a click propensity, a country (skewed) and a
  ``first_seen`` date; ~3% are new this week and are only active from that date on.
* items ``i0000``..: Zipf-like popularity (exponent 1, drawn in closed form by inverse CDF)
  over a random rank order; 5% of the catalog is cold (never recommended); 2% of the
  recommendable items are missing from the items table (the catalog lags behind the
  recommender); each item has one of 20 categories (skewed).

Each day D (its own random stream derived from ``(seed, D)``):

* requests: user u gets Poisson(lambda_u) requests, lambda_u proportional to its weight times a
  daily LogNormal(0, 0.5) noise and scaled so that the day has about ``exposures`` rows; users
  with no request are inactive that day. ``u000000`` can be replaced by one heavy user with
  exactly ``heavy_user_exposures`` exposures (lists of 10).
* sessions: 1-3 per active user (never more than its requests), in disjoint parts of the day,
  with requests seconds to a minute apart; the platform is chosen per session.
* lists: 10 items (20% of lists: 5-20), distinct items drawn by popularity, positions 1..L in
  decreasing model score (in (0, 1)). 1% of requests return nothing: one row with null
  item_id/position/score. 0.5% of lists show one item twice, at two positions.
* scores: logit(score) = request quality ~ N(-1, 0.8) + 0.35 * logit of the list's sorted
  uniforms, so the model is informative but far from perfect (click AUC about 0.77).
* clicks: P(click) = sigmoid(-2.4 + logit(score) + user propensity + N(0, 1)) / sqrt(position),
  about 4% of exposures (about 11% at position 1, 1% at position 10); the click comes 1 s to
  25 min (median 20 s) after the exposure. Clicks that would fall after midnight are dropped
  (they belong to the next day's partition). 10% of clicked exposures get a later
  ``purchase`` event (still < 30 min after the exposure), whose ``value`` is its revenue
  (LogNormal, median about 27, to the cent); a click carries ``dwell_seconds`` (LogNormal,
  median 35 s, 1 s to 30 min); the other's column is null. Both come from a stream of their own,
  so the rest of a day is the same as without them. 20% of the click rows lose their
  request_id (attributable by user+session+item and time). About 1% more are orphans: a
  request_id that was never served, or a served request with an item it did not show
  (request_id never null for orphans).

With ``--ope`` (off-policy evaluation, docs/ope.md) the logging ranker explores: each list shows its
retrieved items in a uniformly random order, and logs the propensities that order had (``propensity``
1/L of an item at its position, ``list_propensity`` 1/L! of the list, ``prefix_propensity`` (L-k)!/L! of its
first k items, given the retrieved items); lists never repeat an item; each item has an appeal
~ N(0, 0.6) added to the click logit.  A candidate policy, ``reranker``, shows each list's 6 items of
highest *estimated* appeal (the appeal plus N(0, 0.3), the same for every request) in that order: its table
for ``recsys-spark ope`` (probability 1, and q_hat, its model's click probability at that position) goes to
``candidates/reranker/target/``, its lists for ``recsys-spark simulate`` to ``simulation/reranker/dt=D/``,
and the expected click rates of both policies under the model (known here only because the data are
made up) to ``candidates/reranker/truth.json``.

Rows of a day are in chronological order of requests; request numbers follow that order.
Everything is vectorised with numpy: the only Python loops run over digits of ids, offsets
within a list, redraw rounds of duplicated items, part files and days.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from recsys_spark.schema import (
    CLICK_COLUMNS,
    EXPOSURE_COLUMNS,
    FIRST_SEEN,
    ITEM_COLUMNS,
    LIST_PROPENSITY,
    PREFIX_PROPENSITY,
    PROPENSITY,
    USER,
)

# --- knobs of the model -------------------------------------------------------------------
EXPOSURES_PER_USER = 20
DEFAULT_USERS = 2000
MIN_ITEMS = 200
MAX_ROWS_PER_FILE = 2_000_000

ACTIVITY_SIGMA = 1.2
DAILY_ACTIVITY_SIGMA = 0.5
NEW_USER_RATE = 0.03
SESSION_COUNT_P = (0.55, 0.30, 0.15)  # 1, 2 or 3 sessions
MAX_REQUEST_GAP_S = 45.0

LIST_LENGTH = 10
VARIABLE_LIST_RATE = 0.2
LIST_LENGTH_RANGE = (5, 20)
EMPTY_RESPONSE_RATE = 0.01
DUPLICATE_LIST_RATE = 0.005

COLD_ITEM_RATE = 0.05
MISSING_ITEM_RATE = 0.02

SCORE_MEAN_LOGIT = -1.0
SCORE_REQUEST_SIGMA = 0.8
SCORE_SPREAD = 0.35
CLICK_INTERCEPT = -2.4
CLICK_SCORE_SLOPE = 1.0
CLICK_NOISE_SIGMA = 1.0
CLICK_USER_SIGMA = 0.5
POSITION_BIAS_EXPONENT = 0.5
CLICK_DELAY_MEDIAN_S = 20.0
MAX_CLICK_DELAY_S = 25 * 60
PURCHASE_RATE = 0.10
PURCHASE_VALUE_LOG_MEDIAN = 3.3  # ln of the median purchase value (about 27)
PURCHASE_VALUE_SIGMA = 0.9
DWELL_MEDIAN_S = 35.0
DWELL_SIGMA = 1.0
MAX_DWELL_S = 30 * 60
PURCHASE_DELAY_MEDIAN_S = 120.0
MAX_PURCHASE_DELAY_S = 29 * 60
NULL_REQUEST_ID_RATE = 0.20
ORPHAN_CLICK_RATE = 0.01

HEAVY_USER = 0  # index of the user replaced by the heavy user (u000000)

# --ope: the exploring logger and the candidate (docs/ope.md)
APPEAL_SIGMA = 0.6  # an item's own effect on the click logit
CANDIDATE = "reranker"
CANDIDATE_NOISE = 0.3  # what the candidate's model gets wrong about an item's appeal
CANDIDATE_LENGTH = 6  # the candidate shows its 6 best of the retrieved items
TRUTH_DRAWS = 16  # noise draws of the expected click rates in truth.json

PLATFORMS = ("ios", "android", "web")
PLATFORM_P = (0.45, 0.40, 0.15)
EVENTS = ("click", "purchase")
CATEGORIES = (
    "fashion",
    "electronics",
    "home",
    "beauty",
    "sports",
    "books",
    "toys",
    "grocery",
    "garden",
    "automotive",
    "music",
    "movies",
    "games",
    "health",
    "pets",
    "office",
    "jewelry",
    "travel",
    "baby",
    "tools",
)
COUNTRIES = ("US", "IN", "BR", "GB", "DE", "FR", "MX", "ID", "JP", "CA", "ES", "IT", "PL", "TR", "NG")

US_PER_S = 1_000_000
DAY_US = 86_400 * US_PER_S
EPOCH = dt.date(1970, 1, 1)
TIMESTAMP = pa.timestamp("us", tz="UTC")

# the job's input contract (recsys_spark.schema), every column of it, plus attributes to slice by
_ARROW = {"id": pa.string(), "int": pa.int32(), "double": pa.float64(), "timestamp": TIMESTAMP, "string": pa.string()}
EXPOSURE_SCHEMA = pa.schema([(c.name, _ARROW[c.kind]) for c in EXPOSURE_COLUMNS] + [("platform", pa.string())])
CLICK_SCHEMA = pa.schema([(c.name, _ARROW[c.kind]) for c in CLICK_COLUMNS])
#: with --ope: the logging policy's propensities too
OPE_EXPOSURE_SCHEMA = (
    EXPOSURE_SCHEMA.append(pa.field(PROPENSITY, pa.float64()))
    .append(pa.field(LIST_PROPENSITY, pa.float64()))
    .append(pa.field(PREFIX_PROPENSITY, pa.float64()))
)
TARGET_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("item_id", pa.string()),
        ("position", pa.int32()),
        ("probability", pa.float64()),
        ("q_hat", pa.float64()),
    ]
)
SIMULATED_SCHEMA = pa.schema(
    [("request_id", pa.string()), ("item_id", pa.string()), ("position", pa.int32()), ("score", pa.float64())]
)
ITEM_SCHEMA = pa.schema([(c.name, _ARROW[c.kind]) for c in ITEM_COLUMNS])
USER_SCHEMA = pa.schema([(USER, pa.string()), (FIRST_SEEN, pa.date32()), ("country", pa.string())])


def _mean_list_rows() -> float:
    """Expected rows per request (an empty response is one row)."""
    lo, hi = LIST_LENGTH_RANGE
    mean_len = (1 - VARIABLE_LIST_RATE) * LIST_LENGTH + VARIABLE_LIST_RATE * (lo + hi) / 2
    return (1 - EMPTY_RESPONSE_RATE) * mean_len + EMPTY_RESPONSE_RATE


def _zipf_weights(n: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent
    return weights / weights.sum()


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _threads() -> int:
    return min(4, os.cpu_count() or 1)


def _width(n_values: int, minimum: int) -> int:
    """Digits needed to zero-pad ids 0..n_values-1."""
    return max(minimum, len(str(max(n_values - 1, 0))))


# --- string columns without a Python loop per row ---------------------------------------------
def format_ids(prefix: str, numbers: np.ndarray, width: int, valid: np.ndarray | None = None) -> pa.Array:
    """Arrow string array of ``prefix + zero-padded number``; null where ``valid`` is False."""
    numbers = np.asarray(numbers, dtype=np.int64)
    n = len(numbers)
    kept = numbers if valid is None else numbers[valid]
    head = np.frombuffer(prefix.encode(), dtype=np.uint8)
    record = len(head) + width
    data = np.empty((len(kept), record), dtype=np.uint8)
    data[:, : len(head)] = head
    rest = kept.copy()
    for digit in range(record - 1, len(head) - 1, -1):  # one pass per digit
        data[:, digit] = 48 + rest % 10
        rest //= 10
    if len(kept) and (rest.any() or kept.min() < 0):
        raise ValueError(f"ids do not fit {width} digits")
    lengths = np.full(n, record, dtype=np.int32)
    null_bitmap, null_count = None, 0
    if valid is not None:
        lengths[~valid] = 0
        null_count = int(n - np.count_nonzero(valid))
        null_bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.StringArray.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(data.reshape(-1)), null_bitmap, null_count
    )


def _labels(names: Sequence[str], codes: np.ndarray) -> pa.Array:
    """Plain string array ``names[codes]``."""
    return pa.array(names, type=pa.string()).take(pa.array(np.asarray(codes, dtype=np.int32)))


def _timestamps(us: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(us, dtype=np.int64), type=pa.int64()).view(TIMESTAMP)


# --- population -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Population:
    """Users and items shared by all the generated days (see the module docstring)."""

    end_date: dt.date
    activity: np.ndarray  # float64 weight per user
    platform: np.ndarray  # preferred platform code per user
    click_bias: np.ndarray  # logit offset of the click probability per user
    country: np.ndarray  # country code per user
    first_seen: np.ndarray  # days since 1970-01-01 per user
    ranked_items: np.ndarray  # recommendable item indices, most popular first
    cold_items: np.ndarray  # item indices never recommended
    in_catalog: np.ndarray  # bool per item: present in the items table
    category: np.ndarray  # category code per item

    @property
    def n_users(self) -> int:
        return len(self.activity)

    @property
    def n_items(self) -> int:
        return len(self.category)

    @property
    def user_width(self) -> int:
        return _width(self.n_users, 6)

    @property
    def item_width(self) -> int:
        return _width(self.n_items, 4)

    def sample_items(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Item indices drawn by popularity (never a cold item).

        Rank k (0-based) has probability log((k + 2) / (k + 1)) / log(m + 1): Zipf with exponent
        1 in closed form (inverse CDF), so no search over the catalog.
        """
        m = len(self.ranked_items)
        rank = np.expm1(rng.random(size) * np.log1p(m)).astype(np.int64)
        return self.ranked_items[np.minimum(rank, m - 1)]


def make_population(n_users: int, n_items: int, seed: int, end_date: dt.date) -> Population:
    """Draw users and items; depends on (seed, sizes) only, ``first_seen`` is relative to end_date."""
    if n_users < 1 or n_items < 100:
        raise ValueError("need at least 1 user and 100 items")
    rng = np.random.default_rng([seed, 0])
    age_days = np.minimum(rng.exponential(365.0, n_users), 1500).astype(np.int32) + 7
    new = rng.random(n_users) < NEW_USER_RATE
    age_days[new] = rng.integers(0, 7, np.count_nonzero(new))
    age_days[HEAVY_USER] = max(age_days[HEAVY_USER], 30)
    users: dict[str, np.ndarray] = dict(
        activity=rng.lognormal(0.0, ACTIVITY_SIGMA, n_users),
        platform=rng.choice(len(PLATFORMS), n_users, p=PLATFORM_P).astype(np.int8),
        click_bias=rng.normal(0.0, CLICK_USER_SIGMA, n_users),
        country=rng.choice(len(COUNTRIES), n_users, p=_zipf_weights(len(COUNTRIES), 1.1)),
        first_seen=(end_date - EPOCH).days - age_days,
    )
    return Population(end_date=end_date, **users, **_draw_items(rng, n_items))


def _draw_items(rng: np.random.Generator, n_items: int) -> dict[str, np.ndarray]:
    by_rank = rng.permutation(n_items)
    n_cold = max(1, round(COLD_ITEM_RATE * n_items))
    cold, ranked = by_rank[:n_cold], by_rank[n_cold:]
    # missing items are spread over the catalog, but never among the top 1% best sellers
    top = max(5, len(ranked) // 100)
    n_missing = max(1, round(MISSING_ITEM_RATE * len(ranked)))
    in_catalog = np.ones(n_items, dtype=bool)
    in_catalog[rng.choice(ranked[top:], n_missing, replace=False)] = False
    category = rng.choice(len(CATEGORIES), n_items, p=_zipf_weights(len(CATEGORIES), 0.9))
    return dict(
        ranked_items=ranked.astype(np.int32),
        cold_items=np.sort(cold),
        in_catalog=in_catalog,
        category=category,
    )


def users_table(pop: Population) -> pa.Table:
    """The ``users`` table: every user of the population."""
    return pa.table(
        [
            format_ids("u", np.arange(pop.n_users), pop.user_width),
            pa.array(pop.first_seen.astype(np.int32), type=pa.int32()).view(pa.date32()),
            _labels(COUNTRIES, pop.country),
        ],
        schema=USER_SCHEMA,
    )


def items_table(pop: Population) -> pa.Table:
    """The ``items`` table: the catalog, with the lagging (missing) items left out."""
    ids = np.flatnonzero(pop.in_catalog)
    return pa.table(
        [format_ids("i", ids, pop.item_width), _labels(CATEGORIES, pop.category[ids])],
        schema=ITEM_SCHEMA,
    )


# --- one day ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Requests:
    """Requests of a day in chronological order (index = request number)."""

    user: np.ndarray
    session: np.ndarray  # day-global session number
    ts: np.ndarray  # microseconds since the epoch
    session_platform: np.ndarray  # platform code by session number
    n_sessions: int


@dataclass(frozen=True)
class Lists:
    """One row per displayed item, or one row per empty response; grouped by request."""

    request: np.ndarray  # request number of the row
    position: np.ndarray  # 1-based
    item: np.ndarray
    score: np.ndarray
    shown: np.ndarray  # False for the row of an empty response
    duplicated_lists: int


class DayLogs(NamedTuple):
    exposures: pa.Table
    clicks: pa.Table
    stats: dict[str, int]
    #: --ope: the candidate's table for recsys-spark ope, its lists for recsys-spark simulate, and the
    #: expected clicks of both policies under the model (truth.json's sums)
    target: pa.Table | None = None
    simulated: pa.Table | None = None
    truth: dict[str, float] | None = None


def _requests_per_user(
    rng: np.random.Generator, pop: Population, day: dt.date, n_exposures: int, heavy_user_exposures: int
) -> np.ndarray:
    active = pop.first_seen <= (day - EPOCH).days
    weight = pop.activity * rng.lognormal(0.0, DAILY_ACTIVITY_SIGMA, pop.n_users) * active
    if heavy_user_exposures:
        weight[HEAVY_USER] = 0.0
    total = weight.sum()
    lam = n_exposures / _mean_list_rows() * weight / total if total > 0 else weight
    counts = rng.poisson(lam)
    if heavy_user_exposures:
        counts[HEAVY_USER] = -(-heavy_user_exposures // LIST_LENGTH)
    return counts


def _group_index(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For groups of the given sizes laid end to end: group of each element, rank in group."""
    owner = np.repeat(np.arange(len(counts)), counts)
    starts = np.cumsum(counts) - counts
    return owner, np.arange(len(owner)) - starts[owner]


def draw_requests(
    rng: np.random.Generator, pop: Population, day: dt.date, n_exposures: int, heavy_user_exposures: int = 0
) -> Requests:
    """Requests, sessions and their timestamps for one day."""
    per_user = _requests_per_user(rng, pop, day, n_exposures, heavy_user_exposures)
    sessions = np.minimum(rng.choice(3, pop.n_users, p=SESSION_COUNT_P) + 1, per_user)
    user, rank = _group_index(per_user)
    session = (np.cumsum(sessions) - sessions)[user] + rank * sessions[user] // per_user[user]
    session_user, session_rank = _group_index(sessions)
    ts = (day - EPOCH).days * DAY_US + _time_of_day(rng, session, sessions[session_user], session_rank)
    n_sessions = len(session_user)
    own = rng.random(n_sessions) < 0.8
    platform = np.where(own, pop.platform[session_user], rng.choice(len(PLATFORMS), n_sessions, p=PLATFORM_P))
    order = np.argsort(ts, kind="stable")
    return Requests(
        user=user[order].astype(np.int32),
        session=session[order].astype(np.int64),
        ts=ts[order],
        session_platform=platform.astype(np.int8),
        n_sessions=n_sessions,
    )


def _time_of_day(
    rng: np.random.Generator, session: np.ndarray, user_sessions: np.ndarray, session_rank: np.ndarray
) -> np.ndarray:
    """Microseconds into the day of each request (requests grouped by session, in order).

    The k-th of a user's s sessions lies in the k-th s-th of the day; requests of a session are
    exponential gaps apart (mean 45 s, shorter for huge sessions so they fit in half the slot).
    """
    per_session = np.bincount(session, minlength=len(user_sessions))  # >= 1 each
    first = np.cumsum(per_session) - per_session
    slot = DAY_US / user_sessions
    gap_mean = np.minimum(MAX_REQUEST_GAP_S * US_PER_S, 0.5 * slot / per_session)
    elapsed = np.cumsum(rng.standard_exponential(len(session)) * gap_mean[session])
    offset = elapsed - elapsed[first][session]
    duration = offset[first + per_session - 1]
    start = session_rank * slot + rng.random(len(slot)) * np.maximum(slot - duration, 0.0)
    return np.minimum(start[session] + offset, DAY_US - 1).astype(np.int64)


def _list_lengths(rng: np.random.Generator, req: Requests, heavy_user_exposures: int) -> np.ndarray:
    n = len(req.user)
    lo, hi = LIST_LENGTH_RANGE
    lengths = np.where(rng.random(n) < VARIABLE_LIST_RATE, rng.integers(lo, hi + 1, n), LIST_LENGTH)
    lengths[rng.random(n) < EMPTY_RESPONSE_RATE] = 0
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
    return _sigmoid(quality[request] + SCORE_SPREAD * logit_u)


def draw_lists(
    rng: np.random.Generator, pop: Population, req: Requests, heavy_user_exposures: int = 0, explore: bool = False
) -> Lists:
    """Displayed lists (items, positions, scores), one row per empty response.  ``explore`` (--ope): each
    list's items in a uniformly random order, and no list repeats an item."""
    lengths = _list_lengths(rng, req, heavy_user_exposures)
    rows = np.maximum(lengths, 1)
    request, rank = _group_index(rows)
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


@dataclass(frozen=True)
class Clicks:
    user: np.ndarray
    session: np.ndarray
    request: np.ndarray  # -1 where request_id is null
    item: np.ndarray
    ts: np.ndarray
    event: np.ndarray  # index into EVENTS
    orphans: int


def _delays_us(rng: np.random.Generator, n: int, median_s: float, sigma: float, max_s: float) -> np.ndarray:
    seconds = np.clip(rng.lognormal(np.log(median_s), sigma, n), 1.0, max_s)
    return (seconds * US_PER_S).astype(np.int64)


def click_probability(
    pop: Population, req: Requests, lists: Lists, noise: np.ndarray, appeal: np.ndarray | None = None
) -> np.ndarray:
    """P(click) of each row of ``lists`` given its noise draw (with ``appeal``: the items' own effect)."""
    logit = np.log(lists.score) - np.log1p(-lists.score)
    user_bias = pop.click_bias[req.user[lists.request]]
    item_effect = 0.0 if appeal is None else appeal[lists.item]
    p = _sigmoid(CLICK_INTERCEPT + CLICK_SCORE_SLOPE * logit + user_bias + item_effect + noise)
    return p / lists.position**POSITION_BIAS_EXPONENT


def draw_clicks(
    rng: np.random.Generator,
    pop: Population,
    req: Requests,
    lists: Lists,
    day: dt.date,
    appeal: np.ndarray | None = None,
) -> Clicks:
    """Clicks and purchases on exposures, request_id dropped for some, plus orphan clicks."""
    day_end = ((day - EPOCH).days + 1) * DAY_US
    noise = rng.normal(0.0, CLICK_NOISE_SIGMA, len(lists.score))
    p = click_probability(pop, req, lists, noise, appeal)
    row = np.flatnonzero((rng.random(len(p)) < p) & lists.shown)
    shown_ts = req.ts[lists.request[row]]
    click_ts = shown_ts + _delays_us(rng, len(row), CLICK_DELAY_MEDIAN_S, 1.1, MAX_CLICK_DELAY_S)
    kept = click_ts < day_end  # later clicks land in the next day's partition
    row, shown_ts, click_ts = row[kept], shown_ts[kept], click_ts[kept]
    buys = rng.random(len(row)) < PURCHASE_RATE
    buy_ts = np.minimum(
        click_ts[buys]
        + _delays_us(rng, int(np.count_nonzero(buys)), PURCHASE_DELAY_MEDIAN_S, 0.8, MAX_PURCHASE_DELAY_S),
        shown_ts[buys] + MAX_PURCHASE_DELAY_S * US_PER_S,
    )
    buy_kept = buy_ts < day_end
    rows = np.concatenate([row, row[buys][buy_kept]])
    ts = np.concatenate([click_ts, buy_ts[buy_kept]])
    event = np.repeat(np.array([0, 1], dtype=np.int8), [len(row), int(np.count_nonzero(buy_kept))])
    request = lists.request[rows].copy()
    request[rng.random(len(rows)) < NULL_REQUEST_ID_RATE] = -1
    orphan = _orphan_clicks(rng, pop, req, lists, len(rows), day_end)
    user = np.concatenate([req.user[lists.request[rows]], orphan.user])
    session = np.concatenate([req.session[lists.request[rows]], orphan.session])
    request = np.concatenate([request, orphan.request])
    item = np.concatenate([lists.item[rows], orphan.item])
    ts = np.concatenate([ts, orphan.ts])
    event = np.concatenate([event, orphan.event])
    order = np.argsort(ts, kind="stable")
    return Clicks(
        user=user[order],
        session=session[order],
        request=request[order],
        item=item[order],
        ts=ts[order],
        event=event[order],
        orphans=orphan.orphans,
    )


def _orphan_clicks(
    rng: np.random.Generator, pop: Population, req: Requests, lists: Lists, n_clicks: int, day_end: int
) -> Clicks:
    """Clicks that match no exposure: a never-served request_id, or a cold item on a served request."""
    served = lists.request[lists.shown & (lists.position == 1)]
    n = rng.binomial(n_clicks, ORPHAN_CLICK_RATE / (1 - ORPHAN_CLICK_RATE)) if len(served) else 0
    base = served[rng.integers(0, max(len(served), 1), n)]
    fake = rng.random(n) < 0.5
    request = base.copy()
    request[fake] = len(req.user) + np.arange(np.count_nonzero(fake))
    item = np.where(fake, pop.sample_items(rng, n), pop.cold_items[rng.integers(0, len(pop.cold_items), n)])
    delay = _delays_us(rng, n, CLICK_DELAY_MEDIAN_S, 1.1, MAX_CLICK_DELAY_S)
    return Clicks(
        user=req.user[base],
        session=req.session[base],
        request=request,
        item=item.astype(np.int32),
        ts=np.minimum(req.ts[base] + delay, day_end - 1),
        event=np.zeros(n, dtype=np.int8),
        orphans=n,
    )


class DayIds(NamedTuple):
    """String ids of one day's entities; rows pick theirs with ``take``."""

    users: pa.Array
    items: pa.Array
    sessions: pa.Array
    requests: pa.Array  # served requests, then the never-served ids of orphan clicks


def _day_ids(pop: Population, req: Requests, n_requests: int, day: dt.date) -> DayIds:
    stamp = day.strftime("%Y%m%d")
    return DayIds(
        users=format_ids("u", np.arange(pop.n_users), pop.user_width),
        items=format_ids("i", np.arange(pop.n_items), pop.item_width),
        sessions=format_ids(f"s{stamp}-", np.arange(req.n_sessions), _width(req.n_sessions, 6)),
        requests=format_ids(f"r{stamp}-", np.arange(n_requests), _width(n_requests, 7)),
    )


def _pick(names: pa.Array, index: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """``names[index]`` as a plain string array, null where ``valid`` is False."""
    mask = None if valid is None else ~valid
    return names.take(pa.array(np.asarray(index, dtype=np.int32), type=pa.int32(), mask=mask))


def _exposure_batch(
    req: Requests, lists: Lists, ids: DayIds, lo: int, hi: int, propensities: np.ndarray | None = None
) -> pa.RecordBatch:
    request = lists.request[lo:hi]
    shown = lists.shown[lo:hi]
    session = req.session[request]
    extra = (
        []
        if propensities is None
        else [pa.array(column[lo:hi], type=pa.float64(), mask=~shown) for column in propensities]
    )
    return pa.RecordBatch.from_arrays(
        [
            _pick(ids.users, req.user[request]),
            _pick(ids.sessions, session),
            _pick(ids.requests, request),
            _pick(ids.items, lists.item[lo:hi], valid=shown),
            pa.array(lists.position[lo:hi], type=pa.int32(), mask=~shown),
            pa.array(lists.score[lo:hi], type=pa.float64(), mask=~shown),
            _timestamps(req.ts[request]),
            _labels(PLATFORMS, req.session_platform[session]),
            *extra,
        ],
        schema=EXPOSURE_SCHEMA if propensities is None else OPE_EXPOSURE_SCHEMA,
    )


def draw_amounts(rng: np.random.Generator, event: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """(value, dwell_seconds) of each event: a purchase's revenue (to the cent), a click's dwell time (to the
    tenth of a second); null for the other kind."""
    purchase, click = event == EVENTS.index("purchase"), event == EVENTS.index("click")
    value = np.round(rng.lognormal(PURCHASE_VALUE_LOG_MEDIAN, PURCHASE_VALUE_SIGMA, len(event)), 2)
    dwell = np.round(np.clip(rng.lognormal(np.log(DWELL_MEDIAN_S), DWELL_SIGMA, len(event)), 1.0, MAX_DWELL_S), 1)
    return pa.array(value, pa.float64(), mask=~purchase), pa.array(dwell, pa.float64(), mask=~click)


def _click_table(clicks: Clicks, ids: DayIds, rng: np.random.Generator) -> pa.Table:
    value, dwell = draw_amounts(rng, clicks.event)
    return pa.table(
        [
            _pick(ids.users, clicks.user),
            _pick(ids.sessions, clicks.session),
            _pick(ids.requests, clicks.request, valid=clicks.request >= 0),
            _pick(ids.items, clicks.item),
            _timestamps(clicks.ts),
            _labels(EVENTS, clicks.event),
            value,
            dwell,
        ],
        schema=CLICK_SCHEMA,
    )


@dataclass(frozen=True)
class Candidate:
    """--ope: each item's appeal (its own effect on the click logit) and the candidate's estimate of it."""

    appeal: np.ndarray
    estimate: np.ndarray


def make_candidate(pop: Population, seed: int) -> Candidate:
    rng = np.random.default_rng([seed, 5])
    appeal = rng.normal(0.0, APPEAL_SIGMA, pop.n_items)
    return Candidate(appeal, appeal + rng.normal(0.0, CANDIDATE_NOISE, pop.n_items))


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


def candidate_lists(lists: Lists, candidate: Candidate) -> tuple[Lists, np.ndarray]:
    """The candidate's lists: each logged list's items ranked by the candidate's estimated appeal, its best
    ``CANDIDATE_LENGTH`` kept; the score of a row is the logged list's at that position (the request's);
    and q_hat, the candidate's click probability of each row (its model: no user effect, no noise)."""
    shown = np.flatnonzero(lists.shown)
    order = shown[np.lexsort((lists.item[shown], -candidate.estimate[lists.item[shown]], lists.request[shown]))]
    request = lists.request[order]
    first = np.flatnonzero(np.r_[True, request[1:] != request[:-1]])
    rank = np.arange(len(order)) - np.repeat(first, np.diff(np.r_[first, len(order)]))
    keep = rank < CANDIDATE_LENGTH
    request, rank, item = request[keep], rank[keep], lists.item[order][keep]
    start = np.searchsorted(lists.request, request)  # the request's first row (rows are grouped by request)
    score = lists.score[start + rank]
    position = (rank + 1).astype(np.int32)
    logit = np.log(score) - np.log1p(-score)
    q_hat = (
        _sigmoid(CLICK_INTERCEPT + CLICK_SCORE_SLOPE * logit + candidate.estimate[item])
        / position**POSITION_BIAS_EXPONENT
    )
    return Lists(request, position, item, score, np.ones(len(request), dtype=bool), 0), q_hat


def expected_clicks(
    rng: np.random.Generator, pop: Population, req: Requests, lists: Lists, appeal: np.ndarray
) -> float:
    """Σ over the shown rows of P(click), averaged over ``TRUTH_DRAWS`` draws of the noise."""
    shown = lists.shown
    total = 0.0
    for _ in range(TRUTH_DRAWS):
        noise = rng.normal(0.0, CLICK_NOISE_SIGMA, len(lists.score))
        total += float(click_probability(pop, req, lists, noise, appeal)[shown].sum())
    return total / TRUTH_DRAWS


def _candidate_tables(
    pop: Population, req: Requests, lists: Lists, ids: DayIds, candidate: Candidate, rng: np.random.Generator
) -> tuple[pa.Table, pa.Table, dict[str, float]]:
    chosen, q_hat = candidate_lists(lists, candidate)
    requests, items = _pick(ids.requests, chosen.request), _pick(ids.items, chosen.item)
    position = pa.array(chosen.position, type=pa.int32())
    target = pa.table([requests, items, position, pa.array(np.ones(len(q_hat))), pa.array(q_hat)], schema=TARGET_SCHEMA)
    simulated = pa.table([requests, items, position, pa.array(q_hat)], schema=SIMULATED_SCHEMA)
    truth = {
        "logged_rows": float(np.count_nonzero(lists.shown)),
        "lists": float(len(np.unique(lists.request[lists.shown]))),
        "logged_clicks": expected_clicks(rng, pop, req, lists, candidate.appeal),
        "candidate_clicks": expected_clicks(rng, pop, req, chosen, candidate.appeal),
    }
    return target, simulated, truth


def generate_day(
    pop: Population,
    day: dt.date,
    n_exposures: int,
    seed: int,
    heavy_user_exposures: int = 0,
    batch_rows: int = MAX_ROWS_PER_FILE,
    candidate: Candidate | None = None,
) -> DayLogs:
    """Exposures and clicks of one day as Arrow tables (exposures in batches of <= batch_rows).  With a
    ``candidate`` (--ope): the exploring logger, its propensities, and the candidate's tables."""
    rng = np.random.default_rng([seed, 1, day.toordinal()])
    req = draw_requests(rng, pop, day, n_exposures, heavy_user_exposures)
    lists = draw_lists(rng, pop, req, heavy_user_exposures, explore=candidate is not None)
    clicks = draw_clicks(rng, pop, req, lists, day, None if candidate is None else candidate.appeal)
    ids = _day_ids(pop, req, max(len(req.user), int(clicks.request.max(initial=-1)) + 1), day)
    n_rows = len(lists.request)
    propensities = None if candidate is None else logged_propensities(lists)
    with ThreadPoolExecutor(max_workers=_threads()) as pool:  # arrow and numpy release the GIL
        batches = list(
            pool.map(
                lambda lo: _exposure_batch(req, lists, ids, lo, min(lo + batch_rows, n_rows), propensities),
                range(0, n_rows, batch_rows),
            )
        )
    stats = {
        "exposure_rows": n_rows,
        "exposures": int(np.count_nonzero(lists.shown)),
        "requests": len(req.user),
        "empty_requests": int(n_rows - np.count_nonzero(lists.shown)),
        "duplicated_lists": lists.duplicated_lists,
        "sessions": req.n_sessions,
        "active_users": int(np.count_nonzero(np.bincount(req.user, minlength=pop.n_users))),
        "clicks": int(np.count_nonzero(clicks.event == 0)),
        "purchases": int(np.count_nonzero(clicks.event == 1)),
        "null_request_id": int(np.count_nonzero(clicks.request < 0)),
        "orphan_clicks": clicks.orphans,
    }
    # the amounts from a stream of their own: the day's other columns do not depend on them
    click_table = _click_table(clicks, ids, np.random.default_rng([seed, 2, day.toordinal()]))
    stats["gmv_cents"] = round(float(pc.sum(click_table.column("value")).as_py() or 0.0) * 100)
    schema = EXPOSURE_SCHEMA if candidate is None else OPE_EXPOSURE_SCHEMA
    logs = DayLogs(pa.Table.from_batches(batches, schema=schema), click_table, stats)
    if candidate is None:
        return logs
    truth_rng = np.random.default_rng([seed, 7, day.toordinal()])
    target, simulated, truth = _candidate_tables(pop, req, lists, ids, candidate, truth_rng)
    return logs._replace(target=target, simulated=simulated, truth=truth)


# --- A/B assignments ------------------------------------------------------------------------
ASSIGNMENT_SCHEMA = pa.schema(
    [("user_id", pa.string()), ("experiment", pa.string()), ("variant", pa.string()), ("layer", pa.string())]
)
#: (layer, experiment, logit shift of the treatment's click probability): two orthogonal layers, one
#: experiment with a real effect on clicks and one A/A (the same model in both arms)
EXPERIMENTS = (("ranking", "ranker_v2", 0.3), ("ui", "ui_aa", 0.0))
MULTIPLE_ASSIGNMENT_RATE = 0.002  # users logged in both arms of ui_aa (an assignment bug the job must catch)


def experiment_arms(pop: Population, seed: int) -> dict[str, np.ndarray]:
    """Per experiment, True for the users in ``treatment``: a 50/50 split per layer, independent across
    layers (each layer its own random stream) and the same every day."""
    return {
        name: np.random.default_rng([seed, 3, i]).random(pop.n_users) < 0.5
        for i, (_, name, _) in enumerate(EXPERIMENTS)
    }


def with_experiment_effects(pop: Population, seed: int) -> Population:
    """The population whose treatment users of each experiment click with a shifted logit."""
    arms = experiment_arms(pop, seed).values()  # one per experiment, in EXPERIMENTS order
    shift = sum(effect * arm for (_, _, effect), arm in zip(EXPERIMENTS, arms, strict=True))
    return dataclasses.replace(pop, click_bias=pop.click_bias + shift)


def assignments_table(pop: Population, day: dt.date, seed: int) -> pa.Table:
    """``assignments/dt=D``: one row per (user, experiment) for the users that exist on ``day``
    (``first_seen`` <= day), plus a second row with the other variant for a few users of the A/A."""
    exists = pop.first_seen <= (day - EPOCH).days
    users = format_ids("u", np.arange(pop.n_users), pop.user_width)
    arms = experiment_arms(pop, seed)
    doubled = np.random.default_rng([seed, 4]).random(pop.n_users) < MULTIPLE_ASSIGNMENT_RATE
    parts = []
    for layer, name, effect in EXPERIMENTS:
        treated = arms[name]
        rows = [(np.flatnonzero(exists), treated[exists])]
        if effect == 0.0:
            extra = np.flatnonzero(exists & doubled)
            rows.append((extra, ~treated[extra]))
        for index, arm in rows:
            parts.append(
                pa.table(
                    [
                        users.take(pa.array(index)),
                        pa.array([name] * len(index), pa.string()),
                        _labels(("control", "treatment"), arm.astype(np.int8)),
                        pa.array([layer] * len(index), pa.string()),
                    ],
                    schema=ASSIGNMENT_SCHEMA,
                )
            )
    return pa.concat_tables(parts)


# --- sizes, files and CLI -------------------------------------------------------------------
def resolve_sizes(users: int | None, exposures: int | None, items: int | None) -> tuple[int, int, int]:
    """Fill in defaults: 20 exposures per user, items = max(200, users // 2)."""
    if users is None:
        users = DEFAULT_USERS if exposures is None else max(1, round(exposures / EXPOSURES_PER_USER))
    if exposures is None:
        exposures = users * EXPOSURES_PER_USER
    if items is None:
        items = max(MIN_ITEMS, users // 2)
    return users, exposures, items


def write_table(table: pa.Table, directory: Path, max_rows_per_file: int = MAX_ROWS_PER_FILE) -> int:
    """Replace ``directory`` by part-NNNNN.parquet files of at most max_rows_per_file rows each.

    Files are written to a hidden sibling directory first, then swapped in.
    """
    directory = Path(directory)
    staging = directory.parent / f".{directory.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    starts = range(0, max(table.num_rows, 1), max_rows_per_file)

    def write_part(part: int) -> None:
        pq.write_table(
            table.slice(starts[part], max_rows_per_file), staging / f"part-{part:05d}.parquet", compression="snappy"
        )

    with ThreadPoolExecutor(max_workers=_threads()) as pool:
        list(pool.map(write_part, range(len(starts))))
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(staging, directory)
    return len(starts)


def write_days(
    output_root: str | Path,
    date: str | dt.date,
    days: int = 1,
    users: int | None = None,
    exposures: int | None = None,
    items: int | None = None,
    seed: int = 7,
    heavy_user_exposures: int = 0,
    max_rows_per_file: int = MAX_ROWS_PER_FILE,
    log: bool = False,
    experiments: bool = False,
    ope: bool = False,
) -> dict:
    """Write ``days`` consecutive days ending at ``date`` plus the users and items tables.

    Returns the sizes and, per day, the counts of ``generate_day``.  With ``experiments``, also
    ``assignments/dt=D`` (:func:`assignments_table`), and the treatment effects act on the clicks.  With
    ``ope``: the exploring logger's propensities, and the candidate's ``candidates/reranker/target/``,
    ``simulation/reranker/dt=D/`` and ``candidates/reranker/truth.json`` (the module docstring).
    """
    if days < 1 or heavy_user_exposures < 0:
        raise ValueError("days must be >= 1 and heavy_user_exposures >= 0")
    root = Path(output_root)
    end = date if isinstance(date, dt.date) else dt.date.fromisoformat(date)
    n_users, n_exposures, n_items = resolve_sizes(users, exposures, items)
    pop = make_population(n_users, n_items, seed, end)
    if experiments:
        pop = with_experiment_effects(pop, seed)
    catalog = items_table(pop)
    candidate = make_candidate(pop, seed) if ope else None
    truth: dict[str, float] = {}
    write_table(users_table(pop), root / "users")
    write_table(catalog, root / "items")
    summary: dict = {"users": n_users, "items": n_items, "catalog_items": catalog.num_rows, "days": []}
    for back in range(days - 1, -1, -1):
        started = time.perf_counter()
        day = end - dt.timedelta(days=back)
        logs = generate_day(pop, day, n_exposures, seed, heavy_user_exposures, max_rows_per_file, candidate)
        partition = f"dt={day.isoformat()}"
        if logs.target is not None and logs.simulated is not None and logs.truth is not None:
            target = root / "candidates" / CANDIDATE / "target"
            target.mkdir(parents=True, exist_ok=True)
            pq.write_table(logs.target, target / f"part-{day.isoformat()}.parquet", compression="snappy")
            write_table(logs.simulated, root / "simulation" / CANDIDATE / partition)
            truth = {k: truth.get(k, 0.0) + v for k, v in logs.truth.items()}
        files = write_table(logs.exposures, root / "exposures" / partition, max_rows_per_file)
        write_table(logs.clicks, root / "clicks" / partition, max_rows_per_file)
        if experiments:
            write_table(assignments_table(pop, day, seed), root / "assignments" / partition)
        counts = {
            "date": day.isoformat(),
            **logs.stats,
            "exposure_files": files,
            "seconds": round(time.perf_counter() - started, 2),
        }
        summary["days"].append(counts)
        if log:
            print(" ".join(f"{key}={value}" for key, value in counts.items()), flush=True)
    if truth:
        summary["truth"] = write_truth(root / "candidates" / CANDIDATE / "truth.json", truth)
    return summary


def write_truth(path: Path, sums: dict[str, float]) -> dict[str, float]:
    """The expected click rates of the logged policy and the candidate under the model, per logged row
    (what ``recsys-spark ope``'s item-level estimators estimate) and per list (the slate estimators')."""
    truth = {
        "logged_per_row": sums["logged_clicks"] / sums["logged_rows"],
        "candidate_per_row": sums["candidate_clicks"] / sums["logged_rows"],
        "logged_per_list": sums["logged_clicks"] / sums["lists"],
        "candidate_per_list": sums["candidate_clicks"] / sums["lists"],
    }
    path.write_text(json.dumps(truth, indent=2) + "\n")
    return truth


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}")
        return value

    return parse


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m recsys_spark.synthetic.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--date", required=True, type=dt.date.fromisoformat, help="last day, YYYY-MM-DD")
    parser.add_argument("--output-root", required=True, type=Path)
    parser.add_argument(
        "--users",
        type=_count(1),
        help=f"user population (default {DEFAULT_USERS}, or exposures / {EXPOSURES_PER_USER})",
    )
    parser.add_argument(
        "--exposures", type=_count(0), help=f"target exposures per day (default {EXPOSURES_PER_USER} x users)"
    )
    parser.add_argument("--days", type=_count(1), default=1, help="consecutive days ending at --date")
    parser.add_argument("--items", type=_count(100), help=f"catalog size (default max({MIN_ITEMS}, users / 2))")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--heavy-user-exposures",
        type=_count(0),
        default=0,
        help="give user u000000 exactly this many exposures per day",
    )
    parser.add_argument(
        "--max-rows-per-file",
        type=_count(1),
        default=MAX_ROWS_PER_FILE,
        help=f"rows per part file (default {MAX_ROWS_PER_FILE})",
    )
    parser.add_argument(
        "--ope",
        action="store_true",
        help="an exploring logger with propensities, and a candidate policy (docs/ope.md)",
    )
    parser.add_argument(
        "--no-experiments",
        dest="experiments",
        action="store_false",
        help="no assignments table and no treatment effect",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    summary = write_days(
        args.output_root,
        args.date,
        args.days,
        args.users,
        args.exposures,
        args.items,
        args.seed,
        args.heavy_user_exposures,
        args.max_rows_per_file,
        log=True,
        experiments=args.experiments,
        ope=args.ope,
    )
    print(
        f"wrote {len(summary['days'])} day(s), {summary['users']} users, {summary['catalog_items']} "
        f"catalog items to {args.output_root} in {time.perf_counter() - started:.1f}s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
