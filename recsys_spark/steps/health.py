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
* the branches of :mod:`recsys_spark.steps.health_sums` read them (the per-slice sums and the
  category counts, the item histogram, users per item and novelty, the history joins of update_rate and
  the novel shares, the catalog counts);
* the users set aside past ``execution.max_user_rows`` take a bounded path
  (:mod:`recsys_spark.steps.health_heavy`).

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
aside, and their sums take :func:`health_heavy.heavy_health_rows` (rows spread
by (user, request), the parts' unit sums added in Spark).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.kernels.business import Measured, business_values, measured_of
from recsys_spark.kernels.estimates import Interval
from recsys_spark.kernels.health import health_values
from recsys_spark.kernels.intervals import business_intervals, health_intervals, overflow_notes
from recsys_spark.kernels.robustness import MIN_RULE_USERS, robustness_values, top_clicks
from recsys_spark.per_user.aggregate import MetricRow
from recsys_spark.per_user.bootstrap import BootstrapSums, bootstrap_sums, health_bootstrap_intervals
from recsys_spark.per_user.user_pass import KIND, SUM_COLUMNS, UserPass, pass_rows
from recsys_spark.runtime.session import CACHE_LEVEL
from recsys_spark.schema import ALL, IN_CATALOG, ITEM, ITEM_CATEGORY, LORENZ_DDL, SLICE, USER
from recsys_spark.steps.health_heavy import heavy_health_rows
from recsys_spark.steps.health_sums import CLICK_HISTOGRAM, catalog_pass, history_pass, item_pass, request_rows
from recsys_spark.steps.slices import PopularityCutoffs, SliceDims


@dataclass
class HealthResult:
    """The health and business rows of every slice, the Lorenz points (slice, x, y), the notes and the counts
    the summary reports."""

    rows: list[MetricRow]
    lorenz: list[tuple[str, float, float]]
    notes: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    #: the ``click_concentration`` rule's counts (slice ``all``): ``top_user_clicks``, ``clicked_exposures``
    rule_counts: dict[str, int] = field(default_factory=dict)


def user_items(prepared: DataFrame) -> DataFrame:
    """(slice, user, item) -> exposures n, in_catalog."""
    return (
        prepared.where(F.col(ITEM).isNotNull())
        .groupBy(SLICE, USER, ITEM)
        .agg(F.count(F.lit(1)).alias("n"), F.max(IN_CATALOG).alias("in_catalog"))
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


# --- from the collected sums to metric rows ------------------------------------------------------
def _split(rows) -> tuple[dict, dict, int | None, dict]:
    stats: dict[str, dict[str, float]] = {}
    hist: dict[str, dict[tuple[float, bool], float]] = {}
    clicks: dict[str, dict[str, dict[float, float]]] = {}
    n_clickers = None
    for r in rows:
        if r["name"] == "n_clickers":
            n_clickers = int(r["value"] or 0)
        elif r["name"] in CLICK_HISTOGRAM:
            clicks.setdefault(r["slice"], {}).setdefault(r["name"], {})[r["key"]] = r["value"]
        elif r["name"].startswith("hist_"):
            key = (r["key"], r["name"] == "hist_catalog")
            hist.setdefault(r["slice"], {})[key] = r["value"]
        else:
            stats.setdefault(r["slice"], {})[r["name"]] = r["value"]
    return stats, hist, n_clickers, clicks


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


@dataclass(frozen=True, eq=False)
class HealthInputs:
    """What :func:`evaluate_health` reads besides the sliced rows.

    Attributes
    ----------
    dims : the slice dimensions (item dimensions restrict the catalog).
    catalog : the items table, one row per item, or None; ``items_path``: where it was looked for (the note
        says so when there is none).
    popularity : (user_id, item_id) clicks defining popularity, or None (no novelty).
    previous : distinct (user_id, item_id) of the previous day, or None (no update_rate).
    seen : (user_id, item_id) clicks of the days before (the novelty history), or None (no
        novel_item_share, novel_category_share): what a user has already consumed.
    cutoffs : popularity cut-offs when ``popularity`` is a slice.
    keyed : the sliced rows before the slices were exploded, with each row's slice keys as an array
        (:func:`slices.with_slice_keys`), in the same partitions; the Python pass reads it instead (one
        row per exposure, each distinct set of rows scored once).
    user_pass : the day's one pass over the user partitions (:class:`user_pass.UserPass`, built with
        ``min_list_length``), whose health sums this reads; None: a pass of the health sums only, over
        ``keyed`` (or the sliced rows), setting aside the users past ``max_user_rows``.
    """

    dims: SliceDims
    catalog: DataFrame | None = None
    items_path: str = ""
    popularity: DataFrame | None = None
    previous: DataFrame | None = None
    seen: DataFrame | None = None
    cutoffs: PopularityCutoffs | None = None
    keyed: DataFrame | None = None
    user_pass: UserPass | None = None
    catalog_keys: tuple[Column, ...] = ()  # the derived item slices' keys of a catalog row (item_age, item_new)


@dataclass(frozen=True)
class HealthSettings:
    """The plain settings of :func:`evaluate_health` (the day's come from ``health.*``, ``stats.*`` and
    ``execution.*``).

    Attributes
    ----------
    min_list_length, lorenz_points : a covered request's least items; at most this many Lorenz points a slice.
    confidence : level of the rows' intervals (:mod:`kernels.intervals`; the user is the unit).
    bootstrap_replicates, seed : Poisson bootstrap keyed by user for Gini, personalization, novelty,
        item coverage and global category diversity (:mod:`recsys_spark.per_user.bootstrap`); 0 replicates:
        no interval for those.
    max_user_rows : a pass of its own sets aside the users past it (None: no bound).
    rows_per_bucket : about how many rows a Python call of the set-aside users' bounded path holds.
    click_cap : capped_ctr counts a user's clicked exposures up to this many (:mod:`kernels.robustness`).
    """

    min_list_length: int
    lorenz_points: int
    confidence: float = 0.95
    bootstrap_replicates: int = 0
    seed: int = 0
    max_user_rows: int | None = None
    rows_per_bucket: int = 200_000
    click_cap: int = 10


@dataclass
class CollectedSums:
    """What the one collect brings back: per slice its sums (``stats``) and the exposure histogram of its items
    (``hist``: {(exposure count, in catalog): items}); the users who clicked in the popularity window
    (``n_clickers``, None: no novelty); with a catalog, the catalog items each slice sees (``sizes``) and K, the
    categories of the diversity (``categories``: the catalog's, plus ``unknown`` when an exposed item is
    missing from it); ``clicks``: per slice the clicks-per-user histogram, {"clicks_users" or
    "clicks_exposures": {click count: value}} (:mod:`kernels.robustness`)."""

    stats: dict[str, dict[str, float]]
    hist: dict[str, dict[tuple[float, bool], float]]
    n_clickers: int | None
    clicks: dict[str, dict[str, dict[float, float]]] = field(default_factory=dict)
    sizes: dict[str, int] | None = None
    categories: int | None = None


def evaluate_health(prepared: DataFrame, inputs: HealthInputs, settings: HealthSettings) -> HealthResult:
    """Health and business rows of every slice, and the Lorenz points.

    ``prepared``: sliced labelled exposures hash-partitioned by user and persisted
    (:func:`per_user.persist_user_rows`): ``slice``, ``user_id``, ``request_id``, ``item_id`` null for empty
    responses, ``clicked``, ``_category``, ``_in_catalog``.  ``inputs``: the side tables and the day's pass
    (:class:`HealthInputs`); ``settings``: :class:`HealthSettings`.  The sums come from one collect
    (:func:`collect_sums`), each slice's rows from :func:`slice_rows`.
    """
    sums = collect_sums(prepared, inputs, settings)
    notes: list[str] = []
    if inputs.catalog is None:
        notes.append(
            f"item_coverage, gini (catalog) and category_diversity skipped: no items table at "
            f"{inputs.items_path}; the Lorenz curve is over the exposed items"
        )
    measured = measured_of((prepared if inputs.keyed is None else inputs.keyed).columns)
    boot = _bootstrap(prepared, inputs, settings, sums.categories)
    rows: list[MetricRow] = []
    lorenz: list[tuple[str, float, float]] = []
    by_slice: dict[str, dict] = {}
    for s in sorted(set(sums.stats) | set(sums.hist)):
        if s is None:
            continue
        rows_of_slice, points, by_slice[s] = slice_rows(s, sums, inputs, settings, measured, boot)
        rows += rows_of_slice
        lorenz += points
    notes += overflow_notes(by_slice)
    info = {
        "health_rows": len(rows),
        "lorenz_points": len(lorenz),
        "categories": sums.categories,
        "novelty_users": sums.n_clickers,
    }
    return HealthResult(rows, lorenz, notes, info, click_rule_counts(sums.clicks.get(ALL, {})))


def click_rule_counts(histogram: dict[str, dict[float, float]]) -> dict[str, int]:
    """``top_user_clicks`` and ``clicked_exposures`` of a slice's clicks-per-user histogram
    (:func:`kernels.robustness.top_clicks`): the ``click_concentration`` rule's counts; none (the rule is left
    out) below :data:`~recsys_spark.kernels.robustness.MIN_RULE_USERS` clicking users, where the top 1 % is one
    user whose share is large by arithmetic alone."""
    users = histogram.get("clicks_users", {})
    if sum(users.values()) < MIN_RULE_USERS:
        return {}
    top, total = top_clicks(np.array(list(users), dtype=np.float64), np.array(list(users.values()), dtype=np.float64))
    return {"top_user_clicks": top, "clicked_exposures": total}


def collect_sums(prepared: DataFrame, inputs: HealthInputs, settings: HealthSettings) -> CollectedSums:
    """The branches' long rows (:mod:`recsys_spark.steps.health_sums`) as one query and one collect.

    The one Python pass over the persisted user partitions gave every sum (``inputs.user_pass``, or a pass of
    its own); what moves is partial sums, and the set-aside users' on their bounded path
    (:func:`health_heavy.heavy_health_rows`).  The added sums (a row per slice and item) are persisted for
    the branches that read them (each would add them up again) and unpersisted once collected.
    """
    user_pass = inputs.user_pass
    own = user_pass is None
    if user_pass is None:
        rows = prepared if inputs.keyed is None else inputs.keyed
        user_pass = UserPass(rows, None, min_list_length=settings.min_list_length, max_user_rows=settings.max_user_rows)
    heavy = user_pass.totals.set_aside
    sums, merged = user_pass.sum_rows(), None
    if heavy:
        spread = settings.rows_per_bucket // (1 + len(inputs.dims.names))  # the bounded path reads exploded rows
        extra, merged = heavy_health_rows(prepared, heavy, settings.min_list_length, max(spread, 1))
        sums = sums.unionByName(extra)
    summed = add_up(sums).persist(CACHE_LEVEL)
    try:
        long = request_rows(summed).unionByName(item_pass(summed, inputs.popularity))
        if inputs.previous is not None or inputs.seen is not None:
            long = long.unionByName(history_pass(prepared, inputs.previous, inputs.seen, inputs.catalog))
        if inputs.catalog is not None:
            long = long.unionByName(catalog_pass(inputs.catalog, inputs.dims, inputs.catalog_keys))
        collected = CollectedSums(*_split(long.collect()))
    finally:
        summed.unpersist()
        if merged is not None:
            merged.unpersist()
        if own:
            user_pass.unpersist()
    return collected if inputs.catalog is None else _with_catalog(collected, inputs)


def _with_catalog(sums: CollectedSums, inputs: HealthInputs) -> CollectedSums:
    """The sums with the catalog's counts taken out of the slices' sums: the catalog items per slice (and per
    popularity bucket, when popularity is a slice) and K."""
    stats = sums.stats
    sizes = {s: int(v.pop("catalog_items")) for s, v in stats.items() if "catalog_items" in v}
    n_categories = int(stats.get(ALL, {}).pop("catalog_categories", 0) or 0)
    for v in stats.values():
        v.pop("catalog_categories", None)
    stats = {s: v for s, v in stats.items() if v or s == ALL}
    if "popularity" in inputs.dims.names and inputs.cutoffs is not None:
        sizes.update(_popularity_catalog(sums.hist.get(ALL, {}), sizes.get(ALL, 0), inputs.cutoffs))
    k = n_categories + (1 if (stats.get(ALL, {}).get("unknown") or 0) > 0 else 0)
    return CollectedSums(stats, sums.hist, sums.n_clickers, sums.clicks, sizes, k)


def _bootstrap(
    prepared: DataFrame, inputs: HealthInputs, settings: HealthSettings, categories: int | None
) -> BootstrapSums | None:
    """The replicate sums of :func:`per_user.bootstrap.bootstrap_sums` (with the (slice, user, category)
    exposures when there are categories); None without replicates."""
    if not settings.bootstrap_replicates:
        return None
    by_category = None
    if categories is not None:
        by_category = (
            prepared.where(F.col(ITEM).isNotNull())
            .groupBy(SLICE, USER, F.col(ITEM_CATEGORY).alias("category"))
            .agg(F.count(F.lit(1)).alias("c"))
        )
    return bootstrap_sums(
        user_items(prepared), inputs.popularity, settings.bootstrap_replicates, settings.seed, by_category
    )


def slice_rows(
    s: str,
    sums: CollectedSums,
    inputs: HealthInputs,
    settings: HealthSettings,
    measured: Measured,
    boot: BootstrapSums | None,
) -> tuple[list[MetricRow], list[tuple[str, float, float]], dict]:
    """One slice's health and business rows with their intervals, its Lorenz points, and its intervals."""
    stats, hist = sums.stats.get(s, {}), sums.hist.get(s, {})
    catalog_items = None
    if sums.sizes is not None:
        catalog_items = sums.sizes.get(ALL, 0) if _whole_catalog(s, inputs.dims) else sums.sizes.get(s, 0)
    n_clickers = sums.n_clickers if inputs.popularity is not None else None
    has_previous, has_novel, k = inputs.previous is not None, inputs.seen is not None, sums.categories
    values, (x, y) = health_values(
        stats, hist, catalog_items, k, n_clickers, has_previous, settings.lorenz_points, has_novel
    )
    values += business_values(stats, measured)
    intervals = health_intervals(stats, k, has_previous, settings.confidence, has_novel) | business_intervals(
        stats, settings.confidence, measured
    )
    if boot is not None:
        exposed_in_catalog = sum(m for (_, cat), m in hist.items() if cat)
        zeros = None if catalog_items is None else max(catalog_items - exposed_in_catalog, 0)
        point = {(m, a): v for m, a, v, _, _ in values}
        intervals |= health_bootstrap_intervals(
            boot, s, point, n_clickers, zeros, settings.confidence, catalog_items, k
        )
    rows = [_with_interval(MetricRow(m, None, a, s, v, n, se), intervals.get((m, a))) for m, a, v, n, se in values]
    for metric, value, n, interval in robustness_values(
        sums.clicks.get(s, {}), stats, settings.click_cap, settings.confidence
    ):
        rows.append(_with_interval(MetricRow(metric, None, "global", s, value, n), interval))
    return rows, [(s, float(a), float(b)) for a, b in zip(x, y, strict=True)], intervals


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
