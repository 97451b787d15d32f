"""The top-K evaluation: recommendations + truth -> accuracy, beyond accuracy and the catalog values.

Each user's list is cleaned (rows that cannot be ranked set aside, duplicates dropped, train items removed,
ranked 1..L: :func:`clean_lists`), joined with the relevant truth and the items' categories and train
popularity (:func:`list_rows`), and scored per user by :func:`kernels.offline.score_lists`; the catalog
values of the top-``max(ks)`` lists (item coverage, Gini, Lorenz curve, personalization) are the daily job's
(:func:`catalog_rows`).  ``train`` and ``items`` refine it; without them the values that need them are not
computed and a note says so.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import cast

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from recsys_spark.kernels import health
from recsys_spark.kernels import offline as K
from recsys_spark.kernels.ranking import Gain
from recsys_spark.offline.aggregate import Mean, Ratio, point
from recsys_spark.offline.evaluation import Evaluation, RunContext, Spec, per_user
from recsys_spark.offline.inputs import RANK
from recsys_spark.offline.set_aside import set_aside, set_aside_notes
from recsys_spark.registry import f_score_name
from recsys_spark.schema import CATEGORY, ITEM, RELEVANCE, SCORE, USER

#: the daily job's health rows that the top-K lists also have (:func:`kernels.health.health_values`)
CATALOG_METRICS = (("item_coverage", "global"), ("gini", "catalog"), ("gini", "exposed"), ("personalization", "global"))


def evaluate_lists(run: RunContext) -> Evaluation:
    """The top-K evaluation of the run (docs/offline.md, "Top-K lists"); skipped, with a note, unless both
    ``offline.recommendations`` and ``offline.truth`` are set."""
    inputs, cfg = run.inputs, run.cfg
    if "recommendations" not in inputs or "truth" not in inputs:
        return Evaluation(
            "lists", None, notes=["top-K evaluation needs both offline.recommendations and offline.truth: skipped"]
        )
    ks = cfg.metrics.k
    train, items = inputs.get("train"), inputs.get("items")
    exclude = cfg.offline.exclude_train_items
    ranked, counts = clean_lists(inputs["recommendations"], train, exclude, run.paths["recommendations"])
    notes = set_aside_notes("recommendations", counts)
    gain = cast(Gain, cfg.metrics.ndcg_gain)  # config checked it is one of Gain's values
    users = per_user(
        list_rows(ranked, inputs["truth"], train, items),
        K.LIST_INPUT,
        K.list_columns(ks),
        lambda f: K.score_lists(f, ks, gain),
        run.partitions(counts["recommendation_rows"]),
    )
    rows, lorenz, catalog_counts = catalog_rows(ranked, max(ks), items, cfg.health.lorenz_points)
    return Evaluation(
        "lists",
        users,
        specs=list_specs(ks, cfg.metrics.f_alphas),
        rows=rows,
        tables={"lorenz": lorenz},
        counts={**counts, **catalog_counts},
        notes=notes + missing_input_notes(train, items),
        summary={"beyond_accuracy_depth": max(ks)},
        user_counts=list_user_counts(),
    )


def missing_input_notes(train: DataFrame | None, items: DataFrame | None) -> list[str]:
    """What the lists cannot give without ``offline.items`` or ``offline.train``."""
    notes = []
    if items is None:
        notes.append(
            "no offline.items: item_coverage and gini (catalog) are not computed (catalog unknown), the "
            "Lorenz curve is over the items recommended; intra_list_diversity and serendipity are not computed"
        )
    if train is None:
        notes.append(
            "no offline.train: novelty and serendipity are not computed, and no train item was removed from the lists"
        )
    return notes


def list_user_counts() -> list[Column]:
    """Users with truth and no list, with a list and no truth (excluded), with truth, and without a train
    history for serendipity, over the merged per-user table."""

    def users(condition: Column) -> Column:
        return F.sum(F.when(condition, 1).otherwise(0))

    has_truth, has_list = F.col("n_truth") > 0, F.col("n_list") > 0
    return [
        users(has_truth & (F.col("n_list") == 0)).alias("users_with_truth_without_list"),
        users((F.col("n_truth") == 0) & has_list).alias("users_with_list_without_truth_excluded"),
        users(has_truth).alias("users_with_truth"),
        F.sum("serendipity_without_history").alias("serendipity_users_without_history"),
    ]


def clean_lists(
    recs: DataFrame, train: DataFrame | None, exclude_train: bool, path: str = "offline.recommendations"
) -> tuple[DataFrame, dict[str, int]]:
    """Each user's list: rows that cannot be ranked set aside (:func:`offline.set_aside.input_checks`),
    duplicates dropped (best position kept), train items removed, ranked 1..L.

    Order: ``rank`` ascending, then ``score`` descending, then item id.
    """
    order = [
        F.col(c).asc_nulls_last() if c == RANK else F.col(c).desc_nulls_last()
        for c in (RANK, SCORE)
        if c in recs.columns
    ] + [F.col(ITEM).asc()]
    recs, rows, aside, _ = set_aside(recs, "recommendations", path)
    usable = rows - sum(aside.values())
    first = (
        recs.withColumn("_n", F.row_number().over(Window.partitionBy(USER, ITEM).orderBy(*order)))
        .where(F.col("_n") == 1)
        .drop("_n")
    )
    deduped = first.count()
    kept = first
    if train is not None and exclude_train:
        kept = first.join(train.select(USER, ITEM).distinct(), on=[USER, ITEM], how="left_anti")
    kept = kept.persist()
    remaining = kept.count()
    ranked = kept.withColumn(RANK, F.row_number().over(Window.partitionBy(USER).orderBy(*order)).cast("double"))
    counts = {
        "recommendation_rows": rows,
        **aside,
        "duplicate_recommendations": usable - deduped,
        "train_items_removed": deduped - remaining,
    }
    return ranked.select(USER, ITEM, RANK), counts


def item_categories(items: DataFrame) -> DataFrame:
    """(item_id, category), one row per item (an item listed twice keeps one of its rows)."""
    return items.select(ITEM, CATEGORY).dropDuplicates([ITEM])


def list_rows(ranked: DataFrame, truth: DataFrame, train: DataFrame | None, items: DataFrame | None) -> DataFrame:
    """List rows (rank) outer-joined with relevant truth (relevance), with category, self-information
    of the item's train popularity, whether its category is new to the user and whether the user has
    a train item of a known category (kernel inputs, :data:`kernels.offline.LIST_INPUT`; null when unknown)."""
    rel = F.coalesce(F.col(RELEVANCE), F.lit(1.0)) if RELEVANCE in truth.columns else F.lit(1.0)
    truth = (
        truth.where(F.col(USER).isNotNull() & F.col(ITEM).isNotNull())
        .groupBy(USER, ITEM)
        .agg(F.max(rel).alias(RELEVANCE))
        .where(F.col(RELEVANCE) > 0)
    )
    rows = ranked.join(truth, on=[USER, ITEM], how="full").withColumn(
        RELEVANCE, F.coalesce(F.col(RELEVANCE), F.lit(0.0))
    )
    if items is not None:
        rows = rows.join(item_categories(items), on=ITEM, how="left")
    else:
        rows = rows.withColumn(CATEGORY, F.lit(None).cast("string"))
    unknown = F.lit(None).cast("double")
    if train is None:
        return (
            rows.withColumn("self_info", unknown).withColumn("new_category", unknown).withColumn("has_history", unknown)
        )
    pairs = train.select(USER, ITEM).distinct()
    rows = with_self_information(rows, pairs)
    if items is None:
        return rows.withColumn("new_category", unknown).withColumn("has_history", unknown)
    return with_new_category(rows, pairs, items)


def with_self_information(rows: DataFrame, pairs: DataFrame) -> DataFrame:
    """``self_info``: the self-information of each row's item from its train popularity (distinct train
    (user, item) ``pairs``; :func:`kernels.health.self_information`), an item never trained on included."""
    n_train_users = pairs.select(USER).distinct().count()
    popularity = pairs.groupBy(ITEM).agg(F.count("*").cast("double").alias("_k"))

    def info(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for f in frames:
            yield pd.DataFrame({ITEM: f[ITEM], "self_info": health.self_information(f["_k"], n_train_users)})

    unseen = float(health.self_information([0.0], n_train_users)[0])
    return rows.join(popularity.mapInPandas(info, f"{ITEM} string, self_info double"), on=ITEM, how="left").withColumn(
        "self_info", F.coalesce(F.col("self_info"), F.lit(unseen))
    )


def with_new_category(rows: DataFrame, pairs: DataFrame, items: DataFrame) -> DataFrame:
    """``new_category``: 1.0 when the row's category is absent from the categories of the user's train items,
    0.0 when present, null when unknown; ``has_history``: 1.0 when one of the user's train items has a known
    category, else 0.0."""
    seen = (
        pairs.join(item_categories(items), on=ITEM, how="inner")
        .select(USER, CATEGORY)
        .distinct()
        .withColumn("_seen", F.lit(True))
    )
    history = seen.select(USER).distinct().withColumn("has_history", F.lit(1.0))
    return (
        rows.join(seen, on=[USER, CATEGORY], how="left")
        .withColumn(
            "new_category",
            F.when(F.col(CATEGORY).isNull(), F.lit(None).cast("double")).when(F.col("_seen"), 0.0).otherwise(1.0),
        )
        .join(history, on=USER, how="left")
        .withColumn("has_history", F.coalesce(F.col("has_history"), F.lit(0.0)))
    )


def f_specs(k: int, alphas: Sequence[float], has_truth: Column) -> list[Spec]:
    """F_alpha@k per alpha (docs/metrics.md, "F-scores and thresholds"): ``user_avg``, the mean of each user's F
    from its precision@k and recall@k (F1 is the per-user table's ``f1_at_k``; another alpha from the two
    columns), and ``global``, F of the global precision@k and recall@k: Σ (1 + a²) hits / Σ (a² n_truth + k)
    over the users with truth (one list each), delta method."""
    out: list[Spec] = []
    p, r, hits = F.col(f"precision_at_{k}"), F.col(f"recall_at_{k}"), F.col(f"hits_at_{k}")
    for alpha in alphas:
        name, a2 = f_score_name(alpha), float(alpha) ** 2
        if name != "f1":  # f1 is a column of the per-user table, averaged with the list metrics
            den = a2 * p + r
            value = F.when(has_truth, F.when(den > 0, (1 + a2) * p * r / den).otherwise(F.lit(0.0)))
            out.append(Mean(name, k, "user_avg", value))
        x = F.when(has_truth, (1 + a2) * hits)
        out.append(Ratio(name, k, "global", x, F.when(has_truth, a2 * F.col("n_truth") + float(k))))
    return out


def list_specs(ks: Sequence[int], f_alphas: Sequence[float] = (1.0,)) -> list[Spec]:
    """The list metrics over the per-user table: user averages, pooled precision and recall, F_alpha
    (:func:`f_specs`), beyond accuracy."""
    has_truth = F.col("n_truth") > 0
    specs: list[Spec] = [Mean("mrr", None, "user_avg", "mrr")]
    for k in ks:
        specs += [Mean(m, k, "user_avg", f"{m}_at_{k}") for m in K.LIST_METRICS]
        hits = F.when(has_truth, F.col(f"hits_at_{k}"))
        specs += [
            # k in the denominator, as precision@k per list and the daily job's global precision (docs/offline.md)
            Ratio("precision", k, "global", hits, F.when(has_truth, F.lit(float(k)))),
            Ratio("recall", k, "global", hits, F.when(has_truth, F.col("n_truth"))),
        ]
        specs += f_specs(k, f_alphas, has_truth)
    # beyond accuracy, on the top max(ks) items of each list: no cut-off in the name (the registry's, the daily
    # job's), the depth is in the summary (beyond_accuracy_depth)
    specs += [Mean(m, None, "user_avg", m) for m in ("intra_list_diversity", "novelty", "serendipity")]
    # the daily job's novelty global: the mean self-information over every listed item, Σ_u L_u novelty_u / Σ_u L_u
    # (every item of a top list has its self-information when there is a train table; without one, none has)
    top = F.least(F.col("n_list"), F.lit(max(ks))).cast("double")
    specs.append(Ratio("novelty", None, "global", F.col("novelty") * top, top))  # users with a novelty only
    return specs


def catalog_rows(
    ranked: DataFrame, k_max: int, items: DataFrame | None, lorenz_points: int
) -> tuple[list[tuple], pd.DataFrame, dict[str, int]]:
    """Item coverage, Gini, Lorenz curve and personalization of the top-``k_max`` lists.

    The daily job's formulas, by the same function (:func:`kernels.health.health_values`), with the
    recommendations as the exposures: item coverage = recommended catalog items / catalog items; Gini
    ``catalog`` over the recommended items and the catalog items never recommended (count 0), ``exposed``
    over the recommended items; personalization from the users per item.  Without ``items`` there is no
    catalog: no item coverage and no catalog Gini, and the Lorenz curve is over the recommended items.
    """
    top = ranked.where(F.col(RANK) <= k_max)
    per_item = top.groupBy(ITEM).agg(F.count("*").alias("c"))  # one list per user, duplicates dropped: c_i users
    catalog = None
    if items is not None:
        ids = items.select(ITEM).where(F.col(ITEM).isNotNull()).distinct()
        catalog = ids.count()
        per_item = per_item.join(ids.withColumn("_in_catalog", F.lit(True)), on=ITEM, how="left")
        in_catalog = F.coalesce(F.col("_in_catalog"), F.lit(False))
    else:
        in_catalog = F.lit(False)
    hist = (
        per_item.groupBy("c", in_catalog.alias("in_catalog")).agg(F.count("*").alias("items")).collect()
    )  # distinct counts: small
    histogram = {(float(r["c"]), bool(r["in_catalog"])): float(r["items"]) for r in hist}
    values = np.array([c for c, _ in histogram], dtype=np.float64)
    n_items = np.array(list(histogram.values()), dtype=np.float64)
    users = top.select(USER).distinct().count()
    # personalization's sums from the histogram: the c_i of one histogram bucket are equal
    stats = {
        "users_exposed": float(users),
        "user_overlap": float(np.dot(n_items, values * (values - 1))),
        "user_items": float(np.dot(n_items, values)),
    }
    values_rows, (x, y) = health.health_values(stats, histogram, catalog, None, None, False, lorenz_points)
    wanted = set(CATALOG_METRICS)
    rows = [point(m, None, a, v, n) for m, a, v, n, _ in values_rows if (m, a) in wanted]
    lorenz = pd.DataFrame({"k": np.full(len(x), k_max, dtype=np.int32), "item_share": x, "recommendation_share": y})
    recommended = int(n_items.sum())
    counts = {
        "catalog_items": catalog or 0,
        "recommended_items": recommended,
        "recommended_items_outside_catalog": 0
        if catalog is None
        else recommended - int(sum(m for (_, cat), m in histogram.items() if cat)),
        "users_with_list": users,
    }
    return rows, lorenz, counts
