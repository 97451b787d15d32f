"""The one place that builds a SparkSession.

Under ``spark-submit`` the submitted master and settings are used as they are;
run directly (tests, laptops, ``make demo``) the job builds a local session
(``local[*]`` unless ``--master`` says otherwise) whose Python workers use this
interpreter, so pandas UDFs find pandas and pyarrow.  Settings from the
config's ``[spark]`` table are applied on top; nothing else is hard-coded
except defaults that any of those can override.  A SIGTERM is never raised
inside a call into the JVM, and the local JVM starts in a session of its own
(:mod:`recsys_spark.runtime.signals`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from recsys_spark.config import Config
from recsys_spark.runtime import engine, jvm, log, signals

PROG = "recsys-spark"

#: how the job persists DataFrames: columnar batches kept as objects, spilled to disk under pressure
#: (what ``DataFrame.cache()`` uses).  Not pyspark's ``StorageLevel.MEMORY_AND_DISK``: in Python that is
#: the *serialized* level, which Java-serializes every cached batch again and unrolls the bytes on the
#: heap, which runs a large day out of a small driver heap (docs/performance.md).
CACHE_LEVEL = StorageLevel.MEMORY_AND_DISK_DESER

LOCAL_LOG4J = Path(__file__).with_name("log4j2-local.properties")

JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: the driver JVM's log4j file in a session the job builds itself (:func:`local_java_options` adds the rest)
LOCAL_LOG4J_OPTION = f"-Dlog4j2.configurationFile=file:{LOCAL_LOG4J}"
#: defaults for a session the job builds itself; any key can be overridden (``JAVA_OPTIONS`` too)
LOCAL_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def local_java_options(small_input: bool) -> str:
    """The driver JVM's options of a local session: the log4j file, then
    :func:`recsys_spark.runtime.jvm.driver_options`."""
    return f"{LOCAL_LOG4J_OPTION} {jvm.driver_options(small_input)}".strip()


def job_settings(arrow_batch_rows: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark settings the job runs with, under spark-submit too; ``extra`` (the config's ``[spark]``) wins."""
    return {
        # let AQE coalesce the partitions of the cached labelled exposures: by default a cached plan
        # keeps spark.sql.shuffle.partitions (200) partitions, and every pass over the cache runs 200
        # tiny tasks, which multiplies the job's time (docs/performance.md)
        "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(arrow_batch_rows),
        # exposures and clicks are partitioned by user once; the deduplication (user, request, item), the
        # attribution joins and the per-user pass all reuse that partitioning.  Spark's default (true)
        # re-shuffles a join unless it is partitioned by all of its keys (recsys_spark/steps/label.py)
        "spark.sql.requireAllClusterKeysForCoPartition": "false",
        **(extra or {}),
    }


def job_session(
    cfg: Config, master: str | None = None, verbose: bool = False, app_name: str = PROG, small_input: bool = False
) -> SparkSession:
    """The session of a command: the job's settings (:func:`job_settings`) with the config's ``[spark]``
    table on top, the config's log level (INFO with ``verbose``); ``small_input``: see :func:`build_session`.
    The one place a command builds it; the day's time zone is set by each orchestrator
    (:func:`apply_time_zone`)."""
    return build_session(
        app_name=app_name,
        master=master,
        settings=job_settings(cfg.execution.arrow_batch_rows, cfg.spark),
        log_level="INFO" if verbose else cfg.execution.log_level,
        small_input=small_input,
    )


def under_spark_submit() -> bool:
    """True when this Python process was started by spark-submit (it owns the JVM)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    app_name: str = PROG,
    master: str | None = None,
    settings: Mapping[str, str] | None = None,
    log_level: str = "WARN",
    small_input: bool = False,
) -> SparkSession:
    """Get or create the session; see the module docstring for what is set.

    A local session's driver JVM starts with :func:`recsys_spark.runtime.jvm.driver_options` (the class-data archive
    when there is one; the client compiler only with ``small_input``) unless ``settings`` set
    ``spark.driver.extraJavaOptions`` themselves.

    Refuses Spark Connect (``SPARK_REMOTE``, ``spark.remote``, ``spark.api.mode=connect``, an
    ``sc://`` master) with a one-line :class:`~recsys_spark.errors.UsageError`, before any JVM
    starts where it can tell: the commands need a classic session (:mod:`recsys_spark.runtime.engine`).
    """
    reason = engine.requested(master, settings or {})
    if reason is not None:
        raise engine.refuse(reason)
    signals.guard_jvm_calls()  # a SIGTERM during a JVM call is raised as the call returns, never inside it
    builder = SparkSession.builder.appName(app_name)
    if not under_spark_submit():
        signals.jvm_in_own_session()  # a SIGTERM to the process group leaves the JVM to the clean-up
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = builder.master(master or "local[*]")
        builder = builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        for key, value in LOCAL_DEFAULTS.items():
            builder = builder.config(key, value)
        builder = builder.config(JAVA_OPTIONS, local_java_options(small_input))
    elif master:
        builder = builder.master(master)
    for key, value in (settings or {}).items():
        builder = builder.config(key, value)
    if under_spark_submit() or not log.stderr_is_json():
        spark = builder.getOrCreate()
    else:  # the JVM starts here: its stderr (and its workers') as JSON lines, as the job's own
        with log.child_stderr():
            spark = builder.getOrCreate()
    if engine.is_connect(spark):  # e.g. spark-submit --conf spark.api.mode=connect
        raise engine.refuse("a Spark Connect session")
    spark.sparkContext.setLogLevel(log_level)
    return spark


def apply_time_zone(spark: SparkSession, zone: str) -> None:
    """Read the day in ``zone`` (``validation.time_zone``): Spark's timestamps without zone, the hour and
    weekday slices and every date function follow the session's zone.  The one place it is set; every
    orchestrator calls it before it reads, with the zone it also hands as an argument to what computes on
    the driver (the day's bounds, :func:`recsys_spark.steps.validate.day_start`): the library never reads
    the zone back from the session, nor assumes one where an argument is missing."""
    spark.conf.set("spark.sql.session.timeZone", zone)


@contextmanager
def fixed_shuffles(spark: SparkSession, partitions: int) -> Iterator[None]:
    """Plan the queries run inside without adaptive query execution, with ``partitions`` shuffle
    partitions; the session's own values are restored on the way out.

    For validation and the stages after labelling (:func:`recsys_spark.daily.stages.outside_label`): their
    queries count rows per reason, or read the persisted user partitions in place and move partial sums or
    per-user rows, so adaptive re-planning has little to coalesce or split, while it makes every shuffle a
    job of its own and re-plans the query between them (docs/performance.md).  The few shuffles whose size
    follows the exposures (the pooled AUC's sort, the previous day's item sets, the bootstrap's item pairs)
    get ``partitions``, the day's user-partition count, which grows with the day as AQE's coalescing would.
    """
    wanted = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(partitions)}
    before = {key: spark.conf.get(key, None) for key in wanted}
    for key, value in wanted.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
