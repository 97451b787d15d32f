"""Health indicators and business metrics per slice: one Python pass, one collect of small sums.

The sliced labelled exposures (one row per (exposure, slice), empty
responses included with a null item; see :mod:`recsys_spark.steps.slices`) are
reduced to *sufficient statistics* -- sums per slice and a histogram of the
items' exposure counts per slice -- and the maths is done on the driver by
:mod:`recsys_spark.kernels.health` and :mod:`recsys_spark.kernels.business`.

The sliced rows come hash-partitioned by user and persisted
(:func:`per_user.persist_user_rows`, the same partitions the per-user
metrics read), so every user is whole in one partition:

* the day's one Python pass (:class:`user_pass.UserPass`; alone,
  :func:`partition_pass`), one ``mapInArrow`` over the user partitions that
  reads one row per exposure with its slice keys
  (:func:`kernels.health_pass.unit_sums` then ``slice_sums``) gives, per slice, PV, UV,
  coverage, failure, business counts, the per-list and per-user category
  entropies and the per-user products of the intervals; per (slice,
  category) the exposures; per (slice, item) the exposures, the distinct
  users and the catalog flag.  Only these partial sums are shuffled (by
  slice, name, key) and persisted for the branches below;
* :func:`request_rows`: the per-slice sums and the slice's category counts;
* :func:`item_pass`: from the item rows, the exposure histogram (Gini,
  Lorenz, item coverage), the users per item (personalization) and the
  popularity join (novelty);
* :func:`history_pass` (with a previous day or earlier days' clicks): the
  user's item set joined on the user with the previous day's set
  (update_rate, update_rate_previous) and with the items (and categories) it
  clicked on the earlier days (novel_item_share, novel_category_share); only
  the history's sets move.

The branches and the catalog counts are one query (a union of long rows
``(slice, name, key, value)``) and one collect.  What reaches the driver is a
few sums per slice plus the histograms, whose size is the number of distinct
exposure counts (at most sqrt(2 * exposures) per slice), never proportional
to users or items.  The Lorenz curve (at most ``lorenz_points`` rows per
slice) is computed exactly from the histogram (:func:`kernels.health.lorenz_curve`).

Intervals (docs/statistics.md): the pass also sums per-user squares and
cross products, from which :mod:`kernels.intervals` gives delta-method and t
intervals with the user as the unit; with ``stats.bootstrap_replicates`` > 0,
:mod:`recsys_spark.per_user.bootstrap` adds its own passes and one more collect of
per-replicate sums for Gini, personalization, novelty, item coverage and the
global category diversity.

Memory: one call holds its partition (about ``execution.rows_per_bucket``
rows) without the users past ``execution.max_user_rows``: the pass sets them
aside, and their sums take :func:`heavy_health_rows` (rows spread by (user,
request), the parts' unit sums added in Spark).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.kernels.business import Measured, business_values
from recsys_spark.kernels.estimates import Interval
from recsys_spark.kernels.health import health_values
from recsys_spark.kernels.health_pass import USER_SUMS, UnitSums, slice_sums, unit_sums
from recsys_spark.kernels.intervals import business_intervals, health_intervals, overflow_notes
from recsys_spark.per_user.aggregate import MetricRow
from recsys_spark.per_user.bootstrap import bootstrap_sums, health_bootstrap_intervals
from recsys_spark.per_user.user_pass import KIND, SUM_COLUMNS, UserPass, codes, flags, measures, pass_rows
from recsys_spark.runtime.session import CACHE_LEVEL
from recsys_spark.schema import (
    ALL,
    CATEGORY,
    CLICKED,
    DWELL,
    EVENT_FLAG_PREFIX,
    IN_CATALOG,
    ITEM,
    ITEM_CATEGORY,
    LORENZ_DDL,
    N_CLICKS,
    REQUEST,
    SLICE,
    UNKNOWN,
    USER,
    VALUE,
)
from recsys_spark.steps.slices import PopularityCutoffs, SliceDims


@dataclass
class HealthResult:
    rows: list[MetricRow]
    lorenz: list[tuple[str, float, float]]
    notes: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)


# --- the two passes ------------------------------------------------------------------------------
def _n_log_n(c: Column) -> Column:
    return F.when(c > 0, c * F.log(c)).otherwise(F.lit(0.0))


def _long(df: DataFrame, names: Sequence[str]) -> DataFrame:
    """Slice-level sums as long rows (slice, name, null, value)."""
    return (
        df.select(SLICE, *[F.col(n).cast("double").alias(n) for n in names])
        .unpivot([SLICE], list(names), "name", "value")
        .select(F.col(SLICE).alias("slice"), "name", F.lit(None).cast("double").alias("key"), "value")
    )


def user_items(prepared: DataFrame) -> DataFrame:
    """(slice, user, item) -> exposures n, in_catalog."""
    return (
        prepared.where(F.col(ITEM).isNotNull())
        .groupBy(SLICE, USER, ITEM)
        .agg(F.count(F.lit(1)).alias("n"), F.max(IN_CATALOG).alias("in_catalog"))
    )


def measured_of(columns: Sequence[str]) -> Measured:
    """Which business rows labelled rows with these columns give (:class:`kernels.business.Measured`)."""
    return Measured(
        clicks=N_CLICKS in columns,
        value=VALUE in columns,
        dwell=DWELL in columns,
        events=tuple(c[len(EVENT_FLAG_PREFIX) :] for c in columns if c.startswith(EVENT_FLAG_PREFIX)),
    )


def add_up(sum_rows: DataFrame) -> DataFrame:
    """The partitions' long rows (slice, name, key, value, users, flag) added up by (slice, name, key): the only
    shuffle of the health sums, a row per slice and name, per category and per item seen in a partition, never
    a row per exposure."""
    return sum_rows.groupBy(SLICE, "name", "key").agg(
        F.sum("value").alias("value"), F.sum("users").alias("users"), F.max("flag").alias("flag")
    )


def partition_pass(prepared: DataFrame, min_list_length: int) -> DataFrame:
    """The health sums of one Python pass over the user partitions (:func:`user_pass.pass_rows`, the health
    sums only), added up (:func:`add_up`): (slice, name, key, value, users, flag) with per-slice sums (key
    null), ``category`` rows (key: the category) and ``item`` rows (key: the item)."""
    rows = pass_rows(prepared, ks=None, min_list_length=min_list_length)
    return add_up(rows.where(F.col(KIND) == "sum").select(*SUM_COLUMNS))


# --- users past execution.max_user_rows: their rows split by request ------------------------------
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
    columns = [c for c in (SLICE, USER, REQUEST, ITEM, ITEM_CATEGORY, CLICKED, IN_CATALOG) if c in prepared.columns]
    columns += [c for c in (N_CLICKS, VALUE, DWELL) if c in prepared.columns]
    columns += [c for c in prepared.columns if c.startswith(EVENT_FLAG_PREFIX)]
    rows = prepared.where(F.col(USER).isin(sorted(heavy))).select(*columns)
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
        out.append((slices[s], str(name), label, None if math.isnan(value) else float(value), None, False))
    return out


def request_rows(summed: DataFrame) -> DataFrame:
    """The per-slice sums, the users' category entropies and the slice's category counts, as long rows."""
    scalar = summed.where(~F.col("name").isin("item", "category")).select(
        F.col(SLICE).alias("slice"), "name", F.lit(None).cast("double").alias("key"), "value"
    )
    c = F.col("value")
    categories = (
        summed.where(F.col("name") == "category")
        .groupBy(SLICE)
        .agg(
            F.sum(c).alias("cat_n"),
            F.sum(_n_log_n(c)).alias("cat_s"),
            F.sum(F.when(F.col("key") == UNKNOWN, c).otherwise(0)).alias("unknown"),
        )
    )
    return scalar.unionByName(_long(categories, ["cat_n", "cat_s", "unknown"]))


def item_pass(summed: DataFrame, popularity: DataFrame | None) -> DataFrame:
    """From the ``item`` rows of :func:`partition_pass`: exposure histogram, users per item and novelty
    sums, as long rows."""
    items = summed.where(F.col("name") == "item").select(
        SLICE,
        F.col("key").alias(ITEM),
        F.col("value").alias("exposures"),
        F.col("users"),
        F.col("flag").alias("in_catalog"),
    )
    hist = (
        items.groupBy(SLICE, "exposures", "in_catalog")
        .agg(F.count(F.lit(1)).alias("items"))
        .select(
            F.col(SLICE).alias("slice"),
            F.when(F.col("in_catalog"), F.lit("hist_catalog")).otherwise(F.lit("hist_other")).alias("name"),
            F.col("exposures").cast("double").alias("key"),
            F.col("items").cast("double").alias("value"),
        )
    )
    users = F.col("users")
    sums = [F.sum(users * (users - 1)).alias("user_overlap"), F.sum(users).alias("user_items")]
    names = ["user_overlap", "user_items"]
    if popularity is not None:
        clickers = popularity.groupBy(ITEM).agg(F.count_distinct(USER).alias("k"))
        items = items.join(clickers, on=ITEM, how="left")
        sums.append(F.sum(F.col("exposures") * F.log2(F.coalesce(F.col("k"), F.lit(0)) + 1)).alias("novelty_log"))
        names.append("novelty_log")
    out = hist.unionByName(_long(items.groupBy(SLICE).agg(*sums), names))
    if popularity is not None:
        n_clickers = popularity.agg(F.count_distinct(USER).alias("value"))
        out = out.unionByName(
            n_clickers.select(
                F.lit(None).cast("string").alias("slice"),
                F.lit("n_clickers").alias("name"),
                F.lit(None).cast("double").alias("key"),
                F.col("value").cast("double").alias("value"),
            )
        )
    return out


def history_pass(
    prepared: DataFrame, previous: DataFrame | None, seen: DataFrame | None, catalog: DataFrame | None
) -> DataFrame:
    """The sums of the rows that compare a user's items with its history, as long rows, from one join:

    * with ``previous`` (distinct (user_id, item_id) of the previous day): update_rate's and
      update_rate_previous's, over the returning users (exposed on both days): their new items, today's and
      the previous day's distinct items;
    * with ``seen`` ((user_id, item_id) of the click events of the earlier days): novel_item_share's (and,
      with a catalog, novel_category_share's), over the users with exposures: their distinct items, those
      they did not click on those days (``novel_item_new``) and those of a category they clicked no item of
      (``novel_category_new``; an item missing from the catalog is in the ``unknown`` category, as for
      category_diversity); a user who clicked nothing before finds everything novel.

    The user's item set per slice is joined on the user with its history sets (one row per user, the two
    histories joined with each other first): the rows stay where :func:`per_user.persist_user_rows` put
    them, only the history's sets move.
    """
    sides = []
    if previous is not None:
        sides.append(previous.groupBy(USER).agg(F.collect_set(ITEM).alias("before")))
    if seen is not None:
        clicked = seen.select(USER, ITEM)
        seen_category = F.lit(None).cast("array<string>")
        if catalog is not None:
            clicked = clicked.join(catalog.select(ITEM, F.col(CATEGORY).alias("_seen_category")), on=ITEM, how="left")
            seen_category = F.collect_set(F.coalesce(F.col("_seen_category"), F.lit(UNKNOWN)))
        sides.append(
            clicked.groupBy(USER).agg(F.collect_set(ITEM).alias("seen_items"), seen_category.alias("seen_categories"))
        )
    history = sides[0] if len(sides) == 1 else sides[0].join(sides[1], on=USER, how="full")
    per_user = (
        prepared.where(F.col(ITEM).isNotNull())
        .groupBy(SLICE, USER, ITEM)
        .agg(F.max(ITEM_CATEGORY).alias("category"))
        .groupBy(SLICE, USER)
        .agg(F.collect_list(ITEM).alias("today"), F.collect_list("category").alias("categories"))
        # every exposed user for the novel shares; the returning ones only, without them
        .join(history, on=USER, how="left" if seen is not None else "inner")
    )
    items = F.col("items")
    columns: list[Column | str] = [SLICE, F.size("today").alias("items")]
    sums: dict[str, Column] = {}
    if previous is not None:
        returning = F.col("before").isNotNull()
        columns += [
            returning.alias("returning"),
            F.size(F.array_except("today", "before")).alias("new"),
            F.size("before").alias("prev"),
        ]
        new, prev = F.col("new"), F.col("prev")
        rate, seed_rate = new / items, new / prev  # ours: over today's items; the seed's: over the previous day's

        def over_returning(value: Column) -> Column:
            return F.sum(F.when(F.col("returning"), value))

        sums |= {
            "returning": F.sum(F.col("returning").cast("long")),
            "update_sum": over_returning(rate),
            "update_sum2": over_returning(rate * rate),
            "update_new": over_returning(new),
            "update_items": over_returning(items),
            "update_prev": over_returning(prev),
            "update_prev_sum": over_returning(seed_rate),
            "update_prev_sum2": over_returning(seed_rate * seed_rate),
            # per-user products for the delta-method intervals of update_rate(_previous) global
            "update_new*update_new": over_returning(new * new),
            "update_items*update_items": over_returning(items * items),
            "update_new*update_items": over_returning(new * items),
            "update_prev*update_prev": over_returning(prev * prev),
            "update_new*update_prev": over_returning(new * prev),
        }
    if seen is not None:
        empty = F.array().cast("array<string>")
        seen_items, seen_categories = F.coalesce("seen_items", empty), F.coalesce("seen_categories", empty)
        columns += [
            F.size(F.array_except("today", seen_items)).alias("item_new"),
            F.size(F.filter("categories", lambda c: ~F.array_contains(seen_categories, c))).alias("category_new"),
        ]
        sums |= {
            "novel_users": F.count(F.lit(1)),
            "novel_items": F.sum(items),
            "novel_items*novel_items": F.sum(items * items),
        }
        for part in ("item", "category") if catalog is not None else ("item",):
            novel = F.col(f"{part}_new")
            share = novel / items
            sums |= {
                f"novel_{part}_new": F.sum(novel),
                f"novel_{part}_sum": F.sum(share),
                f"novel_{part}_sum2": F.sum(share * share),
                f"novel_{part}_new*novel_{part}_new": F.sum(novel * novel),
                f"novel_{part}_new*novel_items": F.sum(novel * items),
            }
    out = per_user.select(*columns).groupBy(SLICE).agg(*[value.alias(name) for name, value in sums.items()])
    return _long(out, list(sums))


def catalog_pass(catalog: DataFrame, dims: SliceDims) -> DataFrame:
    """Catalog items per slice (``catalog_items``) and categories (``catalog_categories``), as long rows.

    ``all`` and every non-item slice see the whole catalog (the ``all`` row);
    ``category=c`` (or another item column) sees the catalog items with that value.
    """
    keys = [F.lit(ALL)] + [
        F.concat(F.lit(f"{name}="), F.coalesce(F.col(name).cast("string"), F.lit(UNKNOWN))) for name in dims.item
    ]
    sizes = (
        catalog.select(F.explode(F.array(*keys)).alias(SLICE), CATEGORY)
        .groupBy(SLICE)
        .agg(F.count(F.lit(1)).alias("catalog_items"), F.count_distinct(CATEGORY).alias("catalog_categories"))
    )
    return _long(sizes, ["catalog_items", "catalog_categories"])


# --- from the collected sums to metric rows ------------------------------------------------------
def _split(rows) -> tuple[dict, dict, int | None]:
    stats: dict[str, dict[str, float]] = {}
    hist: dict[str, dict[tuple[float, bool], float]] = {}
    n_clickers = None
    for r in rows:
        if r["name"] == "n_clickers":
            n_clickers = int(r["value"] or 0)
        elif r["name"].startswith("hist_"):
            key = (r["key"], r["name"] == "hist_catalog")
            hist.setdefault(r["slice"], {})[key] = r["value"]
        else:
            stats.setdefault(r["slice"], {})[r["name"]] = r["value"]
    return stats, hist, n_clickers


def _popularity_catalog(hist_all: dict, catalog_all: int, cutoffs: PopularityCutoffs) -> dict[str, int]:
    """Catalog items per popularity bucket: exposed catalog items by count, never-exposed ones are tail."""
    sizes = {"popularity=head": 0, "popularity=mid": 0, "popularity=tail": 0}
    exposed = 0
    for (count, in_catalog), items in hist_all.items():
        if not in_catalog:
            continue
        exposed += int(items)
        bucket = "head" if count >= cutoffs.head_min else "tail" if count <= cutoffs.tail_max else "mid"
        sizes[f"popularity={bucket}"] += int(items)
    sizes["popularity=tail"] += max(catalog_all - exposed, 0)
    return sizes


def evaluate_health(
    spark: SparkSession,
    prepared: DataFrame,
    dims: SliceDims,
    catalog: DataFrame | None,
    *,
    min_list_length: int,
    lorenz_points: int,
    popularity: DataFrame | None = None,
    previous: DataFrame | None = None,
    cutoffs: PopularityCutoffs | None = None,
    items_path: str = "",
    confidence: float = 0.95,
    bootstrap_replicates: int = 0,
    seed: int = 0,
    keyed: DataFrame | None = None,
    seen: DataFrame | None = None,
    user_pass: UserPass | None = None,
    max_user_rows: int | None = None,
    rows_per_bucket: int = 200_000,
) -> HealthResult:
    """Health and business rows of every slice, and the Lorenz points.

    Parameters
    ----------
    prepared : sliced labelled exposures hash-partitioned by user and
        persisted (:func:`per_user.persist_user_rows`):
        ``slice``, ``user_id``, ``request_id``, ``item_id`` null for empty
        responses, ``clicked``, ``_category``, ``_in_catalog``.
    dims : the slice dimensions (item dimensions restrict the catalog).
    catalog : the items table, one row per item, or None.
    popularity : (user_id, item_id) clicks defining popularity, or None (no novelty).
    previous : distinct (user_id, item_id) of the previous day, or None (no update_rate).
    cutoffs : popularity cut-offs when ``popularity`` is a slice.
    confidence : level of the rows' intervals (:mod:`kernels.intervals`; the user is the unit).
    bootstrap_replicates, seed : Poisson bootstrap keyed by user for Gini, personalization, novelty,
        item coverage and global category diversity (:mod:`recsys_spark.per_user.bootstrap`); 0 replicates:
        no interval for those.
    keyed : ``prepared`` before the slices were exploded, with each row's slice keys as an array
        (:func:`slices.with_slice_keys`), in the same partitions; the Python pass reads it instead (one
        row per exposure, each distinct set of rows scored once).
    seen : (user_id, item_id) clicks of the days before (the novelty history), or None (no
        novel_item_share, novel_category_share): what a user has already consumed.
    user_pass : the day's one pass over the user partitions (:class:`user_pass.UserPass`, built with
        ``min_list_length``), whose health sums this reads; None: a pass of the health sums only, over
        ``keyed`` (or ``prepared``), setting aside the users past ``max_user_rows`` (None: no bound).
    rows_per_bucket : about how many rows a Python call of the set-aside users' bounded path holds.
    """
    notes: list[str] = []
    measured = measured_of((prepared if keyed is None else keyed).columns)
    own = user_pass is None
    if user_pass is None:
        user_pass = UserPass(
            prepared if keyed is None else keyed, None, min_list_length=min_list_length, max_user_rows=max_user_rows
        )
    # the one Python pass over the persisted user partitions gave every sum; what moves is partial sums,
    # and the set-aside users' on their bounded path.  The added sums (a row per slice and item) are
    # persisted for the branches that read them: each would add them up again
    heavy = user_pass.totals.set_aside
    sums, merged = user_pass.sum_rows(), None
    if heavy:
        spread = rows_per_bucket // (1 + len(dims.names))  # the bounded path reads the exploded rows
        extra, merged = heavy_health_rows(prepared, heavy, min_list_length, max(spread, 1))
        sums = sums.unionByName(extra)
    summed = add_up(sums).persist(CACHE_LEVEL)
    try:
        long = request_rows(summed).unionByName(item_pass(summed, popularity))
        if previous is not None or seen is not None:
            long = long.unionByName(history_pass(prepared, previous, seen, catalog))
        if catalog is not None:
            long = long.unionByName(catalog_pass(catalog, dims))
        stats, hist, n_clickers = _split(long.collect())
    finally:
        summed.unpersist()
        if merged is not None:
            merged.unpersist()
        if own:
            user_pass.unpersist()
    sizes, n_categories = None, None
    if catalog is not None:
        sizes = {s: int(v.pop("catalog_items")) for s, v in stats.items() if "catalog_items" in v}
        n_categories = int(stats.get(ALL, {}).pop("catalog_categories", 0) or 0)
        for v in stats.values():
            v.pop("catalog_categories", None)
        stats = {s: v for s, v in stats.items() if v or s == ALL}
    else:
        notes.append(
            f"item_coverage, gini (catalog) and category_diversity skipped: no items table at "
            f"{items_path}; the Lorenz curve is over the exposed items"
        )
    if sizes is not None and "popularity" in dims.names and cutoffs is not None:
        sizes.update(_popularity_catalog(hist.get(ALL, {}), sizes.get(ALL, 0), cutoffs))
    k = None
    if n_categories is not None:
        k = n_categories + (1 if (stats.get(ALL, {}).get("unknown") or 0) > 0 else 0)
    boot = None
    if bootstrap_replicates:
        by_category = None
        if k is not None:
            by_category = (
                prepared.where(F.col(ITEM).isNotNull())
                .groupBy(SLICE, USER, F.col(ITEM_CATEGORY).alias("category"))
                .agg(F.count(F.lit(1)).alias("c"))
            )
        boot = bootstrap_sums(user_items(prepared), popularity, bootstrap_replicates, seed, by_category)
    rows: list[MetricRow] = []
    lorenz: list[tuple[str, float, float]] = []
    by_slice: dict[str, dict] = {}
    for s in sorted(set(stats) | set(hist)):
        if s is None:
            continue
        catalog_items = None
        if sizes is not None:
            catalog_items = sizes.get(ALL, 0) if _whole_catalog(s, dims) else sizes.get(s, 0)
        values, (x, y) = health_values(
            stats.get(s, {}),
            hist.get(s, {}),
            catalog_items,
            k,
            n_clickers if popularity is not None else None,
            previous is not None,
            lorenz_points,
            seen is not None,
        )
        values += business_values(stats.get(s, {}), measured)
        intervals = health_intervals(
            stats.get(s, {}), k, previous is not None, confidence, seen is not None
        ) | business_intervals(stats.get(s, {}), confidence, measured)
        if boot is not None:
            exposed_in_catalog = sum(m for (_, cat), m in hist.get(s, {}).items() if cat)
            zeros = None if catalog_items is None else max(catalog_items - exposed_in_catalog, 0)
            intervals |= health_bootstrap_intervals(
                boot,
                s,
                {(m, a): v for m, a, v, _, _ in values},
                n_clickers if popularity is not None else None,
                zeros,
                confidence,
                catalog_items,
                k,
            )
        rows += [_with_interval(MetricRow(m, None, a, s, v, n, se), intervals.get((m, a))) for m, a, v, n, se in values]
        lorenz += [(s, float(a), float(b)) for a, b in zip(x, y, strict=True)]
        by_slice[s] = intervals
    notes += overflow_notes(by_slice)
    info = {"health_rows": len(rows), "lorenz_points": len(lorenz), "categories": k, "novelty_users": n_clickers}
    return HealthResult(rows, lorenz, notes, info)


def _with_interval(row: MetricRow, interval: Interval | None) -> MetricRow:
    """The row with its interval (kernels.intervals); without one, se and bounds null and ci_method none.
    A value that is not finite (a sum that overflowed a double) is null: not a number (the interval's note
    says which sum)."""
    if row.value is not None and not math.isfinite(row.value):
        row = MetricRow(row.metric, row.k, row.aggregation, row.slice, None, row.n)
    if interval is None or row.value is None:
        return MetricRow(row.metric, row.k, row.aggregation, row.slice, row.value, row.n)
    return row.with_interval(interval)


def _whole_catalog(slice_key: str, dims: SliceDims) -> bool:
    """Whether a slice sees the whole catalog (``all`` and every non-item dimension)."""
    name = slice_key.split("=", 1)[0]
    return slice_key == ALL or name not in dims.item_dims


def lorenz_frame(spark: SparkSession, points: list[tuple[str, float, float]]) -> DataFrame:
    """The Lorenz table (slice, x, y), one small file."""
    return spark.createDataFrame(points, LORENZ_DDL).coalesce(1)
