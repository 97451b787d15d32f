"""Spark Connect: what runs on a Connect session, and the stand-ins that make it run there.

A Connect session (``SparkSession.builder.remote("sc://host")``, ``SPARK_REMOTE``,
``spark.api.mode=connect``) has the DataFrame and catalog APIs but no ``SparkContext``: no py4j
gateway (so no Hadoop ``FileSystem`` through ``_jvm``), no accumulators, no RDDs, no status
tracker.  What that means here (README, docs/catalog.md "Spark Connect"):

* **Runs on Connect**: :func:`evaluate_metrics`, the computation of a day: reading the inputs
  (``table:`` or paths), validating, labelling, the per-user pandas pass, the aggregates and
  their intervals, the health indicators and the rules; it writes ``user_metrics``, ``metrics``,
  ``lorenz`` and ``rule_checks`` as plain Parquet overwrites under a directory and returns the
  summary.  The stand-ins: a path's existence is asked of the data source
  (:func:`path_exists`), and the per-user pass's sums come from its own output instead of an
  accumulator (:class:`DeferredTotals`).
* **Classic only**: ``recsys-spark evaluate`` (and the other commands): the path output's
  lock, staging directory and atomic rename commit, ``summary.json`` and ``_SUCCESS``
  (:mod:`recsys_spark.write`), which need a file system's create-if-absent and rename; the CLI
  refuses a Connect session with one line (:func:`refuse`).
"""

from __future__ import annotations

import datetime as dt
import os
import pickle
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession

from recsys_spark.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

    from recsys_spark.aggregate import MetricRow
    from recsys_spark.config import Config
    from recsys_spark.per_user import PassTotals
    from recsys_spark.rules import RuleResult

#: what the CLI says when it is asked to run on Spark Connect (one line, exit 2)
UNSUPPORTED = (
    "Spark Connect is not supported by the recsys-spark commands: the path output's lock, staging and "
    "atomic commit need a classic session (spark-submit, --master); on Connect only the computation runs "
    "(recsys_spark.connect.evaluate_metrics, docs/catalog.md)"
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


# --- stand-ins for the classic-only calls -----------------------------------------------------
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


class DeferredTotals:
    """The per-user pass's accumulator on Connect: the same :class:`~per_user.PassTotals`, by aggregation.

    ``frame`` (the pass's output, persisted by the caller so that writing it computes it once) is
    reduced partition by partition to the same mergeable sums the pass's tasks add to the
    accumulator on a classic session; the users over ``max_user_rows`` are a count per user of
    ``rows`` (the pass counts a user's rows of every slice, so does this).  Computed on the first
    read of :attr:`value`, after the table was written; then ``frame`` is unpersisted.
    """

    def __init__(self, rows: DataFrame, frame: DataFrame, ks: Sequence[int], max_user_rows: int | None) -> None:
        self.rows, self.frame, self.ks, self.max_user_rows = rows, frame, tuple(ks), max_user_rows
        self._value: PassTotals | None = None

    @property
    def value(self) -> PassTotals:
        if self._value is None:
            self._value = self._compute()
            self.frame.unpersist()
        return self._value

    def _compute(self) -> PassTotals:
        from pyspark.sql import functions as F

        from recsys_spark.kernels.moments import merge_by_slice
        from recsys_spark.per_user import PassTotals
        from recsys_spark.schema import USER

        ks = self.ks

        def partition_moments(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # executors
            import pyarrow as pa

            from recsys_spark.kernels.moments import user_table_moments

            tables = list(batches)
            if not tables:
                return
            frame = pa.Table.from_batches(tables).to_pandas()
            blob = pickle.dumps(user_table_moments(frame, ks))
            yield pa.RecordBatch.from_pydict({"moments": [blob]}, pa.schema([("moments", pa.binary())]))

        moments: dict = {}
        for row in self.frame.mapInArrow(partition_moments, "moments binary").collect():
            merge_by_slice(moments, pickle.loads(row["moments"]))
        set_aside: dict[str, int] = {}
        if self.max_user_rows is not None:
            over = self.rows.groupBy(USER).count().where(F.col("count") > self.max_user_rows)
            set_aside = {r[USER]: int(r["count"]) for r in over.collect()}
        return PassTotals(moments, set_aside)


# --- the computation of a day, on any session -------------------------------------------------
class ScratchOutput:
    """Where :func:`evaluate_metrics` writes: ``root/<table>``, each a plain Parquet overwrite.

    No lock, no staging, no atomic commit (those are :class:`recsys_spark.write.DailyOutput`'s and
    need a classic session): a reader may see a table half replaced while a run writes it.
    """

    swept: list[str] = []
    recovered: list[str] = []

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self.tables: list[str] = []

    def stage(self, table: str, df: DataFrame) -> str:
        path = f"{self.root}/{table}"
        df.write.mode("overwrite").parquet(path)
        self.tables.append(table)
        return path


@dataclass
class DayMetrics:
    """What :func:`evaluate_metrics` computed: the ``metrics`` rows, the rules, and the summary."""

    rows: list[MetricRow]
    rules: list[RuleResult]
    summary: dict[str, Any]
    output: str  # the directory of user_metrics, metrics, lorenz, rule_checks


def evaluate_metrics(spark: SparkSession, cfg: Config, date: dt.date, input_root: str, output_dir: str) -> DayMetrics:
    """The day's computation, as :func:`pipeline.evaluate_day` does it, on a classic or a Connect session.

    read -> validate -> label -> per-user pass and aggregates -> health -> rules, the same functions
    (so the same numbers: tested against a classic ``evaluate_day`` of the same day); the tables go to
    ``output_dir`` (:class:`ScratchOutput`). Left out: experiments (they read the committed daily
    tables of other days), the path output's lock and commit, ``summary.json``, the catalog publish.
    """
    from recsys_spark import log, pipeline, templates
    from recsys_spark.aggregate import metrics_frame
    from recsys_spark.health import lorenz_frame
    from recsys_spark.rules import as_dicts, rules_frame
    from recsys_spark.schema import ALL

    iso = date.isoformat()
    templates.configure(templates.InputSettings.of(cfg.input))
    paths = pipeline.InputPaths.resolve(cfg, input_root, iso)
    spark.conf.set("spark.sql.session.timeZone", cfg.validation.time_zone)
    out = ScratchOutput(output_dir)
    timings: dict[str, float] = {}
    with log.stage("read", timings, date=iso):
        inputs = pipeline.read_inputs(spark, cfg, paths)
        history = pipeline.read_history(spark, cfg, input_root, date)
    with log.stage("validate", timings):
        valid = pipeline.validate_inputs(spark, inputs, cfg, date, paths)
    day = pipeline.Day(date, paths, inputs, valid, history)
    labelled = None
    try:
        with log.stage("label", timings):
            labelled = pipeline.label_day(spark, day, cfg)
        with log.stage("metrics", timings):
            metrics = pipeline.metric_stage(labelled, cfg, out)  # type: ignore[arg-type]  # out: its stage()
        with log.stage("health", timings):
            health = pipeline.health_stage(spark, labelled, day, cfg)
            rows = metrics.rows + health.rows
            out.stage("lorenz", lorenz_frame(spark, health.lorenz))
            out.stage("metrics", metrics_frame(spark, rows).coalesce(1))
        with log.stage("rules", timings):
            rules = pipeline.rules_stage(labelled, day, cfg)
            out.stage("rule_checks", rules_frame(spark, rules).coalesce(1))
        summary = pipeline.build_summary(
            cfg,
            iso,
            paths,
            valid.exposure_counts,
            valid.click_counts,
            labelled.labels,
            metrics.unit_counts.get(ALL, {}),
            rows,
            timings,
        )
        summary["rules"] = as_dicts(rules)
        summary["status"] = pipeline.status_of(rules)
        summary["provisional"] = history.provisional
        summary["notes"] = health.notes + metrics.notes + pipeline.day_notes(day, out)  # type: ignore[arg-type]
    finally:
        if labelled is not None:
            labelled.unpersist()
    return DayMetrics(rows, rules, summary, out.root)
