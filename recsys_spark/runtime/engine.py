"""Facts about the engine a session runs on: classic or Spark Connect, its parallelism, whether a path exists.

The bottom of the house: these functions answer questions and orchestrate nothing; everything above
may ask them.  A Spark Connect session (``SparkSession.builder.remote("sc://host")``, ``SPARK_REMOTE``,
``spark.api.mode=connect``) has the DataFrame and catalog APIs but no ``SparkContext``: no py4j gateway
(so no Hadoop ``FileSystem``), no accumulators, no status tracker.  The day's orchestrator runs on both;
what differs is its output (docs/catalog.md, "Spark Connect").
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from recsys_spark.errors import UsageError

#: what the commands say when they are asked to run on Spark Connect (one line, exit 2)
UNSUPPORTED = (
    "Spark Connect is not supported by the recsys-spark commands: the path output's lock, staging and "
    "atomic commit need a classic session (spark-submit, --master); on Connect the day runs from Python "
    "with a scratch output (recsys_spark.daily.evaluate_day with write.ScratchOutput, docs/catalog.md)"
)


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session (no SparkContext, no py4j)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def requested(master: str | None, settings: Mapping[str, str], environ: Mapping[str, str] | None = None) -> str | None:
    """Why a session built with ``master`` and ``settings`` would be a Connect session, or None."""
    env = os.environ if environ is None else environ
    if env.get("SPARK_REMOTE"):
        return f"SPARK_REMOTE={env['SPARK_REMOTE']}"
    if env.get("SPARK_CONNECT_MODE_ENABLED"):
        return "SPARK_CONNECT_MODE_ENABLED is set"
    if settings.get("spark.remote"):
        return f"spark.remote={settings['spark.remote']}"
    if str(settings.get("spark.api.mode", "")).lower() == "connect":
        return "spark.api.mode=connect"
    if master and master.startswith("sc://"):
        return f"--master {master}"
    return None


def refuse(reason: str) -> UsageError:
    return UsageError(f"{UNSUPPORTED} (given {reason})")


def path_exists(spark: SparkSession, path: str) -> bool:
    """Does ``path`` exist (a directory, even empty, or a file)? Asked of the data source, no py4j.

    The ``binaryFile`` source has a fixed schema, so resolving it only lists ``path``: Spark answers
    ``PATH_NOT_FOUND`` when it is absent.  The path is taken as a glob pattern (as every Spark read
    does); the job's paths have no glob characters.
    """
    from pyspark.errors import AnalysisException

    try:
        spark.read.format("binaryFile").load(path).schema  # noqa: B018 - analysis is the check
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc):
            return False
        raise
    return True


def default_parallelism(spark: SparkSession) -> int:
    """``sparkContext.defaultParallelism`` of a classic session; on Connect, from the settings.

    Connect has no SparkContext: ``spark.default.parallelism`` when set, else the cores of a
    ``local[N]`` master, else ``spark.sql.shuffle.partitions``.
    """
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return int(configured)
    master = spark.conf.get("spark.master", None) or ""
    if master.startswith("local[") and master[6:-1].isdigit():
        return int(master[6:-1])
    if master == "local":
        return 1
    if master == "local[*]":  # the server's cores; this machine's when the server runs here
        return os.cpu_count() or 1
    return int(spark.conf.get("spark.sql.shuffle.partitions", None) or 200)


def physical_plan(df: DataFrame) -> str:
    """The physical plan Spark would run for ``df`` as text (planned, nothing run): the JVM's on a classic
    session, the server's ``explain`` on Connect."""
    if is_connect(df.sparkSession):
        return df._explain_string(mode="simple")  # type: ignore[operator]  # Connect's DataFrame only
    return str(df._jdf.queryExecution().executedPlan().toString())
