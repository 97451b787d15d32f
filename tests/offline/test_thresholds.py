"""Threshold classification metrics of an offline prediction run (offline.thresholds): accuracy, precision, recall
and F_alpha at k null with the threshold in the metrics table's ``threshold`` column, the ``confusion`` table, by
hand on a tiny run and against scikit-learn and an independent delta method on a generated one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.sklearn_thresholds import assert_rows_match_scikit_learn
from scipy import stats

from recsys_spark.config import load_config
from recsys_spark.schema import CONFUSION_DDL, METRICS_DDL

pytestmark = pytest.mark.spark

#: three users, four predictions each (the scores 0.5 and 0.95 test score >= t at the threshold itself)
TINY = pd.DataFrame(
    {
        "user_id": ["u1"] * 4 + ["u2"] * 4 + ["u3"] * 4,
        "item_id": list("abcdabcdabcd"),
        "score": [0.9, 0.2, 0.6, 0.4, 0.3, 0.8, 0.5, 0.1, 0.7, 0.6, 0.2, 0.9],
        "label": [1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0],
    }
)


def run(spark, root, name, frame, extra=()):
    from recsys_spark.offline.run import run_offline

    path = root / f"predictions_{name}"
    spark.createDataFrame(frame).repartition(2).write.mode("overwrite").parquet(str(path))
    cfg = load_config(None, [f"offline.predictions={path}", *extra])
    summary = run_offline(spark, cfg, name, str(root / "out"))
    read = lambda table: spark.read.parquet(str(root / "out" / "offline" / table / f"run={name}"))  # noqa: E731
    confusion = read("confusion")
    assert confusion.schema.simpleString() == spark.createDataFrame([], CONFUSION_DDL).schema.simpleString()
    assert read("metrics").schema.simpleString() == spark.createDataFrame([], METRICS_DDL).schema.simpleString()
    return summary, read("metrics").toPandas(), confusion.toPandas(), read("user_metrics").toPandas()


def at(metrics: pd.DataFrame, threshold: float) -> dict[str, pd.Series]:
    rows = metrics[metrics["threshold"] == threshold]
    assert (rows["k"].isna()).all() and set(rows["aggregation"]) == {"global"} and set(rows["slice"]) == {"all"}
    assert rows["metric"].is_unique
    return {r["metric"]: r for _, r in rows.iterrows()}


@pytest.fixture(scope="module")
def tiny(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("thresholds")
    extra = ["offline.thresholds=[0.95, 0.5]", "metrics.f_alphas=[0.5, 1.0]"]
    return run(spark, root, "tiny", TINY, extra)


def test_by_hand_at_two_thresholds(tiny):
    summary, metrics, confusion, _ = tiny
    # at 0.5 (score >= 0.5 is positive): u1 tp fp tn fn = 1 1 1 1 (0.9+, 0.6-, 0.2-, 0.4+); u2 2 0 2 0 (0.8+, 0.5+
    # at the threshold itself); u3 1 2 1 0 (0.7+, 0.6-, 0.9-, 0.2-): tp 4, fp 3, tn 4, fn 1 over 12
    m = at(metrics, 0.5)
    assert m["accuracy"]["value"] == pytest.approx(8 / 12)
    assert m["precision"]["value"] == pytest.approx(4 / 7)
    assert m["recall"]["value"] == pytest.approx(4 / 5)
    assert m["f1"]["value"] == pytest.approx(2 * 4 / (2 * 4 + 1 + 3))  # 2/3
    assert m["f0.5"]["value"] == pytest.approx(1.25 * 4 / (1.25 * 4 + 0.25 * 1 + 3))
    assert {r["n"] for r in m.values()} == {3}  # the users, the unit of the interval
    assert {r["ci_method"] for r in m.values()} == {"delta"}
    # at 0.95 nothing is predicted positive: precision undefined (no row), recall and F 0 (5 positives missed)
    m = at(metrics, 0.95)
    assert set(m) == {"accuracy", "recall", "f1", "f0.5"}
    assert m["accuracy"]["value"] == pytest.approx(7 / 12)
    assert m["recall"]["value"] == 0.0 and m["f1"]["value"] == 0.0 and m["f0.5"]["value"] == 0.0
    got = confusion.sort_values("threshold").to_dict("records")
    assert got == [
        {"slice": "all", "threshold": 0.5, "tp": 4, "fp": 3, "tn": 4, "fn": 1},
        {"slice": "all", "threshold": 0.95, "tp": 0, "fp": 0, "tn": 7, "fn": 5},
    ]
    assert "confusion" in summary["tables"]


def test_every_other_row_has_a_null_threshold(tiny):
    _, metrics, _, _ = tiny
    others = metrics[~metrics["metric"].isin(["accuracy", "precision", "recall", "f1", "f0.5"])]
    assert len(others) and others["threshold"].isna().all()
    assert {"auc", "logloss", "pcoc"} <= set(others["metric"])


def test_the_user_metrics_table_holds_the_counts_per_threshold_index(tiny):
    # thresholds sorted: t0 = 0.5, t1 = 0.95; counts are long columns, which offline-compare leaves out
    _, _, _, users = tiny
    u2 = users.set_index("user_id").loc["u2"]
    assert [u2[f"{c}_t0"] for c in ("tp", "fp", "tn", "fn")] == [2, 0, 2, 0]
    assert [u2[f"{c}_t1"] for c in ("tp", "fp", "tn", "fn")] == [0, 0, 2, 2]
    assert str(users["tp_t0"].dtype) == "int64"


def test_no_thresholds_no_rows_no_table(spark, tmp_path):
    from recsys_spark.offline.run import run_offline

    path = tmp_path / "p"
    spark.createDataFrame(TINY).write.parquet(str(path))
    cfg = load_config(None, [f"offline.predictions={path}", "offline.thresholds=[]"])
    summary = run_offline(spark, cfg, "none", str(tmp_path / "out"))
    metrics = spark.read.parquet(str(tmp_path / "out" / "offline" / "metrics" / "run=none")).toPandas()
    assert metrics["threshold"].isna().all() and "accuracy" not in set(metrics["metric"])
    assert "confusion" not in summary["tables"]
    assert not (tmp_path / "out" / "offline" / "confusion").exists()


def generated(seed: int = 7, users: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 15, users)
    user = np.repeat([f"u{i}" for i in range(users)], sizes)
    score = rng.random(len(user)).round(3)  # ties, and scores on the thresholds
    label = (rng.random(len(user)) < 0.3 + 0.4 * score).astype(int)
    return pd.DataFrame(
        {"user_id": user, "item_id": [f"i{j}" for j in range(len(user))], "score": score, "label": label}
    )


@pytest.fixture(scope="module")
def gen(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("thresholds_gen")
    frame = generated()
    extra = ["offline.thresholds=[0.3, 0.5, 0.7]", "metrics.f_alphas=[0.5, 1.0, 2.0]"]
    return frame, run(spark, root, "gen", frame, extra)


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7])
def test_generated_predictions_match_scikit_learn(gen, threshold):
    frame, (_, metrics, confusion, _) = gen
    y, pred = frame["label"].to_numpy(), (frame["score"] >= threshold).to_numpy()
    assert_rows_match_scikit_learn(at(metrics, threshold), y, pred, alphas=(0.5, 2.0))
    c = confusion[confusion["threshold"] == threshold].iloc[0]
    assert (c["tp"], c["fp"]) == (int((pred & (y > 0)).sum()), int((pred & (y == 0)).sum()))
    assert c["tp"] + c["fp"] + c["tn"] + c["fn"] == len(frame)


@pytest.mark.parametrize("threshold", [0.3, 0.7])
def test_the_interval_is_the_delta_method_over_users(gen, threshold):
    frame, (_, metrics, _, _) = gen
    f = frame.assign(pred=frame["score"] >= threshold, pos=frame["label"] > 0)
    per_user = f.groupby("user_id").agg(
        tp=("pred", lambda s: int((s & f.loc[s.index, "pos"]).sum())),
        fp=("pred", lambda s: int((s & ~f.loc[s.index, "pos"]).sum())),
        fn=("pred", lambda s: int((~s & f.loc[s.index, "pos"]).sum())),
        n=("pred", "size"),
    )
    tp, fp, fn = per_user["tp"], per_user["fp"], per_user["fn"]
    m = at(metrics, threshold)
    z = stats.norm.ppf(0.975)
    for name, x, yy in (("precision", tp, tp + fp), ("recall", tp, tp + fn), ("f1", 2 * tp, 2 * tp + fn + fp)):
        x, yy = x.to_numpy(float), yy.to_numpy(float)
        n, ratio = len(x), x.sum() / yy.sum()
        cov = np.cov(x, yy, ddof=1)
        se = np.sqrt((cov[0, 0] - 2 * ratio * cov[0, 1] + ratio**2 * cov[1, 1]) / (n * yy.mean() ** 2))
        assert m[name]["value"] == pytest.approx(ratio, abs=1e-12)
        assert m[name]["se"] == pytest.approx(se, rel=1e-9)
        assert (m[name]["ci_low"], m[name]["ci_high"]) == pytest.approx((ratio - z * se, ratio + z * se), rel=1e-9)
        assert m[name]["n"] == n
