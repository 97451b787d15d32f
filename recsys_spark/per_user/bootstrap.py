"""Spark side of the Poisson bootstrap keyed by user (``stats.bootstrap_replicates`` > 0).

For the health metrics with no closed-form interval over per-user sums --
Gini (exposed, catalog), personalization, novelty, item coverage and the
global category diversity -- each replicate
reweights every *user* by w_ur = Poisson(1) from a hash of (user_id, r,
``stats.seed``) (:func:`kernels.bootstrap_weights.poisson_weights`): the same weight in
every slice, on every executor, whatever the partitioning.  Two passes over
the (slice, user, item) pairs of :func:`health.user_items`:

1. over the distinct (slice, user) pairs (where they lie when partitioned by user): U_r = Σ_u w_ur per slice;
2. hashed by item: per (slice, item) and replicate, e_ir = Σ_u w_ur n_ui and
   c_ir = Σ_u w_ur (:func:`kernels.bootstrap.item_replicates`), reduced in the
   task to sums over items per (slice, replicate) and a histogram of the e_ir.

3. (category diversity) the (slice, user, category) exposure counts, where
   they lie: Σ_u w_ur c_uc per (slice, category).

One collect of those sums: slices × replicates × (a few sums + the distinct
counts), never a row per user or per item.  The driver turns them into one
value per replicate with the health formulas, and the interval is the value ±
z · sd(replicates) (:func:`kernels.estimates.bootstrap_interval`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.kernels.bootstrap import (
    WeightedU,
    gini_replicates,
    histogram_rows,
    item_replicates,
    merge_weighted_u,
    novelty_replicates,
    personalization_replicates,
)
from recsys_spark.kernels.bootstrap_weights import poisson_weights
from recsys_spark.kernels.estimates import Interval, bootstrap_interval
from recsys_spark.kernels.health import category_diversity
from recsys_spark.schema import ITEM, RELEVANCE, SCORE, SLICE, USER

_SCHEMA = "slice string, name string, replicate int, key double, flag boolean, value double"
_TYPES = [pa.string(), pa.string(), pa.int32(), pa.float64(), pa.bool_(), pa.float64()]
_NAMES = ["slice", "name", "replicate", "key", "flag", "value"]


def _batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in _NAMES]
    return pa.RecordBatch.from_arrays(
        [pa.array(list(c), type=t) for c, t in zip(columns, _TYPES, strict=True)], names=_NAMES
    )


def _weights(users: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """Weights of each row's user, hashing each distinct user of the batch once."""
    unique, inverse = np.unique(users.astype(str), return_inverse=True)
    return poisson_weights(unique, replicates, seed)[inverse]


def _users_fn(replicates: int, seed: int):
    def users(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        frames = [b.to_pandas() for b in batches if b.num_rows]
        if not frames:
            yield _batch([])
            return
        pairs = pd.concat(frames)  # distinct (slice, user) overall (bootstrap_sums)
        rows = []
        for slice_value, g in pairs.groupby(SLICE, sort=False):
            total = _weights(g[USER].to_numpy(), replicates, seed).sum(axis=0, dtype=np.float64)
            rows += [(slice_value, "users", r, None, None, float(v)) for r, v in enumerate(total)]
        yield _batch(rows)

    return users


def _items_fn(replicates: int, seed: int):
    def items(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        frames = [b.to_pandas() for b in batches if b.num_rows]
        if not frames:
            yield _batch([])
            return
        df = pd.concat(frames, ignore_index=True)
        groups = df.groupby([SLICE, ITEM], sort=False, dropna=False)
        codes = groups.ngroup().to_numpy()
        attrs = groups.agg(in_catalog=("in_catalog", "max"), k=("k", "max")).reset_index()
        w = _weights(df[USER].to_numpy(), replicates, seed)
        e, c = item_replicates(codes, len(attrs), df["n"].to_numpy(dtype=np.float64), w)
        del w
        in_catalog = attrs["in_catalog"].fillna(False).to_numpy(dtype=bool)
        log_k = np.log2(attrs["k"].fillna(0).to_numpy(dtype=np.float64) + 1.0)
        rows: list[tuple] = []
        for slice_value, at in attrs.groupby(SLICE, sort=False).indices.items():
            es, cs = e[at], c[at]
            for name, values in (
                ("overlap", (cs * (cs - 1.0)).sum(0)),
                ("pairs", cs.sum(0)),
                ("exposures", es.sum(0)),
                ("novelty_log", (es * log_k[at, None]).sum(0)),
            ):
                rows += [(slice_value, name, r, None, None, float(v)) for r, v in enumerate(values)]
            rows += [
                (slice_value, "hist", r, count, flag, n_items)
                for r, flag, count, n_items in histogram_rows(es, in_catalog[at])
            ]
        yield _batch(rows)

    return items


def _categories_fn(replicates: int, seed: int):
    """(slice, user, category, c) rows, partitioned by user -> per (slice, category) Σ_u w_ur c_uc."""

    def categories(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        frames = [b.to_pandas() for b in batches if b.num_rows]
        if not frames:
            yield _batch([])
            return
        df = pd.concat(frames, ignore_index=True)
        codes = df.groupby([SLICE, "category"], sort=False, dropna=False).ngroup().to_numpy()
        first = df.assign(_g=codes).drop_duplicates("_g").sort_values("_g")
        keys = list(zip(first[SLICE], first["category"], strict=True))  # key of each group code, in code order
        sums, _ = item_replicates(
            codes, len(keys), df["c"].to_numpy(dtype=np.float64), _weights(df[USER].to_numpy(), replicates, seed)
        )
        rows = [
            (slice_value, f"cat:{category}", r, None, None, float(v))
            for (slice_value, category), row in zip(keys, sums, strict=True)
            for r, v in enumerate(row)
        ]
        yield _batch(rows)

    return categories


@dataclass
class BootstrapSums:
    """Per slice: the sums of every replicate (collected), and the number of replicates."""

    replicates: int
    sums: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # slice -> name -> (R,)
    hist: dict[str, dict[int, dict[tuple[float, bool], float]]] = field(default_factory=dict)


def bootstrap_sums(
    pairs: DataFrame, popularity: DataFrame | None, replicates: int, seed: int, categories: DataFrame | None = None
) -> BootstrapSums:
    """The replicate sums of every slice from the (slice, user, item, n, in_catalog) pairs (partitioned by user),
    and of the (slice, user, category, c) exposure counts when given (global category diversity)."""
    # each (slice, user) once overall, wherever its pairs lie: no shuffle while Spark knows the pairs are
    # partitioned by user, a small one of distinct pairs when it does not (a user's pairs then in several
    # partitions would count its weight once per partition)
    users = pairs.select(SLICE, USER).distinct().mapInArrow(_users_fn(replicates, seed), _SCHEMA)
    if categories is not None:
        users = users.unionByName(
            categories.select(SLICE, USER, "category", "c").mapInArrow(_categories_fn(replicates, seed), _SCHEMA)
        )
    if popularity is not None:
        clickers = popularity.groupBy(ITEM).agg(F.count_distinct(USER).cast("double").alias("k"))
        with_k = pairs.join(clickers, on=ITEM, how="left")
    else:
        with_k = pairs.withColumn("k", F.lit(None).cast("double"))
    items = (
        with_k.select(SLICE, USER, ITEM, F.col("n").cast("double").alias("n"), "in_catalog", "k")
        .repartition(ITEM)
        .mapInArrow(_items_fn(replicates, seed), _SCHEMA)
    )
    rows = (
        users.unionByName(items)
        .groupBy("slice", "name", "replicate", "key", "flag")
        .agg(F.sum("value").alias("value"))
        .collect()
    )
    out = BootstrapSums(replicates)
    for row in rows:
        s, name, r = row["slice"], row["name"], row["replicate"]
        if name == "hist":
            out.hist.setdefault(s, {}).setdefault(r, {})[(row["key"], bool(row["flag"]))] = row["value"]
        else:
            out.sums.setdefault(s, {}).setdefault(name, np.zeros(replicates))[r] = row["value"]
    return out


def _normalised_entropy(counts: np.ndarray, n_categories: int) -> float:
    """The category diversity of one replicate's category counts (kernels.health.category_diversity, the
    formula production uses); NaN (dropped) when a replicate drew no exposure."""
    c = counts[counts > 0]
    n = float(c.sum())
    return category_diversity(n, float(np.sum(c * np.log(c))), n_categories) if n > 0 else float("nan")


def health_bootstrap_intervals(
    boot: BootstrapSums,
    slice_value: str,
    values: Mapping[tuple[str, str], float | None],
    n_clickers: int | None,
    catalog_zeros: float | None,
    confidence: float,
    catalog_items: int | None = None,
    n_categories: int | None = None,
) -> dict[tuple[str, str], Interval]:
    """{(metric, aggregation): Interval} of gini, personalization, novelty and item coverage of one slice.

    ``values``: the day's values of those rows (the interval is centred on them).  Item coverage in a
    replicate: catalog items whose weighted exposures stay positive / ``catalog_items``.
    """
    reps = boot.replicates
    zero = np.zeros(reps)
    s = boot.sums.get(slice_value, {})

    def get(name: str) -> np.ndarray:
        return s.get(name, zero)

    replicates = {("personalization", "global"): personalization_replicates(get("overlap"), get("pairs"), get("users"))}
    if n_clickers is not None:
        replicates[("novelty", "global")] = novelty_replicates(get("novelty_log"), get("exposures"), n_clickers)
    exposed, catalog = gini_replicates(boot.hist.get(slice_value, {}), reps, catalog_zeros)
    replicates[("gini", "exposed")] = exposed
    if catalog is not None:
        replicates[("gini", "catalog")] = catalog
    cats = [v for name, v in s.items() if name.startswith("cat:")]
    if cats and n_categories is not None:
        counts = np.vstack(cats)  # (categories, R)
        replicates[("category_diversity", "global")] = np.array(
            [_normalised_entropy(counts[:, r], n_categories) for r in range(reps)]
        )
    if catalog_items:
        hist = boot.hist.get(slice_value, {})
        covered = np.array([sum(m for (v, cat), m in hist.get(r, {}).items() if cat and v > 0) for r in range(reps)])
        replicates[("item_coverage", "global")] = covered / catalog_items
    out = {}
    for key, reps_values in replicates.items():
        value = values.get(key)
        out[key] = bootstrap_interval(value, reps_values, confidence) if value is not None else Interval.none()
    return out


#: score ranges of the bootstrap AUC: they only spread a slice over tasks (each range is exact)
AUC_BINS = 64


def _auc_fn(replicates: int, seed: int):
    """Rows sorted by score -> per (slice, score range) the weighted (U, P, N) of every replicate."""

    def partials(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        state: dict[tuple[str, int], WeightedU] = {}
        for batch in batches:
            if not batch.num_rows:
                continue
            df = batch.to_pandas()
            w = _weights(df[USER].to_numpy(), replicates, seed)
            for (slice_value, score_bin), at in df.groupby([SLICE, "_bin"], sort=False).indices.items():
                acc = state.setdefault((slice_value, int(score_bin)), WeightedU(replicates))
                acc.add(df[SCORE].to_numpy()[at], df["_positive"].to_numpy(dtype=bool)[at], w[at])
        rows = []
        for (slice_value, score_bin), acc in state.items():
            acc.finish()
            for name, values in (("auc_u", acc.u), ("auc_pos", acc.pos), ("auc_neg", acc.neg)):
                rows += [(slice_value, name, r, float(score_bin), None, float(v)) for r, v in enumerate(values)]
        yield _batch(rows)

    return partials


def auc_bootstrap(ranked: DataFrame, replicates: int, seed: int) -> dict[str, np.ndarray]:
    """{slice: pooled AUC per replicate}, every exposure weighted by its user's Poisson weight.

    As :func:`pooled_auc.exact_auc`: a monotone map of the score to ``AUC_BINS`` ranges, rows hashed by
    (slice, range) and sorted by score in each partition, streamed through Python one Arrow batch at a
    time (:class:`kernels.bootstrap.WeightedU`); the driver merges the ranges in order.  Collected:
    slices × ranges × replicates × 3 numbers.
    """
    import math

    score_bin = F.least(F.floor((F.atan(F.col(SCORE)) / math.pi + 0.5) * AUC_BINS), F.lit(AUC_BINS - 1)).cast("int")
    rows = (
        ranked.select(SLICE, USER, score_bin.alias("_bin"), F.col(SCORE), (F.col(RELEVANCE) > 0).alias("_positive"))
        .repartition(SLICE, "_bin")
        .sortWithinPartitions(SCORE)
        .mapInArrow(_auc_fn(replicates, seed), _SCHEMA)
        .collect()
    )
    parts: dict[str, dict[int, dict[str, np.ndarray]]] = {}
    for row in rows:
        by_name = parts.setdefault(row["slice"], {}).setdefault(int(row["key"]), {})
        by_name.setdefault(row["name"], np.zeros(replicates))[row["replicate"]] = row["value"]
    return {
        s: merge_weighted_u([(b["auc_u"], b["auc_pos"], b["auc_neg"]) for _, b in sorted(bins.items())])
        for s, bins in parts.items()
    }
