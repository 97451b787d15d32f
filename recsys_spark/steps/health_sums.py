"""The health sums' Spark branches: each reduces the day to long rows ``(slice, name, key, value)``.

:func:`recsys_spark.steps.health.evaluate_health` unions them and collects the union once (what reaches the
driver is a few sums per slice plus the histograms, never a row per user or item):

* :func:`request_rows`: from the added-up sums of the pass, the per-slice sums and the slice's category
  counts (global category diversity);
* :func:`item_pass`: from the pass's ``item`` rows, the exposure histogram (Gini, Lorenz, item coverage),
  the users per item (personalization) and the popularity join (novelty);
* :func:`history_pass` (with a previous day or earlier days' clicks): the user's item set joined on the user
  with the previous day's set (update_rate, update_rate_previous) and with the items (and categories) it
  clicked on the earlier days (novel_item_share, novel_category_share); only the history's sets move;
* :func:`catalog_pass`: the catalog's items and categories per slice.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.schema import ALL, CATEGORY, ITEM, ITEM_CATEGORY, SLICE, UNKNOWN, USER
from recsys_spark.steps.slices import SliceDims

#: the long rows of the clicks-per-user histogram (:func:`kernels.health_pass.slice_sums`), keyed by click count
CLICK_HISTOGRAM = ("clicks_users", "clicks_exposures")


def _n_log_n(c: Column) -> Column:
    return F.when(c > 0, c * F.log(c)).otherwise(F.lit(0.0))


def long_rows(df: DataFrame, names: Sequence[str]) -> DataFrame:
    """Slice-level sums as long rows (slice, name, null, value): one row per slice and name."""
    return (
        df.select(SLICE, *[F.col(n).cast("double").alias(n) for n in names])
        .unpivot([SLICE], list(names), "name", "value")
        .select(F.col(SLICE).alias("slice"), "name", F.lit(None).cast("double").alias("key"), "value")
    )


def request_rows(summed: DataFrame) -> DataFrame:
    """The per-slice sums, the users' category entropies, the slice's category counts and its clicks-per-user
    histogram (``clicks_users``, ``clicks_exposures``: key the click count), as long rows."""
    keyed = F.col("name").isin(*CLICK_HISTOGRAM)
    scalar = summed.where(~F.col("name").isin("item", "category") & ~keyed).select(
        F.col(SLICE).alias("slice"), "name", F.lit(None).cast("double").alias("key"), "value"
    )
    clicks = summed.where(keyed).select(
        F.col(SLICE).alias("slice"), "name", F.col("key").cast("double").alias("key"), "value"
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
    return scalar.unionByName(clicks).unionByName(long_rows(categories, ["cat_n", "cat_s", "unknown"]))


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
    out = hist.unionByName(long_rows(items.groupBy(SLICE).agg(*sums), names))
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
      update_rate_previous's (:func:`update_sums`);
    * with ``seen`` ((user_id, item_id) of the click events of the earlier days): novel_item_share's (and,
      with a catalog, novel_category_share's) (:func:`novel_sums`).

    The user's item set per slice is joined on the user with its history sets (:func:`history_sets`, one row
    per user): the rows stay where :func:`per_user.persist_user_rows` put them, only the history's sets move.
    Every exposed user is kept for the novel shares; without them, the returning users only.
    """
    per_user = (
        prepared.where(F.col(ITEM).isNotNull())
        .groupBy(SLICE, USER, ITEM)
        .agg(F.max(ITEM_CATEGORY).alias("category"))
        .groupBy(SLICE, USER)
        .agg(F.collect_list(ITEM).alias("today"), F.collect_list("category").alias("categories"))
        # every exposed user for the novel shares; the returning ones only, without them
        .join(history_sets(previous, seen, catalog), on=USER, how="left" if seen is not None else "inner")
    )
    items = F.col("items")
    columns: list[Column | str] = [SLICE, F.size("today").alias("items")]
    sums: dict[str, Column] = {}
    if previous is not None:
        more, named = update_sums(items)
        columns += more
        sums |= named
    if seen is not None:
        more, named = novel_sums(items, categories=catalog is not None)
        columns += more
        sums |= named
    out = per_user.select(*columns).groupBy(SLICE).agg(*[value.alias(name) for name, value in sums.items()])
    return long_rows(out, list(sums))


def history_sets(previous: DataFrame | None, seen: DataFrame | None, catalog: DataFrame | None) -> DataFrame:
    """One row per user of its history (at least one of ``previous`` and ``seen`` given): ``before``, the
    previous day's distinct items; ``seen_items`` and ``seen_categories``, the items it clicked on the earlier
    days and their categories (null without a catalog; an item missing from it is ``unknown``).  With both,
    the two are joined with each other (full: a user of either)."""
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
    return sides[0] if len(sides) == 1 else sides[0].join(sides[1], on=USER, how="full")


def update_sums(items: Column) -> tuple[list[Column], dict[str, Column]]:
    """The columns per (slice, user) and the per-slice sums of update_rate and update_rate_previous, over the
    returning users (exposed on both days, ``before`` not null): their new items (today's not in ``before``),
    today's distinct items (``items``) and the previous day's (``prev``); our rate is new / items, the seed's
    new / prev (docs/metrics.md), with the per-user products the delta-method intervals need."""
    returning = F.col("before").isNotNull()
    columns = [
        returning.alias("returning"),
        F.size(F.array_except("today", "before")).alias("new"),
        F.size("before").alias("prev"),
    ]
    new, prev = F.col("new"), F.col("prev")
    rate, seed_rate = new / items, new / prev  # ours: over today's items; the seed's: over the previous day's

    def over_returning(value: Column) -> Column:
        return F.sum(F.when(F.col("returning"), value))

    sums = {
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
    return columns, sums


def novel_sums(items: Column, categories: bool) -> tuple[list[Column], dict[str, Column]]:
    """The columns per (slice, user) and the per-slice sums of novel_item_share (and, with ``categories``,
    novel_category_share), over the users with exposures: their distinct items (``items``), those they did not
    click on the earlier days (``item_new``) and those of a category they clicked no item of
    (``category_new``; an item missing from the catalog is in the ``unknown`` category, as for
    category_diversity); a user who clicked nothing before finds everything novel."""
    empty = F.array().cast("array<string>")
    seen_items, seen_categories = F.coalesce("seen_items", empty), F.coalesce("seen_categories", empty)
    columns = [
        F.size(F.array_except("today", seen_items)).alias("item_new"),
        F.size(F.filter("categories", lambda c: ~F.array_contains(seen_categories, c))).alias("category_new"),
    ]
    sums = {
        "novel_users": F.count(F.lit(1)),
        "novel_items": F.sum(items),
        "novel_items*novel_items": F.sum(items * items),
    }
    for part in ("item", "category") if categories else ("item",):
        novel = F.col(f"{part}_new")
        share = novel / items
        sums |= {
            f"novel_{part}_new": F.sum(novel),
            f"novel_{part}_sum": F.sum(share),
            f"novel_{part}_sum2": F.sum(share * share),
            f"novel_{part}_new*novel_{part}_new": F.sum(novel * novel),
            f"novel_{part}_new*novel_items": F.sum(novel * items),
        }
    return columns, sums


def catalog_pass(catalog: DataFrame, dims: SliceDims, derived: Sequence[Column] = ()) -> DataFrame:
    """Catalog items per slice (``catalog_items``) and categories (``catalog_categories``), as long rows.

    ``all`` and every non-item slice see the whole catalog (the ``all`` row);
    ``category=c`` (or another item column) sees the catalog items with that value; ``derived``: the derived
    item slices' keys of a catalog row (``item_age=7-29d``: :func:`recsys_spark.steps.slices.catalog_slice_keys`).
    """
    keys = [F.lit(ALL)] + [
        F.concat(F.lit(f"{name}="), F.coalesce(F.col(name).cast("string"), F.lit(UNKNOWN))) for name in dims.item
    ]
    keys += list(derived)
    sizes = (
        catalog.select(F.explode(F.array(*keys)).alias(SLICE), CATEGORY)
        .groupBy(SLICE)
        .agg(F.count(F.lit(1)).alias("catalog_items"), F.count_distinct(CATEGORY).alias("catalog_categories"))
    )
    return long_rows(sizes, ["catalog_items", "catalog_categories"])
