"""Benchmark: the job against the floor and its peers, on generated days (``make bench``).

    python -m benchmarks.bench                      # 1M, 5M and 20M exposures, 3 repeats
    python -m benchmarks.bench --sizes 1M --repeats 5
    python -m benchmarks.bench --smoke              # seconds: a tiny day, one repeat

One SparkSession (``local[2]``, 2 GB driver unless told otherwise), one generated
day per size (``recsys_spark.synthetic.generate``, reused when its parameters match), and
per size, after a warm-up round, ``--repeats`` rounds that each time every task
once, interleaved, so that a noisy machine slows all of them alike:

* **floor**: read the day, deduplicate and attribute clicks to exposures with
  the job's own join (:func:`label.join_feedback`), then per user the count,
  the sum of relevance and of duplicates.  The relevance sum is what keeps the join: with a bare
  ``groupBy(user_id).count()`` no click column is used, the click side is
  unique on the join keys, and Spark's optimiser drops the attribution join
  altogether (seen in ``explain()``);
* **metric stage** (ours): labelled exposures (cached, as in the job) to the
  per-user table (written) and every aggregate, every metric at every default
  k plus exact global AUC and GAUC: the calls of the job's "metrics" stage;
* **whole job** (ours): :func:`pipeline.evaluate_day`, read to written outputs;
* **peers**, from the same cached labelled exposures: Spark MLlib's
  ``RankingEvaluator`` (its 5 metrics at k = 10, including the ``collect_list``
  that builds its lists), ``BinaryClassificationEvaluator`` (default
  ``numBins`` and ``numBins=0``), and a plain ``groupBy("user_id").applyInPandas``
  computing AUC, NDCG@10 and AP@10 one user per call (timed once per size, on a
  user subsample above ``--plain-max-rows``; its time is scaled up and marked).

Then it checks that our numbers agree with the peers' where the definitions
coincide (and shows the difference where they do not), that the per-user stage
shuffles labelled exposures once, and prints one markdown report (also written
to ``<root>/report.md``, with the raw numbers in ``<root>/results.json``).
Timed assertions belong here, never in the unit tests.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import io
import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config, load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.daily.stages import run_metric_stage
from recsys_spark.errors import HardRuleViolation
from recsys_spark.io.read import conform, read_parquet
from recsys_spark.io.staged import DailyOutput
from recsys_spark.kernels.user_day import user_day_columns
from recsys_spark.per_user.aggregate import metrics_frame
from recsys_spark.per_user.table import UserMetrics, bucket_count, persist_user_rows, ranking_input
from recsys_spark.per_user.user_pass import OUTPUT_DDL, pass_function
from recsys_spark.runtime.session import CACHE_LEVEL
from recsys_spark.schema import (
    ALL,
    CLICK_COLUMNS,
    CLICKED,
    COPIES,
    EXPOSURE_COLUMNS,
    ITEM,
    LIST_ID,
    N_CLICKS,
    POSITION,
    RELEVANCE,
    REQUEST,
    SCORE,
    SLICE,
    USER,
)
from recsys_spark.steps.label import by_user, deduplicate_exposures, join_feedback
from recsys_spark.steps.label_arrow import (
    label_in_python,
    label_order,
    label_table,
    one_stream,
    whole_units,
    window_micros,
)
from recsys_spark.synthetic import generate

# The benchmark is not installed with the package: Spark's Python workers could not import it by name, so
# its functions (the plain per-user UDF) travel to them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

DATE = dt.date(2026, 11, 20)
K = 10  # the one cut-off the peers are compared at
SIZES = {"1M": 1_000_000, "5M": 5_000_000, "20M": 20_000_000}
SMOKE_ROWS = 20_000
TOLERANCE = 1e-9

#: task key -> row label of the report, in report order
TASKS = {
    "floor_plain": "**plain floor** (fixed): read, clicks deduplicated on (request, item) with a flag, exposures "
    "left-joined on (request, item), `groupBy(user_id)` rows and flags, 8 shuffle partitions",
    "floor": "floor: read + dedupe + attribution join + `groupBy(user_id)` count and sums of labels, duplicates",
    "bound_python": "bound: exposures and weighed events in one shuffle by user, sorted, streamed through a Python "
    "no-op (the least a one-pass design pays)",
    "bound_label": "bound: the same with the numpy labelling kernel, labelled rows back to the JVM, kept nowhere",
    "bound_label_cached": "bound: the same, labelled rows persisted and counted (what the stages after it read)",
    "bound_fused": "bound: the labelling kernel and the per-user pass in one `mapInArrow` (per-user values, health, "
    "day and moment sums; no slices, pooled AUC, curves or writes): issue 44's fused pass, its per-row part",
    "metrics": "**ours: metric stage** (labelled → per-user table + aggregates)",
    "job": "**ours: whole job**, defaults (`evaluate_day`, read → written outputs: analytic intervals, the "
    "A/B analysis of the day's two experiments, the bootstrap's default replicates)",
    "job_lean": "ours: whole job without the analysis options (no experiments, no bootstrap)",
    "job_slices": "ours: whole job, defaults + slices popularity, platform, user_type",
    "job_boot100": "ours: whole job, defaults + 100 bootstrap replicates (prices one replicate)",
    "job_nocurves": "ours: whole job, defaults without the ROC and PR curves (`metrics.curve_points = 0`)",
    "mllib_ranking": "MLlib `RankingEvaluator`, 5 metrics @10 (incl. `collect_list`)",
    "mllib_auc": "MLlib `BinaryClassificationEvaluator`, default numBins=1000",
    "mllib_auc_exact": "MLlib `BinaryClassificationEvaluator`, numBins=0",
    "mllib_same_output": "MLlib for our metric stage's output: lists + 4 `*AtK` metrics at each of the 5 default k "
    "+ exact AUC (derived†)",
    "plain": "plain per-user `groupBy(user_id).applyInPandas` (AUC, NDCG@10, AP@10)",
}
#: the one-pass design's lower bounds (:meth:`Day.bound`), in report order
BOUND_TASKS = ("bound_python", "bound_label", "bound_label_cached", "bound_fused")
ROUND_TASKS = (
    "floor_plain",
    "floor",
    *BOUND_TASKS,
    "job",
    "job_lean",
    "job_slices",
    "job_boot100",
    "job_nocurves",
    "metrics",
    "mllib_ranking",
    "mllib_auc",
    "mllib_auc_exact",
)
#: the whole job's variants: task -> settings on top of the run's config
JOB_VARIANTS: dict[str, list[str]] = {
    "job": [],
    "job_lean": ["stats.bootstrap_replicates=0", "experiments.assignments={input_root}/no-assignments/dt={date}"],
    "job_slices": ['slices.names=["popularity","platform","user_type"]'],
    "job_boot100": ["stats.bootstrap_replicates=100"],
    # the defaults without the ROC and PR curves: (job - job_nocurves) prices them (docs/performance.md)
    "job_nocurves": ["metrics.curve_points=0"],
}
MLLIB_METRICS = ("ndcgAtK", "meanAveragePrecisionAtK", "precisionAtK", "recallAtK", "meanAveragePrecision")

#: measured elsewhere on the same kind of machine (REFERENCES.md); these tools are not installed here
CITED = (
    ("Microsoft Recommenders, Spark ranking evaluation (P, R, NDCG, MAP @10)", (3.16, 8.15, 29.46)),
    ("RePlay, 8 metrics", (6.50, 20.13, 67.09)),
)


# --- data ----------------------------------------------------------------------------------
def parse_size(text: str) -> tuple[str, int]:
    """'5M' -> ('5M', 5000000); '20k' -> ('20k', 20000); '1234' -> ('1234', 1234)."""
    text = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmM]?)", text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1M, 500k, 20000)")
    scale = {"": 1, "k": 1_000, "m": 1_000_000}[match.group(2).lower()]
    return text, int(float(match.group(1)) * scale)


def ensure_day(data_root: Path, rows: int, seed: int, heavy_user_exposures: int = 0) -> Path:
    """Generate one day of ``rows`` exposures under ``data_root`` unless it is already there (with the
    assignments of the generator's two experiments, so that the default job analyses them)."""
    params = {
        "date": DATE.isoformat(),
        "exposures": rows,
        "seed": seed,
        "heavy_user_exposures": heavy_user_exposures,
        "experiments": True,
        "generator": generate.__name__,
    }
    root = data_root / (f"{rows}-seed{seed}" + (f"-heavy{heavy_user_exposures}" if heavy_user_exposures else ""))
    marker = root / "_bench.json"
    if marker.exists() and json.loads(marker.read_text()).get("params") == params:
        return root
    shutil.rmtree(root, ignore_errors=True)
    summary = generate.write_days(
        root, DATE, exposures=rows, seed=seed, heavy_user_exposures=heavy_user_exposures, experiments=True
    )
    marker.write_text(json.dumps({"params": params, "summary": summary}, indent=1))
    return root


def _noop(df: DataFrame) -> None:
    """Run ``df`` to the end without keeping anything."""
    df.write.format("noop").mode("overwrite").save()


# --- the tasks -------------------------------------------------------------------------------
@dataclass
class Day:
    """One generated day, the session and what the tasks share."""

    spark: SparkSession
    cfg: Config
    name: str
    input_root: str
    work: str
    rows: int = 0
    exposures: int = 0
    joined: DataFrame | None = None
    last: dict[str, Any] = field(default_factory=dict)  # outputs of the last run of each task
    variants: dict[str, Config] = field(default_factory=dict)  # the whole job's variants (JOB_VARIANTS)

    def read(self) -> tuple[DataFrame, DataFrame]:
        paths = {t: f"{self.input_root}/{t}/dt={DATE.isoformat()}" for t in ("exposures", "clicks")}
        raw = {t: read_parquet(self.spark, paths[t], f"{t} partition", {}) for t in ("exposures", "clicks")}
        exposures = conform(raw["exposures"], EXPOSURE_COLUMNS, paths["exposures"])
        clicks = conform(raw["clicks"], CLICK_COLUMNS, paths["clicks"])
        return exposures, clicks

    def partitions(self, rows: int) -> int:
        return bucket_count(rows, self.cfg.execution.rows_per_bucket, self.spark.sparkContext.defaultParallelism)

    def join(self) -> DataFrame:
        """The job's labelling: exposures and clicks partitioned by user, deduplicated and joined there."""
        exposures, clicks = self.read()
        partitions = self.partitions(self.rows)
        return join_feedback(
            deduplicate_exposures(by_user(exposures, partitions)),
            by_user(clicks, partitions),
            self.cfg.attribution.window_minutes,
            self.cfg.labels.event_weights,
            self.cfg.labels.click_event,
        )

    # the floor ---------------------------------------------------------------------------
    def floor(self) -> None:
        # the duplicate count is part of the deduplication the job does (the summary reports it); left
        # unused, Spark prunes it from the main branch only, and the attribution's candidates no longer
        # share the main branch's deduplicating shuffle (see label.resolve_session_events)
        _noop(self.join().groupBy(USER).agg(F.count(F.lit(1)), F.sum(RELEVANCE), F.sum(COPIES)))

    def floor_plain(self) -> None:
        """The fixed reference: what any per-user evaluation must at least do, in plain Spark (it never
        changes when the job's own labelling does)."""
        paths = {t: f"{self.input_root}/{t}/dt={DATE.isoformat()}" for t in ("exposures", "clicks")}
        exposures, clicks = (self.spark.read.parquet(paths[t]) for t in ("exposures", "clicks"))
        flags = clicks.select("request_id", "item_id").dropDuplicates().withColumn("flag", F.lit(1))
        before = self.spark.conf.get("spark.sql.shuffle.partitions")
        self.spark.conf.set("spark.sql.shuffle.partitions", "8")
        try:
            (
                exposures.join(flags, on=["request_id", "item_id"], how="left")
                .groupBy("user_id")
                .agg(F.count(F.lit(1)).alias("rows"), F.sum("flag").alias("flags"))
                .write.format("noop")  # every row of the result computed: a .count() lets Spark drop the join
                .mode("overwrite")
                .save()
            )
        finally:
            self.spark.conf.set("spark.sql.shuffle.partitions", before)

    # the one-pass design's lower bounds (docs/performance.md, "How the benchmark works") -----------------
    def bound(self, task: str) -> None:
        """``bound_python``: the day's exposures and weighed events in one shuffle by user, sorted as the labelling
        kernel reads them, streamed through a Python function that only counts (no validation, no output);
        ``bound_label``: the same through the labelling kernel (:func:`label_arrow.label_in_python`), its rows
        back in the JVM and dropped; ``bound_label_cached``: those rows persisted and counted, as the job's
        stages after labelling read them; ``bound_fused``: the labelling and the per-user pass in one
        ``mapInArrow`` (:func:`fused_pass`)."""
        if task not in BOUND_TASKS:
            raise ValueError(task)
        exposures, clicks = self.read()
        labels, partitions = self.cfg.labels, self.partitions(self.rows)
        events = (labels.event_weights, labels.click_event, labels.conversion_events)
        if task == "bound_python":
            both, _, _ = one_stream(exposures, clicks, partitions, *events)
            _noop(both.mapInArrow(_count_rows, "rows long"))
            return
        if task == "bound_fused":
            _noop(fused_pass(exposures, clicks, partitions, self.cfg))
            return
        labelled = label_in_python(exposures, clicks, partitions, self.cfg.attribution.window_minutes, *events)
        if task == "bound_label":
            _noop(labelled)
            return
        cached = labelled.persist(CACHE_LEVEL)
        try:
            cached.count()
        finally:
            cached.unpersist()

    # the labelled exposures the metric stage and the peers start from, cached as in the job
    def cache_labelled(self) -> None:
        self.joined = self.join().persist(CACHE_LEVEL)
        self.exposures = self.joined.where(F.col(ITEM).isNotNull()).count()

    def uncache_labelled(self) -> None:
        if self.joined is not None:
            self.joined.unpersist()
            self.joined = None

    def ranked(self) -> DataFrame:
        """The ranking input the peers start from (not partitioned by user)."""
        assert self.joined is not None, "cache_labelled() first"
        return ranking_input(self.joined, self.cfg.ranking.list_unit, has_score=True)

    # ours ----------------------------------------------------------------------------------
    def user_partitions(self) -> DataFrame:
        """The labelled exposures partitioned by user and persisted, as the label stage hands them on;
        the caller unpersists them."""
        assert self.joined is not None, "cache_labelled() first"
        return persist_user_rows(by_user(self.joined, self.partitions(self.exposures)))

    def metric_stage(self) -> None:
        """The job's "metrics" stage (:func:`pipeline.run_metric_stage`) from the cached labelled exposures,
        the one shuffle by user included, and its aggregates written."""
        assert self.joined is not None, "cache_labelled() first"
        out = DailyOutput(self.spark, f"{self.work}/metric_stage", DATE.isoformat())
        try:
            metrics = run_metric_stage(self.joined, self.cfg, out, self.exposures)
            out.stage("metrics", metrics_frame(self.spark, metrics.rows).coalesce(1))
            out.commit()
        except BaseException:
            out.abort()
            raise
        self.last["metrics"] = {(r.metric, r.k, r.aggregation): r.value for r in metrics.rows if r.slice == ALL}
        self.last["users_path"] = out.final_path("user_metrics")

    def whole_job(self, variant: str = "job") -> None:
        cfg = self.variants.get(variant, self.cfg)
        try:
            summary = evaluate_day(self.spark, cfg, DATE, self.input_root, f"{self.work}/{variant}")
            self.last[f"{variant}_status"] = summary["status"]
            self.last[f"{variant}_seconds"] = summary["seconds"]
        except HardRuleViolation:  # generated days break rules on purpose; every output is written
            self.last[f"{variant}_status"] = "hard_rule_violated"

    # peers ---------------------------------------------------------------------------------
    def mllib_ranking(self) -> None:
        from pyspark.ml.evaluation import RankingEvaluator

        started = time.perf_counter()
        lists = ranking_lists(self.ranked()).cache()
        try:
            lists.count()
            built = time.perf_counter()
            self.last["mllib_ranking"] = {m: RankingEvaluator(metricName=m, k=K).evaluate(lists) for m in MLLIB_METRICS}
            # one evaluation is one pass over the cached lists, whatever k: the parts that price
            # MLlib's version of our output (see same_output_seconds)
            self.last["mllib_parts"] = (built - started, (time.perf_counter() - built) / len(MLLIB_METRICS))
        finally:
            lists.unpersist()

    def mllib_auc(self, bins: int) -> float:
        from pyspark.ml.evaluation import BinaryClassificationEvaluator

        frame = self.ranked().select(
            F.col(SCORE).alias("rawPrediction"), (F.col(RELEVANCE) > 0).cast("double").alias("label")
        )
        evaluator = BinaryClassificationEvaluator(metricName="areaUnderROC", numBins=bins)
        return evaluator.evaluate(frame)

    def plain(self, one_in: int) -> None:
        ranked = self.ranked()
        if one_in > 1:  # a subsample of whole users
            ranked = ranked.where(F.pmod(F.xxhash64(USER), F.lit(one_in)) == 0)
        path = f"{self.work}/plain_user_metrics"
        (
            ranked.select(USER, LIST_ID, ITEM, POSITION, SCORE, RELEVANCE)
            .groupBy(USER)
            .applyInPandas(plain_user_metrics, PLAIN_SCHEMA)
            .write.mode("overwrite")
            .parquet(path)
        )
        self.last["plain_path"] = path

    def run(self, task: str, plain_one_in: int = 1) -> None:
        if task == "floor_plain":
            self.floor_plain()
        elif task == "floor":
            self.floor()
        elif task in BOUND_TASKS:
            self.bound(task)
        elif task == "metrics":
            self.metric_stage()
        elif task in JOB_VARIANTS:
            self.whole_job(task)
        elif task == "mllib_ranking":
            self.mllib_ranking()
        elif task == "mllib_auc":
            self.last["mllib_auc"] = self.mllib_auc(1000)
        elif task == "mllib_auc_exact":
            self.last["mllib_auc_exact"] = self.mllib_auc(0)
        elif task == "plain":
            self.plain(plain_one_in)
        else:
            raise ValueError(task)


def issue_44_limit(rows: int) -> int | None:
    """Issue 44's whole-job target over the plain floor for a day of ``rows`` exposure rows: 6x at 5M, 8x at 1M
    (a generated day has a few % fewer rows than asked for); None at other sizes (the issue sets none)."""
    if 4_000_000 <= rows <= 6_000_000:
        return 6
    if 800_000 <= rows <= 1_200_000:
        return 8
    return None


def fused_pass(exposures: DataFrame, clicks: DataFrame, partitions: int, cfg: Config) -> DataFrame:
    """Issue 44's fused pass as far as its cost per row goes (``bound_fused``): the one shuffle of
    :func:`label_arrow.one_stream`, then in one ``mapInArrow`` each partition labelled by the numpy kernel and its
    rows (empty responses included, as the job's pass reads them) scored by the per-user pass
    (:func:`user_pass.pass_function`: per-user values at every k, the health sums, the day sums, the moments).
    Not the job: no validation, no slices or catalog, no pooled AUC or curves, no writes; lists by request and
    ranked by the score column, no heavy user set aside."""
    labels, ks = cfg.labels, tuple(cfg.metrics.k)
    both, flags, carried = one_stream(
        exposures, clicks, partitions, labels.event_weights, labels.click_event, labels.conversion_events
    )
    names, window_us = label_order(exposures.columns), window_micros(cfg.attribution.window_minutes)
    columns = [USER, REQUEST, ITEM, CLICKED, N_CLICKS, *carried, *flags]
    day = tuple(user_day_columns([*columns, LIST_ID, POSITION, SCORE, RELEVANCE], ks))
    health = cfg.health.min_list_length
    score = pass_function(ks, cfg.metrics.ndcg_gain, health, None, day, (), tuple(cfg.metrics.f_alphas))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tables = [label_table(table, names, flags, carried, window_us) for table in whole_units(batches)]
        if tables:
            labelled = pa.concat_tables(tables)
            rows = labelled.select([*columns, POSITION, SCORE, RELEVANCE]).append_column(
                LIST_ID, labelled.column(REQUEST)
            )
            yield from score(iter(rows.to_batches()))

    return both.mapInArrow(run, OUTPUT_DDL)


def _count_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A partition's row count: the Python no-op of ``bound_python``."""
    rows = sum(batch.num_rows for batch in batches)
    yield pa.record_batch([pa.array([rows], pa.int64())], names=["rows"])


def same_output_seconds(build: float, per_evaluation: float, ks: int, exact_auc: float) -> float:
    """What MLlib takes for the output of our metric stage that it can give at all, from timed parts.

    build (``collect_list`` and cache) + 4 ``*AtK`` metrics x ``ks`` cut-offs, each one evaluation
    (a pass over the cached lists) + the exact global AUC (``numBins=0``).  Our stage also gives
    MRR, hit rate, per-user AUC, GAUC and the per-user table, which MLlib has no evaluator for.
    """
    return build + 4 * ks * per_evaluation + exact_auc


def ranking_lists(ranked: DataFrame) -> DataFrame:
    """MLlib's input: one row per list with a relevant item, item codes as doubles.

    ``prediction`` is the list ranked by the job's rule (score desc, position,
    item id), sorted explicitly since ``collect_list`` keeps no order;
    ``label`` the relevant items.  MLlib casts ids to double, so the ids'
    digits become the codes (exact below 2^53; the generator's ids are
    ``i<digits>``).  Lists without a relevant item are left out, as the job
    leaves them out of its averages (MLlib would count them as 0).
    """
    code = F.regexp_extract(F.col(ITEM), r"(\d+)$", 1).cast("double")
    entry = F.struct(
        (-F.col(SCORE)).alias("s"),
        F.col(POSITION).alias("p"),
        F.col(ITEM).alias("i"),
        code.alias("c"),
        F.col(RELEVANCE).alias("r"),
    )
    return (
        ranked.groupBy(LIST_ID)
        .agg(F.sort_array(F.collect_list(entry)).alias("l"))
        .select(
            F.transform("l", lambda x: x["c"]).alias("prediction"),
            F.transform(F.filter("l", lambda x: x["r"] > 0), lambda x: x["c"]).alias("label"),
        )
        .where(F.size("label") > 0)
    )


PLAIN_SCHEMA = "user_id string, auc double, ndcg_at_10 double, map_at_10 double"


def plain_user_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """One user's AUC, NDCG@10 and AP@10 the way a hand-written UDF would compute them.

    Written from the definitions, independently of :mod:`recsys_spark.kernels`:
    scikit-learn's ``roc_auc_score`` over all the user's exposures (NaN with one
    class only), and per list ranked by score desc, position, item id, a loop
    over lists for NDCG@10 (gain 2^rel - 1, ideal from the list's own items)
    and AP@10 (divided by min(R, 10)), averaged over lists with a relevant item.
    """
    from sklearn.metrics import roc_auc_score

    frame = frame.sort_values([LIST_ID, SCORE, POSITION, ITEM], ascending=[True, False, True, True])
    ndcgs, aps = [], []
    for _, lst in frame.groupby(LIST_ID, sort=False):
        rel = lst[RELEVANCE].to_numpy(dtype=float)
        n_relevant = int((rel > 0).sum())
        if n_relevant == 0:
            continue
        top = rel[:K]
        discount = 1.0 / np.log2(np.arange(2, len(top) + 2))
        ideal = np.sort(rel)[::-1][:K]
        ndcgs.append(float(((2**top - 1) * discount).sum() / ((2**ideal - 1) * discount[: len(ideal)]).sum()))
        hit = top > 0
        precision = np.cumsum(hit) / np.arange(1, len(hit) + 1)
        aps.append(float((precision * hit).sum() / min(n_relevant, K)))
    labels = frame[RELEVANCE].to_numpy() > 0
    auc = roc_auc_score(labels, frame[SCORE].to_numpy()) if 0 < labels.sum() < len(labels) else math.nan
    return pd.DataFrame(
        {
            "user_id": [frame[USER].iloc[0]],
            "auc": [auc],
            "ndcg_at_10": [np.mean(ndcgs) if ndcgs else math.nan],
            "map_at_10": [np.mean(aps) if aps else math.nan],
        }
    )


# --- agreement and structure ------------------------------------------------------------------
@dataclass
class Check:
    size: str
    ours: str
    peer: str
    n: int
    diff: float | None  # max |ours - peer|
    tolerance: float | None  # None: the definitions differ, the difference is shown, not judged
    note: str = ""
    mismatched: int = 0  # defined on one side only

    @property
    def ok(self) -> bool:
        if self.tolerance is None:
            return True
        return self.mismatched == 0 and self.diff is not None and self.diff <= self.tolerance


def _missing(col: Column) -> Column:
    return col.isNull() | F.isnan(col)


def per_user_checks(spark: SparkSession, size: str, users_path: str, plain_path: str, note: str) -> list[Check]:
    """Our per-user AUC, NDCG@10, AP@10 against the plain UDF's, joined on user_id in Spark."""
    ours = spark.read.parquet(users_path).where((F.col(SLICE) == ALL) & (F.col("k") == 10))
    peer = spark.read.parquet(plain_path)
    pairs = {"auc": "auc", "ndcg_at_10": "ndcg", "map_at_10": "map"}  # the peer's column: ours (at k = 10)
    joined = ours.select(USER, *[F.col(o).alias(f"o_{c}") for c, o in pairs.items()]).join(
        peer.select(USER, *[F.col(c).alias(f"p_{c}") for c in pairs]), on=USER, how="inner"
    )
    aggs = [F.count(F.lit(1)).alias("n")]
    for c in pairs:
        o, p = F.col(f"o_{c}"), F.col(f"p_{c}")
        both = ~_missing(o) & ~_missing(p)
        aggs += [
            F.max(F.when(both, F.abs(o - p))).alias(f"{c}__diff"),
            F.sum(F.when(_missing(o) != _missing(p), 1).otherwise(0)).alias(f"{c}__mismatch"),
            F.sum(F.when(both, 1).otherwise(0)).alias(f"{c}__n"),
        ]
    row = joined.agg(*aggs).first()
    peer_users = peer.count()
    checks = []
    for c, label in (("auc", "per-user AUC"), ("ndcg_at_10", "per-user NDCG@10"), ("map_at_10", "per-user AP@10")):
        checks.append(
            Check(
                size,
                label,
                "plain applyInPandas (scikit-learn AUC)" if c == "auc" else "plain applyInPandas",
                row[f"{c}__n"] or 0,
                row[f"{c}__diff"],
                TOLERANCE,
                note,
                (row[f"{c}__mismatch"] or 0) + (peer_users - row["n"]),
            )
        )
    return checks


def aggregate_checks(size: str, ours: dict, mllib: dict, auc_binned: float, auc_exact: float) -> list[Check]:
    """Our list averages and global AUC against MLlib's evaluators."""

    def value(metric: str, k: int | None, aggregation: str) -> float:
        return ours.get((metric, k, aggregation))

    def check(label: str, mine: float, peer_label: str, theirs: float, tolerance: float | None, note: str) -> Check:
        diff = abs(mine - theirs) if mine is not None and theirs is not None else None
        return Check(size, label, peer_label, 1, diff, tolerance, note)

    same = "same definition; MLlib mean over lists with a relevant item"
    return [
        check(
            "NDCG@10, mean over lists",
            value("ndcg", K, "list_avg"),
            "RankingEvaluator ndcgAtK",
            mllib["ndcgAtK"],
            TOLERANCE,
            same + " (MLlib's NDCG is binary; our relevance is 0/1 here)",
        ),
        check(
            "AP@10, mean over lists",
            value("map", K, "list_avg"),
            "RankingEvaluator meanAveragePrecisionAtK",
            mllib["meanAveragePrecisionAtK"],
            TOLERANCE,
            same + "; both divide by min(R, k)",
        ),
        check(
            "precision@10, mean over lists",
            value("precision", K, "list_avg"),
            "RankingEvaluator precisionAtK",
            mllib["precisionAtK"],
            TOLERANCE,
            same + "; both divide by k",
        ),
        check(
            "recall@10, mean over lists",
            value("recall", K, "list_avg"),
            "RankingEvaluator recallAtK",
            mllib["recallAtK"],
            TOLERANCE,
            same,
        ),
        check(
            f"AP@{K}, mean over lists",
            value("map", K, "list_avg"),
            "RankingEvaluator meanAveragePrecision",
            mllib["meanAveragePrecision"],
            None,
            "differs: MLlib's MAP has no cut-off and divides by R",
        ),
        check(
            "global AUC (exact)",
            value("auc", None, "global"),
            "BinaryClassificationEvaluator numBins=0",
            auc_exact,
            TOLERANCE,
            "same definition: ties count 1/2",
        ),
        check(
            "global AUC (exact)",
            value("auc", None, "global"),
            "BinaryClassificationEvaluator numBins=1000",
            auc_binned,
            None,
            "differs: MLlib bins the scores (approximate AUC)",
        ),
    ]


def shuffles_before_cache(df: DataFrame) -> int:
    """Exchanges in ``df``'s physical plan above the cached labelled exposures.

    Those are the innermost cache (the last ``InMemoryTableScan``); caches in
    between (the user-partitioned rows) print their own plans, exchanges
    included, above it.
    """
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        df.explain()
    plan = text.getvalue().rsplit("InMemoryTableScan", 1)[0]
    return len(re.findall(r"Exchange ", plan))


# --- timing and report --------------------------------------------------------------------------
@dataclass
class Timing:
    size: str
    rows: int
    task: str
    seconds: list[float]
    scale: int = 1  # the task ran on 1 in ``scale`` users; ``median`` is scaled up

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) * self.scale


@dataclass
class Report:
    timings: list[Timing]
    checks: list[Check]
    structure: dict[str, Any]
    machine: dict[str, Any]
    command: str
    skew: dict[str, Any] | None = None

    def timing(self, size: str, task: str) -> Timing | None:
        return next((t for t in self.timings if t.size == size and t.task == task), None)

    @property
    def sizes(self) -> list[str]:
        return list(dict.fromkeys(t.size for t in self.timings))

    def targets(self) -> list[tuple[str, bool | None, str]]:
        """(target, met, evidence) for the issue's speed targets that this run can judge."""
        out = []
        for size in self.sizes:
            floor, metrics, job, mllib = (self.timing(size, t) for t in ("floor", "metrics", "job", "mllib_ranking"))
            if floor and metrics:
                r = metrics.median / floor.median
                out.append((f"{size}: metric stage <= 2x floor", r <= 2, f"{r:.2f}x"))
            same = self.timing(size, "mllib_same_output")
            if metrics and same:
                r = metrics.median / same.median
                out.append((f"{size}: metric stage <= 0.5x MLlib for the same output", r <= 0.5, f"{r:.2f}x (derived)"))
            if metrics and mllib:
                out.append(
                    (
                        f"{size}: (not a target) metric stage vs MLlib RankingEvaluator at one k",
                        None,
                        f"{metrics.median:.2f} s vs {mllib.median:.2f} s",
                    )
                )
            if floor and job:
                r = job.median / floor.median
                out.append((f"{size}: whole job, defaults <= 2x floor", r <= 2, f"{r:.2f}x"))
            sliced = self.timing(size, "job_slices")
            if floor and sliced:
                r = sliced.median / floor.median
                out.append((f"{size}: whole job with popularity + 2 slices <= 2.5x floor", r <= 2.5, f"{r:.2f}x"))
            lean = self.timing(size, "job_lean")
            if job and lean:
                extra = job.median / lean.median - 1
                out.append(
                    (
                        f"{size}: the analysis options (experiments, default bootstrap) add <= 15 %",
                        extra <= 0.15,
                        f"{100 * extra:+.0f} %",
                    )
                )
            boot = self.timing(size, "job_boot100")
            if job and boot:
                per = (boot.median - job.median) / 100
                out.append((f"{size}: (not a target) seconds per bootstrap replicate", None, f"{per:.3f} s"))
        for size in self.sizes:  # the issue's targets against the fixed plain floor
            plain, job, sliced = (self.timing(size, t) for t in ("floor_plain", "job", "job_slices"))
            lean = self.timing(size, "job_lean")
            if plain and job:
                r, limit = job.median / plain.median, issue_44_limit(job.rows)
                if limit is None:
                    out.append((f"{size}: (not a target) whole job / plain floor", None, f"{r:.2f}x"))
                else:
                    out.append((f"{size}: whole job, defaults <= {limit}x the plain floor", r <= limit, f"{r:.2f}x"))
            for task in BOUND_TASKS:
                bound = self.timing(size, task)
                if plain and bound:
                    r = bound.median / plain.median
                    out.append((f"{size}: (not a target) {task} / plain floor", None, f"{r:.2f}x"))
            if job and sliced:
                extra = sliced.median / job.median - 1
                out.append(
                    (
                        f"{size}: popularity, platform and user-type slices add <= 30 %",
                        extra <= 0.3,
                        f"{100 * extra:+.0f} %",
                    )
                )
            if plain and lean:
                out.append(
                    (f"{size}: (not a target) lean job / plain floor", None, f"{lean.median / plain.median:.2f}x")
                )
        small, large = self.linearity_pair()
        if small and large:
            for task in ("floor_plain", "floor", "metrics", "job"):
                a, b = self.timing(small, task), self.timing(large, task)
                if a and b:
                    r = b.median / a.median
                    rows = b.rows / a.rows
                    out.append(
                        (
                            f"{large}/{small} time ({task}) <= {22 * rows / 20:.0f}x",
                            r <= 22 * rows / 20,
                            f"{r:.1f}x for {rows:.0f}x rows",
                        )
                    )
        return out

    def linearity_pair(self) -> tuple[str | None, str | None]:
        sizes = sorted({(t.rows, t.size) for t in self.timings})
        return (sizes[0][1], sizes[-1][1]) if len(sizes) > 1 else (None, None)

    def markdown(self) -> str:
        sizes = self.sizes
        rows = {s: next(t.rows for t in self.timings if t.size == s) for s in sizes}
        lines = [f"Machine: {self.machine['summary']}", "", f"Reproduce: `{self.command}`", ""]
        head = "| task | " + " | ".join(f"{s}: s | {s}: M rows/s | {s}: x plain floor" for s in sizes)
        small, large = self.linearity_pair()
        if small:
            head += f" | {large}/{small} |"
        else:
            head += " |"
        lines += [head, "|---" * (1 + 3 * len(sizes) + (1 if small else 0)) + "|"]
        for task, label in TASKS.items():
            cells = [label]
            for s in sizes:
                t, floor = self.timing(s, task), self.timing(s, "floor_plain")
                if t is None:
                    cells += ["–", "–", "–"]
                    continue
                mark = "*" if t.scale > 1 else ""
                cells += [
                    f"{t.median:.2f}{mark}",
                    f"{rows[s] / t.median / 1e6:.2f}",
                    f"{t.median / floor.median:.2f}" if floor else "–",
                ]
            if small:
                a, b = self.timing(small, task), self.timing(large, task)
                cells.append(f"{b.median / a.median:.1f}x" if a and b else "–")
            lines.append("| " + " | ".join(cells) + " |")
        repeats = max((len(t.seconds) for t in self.timings if t.task != "plain"), default=0)
        lines += [
            "",
            f"Median of {repeats} interleaved repeat(s) (each round runs every task once, so a noisy "
            "machine slows them alike), after a warm-up round at the first size and an untimed read of each "
            "later day; rows = exposure rows of the day; x plain floor = median / the plain floor's median "
            "at the same size (the fixed reference of issues 29 and 44).",
        ]
        plain = [t for t in self.timings if t.task == "plain"]
        if plain:
            desc = ", ".join(
                f"{t.size}: " + ("all users" if t.scale == 1 else f"1 user in {t.scale}, time x{t.scale}")
                for t in plain
            )
            lines.append(
                f"The plain per-user UDF ran once per size ({desc}); * marks a time scaled up from a subsample."
            )
        if any(t.task == "mllib_same_output" for t in self.timings):
            lines.append(
                "† derived from the rounds' own timings, not run: MLlib's list building + 20 times its mean "
                "time per `RankingEvaluator` evaluation (one pass over the cached lists, whatever k) + its "
                "`numBins=0` AUC. Our stage also gives MRR, hit rate, per-user AUC, GAUC and the per-user "
                "table, which MLlib has no evaluator for."
            )
        lines += [
            "",
            "Not installable here (not run; seconds measured elsewhere on local[2], from "
            "REFERENCES.md, at 1M / 5M / 20M): "
            + "; ".join(f"{name}: {' / '.join(f'{v:.2f}' for v in values)}" for name, values in CITED)
            + ".",
        ]
        lines += ["", "| target | met | measured |", "|---|---|---|"]
        for target, met, evidence in self.targets():
            lines.append(f"| {target} | {'–' if met is None else 'yes' if met else 'NO'} | {evidence} |")
        lines += [
            "",
            "Agreement (max |ours − peer|; tolerance 1e-9 where the definitions coincide):",
            "",
            "| size | ours | peer | compared | max abs diff | verdict | note |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in self.checks:
            verdict = ("same" if c.ok else "DISAGREE") if c.tolerance is not None else "differs (shown)"
            if c.mismatched:
                verdict += f", {c.mismatched} defined on one side only"
            diff = "–" if c.diff is None else f"{c.diff:.1e}"
            lines.append(f"| {c.size} | {c.ours} | {c.peer} | {c.n} | {diff} | {verdict} | {c.note} |")
        lines += ["", "Plan: " + "; ".join(f"{k}: {v}" for k, v in self.structure.items())]
        if self.skew:
            k = self.skew
            lines += [
                "",
                f"Memory under skew: a day of {k['rows']} exposure rows where one user ({k['user']}) has "
                f"{k['heavy_rows']} of them, whole job in {k['master']} with driver memory "
                f"{k['driver_memory']} and execution.max_user_rows={k['max_user_rows']}: status {k['status']} "
                f"in {k['seconds']:.1f} s; users on the bounded path: {k['users_over_row_bound']}; the heavy "
                f"user's AUC {k['auc']:.12f} vs scikit-learn on its labelled rows {k['expected_auc']:.12f} "
                f"(|diff| {k['auc_diff']:.1e}); peak RSS: largest Python worker {k['peak_python_worker_mib']} "
                f"MiB, JVM {k['peak_jvm_mib']} MiB.",
                "",
                "Summary note: " + "; ".join(k["notes"]),
            ]
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        return json.dumps(
            {
                "skew": self.skew,
                "timings": [asdict(t) | {"median": t.median} for t in self.timings],
                "checks": [asdict(c) | {"ok": c.ok} for c in self.checks],
                "structure": self.structure,
                "machine": self.machine,
                "command": self.command,
                "targets": self.targets(),
            },
            indent=1,
            default=str,
        )


def machine_info(spark: SparkSession) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gib = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        kib = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        mem_gib = round(kib / 2**20, 1)
    conf = spark.sparkContext.getConf()
    info = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
        "pyspark": spark.version,
        "java": spark.sparkContext._jvm.java.lang.System.getProperty("java.version"),  # noqa: SLF001
        "master": spark.sparkContext.master,
        "driver_memory": conf.get("spark.driver.memory", "1g"),
        "loadavg_start": _loadavg(),
    }
    info["summary"] = (
        f"{info['cpu']}, {info['cores']} cores, {mem_gib} GiB, {info['os']}; Python "
        f"{info['python']}, PySpark {info['pyspark']}, Java {info['java']}; "
        f"{info['master']}, driver memory {info['driver_memory']}"
    )
    return info


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


# --- memory under skew -------------------------------------------------------------------------
class MemoryWatch:
    """Peak resident memory of this process's descendants (the JVM and its Python workers), from /proc."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid, kind in _descendants(os.getpid()):
                rss = _rss(pid)
                self.peak[kind] = max(self.peak.get(kind, 0), rss)
            self._stop.wait(self.interval)

    def mib(self, kind: str) -> int | None:
        return round(self.peak[kind] / 2**20) if kind in self.peak else None


def _descendants(root: int) -> list[tuple[int, str]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(stat[1]), []).append(int(entry))
    out, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        stack += children.get(pid, [])
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            out.append((pid, "jvm" if b"java" in cmd else "python_worker" if b"pyspark" in cmd else "other"))
    return out


def _rss(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def run_skew(
    spark: SparkSession,
    cfg: Config,
    root: str | Path,
    rows: int = 1_000_000,
    heavy_rows: int = 2_000_000,
    seed: int = 7,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The whole job on a day where one user has ``heavy_rows`` exposures; memory watched, heavy AUC checked.

    The check pulls the heavy user's labelled (score, clicked) pairs to the
    driver for scikit-learn: a test of the job, not something the job does.
    """
    from sklearn.metrics import roc_auc_score

    root = Path(root).resolve()
    input_root = ensure_day(root / "data", rows, seed, heavy_user_exposures=heavy_rows)
    user = generate.format_ids("u", np.array([generate.HEAVY_USER]), 6)[0].as_py()
    output = root / "work" / "skew"
    with MemoryWatch() as watch:
        started = time.perf_counter()
        try:
            summary = evaluate_day(spark, cfg, DATE, str(input_root), str(output))
            status = summary["status"]
        except HardRuleViolation:
            status = "hard_rule_violated"
        seconds = time.perf_counter() - started
    summary = json.loads((output / "summary" / f"dt={DATE.isoformat()}" / "summary.json").read_text())
    ours = (
        spark.read.parquet(str(output / "user_metrics" / f"dt={DATE.isoformat()}"))
        .where((F.col(SLICE) == ALL) & (F.col(USER) == user))
        .first()
    )
    day = Day(spark, cfg, "skew", str(input_root), str(root / "work" / "skew-check"))
    pairs = (
        day.join()
        .where((F.col(USER) == user) & F.col(ITEM).isNotNull())
        .select(SCORE, (F.col(RELEVANCE) > 0).alias("y"))
        .toPandas()
    )
    expected = float(roc_auc_score(pairs["y"], pairs[SCORE]))
    conf = spark.sparkContext.getConf()
    result = {
        "rows": int(json.loads((input_root / "_bench.json").read_text())["summary"]["days"][0]["exposure_rows"]),
        "heavy_rows": len(pairs),
        "user": user,
        "status": status,
        "seconds": seconds,
        "master": spark.sparkContext.master,
        "driver_memory": conf.get("spark.driver.memory", "1g"),
        "max_user_rows": cfg.execution.max_user_rows,
        "users_over_row_bound": summary["data_quality"].get("users_over_row_bound"),
        "auc": ours["auc"],
        "expected_auc": expected,
        "auc_diff": abs(ours["auc"] - expected),
        "n_exposures": ours["n_exposures"],
        "peak_python_worker_mib": watch.mib("python_worker"),
        "peak_jvm_mib": watch.mib("jvm"),
        "notes": [n for n in summary.get("notes", []) if "max_user_rows" in n],
    }
    say(
        f"[skew] {status} in {seconds:.1f} s; heavy user AUC {result['auc']} vs {expected} "
        f"({result['n_exposures']} exposures); peak Python worker {result['peak_python_worker_mib']} MiB, "
        f"JVM {result['peak_jvm_mib']} MiB"
    )
    return result


# --- the execution settings ----------------------------------------------------------------------
ARROW_BATCH_KEY = "spark.sql.execution.arrow.maxRecordsPerBatch"
#: progress lines: printed at once
_SAY = functools.partial(print, flush=True)

#: (execution.rows_per_bucket, execution.arrow_batch_rows) tried by ``--sweep``: the defaults first,
#: then each setting moved 4-5x either way with the other at its default
SWEEP = ((200_000, 10_000), (50_000, 10_000), (800_000, 10_000), (200_000, 2_000), (200_000, 50_000))


def run_sweep(
    spark: SparkSession,
    configs: dict[tuple[int, int], Config],
    root: str | Path,
    rows: int,
    repeats: int = 2,
    seed: int = 7,
    say: Callable[[str], None] = _SAY,
) -> list[dict[str, Any]]:
    """The metric stage on one day under each (rows_per_bucket, arrow_batch_rows) of ``configs``.

    Rounds are interleaved (each runs every setting once) after an untimed one; the Arrow batch size
    is a SQL setting read when a query runs, so it is set on the session before each run.
    """
    root = Path(root).resolve()
    input_root = ensure_day(root / "data", rows, seed)
    seconds: dict[tuple[int, int], list[float]] = {key: [] for key in configs}
    before = spark.conf.get(ARROW_BATCH_KEY)
    try:
        for round_no in range(1 + repeats):
            for key, cfg in configs.items():
                day = Day(spark, cfg, "sweep", str(input_root), str(root / "work" / "sweep"))
                spark.conf.set(ARROW_BATCH_KEY, str(key[1]))
                day.cache_labelled()
                started = time.perf_counter()
                day.metric_stage()
                took = time.perf_counter() - started
                day.uncache_labelled()
                if round_no:
                    seconds[key].append(took)
                say(
                    f"[sweep] {'round ' + str(round_no) if round_no else 'warm-up'} rows_per_bucket={key[0]} "
                    f"arrow_batch_rows={key[1]}: {took:.2f} s"
                )
    finally:
        spark.conf.set(ARROW_BATCH_KEY, before)
    return [
        {"rows_per_bucket": b, "arrow_batch_rows": a, "seconds": s, "median": statistics.median(s)}
        for (b, a), s in seconds.items()
    ]


def sweep_markdown(results: list[dict[str, Any]], rows: int, machine: dict[str, Any], command: str) -> str:
    """The sweep as a table; the first row (the defaults) is the reference."""
    reference = results[0]["median"]
    lines = [
        f"Machine: {machine['summary']}",
        "",
        f"Reproduce: `{command}`",
        "",
        f"Metric stage on a day of {rows} exposures, median of {len(results[0]['seconds'])} interleaved "
        "rounds after an untimed one.",
        "",
        "| execution.rows_per_bucket | execution.arrow_batch_rows | s | × defaults |",
        "|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['rows_per_bucket']} | {r['arrow_batch_rows']} | {r['median']:.2f} | {r['median'] / reference:.2f} |"
        )
    return "\n".join(lines) + "\n"


# --- the run ------------------------------------------------------------------------------------
def run_bench(
    spark: SparkSession,
    cfg: Config,
    sizes: Sequence[tuple[str, int]],
    root: str | Path,
    repeats: int = 3,
    warmup: int = 1,
    seed: int = 7,
    plain_max_rows: int = 1_000_000,
    command: str = "",
    say: Callable[[str], None] = _SAY,
    tasks: Sequence[str] = tuple(TASKS),
    on_size: Callable[[Report], None] | None = None,
    variants: Mapping[str, Config] | None = None,
) -> Report:
    """Generate (or reuse) each day, time every task, check agreement; return the report.

    ``tasks`` limits what runs (for tuning); agreement is checked only with all of them.
    ``on_size`` gets the report so far after each size (a long run keeps what it measured).
    """
    root = Path(root).resolve()
    if variants is None:  # the job's variants on the default settings
        variants = {t: load_config(None, extra) for t, extra in JOB_VARIANTS.items()}
    unknown = set(tasks) - set(TASKS)
    if unknown:
        raise ValueError(f"unknown task(s) {sorted(unknown)}: choose from {', '.join(TASKS)}")
    round_tasks = [t for t in ROUND_TASKS if t in tasks]
    timings: list[Timing] = []
    checks: list[Check] = []
    structure: dict[str, Any] = {}
    machine = machine_info(spark)
    for size, target_rows in sizes:
        input_root = ensure_day(root / "data", target_rows, seed)
        day = Day(spark, cfg, size, str(input_root), str(root / "work" / size), variants=dict(variants))
        day.rows = json.loads((input_root / "_bench.json").read_text())["summary"]["days"][0]["exposure_rows"]
        say(f"[{size}] {day.rows} exposure rows at {input_root}")
        seconds: dict[str, list[float]] = {t: [] for t in round_tasks}
        # the warm-up rounds (JIT, Python workers) run at the first size; other days are
        # read once, untimed, so that no task pays for a cold file cache
        first = size == sizes[0][0]
        if not (first and warmup):
            day.floor()
        for round_no in range(warmup * first + repeats):
            timed = round_no >= warmup * first
            for task in round_tasks:
                if task == "metrics":  # the cached labelled exposures the metric stage and peers start from
                    day.cache_labelled()
                started = time.perf_counter()
                day.run(task)
                took = time.perf_counter() - started
                if timed:
                    seconds[task].append(took)
                    if task == "mllib_auc_exact" and "mllib_parts" in day.last:
                        seconds.setdefault("mllib_same_output", []).append(
                            same_output_seconds(*day.last["mllib_parts"], len(cfg.metrics.k), took)
                        )
                say(
                    f"[{size}] {'round ' + str(round_no - warmup * first + 1) if timed else 'warm-up'} {task}: "
                    f"{took:.2f} s"
                )
            day.uncache_labelled()
        timings += [Timing(size, day.rows, task, s) for task, s in seconds.items()]

        if set(tasks) != set(TASKS):
            continue
        day.cache_labelled()
        try:
            one_in = max(1, round(day.rows / plain_max_rows))
            started = time.perf_counter()
            day.run("plain", one_in)
            took = time.perf_counter() - started
            timings.append(Timing(size, day.rows, "plain", [took], one_in))
            say(f"[{size}] plain per-user UDF on 1 user in {one_in}: {took:.2f} s")
            if "metrics" not in day.last:
                day.metric_stage()
            note = "all users" if one_in == 1 else f"users with xxhash64(user_id) % {one_in} == 0"
            checks += per_user_checks(spark, size, day.last["users_path"], day.last["plain_path"], note)
            checks += aggregate_checks(
                size, day.last["metrics"], day.last["mllib_ranking"], day.last["mllib_auc"], day.last["mllib_auc_exact"]
            )
            by_user = day.user_partitions()
            users = UserMetrics(
                ranking_input(by_user, cfg.ranking.list_unit, has_score=True),
                cfg.metrics.k,
                cfg.metrics.ndcg_gain,
                None,
                cfg.execution.max_user_rows,
            )
            structure.setdefault(
                "shuffles of labelled exposures after labelling, per-user stage", shuffles_before_cache(users.frame)
            )
            users.unpersist()
            by_user.unpersist()
        finally:
            day.uncache_labelled()
        if on_size is not None:
            on_size(Report(list(timings), list(checks), dict(structure), dict(machine), command))
    machine["loadavg_end"] = _loadavg()
    machine["summary"] += f"; load average {machine['loadavg_start']} at start, {machine['loadavg_end']} at end"
    return Report(timings, checks, structure, machine, command)


def save(report: Report, root: Path) -> str:
    """Write ``report.md`` and ``results.json`` under ``root``; return the markdown."""
    text = report.markdown()
    root.mkdir(parents=True, exist_ok=True)
    (root / "report.md").write_text(text)
    (root / "results.json").write_text(report.to_json())
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1M,5M,20M", help="comma-separated exposures per day (default 1M,5M,20M)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per size (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--root", default="build/bench", help="data, work files and report (default build/bench)")
    parser.add_argument(
        "--plain-max-rows",
        type=parse_size,
        default=("1M", 1_000_000),
        help="above this, the plain per-user UDF runs on a user subsample (default 1M)",
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--config", help="TOML settings file for the job (default: built-in defaults)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one job setting")
    parser.add_argument(
        "--skew-rows",
        type=parse_size,
        default=("2M", 2_000_000),
        help="the skew check: one user with this many exposures (default 2M), 0 to skip",
    )
    parser.add_argument(
        "--skew-base",
        type=parse_size,
        default=("1M", 1_000_000),
        help="the skew check: exposures of everyone else (default 1M)",
    )
    parser.add_argument("--only", help=f"comma-separated tasks to run, no agreement checks ({', '.join(TASKS)})")
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="instead: time the metric stage at the first size under a few rows_per_bucket and "
        "arrow_batch_rows settings (build/bench/sweep.md)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help=f"seconds: one {SMOKE_ROWS // 1000}k-row day, one repeat, no warm-up"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from recsys_spark.runtime.session import build_session, job_settings

    cfg = load_config(args.config, args.set)
    skew_cfg, skew = cfg, (args.skew_base[1], args.skew_rows[1])
    if args.smoke:
        sizes, repeats, warmup = [(f"{SMOKE_ROWS // 1000}k", SMOKE_ROWS)], 1, 0
        # the bounded path on a tiny day: one user of 5000 rows over a bound of 1000
        skew_cfg, skew = load_config(args.config, [*args.set, "execution.max_user_rows=1000"]), (SMOKE_ROWS, 5000)
    else:
        sizes, repeats, warmup = [parse_size(s) for s in args.sizes.split(",")], args.repeats, args.warmup
    settings = job_settings(
        cfg.execution.arrow_batch_rows,
        {"spark.driver.memory": args.driver_memory, "spark.ui.enabled": "false", **cfg.spark},
    )
    spark = build_session("recsys-spark-bench", args.master, settings, log_level="ERROR")
    command = "python -m benchmarks.bench " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.sweep:
        try:
            size, rows = sizes[0]
            configs = {
                (b, a): load_config(
                    args.config, [*args.set, f"execution.rows_per_bucket={b}", f"execution.arrow_batch_rows={a}"]
                )
                for b, a in SWEEP
            }
            results = run_sweep(spark, configs, args.root, rows, repeats, args.seed)
            text = sweep_markdown(results, rows, machine_info(spark), command.strip())
        finally:
            spark.stop()
        Path(args.root).mkdir(parents=True, exist_ok=True)
        (Path(args.root) / "sweep.md").write_text(text)
        (Path(args.root) / "sweep.json").write_text(json.dumps(results, indent=1))
        print(text)
        return 0
    try:
        tasks = args.only.split(",") if args.only else tuple(TASKS)
        report = run_bench(
            spark,
            cfg,
            sizes,
            args.root,
            repeats,
            warmup,
            args.seed,
            args.plain_max_rows[1],
            command.strip(),
            tasks=tasks,
            on_size=lambda partial: save(partial, Path(args.root)),
            variants={t: load_config(args.config, [*args.set, *extra]) for t, extra in JOB_VARIANTS.items()},
        )
        if skew[1]:
            report.skew = run_skew(spark, skew_cfg, args.root, skew[0], skew[1], args.seed)
    finally:
        spark.stop()
    print(save(report, Path(args.root)))
    failed = [c for c in report.checks if not c.ok]
    if failed:
        print(f"{len(failed)} agreement check(s) failed", file=sys.stderr)
    if report.skew and not (report.skew["auc_diff"] <= TOLERANCE and report.skew["users_over_row_bound"] == 1):
        print(
            "skew check failed: the heavy user's AUC is not exact or it did not take the bounded path", file=sys.stderr
        )
        failed.append(report.skew)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
