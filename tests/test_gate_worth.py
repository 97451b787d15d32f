"""Issue 43 item 7: an offline gate shows what the candidate's offline win is worth beside its checks (the
regression of the days' online business metric on the model's offline runs of those days), as information
in verdict.json and a second printed line: the state is the checks' alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_gate import METRICS_SCHEMA, NDCG_GAIN, OFFLINE, _config, _write, offline_outputs

from recsys_spark.config import load_config
from recsys_spark.kernels.regression import fit_line, predict

#: model m2's test AUC of each day and the day's online UV CTR (the daily metrics table); 11-04 has no run
DAYS = {"2026-11-01": (0.70, 0.040), "2026-11-02": (0.72, 0.043), "2026-11-03": (0.71, 0.041)}
DAYS |= {"2026-11-05": (0.74, 0.047), "2026-11-06": (0.73, 0.044)}
CANDIDATE_AUC = 0.76


def _row(metric: str, aggregation: str, value: float) -> dict:
    return dict(metric=metric, k=None, aggregation=aggregation, slice="all", value=value, n=100)


def worth_outputs(out: Path) -> None:
    offline_outputs(out)  # base, candidate and their comparison
    for day, (auc, ctr) in DAYS.items():
        run = out / "offline" / "metrics" / f"run=m2.{day}"
        _write(run, [_row("auc", "global", auc)], METRICS_SCHEMA)
        (out / "offline" / "summary" / f"run=m2.{day}").mkdir(parents=True)
        (out / "offline" / "summary" / f"run=m2.{day}" / "_SUCCESS").write_text("")
        _write(out / "metrics" / f"dt={day}", [_row("uv_ctr", "global", ctr)], METRICS_SCHEMA)
        (out / "summary" / f"dt={day}").mkdir(parents=True)
        (out / "summary" / f"dt={day}" / "_SUCCESS").write_text("")
    _write(out / "metrics" / "dt=2026-11-04", [_row("uv_ctr", "global", 0.9)], METRICS_SCHEMA)  # no run that day
    (out / "summary" / "dt=2026-11-04").mkdir(parents=True)
    (out / "summary" / "dt=2026-11-04" / "_SUCCESS").write_text("")
    _write(out / "offline" / "metrics" / "run=m2.2026-11-07", [_row("auc", "global", 0.99)], METRICS_SCHEMA)
    (out / "offline" / "summary" / "run=m2.2026-11-07").mkdir(parents=True)  # no daily output that day
    (out / "offline" / "summary" / "run=m2.2026-11-07" / "_SUCCESS").write_text("")
    # the candidate's offline AUC
    path = out / "offline" / "metrics" / "run=candidate"
    for part in path.iterdir():
        part.unlink()
    _write(path, [_row("auc", "global", CANDIDATE_AUC)], METRICS_SCHEMA)


@pytest.mark.spark
def test_the_offline_gate_shows_the_candidates_predicted_business_metric_beside_its_checks(spark, tmp_path):
    from recsys_spark.gate import run_gate

    out = tmp_path / "out"
    worth_outputs(out)
    settings = ["report.regression_model=m2", "report.regression_x=auc_global", "report.min_regression_days=4"]
    gate_config = _config(tmp_path, OFFLINE, [NDCG_GAIN + '\non = "point"'])
    verdict = run_gate(spark, load_config(gate_config, settings), "cand", str(out))
    written = json.loads((out / "gate" / "cand" / "verdict.json").read_text())
    worth = written["worth"]
    xs, ys = [v[0] for v in DAYS.values()], [v[1] for v in DAYS.values()]
    expected = predict(fit_line(xs, ys), CANDIDATE_AUC)
    assert worth["days"] == list(DAYS) and worth["n"] == 5 and worth["x"] == CANDIDATE_AUC
    assert (worth["y"], worth["low"], worth["high"]) == pytest.approx((expected.y, expected.low, expected.high))
    assert worth["line"].startswith("worth (information, decides nothing): uv_ctr_global of candidate predicted")
    assert written["state"] == verdict["state"] == "passed"  # the checks alone
    # too few days for report.min_regression_days: no number, the reason; still no effect on the state
    few = run_gate(spark, load_config(gate_config, [*settings[:2], "report.min_regression_days=6"]), "cand", str(out))
    assert few["worth"]["y"] is None and "too few days: 5" in few["worth"]["line"] and few["state"] == "passed"
    # without report.regression_model: nothing shown
    assert run_gate(spark, load_config(gate_config), "cand", str(out))["worth"] is None
