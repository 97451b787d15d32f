"""The one Python pass over the user partitions: per-user metrics, the health sums and the aggregates' sums.

The labelled rows are persisted one per exposure, hash-partitioned by user, with their slice keys as an
array (:func:`slices.with_slice_keys`; see :mod:`recsys_spark.per_user.table`).  One ``mapInArrow`` reads each
partition once, as Arrow batches: the strings become integer codes (``dictionary_encode``: no Python
string per row), and one call of :func:`kernels.user_pass.score_partition` gives, for every (slice, user)
unit of the partition,

* the per-user table's values (``user`` rows: one row per unit, the values that depend on k as arrays;
  :meth:`UserPass.user_frame` lays them out one row per (slice, user, k) on the JVM side);
* the health indicators' partial sums (``sum`` rows: :func:`kernels.health_pass.slice_sums`' long rows;
  :mod:`recsys_spark.steps.health` shuffles and adds them, never a row per exposure);
* with the experiments, each unit's day sums (``day`` rows: :func:`kernels.user_day.user_day_sums`, what the
  ``experiment_users`` table holds: no aggregation of exposure rows and no second read of the per-user
  table on the JVM side);
* the aggregates' mergeable sums of the partition (one ``moments`` row: :class:`kernels.moments.Moments` per
  slice, pickled) and the users set aside (``aside`` rows, below).

A list is scored once per distinct set of rows: a user whose every row carries one key of a dimension has
its ``all`` values copied under that key; the other (row, key) pairs are taken by index in numpy
(:mod:`recsys_spark.kernels.user_pass`).  One row per exposure crosses from the JVM to Python, whatever the
number of slices.

**Exactly once.**  Everything the pass gives travels as rows of its output, which is persisted
(:meth:`UserPass.__init__`): the ``user_metrics`` write runs the pass (its result stage), the other readers
read the persisted rows.  No accumulator: a task that runs twice (a retry, a speculative copy, a lost
block recomputed) adds nothing twice, on a classic session and on Spark Connect alike.

**Heavy users.**  While reading its batches a task counts rows per user; a user that passes
``max_user_rows`` is set aside (its rows dropped, its count kept as an ``aside`` row), so no call holds
more than ``max_user_rows`` rows of one user.  Their per-user metrics take :class:`per_user.UserMetrics`'
bounded path, their health sums :func:`health.heavy_health_rows`.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels.business import event_sum
from recsys_spark.kernels.composite import Composite
from recsys_spark.kernels.health_pass import UnitSums
from recsys_spark.kernels.moments import Moments, merge_by_slice, user_table_moments
from recsys_spark.kernels.user_day import user_day_columns, user_day_sums
from recsys_spark.kernels.user_pass import KeyPlan, PartitionRows, plan_keys, score_partition
from recsys_spark.kernels.users import user_table
from recsys_spark.runtime.session import CACHE_LEVEL
from recsys_spark.schema import (
    ALL,
    CLICKED,
    DWELL,
    EVENT_FLAG_PREFIX,
    IN_CATALOG,
    ITEM,
    ITEM_CATEGORY,
    LIST_ID,
    N_CLICKS,
    POSITION,
    RELEVANCE,
    REQUEST,
    SCORE,
    SESSION,
    SLICE,
    SLICE_KEYS,
    USER,
    USER_COLUMNS,
    USER_K_COLUMNS,
    USER_METRICS_COLUMNS,
    VALUE,
)

KIND = "_kind"
_TYPES = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "double": pa.float64()}
_KINDS = dict(USER_METRICS_COLUMNS)
#: the pass's output: a kind, the per-user values (k-dependent ones as arrays), the health sums' long rows,
#: a blob (the partition's moments)
_OUTPUT: list[tuple[str, pa.DataType]] = [
    (KIND, pa.string()),
    (SLICE, pa.string()),
    (USER, pa.string()),
    *[(c, _TYPES[_KINDS[c]]) for c in USER_COLUMNS],
    *[(c, pa.list_(_TYPES[_KINDS[c]])) for c in USER_K_COLUMNS],
    ("name", pa.string()),
    ("key", pa.string()),
    ("value", pa.float64()),
    ("users", pa.float64()),
    ("flag", pa.bool_()),
    ("blob", pa.binary()),
    ("sums", pa.list_(pa.float64())),
]
_SCHEMA = pa.schema(_OUTPUT)
_DDL = {pa.string(): "string", pa.int32(): "int", pa.int64(): "bigint", pa.float64(): "double", pa.bool_(): "boolean"}
_DDL[pa.binary()] = "binary"
OUTPUT_DDL = ", ".join(
    f"`{name}` array<{_DDL[t.value_type]}>" if pa.types.is_list(t) else f"`{name}` {_DDL[t]}" for name, t in _OUTPUT
)
#: the health sums' long rows (``sum`` rows): what :mod:`recsys_spark.steps.health` reads
SUM_COLUMNS = (SLICE, "name", "key", "value", "users", "flag")


# --- on the executors: Arrow in, codes, the kernel, Arrow out ------------------------------------------
def codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Dictionary codes of a string column (-1 for null) and the dictionary."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    encoded = pc.dictionary_encode(array)
    return encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


def flags(table: pa.Table, name: str) -> np.ndarray:
    """A boolean column as a numpy bool array, null (or absent) as false."""
    if name not in table.column_names:
        return np.zeros(table.num_rows, dtype=bool)
    return table.column(name).combine_chunks().fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def numbers(table: pa.Table, name: str) -> np.ndarray:
    """A numeric column as float64, NaN for null."""
    column = pc.cast(table.column(name).combine_chunks(), pa.float64())
    return column.fill_null(np.nan).to_numpy(zero_copy_only=False)


def measures(table: pa.Table) -> dict[str, np.ndarray]:
    """The business metrics' numbers per row (:func:`kernels.health_pass.unit_sums`' measures): the clicks,
    the value and whether there is one, the dwell, a 0/1 per conversion event; a null amount adds 0."""
    names = table.column_names
    out: dict[str, np.ndarray] = {}
    if N_CLICKS in names:
        out["click_events"] = np.nan_to_num(numbers(table, N_CLICKS))
    if VALUE in names:
        value = numbers(table, VALUE)
        out["value"], out["valued"] = np.nan_to_num(value), (~np.isnan(value)).astype(np.float64)
    if DWELL in names:
        out["dwell"] = np.nan_to_num(numbers(table, DWELL))
    for name in names:
        if name.startswith(EVENT_FLAG_PREFIX):
            out[event_sum(name[len(EVENT_FLAG_PREFIX) :])] = flags(table, name).astype(np.float64)
    return out


def _slice_plan(table: pa.Table, user: np.ndarray):
    """(the key plan, the slice dictionary with ``all`` first) of a partition's rows: from their key arrays, their
    ``slice`` column (rows exploded already), or every row under ``all``."""
    n = table.num_rows
    if SLICE_KEYS in table.column_names:
        keys = table.column(SLICE_KEYS).combine_chunks()
        parents = pc.list_parent_indices(keys).to_numpy(zero_copy_only=False).astype(np.int64)
        code, dictionary = codes(pc.list_flatten(keys))
        names = dictionary.to_pylist()
        order = [ALL] + [k for k in names if k != ALL]
        code = np.array([order.index(k) for k in names], dtype=np.int64)[code]
        if not (np.bincount(parents[code == 0], minlength=n) == 1).all():
            # not one ``all`` per row (rows keyed by hand): every (row, key) pair scored as it is
            none = np.array([], dtype=np.int64)
            return KeyPlan(parents, code, none, none), order
        dims = {d: i for i, d in enumerate(dict.fromkeys(k.split("=", 1)[0] for k in order[1:]))}
        dim_of = np.array([-1] + [dims[k.split("=", 1)[0]] for k in order[1:]], dtype=np.int64)
        pair = code > 0
        return plan_keys(user, parents[pair], code[pair], dim_of[code[pair]]), order
    if SLICE in table.column_names:
        code, dictionary = codes(table.column(SLICE))
        none = np.array([], dtype=np.int64)
        names = dictionary.to_pylist()
        return KeyPlan(np.arange(n, dtype=np.int64), code, none, none), names
    return plan_keys(user, np.array([], np.int64), np.array([], np.int64), np.array([], np.int64)), [ALL]


def _item_rank(dictionary: pa.Array) -> np.ndarray:
    """The rank of each item of the dictionary in the ids' own order (exact ties in a list are broken by it)."""
    order = pc.sort_indices(dictionary).to_numpy(zero_copy_only=False)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


def _partition_rows(table: pa.Table) -> tuple[PartitionRows, dict[str, pa.Array]]:
    has = table.column_names
    ranking = LIST_ID in has
    user, users = codes(table.column(USER))
    request = codes(table.column(REQUEST))[0] if REQUEST in has else None
    list_id = codes(table.column(LIST_ID))[0] if ranking else request
    if request is None:  # the ranking input alone (no health sums): lists stand for requests
        request = list_id
    if request is None or list_id is None:
        raise ValueError(f"the pass needs {REQUEST} or {LIST_ID}")
    item, items = codes(table.column(ITEM))
    category, categories = (
        codes(table.column(ITEM_CATEGORY))
        if ITEM_CATEGORY in table.column_names
        else (np.full(table.num_rows, -1, dtype=np.int64), pa.array([], pa.string()))
    )
    rows = PartitionRows(
        user=user,
        request=request,
        list_id=list_id,
        item=item,
        item_rank=np.r_[_item_rank(items), -1][item] if ranking else item,
        category=category,
        position=numbers(table, POSITION) if ranking else np.zeros(0),
        score=numbers(table, SCORE) if ranking else np.zeros(0),
        relevance=numbers(table, RELEVANCE) if ranking else np.zeros(0),
        clicked=flags(table, CLICKED),
        in_catalog=flags(table, IN_CATALOG),
        measures=measures(table),
    )
    return rows, {"user": users, "item": items, "category": categories}


def _batch(kind: str, n: int, columns: dict[str, pa.Array]) -> pa.RecordBatch:
    arrays = [
        pa.array([kind] * n, pa.string()) if name == KIND else columns.get(name, pa.nulls(n, t)) for name, t in _OUTPUT
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=_SCHEMA)


def _user_batch(per_user: dict, per_k: dict, slice_names: pa.Array, users: pa.Array) -> pa.RecordBatch:
    n = len(per_user[USER])
    columns: dict[str, pa.Array] = {
        SLICE: slice_names.take(pa.array(per_user[SLICE], pa.int64())),
        USER: users.take(pa.array(per_user[USER], pa.int64())),
    }
    for name in USER_COLUMNS:
        columns[name] = pa.array(np.asarray(per_user[name]), _TYPES[_KINDS[name]], from_pandas=True)  # NaN: null
    for name in USER_K_COLUMNS:
        columns[name] = _rows_as_lists(np.asarray(per_k[name]), n, _TYPES[_KINDS[name]])
    return _batch("user", n, columns)


def _rows_as_lists(values: np.ndarray, n: int, kind: pa.DataType, nan_is_null: bool = True) -> pa.ListArray:
    """An (n, width) array as n lists of ``width`` values of type ``kind`` (NaN: null, with ``nan_is_null``)."""
    width = values.shape[1] if values.ndim == 2 else 0
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * width, pa.int32())
    return pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1), kind, from_pandas=nan_is_null))


def _sum_batch(health: dict, slice_names: pa.Array, dictionaries: dict[str, pa.Array]) -> pa.RecordBatch:
    name = health["name"]
    key = np.full(len(name), None, dtype=object)
    for kind in ("item", "category"):
        of = (name == kind) & (health["key"] >= 0)  # a null category (no items table) stays null
        key[of] = dictionaries[kind].take(pa.array(health["key"][of])).to_numpy(zero_copy_only=False)
    counted = np.isin(name, ("clicks_users", "clicks_exposures"))  # the clicks histogram: key a click count
    key[counted] = health["key"][counted].astype(str)
    columns = {
        SLICE: slice_names.take(pa.array(health["slice"], pa.int64())),
        "name": pa.array(name, pa.string()),
        "key": pa.array(key, pa.string()),
        "value": pa.array(health["value"], pa.float64(), from_pandas=True),  # NaN (a sum over no value) -> null
        "users": pa.array(health["users"], pa.float64(), from_pandas=True),
        "flag": pa.array(health["flag"], pa.bool_()),
    }
    return _batch("sum", len(name), columns)


def _day_batch(units: UnitSums, sums: np.ndarray, slice_names: pa.Array, users: pa.Array) -> pa.RecordBatch:
    columns = {
        SLICE: slice_names.take(pa.array(units.slice, pa.int64())),
        USER: users.take(pa.array(units.user, pa.int64())),
        "sums": _rows_as_lists(sums, len(sums), pa.float64(), nan_is_null=False),
    }
    return _batch("day", len(sums), columns)


def _set_aside(batches: Iterator[pa.RecordBatch], max_user_rows: int | None) -> tuple[list[pa.RecordBatch], dict]:
    """The partition's batches without the rows of the users past ``max_user_rows`` (their rows counted)."""
    kept: list[pa.RecordBatch] = []
    rows_of: dict[str, int] = {}
    over: set[str] = set()
    for batch in batches:
        if max_user_rows is not None and batch.num_rows:
            counts = pc.value_counts(batch.column(USER))
            newly = []
            for user, n in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True):
                seen = rows_of[user] = rows_of.get(user, 0) + n
                if seen > max_user_rows and user not in over:
                    newly.append(user)
            if newly:
                over.update(newly)
                drop = pa.array(newly, pa.string())
                kept = [b.filter(pc.invert(pc.is_in(b.column(USER), drop))) for b in kept]
            if over:
                batch = batch.filter(pc.invert(pc.is_in(batch.column(USER), pa.array(sorted(over), pa.string()))))
        if batch.num_rows:
            kept.append(batch)
    return kept, {u: rows_of[u] for u in sorted(over)}


def pass_function(
    ks: tuple[int, ...] | None,
    gain: str,
    min_list_length: int | None,
    max_user_rows: int | None,
    day_columns: tuple[str, ...] = (),
    composites: tuple[Composite, ...] = (),
    f_alphas: tuple[float, ...] = (1.0,),
):
    """The pass's function on the executors: a partition's Arrow batches (:func:`pass_input`'s columns, every user
    whole) -> the output rows of the module docstring (``aside``, ``user``, ``moments``, ``sum``, ``day``)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # on the executors
        kept, over = _set_aside(batches, max_user_rows)
        if over:
            yield _batch(
                "aside",
                len(over),
                {USER: pa.array(list(over), pa.string()), "value": pa.array(list(over.values()), pa.float64())},
            )
        if not kept:
            return
        table = pa.Table.from_batches(kept)
        del kept
        rows, dictionaries = _partition_rows(table)
        plan, slice_order = _slice_plan(table, rows.user)
        del table
        slice_names = pa.array(slice_order, pa.string())
        result = score_partition(rows, plan, ks, gain, min_list_length)  # type: ignore[arg-type]
        del rows, plan
        if ks is not None:
            per_user = result.per_user
            if len(per_user[USER]):
                yield _user_batch(per_user, result.per_k, slice_names, dictionaries["user"])
                strings = per_user | {
                    SLICE: np.asarray(slice_order, dtype=object)[np.asarray(per_user[SLICE], dtype=np.int64)],
                    USER: dictionaries["user"]
                    .take(pa.array(per_user[USER], pa.int64()))
                    .to_numpy(zero_copy_only=False),
                }
                moments = user_table_moments(user_table(strings, result.per_k, ks), ks, composites, f_alphas)
                yield _batch("moments", 1, {"blob": pa.array([pickle.dumps(moments)], pa.binary())})
        if min_list_length is not None and len(result.health.get("name", ())):
            yield _sum_batch(result.health, slice_names, dictionaries)
        if day_columns and ks is not None and result.units is not None and len(result.units):
            units, per_user = result.units, result.per_user
            sums = user_day_sums(
                units.slice, units.user, units.values, per_user[SLICE], per_user[USER], per_user, result.per_k, ks,
                day_columns, composites,
            )  # fmt: skip
            yield _day_batch(units, sums, slice_names, dictionaries["user"])

    return run


# --- the driver's side ---------------------------------------------------------------------------------
def pass_input(rows: DataFrame, list_unit: str | None, has_score: bool) -> DataFrame:
    """The columns the pass reads: the ids, the health and business columns, and for the metrics (``list_unit``
    not None) ``list_id`` and ``score`` (without a score column, lists are ranked by position:
    score = -position); the slice keys (``_slices``) or an exploded ``slice`` column when the rows have one."""
    present = set(rows.columns)
    wanted: list[str | Column] = [
        c
        for c in (SLICE_KEYS, SLICE, USER, REQUEST, ITEM, ITEM_CATEGORY, CLICKED, IN_CATALOG, N_CLICKS, VALUE, DWELL)
        if c in present
    ]
    wanted += [c for c in rows.columns if c.startswith(EVENT_FLAG_PREFIX)]
    if list_unit is not None and LIST_ID in present:  # the ranking input already (:func:`per_user.ranking_input`)
        wanted += [LIST_ID, POSITION, SCORE, RELEVANCE]
    elif list_unit is not None:
        list_id = {"request": F.col(REQUEST), "session": F.col(SESSION), "user": F.lit("")}[list_unit]
        score = F.col(SCORE) if has_score else -F.col(POSITION).cast("double")
        wanted += [list_id.alias(LIST_ID), POSITION, score.alias(SCORE), RELEVANCE]
    return rows.select(*wanted)


def pass_rows(
    rows: DataFrame,
    *,
    ks: Sequence[int] | None,
    gain: str = "exponential",
    list_unit: str = "request",
    has_score: bool = True,
    min_list_length: int | None,
    max_user_rows: int | None = None,
    day_columns: Sequence[str] = (),
    composites: Sequence[Composite] = (),
    f_alphas: Sequence[float] = (1.0,),
) -> DataFrame:
    """The pass's output rows (module docstring) over ``rows`` (hash-partitioned by user, read in place):
    per-user values when ``ks`` is given, the health sums when ``min_list_length`` is, and with both the
    users' day sums ``day_columns`` (:func:`kernels.user_day.user_day_columns`) when given; ``composites``:
    the composite metrics (:mod:`kernels.composite`), one more mean each in the moments and, among the day
    sums, their per-user columns; ``f_alphas``: the F-scores' alphas the moments carry."""
    fn = pass_function(
        None if ks is None else tuple(ks),
        gain,
        min_list_length,
        max_user_rows,
        tuple(day_columns),
        tuple(composites),
        tuple(f_alphas),
    )
    return pass_input(rows, None if ks is None else list_unit, has_score).mapInArrow(fn, OUTPUT_DDL)


@dataclass
class PassTotals:
    """What the pass reports to the driver: {slice: Moments} over the users it scored, {user: rows} of the users
    it set aside."""

    moments: dict[str, Moments] = field(default_factory=dict)
    set_aside: dict[str, int] = field(default_factory=dict)


class UserPass:
    """The one pass of a day, persisted: :meth:`user_frame` (the per-user table), :meth:`sum_rows` (the
    health sums), :attr:`totals` (moments and set-aside users, read after :meth:`user_frame` was written).
    The caller unpersists it (:meth:`unpersist`)."""

    def __init__(
        self,
        rows: DataFrame,
        ks: Sequence[int] | None,
        *,
        gain: str = "exponential",
        list_unit: str = "request",
        has_score: bool = True,
        min_list_length: int | None = None,
        max_user_rows: int | None = None,
        persist: bool = True,
        day_sums: bool = False,
        composites: Sequence[Composite] = (),
        f_alphas: Sequence[float] = (1.0,),
    ) -> None:
        """``ks``: the cut-offs of the per-user metrics (None: none); ``min_list_length``: the health sums'
        (None: none); ``persist``: False for an output read once (a bounded path's); ``day_sums``: also each
        user's day sums for the experiments (with both ``ks`` and ``min_list_length``); ``composites``: the
        composite metrics, computed from each user's values in the pass (:mod:`kernels.composite`)."""
        self.ks = None if ks is None else tuple(ks)
        with_day = day_sums and self.ks is not None and min_list_length is not None
        self.day_columns = tuple(user_day_columns(rows.columns, self.ks, composites)) if with_day and self.ks else ()
        output = pass_rows(
            rows,
            ks=self.ks,
            gain=gain,
            list_unit=list_unit,
            has_score=has_score,
            min_list_length=min_list_length,
            max_user_rows=max_user_rows,
            day_columns=self.day_columns,
            composites=composites,
            f_alphas=f_alphas,
        )
        self.output = output.persist(CACHE_LEVEL) if persist else output
        self._totals: PassTotals | None = None

    def user_frame(self) -> DataFrame:
        """One row per (slice, user, k), the per-user table's columns (:data:`schema.USER_METRICS_COLUMNS`)."""
        if self.ks is None:
            raise ValueError("a pass without ks has no per-user rows")
        ks = F.array(*[F.lit(k) for k in self.ks]).alias("k")
        rows = self.output.where(F.col(KIND) == "user")
        laid = rows.select(SLICE, USER, *USER_COLUMNS, F.inline(F.arrays_zip(ks, *USER_K_COLUMNS)))
        return laid.select(*[name for name, _ in USER_METRICS_COLUMNS])

    def day_frame(self) -> DataFrame:
        """One row per (slice, user) with a labelled row, but the users set aside: ``slice``, ``user_id`` and the
        day sums (:attr:`day_columns`, :mod:`recsys_spark.kernels.user_day`)."""
        if not self.day_columns:
            raise ValueError("a pass without day_sums has no day rows")
        rows = self.output.where(F.col(KIND) == "day")
        return rows.select(SLICE, USER, *[F.col("sums")[i].alias(name) for i, name in enumerate(self.day_columns)])

    def sum_rows(self) -> DataFrame:
        """The health sums' long rows of every partition (not yet added up)."""
        return self.output.where(F.col(KIND) == "sum").select(*SUM_COLUMNS)

    @property
    def totals(self) -> PassTotals:
        if self._totals is None:
            moments: dict[str, Moments] = {}
            set_aside: dict[str, int] = {}
            small = self.output.where(F.col(KIND).isin("moments", "aside")).select(KIND, USER, "value", "blob")
            for row in small.collect():  # a row per partition, and one per heavy user
                if row[KIND] == "moments":
                    merge_by_slice(moments, pickle.loads(row["blob"]))
                else:
                    set_aside[row[USER]] = int(row["value"])
            self._totals = PassTotals(moments, set_aside)
        return self._totals

    def unpersist(self) -> None:
        self.output.unpersist()
