"""The offline job end to end on a tiny fixture: the same numbers through the kernels and through Spark."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import precision_recall_curve, roc_auc_score, roc_curve

from recsys_spark import registry
from recsys_spark.config import load_config
from recsys_spark.kernels import offline as K
from recsys_spark.kernels import sampled as S

pytestmark = pytest.mark.spark

L3 = math.log2(3)


def write(spark, path: Path, frame: pd.DataFrame) -> str:
    spark.createDataFrame(frame).write.mode("overwrite").parquet(str(path))
    return str(path)


@pytest.fixture(scope="module")
def fixture(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("offline")
    # run a: u1 lists a, b, c, a again (duplicate); c is in u1's train (removed); u2 lists d, e;
    #        u4 lists f and has no truth (excluded, counted); u3 has truth but no list (zeros)
    write(
        spark,
        root / "recs" / "run=a",
        pd.DataFrame(
            {
                "user_id": ["u1", "u1", "u1", "u1", "u2", "u2", "u4"],
                "item_id": ["a", "b", "c", "a", "d", "e", "f"],
                "score": [0.9, 0.8, 0.7, 0.1, 0.9, 0.5, 0.3],
            }
        ),
    )
    # run b: u1 lists b first, u2 lists e first, u3 gets a list with its truth item
    write(
        spark,
        root / "recs" / "run=b",
        pd.DataFrame(
            {
                "user_id": ["u1", "u1", "u2", "u2", "u3", "u4"],
                "item_id": ["b", "a", "e", "d", "a", "f"],
                "score": [0.9, 0.8, 0.9, 0.5, 0.4, 0.3],
            }
        ),
    )
    write(spark, root / "truth", pd.DataFrame({"user_id": ["u1", "u1", "u2", "u3"], "item_id": ["b", "g", "e", "a"]}))
    write(spark, root / "train", pd.DataFrame({"user_id": ["u1", "u2"], "item_id": ["c", "x"]}))
    write(spark, root / "items", pd.DataFrame({"item_id": list("abcdefgx"), "category": list("AABBCCDA")}))
    write(
        spark,
        root / "predictions",
        pd.DataFrame(
            {
                "user_id": ["u1"] * 4 + ["u2"] * 4 + ["u3"] * 4,
                "item_id": list("abcdabcdabcd"),
                "score": [0.9, 0.2, 0.6, 0.4, 0.3, 0.8, 0.5, 0.1, 0.7, 0.6, 0.2, 0.9],
                "label": [1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0],
            }
        ),
    )
    write(
        spark,
        root / "ratings",
        pd.DataFrame(
            {
                "user_id": ["u1", "u1", "u1", "u2"],
                "item_id": ["a", "b", "c", "a"],
                "rating": [3.0, 1.0, 2.0, 1.0],
                "prediction": [3.0, 3.0, 2.0, 2.0],
            }
        ),
    )
    write(
        spark,
        root / "sampled",
        pd.DataFrame(
            {
                "user_id": ["u1"] * 4 + ["u2"] * 4,
                "item_id": list("abcdabcd"),
                "score": [0.8, 0.9, 0.1, 0.2, 0.5, 0.9, 0.5, 0.6],
                "is_target": [True, False, False, False] * 2,
            }
        ),
    )
    overrides = [
        f"offline.recommendations={root}/recs/run={{run}}",
        f"offline.truth={root}/truth",
        f"offline.train={root}/train",
        f"offline.items={root}/items",
        f"offline.predictions={root}/predictions",
        f"offline.ratings={root}/ratings",
        f"offline.sampled={root}/sampled",
        "offline.catalog_size=10",
        "offline.rating_range='1,3'",
        'offline.distortion={"3,1" = 5, "2,1" = 3}',
        "metrics.k=[2]",
        "metrics.f_alphas=[0.5, 1.0]",
        "health.lorenz_points=3",
    ]
    cfg = load_config(None, overrides)
    from recsys_spark.offline.run import run_offline

    out = root / "out"
    summaries = {run: run_offline(spark, cfg, run, str(out)) for run in ("a", "b")}
    return {"root": root, "out": out, "cfg": cfg, "summaries": summaries}


def metrics(spark, fixture, run="a") -> dict:
    """The rows without a threshold by (metric, k, aggregation) (threshold rows: tests/offline/test_thresholds.py)."""
    rows = spark.read.parquet(str(fixture["out"] / "offline" / "metrics" / f"run={run}")).collect()
    return {(r["metric"], r["k"], r["aggregation"]): r for r in rows if r["threshold"] is None}


def users(spark, fixture, run="a") -> pd.DataFrame:
    return (
        spark.read.parquet(str(fixture["out"] / "offline" / "user_metrics" / f"run={run}"))
        .toPandas()
        .set_index("user_id")
        .sort_index()
    )


def test_output_layout_and_summary(fixture):
    # a table per root, the run as a partition: offline/{table}/run=NAME, the summary and its marker last
    offline = fixture["out"] / "offline"
    for table in ("metrics", "user_metrics", "lorenz", "calibration"):
        assert list((offline / table / "run=a").glob("*.parquet")), table
    marker = offline / "summary" / "run=a"
    assert {p.name for p in marker.iterdir()} >= {"summary.json", "_SUCCESS"}
    assert not (offline / "_staging").exists() and not (offline / "_locks").exists()
    both = pd.read_parquet(offline / "metrics")  # the table at its root: both runs, run as a column
    assert set(both["run"]) == {"a", "b"}
    summary = json.loads((marker / "summary.json").read_text())
    assert summary["evaluations"] == ["lists", "predictions", "ratings", "sampled"]
    c = summary["counts"]
    assert c["duplicate_recommendations"] == 1  # u1's second a
    assert c["train_items_removed"] == 1  # u1's c
    assert c["users_with_truth_without_list"] == 1  # u3
    assert c["users_with_list_without_truth_excluded"] == 1  # u4
    assert c["users_with_truth"] == 3
    assert c["ratings_distortion_pairs_not_in_table"] == 0  # (3, 1) and (2, 1) are in the table, the rest exact


def test_top_k_by_hand(spark, fixture):
    m = metrics(spark, fixture)
    # u1: list a, b vs truth {b, g}: P@2 1/2, R@2 1/2, mrr 1/2; u2: d, e vs {e}: P@2 1/2, R@2 1, mrr 1/2; u3: zeros
    assert m[("recall", 2, "user_avg")]["value"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert m[("precision", 2, "user_avg")]["value"] == pytest.approx((0.5 + 0.5 + 0) / 3)
    assert m[("mrr", None, "user_avg")]["value"] == pytest.approx((0.5 + 0.5 + 0) / 3)
    assert m[("recall", 2, "user_avg")]["n"] == 3  # u4 (no truth) excluded
    # system-centric: hits 1 + 1 + 0 over k times the 3 users with truth (u3's missing list included, as in
    # precision@k per list), and over truth sizes 2 + 1 + 1
    assert m[("precision", 2, "global")]["value"] == pytest.approx(2 / (2 * 3))
    assert m[("precision", 2, "global")]["value"] == pytest.approx(m[("precision", 2, "user_avg")]["value"])
    assert m[("recall", 2, "global")]["value"] == pytest.approx(2 / 4)
    # F_alpha@2 (docs/metrics.md): each user's from its P and R, u3's 0 (P = R = 0); F1: u1 2 (1/4) / 1 = 1/2,
    # u2 2 (1/2) / (3/2) = 2/3; F0.5 = 1.25 P R / (0.25 P + R): u1 0.3125 / 0.625, u2 0.625 / 1.125
    assert m[("f1", 2, "user_avg")]["value"] == pytest.approx((1 / 2 + 2 / 3 + 0) / 3)
    assert m[("f0.5", 2, "user_avg")]["value"] == pytest.approx((0.5 + 0.625 / 1.125 + 0) / 3)
    # global: F of P = 1/3 and R = 1/2, = (1 + a²) Σ hits / (a² Σ truth + 2 * 3 users): 4 / 10 and 2.5 / 7
    assert m[("f1", 2, "global")]["value"] == pytest.approx(2 * (1 / 6) / (5 / 6)) == pytest.approx(0.4)
    assert m[("f0.5", 2, "global")]["value"] == pytest.approx(2.5 / 7)
    assert m[("f1", 2, "global")]["ci_method"] == "delta" and m[("f0.5", 2, "user_avg")]["ci_method"] == "t"
    ndcg_u1 = (1 / L3) / (1 + 1 / L3)
    ndcg_u2 = (1 / L3) / 1
    # exponential gain with relevance 1 is the same as linear
    assert m[("ndcg", 2, "user_avg")]["value"] == pytest.approx((ndcg_u1 + ndcg_u2 + 0) / 3)


def test_user_average_interval_is_students_t(spark, fixture):
    r = metrics(spark, fixture)[("recall", 2, "user_avg")]
    x = np.array([0.5, 1.0, 0.0])
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert r["ci_method"] == "t" and r["se"] == pytest.approx(stats.sem(x))
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((lo, hi))


def test_pooled_ratio_has_a_delta_interval(spark, fixture):
    r = metrics(spark, fixture)[("recall", 2, "global")]
    assert r["ci_method"] == "delta" and r["ci_low"] < r["value"] < r["ci_high"]


def test_kernels_and_spark_agree_per_user(spark, fixture):
    got = users(spark, fixture)
    frame = pd.DataFrame(
        {
            "user_id": ["u1", "u1", "u1", "u2", "u2", "u3", "u4"],
            "rank": [1, 2, np.nan, 1, 2, np.nan, 1],
            "relevance": [0, 1, 1, 0, 1, 1, 0],
            "category": ["A", "A", "D", "B", "C", "A", "C"],
            "self_info": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
            "new_category": np.nan,
            "has_history": np.nan,
        }
    )
    want = K.score_lists(frame, [2], "exponential").set_index("user_id").sort_index()
    for col in (
        "n_list",
        "n_truth",
        "mrr",
        "precision_at_2",
        "recall_at_2",
        "ndcg_at_2",
        "map_at_2",
        "f1_at_2",
        "intra_list_diversity",
    ):
        np.testing.assert_allclose(got.loc[want.index, col].to_numpy(float), want[col].to_numpy(float), err_msg=col)
    # novelty: self-information log2((U + 1) / (k + 1)) with U = 2 train users; a, b, d, e untouched in train
    assert got.loc["u1", "novelty"] == pytest.approx(math.log2(3))
    # serendipity: u1's hit b (category A) is new to u1 (train c is B): 1 of 2 items
    assert got.loc["u1", "serendipity"] == pytest.approx(1 / 2)
    # u2's train x is category A; its hit e is C: new
    assert got.loc["u2", "serendipity"] == pytest.approx(1 / 2)


def test_serendipity_leaves_out_and_counts_users_without_a_train_history(spark, fixture):
    # run b lists u3's truth item a (category A); u3 has no train item, so every category was "new" and its
    # serendipity was its hit share, 1.0; u1 and u2 have a history and keep their values
    b = users(spark, fixture, "b")
    assert math.isnan(b.loc["u3", "serendipity"]) and b.loc["u3", "serendipity_without_history"] == 1
    assert b.loc["u1", "serendipity"] == pytest.approx(1 / 2)  # b (A) is new to u1 (train c is B), a is not a hit
    assert fixture["summaries"]["b"]["counts"]["serendipity_users_without_history"] == 1
    assert fixture["summaries"]["a"]["counts"]["serendipity_users_without_history"] == 0  # u3 has no list in a
    assert metrics(spark, fixture, "b")[("serendipity", None, "user_avg")]["n"] == 2


def test_beyond_accuracy_rows_have_no_cut_off_and_the_fixtures_catalog_values(spark, fixture):
    m = metrics(spark, fixture)
    # run a's top lists: u1 a, b (c removed), u2 d, e, u4 f; a catalog of 8 items (a..g, x)
    assert m[("item_coverage", None, "global")]["value"] == pytest.approx(5 / 8)
    assert m[("gini", None, "catalog")]["value"] == pytest.approx(3 / 7)  # counts 0, 0, 0, 1, 1, 1, 1, 1
    assert m[("gini", None, "exposed")]["value"] == 0.0
    assert m[("personalization", None, "global")]["value"] == 1.0  # no item is shared
    assert {key for key in m if key[0] in ("coverage", "diversity")} == set()  # the old names are gone
    beyond = ("item_coverage", "gini", "personalization", "intra_list_diversity", "novelty", "serendipity")
    assert {key[1] for key in m if key[0] in beyond} == {None}
    assert fixture["summaries"]["a"]["beyond_accuracy_depth"] == 2


def test_every_row_is_named_by_the_registry(spark, fixture):
    # every input evaluated (lists, predictions, ratings, sampled): a known metric, a cut-off where it takes one
    for run in ("a", "b"):
        for name, k, aggregation in metrics(spark, fixture, run):
            assert registry.parse_key(registry.key(name, k, aggregation)) == (name, k, aggregation)


def test_catalog_rows_are_the_daily_jobs_health_rows_an_item_outside_the_catalog_included(spark):
    from recsys_spark.offline.lists import catalog_rows

    # u1 lists a, b, z (z is not in the catalog a..d), u2 lists a, c; d is never recommended
    ranked = spark.createDataFrame(
        [("u1", "a", 1.0), ("u1", "b", 2.0), ("u1", "z", 3.0), ("u2", "a", 1.0), ("u2", "c", 2.0)],
        "user_id string, item_id string, rank double",
    )
    items = spark.createDataFrame([(i, "A") for i in "abcd"], "item_id string, category string")

    def rows(catalog):
        got, lorenz, counts = catalog_rows(ranked, 3, catalog, 101)
        return {(r[0], r[1], r[2]): r[4] for r in got}, lorenz, counts

    got, lorenz, counts = rows(items)
    # as the daily job: z counts among the recommended items, never as a covered catalog item, and d is a zero
    assert got[("item_coverage", None, "global")] == pytest.approx(3 / 4)  # a, b, c of a..d (the old value: 1)
    assert got[("gini", None, "catalog")] == pytest.approx(0.4)  # counts 0, 1, 1, 1, 2 (old: 0, 1, 1, 2 -> 0.2)
    assert got[("gini", None, "exposed")] == pytest.approx(0.2)  # counts 1, 1, 1, 2
    assert got[("personalization", None, "global")] == pytest.approx(1 - 2 / (1 * 5))  # a shared by 2 users
    assert counts["recommended_items_outside_catalog"] == 1 and counts["catalog_items"] == 4
    assert len(lorenz) == 6  # five items and the origin
    got, lorenz, counts = rows(None)  # no catalog: no item coverage, no catalog Gini
    assert set(got) == {("gini", None, "exposed"), ("personalization", None, "global")}
    assert len(lorenz) == 5  # over the four items recommended


def test_predictions(spark, fixture):
    m = metrics(spark, fixture)
    p = pd.read_parquet(fixture["root"] / "predictions")
    assert m[("auc", None, "global")]["value"] == pytest.approx(roc_auc_score(p["label"], p["score"]))
    per_user = [roc_auc_score(g["label"], g["score"]) for u, g in p.groupby("user_id") if g["label"].nunique() == 2]
    assert m[("auc", None, "user_avg")]["value"] == pytest.approx(np.mean(per_user))
    assert m[("auc", None, "user_avg")]["n"] == 3  # every user has both classes
    assert m[("pcoc", None, "global")]["value"] == pytest.approx(p["score"].sum() / p["label"].sum())
    cal = spark.read.parquet(str(fixture["out"] / "offline" / "calibration" / "run=a")).toPandas()
    assert cal["n"].sum() == len(p)


def test_the_predictions_curves_are_scikit_learns(spark, fixture):
    # offline/roc_curve/run=a and offline/pr_curve/run=a: every prediction pooled, slice all, curve order
    p = pd.read_parquet(fixture["root"] / "predictions")
    offline = fixture["out"] / "offline"
    roc = spark.read.parquet(str(offline / "roc_curve" / "run=a")).toPandas()
    fpr, tpr, thr = roc_curve(p["label"], p["score"])
    assert set(roc["slice"]) == {"all"}
    np.testing.assert_array_equal(roc["fpr"], fpr)
    np.testing.assert_array_equal(roc["tpr"], tpr)
    assert roc["threshold"].isna().tolist() == [True] + [False] * (len(thr) - 1)  # sklearn's inf: null
    np.testing.assert_array_equal(roc["threshold"].iloc[1:], thr[1:])
    pr = spark.read.parquet(str(offline / "pr_curve" / "run=a")).toPandas()
    precision, recall, pthr = precision_recall_curve(p["label"], p["score"])
    np.testing.assert_allclose(pr["precision"], precision, atol=1e-15)
    np.testing.assert_array_equal(pr["recall"], recall)
    np.testing.assert_array_equal(pr["threshold"].iloc[:-1], pthr)
    assert pr["threshold"].isna().tolist() == [False] * len(pthr) + [True]


def test_ratings(spark, fixture):
    m = metrics(spark, fixture)
    # errors: u1 0, 2, 0; u2 1
    assert m[("mae", None, "global")]["value"] == pytest.approx(3 / 4)
    assert m[("mae", None, "user_avg")]["value"] == pytest.approx((2 / 3 + 1) / 2)
    assert m[("mae", None, "item_avg")]["value"] == pytest.approx(((0 + 1) / 2 + 2 + 0) / 3)  # a, b, c
    assert m[("rmse", None, "global")]["value"] == pytest.approx(math.sqrt((4 + 1) / 4))
    assert m[("nmae", None, "global")]["value"] == pytest.approx(3 / 4 / 2)  # range 1..3
    # distortion: d(3, 1) = 5 for u1's b, d(2, 1) = 3 for u2's a, 0 for exact predictions
    assert m[("distortion", None, "global")]["value"] == pytest.approx((0 + 5 + 0 + 3) / 4)


def test_sampled(spark, fixture):
    m = metrics(spark, fixture)
    # u1: target 0.8, negatives 0.9, 0.1, 0.2 -> rank 2; u2: target 0.5, negatives 0.9, 0.5, 0.6 -> 1 + 2 + 1/2
    ranks = np.array([2.0, 3.5])
    assert m[("auc", None, "sampled_naive")]["value"] == pytest.approx(np.mean((3 + 1 - ranks) / 3))
    assert m[("mrr", None, "sampled_naive")]["value"] == pytest.approx((1 / 2 + (1 / 3 + 1 / 4) / 2) / 2)
    tables = S.tables_for(10, [3], [2], 0.01)
    corrected = S.target_metrics(ranks, np.array([3, 3]), [2], tables)["corrected_ndcg_at_2"].mean()
    assert m[("ndcg", 2, "sampled_corrected")]["value"] == pytest.approx(corrected)


def test_rerun_gives_the_same_metrics(spark, fixture):
    from recsys_spark.offline.run import run_offline

    before = metrics(spark, fixture)
    run_offline(spark, fixture["cfg"], "a", str(fixture["out"]))
    after = metrics(spark, fixture)
    assert before.keys() == after.keys()
    for key in before:
        v0, v1 = before[key]["value"], after[key]["value"]
        assert (v0 is None and v1 is None) or v0 == pytest.approx(v1, rel=1e-12), key


def test_compare_is_a_paired_t_over_users_in_both(spark, fixture):
    from recsys_spark.offline.compare import compare_runs

    summary = compare_runs(spark, fixture["cfg"], str(fixture["out"]), "a", "b")
    rows = {r[0]: r for r in summary["rows"]}
    a, b = users(spark, fixture, "a"), users(spark, fixture, "b")
    both = a.join(b, lsuffix="_a", rsuffix="_b", how="inner")
    ok = both[["recall_at_2_a", "recall_at_2_b"]].dropna()
    t = stats.ttest_rel(ok["recall_at_2_b"], ok["recall_at_2_a"])
    r = rows["recall_at_2"]
    assert r[3] == len(ok)
    assert r[6] == pytest.approx((ok["recall_at_2_b"] - ok["recall_at_2_a"]).mean())
    assert r[13] == pytest.approx(t.pvalue)
    p = [rr[13] for rr in summary["rows"] if rr[13] is not None]
    assert all(rr[14] is None or rr[14] >= rr[13] for rr in summary["rows"])  # Holm never lowers a p-value
    assert len(p) >= 1
    assert list((fixture["out"] / "offline" / "comparison" / "base=a" / "candidate=b").glob("*.parquet"))
    assert (fixture["out"] / "offline" / "summary" / "base=a" / "candidate=b" / "_SUCCESS").exists()


def test_aggregate_counts_defined_values_pairs_ratios_and_carries_a_transform_by_hand(spark):
    # the per-user table -> metrics rows step on its own, by hand: a mean over the users whose value is
    # defined (null and NaN left out), a pooled ratio over the users whose numerator and denominator are
    # both defined, and a transformed mean (the square root of a mean square, as RMSE from MSE)
    from pyspark.sql import functions as F

    from recsys_spark.kernels.estimates import delta_interval, t_interval
    from recsys_spark.kernels.sums import MeanStats, RatioStats
    from recsys_spark.offline.aggregate import Mean, Ratio, aggregate

    def root(x: float) -> float:  # as the pipeline's RMSE: a bound below 0 is clipped
        return math.sqrt(max(x, 0.0))

    nan = float("nan")
    rows = [(1.0, 1.0, 2.0), (2.0, 3.0, 4.0), (nan, 5.0, None), (None, None, 6.0), (4.0, nan, 1.0), (9.0, 2.0, 8.0)]
    users = spark.createDataFrame(rows, "v double, a double, b double")
    specs = [
        Mean("m", 10, "user_avg", "v"),
        Ratio("r", None, "global", F.col("a"), F.col("b")),
        Mean("rmse", None, "user_avg", "v", root),
    ]
    got = {r[0]: r for r in aggregate(users, specs, 0.9)}
    v = np.array([1.0, 2.0, 4.0, 9.0])
    a, b = np.array([1.0, 3.0, 2.0]), np.array([2.0, 4.0, 8.0])  # the three pairs with both defined
    mean, ratio = t_interval(MeanStats.from_values(v), 0.9), delta_interval(RatioStats.from_values(a, b), 0.9)
    _, k, aggregation, slice_value, value, n, se, lo, hi, method, threshold = got["m"]
    assert (k, aggregation, slice_value, n, method, threshold) == (10, "user_avg", "all", 4, mean.method, None)
    assert (value, se, lo, hi) == pytest.approx((4.0, v.std(ddof=1) / 2, mean.ci_low, mean.ci_high), rel=1e-12)
    _, _, _, _, value, n, se, lo, hi, _, _ = got["r"]
    assert (value, n) == (pytest.approx(6 / 14, rel=1e-12), 3)
    assert (se, lo, hi) == pytest.approx((ratio.se, ratio.ci_low, ratio.ci_high), rel=1e-12)
    _, _, _, _, value, n, se, lo, hi, _, _ = got["rmse"]
    slope = (root(mean.ci_high) - root(mean.ci_low)) / (mean.ci_high - mean.ci_low)
    assert (value, lo, hi) == pytest.approx((2.0, root(mean.ci_low), root(mean.ci_high)), rel=1e-12)
    assert se == pytest.approx(mean.se * slope, rel=1e-12) and n == 4


# --------------------------------------------------------------------------- hostile inputs (the trust issue)

NAN, INF = float("nan"), float("inf")


def write_rows(spark, path: Path, rows: list[tuple], ddl: str) -> str:
    """Python rows keep the difference between NaN (float("nan")) and null (None), which pandas loses."""
    spark.createDataFrame(rows, ddl).write.mode("overwrite").parquet(str(path))
    return str(path)


@pytest.fixture(scope="module")
def hostile(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("offline_hostile")
    recs = [
        ("u1", "a", 0.9),
        ("u1", "b", NAN),  # Spark sorts NaN above every number: it was u1's first item
        ("u1", "c", 0.5),
        ("u2", "d", INF),
        ("u2", "e", 0.2),
        ("u3", "f", None),  # no rank column: a null score cannot be placed
        ("u3", "g", 0.1),
        ("u4", "h", -INF),  # u4's only item: u4 is left with truth and no list
        (None, "a", 0.3),
        ("u1", None, 0.8),
    ]
    predictions = [
        ("p1", "a", 0.9, 1.0),
        ("p1", "b", 0.2, 0.0),
        ("p1", "c", NAN, 0.0),
        ("p2", "a", 0.3, 1.0),
        ("p2", "b", 0.7, 0.0),
        ("p2", "c", INF, 1.0),
        ("p2", "d", 0.1, 0.0),
        ("p3", "a", 0.6, 1.0),  # one class only: no AUC
        ("p3", "b", 0.4, 1.0),
        ("p4", "a", None, 1.0),  # p4 has no usable row
        ("p4", "b", 0.5, None),
        ("p4", "c", 0.5, NAN),
        (None, "a", 0.5, 1.0),
        ("p5", "a", 1.5, 1.0),  # outside [0, 1]: kept and flagged
        ("p5", "b", -0.2, 0.0),
    ]
    ratings = [
        ("r1", "a", 4.0, 4.5),
        ("r1", "b", 5.0, 6.0),  # prediction above the range: kept and flagged
        ("r2", "a", 0.0, 2.0),  # rating below the range: kept and flagged
        ("r2", "c", 3.0, NAN),
        ("r2", "d", None, 3.0),
        ("r3", "a", 2.0, None),  # r3 has no usable row
        ("r3", "b", 2.0, INF),
        ("r3", "c", NAN, 2.0),
        (None, "a", 3.0, 3.0),
    ]
    sampled = [
        ("s1", "t", 0.5, True),
        ("s1", "x", 0.9, False),
        ("s1", "y", NAN, False),  # a NaN negative counted above the target
        ("s1", "z", 0.1, False),
        ("s2", "t", NAN, True),  # a NaN target ranked first
        ("s2", "x", 0.3, False),
        ("s2", "y", 0.4, False),
        ("s3", "t", 0.5, None),
        ("s3", "t2", 0.6, True),
        ("s3", "x", 0.2, False),
    ]
    truth = [("u1", "c"), ("u2", "e"), ("u3", "g"), ("u4", "h")]
    ids = "user_id string, item_id string"
    overrides = [
        f"offline.recommendations={write_rows(spark, root / 'recs', recs, f'{ids}, score double')}",
        f"offline.truth={write_rows(spark, root / 'truth', truth, ids)}",
        f"offline.predictions={write_rows(spark, root / 'preds', predictions, f'{ids}, score double, label double')}",
        f"offline.ratings={write_rows(spark, root / 'ratings', ratings, f'{ids}, rating double, prediction double')}",
        f"offline.sampled={write_rows(spark, root / 'sampled', sampled, f'{ids}, score double, is_target boolean')}",
        "offline.catalog_size=10",
        "offline.rating_range='1,5'",
        "metrics.k=[2]",
    ]
    cfg = load_config(None, overrides)
    from recsys_spark.offline.run import run_offline

    out = root / "out"
    summary = run_offline(spark, cfg, "h", str(out))
    return {"root": root, "out": out, "cfg": cfg, "summary": summary, "predictions": predictions}


def test_non_finite_and_null_recommendation_scores_are_set_aside_counted_and_never_ranked(spark, hostile):
    m = metrics(spark, hostile, "h")
    # u1: a, c (b's NaN set aside) -> c at 2; u2: e (d's inf set aside) -> 1; u3: g -> 1; u4: no list -> 0
    # (before: b and d ranked first, u4's -inf item ranked: mean (1/3 + 1/2 + 1 + 1) / 4)
    assert m[("mrr", None, "user_avg")]["value"] == pytest.approx((1 / 2 + 1 + 1 + 0) / 4)
    assert m[("recall", 2, "user_avg")]["value"] == pytest.approx((1 + 1 + 1 + 0) / 4)
    c = hostile["summary"]["counts"]
    assert c["recommendation_rows"] == 10
    assert {k: v for k, v in c.items() if k.startswith("set_aside_recommendations_")} == {
        "set_aside_recommendations_null_user_id": 1,
        "set_aside_recommendations_null_item_id": 1,
        "set_aside_recommendations_null_score": 1,
        "set_aside_recommendations_nan_score": 1,
        "set_aside_recommendations_infinite_score": 2,
    }
    assert c["duplicate_recommendations"] == 0 and c["users_with_truth_without_list"] == 1
    assert any(n.startswith("recommendations: 6 rows set aside") for n in hostile["summary"]["notes"])


def test_non_finite_and_null_prediction_scores_and_labels_are_set_aside_counted_and_never_averaged(spark, hostile):
    m = metrics(spark, hostile, "h")
    kept = pd.DataFrame(
        [
            r
            for r in hostile["predictions"]
            if r[0] is not None and all(v is not None and np.isfinite(v) for v in r[2:])
        ],
        columns=["user_id", "item_id", "score", "label"],
    )
    assert len(kept) == 9
    c = hostile["summary"]["counts"]
    assert c["prediction_rows"] == 9
    assert {k: v for k, v in c.items() if k.startswith("set_aside_predictions_")} == {
        "set_aside_predictions_null_user_id": 1,
        "set_aside_predictions_null_score": 1,
        "set_aside_predictions_nan_score": 1,
        "set_aside_predictions_infinite_score": 1,
        "set_aside_predictions_null_label": 1,
        "set_aside_predictions_nan_label": 1,
    }
    assert m[("auc", None, "global")]["value"] == pytest.approx(roc_auc_score(kept["label"], kept["score"]))
    assert m[("auc", None, "global")]["n"] == 9
    # per user: p1 1, p2 (positive 0.3 against 0.7 and 0.1) 1/2, p5 1; p3 has one class
    assert m[("auc", None, "user_avg")]["value"] == pytest.approx((1 + 0.5 + 1) / 3)
    p = np.clip(kept["score"].to_numpy(), K.EPS, 1 - K.EPS)
    y = kept["label"].to_numpy()
    assert m[("logloss", None, "global")]["value"] == pytest.approx(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    assert m[("pcoc", None, "global")]["value"] == pytest.approx(kept["score"].sum() / kept["label"].sum())
    cal = spark.read.parquet(str(hostile["out"] / "offline" / "calibration" / "run=h")).toPandas()
    assert cal["n"].sum() == 9


def test_users_with_one_class_are_counted_as_users_without_auc(spark, hostile):
    # p3's two rows are both positives: no AUC, left out of the user average, and counted (it was always 0:
    # the kernel's NaN reaches the per-user table as a null)
    assert hostile["summary"]["counts"]["users_without_auc"] == 1
    predicted = users(spark, hostile, "h").dropna(subset=["n_predictions"])
    assert predicted["auc"].isna().sum() == 1 and math.isnan(predicted.loc["p3", "auc"])
    assert metrics(spark, hostile, "h")[("auc", None, "user_avg")]["n"] == 3


def test_prediction_scores_outside_the_unit_interval_are_kept_counted_and_noted(hostile):
    summary = hostile["summary"]
    assert summary["counts"]["predictions_score_out_of_range"] == 2  # p5's 1.5 and -0.2
    assert any(n.startswith("predictions: 2 of 9 scores outside [0, 1] (kept)") for n in summary["notes"])


def test_bad_rating_rows_are_set_aside_and_counted_and_out_of_range_ones_kept_and_flagged(spark, hostile):
    m = metrics(spark, hostile, "h")
    # kept: r1 a |0.5|, r1 b |1|, r2 a |2|
    assert m[("mae", None, "global")]["value"] == pytest.approx(3.5 / 3)
    assert m[("mae", None, "user_avg")]["value"] == pytest.approx((1.5 / 2 + 2) / 2)
    assert m[("mae", None, "user_avg")]["n"] == 2
    assert m[("rmse", None, "global")]["value"] == pytest.approx(math.sqrt((0.25 + 1 + 4) / 3))
    c = hostile["summary"]["counts"]
    assert {k: v for k, v in c.items() if k.startswith("set_aside_ratings_")} == {
        "set_aside_ratings_null_user_id": 1,
        "set_aside_ratings_null_item_id": 0,
        "set_aside_ratings_null_rating": 1,
        "set_aside_ratings_nan_rating": 1,
        "set_aside_ratings_infinite_rating": 0,
        "set_aside_ratings_null_prediction": 1,
        "set_aside_ratings_nan_prediction": 1,
        "set_aside_ratings_infinite_prediction": 1,
    }
    assert (c["ratings_rating_out_of_range"], c["ratings_prediction_out_of_range"]) == (1, 1)
    assert any(
        n.startswith("ratings: 1 ratings and 1 predictions outside [1, 5] (offline.rating_range), kept")
        for n in hostile["summary"]["notes"]
    )


def test_non_finite_sampled_scores_are_set_aside_never_ranked(spark, hostile):
    m = metrics(spark, hostile, "h")
    # s1: target 0.5 against 0.9 and 0.1 (the NaN negative set aside) -> rank 2; s2's NaN target set aside
    # (no target left: no row); s3: the null is_target row set aside, target 0.6 against 0.2 -> rank 1
    assert m[("mrr", None, "sampled_naive")]["value"] == pytest.approx((1 / 2 + 1) / 2)
    assert m[("mrr", None, "sampled_naive")]["n"] == 2
    c = hostile["summary"]["counts"]
    assert (c["set_aside_sampled_nan_score"], c["set_aside_sampled_null_is_target"]) == (2, 1)
    assert c["sampled_targets"] == 2
    # s2 keeps its two negatives and no target
    assert hostile["summary"]["sampled"]["negatives"] == {
        "1": {"users": 1, "targets": 1},
        "2": {"users": 2, "targets": 1},
    }


def test_a_nan_score_and_a_null_score_are_set_aside_alike_and_beside_a_rank_a_null_score_is_kept(spark):
    from recsys_spark.offline.lists import clean_lists

    def ranked(rows, ddl="user_id string, item_id string, score double"):
        lists, counts = clean_lists(spark.createDataFrame(rows, ddl), None, False)
        return sorted(tuple(r) for r in lists.collect()), counts

    good = [("u", "a", 0.9), ("u", "c", 0.5)]
    removed, _ = ranked(good)
    assert removed == [("u", "a", 1.0), ("u", "c", 2.0)]
    for bad in (NAN, None, INF, -INF):
        got, counts = ranked(good + [("u", "b", bad)])
        assert got == removed, bad
        assert sum(v for k, v in counts.items() if k.startswith("set_aside_")) == 1
    # with a rank column the rank orders the list: a null score is a missing tie-break, a NaN one a model failure
    ddl = "user_id string, item_id string, score double, rank double"
    got, counts = ranked([("u", "a", None, 1.0), ("u", "b", NAN, 2.0), ("u", "c", 0.1, 3.0)], ddl)
    assert got == [("u", "a", 1.0), ("u", "c", 2.0)]
    assert counts["set_aside_recommendations_nan_score"] == 1 and "set_aside_recommendations_null_score" not in counts


# --------------------------------------------------------------------------- offline-compare without a paired value


def fake_run(spark, out: Path, run: str, rows: list[tuple], ddl: str) -> None:
    """What offline-compare reads of a run: its user_metrics and its _SUCCESS marker."""
    offline = out / "offline"
    spark.createDataFrame(rows, ddl).write.mode("overwrite").parquet(str(offline / "user_metrics" / f"run={run}"))
    (offline / "summary" / f"run={run}").mkdir(parents=True)
    (offline / "summary" / f"run={run}" / "_SUCCESS").write_text("")


EMPTY_COMPARISONS = {
    "no user in common": (
        [("u1", 0.5, 2), ("u2", 1.0, 2)],
        "user_id string, mrr double, n_list long",
        [("u3", 0.5, 2), ("u4", 0.0, 2)],
        "user_id string, mrr double, n_list long",
        "have no user in common",
    ),
    "no metric in common": (
        [("u1", 0.5)],
        "user_id string, mrr double",
        [("u1", 0.7)],
        "user_id string, auc double",
        "have no per-user metric in common",
    ),
    "no user with a value in both": (
        [("u1", 0.5), ("u2", None)],
        "user_id string, mrr double",
        [("u1", NAN), ("u2", 1.0)],
        "user_id string, mrr double",
        "no user of the 2 in both runs",
    ),
}


@pytest.mark.parametrize("case", EMPTY_COMPARISONS)
def test_a_comparison_without_a_paired_value_fails_as_empty_input_and_writes_nothing(spark, tmp_path, case):
    from recsys_spark.errors import EmptyInputError
    from recsys_spark.offline.compare import compare_runs

    base_rows, base_ddl, candidate_rows, candidate_ddl, message = EMPTY_COMPARISONS[case]
    fake_run(spark, tmp_path, "x", base_rows, base_ddl)
    fake_run(spark, tmp_path, "y", candidate_rows, candidate_ddl)
    with pytest.raises(EmptyInputError, match=message) as raised:
        compare_runs(spark, load_config(None, []), str(tmp_path), "x", "y")
    assert raised.value.exit_code == 7
    assert "user_metrics" in str(raised.value) and "\n" not in str(raised.value)
    assert not (tmp_path / "offline" / "comparison").exists()
    assert sorted(p.name for p in (tmp_path / "offline").iterdir()) == ["summary", "user_metrics"]


@pytest.mark.process
def test_offline_compare_of_runs_without_a_user_in_common_exits_7_with_one_line(spark, tmp_path):
    import os
    import subprocess
    import sys

    base_rows, base_ddl, candidate_rows, candidate_ddl, _ = EMPTY_COMPARISONS["no user in common"]
    fake_run(spark, tmp_path, "x", base_rows, base_ddl)
    fake_run(spark, tmp_path, "y", candidate_rows, candidate_ddl)
    args = [
        "offline-compare",
        "--output-root",
        str(tmp_path),
        "--base",
        "x",
        "--candidate",
        "y",
        "--master",
        "local[1]",
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-m", "recsys_spark.cli", *args], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 7, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("recsys-spark: error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "runs 'x' and 'y' have no user in common" in errors[0]
    assert not (tmp_path / "offline" / "comparison").exists()


def test_an_offline_run_logs_each_of_its_stages(spark, fixture, tmp_path):
    import io

    from recsys_spark.offline.run import run_offline
    from recsys_spark.runtime import log

    stream = io.StringIO()
    log.setup_logging(stream=stream)
    try:
        run_offline(spark, fixture["cfg"], "a", str(tmp_path / "out"))
    finally:
        log.setup_logging(stream=io.StringIO())
    ends = [json.loads(line) for line in stream.getvalue().splitlines() if '"stage_end"' in line]
    assert [e["stage"] for e in ends] == ["read", "lists", "predictions", "ratings", "sampled", "write"]
    assert all(e["status"] == "ok" and e["seconds"] >= 0 for e in ends)
