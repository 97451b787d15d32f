"""A day's feedback on the ranker's lists: clicks and purchases with their times, request ids dropped for
some, orphan clicks, and each event's amounts (the "clicks" part of :mod:`recsys_spark.synthetic.model`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from recsys_spark.synthetic.model import (
    CLICK_DELAY_MEDIAN_S,
    CLICK_INTERCEPT,
    CLICK_NOISE_SIGMA,
    CLICK_SCORE_SLOPE,
    DAY_US,
    DWELL_MEDIAN_S,
    DWELL_SIGMA,
    EPOCH,
    EVENTS,
    MAX_CLICK_DELAY_S,
    MAX_DWELL_S,
    MAX_PURCHASE_DELAY_S,
    NULL_REQUEST_ID_RATE,
    ORPHAN_CLICK_RATE,
    POSITION_BIAS_EXPONENT,
    PURCHASE_DELAY_MEDIAN_S,
    PURCHASE_RATE,
    PURCHASE_VALUE_LOG_MEDIAN,
    PURCHASE_VALUE_SIGMA,
    US_PER_S,
    sigmoid,
)
from recsys_spark.synthetic.population import Population
from recsys_spark.synthetic.ranker import Lists
from recsys_spark.synthetic.requests import Requests


@dataclass(frozen=True)
class Clicks:
    """Feedback events of a day in chronological order (``event`` 0 a click, 1 a purchase)."""

    user: np.ndarray
    session: np.ndarray
    request: np.ndarray  # -1 where request_id is null
    item: np.ndarray
    ts: np.ndarray
    event: np.ndarray  # index into EVENTS
    orphans: int


def _delays_us(rng: np.random.Generator, n: int, median_s: float, sigma: float, max_s: float) -> np.ndarray:
    """``n`` delays ~ LogNormal(ln median_s, sigma) seconds, clipped to [1 s, max_s], in microseconds."""
    seconds = np.clip(rng.lognormal(np.log(median_s), sigma, n), 1.0, max_s)
    return (seconds * US_PER_S).astype(np.int64)


def click_probability(
    pop: Population, req: Requests, lists: Lists, noise: np.ndarray, appeal: np.ndarray | None = None
) -> np.ndarray:
    """P(click) of each row of ``lists`` given its noise draw (with ``appeal``: the items' own effect)."""
    logit = np.log(lists.score) - np.log1p(-lists.score)
    user_bias = pop.click_bias[req.user[lists.request]]
    item_effect = 0.0 if appeal is None else appeal[lists.item]
    p = sigmoid(CLICK_INTERCEPT + CLICK_SCORE_SLOPE * logit + user_bias + item_effect + noise)
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


def draw_amounts(rng: np.random.Generator, event: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """(value, dwell_seconds) of each event: a purchase's revenue (to the cent), a click's dwell time (to the
    tenth of a second); null for the other kind."""
    purchase, click = event == EVENTS.index("purchase"), event == EVENTS.index("click")
    value = np.round(rng.lognormal(PURCHASE_VALUE_LOG_MEDIAN, PURCHASE_VALUE_SIGMA, len(event)), 2)
    dwell = np.round(np.clip(rng.lognormal(np.log(DWELL_MEDIAN_S), DWELL_SIGMA, len(event)), 1.0, MAX_DWELL_S), 1)
    return pa.array(value, pa.float64(), mask=~purchase), pa.array(dwell, pa.float64(), mask=~click)
