"""Example Airflow 3 DAGs: wait for the day's inputs, run recsys-spark, gate on its rules.

Two DAGs with the same shape, one per platform (docs/airflow.md)::

    wait_exposures ┐
    wait_clicks    ┴─> evaluate ──> quality_gate [──> experiment_window ──> model_gate ──> model_verdict]
    (sensors)          (Spark job, exits 0,      (reads summary.json,  (recsys-spark     (recsys-spark   (reads
                        outlets: the tables)      fails without retry   experiment: the   gate: writes    verdict.json)
                                                  on a hard violation)  window to date)   its verdict)

The bracketed tasks exist when ``experiment`` names one (and ``gate_config`` a gate TOML, for the last two):
every night the experiment's window from ``experiment_start`` to the evaluated day is analysed again
(always-valid intervals by default: looking every night is what they are for) and gated.  The verdict has three
states (docs/gate.md); ``model_verdict`` succeeds on ``passed`` (and updates the Asset the promotion schedules
on), is **skipped** with the reason on ``inconclusive`` (not enough evidence yet: do not promote, the run does
not fail) and fails without retry on ``failed``.

* ``recsys_eval_daily``: ``spark-submit`` to YARN (or any master) with SparkSubmitOperator.
* ``recsys_eval_daily_k8s``: the Spark operator's ``SparkApplication``
  (``k8s/recsys-eval-sparkapplication.yaml``, one per Spark task) with SparkKubernetesOperator; built only
  when ``RECSYS_EVAL_PLATFORMS`` names ``kubernetes`` (it needs apache-airflow-providers-cncf-kubernetes).

One factory, :func:`build_dag`, builds both: the same tasks, arguments, retries, outlets and wiring; the
operator that runs a command on Spark is the one difference (:data:`PLATFORM_DAGS`).

How to adopt it
  1. Copy this file (and ``k8s/`` for Kubernetes) into your DAGs folder. It needs Airflow 3.x,
     ``apache-airflow-providers-apache-spark``, and for table inputs
     ``apache-airflow-providers-apache-hive`` (HivePartitionSensor), only imported when an input
     is a table; ``spark-submit`` on the workers' PATH (or ``spark_binary`` in the connection).
  2. Build the artefacts the task ships: ``dist/recsys_spark.zip`` (``--py-files``)
     and, unless your cluster image already has pandas/pyarrow, a venv-pack archive
     ``env.tar.gz`` (``--archives env.tar.gz#environment``).
  3. Point the settings below at your deployment. Edit the defaults in ``SETTINGS``,
     or override per environment without touching the file:
       * Airflow Variable ``recsys_eval_<key>`` -- read at run time through a template
         (keys marked "run time"), so parsing the file never hits the metadata DB;
       * environment variable ``RECSYS_EVAL_<KEY>`` -- read when the file is parsed;
         the only way for the keys marked "parse time", which shape the tasks themselves.
  4. Create the connections named by ``conn_id`` (Spark), ``metastore_conn_id`` (Hive
     metastore, table inputs only) and ``kubernetes_conn_id`` (Kubernetes DAG only).

Date semantics: a run evaluates the day of its data interval's start,
``{{ data_interval_start | ds }}``, not the run date ``ds``. The run scheduled at
02:30 UTC on 2026-11-21 covers [2026-11-20 02:30, 2026-11-21 02:30) and evaluates
2026-11-20; its sensors wait for the 2026-11-20 partitions. The schedule is an explicit
``CronTriggerTimetable`` with a one-day interval: a bare ``"@daily"`` in Airflow 3 gives a
zero-length interval, so ``data_interval_start`` would be the run day itself.

Failures
  * An input partition that has not landed after ``sensor_timeout_hours`` fails its sensor
    (AirflowSensorTimeout: "Sensor has timed out", not retried); ``evaluate`` then never starts.
  * ``evaluate`` runs the job with ``--set rules.fail_on_hard=false``: it writes every output
    and exits 0 whatever the rules say; a non-zero exit is a failure of the computation (bad
    config, missing/bad input, Spark) and is retried ``retries`` times.
  * ``quality_gate`` reads ``{output_root}/summary/dt={date}/summary.json`` and fails, with no
    retry (AirflowFailException), when a hard rule is violated: retrying cannot fix the data.
    A scheduler without a second task keeps the old behaviour by leaving the override out
    (the job then exits 8 on a hard violation, see recsys_spark/errors.py).
  * ``model_gate`` runs the gate with ``--set gate.fail_on_verdict=false``: it exits 0 once the verdict is
    written, whatever it says (the command's own exit codes, 13 for an inconclusive gate and 12 for a failed
    one, do not reach Airflow through spark-submit in YARN's cluster mode or the Spark operator, which report
    a failed application, not its driver's code); ``model_verdict`` then reads ``gate/EXPERIMENT/verdict.json``:
    its ``state`` decides, as ``quality_gate`` reads the summary.
"""

from __future__ import annotations

import json
import os
import shlex
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Asset, task

try:
    from airflow.sdk import CronTriggerTimetable
except ImportError:  # Airflow releases whose SDK does not export timetables yet
    from airflow.timetables.trigger import CronTriggerTimetable

try:
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
except ImportError:  # older Airflow 3 releases
    from airflow.exceptions import AirflowFailException, AirflowSkipException

# --------------------------------------------------------------------------------------
# Deployment settings: the one place to edit.
# key -> default. When each key is read (and how to override it) is noted per group.
# --------------------------------------------------------------------------------------
_APP_HOME = "/opt/recsys-spark"  # where the repo's jobs/ and dist/ are deployed
SETTINGS: dict[str, str] = {
    # run time: Airflow Variable recsys_eval_<key>, else RECSYS_EVAL_<KEY>, else default
    "input_root": "/data/recsys/logs",  # --input-root (hdfs://, s3a://, file paths...)
    "output_root": "/data/recsys/eval",  # --output-root; the gate reads the summary there
    "application": f"{_APP_HOME}/jobs/evaluate_daily.py",  # spark-submit entry point
    "py_files": f"{_APP_HOME}/dist/recsys_spark.zip",  # the library, for the executors
    # parse time: RECSYS_EVAL_<KEY>, else default
    "conn_id": "spark_default",  # Airflow connection of type "spark"
    # venv-pack archive with pandas/pyarrow; "" if the cluster image provides them
    "env_archive": f"{_APP_HOME}/dist/env.tar.gz",
    # deploy mode *client* (the driver runs on the Airflow worker, where ./environment
    # does not exist) needs a local python with pandas/pyarrow here; "" in cluster mode
    "driver_python": "",
    "config_file": "",  # --config FILE for the job; "" = job defaults
    "overrides": "",  # extra --set KEY=VALUE (TOML value) pairs, space separated: "metrics.k=[5,10]"
    "schedule_cron": "30 2 * * *",  # UTC; leave room after midnight for late logs
    # The two inputs the sensors wait for, in the job's own syntax (passed to the job as
    # --set input.exposures=... so both always agree): a path template with {input_root},
    # {date} or {date:%Y%m%d} (FileSensor on its _SUCCESS), or "table:db.name" (Hive
    # partition sensor on partition_column = the date in partition_format).
    "exposures": "{input_root}/exposures/dt={date}",
    "clicks": "{input_root}/clicks/dt={date}",
    "partition_column": "dt",  # table inputs: the partition column ...
    "partition_format": "%Y-%m-%d",  # ... and how the day is spelled in it (strftime)
    "metastore_conn_id": "metastore_default",  # HivePartitionSensor's connection
    "fs_conn_id": "fs_default",  # FileSensor's connection (base path of relative paths)
    "sensor_poke_minutes": "10",  # how often the sensors look (reschedule mode: no slot held)
    "sensor_timeout_hours": "6",  # then the sensor fails: "Sensor has timed out"
    # "yarn" and/or "kubernetes", comma separated: which DAGs this file builds
    "platforms": "yarn",
    # parse time: an experiment to analyse every night over its window (recsys-spark experiment), then gate
    # (recsys-spark gate); "" = neither task.  Both platforms' DAGs.
    "experiment": "",
    "gate_config": "",  # the gate's TOML ([gate] source = "experiment" and its [[gate.checks]]); "" = no gate
    # run time: the first day of the experiment's window (YYYY-MM-DD); the window ends on the evaluated day
    "experiment_start": "",
    "kubernetes_conn_id": "kubernetes_default",
    "namespace": "spark-jobs",  # where the SparkApplication is created
    "image": "registry.example.com/recsys-spark:0.1.0",  # image with Spark, Python deps and the package
    "service_account": "spark",  # the driver's service account (may create executor pods)
}

#: the tables a run writes (docs/catalog.md); each is an Asset downstream DAGs can schedule on
OUTPUT_TABLES = ("metrics", "user_metrics", "lorenz", "rule_checks", "summary")
#: updated by the gate only when no hard rule is violated: schedule on it to see trusted days only
GATE_ASSET = "recsys_eval/quality_gate_passed"
#: updated by the model gate's verdict task only when the verdict passed (gate/NAME/verdict.json, state "passed"):
#: schedule the promotion on it; an inconclusive verdict (not enough evidence yet) skips the task: no update
MODEL_GATE_ASSET = "recsys_eval/model_gate_passed"


def _parse_time(key: str) -> str:
    return os.environ.get(f"RECSYS_EVAL_{key.upper()}", SETTINGS[key])


def _run_time(key: str) -> str:
    """A template: Variable ``recsys_eval_<key>`` when the task runs, else env/default."""
    return "{{ var.value.get(" + repr(f"recsys_eval_{key}") + ", " + repr(_parse_time(key)) + ") }}"


INPUT_ROOT = _run_time("input_root")
OUTPUT_ROOT = _run_time("output_root")
APPLICATION = _run_time("application")
PY_FILES = _run_time("py_files")
CONN_ID = _parse_time("conn_id")
ENV_ARCHIVE = _parse_time("env_archive")
DRIVER_PYTHON = _parse_time("driver_python")
CONFIG_FILE = _parse_time("config_file")
OVERRIDES = shlex.split(_parse_time("overrides"))
SCHEDULE_CRON = _parse_time("schedule_cron")
PLATFORMS = {p.strip() for p in _parse_time("platforms").split(",") if p.strip()}
EXPERIMENT = _parse_time("experiment")
GATE_CONFIG = _parse_time("gate_config")
EXPERIMENT_START = _run_time("experiment_start")

# The day to evaluate: the start of the run's data interval (see the module docstring).
EVAL_DATE = "{{ data_interval_start | ds }}"
TABLE_PREFIX = "table:"


def output_assets() -> list[Asset]:
    """One Asset per output table, named ``recsys_eval/<table>``; its URI is the parse-time output root."""
    root = _parse_time("output_root").rstrip("/")
    uri_root = root if "://" in root else f"file://{root}"
    return [Asset(name=f"recsys_eval/{table}", uri=f"{uri_root}/{table}") for table in OUTPUT_TABLES]


def job_arguments() -> list[str]:
    """The job's command line (templated): computation only, the rules are the gate's business.

    The first 7 items are ``evaluate``, the date and the roots (templates); the rest are plain strings.
    """
    args = [
        "evaluate",
        "--date", EVAL_DATE,
        "--input-root", INPUT_ROOT,
        "--output-root", OUTPUT_ROOT,
    ]  # fmt: skip
    if CONFIG_FILE:
        args += ["--config", CONFIG_FILE]
    args += [
        "--set",
        f"input.exposures={json.dumps(_parse_time('exposures'))}",
        "--set",
        f"input.clicks={json.dumps(_parse_time('clicks'))}",
        "--set",
        "rules.fail_on_hard=false",
    ]  # exit 0 on a hard violation: quality_gate decides
    for override in OVERRIDES:
        args += ["--set", override]
    return args


def window_arguments() -> list[str]:
    """``recsys-spark experiment`` over [experiment_start, the evaluated day], with the job's config (the
    experiments.* settings: inference, goals, guardrails) and overrides."""
    args = [
        "experiment",
        "--experiment", EXPERIMENT,
        "--start", EXPERIMENT_START,
        "--end", EVAL_DATE,
        "--output-root", OUTPUT_ROOT,
    ]  # fmt: skip
    if CONFIG_FILE:
        args += ["--config", CONFIG_FILE]
    for override in OVERRIDES:
        args += ["--set", override]
    return args


def gate_arguments() -> list[str]:
    """``recsys-spark gate`` on the window just written: its name is the experiment's, its verdict
    ``{output_root}/gate/EXPERIMENT/verdict.json``; the window's bounds come from the run.  It exits 0 once the
    verdict is written (``gate.fail_on_verdict=false``): ``model_verdict`` reads its state."""
    return [
        "gate",
        "--name", EXPERIMENT,
        "--output-root", OUTPUT_ROOT,
        "--config", GATE_CONFIG,
        "--set", "gate.source=experiment",
        "--set", f"gate.experiment={json.dumps(EXPERIMENT)}",
        "--set", f"gate.start={EXPERIMENT_START}",
        "--set", f"gate.end={EVAL_DATE}",
        "--set", "gate.fail_on_verdict=false",
    ]  # fmt: skip


# --- sensors ----------------------------------------------------------------------------
def _jinja_date_format(strftime: str) -> str:
    """The evaluated day, formatted with ``strftime``, as a template."""
    return "{{ data_interval_start.strftime(" + repr(strftime) + ") }}"


def _path_template(template: str) -> str:
    """The job's path template (``{input_root}``, ``{date}``, ``{date:%Y%m%d}``) as an Airflow template."""
    import string

    out = []
    for literal, field, spec, _conv in string.Formatter().parse(template):
        out.append(literal)
        if field is None:
            continue
        if field == "input_root":
            out.append(INPUT_ROOT.rstrip("/"))
        elif field == "date":
            out.append(_jinja_date_format(spec or "%Y-%m-%d"))
        else:  # the job rejects it too (exit 3): fail here, at parse time, with the same words
            raise ValueError(
                f"unknown placeholder {{{field}}} in input path {template!r}: "
                "expected {input_root}, {date} or {date:FORMAT}"
            )
    return "".join(out)


def input_sensor(name: str, spec: str):
    """Wait for one input's partition of the evaluated day: a Hive partition or a ``_SUCCESS`` file.

    Reschedule mode (the worker slot is freed between pokes); after ``sensor_timeout_hours``
    the task fails with AirflowSensorTimeout, which is never retried.
    """
    common: dict[str, Any] = {
        "task_id": f"wait_{name}",
        "mode": "reschedule",
        "poke_interval": timedelta(minutes=float(_parse_time("sensor_poke_minutes"))).total_seconds(),
        "timeout": timedelta(hours=float(_parse_time("sensor_timeout_hours"))).total_seconds(),
        "retries": 0,
        "doc_md": f"Waits for the {name} partition of the evaluated day ({spec}).",
    }
    if spec.startswith(TABLE_PREFIX):
        from airflow.providers.apache.hive.sensors.hive_partition import HivePartitionSensor

        db_table = spec[len(TABLE_PREFIX) :]
        schema, _, table = db_table.rpartition(".")
        column = _parse_time("partition_column")
        return HivePartitionSensor(
            table=table,
            schema=schema or "default",
            partition=f"{column}='{_jinja_date_format(_parse_time('partition_format'))}'",
            metastore_conn_id=_parse_time("metastore_conn_id"),
            **common,
        )
    from airflow.providers.standard.sensors.filesystem import FileSensor

    return FileSensor(
        filepath=_path_template(spec).rstrip("/") + "/_SUCCESS", fs_conn_id=_parse_time("fs_conn_id"), **common
    )


# --- the quality gate ------------------------------------------------------------------
def hard_violations(summary: dict[str, Any]) -> list[str]:
    """The hard rules a summary reports as failed (its ``rules`` list, or its ``status``)."""
    failed = [r["rule"] for r in summary.get("rules", []) if r.get("severity") == "hard" and not r.get("passed")]
    if not failed and summary.get("status") == "hard_rule_violated":
        failed = ["(see rule_checks)"]
    return failed


def read_text(location: str) -> str:
    """A small file from a local path or a URL fsspec knows (s3://, gs://, hdfs://... with their extras)."""
    if "://" not in location or location.startswith("file://"):
        return Path(location.removeprefix("file://")).read_text()
    from airflow.sdk import ObjectStoragePath

    return ObjectStoragePath(location.replace("s3a://", "s3://", 1)).read_text()


def check_summary(output_root: str, date: str) -> dict[str, Any]:
    """Fail (no retry) when the day is not complete (no ``summary/dt=D/_SUCCESS``: the reading contract) or
    its summary reports a hard rule violation; return its headline."""
    location = f"{output_root.rstrip('/')}/summary/dt={date}/summary.json"
    try:
        read_text(location.rsplit("/", 1)[0] + "/_SUCCESS")
    except FileNotFoundError as err:
        raise AirflowFailException(
            f"{date} is not complete: no _SUCCESS beside {location} (the evaluate task did not commit the day)"
        ) from err
    try:
        summary = json.loads(read_text(location))
    except FileNotFoundError as err:
        raise AirflowFailException(f"no summary for {date} at {location}: the evaluate task did not write it") from err
    failed = hard_violations(summary)
    if failed:
        raise AirflowFailException(
            f"{date}: hard business rules violated: {', '.join(failed)} "
            f"(outputs written; see {output_root.rstrip('/')}/rule_checks/dt={date})"
        )
    soft = [r["rule"] for r in summary.get("rules", []) if not r.get("passed")]
    print(f"{date}: status={summary.get('status')} soft rules failed: {', '.join(soft) or 'none'}")
    return {"date": date, "status": summary.get("status"), "soft_failed": soft}


def _gate():
    return task(
        task_id="quality_gate",
        retries=0,
        outlets=[Asset(name=GATE_ASSET)],
        doc_md="Fails without retry when the summary reports a hard rule violation.",
    )(check_summary)(output_root=OUTPUT_ROOT, date=EVAL_DATE)


# --- the model gate's verdict ------------------------------------------------------------------
def check_verdict(output_root: str, name: str, date: str) -> dict[str, Any]:
    """Read ``gate/NAME/verdict.json`` (``recsys-spark gate``, docs/gate.md) and act on its ``state``:

    * ``passed``: return its headline (the task succeeds and updates :data:`MODEL_GATE_ASSET`: promote);
    * ``inconclusive``: skip the task with the verdict's line (not enough evidence yet: do not promote yet,
      the run does not fail; the window is gated again tomorrow with one more day of users);
    * ``failed``, or a verdict that is missing, unreadable or not of the evaluated day: fail without retry.

    A verdict of an earlier release has no ``state``: its boolean ``passed`` says passed or failed.
    """
    location = f"{output_root.rstrip('/')}/gate/{name}/verdict.json"
    try:
        verdict = json.loads(read_text(location))
    except FileNotFoundError as err:
        raise AirflowFailException(f"no verdict at {location}: the model_gate task did not write it") from err
    except ValueError as err:
        raise AirflowFailException(f"the verdict at {location} is not JSON: {err}") from err
    if verdict.get("end") != date:
        raise AirflowFailException(
            f"the verdict at {location} gates the window ending {verdict.get('end')}, not {date}: a stale verdict"
        )
    state = verdict.get("state") or ("passed" if verdict.get("passed") else "failed")
    line = verdict.get("summary", f"gate {name}: {state}")
    if state == "inconclusive":
        raise AirflowSkipException(f"do not promote yet: {line} (see {location})")
    if state != "passed":
        raise AirflowFailException(f"{line} (see {location})")
    print(line)
    return {"date": date, "state": state, "summary": line}


def _verdict():
    return task(
        task_id="model_verdict",
        retries=0,
        outlets=[Asset(name=MODEL_GATE_ASSET)],
        doc_md="Reads the model gate's verdict: succeeds when it passed (the Asset the promotion schedules on), "
        "is skipped when inconclusive (not enough evidence yet: do not promote yet), fails when it failed.",
    )(check_verdict)(output_root=OUTPUT_ROOT, name=EXPERIMENT, date=EVAL_DATE)


# --- what every DAG shares ---------------------------------------------------------------
DEFAULT_ARGS = {
    "owner": "recsys",
    # Retries help with transient cluster/IO failures of the computation; the sensors and the
    # gate set retries=0 themselves (a timeout or a rule violation is not transient).
    "retries": 2,
    "retry_delay": timedelta(minutes=10),
    "execution_timeout": timedelta(hours=4),
}


def _dag(dag_id: str, description: str) -> DAG:
    return DAG(
        dag_id=dag_id,
        description=description,
        schedule=CronTriggerTimetable(SCHEDULE_CRON, timezone="UTC", interval=timedelta(days=1)),
        start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
        # No automatic catch-up of missed days. To (re)evaluate past days, either
        #   airflow backfill create --dag-id recsys_eval_daily --from-date 2026-11-02 --to-date 2026-11-10
        # (dates are run dates: each run evaluates the day before, here 2026-11-01..2026-11-09),
        # or run the job once over a range with its own --start/--end outside Airflow.
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=["recsys", "spark", "evaluation"],
    )


def _sensors() -> list:
    return [input_sensor(name, _parse_time(name)) for name in ("exposures", "clicks")]


# --- the Spark tasks, one builder per platform ------------------------------------------------------
#: per command task: the Spark application's name stem on each platform (the date is appended)
APP_NAMES = {
    "evaluate": ("recsys_eval_daily", "recsys-eval"),
    "experiment_window": ("recsys_eval_window", "recsys-eval-window"),
    "model_gate": ("recsys_eval_gate", "recsys-eval-gate"),
}
SPARK_APPLICATION = Path(__file__).resolve().parent / "k8s" / "recsys-eval-sparkapplication.yaml"


def spark_submit_task(task_id: str, arguments: list[str], **kwargs: Any):
    """``recsys-spark ARGUMENTS`` through spark-submit (SparkSubmitOperator), on the Spark connection ``conn_id``."""
    spark_conf: dict[str, str] = {}
    if ENV_ARCHIVE:
        # executors (and a cluster-mode driver) run the unpacked venv-pack archive
        spark_conf["spark.pyspark.python"] = "./environment/bin/python"
    if DRIVER_PYTHON:
        spark_conf["spark.pyspark.driver.python"] = DRIVER_PYTHON
    # the job's log lines and catalog rows carry this run id (recsys_spark/runtime/log.py)
    spark_conf["spark.recsys.runId"] = "{{ run_id }}"
    return SparkSubmitOperator(
        task_id=task_id,
        conn_id=CONN_ID,
        name=APP_NAMES[task_id][0] + "_{{ data_interval_start | ds_nodash }}",
        application=APPLICATION,
        application_args=arguments,
        py_files=PY_FILES,
        archives=f"{ENV_ARCHIVE}#environment" if ENV_ARCHIVE else None,
        conf=spark_conf,
        # In YARN *cluster* mode on Airflow >= 3.3 the operator is "durable" by default
        # and then requires yarn_track_via_rm_api=True (plus the connection extra
        # yarn_resourcemanager_webapp_address); otherwise pass durable=False.
        **kwargs,
    )


def spark_application(task_id: str, arguments: list[str]) -> dict[str, Any]:
    """The task's ``SparkApplication``: ``k8s/recsys-eval-sparkapplication.yaml`` with the task's name and
    ``arguments`` (the same templates as the spark-submit task's); Airflow renders every string in it per run."""
    import yaml

    app = yaml.safe_load(SPARK_APPLICATION.read_text())
    app["metadata"]["name"] = APP_NAMES[task_id][1] + "-{{ data_interval_start | ds_nodash }}"
    app["spec"]["arguments"] = list(arguments)
    return app


def spark_kubernetes_task(task_id: str, arguments: list[str], **kwargs: Any):
    """``recsys-spark ARGUMENTS`` as a SparkApplication of the Spark operator (SparkKubernetesOperator): it
    creates the application, waits for the driver's exit code and deletes it afterwards."""
    from airflow.providers.cncf.kubernetes.operators.spark_kubernetes import SparkKubernetesOperator

    return SparkKubernetesOperator(
        task_id=task_id,
        namespace=_parse_time("namespace"),
        kubernetes_conn_id=_parse_time("kubernetes_conn_id"),
        template_spec=spark_application(task_id, arguments),
        params={
            "image": _parse_time("image"),
            "service_account": _parse_time("service_account"),
            "namespace": _parse_time("namespace"),
        },
        get_logs=True,
        delete_on_termination=True,
        **kwargs,
    )


#: platform -> (DAG id, description, the builder of its Spark tasks): the one difference between the DAGs
PLATFORM_DAGS = {
    "yarn": (
        "recsys_eval_daily",
        "Daily offline evaluation of recommender logs (recsys-spark, spark-submit)",
        spark_submit_task,
    ),
    "kubernetes": (
        "recsys_eval_daily_k8s",
        "Daily offline evaluation of recommender logs (recsys-spark, Spark operator on Kubernetes)",
        spark_kubernetes_task,
    ),
}


# --- the DAGs ---------------------------------------------------------------------------
def build_dag(platform: str) -> DAG:
    """The daily DAG of ``platform`` (``yarn`` or ``kubernetes``): the same tasks, arguments, retries and wiring
    on both; only the operator that runs a command on Spark differs (:data:`PLATFORM_DAGS`)."""
    dag_id, description, spark_task = PLATFORM_DAGS[platform]
    with _dag(dag_id, description) as dag:
        evaluate = spark_task("evaluate", job_arguments(), outlets=output_assets())
        quality_gate = _gate()
        _sensors() >> evaluate >> quality_gate
        if EXPERIMENT:
            # the window to date, every night: a failure is the computation's (retried as evaluate is)
            window = spark_task(
                "experiment_window",
                window_arguments(),
                outlets=[Asset(name="recsys_eval/experiment_window")],
                doc_md=f"Analyses experiment {EXPERIMENT} from experiment_start to the evaluated day.",
            )
            quality_gate >> window
            if GATE_CONFIG:
                # exits 0 once the verdict is written; 3 (a bad gate config) is not transient: no retry
                model_gate = spark_task(
                    "model_gate",
                    gate_arguments(),
                    retries=0,
                    doc_md="Checks the gate config on the window's interval bounds and writes the verdict.",
                )
                window >> model_gate >> _verdict()
    return dag


if "yarn" in PLATFORMS:
    dag = build_dag("yarn")
if "kubernetes" in PLATFORMS:
    k8s_dag = build_dag("kubernetes")
