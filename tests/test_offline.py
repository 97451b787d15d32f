"""The offline job end to end on a tiny fixture: the same numbers through the kernels and through Spark."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

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
        "health.lorenz_points=3",
    ]
    cfg = load_config(None, overrides)
    from recsys_spark.offline.pipeline import run_offline

    out = root / "out"
    summaries = {run: run_offline(spark, cfg, run, str(out)) for run in ("a", "b")}
    return {"root": root, "out": out, "cfg": cfg, "summaries": summaries}


def metrics(spark, fixture, run="a") -> dict:
    rows = spark.read.parquet(str(fixture["out"] / "offline" / f"run={run}" / "metrics")).collect()
    return {(r["metric"], r["k"], r["aggregation"]): r for r in rows}


def users(spark, fixture, run="a") -> pd.DataFrame:
    return (
        spark.read.parquet(str(fixture["out"] / "offline" / f"run={run}" / "user_metrics"))
        .toPandas()
        .set_index("user_id")
        .sort_index()
    )


def test_output_layout_and_summary(fixture):
    run_dir = fixture["out"] / "offline" / "run=a"
    assert {p.name for p in run_dir.iterdir()} >= {
        "metrics",
        "user_metrics",
        "lorenz",
        "calibration",
        "summary.json",
        "_SUCCESS",
    }
    assert not (fixture["out"] / "offline" / "_staging").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
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
    # system-centric: hits 1 + 1 + 0 over list sizes 2 + 2 + 0, and over truth sizes 2 + 1 + 1
    assert m[("precision", 2, "global")]["value"] == pytest.approx(2 / 4)
    assert m[("recall", 2, "global")]["value"] == pytest.approx(2 / 4)
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
        "diversity",
    ):
        np.testing.assert_allclose(got.loc[want.index, col].to_numpy(float), want[col].to_numpy(float), err_msg=col)
    # novelty: self-information log2((U + 1) / (k + 1)) with U = 2 train users; a, b, d, e untouched in train
    assert got.loc["u1", "novelty"] == pytest.approx(math.log2(3))
    # serendipity: u1's hit b (category A) is new to u1 (train c is B): 1 of 2 items
    assert got.loc["u1", "serendipity"] == pytest.approx(1 / 2)
    # u2's train x is category A; its hit e is C: new
    assert got.loc["u2", "serendipity"] == pytest.approx(1 / 2)


def test_predictions(spark, fixture):
    m = metrics(spark, fixture)
    p = pd.read_parquet(fixture["root"] / "predictions")
    assert m[("auc", None, "global")]["value"] == pytest.approx(roc_auc_score(p["label"], p["score"]))
    per_user = [roc_auc_score(g["label"], g["score"]) for u, g in p.groupby("user_id") if g["label"].nunique() == 2]
    assert m[("auc", None, "user_avg")]["value"] == pytest.approx(np.mean(per_user))
    assert m[("auc", None, "user_avg")]["n"] == 3  # every user has both classes
    assert m[("pcoc", None, "global")]["value"] == pytest.approx(p["score"].sum() / p["label"].sum())
    cal = spark.read.parquet(str(fixture["out"] / "offline" / "run=a" / "calibration")).toPandas()
    assert cal["n"].sum() == len(p)


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
    from recsys_spark.offline.pipeline import run_offline

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
    assert (fixture["out"] / "offline" / "compare" / "base=a,candidate=b" / "comparison").exists()


def test_aggregate_counts_defined_values_pairs_ratios_and_carries_a_transform_by_hand(spark):
    # the per-user table -> metrics rows step on its own, by hand: a mean over the users whose value is
    # defined (null and NaN left out), a pooled ratio over the users whose numerator and denominator are
    # both defined, and a transformed mean (the square root of a mean square, as RMSE from MSE)
    from pyspark.sql import functions as F

    from recsys_spark.kernels.stats import MeanStats, RatioStats, delta_interval, t_interval
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
    _, k, aggregation, slice_value, value, n, se, lo, hi, method = got["m"]
    assert (k, aggregation, slice_value, n, method) == (10, "user_avg", "all", 4, mean.method)
    assert (value, se, lo, hi) == pytest.approx((4.0, v.std(ddof=1) / 2, mean.ci_low, mean.ci_high), rel=1e-12)
    _, _, _, _, value, n, se, lo, hi, _ = got["r"]
    assert (value, n) == (pytest.approx(6 / 14, rel=1e-12), 3)
    assert (se, lo, hi) == pytest.approx((ratio.se, ratio.ci_low, ratio.ci_high), rel=1e-12)
    _, _, _, _, value, n, se, lo, hi, _ = got["rmse"]
    slope = (root(mean.ci_high) - root(mean.ci_low)) / (mean.ci_high - mean.ci_low)
    assert (value, lo, hi) == pytest.approx((2.0, root(mean.ci_low), root(mean.ci_high)), rel=1e-12)
    assert se == pytest.approx(mean.se * slope, rel=1e-12) and n == 4
