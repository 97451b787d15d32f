"""The per-user pass (per_user.py): a heavy user takes another path and every number stays the same.

The fixture session sends Arrow batches of 2 rows, so ties in score span batch
boundaries of the streamed AUC, and a user's rows span many batches.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from sklearn.metrics import roc_auc_score

from recsys_spark.kernels.auc import UPartial
from recsys_spark.per_user.aggregate import aggregate_users
from recsys_spark.per_user.pooled_auc import exact_auc, partials_frame, pooled_auc
from recsys_spark.per_user.table import UserMetrics

pytestmark = pytest.mark.spark

KS = (1, 3, 10)


@pytest.fixture(scope="module")
def ranked(spark):
    """Two heavy users (u0, u1: 200 lists each), 38 light ones; two slices; coarse scores (many ties)."""
    rng = np.random.default_rng(3)
    rows = []
    for u in range(40):
        for lst in range(200 if u < 2 else int(rng.integers(1, 6))):
            for p in range(int(rng.integers(1, 8))):
                rows.append(
                    (
                        "all" if u % 3 else str(rng.choice(["all", "platform=ios"])),
                        f"u{u}",
                        f"r{u}-{lst}",
                        f"i{rng.integers(0, 30)}",
                        p + 1,
                        float(np.round(rng.random(), 1)),
                        float(rng.random() < 0.3),
                    )
                )
    frame = pd.DataFrame(rows, columns=["slice", "user_id", "list_id", "item_id", "position", "score", "relevance"])
    return spark.createDataFrame(frame.drop_duplicates(["slice", "list_id", "item_id"])).cache()


def test_exact_auc_matches_scikit_learn_per_key_with_ties_across_batches(ranked):
    frame = ranked.toPandas()
    by_user = exact_auc(ranked, ("slice", "user_id"))
    for (s, u), g in frame.groupby(["slice", "user_id"]):
        y = g.relevance > 0
        expected = roc_auc_score(y, g.score) if 0 < y.sum() < len(y) else math.nan
        got = by_user[(s, u)].auc
        assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected, abs=1e-12)
    pooled = pooled_auc(ranked)
    for s, g in frame.groupby("slice"):
        assert pooled[s].auc == pytest.approx(roc_auc_score(g.relevance > 0, g.score), abs=1e-12)


def test_pooled_auc_of_rows_with_their_slice_keys_as_an_array_equals_the_exploded_rows(spark):
    # one row per exposure with its keys as an array (sorted and shuffled once), exploded batch by batch in
    # Python: each key's AUC as scikit-learn's over the rows that carry the key (coarse scores: ties across
    # the fixture's 2-row batches and across keys); a key of no row is absent, a key of one class is NaN
    rng = np.random.default_rng(11)
    keys = ["all", "platform=ios", "popularity=head", "user_type=new"]
    rows = []
    for i in range(400):
        carried = ["all"] + [k for k in keys[1:3] if rng.random() < 0.5]
        if i < 5:
            carried.append("user_type=new")  # 5 rows, all negative: one class
        rows.append((carried, float(np.round(rng.random(), 1)), 0.0 if i < 5 else float(rng.random() < 0.3)))
    keyed = spark.createDataFrame(rows, "_slices array<string>, score double, relevance double")
    got = pooled_auc(keyed)
    assert set(got) == set(keys)
    for key in keys[:3]:
        y = np.array([r[2] > 0 for r in rows if key in r[0]])
        s = np.array([r[1] for r in rows if key in r[0]])
        assert got[key].auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert got[key].n_pos == y.sum() and got[key].n_neg == len(y) - y.sum()
    assert math.isnan(got["user_type=new"].auc) and got["user_type=new"].n_neg == 5
    exploded = keyed.select(F.explode("_slices").alias("slice"), "score", "relevance")
    expected = pooled_auc(exploded)
    assert set(expected) == set(got)
    for key, part in expected.items():
        assert (got[key].u, got[key].n_pos, got[key].n_neg) == pytest.approx((part.u, part.n_pos, part.n_neg))


def test_the_pooled_auc_of_keyed_rows_shuffles_and_sorts_one_row_per_exposure(spark):
    # the slice keys travel as one array per row, hashed by score bin alone and exploded in Python: no Generate
    # (explode) on the JVM side, whatever the number of slices
    keyed = spark.createDataFrame([(["all", "p=x"], 0.5, 1.0)], "_slices array<string>, score double, relevance double")
    frame = partials_frame(keyed.withColumnRenamed("_slices", "slice"), ("slice",), array_key="slice")
    plan = frame._jdf.queryExecution().executedPlan().toString()
    assert "Generate" not in plan and "hashpartitioning(_bin" in plan, plan


def _table(spark, ranked, bound, path, partitions=4, keyed=None):
    users = UserMetrics(ranked, KS, "exponential", partitions, bound, rows_per_bucket=100, keyed=keyed)
    users.frame.write.mode("overwrite").parquet(path)
    heavy = users.heavy_frame()
    if heavy is not None:
        heavy.write.mode("append").parquet(path)
    table = spark.read.parquet(path).toPandas().sort_values(["slice", "user_id", "k"]).reset_index(drop=True)
    return users, table


def test_users_over_the_bound_get_the_same_rows_and_aggregates(spark, ranked, tmp_path):
    whole, expected = _table(spark, ranked, 10**9, str(tmp_path / "whole"))
    bounded, got = _table(spark, ranked, 300, str(tmp_path / "bounded"))
    assert whole.set_aside == {} and set(bounded.set_aside) == {"u0", "u1"}
    assert bounded.set_aside["u0"] == len(ranked.toPandas().query("user_id == 'u0'"))
    pd.testing.assert_frame_equal(got, expected, check_exact=False, rtol=1e-12, atol=1e-12)
    assert bounded.counts() == {"users_over_row_bound": 2} and "max_user_rows=300" in bounded.notes()[0]

    pooled = {"all": UPartial(1, 1, 1), "platform=ios": UPartial(1, 1, 1)}
    from_pass, _ = aggregate_users(whole.moments(), KS, pooled)
    from_bounded, _ = aggregate_users(bounded.moments(), KS, pooled)
    from_table, _ = aggregate_users(spark.read.parquet(str(tmp_path / "bounded")), KS, pooled)
    assert len(from_pass) == len(from_bounded) == len(from_table) > 0
    for a, b, c in zip(from_pass, from_bounded, from_table, strict=True):
        assert (
            (a.metric, a.k, a.aggregation, a.slice, a.n)
            == (b.metric, b.k, b.aggregation, b.slice, b.n)
            == (c.metric, c.k, c.aggregation, c.slice, c.n)
        )
        for other in (b, c):
            assert (a.value is None and other.value is None) or other.value == pytest.approx(a.value, abs=1e-12)
            assert (a.se is None and other.se is None) or other.se == pytest.approx(a.se, abs=1e-12)


@pytest.mark.parametrize("fixed", [False, True])
def test_the_pass_reads_the_partitions_in_place_and_hands_its_sums_over_as_rows(spark, ranked, fixed, tmp_path):
    # one mapInArrow over the persisted user partitions with no exchange before it (planned adaptively or, as
    # the job runs it after labelling, without: session.fixed_shuffles); its output is persisted, and what the
    # driver takes from it (the aggregates' moments, the set-aside users) are rows of that output, not an
    # accumulator: jobs that read it again (the table written twice here) count each partition once
    import contextlib

    from helpers.spark_plans import names_and_exchanges

    from recsys_spark.per_user.user_pass import pass_rows
    from recsys_spark.runtime.session import fixed_shuffles

    by_user = ranked.repartition(4, "user_id").cache()
    plan = fixed_shuffles(ranked.sparkSession, 3) if fixed else contextlib.nullcontext()
    users = None
    try:
        with plan:
            by_user.count()
            names, exchanges = names_and_exchanges(pass_rows(by_user, ks=KS, min_list_length=None))
            assert names.count("MapInArrow") == 1 and "InMemoryTableScan" in names and exchanges == [], names
            users = UserMetrics(by_user, KS, "exponential", None, 10**9)
            names, exchanges = names_and_exchanges(users.frame)
            assert "MapInArrow" not in names and "InMemoryTableScan" in names and exchanges == [], names
            path = str(tmp_path / f"twice-{fixed}")
            for _ in range(2):
                users.frame.write.mode("overwrite").parquet(path)
            pooled = {"all": UPartial(1, 1, 1), "platform=ios": UPartial(1, 1, 1)}
            from_pass, _ = aggregate_users(users.moments(), KS, pooled)
            from_table, _ = aggregate_users(spark.read.parquet(path), KS, pooled)
            assert [(r.metric, r.k, r.slice, r.n) for r in from_pass] == [
                (r.metric, r.k, r.slice, r.n) for r in from_table
            ]
            for a, b in zip(from_pass, from_table, strict=True):
                assert (a.value is None and b.value is None) or b.value == pytest.approx(a.value, abs=1e-12)
    finally:
        by_user.unpersist()
        if users is not None:
            users.unpersist()


@pytest.mark.parametrize("bound", [10**9, 300])
def test_the_pass_reads_slice_keys_to_the_same_rows(spark, ranked, tmp_path, bound):
    # with slices the job hands the pass one row per exposure with its slice keys as an array (here not every
    # row has the key "all": each (row, key) pair is then scored as it is): the same per-user rows, set-aside
    # users and sums as the rows exploded in the JVM (whose bounded path the set-aside users still take)
    from pyspark.sql import functions as F

    from recsys_spark.schema import SLICE_KEYS

    others = [c for c in ranked.columns if c != "slice"]
    keyed = ranked.groupBy(*others).agg(F.sort_array(F.collect_list("slice")).alias(SLICE_KEYS))
    keyed = keyed.repartition(4, "user_id").cache()
    exploded = keyed.select(F.explode(SLICE_KEYS).alias("slice"), *others)  # the same partitions
    tables, passes = [], []
    for name, keys in (("exploded", None), ("keyed", keyed)):
        users, table = _table(spark, exploded, bound, str(tmp_path / name), partitions=None, keyed=keys)
        passes.append(users)
        tables.append(table)
    keyed.unpersist()
    assert len(tables[0]) > 0 and passes[0].set_aside == passes[1].set_aside
    assert (bound == 300) == (set(passes[1].set_aside) == {"u0", "u1"})
    pd.testing.assert_frame_equal(tables[1], tables[0], check_exact=False, rtol=1e-12, atol=1e-12)
    pooled = {"all": UPartial(1, 1, 1), "platform=ios": UPartial(1, 1, 1)}
    a, _ = aggregate_users(passes[0].moments(), KS, pooled)
    b, _ = aggregate_users(passes[1].moments(), KS, pooled)
    assert [(r.metric, r.k, r.aggregation, r.slice, r.n) for r in a] == [
        (r.metric, r.k, r.aggregation, r.slice, r.n) for r in b
    ]
    for x, y in zip(a, b, strict=True):
        assert (x.value is None and y.value is None) or y.value == pytest.approx(x.value, abs=1e-12)
