"""Labelling in one Python pass over the user partitions: the numpy kernel
(:func:`recsys_spark.kernels.labels.label`) fed whole users from Arrow batches, instead of the Spark chain of
:mod:`recsys_spark.steps.label` (deduplication's aggregate, the session window's range join, the feedback join).

Exposures and (weighed) events go into one frame, a ``_side`` column telling them apart; that frame is
hash-partitioned by user once and sorted within partitions by (user, item, request, position, ts), and streamed
through ``mapInArrow``.  Every labelling rule keys on the user and the item (deduplication and the request rule on
(user, request, item), the session rule on (user, session, item); an event without an item is an orphan), so a
(user, item) pair is a whole unit: the kernel labels any batch of whole units as it would their whole users.  A
batch's last unit waits for the next batch, so the kernel never sees a unit cut in two.  The
output is :func:`recsys_spark.steps.label.join_feedback`'s: the kept exposures (every column they came with,
``copies``) and ``relevance``, ``clicked``, ``n_events``, ``n_clicks``, ``value`` / ``dwell_seconds`` (when
the events carry them) and one ``_ev_<name>`` per conversion event.  Selected by ``execution.labelling =
"python"`` (docs/metrics.md "Labelling"); its equality with the Spark chain is tested on the golden days'
shapes (tests/steps/test_label_arrow.py).

Memory: one (user, item) unit's rows at a time beyond the batch, however many rows its user has (a heavy user
is labelled in batches of its items; only a single (user, item) pair larger than a batch is held whole).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DoubleType, LongType, StructField, StructType

from recsys_spark.kernels.labels import CodedEvents, CodedExposures, Labelled, label
from recsys_spark.schema import (
    CLICKED,
    COPIES,
    DWELL,
    ITEM,
    N_CLICKS,
    N_EVENTS,
    POSITION,
    RELEVANCE,
    REQUEST,
    SESSION,
    TS,
    USER,
    VALUE,
)
from recsys_spark.steps.label import weigh_events

SIDE = "_side"  # 0: an exposure row, 1: an event row
#: the event side's columns and their types (null on the exposure side)
_EVENT_COLUMNS = {"_w": "double", "_click": "boolean", "_value": "double", "_dwell": "double"}
_KEYS = (USER, SESSION, REQUEST, ITEM, TS)
#: what the kernel needs whole: every labelling rule keys on both (module docstring)
UNIT = (USER, ITEM)


def _ranks(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Dense ranks of a column's values in ascending (byte) order from 0, null -1: equal ids equal codes, and a
    request's code keeps the order of the request ids."""
    ranks = pc.rank(column, sort_keys="ascending", tiebreaker="dense")  # a null's rank is overwritten below
    codes = np.asarray(ranks.to_numpy(zero_copy_only=False), dtype=np.int64) - 1
    nulls = np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False), dtype=bool)
    codes[nulls] = -1
    return codes


def _micros(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.cast(column, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _positions(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Positions as int64, a null (an empty response's) below every position of the batch: first, as Spark
    orders a null field in ``min(struct(position, ...))`` (explicit: a NaN cast to an integer differs between
    CPUs; one below the smallest, not the int64 minimum, so that differences of positions cannot overflow)."""
    values = pc.cast(column, pa.int64())
    smallest = pc.min(values).as_py()
    filled = pc.fill_null(values, (smallest if smallest is not None else 0) - 1)
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)


def _floats(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _tiebreak(table: pa.Table, others: Sequence[str]) -> np.ndarray:
    """Each exposure row's rank in the order of its other columns, nulls first (Spark's ``min(struct(...))``)."""
    if not others or table.num_rows == 0:
        return np.zeros(table.num_rows, dtype=np.int64)
    # nulls first by a validity key before each column (no null placement option: its form differs across
    # pyarrow versions); the sort is stable, and nulls of one column tie on its validity key
    keyed = {}
    for c in others:
        keyed[f"_valid_{c}"], keyed[c] = pc.is_valid(table.column(c)), table.column(c)
    order = pc.sort_indices(pa.table(keyed), [(c, "ascending") for c in keyed])
    rank = np.empty(table.num_rows, dtype=np.int64)
    rank[np.asarray(order.to_numpy(zero_copy_only=False))] = np.arange(table.num_rows)
    return rank


def _flag_matrix(events: pa.Table, flags: Sequence[str]) -> np.ndarray:
    """The events' conversion flags as an (events, flags) boolean matrix; no column without conversion events."""
    columns = [np.asarray(events.column(f).to_numpy(zero_copy_only=False), dtype=bool) for f in flags]
    return np.stack(columns, axis=1) if columns else np.zeros((events.num_rows, 0), dtype=bool)


def label_table(
    table: pa.Table, exposure_columns: Sequence[str], flags: Sequence[str], carried: Sequence[str], window_us: int
) -> pa.Table:
    """One table of whole (user, item) units (both sides) -> the labelled exposures (:func:`labelled_schema`'s
    columns)."""
    side = np.asarray(table.column(SIDE).to_numpy(zero_copy_only=False))
    exp_rows, ev_rows = np.flatnonzero(side == 0), np.flatnonzero(side == 1)
    ids = {c: _ranks(table.column(c)) for c in (USER, SESSION, REQUEST, ITEM)}
    exposures = table.take(pa.array(exp_rows))
    others = [c for c in exposure_columns if c not in (USER, REQUEST, ITEM, POSITION, TS)]
    coded_exp = CodedExposures(
        user=ids[USER][exp_rows],
        request=ids[REQUEST][exp_rows],
        item=ids[ITEM][exp_rows],
        session=ids[SESSION][exp_rows],
        position=_positions(exposures.column(POSITION)),
        ts=_micros(exposures.column(TS)),
        tiebreak=_tiebreak(exposures, others),
    )
    events = table.take(pa.array(ev_rows))
    n_ev = events.num_rows
    coded_ev = CodedEvents(
        user=ids[USER][ev_rows],
        request=ids[REQUEST][ev_rows],
        item=ids[ITEM][ev_rows],
        session=ids[SESSION][ev_rows],
        ts=_micros(events.column(TS)),
        weight=_floats(events.column("_w")),
        is_click=np.asarray(events.column("_click").to_numpy(zero_copy_only=False), dtype=bool),
        value=_floats(events.column("_value")) if VALUE in carried else np.full(n_ev, np.nan),
        dwell=_floats(events.column("_dwell")) if DWELL in carried else np.full(n_ev, np.nan),
        flags=_flag_matrix(events, flags),
    )
    out = label(coded_exp, coded_ev, window_us)
    return _as_table(exposures.select(list(exposure_columns)).take(pa.array(out.kept)), out, flags, carried)


def _as_table(kept: pa.Table, out: Labelled, flags: Sequence[str], carried: Sequence[str]) -> pa.Table:
    columns = {c: kept.column(c) for c in kept.column_names}
    columns[COPIES] = pa.array(out.copies, pa.int64())
    columns[RELEVANCE] = pa.array(out.relevance, pa.float64())
    columns[CLICKED] = pa.array(out.clicked, pa.bool_())
    columns[N_EVENTS] = pa.array(out.n_events, pa.int64())
    columns[N_CLICKS] = pa.array(out.n_clicks, pa.int64())
    for name, values in ((VALUE, out.value), (DWELL, out.dwell)):
        if name in carried:
            columns[name] = pa.array(values, pa.float64(), mask=np.isnan(values))
    for j, name in enumerate(flags):
        columns[name] = pa.array(out.flags[:, j], pa.bool_())
    return pa.table(columns)


def _last_unit_rows(batch: pa.RecordBatch) -> int:
    """How many rows of a batch sorted by (user, item, ...) belong to its last (user, item) unit (a suffix);
    a null item is a value of its own, as in the sort."""
    n = batch.num_rows
    same = np.ones(n, dtype=bool)
    for name in UNIT:
        column = batch.column(name)
        last = column[n - 1]
        if last.is_valid:
            equal = pc.fill_null(pc.equal(column, last), False)
        else:
            equal = pc.is_null(column)
        same &= np.asarray(equal.to_numpy(zero_copy_only=False), dtype=bool)
    return int(same.sum())


def whole_units(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """Tables of whole (user, item) units from batches sorted by (user, item): a batch's last unit waits for the
    next batch."""
    held: list[pa.RecordBatch] = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        tail = _last_unit_rows(batch)
        if tail < batch.num_rows:
            yield pa.Table.from_batches([*held, batch.slice(0, batch.num_rows - tail)])
            held = []
        held.append(batch.slice(batch.num_rows - tail))
    if held:
        yield pa.Table.from_batches(held)


def label_in_python(
    exposures: DataFrame,
    clicks: DataFrame,
    partitions: int,
    window_minutes: float,
    weights: Mapping[str, float],
    click_event: str,
    conversion_events: Sequence[str] = (),
) -> DataFrame:
    """:func:`recsys_spark.steps.label.deduplicate_exposures` and :func:`~recsys_spark.steps.label.join_feedback`
    in one shuffle and one Python pass (module docstring); ``exposures`` are the valid rows, not deduplicated."""
    both, flags, carried = one_stream(exposures, clicks, partitions, weights, click_event, conversion_events)
    names = label_order(exposures.columns)
    schema = labelled_schema(StructType([exposures.schema[c] for c in names]), flags, carried)
    window_us = window_micros(window_minutes)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for table in whole_units(batches):
            yield from label_table(table, names, flags, carried, window_us).to_batches()

    return both.mapInArrow(run, schema)


def label_order(columns: Sequence[str]) -> tuple[str, ...]:
    """The labelled rows' exposure columns in :func:`~recsys_spark.steps.label.deduplicate_exposures`'s order: the
    key, position and ts first, then the others."""
    first = (USER, REQUEST, ITEM, POSITION, TS)
    return (*first, *[c for c in columns if c not in first])


def window_micros(minutes: float) -> int:
    """``attribution.window_minutes`` in whole microseconds, as the Spark chain rounds it (to the second)."""
    return int(round(minutes * 60)) * 1_000_000


def one_stream(
    exposures: DataFrame,
    clicks: DataFrame,
    partitions: int,
    weights: Mapping[str, float],
    click_event: str,
    conversion_events: Sequence[str] = (),
) -> tuple[DataFrame, list[str], list[str]]:
    """The exposures and the weighed events as one frame (``_side`` tells them apart), hash-partitioned by user
    in one shuffle and sorted within partitions by (user, item, request, position, ts): what the kernel streams;
    with the conversion flags' columns and the carried sums (value, dwell) the events have."""
    events = weigh_events(clicks, weights, click_event, conversion_events)
    flags = [c for c in events.columns if c.startswith("_ev_")]
    carried = [c for c in (VALUE, DWELL) if c in events.columns]
    exp_cols = list(exposures.columns)
    exp_side = exposures.select(
        *exp_cols,
        F.lit(0).alias(SIDE),
        *[F.lit(None).cast(t).alias(c) for c, t in _EVENT_COLUMNS.items()],
        *[F.lit(None).cast("boolean").alias(f) for f in flags],
    )
    ev_side = events.select(
        USER,
        SESSION,
        REQUEST,
        ITEM,
        TS,
        *[F.lit(None).cast(exposures.schema[c].dataType).alias(c) for c in exp_cols if c not in _KEYS],
        F.lit(1).alias(SIDE),
        F.col("weight").alias("_w"),
        F.col("is_click").alias("_click"),
        (F.col(VALUE) if VALUE in carried else F.lit(None)).cast("double").alias("_value"),
        (F.col(DWELL) if DWELL in carried else F.lit(None)).cast("double").alias("_dwell"),
        *[F.col(f) for f in flags],
    )
    both = (
        exp_side.unionByName(ev_side)
        .repartition(partitions, USER)
        .sortWithinPartitions(USER, ITEM, REQUEST, POSITION, TS)
    )
    return both, flags, carried


def labelled_schema(exposures: StructType, flags: Sequence[str], carried: Sequence[str]) -> StructType:
    """The exposures' fields, ``copies``, the labels, the carried sums and the conversion flags."""
    fields = [*exposures.fields, StructField(COPIES, LongType(), False)]
    fields += [
        StructField(RELEVANCE, DoubleType(), False),
        StructField(CLICKED, BooleanType(), False),
        StructField(N_EVENTS, LongType(), False),
        StructField(N_CLICKS, LongType(), False),
    ]
    fields += [StructField(c, DoubleType(), True) for c in carried]
    fields += [StructField(f, BooleanType(), False) for f in flags]
    return StructType(fields)
