"""The sampled evaluation: each user's targets scored among m sampled negatives -> the naive sampled metrics,
the Krichene-Rendle corrected ones (:mod:`kernels.sampled`) and the sampled AUC.

The correction needs the catalog size n (:func:`catalog_size`) and, for each m that occurs, its tables
(:func:`kernels.sampled.tables_for`): the driver receives one row per distinct m (its users and targets).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from recsys_spark.config import Config
from recsys_spark.kernels import sampled as S
from recsys_spark.offline.aggregate import Mean
from recsys_spark.offline.evaluation import Evaluation, RunContext, Spec, per_user
from recsys_spark.offline.inputs import IS_TARGET
from recsys_spark.offline.set_aside import set_aside, set_aside_notes
from recsys_spark.schema import ITEM, SCORE, USER


def evaluate_sampled(run: RunContext) -> Evaluation:
    """The sampled evaluation of ``offline.sampled`` (docs/offline.md, "Sampled metrics")."""
    cfg, ks = run.cfg, run.cfg.metrics.k
    rows, _, counts, _ = set_aside(run.inputs["sampled"], "sampled", run.paths["sampled"])
    notes = set_aside_notes("sampled", counts)
    n, source = catalog_size(cfg, run.inputs)
    per_m = negatives(rows)
    ms = sorted(int(r["m"]) for r in per_m)
    tables_by_m = S.tables_for(n, ms, ks, cfg.offline.sampled_gamma, cfg.offline.sampled_replacement)
    users = per_user(
        rows,
        (USER, SCORE, IS_TARGET),
        S.user_columns(ks),
        lambda f: S.score_sampled(f, ks, tables_by_m),
        run.partitions(sum(int(r["m"]) * int(r["users"]) + int(r["targets"]) for r in per_m)),
    )
    return Evaluation(
        "sampled",
        users,
        specs=sampled_specs(ks),
        counts=counts,
        notes=notes + catalog_notes(n, ms),
        summary={"sampled": sampled_summary(cfg, n, source, per_m)},
        user_counts=[F.sum("n_targets").alias("sampled_targets")],
    )


def negatives(rows: DataFrame) -> list[Row]:
    """One row per distinct number m of a user's negatives: m, its users, their targets."""
    return (
        rows.groupBy(USER)
        .agg(
            F.sum(F.when(~F.col(IS_TARGET), 1).otherwise(0)).alias("m"),
            F.sum(F.when(F.col(IS_TARGET), 1).otherwise(0)).alias("t"),
        )
        .groupBy("m")
        .agg(F.count("*").alias("users"), F.sum("t").alias("targets"))
        .collect()
    )


def sampled_summary(cfg: Config, n: int, source: str, per_m: list[Row]) -> dict[str, Any]:
    """The summary's ``sampled`` entry: the catalog size and its source, the sampling law, users per m."""
    return {
        "catalog_size": n,
        "catalog_size_from": source,
        "gamma": cfg.offline.sampled_gamma,
        "law": "binomial (with replacement)"
        if cfg.offline.sampled_replacement
        else "hypergeometric (without replacement)",
        "negatives": {str(r["m"]): {"users": r["users"], "targets": r["targets"]} for r in per_m},
    }


def catalog_notes(n: int, ms: Sequence[int]) -> list[str]:
    """Notes on a catalog much larger than the negatives, and on the m that have no corrected values."""
    notes = []
    if any(m >= 1 and n / m > 20 for m in ms):
        notes.append(
            f"sampled: catalog n={n} is more than 20x the negatives m={[m for m in ms if m]}: "
            "the corrected values remove most of the naive bias but can underestimate the "
            "top-k metrics (docs/offline.md, simulation); compare models on sampled AUC"
        )
    unusable = [m for m in ms if m < 1 or m >= n]
    if unusable:
        notes.append(
            f"sampled: users with m in {unusable} negatives (m = 0 or m >= catalog size {n}) have no corrected values"
        )
    return notes


def sampled_specs(ks: Sequence[int]) -> list[Spec]:
    """Every sampled metric naive; every one but the AUC corrected too."""
    specs: list[Spec] = []
    for name, k in S.metric_names(ks):
        specs.append(Mean(name, k, "sampled_naive", S.column(name, k, "sampled")))
        if name != "auc":
            specs.append(Mean(name, k, "sampled_corrected", S.column(name, k, "corrected")))
    return specs


def catalog_size(cfg: Config, inputs: Mapping[str, DataFrame]) -> tuple[int, str]:
    """n for the sampled metrics: config, else the items table, else distinct items seen in any input."""
    if cfg.offline.catalog_size:
        return cfg.offline.catalog_size, "config offline.catalog_size"
    if "items" in inputs:
        return inputs["items"].select(ITEM).distinct().count(), "items table"
    seen = None
    for df in inputs.values():
        part = df.select(ITEM)
        seen = part if seen is None else seen.union(part)
    return (seen.distinct().count() if seen is not None else 0), "distinct items in the inputs (no items table)"
