"""Issue 43 item 7: the report's regression takes x from offline runs named MODEL.YYYY-MM-DD, predicts a
candidate run's business metric with the interval of a new observation, and the train/test/online AUC
table reads the runs' AUC directly (no separate table).  A hand-written output root (pyarrow, no Spark)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import report_fixture as fx
from helpers.report_page import parse

from recsys_spark.config import load_config
from recsys_spark.kernels.regression import fit_line, predict
from recsys_spark.report import load_range, render_html

START, END = dt.date.fromisoformat(fx.START), dt.date.fromisoformat(fx.END)
#: model m2's offline AUC (global) per day: its test runs, and one train run
TEST_AUC = {"2026-11-02": 0.70, "2026-11-03": 0.74, "2026-11-05": 0.71}
TRAIN_AUC = {"2026-11-03": 0.86}
CANDIDATE_AUC = 0.76


def _run(root: Path, name: str, auc: float) -> None:
    frame = fx.offline_metric_rows(0.0)
    frame.loc[frame["metric"] == "auc", "value"] = auc
    fx._write(frame, root / "offline" / "metrics" / f"run={name}", fx.OFFLINE_METRICS_SCHEMA)
    summary = root / "offline" / "summary" / f"run={name}"
    summary.mkdir(parents=True)
    (summary / "summary.json").write_text(json.dumps({"run": name, "evaluations": ["predictions"], "notes": []}))
    (summary / "_SUCCESS").write_text("")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    out = fx.build_root(tmp_path_factory.mktemp("out"), experiments=False, ope=False)
    for day, auc in TEST_AUC.items():
        _run(out, f"m2.{day}", auc)
    for day, auc in TRAIN_AUC.items():
        _run(out, f"m2.train.{day}", auc)
    _run(out, "m2.2026-10-01", 0.99)  # a day outside the range: not a point
    _run(out, "m3", CANDIDATE_AUC)  # the candidate: no day
    return out


SETTINGS = (
    "report.regression_model=m2",
    "report.regression_candidate=m3",
    "report.regression_x=auc_global",
    "report.min_regression_days=3",
)


def render(root: Path, overrides=SETTINGS) -> str:
    data, context = load_range(str(root), START, END, "")
    return render_html(data, context, load_config(None, list(overrides)).report)


def _uv_ctr(root: Path, day: str) -> float:
    frame = pd.read_parquet(root / "metrics" / f"dt={day}")
    row = frame[(frame.metric == "uv_ctr") & (frame.aggregation == "global") & (frame.slice == "all")]
    return float(row["value"].iloc[0])


def test_the_regression_reads_x_from_the_models_runs_and_predicts_the_candidate(root):
    html = render(root)
    data = parse(html).data["data-regression"]
    days = list(TEST_AUC)
    ys = [_uv_ctr(root, d) for d in days]
    assert data["dt"] == days and data["x_values"] == list(TEST_AUC.values()) and data["y_values"] == ys
    expected = predict(fit_line(list(TEST_AUC.values()), ys, level=0.95), CANDIDATE_AUC)
    got = data["prediction"]
    assert (got["candidate"], got["x"], got["n"], got["note"]) == ("m3", CANDIDATE_AUC, 3, "")
    assert (got["y"], got["low"], got["high"]) == pytest.approx((expected.y, expected.low, expected.high))
    assert got["low"] < got["y"] < got["high"]
    assert 'id="regression-prediction"' in html and "offline runs <code>m2.YYYY-MM-DD</code>" in html


def test_too_few_days_or_no_offline_x_gives_no_prediction_and_says_why(root):
    few = parse(render(root, (*SETTINGS, "report.min_regression_days=4"))).data["data-regression"]["prediction"]
    assert few["y"] is None and few["note"].startswith("too few days: 3 with both values, at least 4")
    online = [s for s in SETTINGS if "regression_model" not in s]
    html = render(root, tuple(online))
    mixed = parse(html).data["data-regression"]["prediction"]
    assert mixed["y"] is None and "set report.regression_model" in mixed["note"]
    missing = parse(render(root, (*SETTINGS[:1], "report.regression_candidate=nope"))).data["data-regression"]
    assert "no complete offline run nope" in missing["prediction"]["note"]
    assert parse(render(root, ())).data["data-regression"]["prediction"] is None  # no candidate: nothing


def test_the_auc_diagnosis_reads_the_runs_auc_without_a_table(root):
    html = render(root, ())
    data = parse(html).data["data-offline-auc"]
    rows = {(r["dt"], r["model"]): r for r in data["table"]}
    assert set(rows) == {(d, "m2") for d in TEST_AUC}  # 2026-10-01 is outside the range
    assert rows[("2026-11-03", "m2")]["train"] == 0.86 and rows[("2026-11-03", "m2")]["test"] == 0.74
    assert rows[("2026-11-03", "m2")]["diagnosis"] == ["overfitting (train much higher than test)"]
    assert 'id="no-offline-auc"' not in html and "AUC value(s) from the offline runs" in html


@pytest.mark.parametrize("key", ["report.regression_model", "report.regression_candidate"])
def test_a_run_name_that_is_not_a_name_is_refused_naming_the_key(key):
    from recsys_spark.errors import ConfigError

    with pytest.raises(ConfigError, match=f"config key {key} '../x': expected a name"):
        load_config(None, [f"{key}=../x"])
