"""From a notebook: a day's metrics from two DataFrames, and an MLlib ``Evaluator`` for ``CrossValidator``.

:func:`evaluate` runs the daily job (:func:`recsys_spark.daily.evaluate_day`: the same validation,
labelling, metrics, intervals, health and rules) on DataFrames a data scientist already has, and returns
the ``metrics`` and ``user_metrics`` tables as DataFrames, with nothing written under any output root
of theirs: the inputs and the tables live in a scratch directory (a temporary one by default; give
``scratch=`` a shared path on a cluster), removed by :meth:`Evaluation.close`.

:class:`RankingEvaluator` scores a predictions DataFrame (user, item, prediction, label: what an
``ALS`` model's ``transform`` gives after a join with held-out labels) by one of the job's per-user metrics,
NDCG@k, MAP@k, precision@k, recall@k, hit rate@k, MRR or AUC, averaged over users (``user_avg``: GAUC
for AUC), through the same per-user pass as the daily job; ``isLargerBetter`` comes from the metric
registry, so ``CrossValidator`` keeps the best model.  docs/notebook.md has a runnable example.
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.ml.evaluation import Evaluator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from recsys_spark import registry
from recsys_spark.config import Config, load_config
from recsys_spark.errors import HardRuleViolation, SchemaError, UsageError
from recsys_spark.runtime.session import apply_time_zone
from recsys_spark.schema import (
    ALL,
    CLICK_COLUMNS,
    CLICKED,
    COPIES,
    EXPOSURE_COLUMNS,
    ITEM,
    N_EVENTS,
    POSITION,
    RELEVANCE,
    REQUEST,
    SCORE,
    SESSION,
    SLICE,
    TS,
    USER,
    ColumnSpec,
)


@dataclass
class Evaluation:
    """What :func:`evaluate` gives back: the day's tables as DataFrames and its summary.

    ``metrics`` (metric, k, aggregation, slice, value, n, se, ci_low, ci_high, ci_method, threshold: null on a day),
    ``user_metrics`` (one row per slice, user and k), ``rule_checks``, ``lorenz``: as docs/operations.md
    describes them.  They are read from ``scratch``; call :meth:`close` when done with them.
    """

    metrics: DataFrame
    user_metrics: DataFrame
    rule_checks: DataFrame
    lorenz: DataFrame
    summary: dict[str, Any]
    scratch: str
    _owned: bool = field(default=True, repr=False)

    def value(self, metric: str, k: int | None = None, aggregation: str = "user_avg", slice: str = ALL) -> float | None:
        """One number of the ``metrics`` table (None when it has no such row or the value is null)."""
        registry.metric(metric)  # an unknown name fails here, with the nearest names
        rows = (
            self.metrics.where(
                (F.col("metric") == metric)
                & (F.col("aggregation") == aggregation)
                & (F.col("slice") == slice)
                & (F.col("k").isNull() if k is None else F.col("k") == k)
            )
            .select("value")
            .collect()
        )
        return None if not rows or rows[0]["value"] is None else float(rows[0]["value"])

    def close(self) -> None:
        """Remove the scratch directory (when :func:`evaluate` made it)."""
        if self._owned:
            shutil.rmtree(self.scratch, ignore_errors=True)


#: what a contract column of each kind may be, said when a DataFrame's column is of another type
_EXPECTED = {
    "timestamp": "a timestamp, a date or a date-time string (epoch seconds: F.timestamp_seconds(col); milliseconds: "
    "F.timestamp_millis(col))",
    "id": "a string or an integer",
    "int": "a number",
    "double": "a number",
    "string": "a string or an integer",
}


def check_workers(spark: SparkSession) -> None:
    """A :class:`UsageError` when a local session's Python workers run an interpreter that cannot import pyarrow
    and pandas (the per-user pass needs both): a session built in a notebook whose venv is not activated runs
    its workers on ``python3`` from ``PATH`` (PySpark reads ``PYSPARK_PYTHON`` when the session starts, not
    ``spark.pyspark.python``), and the pass then failed deep in a worker with ``No module named 'pyarrow'``.
    Nothing is checked on a cluster (its workers' Python is the cluster's) or when the workers run this one."""
    try:
        context = spark.sparkContext
        master, python = str(context.master), str(context.pythonExec)
    except Exception:  # noqa: BLE001 - a Spark Connect session has no SparkContext: its server runs the workers
        return
    if not master.startswith("local") or os.path.abspath(shutil.which(python) or python) == sys.executable:
        return
    try:
        ok = subprocess.run([python, "-c", "import pyarrow, pandas"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    if not ok:
        raise UsageError(
            f"the session's Python workers run {python!r} (PYSPARK_PYTHON), which cannot import pyarrow and pandas: "
            "start the session after os.environ['PYSPARK_PYTHON'] = sys.executable (docs/notebook.md)"
        )


def _spark_frame(frame: Any, what: str, spark: SparkSession | None) -> DataFrame:
    """``frame`` as a Spark DataFrame: a pandas DataFrame is converted with ``spark`` (or the active session)."""
    if isinstance(frame, DataFrame):
        return frame
    if type(frame).__module__.split(".", 1)[0] != "pandas":
        raise TypeError(f"evaluate: {what} must be a Spark or a pandas DataFrame, got {type(frame).__name__}")
    session = spark or SparkSession.getActiveSession()
    if session is None:
        raise UsageError(f"evaluate: {what} is a pandas DataFrame and no Spark session is active: give spark=")
    return session.createDataFrame(frame)


def _contract(frame: DataFrame, columns: Sequence[ColumnSpec], what: str, mapping: Mapping[str, str]) -> DataFrame:
    """``frame`` renamed by its ``input.columns`` mapping (``mapping``: the shared one and the input's own) and
    cast to the input contract as the command line reads a file (:func:`recsys_spark.io.read.conform`: a
    timestamp, date or string ``ts``; ids as strings), without running a job; a ValueError naming the column and
    what it expects when one is missing or of a type the job refuses (an integer ``ts``: epoch seconds are not
    guessed, as on the command line)."""
    from recsys_spark.io.catalog import rename_columns
    from recsys_spark.io.read import conform

    try:
        return conform(rename_columns(frame, mapping), columns, what)
    except SchemaError as exc:
        text = str(exc)
        spec = next((c for c in columns if f"column {c.name!r}" in text), None)
        if spec is None:
            hint = "the input contract: docs/operations.md"
        elif "missing column" in text:
            hint = f"the input contract, docs/notebook.md; another name maps with input.columns ({spec.name} = ...)"
        else:
            hint = f"expected {_EXPECTED[spec.kind]}"
        raise ValueError(f"evaluate: {text} ({hint})") from None


def _the_day(exposures: DataFrame, zone: str) -> dt.date:
    """The one day the exposures' timestamps fall on, in ``zone``; a UsageError when they span several."""
    apply_time_zone(exposures.sparkSession, zone)
    first, last = exposures.select(F.min(F.to_date(TS)), F.max(F.to_date(TS))).first()  # type: ignore[misc]
    if first is None:
        raise UsageError("evaluate: the exposures have no timestamp (an empty frame?): give date=")
    if first != last:
        raise UsageError(f"evaluate: the exposures span {first}..{last} ({zone}): give the day with date=")
    return first


def evaluate(
    exposures: DataFrame | Any,
    clicks: DataFrame | Any,
    *,
    items: DataFrame | Any | None = None,
    date: dt.date | str | None = None,
    config: Config | None = None,
    settings: Sequence[str] = (),
    scratch: str | None = None,
    spark: SparkSession | None = None,
) -> Evaluation:
    """The daily job on two DataFrames; its tables back as DataFrames (see the module docstring).

    Parameters
    ----------
    exposures, clicks : the input contract's columns (docs/operations.md, "Input contract"): exposures
        ``user_id, session_id, request_id, item_id, position, ts[, score]``, clicks ``user_id, session_id,
        request_id, item_id, ts[, event]``; other names map with ``settings=['input.columns={user_id = "uid"}']``
        (every input) or ``input.columns.exposures`` / ``.clicks`` / ``.items`` (one input).  Spark or pandas
        DataFrames (pandas ones are converted with ``spark``, by default the active session).
    items : optional ``item_id, category`` (coverage, Gini over the catalog, category diversity).
    date : the day the rows belong to (rows outside it by more than ``validation.ts_tolerance_minutes``
        are set aside); by default the one day the exposures' timestamps fall on.
    config, settings : a :class:`~recsys_spark.config.Config`, or ``--set``-style overrides of the defaults.
    scratch : a directory for the inputs and the tables (default: a new temporary directory).

    A day that breaks a hard business rule is returned all the same (``summary["status"]`` says so).
    """
    exposures = _spark_frame(exposures, "exposures", spark)
    session: SparkSession = exposures.sparkSession
    clicks = _spark_frame(clicks, "clicks", session)
    items = None if items is None else _spark_frame(items, "items", session)
    cfg = config or load_config(None, list(settings))
    check_workers(session)
    # each frame renamed by its own mapping before any column is read (the day below reads the mapped ts)
    conformed = _contract(exposures, EXPOSURE_COLUMNS, "exposures", cfg.input.columns_for("exposures"))
    _contract(clicks, CLICK_COLUMNS, "clicks", cfg.input.columns_for("clicks"))
    day = dt.date.fromisoformat(date) if isinstance(date, str) else date
    if day is None:
        day = _the_day(conformed, cfg.validation.time_zone)
    owned = scratch is None
    root = scratch or tempfile.mkdtemp(prefix="recsys-spark-")
    if owned:
        atexit.register(shutil.rmtree, root, True)
    inputs, out = f"{root.rstrip('/')}/input", f"{root.rstrip('/')}/output"
    partition = f"dt={day.isoformat()}"
    exposures.write.mode("overwrite").parquet(f"{inputs}/exposures/{partition}")
    clicks.write.mode("overwrite").parquet(f"{inputs}/clicks/{partition}")
    if items is not None:
        items.write.mode("overwrite").parquet(f"{inputs}/items")
    from recsys_spark import daily

    try:
        summary = daily.evaluate_day(session, cfg, day, inputs, out)
    except HardRuleViolation:  # everything is written: the caller reads the status
        summary = json.loads(Path(out, "summary", partition, "summary.json").read_text(encoding="utf-8"))

    def table(name: str) -> DataFrame:
        return session.read.parquet(f"{out}/{name}/{partition}")

    return Evaluation(
        table("metrics"), table("user_metrics"), table("rule_checks"), table("lorenz"), summary, root, owned
    )


# --- MLlib ---------------------------------------------------------------------------------------
class RankingEvaluator(Evaluator):
    """An MLlib ``Evaluator`` of a predictions DataFrame by one of the job's per-user metrics.

    Each user's predictions form one list, ranked by ``predictionCol`` (ties by item id); ``labelCol`` > 0
    marks a relevant item, its value the graded relevance for NDCG.  The metric is averaged over the users
    with a relevant item (``user_avg``; AUC over users with both classes: GAUC), as in the daily job
    (docs/metrics.md).  Usable in ``CrossValidator`` and ``TrainValidationSplit``.
    """

    METRICS = ("ndcg", "map", "precision", "recall", "hit_rate", "mrr", "auc")

    def __init__(
        self,
        metric: str = "ndcg",
        k: int = 10,
        userCol: str = "user",  # noqa: N803 - MLlib's names
        itemCol: str = "item",  # noqa: N803
        predictionCol: str = "prediction",  # noqa: N803
        labelCol: str = "label",  # noqa: N803
    ) -> None:
        super().__init__()
        if metric not in self.METRICS:
            raise ValueError(f"RankingEvaluator: metric must be one of {', '.join(self.METRICS)}, got {metric!r}")
        if registry.metric(metric).at_k and k <= 0:
            raise ValueError(f"RankingEvaluator: k must be positive, got {k}")
        self.metric, self.k = metric, k
        self.userCol, self.itemCol, self.predictionCol, self.labelCol = userCol, itemCol, predictionCol, labelCol

    def isLargerBetter(self) -> bool:  # noqa: N802 - MLlib's name
        return bool(registry.metric(self.metric).higher_is_better)

    def _refuse_null_ids(self, dataset: DataFrame) -> None:
        """A ValueError naming the column when one is missing, when a row has a null user or item (such a row
        belongs to no list: a null user crashed the per-user pass; a null item was scored as an item of its
        own), or a NaN or null prediction (ALS's prediction for a user or item it did not train on: Spark sorts
        NaN above every number, so it was ranked first, silently).  One Spark job counts them all, skipped when
        the schema says no column can hold one."""
        cols = {"user": self.userCol, "item": self.itemCol}
        for role, col in (*cols.items(), ("prediction", self.predictionCol), ("label", self.labelCol)):
            if col not in dataset.columns:
                raise ValueError(f"RankingEvaluator: no column {col!r} ({role}Col) in {', '.join(dataset.columns)}")
        counts = {role: F.col(col).isNull() for role, col in cols.items() if dataset.schema[col].nullable}
        prediction = F.col(self.predictionCol)
        kind = dataset.schema[self.predictionCol].dataType
        if isinstance(kind, (T.FloatType, T.DoubleType)):
            counts["prediction"] = prediction.isNull() | F.isnan(prediction)
        elif dataset.schema[self.predictionCol].nullable:
            counts["prediction"] = prediction.isNull()
        if not counts:
            return
        found = dataset.select(*(F.count(F.when(bad, 1)).alias(role) for role, bad in counts.items())).first()
        assert found is not None
        for role, col in cols.items():
            if role in counts and found[role]:
                raise ValueError(
                    f"RankingEvaluator: {found[role]} row(s) with a null {role} ({role}Col {col!r}): a prediction "
                    f"must name its {role}; drop them first (dataset.dropna(subset=[{col!r}]))"
                )
        if "prediction" in counts and found["prediction"]:
            col = self.predictionCol
            raise ValueError(
                f"RankingEvaluator: {found['prediction']} row(s) with a NaN or null prediction (predictionCol "
                f"{col!r}): such a row has no rank (ALS predicts NaN for a user or item it did not train on); "
                f"drop them first (dataset.dropna(subset=[{col!r}]), or ALS(coldStartStrategy='drop'))"
            )

    def _evaluate(self, dataset: DataFrame) -> float:
        from recsys_spark.daily.stages import run_metric_stage
        from recsys_spark.io.scratch import ScratchOutput

        check_workers(dataset.sparkSession)
        self._refuse_null_ids(dataset)
        at_k = registry.metric(self.metric).at_k
        cfg = load_config(None, [f"metrics.k=[{self.k if at_k else 10}]"])
        rank = Window.partitionBy(USER).orderBy(F.col(SCORE).desc(), F.col(ITEM))
        label = F.col(self.labelCol).cast("double")
        labelled = (
            dataset.select(
                F.col(self.userCol).cast("string").alias(USER),
                F.col(self.itemCol).cast("string").alias(ITEM),
                F.col(self.predictionCol).cast("double").alias(SCORE),
                F.when(label > 0, label).otherwise(F.lit(0.0)).alias(RELEVANCE),
            )
            .groupBy(USER, ITEM)  # an item predicted twice for a user counts once (MLlib's counts each)
            .agg(F.max(SCORE).alias(SCORE), F.max(RELEVANCE).alias(RELEVANCE))
            .withColumn(POSITION, F.row_number().over(rank))
            .select(
                F.lit(ALL).alias(SLICE),
                USER,
                F.col(USER).alias(SESSION),
                F.col(USER).alias(REQUEST),
                ITEM,
                POSITION,
                SCORE,
                RELEVANCE,
                (F.col(RELEVANCE) > 0).alias(CLICKED),
                F.lit(1).cast("long").alias(COPIES),
                (F.col(RELEVANCE) > 0).cast("long").alias(N_EVENTS),
            )
        )
        scratch = tempfile.mkdtemp(prefix="recsys-spark-eval-")
        try:
            metrics = run_metric_stage(labelled, cfg, ScratchOutput(dataset.sparkSession, scratch, "x"), 10_000)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        k = self.k if at_k else None
        for row in metrics.rows:
            if (row.metric, row.k, row.aggregation, row.slice) == (self.metric, k, "user_avg", ALL):
                return float("nan") if row.value is None else float(row.value)
        return float("nan")
