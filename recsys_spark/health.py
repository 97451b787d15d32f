"""Health indicators and business metrics per slice: two passes, one collect of small sums.

The sliced labelled exposures (one row per (exposure, slice), empty
responses included with a null item; see :mod:`recsys_spark.slices`) are
reduced to *sufficient statistics* -- sums per slice and a histogram of the
items' exposure counts per slice -- and the maths is done on the driver by
:mod:`recsys_spark.kernels.health` and :mod:`recsys_spark.kernels.business`.

The sliced rows come hash-partitioned by user and persisted
(:func:`per_user.partition_by_user`, the same partitions the per-user
metrics read), so every group-by whose keys include the user runs inside the
partitions, without another shuffle of the rows, and reads only the cached
columns it needs:

* pass A (:func:`request_pass`) groups them by (slice, user, request,
  category), then by request and by user: PV, UV, coverage, failure,
  business counts, category entropy per list; by (slice, user, category):
  category entropy per user; by (slice, category), one small shuffle of
  partial sums: the slice's category counts;
* pass B (:func:`item_pass`) groups them by (slice, user, item)
  (:func:`user_items`), then by (slice, item) (one shuffle of the user-item
  pairs): the exposure histogram (Gini, Lorenz, item coverage), the users per
  item (personalization) and the popularity join (novelty); and by (slice,
  user), the user's item set joined on the user with the previous day's set
  (update_rate; only the previous day's sets move).

Both passes and the catalog counts are one query (a union of long rows
``(slice, name, key, value)``) and one collect.  What reaches the driver is a
few sums per slice plus the histograms, whose size is the number of distinct
exposure counts (at most sqrt(2 * exposures) per slice), never proportional
to users or items.  The Lorenz curve (at most ``lorenz_points`` rows per
slice) is computed exactly from the histogram (:func:`kernels.health.lorenz_curve`).

Intervals (docs/statistics.md): the (slice, user) aggregation of pass A also
sums per-user squares and cross products, from which :mod:`kernels.intervals`
gives delta-method and t intervals with the user as the unit; with
``stats.bootstrap_replicates`` > 0, :mod:`recsys_spark.bootstrap` adds its own
passes and one more collect of per-replicate sums for Gini, personalization,
novelty, item coverage and the global category diversity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.aggregate import MetricRow
from recsys_spark.bootstrap import bootstrap_sums, health_bootstrap_intervals
from recsys_spark.kernels.business import business_values
from recsys_spark.kernels.health import health_values
from recsys_spark.kernels.intervals import business_intervals, health_intervals
from recsys_spark.kernels.stats import Interval
from recsys_spark.schema import (
    ALL,
    CATEGORY,
    CLICKED,
    IN_CATALOG,
    ITEM,
    ITEM_CATEGORY,
    LORENZ_DDL,
    REQUEST,
    SLICE,
    UNKNOWN,
    USER,
)
from recsys_spark.slices import PopularityCutoffs, SliceDims


@dataclass
class HealthResult:
    rows: list[MetricRow]
    lorenz: list[tuple[str, float, float]]
    notes: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)


# --- the two passes ------------------------------------------------------------------------------
def _n_log_n(c: Column) -> Column:
    return F.when(c > 0, c * F.log(c)).otherwise(F.lit(0.0))


def _entropy(n: Column, s: Column) -> Column:
    """ln N - S / N (natural log) from N = sum c and S = sum c ln c; null when N = 0."""
    return F.when(n > 0, F.log(n) - F.try_divide(s, n))


def _count_if(cond: Column) -> Column:
    return F.sum(F.when(cond, 1).otherwise(0))


def _long(df: DataFrame, names: Sequence[str]) -> DataFrame:
    """Slice-level sums as long rows (slice, name, null, value)."""
    return (
        df.select(SLICE, *[F.col(n).cast("double").alias(n) for n in names])
        .unpivot([SLICE], list(names), "name", "value")
        .select(F.col(SLICE).alias("slice"), "name", F.lit(None).cast("double").alias("key"), "value")
    )


def requests_by_category(prepared: DataFrame) -> DataFrame:
    """(slice, user, request, category) -> n items, clicked items; empty responses give n = 0."""
    item = F.col(ITEM).isNotNull()
    return prepared.groupBy(SLICE, USER, REQUEST, ITEM_CATEGORY).agg(
        F.count(ITEM).alias("n"), _count_if(item & F.col(CLICKED)).alias("clicked")
    )


def user_items(prepared: DataFrame) -> DataFrame:
    """(slice, user, item) -> exposures n, in_catalog."""
    return (
        prepared.where(F.col(ITEM).isNotNull())
        .groupBy(SLICE, USER, ITEM)
        .agg(F.count(F.lit(1)).alias("n"), F.max(IN_CATALOG).alias("in_catalog"))
    )


#: per-user products summed per slice for the delta-method intervals (kernels.intervals): name -> (x, y)
#: over the columns of the (slice, user) aggregation; ``list_hu`` is the user's sum of list entropies
_PRODUCTS = {
    "pv*pv": ("pv", "pv"),
    "pv_covered*pv": ("covered", "pv"),
    "pv_covered*pv_covered": ("covered", "covered"),
    "pv_empty*pv": ("empty", "pv"),
    "pv_empty*pv_empty": ("empty", "empty"),
    "exposures*exposures": ("exposures", "exposures"),
    "clicked*clicked": ("clicked", "clicked"),
    "clicked*exposures": ("clicked", "exposures"),
    "clicked*pv": ("clicked", "pv"),
    "lists*lists": ("lists", "lists"),
    "list_hu*list_hu": ("list_h", "list_h"),
    "list_hu*lists": ("list_h", "lists"),
}
USER_PRODUCTS = [*_PRODUCTS, "list_hu"]


def _user_products() -> list[Column]:
    """Sums over users of the per-user products in :data:`_PRODUCTS`, and of the user's list entropy sum."""

    def value(name: str) -> Column:
        return F.coalesce(F.col(name), F.lit(0.0))

    return [F.sum(value(a) * value(b)).alias(name) for name, (a, b) in _PRODUCTS.items()] + [
        F.sum(value("list_h")).alias("list_hu")
    ]


def request_pass(prepared: DataFrame, min_list_length: int) -> DataFrame:
    """Pass A over the user partitions: PV/UV, coverage, failure, business counts and category
    entropies, as long rows.

    Three aggregations of the rows, each partition-local until its last step:
    (slice, user, request, category) -> request -> user -> slice; (slice, user,
    category) -> user -> slice (user entropy); (slice, category) -> slice (the
    slice's category counts, one small shuffle of partial sums).
    """
    requests = (
        requests_by_category(prepared)
        .groupBy(SLICE, USER, REQUEST)
        .agg(F.sum("n").alias("n"), F.sum(_n_log_n(F.col("n"))).alias("s"), F.sum("clicked").alias("clicked"))
        .withColumn("h", _entropy(F.col("n"), F.col("s")))
    )
    users = requests.groupBy(SLICE, USER).agg(
        F.count(F.lit(1)).alias("pv"),
        _count_if(F.col("n") >= min_list_length).alias("covered"),
        _count_if(F.col("n") == 0).alias("empty"),
        F.sum("n").alias("exposures"),
        F.sum("clicked").alias("clicked"),
        _count_if(F.col("n") > 0).alias("lists"),
        F.sum("h").alias("list_h"),
        F.sum(F.col("h") * F.col("h")).alias("list_h2"),
    )
    per_slice = users.groupBy(SLICE).agg(
        F.sum("pv").alias("pv"),
        F.sum("covered").alias("pv_covered"),
        F.sum("empty").alias("pv_empty"),
        F.count(F.lit(1)).alias("uv"),
        _count_if(F.col("covered") > 0).alias("uv_covered"),
        _count_if(F.col("empty") > 0).alias("uv_empty"),
        F.sum("exposures").alias("exposures"),
        F.sum("clicked").alias("clicked"),
        _count_if(F.col("clicked") > 0).alias("uv_clicked"),
        _count_if(F.col("exposures") > 0).alias("users_exposed"),
        F.sum("lists").alias("lists"),
        F.sum("list_h").alias("list_h"),
        F.sum("list_h2").alias("list_h2"),
        *_user_products(),
    )
    exposed = prepared.where(F.col(ITEM).isNotNull())
    user_h = (
        exposed.groupBy(SLICE, USER, ITEM_CATEGORY)
        .agg(F.count(F.lit(1)).alias("c"))
        .groupBy(SLICE, USER)
        .agg(F.sum("c").alias("n"), F.sum(_n_log_n(F.col("c"))).alias("s"))
        .withColumn("h", _entropy(F.col("n"), F.col("s")))
        .groupBy(SLICE)
        .agg(F.sum("h").alias("user_h"), F.sum(F.col("h") * F.col("h")).alias("user_h2"))
    )
    categories = (
        exposed.groupBy(SLICE, ITEM_CATEGORY)
        .agg(F.count(F.lit(1)).alias("c"))
        .groupBy(SLICE)
        .agg(
            F.sum("c").alias("cat_n"),
            F.sum(_n_log_n(F.col("c"))).alias("cat_s"),
            F.sum(F.when(F.col(ITEM_CATEGORY) == UNKNOWN, F.col("c")).otherwise(0)).alias("unknown"),
        )
    )
    return (
        _long(
            per_slice,
            [
                "pv",
                "pv_covered",
                "pv_empty",
                "uv",
                "uv_covered",
                "uv_empty",
                "exposures",
                "clicked",
                "uv_clicked",
                "users_exposed",
                "lists",
                "list_h",
                "list_h2",
                *USER_PRODUCTS,
            ],
        )
        .unionByName(_long(user_h, ["user_h", "user_h2"]))
        .unionByName(_long(categories, ["cat_n", "cat_s", "unknown"]))
    )


def item_pass(pairs: DataFrame, popularity: DataFrame | None, previous: DataFrame | None) -> DataFrame:
    """Pass B from :func:`user_items`: exposure histogram, users per item, novelty and update sums,
    as long rows."""
    items = pairs.groupBy(SLICE, ITEM).agg(
        F.sum("n").alias("exposures"), F.count(F.lit(1)).alias("users"), F.max("in_catalog").alias("in_catalog")
    )
    hist = (
        items.groupBy(SLICE, "exposures", F.coalesce(F.col("in_catalog"), F.lit(False)).alias("in_catalog"))
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
    if previous is not None:
        # item sets per user on both days, joined on the user: the rows stay where partition_by_user put
        # them, only the previous day's sets move; the inner join keeps returning users only.  ``pairs``
        # is aggregated a second time for this branch: one more partition-local pass over the cached rows,
        # which measured cheaper than persisting the pairs (see evaluate_health)
        before = previous.groupBy(USER).agg(F.collect_set(ITEM).alias("before"))
        rate = F.col("new") / F.col("items")
        update = (
            pairs.groupBy(SLICE, USER)
            .agg(F.collect_list(ITEM).alias("today"))
            .join(before, on=USER, how="inner")
            .select(SLICE, F.size("today").alias("items"), F.size(F.array_except("today", "before")).alias("new"))
            .groupBy(SLICE)
            .agg(
                F.count(F.lit(1)).alias("returning"),
                F.sum(rate).alias("update_sum"),
                F.sum(rate * rate).alias("update_sum2"),
                F.sum("new").alias("update_new"),
                F.sum("items").alias("update_items"),
                # per-user products for the delta-method interval of update_rate global
                F.sum(F.col("new") * F.col("new")).alias("update_new*update_new"),
                F.sum(F.col("items") * F.col("items")).alias("update_items*update_items"),
                F.sum(F.col("new") * F.col("items")).alias("update_new*update_items"),
            )
        )
        out = out.unionByName(
            _long(
                update,
                [
                    "returning",
                    "update_sum",
                    "update_sum2",
                    "update_new",
                    "update_items",
                    "update_new*update_new",
                    "update_items*update_items",
                    "update_new*update_items",
                ],
            )
        )
    return out


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
) -> HealthResult:
    """Health and business rows of every slice, and the Lorenz points.

    Parameters
    ----------
    prepared : sliced labelled exposures hash-partitioned by user and
        persisted (:func:`per_user.partition_by_user`):
        ``slice``, ``user_id``, ``request_id``, ``item_id`` null for empty
        responses, ``clicked``, ``_category``, ``_in_catalog``.
    dims : the slice dimensions (item dimensions restrict the catalog).
    catalog : the items table, one row per item, or None.
    popularity : (user_id, item_id) clicks defining popularity, or None (no novelty).
    previous : distinct (user_id, item_id) of the previous day, or None (no update_rate).
    cutoffs : popularity cut-offs when ``popularity`` is a slice.
    confidence : level of the rows' intervals (:mod:`kernels.intervals`; the user is the unit).
    bootstrap_replicates, seed : Poisson bootstrap keyed by user for Gini, personalization, novelty,
        item coverage and global category diversity (:mod:`recsys_spark.bootstrap`); 0 replicates:
        no interval for those.
    """
    notes: list[str] = []
    # every branch reads the persisted user partitions in place (only the columns it needs); persisting
    # the partition-local aggregations as well made the stage slower, not faster (docs/performance.md)
    long = request_pass(prepared, min_list_length).unionByName(item_pass(user_items(prepared), popularity, previous))
    if catalog is not None:
        long = long.unionByName(catalog_pass(catalog, dims))
    stats, hist, n_clickers = _split(long.collect())
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
        )
        values += business_values(stats.get(s, {}))
        intervals = health_intervals(stats.get(s, {}), k, previous is not None, confidence) | business_intervals(
            stats.get(s, {}), confidence
        )
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
    info = {"health_rows": len(rows), "lorenz_points": len(lorenz), "categories": k, "novelty_users": n_clickers}
    return HealthResult(rows, lorenz, notes, info)


def _with_interval(row: MetricRow, interval: Interval | None) -> MetricRow:
    """The row with its interval (kernels.intervals); without one, se and bounds null and ci_method none."""
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
