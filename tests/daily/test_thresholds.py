"""The daily threshold metrics (metrics.score_is_probability): accuracy, precision, recall and F_alpha of the day's
scored exposures at each of metrics.thresholds with the ``threshold`` column, and the ``confusion`` table, against
scikit-learn and an independent delta method over users; nothing of it on a default day."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.input_ddl import CLICK_DDL, DAY, EXPOSURE_DDL, T0
from helpers.sklearn_thresholds import assert_rows_match_scikit_learn
from scipy import stats
from sklearn.metrics import confusion_matrix

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day

pytestmark = pytest.mark.spark


def day_rows(seed: int = 3, users: int = 150):
    """One request per user of 1 to 8 distinct items, scores in [0, 1] rounded (ties, scores on the thresholds),
    one score of 1.2 (outside [0, 1], kept), clicks by request; and the truth as a frame (user, score, label)."""
    rng = np.random.default_rng(seed)
    exposures, clicks, truth = [], [], []
    for u in range(users):
        for p in range(int(rng.integers(1, 9))):
            score = 1.2 if (u, p) == (0, 0) else round(float(rng.random()), 2)
            item = f"i{int(rng.integers(0, 10_000))}_{p}"
            ts = T0 + dt.timedelta(minutes=u % 50)
            exposures.append((f"u{u}", f"s{u}", f"r{u}", item, p + 1, score, ts))
            clicked = rng.random() < 0.15 + 0.5 * min(score, 1.0)
            if clicked:
                clicks.append((f"u{u}", f"s{u}", f"r{u}", item, ts + dt.timedelta(minutes=1)))
            truth.append((f"u{u}", score, int(clicked)))
    return exposures, clicks, pd.DataFrame(truth, columns=["user_id", "score", "label"])


def run_day(spark, root, settings):
    exposures, clicks, truth = day_rows()
    spark.createDataFrame(exposures, EXPOSURE_DDL).write.mode("overwrite").parquet(f"{root}/in/exposures/dt={DAY}")
    spark.createDataFrame(clicks, CLICK_DDL).write.mode("overwrite").parquet(f"{root}/in/clicks/dt={DAY}")
    cfg = load_config(None, ["metrics.k=[3]", "rules.fail_on_hard=false", *settings])
    summary = evaluate_day(spark, cfg, DAY, f"{root}/in", f"{root}/out")
    metrics = spark.read.parquet(f"{root}/out/metrics").toPandas()
    return summary, metrics, truth


@pytest.fixture(scope="module")
def probability_day(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("daily_thresholds")
    settings = ["metrics.score_is_probability=true", "metrics.thresholds=[0.5, 0.3]", "metrics.f_alphas=[1.0, 2.0]"]
    summary, metrics, truth = run_day(spark, root, settings)
    confusion = spark.read.parquet(f"{root}/out/confusion").toPandas()
    return summary, metrics, confusion, truth, root


def at(metrics: pd.DataFrame, threshold: float) -> dict[str, pd.Series]:
    rows = metrics[(metrics["threshold"] == threshold) & (metrics["slice"] == "all")]
    assert rows["k"].isna().all() and set(rows["aggregation"]) == {"global"} and rows["metric"].is_unique
    return {r["metric"]: r for _, r in rows.iterrows()}


@pytest.mark.parametrize("threshold", [0.3, 0.5])
def test_the_day_at_each_threshold_matches_scikit_learn(probability_day, threshold):
    _, metrics, confusion, truth, _ = probability_day
    y, pred = truth["label"].to_numpy(), (truth["score"] >= threshold).to_numpy()
    assert_rows_match_scikit_learn(at(metrics, threshold), y, pred, alphas=(2.0,))
    tn, fp, fn, tp = confusion_matrix(y, pred).ravel()
    row = confusion[(confusion["threshold"] == threshold) & (confusion["slice"] == "all")].iloc[0]
    assert (row["tp"], row["fp"], row["tn"], row["fn"]) == (tp, fp, tn, fn)


def test_the_interval_is_the_delta_method_with_the_user_as_the_unit(probability_day):
    _, metrics, _, truth, _ = probability_day
    f = truth.assign(pred=truth["score"] >= 0.5, pos=truth["label"] > 0)
    per_user = f.assign(tp=f["pred"] & f["pos"], fp=f["pred"] & ~f["pos"]).groupby("user_id")[["tp", "fp"]].sum()
    x, y = per_user["tp"].to_numpy(float), (per_user["tp"] + per_user["fp"]).to_numpy(float)
    n, ratio = len(x), x.sum() / y.sum()
    cov = np.cov(x, y, ddof=1)
    se = np.sqrt((cov[0, 0] - 2 * ratio * cov[0, 1] + ratio**2 * cov[1, 1]) / (n * y.mean() ** 2))
    z = stats.norm.ppf(0.975)
    m = at(metrics, 0.5)["precision"]
    assert m["value"] == pytest.approx(ratio, abs=1e-12) and m["n"] == n == truth["user_id"].nunique()
    assert m["se"] == pytest.approx(se, rel=1e-9) and m["ci_method"] == "delta"
    assert (m["ci_low"], m["ci_high"]) == pytest.approx((ratio - z * se, ratio + z * se), rel=1e-9)


def test_a_score_outside_0_1_is_kept_and_said(probability_day):
    summary, metrics, _, _, _ = probability_day
    notes = " ".join(summary["notes"])
    assert "1 scored exposures have a score outside [0, 1]" in notes
    others = metrics[metrics["threshold"].isna()]
    assert len(others) and not others["metric"].isin(["accuracy"]).any()


def test_a_default_day_writes_no_threshold_row_and_no_confusion_table(spark, tmp_path):
    summary, metrics, _ = run_day(spark, tmp_path, [])
    assert metrics["threshold"].isna().all() and "accuracy" not in set(metrics["metric"])
    assert not (tmp_path / "out" / "confusion").exists()
    assert not any("outside [0, 1]" in n for n in summary["notes"])


def test_the_report_shows_the_day_at_its_thresholds_and_a_default_day_shows_none(probability_day, spark, tmp_path):
    from recsys_spark.report import write_report

    _, _, confusion, _, root = probability_day
    page = Path(write_report(f"{root}/out", DAY, DAY, load_config(None, []), out=str(tmp_path / "r.html")))
    html = page.read_text(encoding="utf-8")
    table = html[html.index('id="daily-thresholds-table"') :]
    table = table[: table.index("</table>")]
    row = confusion[(confusion["slice"] == "all") & (confusion["threshold"] == 0.5)].iloc[0]
    assert f"<td>all</td><td>0.5</td><td>{row['tp']}</td><td>{row['fp']}</td>" in table
    assert "<th>accuracy</th><th>precision</th><th>recall</th><th>f1</th><th>f2</th>" in table
    run_day(spark, tmp_path / "plain", [])
    plain = write_report(f"{tmp_path}/plain/out", DAY, DAY, load_config(None, []), out=str(tmp_path / "p.html"))
    assert 'id="daily-thresholds-table"' not in Path(plain).read_text(encoding="utf-8")
