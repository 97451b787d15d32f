"""The model of the data: what the generator draws, and every knob of it.

Each part is drawn by a module of its own: ``population`` (users and items), ``requests`` (a day's requests
and sessions), ``ranker`` (the logged lists and their propensities), ``feedback`` (clicks, purchases, their
amounts), ``candidate`` (``--ope``'s candidate policy and its truth) and ``assignments`` (the A/B
experiments); ``day`` puts a day's tables together and ``write`` writes the days
(``python -m recsys_spark.synthetic.generate``).

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

import datetime as dt

import numpy as np

# sizes and files
EXPOSURES_PER_USER = 20
DEFAULT_USERS = 2000
MIN_ITEMS = 200
MAX_ROWS_PER_FILE = 2_000_000

# the population, the requests, the lists, the clicks
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

# time: timestamps are microseconds since the epoch (UTC)
US_PER_S = 1_000_000
DAY_US = 86_400 * US_PER_S
EPOCH = dt.date(1970, 1, 1)


def mean_list_rows() -> float:
    """Expected rows per request (an empty response is one row)."""
    lo, hi = LIST_LENGTH_RANGE
    mean_len = (1 - VARIABLE_LIST_RATE) * LIST_LENGTH + VARIABLE_LIST_RATE * (lo + hi) / 2
    return (1 - EMPTY_RESPONSE_RATE) * mean_len + EMPTY_RESPONSE_RATE


def zipf_weights(n: int, exponent: float) -> np.ndarray:
    """Probabilities of ranks 1..n, proportional to 1 / rank**exponent."""
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent
    return weights / weights.sum()


def sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function, 1 / (1 + exp(-x)): a logit to a probability."""
    return 1.0 / (1.0 + np.exp(-x))
