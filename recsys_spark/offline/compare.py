"""``recsys-spark offline-compare``: paired differences of two offline runs, user by user.

For every per-user metric column the two runs share, over the users where both
runs have a value: d_u = candidate_u - base_u, the paired t
(:func:`kernels.comparisons.paired_t`: mean of d, its t interval, p-value) and the
relative lift against the base mean; the p-values of all metrics are adjusted
together (:func:`kernels.comparisons.adjust_p`, ``offline.multiple_testing``).  One
aggregation over the joined per-user tables: the driver receives sums only.

Output: ``{output_root}/offline/comparison/base=A/candidate=B/`` and its summary
``offline/summary/base=A/candidate=B/summary.json`` (:data:`recsys_spark.tables.OFFLINE_COMPARISON`).  A comparison
without a single paired value (no user in both runs, no metric in both, or no user with a value of any
metric in both) is refused before anything is written: :class:`errors.EmptyInputError` (exit 7).
"""

from __future__ import annotations

import re

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark.config import Config
from recsys_spark.errors import EmptyInputError, MissingInputError
from recsys_spark.io.output import commit_summary, open_wing, writing
from recsys_spark.io.read import read_parquet
from recsys_spark.kernels.comparisons import adjust_p, paired_t
from recsys_spark.kernels.sums import MeanStats
from recsys_spark.offline.aggregate import defined, finite_or_none
from recsys_spark.runtime import fs
from recsys_spark.schema import USER
from recsys_spark.tables import OFFLINE_COMPARISON, OFFLINE_RUN

COMPARISON_SCHEMA = (
    "column string, metric string, k int, n long, base_mean double, candidate_mean double, "
    "delta double, se double, ci_low double, ci_high double, rel_delta double, rel_ci_low double, "
    "rel_ci_high double, p_value double, p_adjusted double, method string, correction string"
)

#: per-user columns that are counts or sums, not metrics
_NOT_METRICS = re.compile(r"^(n_.*|hits_at_\d+|.*_sum|ratings_d_missing|sampled_rank)$")


def metric_columns(base: DataFrame, candidate: DataFrame) -> list[str]:
    """Double columns of both per-user tables that are metrics (counts and sums left out), sorted."""

    def doubles(df: DataFrame) -> set[str]:
        return {f.name for f in df.schema.fields if isinstance(f.dataType, T.DoubleType)}

    return sorted(c for c in doubles(base) & doubles(candidate) if not _NOT_METRICS.match(c))


def split_column(column: str) -> tuple[str, int | None]:
    """``ndcg_at_10`` -> (ndcg, 10); ``mrr`` -> (mrr, None)."""
    m = re.match(r"^(.*)_at_(\d+)$", column)
    return (m.group(1), int(m.group(2))) if m else (column, None)


def _refuse_empty(row: Row, columns: list[str], base: str, candidate: str, root: str) -> None:  # root: the output root
    """Raise :class:`EmptyInputError` (exit 7) when the comparison would hold no paired value: no user in
    both runs, no per-user metric in both, or no user with a value of any metric in both runs."""
    tables = " and ".join(OFFLINE_RUN.path(root, "user_metrics", run=run) for run in (base, candidate))
    if not row["users"]:
        raise EmptyInputError(f"offline-compare: runs {base!r} and {candidate!r} have no user in common ({tables})")
    if not columns:
        raise EmptyInputError(
            f"offline-compare: runs {base!r} and {candidate!r} have no per-user metric in common ({tables}): "
            "did they evaluate different inputs?"
        )
    if not any(row[f"n{i}"] for i in range(len(columns))):
        raise EmptyInputError(
            f"offline-compare: no user of the {row['users']} in both runs {base!r} and {candidate!r} has a value "
            f"of any metric in both ({tables})"
        )


def compare_runs(spark: SparkSession, cfg: Config, output_root: str, base: str, candidate: str) -> dict:
    """Compare the per-user tables of offline runs ``base`` and ``candidate`` and write the comparison
    (:data:`recsys_spark.tables.OFFLINE_COMPARISON`); return its summary with the ``rows`` written."""
    a, b = (read_user_metrics(spark, output_root, run) for run in (base, candidate))
    columns = metric_columns(a, b)
    sums = paired_sums(a, b, columns)
    _refuse_empty(sums, columns, base, candidate, output_root)
    method, confidence = cfg.offline.multiple_testing, cfg.offline.confidence
    rows = comparison_rows(sums, columns, confidence, method)
    summary = {
        "base": base,
        "candidate": candidate,
        "users_in_both": int(sums["users"]),
        "correction": method,
        "confidence": confidence,
        "metrics": len(rows),
        "significant_after_correction": [r[0] for r in rows if r[14] is not None and r[14] < 1 - confidence],
    }
    out = open_wing(spark, OFFLINE_COMPARISON, output_root, cfg.output, base=base, candidate=candidate)
    with writing(out):  # one comparison of a pair at a time
        out.stage_rows("comparison", rows, COMPARISON_SCHEMA)
        commit_summary(out, OFFLINE_COMPARISON, summary)
    summary["rows"] = rows
    return summary


def read_user_metrics(spark: SparkSession, output_root: str, run: str) -> DataFrame:
    """The per-user table of a complete offline run; :class:`MissingInputError` when its marker is absent."""
    marker = OFFLINE_RUN.marker(output_root, run=run)
    if not fs.exists(spark, marker):
        raise MissingInputError(f"offline run {run!r} not found (no {marker})")
    return read_parquet(spark, OFFLINE_RUN.path(output_root, "user_metrics", run=run), f"user_metrics of run {run}", {})


def paired_sums(base: DataFrame, candidate: DataFrame, columns: list[str]) -> Row:
    """One aggregation over the users in both runs: ``users``, and for the i-th column over the users where
    both values are defined, d_u = candidate_u - base_u: ``n{i}``, Σd ``sd{i}``, Σd² ``sdd{i}``, Σbase
    ``sa{i}``, Σbase² ``saa{i}``."""
    joined = base.select(USER, *[F.col(c).alias(f"a_{i}") for i, c in enumerate(columns)]).join(
        candidate.select(USER, *[F.col(c).alias(f"b_{i}") for i, c in enumerate(columns)]), on=USER, how="inner"
    )
    exprs = []
    for i in range(len(columns)):
        x, y = defined(f"a_{i}"), defined(f"b_{i}")
        both = x.isNotNull() & y.isNotNull()
        d, x = F.when(both, y - x), F.when(both, x)
        exprs += [
            F.count(d).alias(f"n{i}"),
            F.sum(d).alias(f"sd{i}"),
            F.sum(d * d).alias(f"sdd{i}"),
            F.sum(x).alias(f"sa{i}"),
            F.sum(x * x).alias(f"saa{i}"),
        ]
    return joined.agg(F.count("*").alias("users"), *exprs).collect()[0]  # no grouping: one row


def comparison_rows(sums: Row, columns: list[str], confidence: float, method: str) -> list[tuple]:
    """A row of :data:`COMPARISON_SCHEMA` per column: the paired t of its differences
    (:func:`kernels.comparisons.paired_t`) and its p-value adjusted with all the others' by ``method``."""
    results = []
    for i, col in enumerate(columns):
        n = float(sums[f"n{i}"] or 0)
        diff = MeanStats(n, float(sums[f"sd{i}"] or 0.0), float(sums[f"sdd{i}"] or 0.0))
        ctrl = MeanStats(n, float(sums[f"sa{i}"] or 0.0), float(sums[f"saa{i}"] or 0.0))
        results.append((col, n, ctrl, diff, paired_t(diff, ctrl, confidence)))
    adjusted: list[float] = adjust_p([r[4].p_value for r in results], method).tolist() if results else []
    clean = finite_or_none
    rows = []
    for (col, n, ctrl, diff, c), p_adj in zip(results, adjusted, strict=True):
        metric, k = split_column(col)
        rows.append(
            (
                col,
                metric,
                k,
                int(n),
                clean(ctrl.mean),
                clean(ctrl.mean + diff.mean) if n else None,
                clean(c.delta),
                clean(c.se),
                clean(c.ci_low),
                clean(c.ci_high),
                clean(c.rel_delta),
                clean(c.rel_ci_low),
                clean(c.rel_ci_high),
                clean(c.p_value),
                clean(p_adj),
                c.method,
                method,
            )
        )
    return rows
