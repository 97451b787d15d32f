"""The health sums of the users set aside past ``execution.max_user_rows``, on a bounded path.

The day's one Python pass (:class:`per_user.user_pass.UserPass`) holds a user's rows in one call; a user with
more rows than ``execution.max_user_rows`` is set aside, and :func:`heavy_health_rows` gives its health sums
instead: its exploded rows are spread over sub-partitions by (user, request), each part reduced to its units'
sums (:func:`kernels.health_pass.unit_sums`, which add up over a user's requests), and Spark adds the parts.
What it returns has the columns of the pass's ``sum`` rows (``slice, name, key, value, users, flag``), so
:func:`recsys_spark.steps.health.add_up` adds both alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels.health_pass import USER_SUMS, UnitSums, slice_sums, unit_sums
from recsys_spark.per_user.user_pass import codes, flags, measures, pass_input
from recsys_spark.runtime.session import CACHE_LEVEL
from recsys_spark.schema import CLICKED, IN_CATALOG, ITEM, ITEM_CATEGORY, REQUEST, SLICE, USER

_UNIT_DDL = f"{SLICE} string, {USER} string, name string, key string, value double, flag boolean"
_SUM_DDL = f"{SLICE} string, name string, key string, value double, users double, flag boolean"


def _unit_rows_fn(min_list_length: int):
    """mapInArrow: rows of heavy users (a part of each user's requests) -> the part's unit sums as long rows
    (slice, user, name, key, value, flag): the per-unit values (key null), ``category`` (key: the category)
    and ``item`` (key: the item, flag: in the catalog)."""

    def units(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # on the executors
        kept = [b for b in batches if b.num_rows]
        if not kept:
            return
        table = pa.Table.from_batches(kept)
        slices, slice_names = codes(table.column(SLICE))
        users, user_names = codes(table.column(USER))
        items, item_names = codes(table.column(ITEM))
        categories, category_names = codes(table.column(ITEM_CATEGORY))
        u = unit_sums(
            slices,
            users,
            codes(table.column(REQUEST))[0],
            items,
            categories,
            flags(table, CLICKED),
            flags(table, IN_CATALOG),
            min_list_length,
            measures(table),
        )
        n, names = len(u), list(u.values)
        unit = np.r_[np.tile(np.arange(n), len(names)), u.category_unit, u.item_unit].astype(np.int64)
        keys = pa.concat_arrays(
            [
                pa.nulls(n * len(names), pa.string()),
                category_names.take(pa.array(u.category, mask=u.category < 0)),  # a null category stays null
                item_names.take(pa.array(u.item)),
            ]
        )
        kinds = [*np.repeat(np.array(names, dtype=object), n).tolist()]
        kinds += ["category"] * len(u.category) + ["item"] * len(u.item)
        values = np.concatenate([*(u.values[v] for v in names), u.category_n, u.item_n])
        flag = np.r_[np.zeros(n * len(names) + len(u.category), dtype=bool), u.item_listed]
        yield pa.RecordBatch.from_arrays(
            [
                slice_names.take(pa.array(u.slice[unit])),
                user_names.take(pa.array(u.user[unit])),
                pa.array(kinds, pa.string()),
                keys,
                pa.array(values, pa.float64(), from_pandas=True),  # NaN (no list with an item) -> null
                pa.array(flag, pa.bool_()),
            ],
            names=[SLICE, USER, "name", "key", "value", "flag"],
        )

    return units


def heavy_health_rows(
    prepared: DataFrame,
    heavy: Mapping[str, int],
    min_list_length: int,
    rows_per_bucket: int,
) -> tuple[DataFrame, DataFrame]:
    """The health sums' long rows of the users the pass set aside (``heavy``: {user: rows}), on a bounded path.

    Their exploded rows (``prepared``) are spread over sub-partitions by (user, request), so no Python call
    holds more than a part of a user; each part is reduced to its units' sums
    (:func:`kernels.health_pass.unit_sums`), which add up over a user's requests: Spark adds the parts by
    (slice, user, name, key).  The (unit, item) counts become ``item`` rows in Spark (each a distinct user
    of the item); the few per-unit values and (unit, category) counts of these users come to the driver,
    where :func:`kernels.health_pass.slice_sums` gives their per-slice sums and ``category`` rows.
    Returns the rows and the persisted parts they read (the caller unpersists it once the rows are read).
    """
    spark = prepared.sparkSession
    rows = pass_input(prepared.where(F.col(USER).isin(sorted(heavy))), None, has_score=False)  # what the pass reads
    parts = max(1, math.ceil(sum(heavy.values()) / rows_per_bucket))
    merged = (
        rows.repartition(parts, USER, REQUEST)
        .mapInArrow(_unit_rows_fn(min_list_length), _UNIT_DDL)
        .groupBy(SLICE, USER, "name", "key")
        .agg(F.sum("value").alias("value"), F.max("flag").alias("flag"))
        .persist(CACHE_LEVEL)
    )
    items = (
        merged.where(F.col("name") == "item")
        .groupBy(SLICE, "key")
        .agg(
            F.sum("value").alias("value"), F.count(F.lit(1)).cast("double").alias("users"), F.max("flag").alias("flag")
        )
        .select(SLICE, F.lit("item").alias("name"), "key", "value", "users", "flag")
    )
    small = merged.where(F.col("name") != "item").collect()  # a few values per heavy user and slice
    sums = spark.createDataFrame(_heavy_slice_sums(small), _SUM_DDL)
    return items.unionByName(sums), merged


def _heavy_slice_sums(rows) -> list[tuple]:
    """The per-slice sums and ``category`` rows of the heavy users' merged unit rows (on the driver)."""
    units: dict[tuple[str, str], int] = {}
    slice_codes: dict[str, int] = {}
    category_codes: dict[str | None, int] = {}
    values: dict[str, dict[int, float]] = {}
    cats: list[tuple[int, int, float]] = []
    for r in rows:
        unit = units.setdefault((r[SLICE], r[USER]), len(units))
        slice_codes.setdefault(r[SLICE], len(slice_codes))
        if r["name"] == "category":
            code = -1 if r["key"] is None else category_codes.setdefault(r["key"], len(category_codes))
            cats.append((unit, code, float(r["value"])))
        else:
            values.setdefault(r["name"], {})[unit] = math.nan if r["value"] is None else float(r["value"])
    if not units:
        return []
    n = len(units)
    measure_names = tuple(name for name in values if name not in USER_SUMS)
    per_unit = {
        name: np.array([values.get(name, {}).get(u, math.nan) for u in range(n)], dtype=np.float64)
        for name in (*USER_SUMS, *measure_names)
    }
    none, nothing = np.array([], dtype=np.int64), np.array([], dtype=np.float64)
    sums = slice_sums(
        UnitSums(
            np.array([slice_codes[s] for s, _ in units], dtype=np.int64),
            np.arange(n, dtype=np.int64),
            per_unit,
            np.array([u for u, _, _ in cats], dtype=np.int64),
            np.array([c for _, c, _ in cats], dtype=np.int64),
            np.array([v for _, _, v in cats], dtype=np.float64),
            none,
            none,
            nothing,
            np.array([], dtype=bool),
            measure_names,
        )
    )
    slices = list(slice_codes)
    categories = {code: name for name, code in category_codes.items()}
    out = []
    columns = (sums[c] for c in ("slice", "name", "key", "value"))
    for s, name, key, value in zip(*columns, strict=True):
        label = categories[int(key)] if name == "category" and key >= 0 else None
        if name in ("clicks_users", "clicks_exposures"):  # the clicks histogram: key a click count
            label = str(int(key))
        out.append((slices[s], str(name), label, None if math.isnan(value) else float(value), None, False))
    return out
