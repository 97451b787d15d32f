"""Example Airflow 3 DAG: run the recsys-spark daily evaluation with spark-submit.

How to adopt it
  1. Copy this file into your DAGs folder (or DAG bundle). It needs Airflow 3.x and
     ``apache-airflow-providers-apache-spark`` on the scheduler/workers, and
     ``spark-submit`` on the workers' PATH (or ``spark_binary`` in the connection).
  2. Build the artefacts the task ships: ``dist/recsys_spark.zip`` (``--py-files``)
     and, unless your cluster image already has pandas/pyarrow, a venv-pack archive
     ``env.tar.gz`` (``--archives env.tar.gz#environment``).
  3. Point the settings below at your deployment. Edit the defaults in ``SETTINGS``,
     or override per environment without touching the file:
       * Airflow Variable ``recsys_eval_<key>`` -- read at run time through a template
         (keys marked "run time"), so parsing the file never hits the metadata DB;
       * environment variable ``RECSYS_EVAL_<KEY>`` -- read when the file is parsed;
         the only way for the keys marked "parse time", which shape the task itself.
  4. Create the Spark connection named by ``conn_id`` (default ``spark_default``):
     master, deploy mode, queue, spark_binary ... live there.

Date semantics: a run evaluates the day of its data interval's start,
``{{ data_interval_start | ds }}``, not the run date ``ds``. The run scheduled at
02:30 UTC on 2026-11-21 covers [2026-11-20 02:30, 2026-11-21 02:30) and evaluates
2026-11-20. The schedule is an explicit ``CronTriggerTimetable`` with a one-day
interval: a bare ``"@daily"`` in Airflow 3 gives a zero-length interval, so
``data_interval_start`` would be the run day itself (a day that is still being written).

Failures: every non-zero exit of the job (bad arguments/config, missing or bad input,
a hard business rule violated -- outputs still written --, unexpected error; the codes
are listed in docs/operations.md, "Exit codes") makes spark-submit exit non-zero, so
SparkSubmitOperator raises and the try fails. It is retried ``retries`` times first: for
a rule violation a retry cannot help, but it only re-runs the same day (rewriting that
day's outputs) and fails the same way.
"""

from __future__ import annotations

import os
import shlex
from datetime import UTC, datetime, timedelta

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

try:
    from airflow.sdk import CronTriggerTimetable
except ImportError:  # Airflow releases whose SDK does not export timetables yet
    from airflow.timetables.trigger import CronTriggerTimetable

# --------------------------------------------------------------------------------------
# Deployment settings: the one place to edit.
# key -> default. When each key is read (and how to override it) is noted per group.
# --------------------------------------------------------------------------------------
_APP_HOME = "/opt/recsys-spark"  # where the repo's jobs/ and dist/ are deployed
SETTINGS: dict[str, str] = {
    # run time: Airflow Variable recsys_eval_<key>, else RECSYS_EVAL_<KEY>, else default
    "input_root": "/data/recsys/logs",  # --input-root (hdfs://, s3a://, file paths...)
    "output_root": "/data/recsys/eval",  # --output-root
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
}


def _parse_time(key: str) -> str:
    return os.environ.get(f"RECSYS_EVAL_{key.upper()}", SETTINGS[key])


def _run_time(key: str) -> str:
    """A template: Variable ``recsys_eval_<key>`` when the task runs, else env/default."""
    return f"{{{{ var.value.get({f'recsys_eval_{key}'!r}, {_parse_time(key)!r}) }}}}"


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

# The day to evaluate: the start of the run's data interval (see the module docstring).
EVAL_DATE = "{{ data_interval_start | ds }}"

application_args = [
    "evaluate",
    "--date", EVAL_DATE,
    "--input-root", INPUT_ROOT,
    "--output-root", OUTPUT_ROOT,
]  # fmt: skip
if CONFIG_FILE:
    application_args += ["--config", CONFIG_FILE]
for override in OVERRIDES:
    application_args += ["--set", override]

spark_conf: dict[str, str] = {}
if ENV_ARCHIVE:
    # executors (and a cluster-mode driver) run the unpacked venv-pack archive
    spark_conf["spark.pyspark.python"] = "./environment/bin/python"
if DRIVER_PYTHON:
    spark_conf["spark.pyspark.driver.python"] = DRIVER_PYTHON

with DAG(
    dag_id="recsys_eval_daily",
    description="Daily offline evaluation of recommender logs (recsys-spark)",
    schedule=CronTriggerTimetable(SCHEDULE_CRON, timezone="UTC", interval=timedelta(days=1)),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    # No automatic catch-up of missed days. To (re)evaluate past days, either
    #   airflow backfill create --dag-id recsys_eval_daily --from-date 2026-11-02 --to-date 2026-11-10
    # (dates are run dates: each run evaluates the day before, here 2026-11-01..2026-11-09),
    # or run the job once over a range with its own --start/--end outside Airflow.
    catchup=False,
    max_active_runs=1,
    default_args={
        "owner": "recsys",
        # Any non-zero exit fails the try. Retries help with transient cluster/IO
        # failures; for exit 8 (hard rule violated, see recsys_spark/errors.py) a retry is useless but harmless.
        "retries": 2,
        "retry_delay": timedelta(minutes=10),
        "execution_timeout": timedelta(hours=4),
    },
    tags=["recsys", "spark", "evaluation"],
) as dag:
    evaluate = SparkSubmitOperator(
        task_id="evaluate",
        conn_id=CONN_ID,
        name="recsys_eval_daily_{{ data_interval_start | ds_nodash }}",
        application=APPLICATION,
        application_args=application_args,
        py_files=PY_FILES,
        archives=f"{ENV_ARCHIVE}#environment" if ENV_ARCHIVE else None,
        conf=spark_conf,
        # In YARN *cluster* mode on Airflow >= 3.3 the operator is "durable" by default
        # and then requires yarn_track_via_rm_api=True (plus the connection extra
        # yarn_resourcemanager_webapp_address); otherwise pass durable=False.
    )
