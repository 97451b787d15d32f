"""A day's requests: how many each user makes, its sessions and their timestamps (the "requests" and
"sessions" parts of :mod:`recsys_spark.synthetic.model`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np

from recsys_spark.synthetic.model import (
    DAILY_ACTIVITY_SIGMA,
    DAY_US,
    EPOCH,
    HEAVY_USER,
    LIST_LENGTH,
    MAX_REQUEST_GAP_S,
    PLATFORM_P,
    PLATFORMS,
    SESSION_COUNT_P,
    US_PER_S,
    mean_list_rows,
)
from recsys_spark.synthetic.population import Population


@dataclass(frozen=True)
class Requests:
    """Requests of a day in chronological order (index = request number)."""

    user: np.ndarray
    session: np.ndarray  # day-global session number
    ts: np.ndarray  # microseconds since the epoch
    session_platform: np.ndarray  # platform code by session number
    n_sessions: int


def _requests_per_user(
    rng: np.random.Generator, pop: Population, day: dt.date, n_exposures: int, heavy_user_exposures: int
) -> np.ndarray:
    """Requests of each user: Poisson(lambda_u), lambda_u proportional to activity x daily noise (0 before
    ``first_seen``), scaled to about ``n_exposures`` rows; the heavy user gets lists of 10 to its exposures."""
    active = pop.first_seen <= (day - EPOCH).days
    weight = pop.activity * rng.lognormal(0.0, DAILY_ACTIVITY_SIGMA, pop.n_users) * active
    if heavy_user_exposures:
        weight[HEAVY_USER] = 0.0
    total = weight.sum()
    lam = n_exposures / mean_list_rows() * weight / total if total > 0 else weight
    counts = rng.poisson(lam)
    if heavy_user_exposures:
        counts[HEAVY_USER] = -(-heavy_user_exposures // LIST_LENGTH)
    return counts


def group_index(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
    user, rank = group_index(per_user)
    session = (np.cumsum(sessions) - sessions)[user] + rank * sessions[user] // per_user[user]
    session_user, session_rank = group_index(sessions)
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
