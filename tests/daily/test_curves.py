"""The daily job's roc_curve and pr_curve on a generated day: scikit-learn's points per slice (all, and the hour
slice), the trapezoid area equal to auc_global, and the subset above metrics.curve_points."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from helpers.input_ddl import CLICK_DDL, DAY, EXPOSURE_DDL
from sklearn.metrics import precision_recall_curve, roc_curve

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.kernels.curves import area_bound, trapezoid_area

pytestmark = pytest.mark.spark

SETTINGS = ["metrics.k=[1, 3]", "rules.fail_on_hard=false", 'slices.names=["hour"]']


def generated_day(seed: int = 7, users: int = 120):
    """Lists of 2-6 distinct items per request at 10:00 or 15:00, scores rounded to 0.01 (ties), a click one
    minute after some exposures (more likely for higher scores): every row's label is known."""
    rng = np.random.default_rng(seed)
    exposures, clicks, truth = [], [], []
    for u in range(users):
        for r in range(int(rng.integers(1, 4))):
            request = f"r{u}-{r}"
            at = dt.datetime(2026, 11, 20, int(rng.choice([10, 15])), int(rng.integers(0, 50)))
            items = rng.choice(60, size=int(rng.integers(2, 7)), replace=False)
            for position, item in enumerate(items, start=1):
                score = float(np.round(rng.random(), 2))
                clicked = rng.random() < 0.1 + 0.3 * score
                exposures.append((f"u{u}", f"s{u}", request, f"i{item}", position, score, at))
                truth.append((f"{at.hour:02d}", score, int(clicked)))
                if clicked:
                    clicks.append((f"u{u}", f"s{u}", request, f"i{item}", at + dt.timedelta(minutes=1)))
    return exposures, clicks, pd.DataFrame(truth, columns=["hour", "score", "clicked"])


@pytest.fixture(scope="module")
def day(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("curves")
    exposures, clicks, truth = generated_day()
    spark.createDataFrame(exposures, EXPOSURE_DDL).write.parquet(f"{root}/in/exposures/dt={DAY}")
    spark.createDataFrame(clicks, CLICK_DDL).write.parquet(f"{root}/in/clicks/dt={DAY}")
    return root, truth


def read(spark, path):
    return spark.read.parquet(path).toPandas()


def test_the_days_curves_are_scikit_learns_per_slice_and_their_area_is_auc_global(spark, day):
    root, truth = day
    summary = evaluate_day(spark, load_config(None, SETTINGS), DAY, f"{root}/in", f"{root}/out")
    roc = read(spark, f"{root}/out/roc_curve/dt={DAY}")
    pr = read(spark, f"{root}/out/pr_curve/dt={DAY}")
    metrics = read(spark, f"{root}/out/metrics/dt={DAY}")
    assert set(roc["slice"]) == {"all", "hour=10", "hour=15"} == set(pr["slice"])
    for name in ("all", "hour=10", "hour=15"):
        rows = truth if name == "all" else truth[truth["hour"] == name.split("=")[1]]
        fpr, tpr, thr = roc_curve(rows["clicked"], rows["score"])
        got = roc[roc["slice"] == name]  # written in curve order
        np.testing.assert_array_equal(got["fpr"], fpr)
        np.testing.assert_array_equal(got["tpr"], tpr)
        assert got["threshold"].isna().tolist() == [True] + [False] * (len(thr) - 1)
        np.testing.assert_array_equal(got["threshold"].iloc[1:], thr[1:])
        precision, recall, pthr = precision_recall_curve(rows["clicked"], rows["score"])
        got_pr = pr[pr["slice"] == name]
        np.testing.assert_allclose(got_pr["precision"], precision, atol=1e-15)
        np.testing.assert_array_equal(got_pr["recall"], recall)
        np.testing.assert_array_equal(got_pr["threshold"].iloc[:-1], pthr)
        auc = metrics[(metrics.metric == "auc") & (metrics.aggregation == "global") & (metrics.slice == name)]
        assert trapezoid_area(got["fpr"], got["tpr"]) == pytest.approx(auc["value"].item(), abs=1e-12)
    assert not any("roc_curve" in note for note in summary["notes"])


def test_above_the_bound_the_day_writes_true_points_and_a_note(spark, day, tmp_path):
    root, truth = day
    bound = 21  # the day has about 100 distinct scores
    summary = evaluate_day(
        spark, load_config(None, [*SETTINGS, f"metrics.curve_points={bound}"]), DAY, f"{root}/in", f"{tmp_path}/out"
    )
    roc = read(spark, f"{tmp_path}/out/roc_curve/dt={DAY}")
    pr = read(spark, f"{tmp_path}/out/pr_curve/dt={DAY}")
    fpr, tpr, thr = roc_curve(truth["clicked"], truth["score"])
    exact = set(zip(thr[1:], fpr[1:], tpr[1:], strict=True))
    got = roc[roc["slice"] == "all"]
    assert 3 <= len(got) <= bound
    assert set(zip(got["threshold"].iloc[1:], got["fpr"].iloc[1:], got["tpr"].iloc[1:], strict=True)) <= exact
    precision, recall, pthr = precision_recall_curve(truth["clicked"], truth["score"])
    exact_pr = {(t, r, round(p, 12)) for t, r, p in zip(pthr, recall[:-1], precision[:-1], strict=True)}
    got_pr = pr[pr["slice"] == "all"].iloc[:-1]
    assert len(got_pr) < bound
    points = zip(got_pr.threshold, got_pr.recall, got_pr.precision, strict=True)
    assert {(t, r, round(p, 12)) for t, r, p in points} <= exact_pr
    auc = trapezoid_area(fpr, tpr)
    assert abs(trapezoid_area(got["fpr"], got["tpr"]) - auc) <= area_bound(bound)
    assert any("metrics.curve_points 21" in note and "slice all" in note for note in summary["notes"])


def test_no_curves_without_a_score_column_or_with_curve_points_0(spark, day, tmp_path):
    root, _ = day
    cfg = load_config(None, [*SETTINGS, "metrics.curve_points=0"])
    evaluate_day(spark, cfg, DAY, f"{root}/in", f"{tmp_path}/off")
    assert not (tmp_path / "off" / "roc_curve").exists() and not (tmp_path / "off" / "pr_curve").exists()
    spark.read.parquet(f"{root}/in/exposures/dt={DAY}").drop("score").write.parquet(f"{tmp_path}/in/exposures/dt={DAY}")
    spark.read.parquet(f"{root}/in/clicks/dt={DAY}").write.parquet(f"{tmp_path}/in/clicks/dt={DAY}")
    summary = evaluate_day(spark, load_config(None, SETTINGS), DAY, f"{tmp_path}/in", f"{tmp_path}/noscore")
    assert not (tmp_path / "noscore" / "roc_curve").exists()
    assert "roc_curve and pr_curve not written: the exposures have no score column" in summary["notes"]
