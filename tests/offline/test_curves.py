"""The curves of an offline prediction run on the real Open Bandit sample (tests/golden/): its clicks as labels,
the Bernoulli TS candidate's q_hat of the shown (item, position) as the score (many ties), against
scikit-learn, exact under metrics.curve_points and a subset of true points above it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.obp_golden import obd_logged, obd_target
from sklearn.metrics import precision_recall_curve, roc_auc_score, roc_curve

from recsys_spark.config import load_config
from recsys_spark.kernels.curves import area_bound, trapezoid_area

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def sample(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("obd_curves")
    logged = obd_logged()
    q = obd_target("bts").set_index(["item", "position"])["q_hat"]
    score = q.reindex(list(zip(logged["item"], logged["position"], strict=True))).fillna(0.0).to_numpy()
    frame = pd.DataFrame(
        {
            "user_id": logged["round"].astype(str),
            "item_id": logged["item"].astype(str),
            "score": score,
            "label": logged["click"],
        }
    )
    spark.createDataFrame(frame).repartition(3).write.parquet(str(root / "predictions"))
    return root, frame


def run(spark, root, name, extra=()):
    from recsys_spark.offline.run import run_offline

    cfg = load_config(None, [f"offline.predictions={root}/predictions", *extra])
    summary = run_offline(spark, cfg, name, str(root / "out"))
    read = lambda table: spark.read.parquet(str(root / "out" / "offline" / table / f"run={name}")).toPandas()  # noqa: E731
    return summary, read("roc_curve"), read("pr_curve"), read("metrics")


def test_the_open_bandit_samples_curves_are_scikit_learns(spark, sample):
    root, frame = sample
    _, roc, pr, metrics = run(spark, root, "exact")
    fpr, tpr, thr = roc_curve(frame["label"], frame["score"])
    np.testing.assert_array_equal(roc["fpr"], fpr)
    np.testing.assert_array_equal(roc["tpr"], tpr)
    np.testing.assert_array_equal(roc["threshold"].iloc[1:], thr[1:])
    precision, recall, pthr = precision_recall_curve(frame["label"], frame["score"])
    np.testing.assert_allclose(pr["precision"], precision, atol=1e-15)
    np.testing.assert_array_equal(pr["recall"], recall)
    np.testing.assert_array_equal(pr["threshold"].iloc[:-1], pthr)
    auc = metrics[(metrics.metric == "auc") & (metrics.aggregation == "global")]["value"].item()
    assert auc == pytest.approx(roc_auc_score(frame["label"], frame["score"]), abs=1e-12)
    assert trapezoid_area(roc["fpr"], roc["tpr"]) == pytest.approx(auc, abs=1e-12)


def test_above_the_bound_the_run_writes_true_points_within_the_area_bound(spark, sample):
    root, frame = sample
    bound = 9  # fewer than the sample's distinct q_hat values
    summary, roc, pr, _ = run(spark, root, "subset", [f"metrics.curve_points={bound}"])
    assert len(roc) <= bound and len(pr) <= bound
    fpr, tpr, thr = roc_curve(frame["label"], frame["score"])
    assert set(zip(roc["threshold"].iloc[1:], roc["fpr"].iloc[1:], roc["tpr"].iloc[1:], strict=True)) <= set(
        zip(thr[1:], fpr[1:], tpr[1:], strict=True)
    )
    precision, recall, pthr = precision_recall_curve(frame["label"], frame["score"])
    exact_pr = {(t, r, round(p, 12)) for t, r, p in zip(pthr, recall[:-1], precision[:-1], strict=True)}
    points = zip(pr["threshold"].iloc[:-1], pr["recall"].iloc[:-1], pr["precision"].iloc[:-1], strict=True)
    assert {(t, r, round(p, 12)) for t, r, p in points} <= exact_pr
    exact = roc_auc_score(frame["label"], frame["score"])
    assert abs(trapezoid_area(roc["fpr"], roc["tpr"]) - exact) <= area_bound(bound)
    assert any("predictions: slice all has" in note for note in summary["notes"]), summary["notes"]
