"""The example DAG jobs/airflow/recsys_eval_dag.py parses and renders the right spark-submit.

Runs without a metadata DB or scheduler: the DAG folder is parsed with ``DagBag`` and the
operator's templated fields are rendered with a hand-built context. Needs Airflow 3 and
the Spark provider, i.e. ``.venv-airflow`` (``make test-airflow``); the main suite ignores
this folder.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import re
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


def _sets(args: list[str]) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == "--set"]


def _opt(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, (flag, args)
    return args[args.index(flag) + 1]


def test_dag_folder_imports_cleanly(bag):
    assert bag.import_errors == {}
    assert DAG_ID in bag.dags
    assert bag.size() == 1  # the Kubernetes DAG only when RECSYS_EVAL_PLATFORMS names it


def test_evaluate_task_is_a_spark_submit_with_retries(bag):
    dag = bag.dags[DAG_ID]
    assert dag.catchup is False
    task = dag.get_task("evaluate")
    assert isinstance(task, SparkSubmitOperator)
    assert task.retries > 0  # the computation retries; the sensors and the gate do not (test_dag_wiring)
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
    assert "--config" not in args
    assert _sets(args) == [
        'input.exposures="{input_root}/exposures/dt={date}"',
        'input.clicks="{input_root}/clicks/dt={date}"',
        "rules.fail_on_hard=false",
    ]
    assert task.application == "/opt/recsys-spark/jobs/evaluate_daily.py"
    assert task.py_files == "/opt/recsys-spark/dist/recsys_spark.zip"
    assert task.conf == {
        "spark.pyspark.python": "./environment/bin/python",
        "spark.recsys.runId": "scheduled__2026-11-21T02:30:00+00:00",
    }
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
        "--set", 'input.exposures="{input_root}/exposures/dt={date}"',
        "--set", 'input.clicks="{input_root}/clicks/dt={date}"',
        "--set", "rules.fail_on_hard=false",
        "--set", "metrics.k=20",
        "--set", "rules.min_users=100",
    ]  # fmt: skip
    assert task.conf == {
        "spark.pyspark.driver.python": "/usr/bin/python3",
        "spark.recsys.runId": "scheduled__2026-11-21T02:30:00+00:00",
    }


# --- sensors, gate, assets, Kubernetes (issue 17) ------------------------------------------
def _context(task, start: datetime = INTERVAL_START, run_after: datetime = RUN_AFTER) -> dict:
    return {
        "dag": task.dag,
        "task": task,
        "data_interval_start": start,
        "data_interval_end": run_after,
        "logical_date": run_after,
        "ds": run_after.strftime("%Y-%m-%d"),
        "ds_nodash": run_after.strftime("%Y%m%d"),
        "run_id": f"scheduled__{run_after.isoformat()}",
        "params": task.params,
        "var": {"value": VariableAccessor(deserialize_json=False), "json": None},
    }


def test_dag_wiring(bag):
    """sensors -> evaluate -> quality_gate; only the computation retries."""
    dag = bag.dags[DAG_ID]
    assert set(dag.task_ids) == {"wait_exposures", "wait_clicks", "evaluate", "quality_gate"}
    evaluate = dag.get_task("evaluate")
    assert evaluate.upstream_task_ids == {"wait_exposures", "wait_clicks"}
    assert evaluate.downstream_task_ids == {"quality_gate"}
    assert dag.get_task("quality_gate").downstream_task_ids == set()
    for task_id in ("wait_exposures", "wait_clicks"):
        sensor = dag.get_task(task_id)
        assert sensor.mode == "reschedule"
        assert sensor.retries == 0
        assert 0 < sensor.timeout <= 24 * 3600  # ends in a failure, within the day
    assert dag.get_task("quality_gate").retries == 0


def test_outputs_are_assets(bag):
    dag = bag.dags[DAG_ID]
    names = [a.name for a in dag.get_task("evaluate").outlets]
    assert names == [f"recsys_eval/{t}" for t in ("metrics", "user_metrics", "lorenz", "rule_checks", "summary")]
    assert dag.get_task("evaluate").outlets[0].uri == "file:///data/recsys/eval/metrics"
    assert [a.name for a in dag.get_task("quality_gate").outlets] == ["recsys_eval/quality_gate_passed"]


def test_file_sensor_waits_for_the_data_intervals_partition(bag):
    sensor = copy.deepcopy(bag.dags[DAG_ID].get_task("wait_exposures"))
    sensor.render_template_fields(_context(sensor))
    assert sensor.filepath == "/data/recsys/logs/exposures/dt=2026-11-20/_SUCCESS"  # not the run day 11-21
    clicks = copy.deepcopy(bag.dags[DAG_ID].get_task("wait_clicks"))
    clicks.render_template_fields(_context(clicks))
    assert clicks.filepath == "/data/recsys/logs/clicks/dt=2026-11-20/_SUCCESS"


def test_file_sensor_follows_a_date_format_template():
    bag = _load({"RECSYS_EVAL_EXPOSURES": "{input_root}/exp/ds={date:%Y%m%d}/"})
    assert bag.import_errors == {}
    sensor = bag.dags[DAG_ID].get_task("wait_exposures")
    sensor.render_template_fields(_context(sensor))
    assert sensor.filepath == "/data/recsys/logs/exp/ds=20261120/_SUCCESS"
    evaluate = bag.dags[DAG_ID].get_task("evaluate")
    assert 'input.exposures="{input_root}/exp/ds={date:%Y%m%d}/"' in _sets(evaluate.application_args)


def test_unknown_placeholder_fails_at_parse_time():
    bag = _load({"RECSYS_EVAL_CLICKS": "{input_root}/clicks/day={day}"})
    assert DAG_ID not in bag.dags
    (error,) = bag.import_errors.values()
    assert "unknown placeholder {day}" in error


def test_hive_partition_sensor_for_table_inputs():
    pytest.importorskip("airflow.providers.apache.hive", reason="needs apache-airflow-providers-apache-hive")
    from airflow.providers.apache.hive.sensors.hive_partition import HivePartitionSensor

    bag = _load(
        {
            "RECSYS_EVAL_EXPOSURES": "table:logs.rec_exposures",
            "RECSYS_EVAL_PARTITION_COLUMN": "ds",
            "RECSYS_EVAL_PARTITION_FORMAT": "%Y%m%d",
        }
    )
    assert bag.import_errors == {}
    sensor = bag.dags[DAG_ID].get_task("wait_exposures")
    assert isinstance(sensor, HivePartitionSensor)
    assert sensor.mode == "reschedule"
    sensor.render_template_fields(_context(sensor))
    assert (sensor.schema, sensor.table, sensor.partition) == ("logs", "rec_exposures", "ds='20261120'")
    assert "table:logs.rec_exposures" in _sets(bag.dags[DAG_ID].get_task("evaluate").application_args)[0]
    # the clicks are still a path: a file sensor
    assert (
        bag.dags[DAG_ID]
        .get_task("wait_clicks")
        .filepath.endswith("/clicks/dt={{ data_interval_start.strftime('%Y-%m-%d') }}/_SUCCESS")
    )


def _write_summary(root: Path, rules: list[dict], status: str = "ok", complete: bool = True) -> None:
    folder = root / "summary" / "dt=2026-11-20"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"date": "2026-11-20", "status": status, "rules": rules}))
    if complete:
        (folder / "_SUCCESS").write_text("")


def _gate_callable(bag):
    return bag.dags[DAG_ID].get_task("quality_gate").python_callable


def test_gate_fails_without_retry_on_a_hard_violation(bag, tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    _write_summary(
        tmp_path,
        [
            {"rule": "blacklist_items", "severity": "hard", "passed": False},
            {"rule": "duplicate_rate", "severity": "soft", "passed": False},
        ],
        status="hard_rule_violated",
    )
    with pytest.raises(AirflowFailException, match="hard business rules violated: blacklist_items"):
        _gate_callable(bag)(output_root=str(tmp_path), date="2026-11-20")


def test_gate_passes_soft_failures_and_fails_on_a_missing_summary(bag, tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    _write_summary(
        tmp_path,
        [
            {"rule": "blacklist_items", "severity": "hard", "passed": True},
            {"rule": "duplicate_rate", "severity": "soft", "passed": False},
        ],
    )
    result = _gate_callable(bag)(output_root=f"file://{tmp_path}/", date="2026-11-20")
    assert result == {"date": "2026-11-20", "status": "ok", "soft_failed": ["duplicate_rate"]}
    with pytest.raises(AirflowFailException, match="2026-11-21 is not complete"):
        _gate_callable(bag)(output_root=str(tmp_path), date="2026-11-21")


def test_gate_fails_on_a_day_without_its_success_marker(bag, tmp_path):
    # a commit killed midway: a summary is there, its _SUCCESS is not (the reading contract)
    from airflow.sdk.exceptions import AirflowFailException

    _write_summary(tmp_path, [{"rule": "blacklist_items", "severity": "hard", "passed": True}], complete=False)
    with pytest.raises(AirflowFailException, match="2026-11-20 is not complete: no _SUCCESS"):
        _gate_callable(bag)(output_root=str(tmp_path), date="2026-11-20")


# --- one factory, two platforms (issue 40): the same tasks, tested alike -------------------------------
DAG_IDS = {"yarn": DAG_ID, "kubernetes": "recsys_eval_daily_k8s"}
BOTH = {"RECSYS_EVAL_PLATFORMS": "yarn,kubernetes"}
#: every task the DAGs can have: an experiment and a gate config add the last three
FULL = {
    **BOTH,
    "RECSYS_EVAL_EXPERIMENT": "ranker_v2",
    "RECSYS_EVAL_GATE_CONFIG": "/etc/recsys/gate.toml",
    "RECSYS_EVAL_EXPERIMENT_START": "2026-11-14",
    "RECSYS_EVAL_CONFIG_FILE": "/etc/recsys/eval.toml",
}
SPARK_TASKS = ("evaluate", "experiment_window", "model_gate")


@pytest.fixture(params=["yarn", "kubernetes"])
def platform(request) -> str:
    if request.param == "kubernetes":
        pytest.importorskip(
            "airflow.providers.cncf.kubernetes", reason="needs apache-airflow-providers-cncf-kubernetes"
        )
    return request.param


@pytest.fixture(scope="module")
def full():
    pytest.importorskip("airflow.providers.cncf.kubernetes", reason="needs apache-airflow-providers-cncf-kubernetes")
    bag = _load(FULL)
    assert bag.import_errors == {}
    return bag


def _arguments(task) -> list[str]:
    """The command line a Spark task runs, rendered for the run of 2026-11-21 (either operator)."""
    task = copy.deepcopy(task)  # rendering mutates the operator in place
    task.render_template_fields(_context(task))
    if isinstance(task, SparkSubmitOperator):
        return task.application_args
    return task.template_spec["spec"]["arguments"]


def test_both_dags_have_the_same_tasks_wiring_arguments_retries_and_trigger_rules(full):
    yarn, k8s = full.dags[DAG_IDS["yarn"]], full.dags[DAG_IDS["kubernetes"]]
    assert set(yarn.task_ids) == set(k8s.task_ids) == {
        "wait_exposures", "wait_clicks", "evaluate", "quality_gate", "experiment_window", "model_gate",
        "model_verdict",
    }  # fmt: skip
    for task_id in yarn.task_ids:
        a, b = yarn.get_task(task_id), k8s.get_task(task_id)
        assert (a.upstream_task_ids, a.downstream_task_ids) == (b.upstream_task_ids, b.downstream_task_ids), task_id
        assert (a.retries, a.retry_delay, a.trigger_rule) == (b.retries, b.retry_delay, b.trigger_rule), task_id
        assert [o.name for o in a.outlets] == [o.name for o in b.outlets], task_id
        assert a.execution_timeout == b.execution_timeout, task_id
        if task_id in SPARK_TASKS:
            assert _arguments(a) == _arguments(b), task_id
        else:
            assert type(a) is type(b), task_id  # the sensors, the quality gate and the verdict: the very same tasks
    from airflow.providers.cncf.kubernetes.operators.spark_kubernetes import SparkKubernetesOperator

    assert all(isinstance(yarn.get_task(t), SparkSubmitOperator) for t in SPARK_TASKS)
    assert all(isinstance(k8s.get_task(t), SparkKubernetesOperator) for t in SPARK_TASKS)
    assert yarn.timetable == k8s.timetable  # the schedule and its one-day interval
    assert (yarn.catchup, yarn.max_active_runs) == (k8s.catchup, k8s.max_active_runs)


def test_wiring_and_trigger_rules_on_each_platform(platform):
    """sensors -> evaluate -> quality_gate -> experiment_window -> model_gate -> model_verdict, each after all of
    its upstream tasks succeeded; only the computations retry."""
    dag = _load(FULL).dags[DAG_IDS[platform]]
    chain = [("evaluate", {"wait_exposures", "wait_clicks"}), ("quality_gate", {"evaluate"})]
    chain += [("experiment_window", {"quality_gate"}), ("model_gate", {"experiment_window"})]
    chain += [("model_verdict", {"model_gate"})]
    for task_id, upstream in chain:
        assert dag.get_task(task_id).upstream_task_ids == upstream, task_id
    assert dag.get_task("model_verdict").downstream_task_ids == set()
    assert {t.trigger_rule for t in dag.tasks} == {"all_success"}
    retried = {t.task_id for t in dag.tasks if t.retries > 0}
    assert retried == {"evaluate", "experiment_window"}


def test_the_window_and_the_gate_are_there_only_with_their_settings(platform):
    def task_ids(env: dict[str, str]) -> set[str]:
        bag = _load({**BOTH, **env})
        assert bag.import_errors == {}
        return set(bag.dags[DAG_IDS[platform]].task_ids)

    daily = {"wait_exposures", "wait_clicks", "evaluate", "quality_gate"}
    assert task_ids({}) == daily
    assert task_ids({"RECSYS_EVAL_EXPERIMENT": "ranker_v2"}) == daily | {"experiment_window"}
    assert task_ids({"RECSYS_EVAL_GATE_CONFIG": "/etc/recsys/gate.toml"}) == daily  # a gate needs its window
    assert task_ids({k: v for k, v in FULL.items() if k != "RECSYS_EVAL_EXPERIMENT_START"}) == set(
        _load(FULL).dags[DAG_IDS[platform]].task_ids
    )


def test_the_evaluate_task_renders_the_days_arguments_on_each_platform(platform):
    args = _arguments(_load(BOTH).dags[DAG_IDS[platform]].get_task("evaluate"))
    assert args[:7] == [
        "evaluate",
        "--date", "2026-11-20",
        "--input-root", "/data/recsys/logs",
        "--output-root", "/data/recsys/eval",
    ]  # fmt: skip
    assert _sets(args)[-1] == "rules.fail_on_hard=false"


def test_kubernetes_dag_renders_a_spark_application_per_spark_task(full):
    dag = full.dags["recsys_eval_daily_k8s"]
    names = {}
    for task_id in SPARK_TASKS:
        task = copy.deepcopy(dag.get_task(task_id))
        task.render_template_fields(_context(task))
        app = task.template_spec
        assert app["kind"] == "SparkApplication"
        assert app["spec"]["mainApplicationFile"] == "local:///opt/recsys-spark/jobs/evaluate_daily.py"
        assert app["spec"]["image"] == "registry.example.com/recsys-spark:0.1.0"
        assert app["metadata"]["namespace"] == "spark-jobs"
        assert app["spec"]["sparkConf"]["spark.recsys.runId"] == "scheduled__2026-11-21T02:30:00+00:00"
        assert app["spec"]["restartPolicy"] == {"type": "Never"}
        names[task_id] = app["metadata"]["name"]
    assert names == {
        "evaluate": "recsys-eval-20261120",
        "experiment_window": "recsys-eval-window-20261120",
        "model_gate": "recsys-eval-gate-20261120",
    }


# --- the experiment window and the model gate (issue 31) ------------------------------------------
def test_the_experiment_window_and_the_model_gate_follow_the_quality_gate(platform):
    """With an experiment and a gate config: quality_gate -> experiment_window -> model_gate, the window to date
    from experiment_start (run time), the gate on it without retry; alike on both platforms."""
    bag = _load(FULL)
    assert bag.import_errors == {}
    dag = bag.dags[DAG_IDS[platform]]
    assert dag.get_task("quality_gate").downstream_task_ids == {"experiment_window"}
    assert dag.get_task("experiment_window").downstream_task_ids == {"model_gate"}
    assert dag.get_task("model_gate").downstream_task_ids == {"model_verdict"}
    assert dag.get_task("model_gate").retries == 0 and dag.get_task("experiment_window").retries > 0
    assert dag.get_task("model_verdict").retries == 0
    # the promotion's Asset is the verdict task's: updated only when the verdict passed, not when the gate ran
    assert [a.name for a in dag.get_task("model_verdict").outlets] == ["recsys_eval/model_gate_passed"]
    assert dag.get_task("model_gate").outlets == []
    assert [a.name for a in dag.get_task("experiment_window").outlets] == ["recsys_eval/experiment_window"]
    assert _arguments(dag.get_task("experiment_window")) == [
        "experiment",
        "--experiment", "ranker_v2",
        "--start", "2026-11-14",
        "--end", "2026-11-20",
        "--output-root", "/data/recsys/eval",
        "--config", "/etc/recsys/eval.toml",
    ]  # fmt: skip
    assert _arguments(dag.get_task("model_gate")) == [
        "gate",
        "--name", "ranker_v2",
        "--output-root", "/data/recsys/eval",
        "--config", "/etc/recsys/gate.toml",
        "--set", "gate.source=experiment",
        "--set", 'gate.experiment="ranker_v2"',
        "--set", "gate.start=2026-11-14",
        "--set", "gate.end=2026-11-20",
        "--set", "gate.fail_on_verdict=false",
    ]  # fmt: skip


# --- the model gate's three states (issue 42): passed promotes, inconclusive waits, failed fails ------------------
def _write_verdict(root: Path, state: str | None, end: str = "2026-11-20", passed: bool | None = None) -> None:
    folder = root / "gate" / "ranker_v2"
    folder.mkdir(parents=True, exist_ok=True)
    words = {"passed": "PASSED 2 of 2 checks", "inconclusive": "NOT ENOUGH EVIDENCE YET: 1 of 2 checks inconclusive: "
             "exposure_ctr_global on all min_absolute_change: ...", "failed": "FAILED 1 of 2 checks: ..."}  # fmt: skip
    verdict = {"name": "ranker_v2", "source": "experiment", "experiment": "ranker_v2", "end": end,
               "passed": state == "passed" if passed is None else passed,
               "summary": f"gate ranker_v2: {words.get(state or '', '...')}"}  # fmt: skip
    if state is not None:
        verdict["state"] = state
    (folder / "verdict.json").write_text(json.dumps(verdict))


def _verdict_callable(platform: str):
    return _load(FULL).dags[DAG_IDS[platform]].get_task("model_verdict").python_callable


def test_a_passed_verdict_succeeds_and_promotes(platform, tmp_path):
    _write_verdict(tmp_path, "passed")
    result = _verdict_callable(platform)(output_root=f"file://{tmp_path}/", name="ranker_v2", date="2026-11-20")
    assert result == {"date": "2026-11-20", "state": "passed", "summary": "gate ranker_v2: PASSED 2 of 2 checks"}


def test_an_inconclusive_verdict_skips_with_its_reason_and_does_not_fail_the_run(platform, tmp_path):
    """Not enough evidence yet: the task ends skipped (a skipped leaf leaves the run successful) and its Asset,
    the promotion's trigger, is not updated; never a failure (nor retried: nothing is wrong)."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    _write_verdict(tmp_path, "inconclusive")
    with pytest.raises(AirflowSkipException) as skipped:
        _verdict_callable(platform)(output_root=str(tmp_path), name="ranker_v2", date="2026-11-20")
    assert not isinstance(skipped.value, AirflowFailException)
    message = str(skipped.value)
    assert message.startswith("do not promote yet: gate ranker_v2: NOT ENOUGH EVIDENCE YET: 1 of 2 checks")
    assert message.endswith(f"(see {tmp_path}/gate/ranker_v2/verdict.json)")


@pytest.mark.parametrize(
    "state, end, passed, match",
    [
        ("failed", "2026-11-20", None, "gate ranker_v2: FAILED 1 of 2 checks"),
        (None, "2026-11-20", False, "gate ranker_v2: ..."),  # an earlier release's verdict: no state, passed false
        ("passed", "2026-11-19", None, "gates the window ending 2026-11-19, not 2026-11-20: a stale verdict"),
    ],
    ids=["failed", "an old verdict that did not pass", "yesterday's verdict"],
)
def test_a_failed_or_stale_verdict_fails_without_retry(platform, tmp_path, state, end, passed, match):
    from airflow.sdk.exceptions import AirflowFailException

    _write_verdict(tmp_path, state, end, passed)
    with pytest.raises(AirflowFailException, match=re.escape(match)):
        _verdict_callable(platform)(output_root=str(tmp_path), name="ranker_v2", date="2026-11-20")
    with pytest.raises(AirflowFailException, match="no verdict at .*: the model_gate task did not write it"):
        _verdict_callable(platform)(output_root=str(tmp_path / "elsewhere"), name="ranker_v2", date="2026-11-20")


def test_an_old_verdict_that_passed_still_promotes(platform, tmp_path):
    _write_verdict(tmp_path, None, passed=True)
    result = _verdict_callable(platform)(output_root=str(tmp_path), name="ranker_v2", date="2026-11-20")
    assert result["state"] == "passed"
