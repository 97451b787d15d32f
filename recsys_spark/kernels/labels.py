"""Labelling in numpy: deduplicate a batch of users' exposures and attribute their events, with the
semantics of the Spark label stage (:mod:`recsys_spark.steps.label`; docs/metrics.md "Labelling").

The batch holds whole (user, item) units (every exposure and event of a user with that item, or with a null
item, is in it): every rule below keys on both, so a batch of whole units is labelled as its whole users would
be.  Ids arrive as integer codes (:class:`CodedExposures`, :class:`CodedEvents`); a code of ``-1`` is a null
id.  ``request`` codes must keep the order of the request ids (a code is the id's rank among the batch's ids, as
``np.unique`` gives), because the session rule breaks a tie on ``ts`` by the larger request id; the other codes
need only be equal when the ids are.  Timestamps are integer microseconds.

Rules, for one batch:

1. **Deduplication.** One exposure per (user, request, item), nulls forming one group each: the row that is
   smallest in (position, ts, tiebreak) is kept, ``copies`` is the group's size.  ``tiebreak`` is the rank of
   the rest of the row (the Spark stage keeps ``min(struct(position, ts, others...))``).
2. **By request.** An event with a request (code >= 0) goes to the kept exposure with the same (user, request,
   item); an event with a null item, or whose key no exposure has, is an orphan (it does not fall back to
   rule 3).
3. **By session.** Events without a request are grouped by (user, session, item, ts) (identical events resolve
   together).  A group goes to the kept exposure with the same user, session and item (none of them null)
   whose ts lies in [ts - window, ts] and is the largest; among equal ts, the larger request.  A group with
   no such exposure is an orphan.
4. **Per exposure.** ``relevance`` = max weight over its events (0 when none), ``clicked`` = any of them is a
   click, ``n_events`` = how many events, ``n_clicks`` = how many clicks, ``value`` / ``dwell`` = the sum over
   its events that carry one (NaN when none does), ``flags`` = any-of per conversion event.
   ``orphans`` = events - sum(n_events).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NULL = -1


@dataclass(frozen=True)
class CodedExposures:
    """A batch's exposure rows: integer-coded ids (``-1`` null), position, ts in microseconds, and the rank of
    the rest of each row (lower is kept first on a tie in position and ts; zeros when there is no rest)."""

    user: np.ndarray
    request: np.ndarray
    item: np.ndarray
    session: np.ndarray
    position: np.ndarray
    ts: np.ndarray
    tiebreak: np.ndarray


@dataclass(frozen=True)
class CodedEvents:
    """A batch's event rows: coded ids (``-1`` null), ts in microseconds, each event's weight, whether it is a
    click, its value and dwell (NaN when it carries none) and its conversion flags (n x flags, bool)."""

    user: np.ndarray
    request: np.ndarray
    item: np.ndarray
    session: np.ndarray
    ts: np.ndarray
    weight: np.ndarray
    is_click: np.ndarray
    value: np.ndarray
    dwell: np.ndarray
    flags: np.ndarray


@dataclass(frozen=True)
class Labelled:
    """One row per kept exposure: ``kept`` indexes the input rows; the rest are aligned with it."""

    kept: np.ndarray
    copies: np.ndarray
    relevance: np.ndarray
    clicked: np.ndarray
    n_events: np.ndarray
    n_clicks: np.ndarray
    value: np.ndarray
    dwell: np.ndarray
    flags: np.ndarray
    orphans: int


def _group_starts(*keys: np.ndarray) -> np.ndarray:
    """Start offsets of the runs of equal key tuples in rows already sorted by those keys (``0`` first)."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for key in keys:
        change[1:] |= key[1:] != key[:-1]
    return np.flatnonzero(change)


def deduplicate(exp: CodedExposures) -> tuple[np.ndarray, np.ndarray]:
    """Rule 1: (indices of the kept rows, sorted by (user, request, item); each one's copies)."""
    key = _packed(exp.user, exp.request, exp.item)
    keys = (key,) if key is not None else (exp.item, exp.request, exp.user)
    columns = (exp.tiebreak, exp.ts, exp.position, *keys)
    # rows the shuffle already sorted by (user, request, item, position, ts) need no sort here
    order = np.arange(len(key)) if key is not None and _is_sorted(columns) else np.lexsort(columns)
    starts = _group_starts(*(k[order] for k in keys))
    copies = np.diff(np.append(starts, len(order)))
    return order[starts], copies.astype(np.int64)


def _is_sorted(columns: tuple[np.ndarray, ...]) -> bool:
    """Whether the rows are in ``np.lexsort(columns)`` order already (the last column is the primary key)."""
    if len(columns[0]) < 2:
        return True
    undecided = np.ones(len(columns[0]) - 1, dtype=bool)  # pairs equal on the keys compared so far
    for column in columns[::-1]:
        step = column[1:].astype(np.int64) - column[:-1].astype(np.int64) if column.dtype != bool else None
        if step is None or bool(np.any(step[undecided] < 0)):
            return False
        undecided &= step == 0
    return True


def _packed(*columns: np.ndarray) -> np.ndarray | None:
    """The tuples of ``columns`` (integer codes >= -1) as one int64 with their order, when their ranges fit
    (mixed radix: each column's code + 1 is a digit); None when they do not."""
    packed = np.zeros(len(columns[0]), dtype=np.int64)
    span = 1
    for column in columns:
        base = int(column.max()) + 2 if len(column) else 1
        span *= base
        if span >= 2**62:
            return None
        packed = packed * base + (column + 1)
    return packed


def _factorize(*columns: np.ndarray) -> np.ndarray:
    """One dense code per distinct tuple of ``columns`` (row-aligned integer codes >= -1)."""
    if len(columns[0]) == 0:
        return np.zeros(0, dtype=np.int64)
    packed = _packed(*columns)
    if packed is not None:
        return np.unique(packed, return_inverse=True)[1].reshape(-1).astype(np.int64)
    order = np.lexsort(columns[::-1])
    starts = _group_starts(*(c[order] for c in columns))
    codes = np.empty(len(order), dtype=np.int64)
    codes[order] = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(order))))
    return codes


def _by_request(exp: CodedExposures, kept: np.ndarray, ev: CodedEvents) -> np.ndarray:
    """Rule 2: for each event, the index into ``kept`` of its exposure, or -1 (orphan or a session event)."""
    target = np.full(len(ev.user), -1, dtype=np.int64)
    direct = np.flatnonzero((ev.request != NULL) & (ev.item != NULL))
    if len(direct) == 0 or len(kept) == 0:
        return target
    keys = _factorize(
        np.concatenate([exp.user[kept], ev.user[direct]]),
        np.concatenate([exp.request[kept], ev.request[direct]]),
        np.concatenate([exp.item[kept], ev.item[direct]]),
    )
    slot = np.full(int(keys.max()) + 1, -1, dtype=np.int64)
    slot[keys[: len(kept)]] = np.arange(len(kept))  # a kept exposure's key is unique (rule 1)
    target[direct] = slot[keys[len(kept) :]]
    return target


def _session_groups(ev: CodedEvents) -> tuple[np.ndarray, np.ndarray]:
    """Rule 3's groups: (the session events' indices sorted by group, each event's group number)."""
    rows = np.flatnonzero(ev.request == NULL)
    order = rows[np.lexsort((ev.ts[rows], ev.item[rows], ev.session[rows], ev.user[rows]))]
    starts = _group_starts(ev.user[order], ev.session[order], ev.item[order], ev.ts[order])
    group = np.zeros(len(order), dtype=np.int64)
    if len(order):
        group[starts[1:]] = 1
        group = np.cumsum(group)
    return order, group


def _session_key(exp: CodedExposures, ev: CodedEvents) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The columns rule 3 matches on, exposure side and event side: user, session, item."""
    return ((exp.user, ev.user), (exp.session, ev.session), (exp.item, ev.item))


def _by_session(
    exp: CodedExposures, kept: np.ndarray, ev: CodedEvents, rows: np.ndarray, first: np.ndarray, window_us: int
) -> np.ndarray:
    """Rule 3: for each session group (its first event ``rows[first]``), the index into ``kept`` of its
    exposure, or -1.  Candidates and groups are merged in (key, ts) order, a candidate before a group at the
    same ts and, among candidates, the larger request later; each group then takes the last candidate before
    it, when it has the group's key and lies within the window."""
    lead = rows[first]
    groups_ok = (ev.session[lead] != NULL) & (ev.item[lead] != NULL)
    cand = np.flatnonzero((exp.session[kept] != NULL) & (exp.item[kept] != NULL))
    found = np.full(len(lead), -1, dtype=np.int64)
    live = np.flatnonzero(groups_ok)
    if len(cand) == 0 or len(live) == 0:
        return found
    c_rows, g_rows = kept[cand], lead[live]
    if len(c_rows) > 4 * len(g_rows):  # only exposures an event could go to take part in the merge below
        both = _packed(*(np.concatenate([e[c_rows], v[g_rows]]) for e, v in _session_key(exp, ev)))
        if both is not None:
            near = np.isin(both[: len(c_rows)], both[len(c_rows) :])
            cand, c_rows = cand[near], c_rows[near]
    key = _factorize(
        np.concatenate([exp.user[c_rows], ev.user[g_rows]]),
        np.concatenate([exp.session[c_rows], ev.session[g_rows]]),
        np.concatenate([exp.item[c_rows], ev.item[g_rows]]),
    )
    n_c = len(cand)
    ts = np.concatenate([exp.ts[c_rows], ev.ts[g_rows]])
    is_group = np.concatenate([np.zeros(n_c, dtype=np.int8), np.ones(len(live), dtype=np.int8)])
    request = np.concatenate([exp.request[c_rows], np.zeros(len(live), dtype=exp.request.dtype)])
    merged = np.lexsort((request, is_group, ts, key))
    at_group = merged >= n_c
    # the merged position of the last candidate at or before each merged position (-1: none yet)
    last = np.maximum.accumulate(np.where(at_group, -1, np.arange(len(merged))))
    group_pos, last_at = merged[at_group] - n_c, last[at_group]
    ok = last_at >= 0
    cand_of = np.where(ok, merged[np.maximum(last_at, 0)], -1)
    ok[ok] &= key[cand_of[ok]] == key[n_c + group_pos[ok]]
    ok[ok] &= ts[cand_of[ok]] >= ts[n_c + group_pos[ok]] - window_us
    found[live[group_pos[ok]]] = cand[cand_of[ok]]
    return found


def _nan_sum(values: np.ndarray, target: np.ndarray, size: int) -> np.ndarray:
    """Per target, the sum of the non-NaN values; NaN where a target has none."""
    has = ~np.isnan(values)
    total = np.zeros(size)
    np.add.at(total, target[has], values[has])
    seen = np.zeros(size, dtype=bool)
    seen[target[has]] = True
    return np.where(seen, total, np.nan)


def label(exp: CodedExposures, ev: CodedEvents, window_us: int) -> Labelled:
    """Rules 1-4 on one batch of whole (user, item) units (module docstring)."""
    kept, copies = deduplicate(exp)
    target = _by_request(exp, kept, ev)
    rows, group = _session_groups(ev)
    first = _group_starts(group) if len(group) else np.zeros(0, dtype=np.int64)
    target[rows] = _by_session(exp, kept, ev, rows, first, window_us)[group]
    n, hit = len(kept), target >= 0
    t = target[hit]
    relevance = np.full(n, -np.inf)
    np.maximum.at(relevance, t, ev.weight[hit])
    n_events = np.bincount(t, minlength=n).astype(np.int64)
    relevance[n_events == 0] = 0.0  # no event: relevance 0 (an event may weigh less, if configured so)
    n_clicks = np.bincount(t, weights=ev.is_click[hit].astype(np.float64), minlength=n).astype(np.int64)
    flags = np.zeros((n, ev.flags.shape[1] if ev.flags.ndim == 2 else 0), dtype=bool)
    for j in range(flags.shape[1]):
        flags[t[ev.flags[hit, j]], j] = True
    return Labelled(
        kept=kept,
        copies=copies,
        relevance=relevance,
        clicked=n_clicks > 0,
        n_events=n_events,
        n_clicks=n_clicks,
        value=_nan_sum(ev.value[hit], t, n),
        dwell=_nan_sum(ev.dwell[hit], t, n),
        flags=flags,
        orphans=int(len(ev.user) - hit.sum()),
    )
