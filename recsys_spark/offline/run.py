"""``recsys-spark offline``: evaluate a model on held-out data before it ships (the orchestrator).

read -> each evaluation the inputs allow -> one per-user table -> one aggregation -> write.  Each input
named in ``[offline]`` enables its evaluation (:data:`EVALUATIONS`); at least one must run:

* recommendations + truth -> top-K accuracy, beyond accuracy (train and items refine it): :mod:`.lists`;
* predictions -> AUC (exact pooled, per user, impression-weighted), log loss, PCOC, calibration:
  :mod:`.predictions`;
* ratings -> MAE / RMSE overall, user- and item-averaged, normalised, distortion: :mod:`.ratings`;
* sampled -> naive and Krichene-Rendle corrected sampled metrics, sampled AUC: :mod:`.sampled`.

Each is a function ``RunContext -> Evaluation`` (:mod:`.evaluation`): its per-user frame (one
``mapInArrow`` call per partition of users into a kernel of :mod:`kernels.offline` or
:mod:`kernels.sampled`), its metric specs, rows, tables, counts and notes.  The per-user frames are
joined on the user and written, then one aggregation over that table gives every metric row with its
interval (:mod:`.aggregate`).  The driver receives sums, histograms of counts and one row per sampled
negative count: nothing per user or per item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession

from recsys_spark.config import Config
from recsys_spark.errors import ConfigError
from recsys_spark.io.output import Output, commit_summary, open_wing, writing
from recsys_spark.offline.aggregate import aggregate
from recsys_spark.offline.evaluation import Evaluation, RunContext
from recsys_spark.offline.inputs import NOTHING_TO_EVALUATE, check_evaluable, input_paths, read_inputs
from recsys_spark.offline.lists import evaluate_lists
from recsys_spark.offline.predictions import evaluate_predictions
from recsys_spark.offline.ratings import evaluate_ratings
from recsys_spark.offline.sampled import evaluate_sampled
from recsys_spark.offline.summary import headline, start_summary, user_counts
from recsys_spark.runtime import log
from recsys_spark.runtime.session import apply_time_zone
from recsys_spark.schema import METRICS_DDL, USER
from recsys_spark.tables import OFFLINE_RUN

#: (stage name, the inputs of which any starts it, the evaluation), in the order they run and are written
EVALUATIONS: tuple[tuple[str, tuple[str, ...], Callable[[RunContext], Evaluation]], ...] = (
    ("lists", ("recommendations", "truth"), evaluate_lists),
    ("predictions", ("predictions",), evaluate_predictions),
    ("ratings", ("ratings",), evaluate_ratings),
    ("sampled", ("sampled",), evaluate_sampled),
)


def run_offline(spark: SparkSession, cfg: Config, run: str, output_root: str) -> dict:
    """Evaluate one offline run and write its partition ``run=NAME`` of ``{output_root}/offline/{table}``
    (:data:`recsys_spark.tables.OFFLINE_RUN`); return the summary."""
    check_evaluable(cfg)
    apply_time_zone(spark, cfg.validation.time_zone)
    timings: dict[str, float] = {}
    with log.stage("read", timings, run=run):
        context = RunContext(spark, cfg, read_inputs(spark, cfg, run), input_paths(cfg, run))
    results = []
    for name, keys, evaluate in EVALUATIONS:
        if any(key in context.inputs for key in keys):
            with log.stage(name, timings):  # logged and timed: only the evaluations the run makes
                results.append(evaluate(context))
    summary = start_summary(cfg, run, context.paths, results)
    evaluated = [r for r in results if r.users is not None]
    if not evaluated:
        raise ConfigError(NOTHING_TO_EVALUATE)
    with log.stage("write", timings):
        out = open_wing(spark, OFFLINE_RUN, output_root, cfg.output, run=run)
        with writing(out):  # the run's lock: one run of a name at a time
            write_run(spark, out, evaluated, summary, cfg)
            commit_summary(out, OFFLINE_RUN, summary)
    return summary


def write_run(spark: SparkSession, out: Output, results: Sequence[Evaluation], summary: dict, cfg: Config) -> None:
    """Stage the per-user table (the evaluations' frames joined on the user), the metric rows (every spec
    aggregated over that table as written, the evaluations' own rows, their other aggregates) and their
    tables; complete ``summary`` with the counts and notes from the per-user table, the headline and the
    tables written."""
    conf = cfg.offline.confidence
    merged = merge_users([r.users for r in results if r.users is not None])
    path = out.stage("user_metrics", merged)
    users = spark.read.schema(merged.schema).parquet(path)  # read back as written: no inference job
    metric_rows = aggregate(users, [s for r in results for s in r.specs], conf) + [
        row for r in results for row in r.rows
    ]
    for frame, specs in (a for r in results for a in r.aggregates):
        metric_rows += aggregate(frame, specs, conf)
    summary["counts"].update(user_counts(users, results))
    summary["notes"] += [note for r in results for note in r.late_notes(summary["counts"])]
    out.stage_rows("metrics", metric_rows, METRICS_DDL)
    tables = [(n, f) for r in results for n, f in (*r.tables.items(), *r.late_tables(summary["counts"]).items())]
    for name, frame in tables:
        if len(frame):
            out.stage(name, spark.createDataFrame(frame).coalesce(1))
    summary["headline"] = headline(metric_rows, cfg.metrics.k)
    summary["tables"] = sorted(out.tables) + ["summary"]


def merge_users(frames: Sequence[DataFrame]) -> DataFrame:
    """The per-user frames full-joined on the user, in order: one row per user any evaluation scored."""
    out = frames[0]
    for f in frames[1:]:
        out = out.join(f, on=USER, how="full")
    return out
