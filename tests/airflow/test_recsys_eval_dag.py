"""The example DAG jobs/airflow/recsys_eval_dag.py parses and renders the right spark-submit.

Runs without a metadata DB or scheduler: the DAG folder is parsed with ``DagBag`` and the
operator's templated fields are rendered with a hand-built context. Needs Airflow 3 and
the Spark provider, i.e. ``.venv-airflow`` (``make test-airflow``); the main suite ignores
this folder.
"""

from __future__ import annotations

import copy
import inspect
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("airflow.providers.apache.spark", reason="needs .venv-airflow (make test-airflow)")

from airflow.dag_processing.dagbag import DagBag  # noqa: E402
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator  # noqa: E402
from airflow.sdk.execution_time.context import VariableAccessor  # noqa: E402

DAG_FOLDER = Path(__file__).resolve().parents[2] / "jobs" / "airflow"
DAG_ID = "recsys_eval_daily"
# a run that starts on 2026-11-21 must evaluate 2026-11-20
RUN_AFTER = datetime(2026, 11, 21, 2, 30, tzinfo=UTC)
INTERVAL_START = datetime(2026, 11, 20, 2, 30, tzinfo=UTC)


_OVERRIDE_PREFIXES = ("RECSYS_EVAL_", "AIRFLOW_VAR_RECSYS_EVAL_")


@pytest.fixture(autouse=True)
def _no_deployment_overrides(monkeypatch):
    """Deployment overrides in the developer's shell must not leak into the tests."""
    for key in list(os.environ):
        if key.startswith(_OVERRIDE_PREFIXES):
            monkeypatch.delenv(key)


def _load(env: dict[str, str] | None = None) -> DagBag:
    """Parse the DAG folder, with ``env`` as the only deployment overrides."""
    kwargs = {"dag_folder": str(DAG_FOLDER)}
    if "include_examples" in inspect.signature(DagBag).parameters:  # Airflow 2 only
        kwargs["include_examples"] = False
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith(_OVERRIDE_PREFIXES):
                mp.delenv(key)
        for key, value in (env or {}).items():
            mp.setenv(key, value)
        return DagBag(**kwargs)


def _render(task, start: datetime, end: datetime, run_after: datetime) -> SparkSubmitOperator:
    """Render ``task``'s templated fields offline, for a run with that data interval."""
    context = {
        "dag": task.dag,
        "task": task,
        "data_interval_start": start,
        "data_interval_end": end,
        "logical_date": run_after,  # CronTriggerTimetable: logical date = run time
        "ds": run_after.strftime("%Y-%m-%d"),  # the run date: NOT the day to evaluate
        "ds_nodash": run_after.strftime("%Y%m%d"),
        "run_id": f"scheduled__{run_after.isoformat()}",
        "var": {"value": VariableAccessor(deserialize_json=False), "json": None},
    }
    task.render_template_fields(context)
    return task


@pytest.fixture(scope="module")
def bag() -> DagBag:
    return _load()


@pytest.fixture
def task(bag):
    # a fresh copy per test: rendering mutates the operator in place
    return copy.deepcopy(bag.dags[DAG_ID].get_task("evaluate"))


def _opt(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, (flag, args)
    return args[args.index(flag) + 1]


def test_dag_folder_imports_cleanly(bag):
    assert bag.import_errors == {}
    assert DAG_ID in bag.dags
    assert bag.size() == 1


def test_evaluate_task_is_a_spark_submit_with_retries(bag):
    dag = bag.dags[DAG_ID]
    assert dag.catchup is False
    task = dag.get_task("evaluate")
    assert isinstance(task, SparkSubmitOperator)
    assert task.retries > 0
    assert task.retry_delay > timedelta(0)
    assert task._conn_id == "spark_default"


def test_schedule_gives_the_previous_day_as_data_interval():
    """A bare "@daily" in Airflow 3 has a zero-length interval (start == run day): guard it."""
    from airflow.timetables.base import TimeRestriction

    dag = _load().dags[DAG_ID]
    timetable = dag.timetable
    try:  # Airflow 3.1+: the DAG holds an SDK timetable, the scheduler a core one
        from airflow.serialization.encoders import coerce_to_core_timetable

        timetable = coerce_to_core_timetable(timetable)
    except ImportError:
        pass
    info = timetable.next_dagrun_info(
        last_automated_data_interval=None,
        restriction=TimeRestriction(earliest=datetime(2026, 11, 21, tzinfo=UTC), latest=None, catchup=True),
    )
    assert info.run_after == RUN_AFTER
    assert info.data_interval.start == INTERVAL_START
    assert info.data_interval.end == RUN_AFTER
    manual = timetable.infer_manual_data_interval(run_after=datetime(2026, 11, 21, 15, 0, tzinfo=UTC))
    assert manual.start.date().isoformat() == "2026-11-20"


def test_renders_interval_start_as_the_date(task):
    _render(task, INTERVAL_START, RUN_AFTER, RUN_AFTER)
    args = task.application_args
    assert args[0] == "evaluate"
    assert _opt(args, "--date") == "2026-11-20"
    assert "2026-11-21" not in args
    assert _opt(args, "--input-root") == "/data/recsys/logs"
    assert _opt(args, "--output-root") == "/data/recsys/eval"
    assert "--config" not in args and "--set" not in args
    assert task.application == "/opt/recsys-spark/jobs/evaluate_daily.py"
    assert task.py_files == "/opt/recsys-spark/dist/recsys_spark.zip"
    assert task.conf == {"spark.pyspark.python": "./environment/bin/python"}
    assert task._archives == "/opt/recsys-spark/dist/env.tar.gz#environment"
    assert task.name == "recsys_eval_daily_20261120"


def test_airflow_variables_override_the_roots_at_run_time(task, monkeypatch):
    # the env secrets backend is one of the places Airflow looks Variables up
    monkeypatch.setenv("AIRFLOW_VAR_RECSYS_EVAL_INPUT_ROOT", "s3a://lake/recsys/logs")
    monkeypatch.setenv("AIRFLOW_VAR_RECSYS_EVAL_OUTPUT_ROOT", "s3a://lake/recsys/eval")
    monkeypatch.setenv("AIRFLOW_VAR_RECSYS_EVAL_PY_FILES", "s3a://lake/recsys/recsys_spark.zip")
    _render(task, INTERVAL_START, RUN_AFTER, RUN_AFTER)
    args = task.application_args
    assert _opt(args, "--date") == "2026-11-20"
    assert _opt(args, "--input-root") == "s3a://lake/recsys/logs"
    assert _opt(args, "--output-root") == "s3a://lake/recsys/eval"
    assert task.py_files == "s3a://lake/recsys/recsys_spark.zip"


def test_env_settings_shape_the_task():
    env = {
        "RECSYS_EVAL_INPUT_ROOT": "/mnt/in",
        "RECSYS_EVAL_OUTPUT_ROOT": "/mnt/out",
        "RECSYS_EVAL_CONN_ID": "spark_yarn",
        "RECSYS_EVAL_CONFIG_FILE": "/etc/recsys/eval.toml",
        "RECSYS_EVAL_OVERRIDES": "metrics.k=20 rules.min_users=100",
        "RECSYS_EVAL_ENV_ARCHIVE": "",  # the cluster image has pandas/pyarrow
        "RECSYS_EVAL_DRIVER_PYTHON": "/usr/bin/python3",
    }
    bag = _load(env)
    assert bag.import_errors == {}
    task = bag.dags[DAG_ID].get_task("evaluate")
    assert task._conn_id == "spark_yarn"
    assert task._archives is None
    _render(task, INTERVAL_START, RUN_AFTER, RUN_AFTER)
    assert task.application_args == [
        "evaluate",
        "--date", "2026-11-20",
        "--input-root", "/mnt/in",
        "--output-root", "/mnt/out",
        "--config", "/etc/recsys/eval.toml",
        "--set", "metrics.k=20",
        "--set", "rules.min_users=100",
    ]  # fmt: skip
    assert task.conf == {"spark.pyspark.driver.python": "/usr/bin/python3"}
