"""The population: users and items shared by every generated day, drawn from (seed, sizes) only (the
population part of :mod:`recsys_spark.synthetic.model`), and its ``users`` and ``items`` tables."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from recsys_spark.synthetic.columns import ITEM_SCHEMA, USER_SCHEMA, format_ids, id_width, labels
from recsys_spark.synthetic.model import (
    ACTIVITY_SIGMA,
    CATEGORIES,
    CLICK_USER_SIGMA,
    COLD_ITEM_RATE,
    COUNTRIES,
    EPOCH,
    HEAVY_USER,
    MISSING_ITEM_RATE,
    NEW_USER_RATE,
    PLATFORM_P,
    PLATFORMS,
    zipf_weights,
)


@dataclass(frozen=True)
class Population:
    """Users and items shared by all the generated days (:mod:`recsys_spark.synthetic.model`)."""

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
    #: share of each user's requests answered with an empty list (None: EMPTY_RESPONSE_RATE for everyone; an
    #: experiment's treatment may raise it, :mod:`recsys_spark.synthetic.assignments`)
    empty_rate: np.ndarray | None = None

    @property
    def n_users(self) -> int:
        return len(self.activity)

    @property
    def n_items(self) -> int:
        return len(self.category)

    @property
    def user_width(self) -> int:
        return id_width(self.n_users, 6)

    @property
    def item_width(self) -> int:
        return id_width(self.n_items, 4)

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
        country=rng.choice(len(COUNTRIES), n_users, p=zipf_weights(len(COUNTRIES), 1.1)),
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
    category = rng.choice(len(CATEGORIES), n_items, p=zipf_weights(len(CATEGORIES), 0.9))
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
            labels(COUNTRIES, pop.country),
        ],
        schema=USER_SCHEMA,
    )


def items_table(pop: Population) -> pa.Table:
    """The ``items`` table: the catalog, with the lagging (missing) items left out."""
    ids = np.flatnonzero(pop.in_catalog)
    return pa.table(
        [format_ids("i", ids, pop.item_width), labels(CATEGORIES, pop.category[ids])],
        schema=ITEM_SCHEMA,
    )
