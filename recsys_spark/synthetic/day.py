"""One day's logs as Arrow tables: the requests, the ranker's lists and the feedback drawn in order from the
day's random stream, turned into exposures (in batches) and clicks, and with a candidate (``--ope``) its
tables and truth."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recsys_spark.synthetic.candidate import Candidate, candidate_lists, candidate_truth
from recsys_spark.synthetic.columns import (
    CLICK_SCHEMA,
    EXPOSURE_SCHEMA,
    OPE_EXPOSURE_SCHEMA,
    SIMULATED_SCHEMA,
    TARGET_SCHEMA,
    format_ids,
    id_width,
    labels,
    pick,
    threads,
    timestamps,
)
from recsys_spark.synthetic.feedback import Clicks, draw_amounts, draw_clicks
from recsys_spark.synthetic.model import EVENTS, MAX_ROWS_PER_FILE, PLATFORMS
from recsys_spark.synthetic.population import Population
from recsys_spark.synthetic.ranker import Lists, draw_lists, logged_propensities
from recsys_spark.synthetic.requests import Requests, draw_requests


class DayLogs(NamedTuple):
    """One day's ``exposures`` and ``clicks`` tables and its counts (``stats``)."""

    exposures: pa.Table
    clicks: pa.Table
    stats: dict[str, int]
    #: --ope: the candidate's table for recsys-spark ope, its lists for recsys-spark simulate, and the
    #: expected clicks of both policies under the model (truth.json's sums)
    target: pa.Table | None = None
    simulated: pa.Table | None = None
    truth: dict[str, float] | None = None


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
        sessions=format_ids(f"s{stamp}-", np.arange(req.n_sessions), id_width(req.n_sessions, 6)),
        requests=format_ids(f"r{stamp}-", np.arange(n_requests), id_width(n_requests, 7)),
    )


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
            pick(ids.users, req.user[request]),
            pick(ids.sessions, session),
            pick(ids.requests, request),
            pick(ids.items, lists.item[lo:hi], valid=shown),
            pa.array(lists.position[lo:hi], type=pa.int32(), mask=~shown),
            pa.array(lists.score[lo:hi], type=pa.float64(), mask=~shown),
            timestamps(req.ts[request]),
            labels(PLATFORMS, req.session_platform[session]),
            *extra,
        ],
        schema=EXPOSURE_SCHEMA if propensities is None else OPE_EXPOSURE_SCHEMA,
    )


def _click_table(clicks: Clicks, ids: DayIds, rng: np.random.Generator) -> pa.Table:
    value, dwell = draw_amounts(rng, clicks.event)
    return pa.table(
        [
            pick(ids.users, clicks.user),
            pick(ids.sessions, clicks.session),
            pick(ids.requests, clicks.request, valid=clicks.request >= 0),
            pick(ids.items, clicks.item),
            timestamps(clicks.ts),
            labels(EVENTS, clicks.event),
            value,
            dwell,
        ],
        schema=CLICK_SCHEMA,
    )


def _candidate_tables(
    pop: Population, req: Requests, lists: Lists, ids: DayIds, candidate: Candidate, rng: np.random.Generator
) -> tuple[pa.Table, pa.Table, dict[str, float]]:
    """The candidate's ``target`` table (probability 1, its q_hat), its ``simulated`` lists (q_hat as the
    score), and the day's sums for truth.json."""
    chosen, q_hat = candidate_lists(lists, candidate)
    requests, items = pick(ids.requests, chosen.request), pick(ids.items, chosen.item)
    position = pa.array(chosen.position, type=pa.int32())
    target = pa.table([requests, items, position, pa.array(np.ones(len(q_hat))), pa.array(q_hat)], schema=TARGET_SCHEMA)
    simulated = pa.table([requests, items, position, pa.array(q_hat)], schema=SIMULATED_SCHEMA)
    return target, simulated, candidate_truth(rng, pop, req, lists, chosen, candidate.appeal)


def _day_stats(pop: Population, req: Requests, lists: Lists, clicks: Clicks) -> dict[str, int]:
    """The day's counts (``write_days`` returns and prints them)."""
    n_rows = len(lists.request)
    return {
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
    with ThreadPoolExecutor(max_workers=threads()) as pool:  # arrow and numpy release the GIL
        batches = list(
            pool.map(
                lambda lo: _exposure_batch(req, lists, ids, lo, min(lo + batch_rows, n_rows), propensities),
                range(0, n_rows, batch_rows),
            )
        )
    stats = _day_stats(pop, req, lists, clicks)
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
