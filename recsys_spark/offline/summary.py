"""The offline run's summary (``offline/summary/run=NAME/summary.json``): what was read, which evaluations
ran, their counts and notes, and the headline values.  The counts come from the evaluations and from one
aggregation over the written per-user table (:func:`user_counts`); nothing per user reaches the driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark import registry
from recsys_spark.config import Config
from recsys_spark.offline.evaluation import Evaluation


def start_summary(cfg: Config, run: str, paths: Mapping[str, str], results: Sequence[Evaluation]) -> dict[str, Any]:
    """The summary before the write: the run, its inputs, the evaluations that ran (in order), their counts and
    notes (a skipped evaluation's notes included), the config's fingerprint, then each evaluation's own keys."""
    summary: dict[str, Any] = {
        "run": run,
        "inputs": dict(paths),
        "evaluations": [r.name for r in results if r.users is not None],
        "counts": {k: v for r in results for k, v in r.counts.items()},
        "notes": [note for r in results for note in r.notes],
        "config_fingerprint": cfg.fingerprint(),
        "confidence": cfg.offline.confidence,
        "ks": list(cfg.metrics.k),
    }
    for r in results:
        summary.update(r.summary)
    return summary


def user_counts(users: DataFrame, results: Sequence[Evaluation]) -> dict[str, int]:
    """``users`` (rows of the per-user table) and each evaluation's :attr:`Evaluation.user_counts`, in one
    aggregation (no grouping: one row); a null sum is 0."""
    row = users.agg(F.count("*").alias("users"), *[c for r in results for c in r.user_counts]).collect()[0]
    return {k: int(v or 0) for k, v in row.asDict().items()}


def headline(rows: Sequence[tuple], ks: Sequence[int]) -> dict[str, float | None]:
    """The summary's few headline values (at k = 10 when it is a cut-off, else the largest), keyed by
    :func:`registry.key`; a metric the run did not compute is absent."""
    k = 10 if 10 in ks else max(ks)
    wanted = {
        ("ndcg", k, "user_avg"),
        ("recall", k, "user_avg"),
        ("precision", k, "user_avg"),
        ("mrr", None, "user_avg"),
        ("item_coverage", None, "global"),
        ("auc", None, "global"),
        ("auc", None, "user_avg"),
        ("logloss", None, "global"),
        ("pcoc", None, "global"),
        ("mae", None, "global"),
        ("rmse", None, "global"),
        ("ndcg", k, "sampled_naive"),
        ("ndcg", k, "sampled_corrected"),
        ("auc", None, "sampled_naive"),
    }
    # a threshold row (r[10] not null) is one of several of its name: no headline key names it
    return {registry.key(r[0], r[1], r[2]): r[4] for r in rows if (r[0], r[1], r[2]) in wanted and r[10] is None}
