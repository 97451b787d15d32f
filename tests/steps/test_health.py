"""Health, business and slices through Spark: the golden day of ``health_golden`` (same numbers as the kernels)."""

from __future__ import annotations

import contextlib
import datetime as dt
import math

import numpy as np
import pytest
from helpers import health_golden as golden
from helpers.spark_plans import names_and_exchanges

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.per_user.table import persist_user_rows
from recsys_spark.runtime.session import fixed_shuffles
from recsys_spark.schema import CLICK_COLUMNS, EXPOSURE_COLUMNS, input_ddl
from recsys_spark.steps.health import HealthInputs, HealthSettings, evaluate_health, partition_pass
from recsys_spark.steps.health_sums import item_pass, request_rows
from recsys_spark.steps.label import by_user as partitioned_by_user
from recsys_spark.steps.label import deduplicate_exposures, join_feedback
from recsys_spark.steps.slices import (
    SliceInputs,
    add_slice_columns,
    explode_slices,
    item_exposure_counts,
    popularity_cutoffs,
    resolve_slices,
    slice_input_columns,
    with_item_exposures,
    with_slice_keys,
)

pytestmark = pytest.mark.spark

EXPOSURE_DDL = f"{input_ddl(EXPOSURE_COLUMNS)}, platform string"  # the golden day is sliced by platform
CLICK_DDL = input_ddl(CLICK_COLUMNS, optional=False)
PAIRS_DDL = "user_id string, item_id string"


def _by_slice(rows):
    out: dict[str, dict] = {}
    for r in rows:
        out.setdefault(r.slice, {})[(r.metric, r.aggregation)] = r
    return out


def _check(got: dict, expected: dict):
    for key, value in expected.items():
        assert key in got, key
        if value is None:
            assert got[key].value is None, (key, got[key])
        else:
            assert got[key].value == pytest.approx(value), (key, got[key])


@pytest.fixture(scope="module", params=["exploded", "keyed"])
def health(spark, request):
    exposures = spark.createDataFrame(golden.EXPOSURES, EXPOSURE_DDL)
    catalog = spark.createDataFrame(golden.CATALOG, "item_id string, category string")
    dims = resolve_slices(
        ["platform", "category", "hour", "day_type", "popularity"], exposures.columns, catalog.columns, None
    )
    inputs = SliceInputs(dims, catalog, None, "items", "users")
    deduplicated = deduplicate_exposures(exposures).transform(add_slice_columns, inputs, golden.DAY, 7)
    joined = join_feedback(deduplicated, spark.createDataFrame(golden.CLICKS, CLICK_DDL), 30.0, {"click": 1.0}, "click")
    counts = item_exposure_counts(joined)
    cutoffs = popularity_cutoffs(counts, 0.2, 0.2)
    labelled = with_item_exposures(joined, counts)
    sliced = explode_slices(labelled, dims, cutoffs)
    # the job's own partitioning: the per-user metrics and health read the same persisted rows
    if request.param == "exploded":
        prepared, keyed = persist_user_rows(partitioned_by_user(sliced, 4)), None
    else:  # as the job does: one persisted row per exposure, the Python pass explodes its slice keys in Arrow
        rows = persist_user_rows(partitioned_by_user(labelled, 4), slice_input_columns(dims))
        prepared, keyed = explode_slices(rows, dims, cutoffs), with_slice_keys(rows, dims, cutoffs)
    result = evaluate_health(
        prepared,
        HealthInputs(
            dims,
            catalog,
            popularity=spark.createDataFrame(golden.POPULARITY, PAIRS_DDL),
            previous=spark.createDataFrame(golden.PREVIOUS, PAIRS_DDL),
            cutoffs=cutoffs,
            keyed=keyed,
        ),
        HealthSettings(min_list_length=5, lorenz_points=101),
    )
    return result, sliced, cutoffs


def test_each_row_is_exploded_once_per_slice_dimension(health):
    _, sliced, _ = health
    counts = {r["slice"]: r["count"] for r in sliced.groupBy("slice").count().collect()}
    # 11 deduplicated rows (9 items, 2 empty responses); empty responses have no category
    assert counts["all"] == 11
    assert counts["platform=ios"] + counts["platform=web"] == 11
    assert sum(v for k, v in counts.items() if k.startswith("category=")) == 9
    assert counts["category=unknown"] == 1  # m, missing from the catalog
    assert counts["hour=10"] == counts["day_type=weekday"] == 11  # 2026-11-20 10:00 UTC is a Friday
    # exposures a 3, c 2, b d e m 1 (T = 9); exposed more than: a 0, c 3/9, the rest 5/9
    assert counts["popularity=head"] == 3 and counts["popularity=mid"] == 6
    assert sum(v for k, v in counts.items() if k.startswith("popularity=")) == 9


def test_popularity_cutoffs(health):
    _, _, cutoffs = health
    assert (cutoffs.head_min, cutoffs.tail_max) == (3.0, -1.0)  # no exposed item is tail; f (never exposed) is


def test_popularity_bucket_boundaries_are_inclusive(spark):
    # head when count >= head_min, tail when count <= tail_max: items exactly on a cut-off belong to it
    from pyspark.sql import functions as F

    from recsys_spark.steps.slices import PopularityCutoffs, popularity_bucket

    counts = spark.createDataFrame([(c,) for c in (0, 1, 2, 3, 4)], "c long")
    got = counts.select("c", popularity_bucket(F.col("c"), PopularityCutoffs(3.0, 1.0)).alias("b")).collect()
    assert {r.c: r.b for r in got} == {0: "tail", 1: "tail", 2: "mid", 3: "head", 4: "head"}


def test_a_slice_with_one_item(health):
    got = _by_slice(health[0].rows)["popularity=head"]  # only item a (category X), users u1 and u2
    _check(
        got,
        {
            ("gini", "exposed"): 0.0,
            ("gini", "catalog"): 0.0,
            ("item_coverage", "global"): 1.0,
            ("category_diversity", "global"): 0.0,
            ("personalization", "global"): 0.0,
        },
    )
    assert got[("gini", "catalog")].n == 1


def test_golden_day_all_and_a_slice_without_relevant_lists(health):
    result = health[0]
    got = _by_slice(result.rows)
    _check(got["all"], golden.EXPECTED_ALL)
    _check(got["platform=web"], golden.EXPECTED_WEB)
    assert got["all"][("pv", "global")].n == 5 and got["all"][("gini", "catalog")].n == 7
    assert got["all"][("category_diversity", "list_avg")].n == 3  # non-empty lists only
    assert got["platform=web"][("update_rate", "user_avg")].n == 0


def test_item_slices_see_their_part_of_the_catalog(health):
    got = _by_slice(health[0].rows)
    assert got["category=X"][("item_coverage", "global")].value == 1.0  # a, b of a, b
    assert got["category=Z"][("item_coverage", "global")].value == 0.5  # e of e, f
    assert got["category=unknown"][("item_coverage", "global")].value is None  # no catalog item is unknown
    assert got["category=X"][("pv", "global")].value == 3  # r1 r2 r3; empty responses are not in it
    assert got["category=X"][("pv_failure_rate", "global")].value == 0.0


def test_lorenz_points_of_all(health):
    points = [(x, y) for s, x, y in health[0].lorenz if s == "all"]
    assert [p[0] for p in points] == pytest.approx([x for x, _ in golden.LORENZ_ALL])
    assert [p[1] for p in points] == pytest.approx([y for _, y in golden.LORENZ_ALL])


def test_daily_job_writes_health_rows_lorenz_and_slices(spark, tmp_path):
    root = tmp_path
    day, before = golden.DAY, golden.DAY - dt.timedelta(days=1)
    spark.createDataFrame(golden.EXPOSURES, EXPOSURE_DDL).write.parquet(f"{root}/in/exposures/dt={day}")
    spark.createDataFrame(golden.CLICKS, CLICK_DDL).write.parquet(f"{root}/in/clicks/dt={day}")
    spark.createDataFrame(golden.CATALOG, "item_id string, category string").write.parquet(f"{root}/in/items")
    users = [("u1", day - dt.timedelta(days=100)), ("u2", day - dt.timedelta(days=2))]  # u3 is unknown
    spark.createDataFrame(users, "user_id string, first_seen date").write.parquet(f"{root}/in/users")
    t1 = golden.T0 - dt.timedelta(days=1)
    previous = [(u, "s0", f"p{i}", item, 1, 0.5, t1, "ios") for i, (u, item) in enumerate(golden.PREVIOUS)]
    spark.createDataFrame(previous, EXPOSURE_DDL).write.parquet(f"{root}/in/exposures/dt={before}")
    clicks = [(u, "s0", None, item, t1) for u, item in golden.POPULARITY]
    spark.createDataFrame(clicks, CLICK_DDL).write.parquet(f"{root}/in/clicks/dt={before}")
    cfg = load_config(None, ["metrics.k=[1, 3]", "rules.fail_on_hard=false", 'slices.names=["platform", "user_type"]'])

    summary = evaluate_day(spark, cfg, day, f"{root}/in", f"{root}/out")

    metrics = spark.read.parquet(f"{root}/out/metrics/dt={day}")
    got = _by_slice(metrics.collect())
    _check(got["all"], golden.EXPECTED_ALL)  # novelty from the previous day's clicks
    _check(got["platform=web"], {k: v for k, v in golden.EXPECTED_WEB.items() if k[0] != "item_coverage"})
    # a slice with lists but no relevant one: ranking metrics undefined, counted as 0 lists
    web = {(r.metric, r.k, r.aggregation): r for r in metrics.where("slice = 'platform=web'").collect()}
    assert web[("ndcg", 3, "user_avg")].value is None and web[("ndcg", 3, "user_avg")].n == 0
    assert web[("auc", None, "global")].value is None
    assert {"user_type=new", "user_type=returning", "user_type=unknown"} <= set(got)
    assert got["user_type=unknown"][("uv_failure_rate", "global")].value == 1.0  # u3
    lorenz = spark.read.parquet(f"{root}/out/lorenz/dt={day}").where("slice = 'all'").orderBy("x").collect()
    assert [r.x for r in lorenz] == pytest.approx([x for x, _ in golden.LORENZ_ALL])
    assert [r.y for r in lorenz] == pytest.approx([y for _, y in golden.LORENZ_ALL])
    users_table = spark.read.parquet(f"{root}/out/user_metrics/dt={day}")
    assert {r.slice for r in users_table.where("user_id = 'u1'").collect()} == {
        "all",
        "platform=ios",
        "user_type=returning",
    }
    assert any(note.startswith("novelty: item popularity from the clicks of 1 of the 7") for note in summary["notes"])
    assert summary["headline"]["gini_catalog"] == pytest.approx(22 / 54)


def test_shared_user_partitions_are_cached_deserialized(health):
    # pyspark's StorageLevel.MEMORY_AND_DISK is the serialized level: every cached batch Java-serialized
    # again and unrolled on the heap (the 20M-exposure job ran out of a 2 GB heap with it)
    from pyspark import StorageLevel

    _, sliced, _ = health
    by_user = persist_user_rows(partitioned_by_user(sliced, 2))
    try:
        assert by_user.storageLevel == StorageLevel.MEMORY_AND_DISK_DESER
    finally:
        by_user.unpersist()


@pytest.mark.parametrize("fixed", [False, True])
def test_health_is_one_python_pass_that_moves_sums_not_exposure_rows(health, fixed):
    # once the user partitions are built (the label stage counts them first), the health indicators are one
    # Python pass over them (kernels.health_pass) whose only shuffle is of partial sums by (slice, name, key);
    # the branches then read those sums, persisted, and shuffle only them: no exposure row moves again.
    # The same planned adaptively and, as the job plans it, without (session.fixed_shuffles)
    _, sliced, _ = health
    spark = sliced.sparkSession
    rows = spark.createDataFrame(sliced.collect(), sliced.schema)  # no lineage in the plan text
    by_user = persist_user_rows(partitioned_by_user(rows, 2))
    plan = fixed_shuffles(spark, 2) if fixed else contextlib.nullcontext()
    try:
        with plan:
            by_user.count()
            summed = partition_pass(by_user, 5)
            names, exchanges = names_and_exchanges(summed)
            assert names.count("MapInArrow") == 1 and "InMemoryTableScan" in names, names
            top = str(summed._jdf.queryExecution().executedPlan().nodeName())
            assert (top == "AdaptiveSparkPlan") != fixed, top
            assert exchanges == ["hashpartitioning(slice, name, key, 2)"], exchanges  # the user partitions in place
            summed = summed.persist()
            summed.count()
            query = request_rows(summed).unionByName(item_pass(summed, None))
            names, exchanges = names_and_exchanges(query)
            # every branch reads the persisted sums: the pass does not run again, nothing but sums moves
            assert "MapInArrow" not in names and "InMemoryTableScan" in names, names
            assert set(exchanges) == {"hashpartitioning(slice, 2)", "hashpartitioning(slice, exposures, in_catalog, 2)"}
            summed.unpersist()
    finally:
        by_user.unpersist()


def test_popularity_cutoffs_count_items_not_rows(spark):
    # item a has 6 exposure rows, b..e one each (and one empty response): the counts are a 6, b..e 1, and
    # the histogram is 1 item at count 6 and 4 items at 1 (10 exposures), not 6 + 4 "items".  Above count
    # 1 lie 6 / 10 of the exposures: with tail_share 0.3 that is below 1 - 0.3, so no exposed item is tail
    # (counted per row it would be 36 / 40)
    from recsys_spark.kernels.health import popularity_thresholds
    from recsys_spark.steps.slices import ITEM_EXPOSURES

    rows = [("u1", "a")] * 3 + [("u2", "a")] * 3 + [("u3", i) for i in "bcde"] + [("u4", None)]
    labelled = spark.createDataFrame(rows, "user_id string, item_id string")
    counts = item_exposure_counts(labelled)
    assert sorted((r.item_id, r[ITEM_EXPOSURES]) for r in counts.collect()) == [("a", 6)] + [(i, 1) for i in "bcde"]
    got = popularity_cutoffs(counts, 0.5, 0.3)
    assert (got.head_min, got.tail_max) == popularity_thresholds([6, 1], [1, 4], 0.5, 0.3) == (6.0, -1.0)
    withc = with_item_exposures(labelled, counts).collect()
    assert len(withc) == len(rows)  # a left join: every row once, the empty response with no count
    assert sorted((r.item_id or "", r[ITEM_EXPOSURES] or 0) for r in withc) == sorted(
        [("a", 6)] * 6 + [(i, 1) for i in "bcde"] + [("", 0)]
    )


def test_k_counts_unknown_only_when_an_exposed_item_is_missing_from_the_catalog(spark):
    # every exposed item is in the catalog (3 categories): K = 3, not 4. Two categories exposed equally:
    # category_diversity (global) = ln 2 / ln 3 (an `unknown` counted in K would give ln 2 / ln 4 = 0.5)
    catalog = spark.createDataFrame(
        [("i1", "a"), ("i2", "a"), ("i3", "b"), ("i4", "c")], "item_id string, category string"
    )
    rows = spark.createDataFrame(
        [("all", "u1", "r1", "i1", False, "a", True), ("all", "u1", "r1", "i3", True, "b", True)]
        + [("all", "u2", "r2", "i2", False, "a", True), ("all", "u2", "r2", "i3", False, "b", True)],
        "slice string, user_id string, request_id string, item_id string, clicked boolean, _category string, "
        "_in_catalog boolean",
    )
    dims = resolve_slices([], ["user_id", "item_id"], catalog.columns, None)
    prepared = persist_user_rows(partitioned_by_user(rows, 2))
    try:
        result = evaluate_health(prepared, HealthInputs(dims, catalog), HealthSettings(1, lorenz_points=11))
    finally:
        prepared.unpersist()
    got = {(r.metric, r.aggregation): r.value for r in result.rows if r.slice == "all"}
    assert result.info["categories"] == 3
    assert got[("category_diversity", "global")] == pytest.approx(math.log(2) / math.log(3), abs=1e-12)


def test_novel_shares_against_the_items_and_categories_each_user_clicked_before(spark):
    # the seed's "share of recommended items (or categories) the user has not seen before", read on the clicks
    # of the earlier days the job reads for novelty. u1 is shown a(X) b(X) c(Y) and had clicked a: b and c are
    # novel items (2/3), only c is of a category it had not clicked (1/3). u2 is shown a(X) d(Z) and had
    # clicked c(Y): both novel either way (1, 1). u3 clicked nothing before: everything is novel; x is not in
    # the catalog (category unknown, which nobody clicked)
    catalog = spark.createDataFrame([("a", "X"), ("b", "X"), ("c", "Y"), ("d", "Z")], "item_id string, category string")
    rows = spark.createDataFrame(
        [
            ("all", "u1", "r1", "a", False, "X", True),
            ("all", "u1", "r1", "b", False, "X", True),
            ("all", "u1", "r2", "c", True, "Y", True),
            ("all", "u1", "r2", "a", False, "X", True),  # a again in another request: one item
            ("all", "u2", "r3", "a", False, "X", True),
            ("all", "u2", "r3", "d", False, "Z", True),
            ("all", "u3", "r4", "x", False, "unknown", False),
            ("all", "u4", "r5", None, False, None, None),  # an empty response: no item, no share
        ],
        "slice string, user_id string, request_id string, item_id string, clicked boolean, _category string, "
        "_in_catalog boolean",
    )
    seen = spark.createDataFrame([("u1", "a"), ("u1", "a"), ("u2", "c"), ("u9", "b")], PAIRS_DDL)
    dims = resolve_slices([], ["user_id", "item_id"], catalog.columns, None)
    prepared = persist_user_rows(partitioned_by_user(rows, 2))
    try:
        previous = spark.createDataFrame([("u1", "a"), ("u1", "z")], PAIRS_DDL)  # only u1 returns
        settings = HealthSettings(min_list_length=1, lorenz_points=11)
        result = evaluate_health(prepared, HealthInputs(dims, catalog, seen=seen, previous=previous), settings)
        without = evaluate_health(prepared, HealthInputs(dims, None, seen=seen), settings)
    finally:
        prepared.unpersist()
    got = {(r.metric, r.aggregation): r for r in result.rows if r.slice == "all"}
    assert got[("novel_item_share", "user_avg")].value == pytest.approx((2 / 3 + 1 + 1) / 3)
    assert got[("novel_item_share", "global")].value == pytest.approx(5 / 6)  # 2 + 2 + 1 of 3 + 2 + 1 items
    assert got[("novel_category_share", "user_avg")].value == pytest.approx((1 / 3 + 1 + 1) / 3)
    assert got[("novel_category_share", "global")].value == pytest.approx(4 / 6)
    assert got[("novel_item_share", "user_avg")].n == 3 and got[("novel_item_share", "global")].n == 6
    shares = np.array([2 / 3, 1.0, 1.0])
    assert got[("novel_item_share", "user_avg")].se == pytest.approx(np.std(shares, ddof=1) / math.sqrt(3))
    assert got[("novel_item_share", "global")].ci_method == "delta"
    # the update rates come from the same join, over the returning user only: u1's b and c are new among a b c,
    # and over the 2 items it was shown the day before
    assert (got[("update_rate", "user_avg")].value, got[("update_rate", "user_avg")].n) == (pytest.approx(2 / 3), 1)
    assert got[("update_rate_previous", "global")].value == pytest.approx(1.0)
    # without a catalog there are no categories to compare: the item share only
    kinds = {r.metric for r in without.rows}
    assert "novel_item_share" in kinds and "novel_category_share" not in kinds


@pytest.mark.parametrize("bound", [2, 4])
def test_users_past_the_row_bound_give_the_same_health_rows(spark, bound):
    # the one pass sets aside every user past execution.max_user_rows (no Python call holds more of one
    # user); their sums take the bounded path (rows spread by (user, request), unit sums added in Spark):
    # the same health and business rows, the same Lorenz curve, with u1 (7 rows) and, at bound 2, u2 (3) set
    # aside
    exposures = spark.createDataFrame(golden.EXPOSURES, EXPOSURE_DDL)
    catalog = spark.createDataFrame(golden.CATALOG, "item_id string, category string")
    dims = resolve_slices(["platform", "category", "popularity"], exposures.columns, catalog.columns, None)
    inputs = SliceInputs(dims, catalog, None, "items", "users")
    deduplicated = deduplicate_exposures(exposures).transform(add_slice_columns, inputs, golden.DAY, 7)
    joined = join_feedback(deduplicated, spark.createDataFrame(golden.CLICKS, CLICK_DDL), 30.0, {"click": 1.0}, "click")
    counts = item_exposure_counts(joined)
    cutoffs = popularity_cutoffs(counts, 0.2, 0.2)
    rows = persist_user_rows(partitioned_by_user(with_item_exposures(joined, counts), 3), slice_input_columns(dims))
    prepared, keyed = explode_slices(rows, dims, cutoffs), with_slice_keys(rows, dims, cutoffs)
    sides = HealthInputs(
        dims,
        catalog,
        popularity=spark.createDataFrame(golden.POPULARITY, PAIRS_DDL),
        previous=spark.createDataFrame(golden.PREVIOUS, PAIRS_DDL),
        cutoffs=cutoffs,
        keyed=keyed,
    )
    try:
        whole = evaluate_health(prepared, sides, HealthSettings(2, 11, rows_per_bucket=3))
        bounded = evaluate_health(prepared, sides, HealthSettings(2, 11, max_user_rows=bound, rows_per_bucket=3))
    finally:
        rows.unpersist()
    key = [(r.metric, r.aggregation, r.slice) for r in whole.rows]
    assert key == [(r.metric, r.aggregation, r.slice) for r in bounded.rows] and len(key) > 50
    for a, b in zip(whole.rows, bounded.rows, strict=True):
        for field in ("value", "n", "se", "ci_low", "ci_high"):
            x, y = getattr(a, field), getattr(b, field)
            assert (x is None and y is None) or y == pytest.approx(x, rel=1e-12, abs=1e-12), (a, field, y)
    assert [p[0] for p in bounded.lorenz] == [p[0] for p in whole.lorenz]
    assert [p[1:] for p in bounded.lorenz] == [pytest.approx(p[1:], rel=1e-12, abs=1e-12) for p in whole.lorenz]
