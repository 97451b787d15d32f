"""Rows as the Spark label stage reads them -> the coded arrays of :mod:`recsys_spark.kernels.labels`.

Ids are coded over one sorted vocabulary per id kind shared by exposures and events (so a request's code is its
rank among the ids, as the session rule's tie needs); null is -1.  The dedup tiebreak is the rank of the rest of
an exposure row (session_id, score) with nulls first, as Spark orders ``min(struct(position, ts, ...))``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from recsys_spark.kernels.labels import CodedEvents, CodedExposures

EPOCH = dt.datetime(1970, 1, 1)


def _codes(left: Sequence[object], right: Sequence[object]) -> tuple[np.ndarray, np.ndarray]:
    codes, _ = pd.factorize(pd.Series(list(left) + list(right), dtype=object), sort=True)
    codes = np.asarray(codes, dtype=np.int64)
    return codes[: len(left)], codes[len(left) :]


def _micros(values: Sequence[dt.datetime]) -> np.ndarray:
    return np.array([(v - EPOCH) // dt.timedelta(microseconds=1) for v in values], dtype=np.int64)


def _nan(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def code(
    exposures: Sequence[tuple],
    events: Sequence[tuple],
    weights: Mapping[str, float],
    click_event: str = "click",
    conversions: Sequence[str] = (),
) -> tuple[CodedExposures, CodedEvents]:
    """``exposures``: (user, session, request, item, position, score, ts); ``events``: (user, session, request,
    item, ts, event, value, dwell): the column order of the test DDLs."""
    e_cols = list(zip(*exposures, strict=True)) if exposures else [[] for _ in range(7)]
    v_cols = list(zip(*events, strict=True)) if events else [[] for _ in range(8)]
    user = _codes(e_cols[0], v_cols[0])
    session = _codes(e_cols[1], v_cols[1])
    request = _codes(e_cols[2], v_cols[2])
    item = _codes(e_cols[3], v_cols[3])
    rest = pd.DataFrame({"s": session[0], "score": _nan(e_cols[5])}).fillna({"score": -np.inf})
    tiebreak = rest.apply(tuple, axis=1).rank(method="dense").to_numpy(dtype=np.int64) if len(rest) else np.zeros(0)
    exp = CodedExposures(
        user=user[0],
        request=request[0],
        item=item[0],
        session=session[0],
        position=np.array(e_cols[4], dtype=np.int64),
        ts=_micros(e_cols[6]),
        tiebreak=np.asarray(tiebreak, dtype=np.int64),
    )
    names = [click_event if n is None else n for n in v_cols[5]]
    ev = CodedEvents(
        user=user[1],
        request=request[1],
        item=item[1],
        session=session[1],
        ts=_micros(v_cols[4]),
        weight=np.array([float(weights.get(n, 0.0)) for n in names], dtype=np.float64),
        is_click=np.array([n == click_event for n in names], dtype=bool),
        value=_nan(v_cols[6]),
        dwell=_nan(v_cols[7]),
        flags=np.array([[n == c for c in conversions] for n in names], dtype=bool).reshape(
            len(names), len(conversions)
        ),
    )
    return exp, ev


def reference(
    exposures: Sequence[tuple], events: Sequence[tuple], weights: Mapping[str, float], window: dt.timedelta
) -> tuple[dict[tuple, tuple], int]:
    """The rules of docs/metrics.md "Labelling" written plainly, one event at a time (an oracle for the
    kernel's tests): {(user, request, item): (copies, position, ts, relevance, clicked, n_events, n_clicks,
    value, dwell, purchase)}, orphans.  Rows as :func:`code` takes them; ``None`` sorts first."""

    def first(value: object) -> tuple[bool, object]:
        return (value is not None, value)

    kept: dict[tuple, tuple] = {}
    copies: dict[tuple, int] = {}
    for row in exposures:
        user, session, request, item, position, score, ts = row
        key = (user, request, item)
        copies[key] = copies.get(key, 0) + 1
        rank = (position, ts, first(session), first(score))
        if key not in kept or rank < kept[key][0]:
            kept[key] = (rank, row)
    got: dict[tuple, list] = {key: [] for key in kept}
    orphans = 0
    for event in events:
        user, session, request, item, ts, name, value, dwell = event
        target = None
        if request is not None:
            target = (user, request, item) if item is not None and (user, request, item) in kept else None
        elif session is not None and item is not None:
            near = [
                (row[6], row[2])
                for _, row in kept.values()
                if row[0] == user and row[1] == session and row[3] == item and ts - window <= row[6] <= ts
            ]
            target = (user, max(near)[1], item) if near else None
        if target is None:
            orphans += 1
        else:
            got[target].append(event)
    out = {}
    for key, (_, row) in kept.items():
        evs = got[key]
        names = ["click" if e[5] is None else e[5] for e in evs]
        values = [e[6] for e in evs if e[6] is not None]
        dwells = [e[7] for e in evs if e[7] is not None]
        out[key] = (
            copies[key],
            row[4],
            row[6],
            max((float(weights.get(n, 0.0)) for n in names), default=0.0),
            "click" in names,
            len(evs),
            names.count("click"),
            sum(values) if values else None,
            sum(dwells) if dwells else None,
            "purchase" in names,
        )
    return out, orphans


T0 = dt.datetime(2026, 11, 20, 10, 0)


def _at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def random_day(rng: np.random.Generator, users: int = 40):
    """A small hostile day: (exposures, events) as :func:`code` takes them: copies at other positions, request ids
    repeated across a user's lists, null sessions and items, ties on ts, events by request and by session around
    the window's ends, and strangers' events."""
    exposures, events = [], []
    for u in range(users):
        user = f"u{u}"
        for r in range(int(rng.integers(1, 6))):
            session = None if rng.random() < 0.05 else f"s{u}_{r % 2}"
            request, minutes = f"r{int(rng.integers(0, 12))}", float(rng.integers(0, 90))  # requests repeat
            if rng.random() < 0.05:
                exposures.append((user, session, request, None, 1, None, _at(minutes)))
                continue
            for p in range(int(rng.integers(1, 5))):
                item = f"i{int(rng.integers(0, 8))}"
                score = None if rng.random() < 0.1 else float(rng.integers(0, 3))
                ts = _at(minutes + float(rng.integers(0, 2)))
                for _ in range(1 + int(rng.random() < 0.2)):  # a copy now and then, maybe at another position
                    exposures.append((user, session, request, item, p + int(rng.integers(0, 2)), score, ts))
        shown = [row for row in exposures if row[0] == user]
        for _ in range(int(rng.integers(0, 8))):
            name = str(rng.choice(["click", "click", "purchase", "view", "None"]))
            value = None if rng.random() < 0.5 else float(rng.integers(0, 50))
            dwell = None if rng.random() < 0.5 else float(rng.integers(0, 50))
            if shown and rng.random() < 0.7:  # after an exposure of the user, by request or by session
                _, session, request, item, _, _, ts = shown[int(rng.integers(0, len(shown)))]
                request = None if rng.random() < 0.5 else request
                when = ts + dt.timedelta(minutes=int(rng.integers(0, 25)))
                events.append((user, session, request, item, when, None if name == "None" else name, value, dwell))
                continue
            request = None if rng.random() < 0.5 else f"r{int(rng.integers(0, 12))}"
            session = None if rng.random() < 0.05 else f"s{u}_{int(rng.integers(0, 2))}"
            item = None if rng.random() < 0.03 else f"i{int(rng.integers(0, 8))}"
            ev_user = user if rng.random() > 0.05 else f"u{int(rng.integers(0, users))}"
            when = _at(float(rng.integers(0, 130)))
            events.append((ev_user, session, request, item, when, None if name == "None" else name, value, dwell))
    return exposures, events
