"""The notebook API: the daily job on DataFrames, and the MLlib Evaluator (docs/notebook.md)."""

from __future__ import annotations

import datetime as dt
import math
import re
from pathlib import Path

import numpy as np
import pytest
from helpers.days import CLICKS, DAY, EXPOSURES, day_input, run_day
from pyspark.sql import functions as F
from sklearn.metrics import ndcg_score, roc_auc_score

import recsys_spark
from recsys_spark.errors import UsageError

pytestmark = pytest.mark.spark

EXPOSURE_DDL = (
    "user_id string, session_id string, request_id string, item_id string, position int, score double, ts timestamp"
)
CLICK_DDL = "user_id string, session_id string, request_id string, item_id string, ts timestamp, event string"


def test_evaluate_on_dataframes_gives_the_tables_the_daily_job_writes(spark, tmp_path):
    day_input(tmp_path)
    written = run_day(spark, tmp_path)  # the same day, from Parquet partitions
    result = recsys_spark.evaluate(
        spark.createDataFrame(EXPOSURES, EXPOSURE_DDL),
        spark.createDataFrame(CLICKS, CLICK_DDL),
        settings=["metrics.k=[1]"],
    )
    try:
        assert result.summary["date"] == DAY.isoformat()  # the one day of the exposures' timestamps
        assert result.summary["headline"] == pytest.approx(written["headline"], nan_ok=True)
        assert result.user_metrics.count() == 3  # three users, one k
        ours = {(r.metric, r.k, r.aggregation, r.slice): r.value for r in result.metrics.collect()}
        theirs = spark.read.parquet(str(tmp_path / "out" / "metrics" / f"dt={DAY}")).collect()
        for r in theirs:
            assert ours[(r.metric, r.k, r.aggregation, r.slice)] == pytest.approx(r.value, nan_ok=True)
        assert result.value("ndcg", 1, "user_avg") == pytest.approx(2 / 3)  # u2 and u3 clicked their first item
    finally:
        result.close()
    assert not Path(result.scratch).exists()


def test_evaluate_asks_for_the_day_when_the_exposures_span_several(spark):
    later = [(*EXPOSURES[0][:-1], EXPOSURES[0][-1] + dt.timedelta(days=1))]
    with pytest.raises(UsageError, match=r"span 2026-11-20\.\.2026-11-21 .*give the day with date="):
        recsys_spark.evaluate(
            spark.createDataFrame(EXPOSURES + later, EXPOSURE_DDL), spark.createDataFrame(CLICKS, CLICK_DDL)
        )


PREDICTIONS = [  # user, item, prediction, label: u1 ranks its relevant item second, u2 first, u3 has none
    ("u1", "a", 0.9, 0.0),
    ("u1", "b", 0.7, 1.0),
    ("u1", "c", 0.2, 0.0),
    ("u2", "a", 0.8, 1.0),
    ("u2", "c", 0.1, 0.0),
    ("u3", "b", 0.5, 0.0),
]


@pytest.mark.parametrize("metric, k", [("ndcg", 2), ("ndcg", 3), ("auc", 10)])
def test_the_evaluator_is_the_mean_over_users_of_the_per_user_metric(spark, metric, k):
    frame = spark.createDataFrame(PREDICTIONS, "user string, item string, prediction double, label double")
    value = recsys_spark.RankingEvaluator(metric=metric, k=k).evaluate(frame)
    per_user = []
    for user in ("u1", "u2"):  # u3 has no relevant item: left out of the average, as the daily job does
        rows = [r for r in PREDICTIONS if r[0] == user]
        truth, score = np.array([[r[3] for r in rows]]), np.array([[r[2] for r in rows]])
        per_user.append(ndcg_score(truth, score, k=k) if metric == "ndcg" else roc_auc_score(truth[0], score[0]))
    assert value == pytest.approx(np.mean(per_user), rel=1e-12)
    assert recsys_spark.RankingEvaluator(metric=metric).isLargerBetter() is True


def test_the_evaluator_refuses_a_metric_it_does_not_have():
    with pytest.raises(ValueError, match="metric must be one of ndcg, map"):
        recsys_spark.RankingEvaluator(metric="gini")


def test_the_documented_example_runs_and_selects_a_model(spark, capsys):
    text = (Path(__file__).resolve().parents[1] / "docs" / "notebook.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, re.S)
    exec(compile(code, "docs/notebook.md", "exec"), {})  # noqa: S102 - the documented example, as a user runs it
    out = capsys.readouterr().out
    assert "0.815" in out  # the hand-checked NDCG@2
    averages = [float(x) for x in re.findall(r"\[([^\]]+)\]", out.splitlines()[-1])[0].split(",")]
    assert len(averages) == 2 and all(0.0 <= a <= 1.0 and not math.isnan(a) for a in averages)


# --- hostile inputs (issue 40, defect 8) ------------------------------------------------------------------------
@pytest.mark.parametrize("column", ["user", "item"])
def test_the_evaluator_refuses_a_null_id_naming_the_column(spark, column):
    # a null user crashed the per-user kernel with an internal IndexError
    rows = PREDICTIONS + [(None, "a", 0.3, 1.0) if column == "user" else ("u1", None, 0.3, 1.0)]
    frame = spark.createDataFrame(rows, "user string, item string, prediction double, label double")
    with pytest.raises(ValueError, match=rf"1 row\(s\) with a null {column} \({column}Col '{column}'\)"):
        recsys_spark.RankingEvaluator(metric="ndcg", k=2).evaluate(frame)
    renamed = frame.withColumnRenamed(column, "who")
    evaluator = recsys_spark.RankingEvaluator(metric="ndcg", k=2, **{f"{column}Col": "who"})
    with pytest.raises(ValueError, match=rf"null {column} \({column}Col 'who'\)"):
        evaluator.evaluate(renamed)
    with pytest.raises(ValueError, match=rf"no column '{column}' \({column}Col\) in"):
        recsys_spark.RankingEvaluator(metric="ndcg", k=2).evaluate(renamed)


def _exposures_with_ts(spark, ts_type: str, value):
    rows = [(*r[:-1], value) for r in EXPOSURES]
    return spark.createDataFrame(rows, EXPOSURE_DDL.replace("ts timestamp", f"ts {ts_type}"))


@pytest.mark.parametrize("date", [None, DAY.isoformat()])
def test_evaluate_names_a_missing_ts_column(spark, date):
    # Spark's raw UNRESOLVED_COLUMN error before (or, with date=, a schema error naming the scratch directory)
    exposures = spark.createDataFrame(EXPOSURES, EXPOSURE_DDL).drop("ts")
    with pytest.raises(ValueError, match=r"evaluate: missing column 'ts' in exposures \(the input contract"):
        recsys_spark.evaluate(exposures, spark.createDataFrame(CLICKS, CLICK_DDL), date=date)


@pytest.mark.parametrize("date", [None, DAY.isoformat()])
def test_evaluate_names_an_epoch_seconds_ts_and_what_it_expects(spark, date):
    # Spark's raw DATATYPE_MISMATCH cast error before; the command line refuses an integer ts the same way
    noon = int(dt.datetime(2026, 11, 20, 12, tzinfo=dt.timezone.utc).timestamp())
    exposures = _exposures_with_ts(spark, "bigint", noon)
    with pytest.raises(ValueError, match=r"column 'ts' in exposures has type bigint.*F\.timestamp_seconds"):
        recsys_spark.evaluate(exposures, spark.createDataFrame(CLICKS, CLICK_DDL), date=date)
    clicks = spark.createDataFrame(CLICKS, CLICK_DDL).withColumn("ts", F.lit(noon))
    with pytest.raises(ValueError, match=r"column 'ts' in clicks has type int"):
        recsys_spark.evaluate(spark.createDataFrame(EXPOSURES, EXPOSURE_DDL), clicks, date=date)


def test_evaluate_reads_a_mapped_or_string_ts_as_the_command_line_does(spark):
    # input.columns renamed the files the daily job read, but the day was looked up on the frame as it came
    exposures = spark.createDataFrame(EXPOSURES, EXPOSURE_DDL).withColumnRenamed("ts", "event_time")
    exposures = exposures.withColumn("event_time", F.date_format("event_time", "yyyy-MM-dd HH:mm:ss"))
    clicks = spark.createDataFrame(CLICKS, CLICK_DDL).withColumnRenamed("ts", "event_time")
    result = recsys_spark.evaluate(exposures, clicks, settings=["metrics.k=[1]", 'input.columns={ts = "event_time"}'])
    try:
        assert result.summary["date"] == DAY.isoformat()
        assert result.value("ndcg", 1, "user_avg") == pytest.approx(2 / 3)
    finally:
        result.close()


# --- inputs as teams have them (issue 42) -------------------------------------------------------------------------
def test_evaluate_takes_pandas_frames_each_renamed_by_its_own_mapping(spark):
    # a pandas DataFrame gave AttributeError ('DataFrame' object has no attribute 'sparkSession'), and one mapping
    # served both frames: exposures' shown_at and clicks' clicked_at could not both be the ts
    exposures = spark.createDataFrame(EXPOSURES, EXPOSURE_DDL).withColumnRenamed("ts", "shown_at").toPandas()
    clicks = spark.createDataFrame(CLICKS, CLICK_DDL).withColumnRenamed("ts", "clicked_at").toPandas()
    mapping = 'input.columns={exposures = {ts = "shown_at"}, clicks = {ts = "clicked_at"}}'
    result = recsys_spark.evaluate(exposures, clicks, settings=["metrics.k=[1]", mapping])
    try:
        assert result.summary["date"] == DAY.isoformat()  # the day looked up on the mapped shown_at
        assert result.value("ndcg", 1, "user_avg") == pytest.approx(2 / 3)
    finally:
        result.close()
    with pytest.raises(TypeError, match="exposures must be a Spark or a pandas DataFrame, got list"):
        recsys_spark.evaluate(EXPOSURES, clicks)


def test_the_evaluator_refuses_nan_predictions_naming_the_count(spark):
    # ALS predicts NaN for a user or item it did not train on; Spark sorts NaN first: it was ranked top, silently
    rows = PREDICTIONS + [("u1", "d", float("nan"), 1.0), ("u2", "d", float("nan"), 0.0)]
    frame = spark.createDataFrame(rows, "user string, item string, prediction double, label double")
    with pytest.raises(ValueError, match=r"2 row\(s\) with a NaN or null prediction \(predictionCol 'prediction'\)"):
        recsys_spark.RankingEvaluator(metric="ndcg", k=2).evaluate(frame)


def test_a_local_session_whose_workers_lack_pyarrow_is_one_clear_line(spark, monkeypatch):
    # the documented session, from a venv not activated, ran its workers on the system python3: the per-user pass
    # failed in a worker with "No module named 'pyarrow'" deep in a Java stack trace
    monkeypatch.setattr(spark.sparkContext, "pythonExec", "/nonexistent/bin/python3")
    frame = spark.createDataFrame(PREDICTIONS, "user string, item string, prediction double, label double")
    with pytest.raises(UsageError, match=r"workers run '/nonexistent/bin/python3' \(PYSPARK_PYTHON\).*sys.executable"):
        recsys_spark.RankingEvaluator(metric="ndcg", k=2).evaluate(frame)


def test_the_documented_session_runs_the_workers_on_this_python_from_an_unactivated_venv(tmp_path):
    # docs/notebook.md's session, run by the venv's python with neither PYSPARK_PYTHON nor the venv's bin/ on PATH
    import os
    import subprocess
    import sys

    text = (Path(__file__).resolve().parents[1] / "docs" / "notebook.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, re.S)
    setup = code[: code.index("getOrCreate()") + len("getOrCreate()")]
    probe = setup.replace("import recsys_spark\n", "") + (
        "\nrows = spark.range(1).mapInPandas(lambda frames: (__import__('pyarrow') and f for f in frames), 'id long')"
        "\nprint('workers ok', rows.count())\n"
    )
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "VIRTUAL_ENV", "SPARK_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bin_dir)
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=600)
    assert "workers ok 1" in done.stdout, done.stderr[-2000:]
