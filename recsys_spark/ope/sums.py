"""The sums of ``recsys-spark ope``: the labelled rows and the candidate, into the kernel's run sums (Spark wiring).

The third of the run's three steps (:mod:`recsys_spark.ope.run`).  Each logged row gets its terms
(:mod:`recsys_spark.kernels.ope`'s e, p, w, d, q, in columns), summed per (user, request) in place -- the
list-level terms, in position order -- then per user (the per-list rows move), then per run: Σ of every
per-user sum of :data:`kernels.ope.SUMS` and of the products the intervals need, one row to the driver
(:class:`kernels.ope.RunSums`).  The heaviest weights travel with them, with what they are made of, for the
note an overflow calls for.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.errors import SchemaError
from recsys_spark.kernels import ope as K
from recsys_spark.ope.candidate import Candidate
from recsys_spark.schema import (
    ITEM,
    LIST_PROPENSITY,
    POSITION,
    PREFIX_PROPENSITY,
    PROPENSITY,
    RELEVANCE,
    REQUEST,
    USER,
)


def ope_sums(
    labelled: DataFrame,
    candidate: Candidate,
    logged_counts: dict[str, int],
    partitions: int,
    clip: float,
    tau: float,
) -> tuple[K.RunSums, dict[str, Any]]:
    """Step 3 of the run: the run sums of the labelled rows against the candidate, and the heaviest weights
    (:func:`run_sums` of :func:`list_terms`); RIPS only when a logged row has a prefix propensity, the
    standard slate IPS only when one has a list propensity (``logged_counts``:
    :func:`recsys_spark.ope.logged.check_logged`'s)."""
    per_list = list_terms(
        labelled,
        candidate.rows,
        candidate.positions,
        partitions,
        clip,
        tau,
        ordered=logged_counts[f"with_{PREFIX_PROPENSITY}"] > 0,
        with_list=logged_counts[f"with_{LIST_PROPENSITY}"] > 0,
    )
    return run_sums(per_list)


# --------------------------------------------------------------------------- per list


def list_terms(
    labelled: DataFrame,
    candidate: DataFrame,
    positions: DataFrame,
    partitions: int,
    clip: float,
    tau: float,
    ordered: bool,
    with_list: bool,
) -> DataFrame:
    """One row per logged (user, request): the item-level sums of its rows and its list-level terms
    (kernels/ope.py's definitions).  ``ordered``: compute RIPS (the rows in position order);
    ``with_list``: compute the standard slate IPS.

    The logged rows are hash-partitioned by request (their one shuffle here) like ``candidate``
    (:func:`recsys_spark.ope.candidate.target_rows`) and ``positions``
    (:func:`recsys_spark.ope.candidate.target_positions`), so the joins on (request, item, position) and
    (request, position) and the sums per (user, request) move nothing more
    (``spark.sql.requireAllClusterKeysForCoPartition=false``, which the job sets); only the per-list rows
    move, to be summed per user.
    """
    rows = row_terms(labelled, candidate, positions, partitions, clip)
    per_list = rows.groupBy(USER, REQUEST).agg(*list_sums(clip, tau, ordered, with_list))
    return per_list.select(USER, *list_level(clip, ordered, with_list))


def row_terms(
    labelled: DataFrame, candidate: DataFrame, positions: DataFrame, partitions: int, clip: float
) -> DataFrame:
    """Each labelled row with its terms: y (its relevance), p, lp, pp (its propensities), e and q (the
    candidate's row: 0 and null when it has none), d and mass (the candidate's position: 0 when it has
    none), raw = e / p (0 without p) and w = raw clipped at ``clip``."""
    rows = (
        labelled.repartition(partitions, REQUEST)
        .join(
            candidate.where(~F.col("bad") & (F.col("e") > 0)).select(REQUEST, ITEM, POSITION, "e", "q"),
            [REQUEST, ITEM, POSITION],
            "left",
        )
        .join(positions.select(REQUEST, POSITION, "d", "mass"), [REQUEST, POSITION], "left")
    )
    rows = rows.select(
        USER,
        REQUEST,
        ITEM,
        POSITION,
        F.col(RELEVANCE).cast("double").alias("y"),
        F.col(PROPENSITY).alias("p"),
        F.col(LIST_PROPENSITY).alias("lp"),
        F.col(PREFIX_PROPENSITY).alias("pp"),
        F.coalesce(F.col("e"), F.lit(0.0)).alias("e"),
        F.col("q"),
        F.coalesce(F.col("d"), F.lit(0.0)).alias("d"),
        F.coalesce(F.col("mass"), F.lit(0.0)).alias("mass"),
    )
    raw = F.when(F.col("p").isNotNull(), F.col("e") / F.col("p")).otherwise(F.lit(0.0))
    return rows.withColumn("raw", raw).withColumn("w", _clipped(F.col("raw"), clip))


def list_sums(clip: float, tau: float, ordered: bool, with_list: bool) -> list[Column]:
    """The aggregations of one (user, request)'s rows (:func:`row_terms`): the item-level sums of
    :data:`kernels.ope.SUMS`, the heaviest importance weight ``top_w`` (with e, p and the row), the counts
    that say whether every row has a propensity and a prefix propensity, the list propensity, and
    ``with_list``: Π e (``e_list``); ``ordered``: RIPS's cascade (:func:`cascade`)."""
    y, e, w, d = F.col("y"), F.col("e"), F.col("w"), F.col("d")
    has_p = F.col("p").isNotNull()
    residual = F.when(e > 0, y - F.coalesce(F.col("q"), F.lit(0.0))).otherwise(F.lit(0.0))

    def total(value: Column, where: Column | None = None) -> Column:
        return F.sum(value if where is None else F.when(where, value).otherwise(F.lit(0.0))).cast("double")

    one = F.lit(1.0)
    aggs = [
        total(one).alias("rows"),
        total(y).alias("reward"),
        total(d).alias("dm"),
        total(F.col("mass")).alias("mass"),
        total(one, e == 1.0).alias("match"),
        total(y, e == 1.0).alias("match_reward"),
        total(one, e == 0.0).alias("unseen"),
        total(one, has_p).alias("rows_p"),
        total(d, has_p).alias("dm_p"),
        total(w, has_p).alias("w"),
        total(w * w, has_p).alias("w_sq"),
        total(w * y, has_p).alias("w_reward"),
        total(w * residual, has_p).alias("w_residual"),
        total(w * residual, has_p & (F.col("raw") <= tau)).alias("switch_residual"),
        F.max(F.when(has_p, F.struct(w.alias("w"), F.col("e"), F.col("p"), REQUEST, ITEM, POSITION))).alias("top_w"),
        F.count(F.col("p")).alias("n_p"),
        F.count(F.lit(1)).alias("n"),
        F.max("lp").alias("lp"),
        F.count(F.col("pp")).alias("n_pp"),
    ]
    if with_list:
        aggs.append(F.aggregate(F.collect_list(e), F.lit(1.0), lambda acc, x: acc * x).alias("e_list"))
    if ordered:
        aggs.append(cascade(clip).alias("cascade"))
    return aggs


def cascade(clip: float) -> Column:
    """RIPS's Σ_k min(Π_{j≤k} e_j / prefix_propensity_k, M) y_k over one list's rows, folded in position
    order (sorted explicitly: ``collect_list`` keeps no order after a shuffle)."""
    ordered_rows = F.array_sort(F.collect_list(F.struct(POSITION, "e", "y", "pp")))
    return F.aggregate(
        ordered_rows,
        F.struct(F.lit(1.0).alias("prod"), F.lit(0.0).alias("total")),
        lambda acc, x: F.struct(
            (acc["prod"] * x["e"]).alias("prod"),
            (acc["total"] + x["y"] * _clipped(acc["prod"] * x["e"] / x["pp"], clip)).alias("total"),
        ),
        lambda acc: acc["total"],
    )


def list_level(clip: float, ordered: bool, with_list: bool) -> list[Column]:
    """The per-list row's columns from :func:`list_sums`: every sum of :data:`kernels.ope.SUMS` in order
    (the list-level ones counted only for a list that has what they need: a list propensity, a propensity or
    a prefix propensity on every row; 0 when not computed), then ``top_w`` and, ``with_list``, ``top_list``:
    the list weight W of slate_ips with what it is made of."""
    complete_p = F.col("n_p") == F.col("n")
    has_lp = F.col("lp").isNotNull()
    complete_pp = F.col("n_pp") == F.col("n")
    zero = F.lit(0.0)
    weight = _clipped(F.col("e_list") / F.col("lp"), clip)
    extra = {
        "lists": F.lit(1.0),
        "list_reward": F.col("reward"),
        "lists_sips": F.when(has_lp, 1.0).otherwise(zero) if with_list else zero,
        "sips": F.when(has_lp, weight * F.col("reward")).otherwise(zero) if with_list else zero,
        "lists_iips": F.when(complete_p, 1.0).otherwise(zero),
        "iips": F.when(complete_p, F.col("w_reward")).otherwise(zero),
        "lists_rips": F.when(complete_pp, 1.0).otherwise(zero) if ordered else zero,
        "rips": F.when(complete_pp, F.col("cascade")).otherwise(zero) if ordered else zero,
    }
    columns = [extra[name].alias(name) if name in extra else F.col(name) for name in K.SUMS]
    columns.append(F.col("top_w"))
    if with_list:
        top = F.struct(weight.alias("w"), F.col("e_list"), F.col("lp"), F.col(REQUEST))
        columns.append(F.when(has_lp, top).alias("top_list"))
    return columns


def _clipped(weight: Column, clip: float) -> Column:
    return F.least(weight, F.lit(float(clip))) if clip > 0 else weight


# --------------------------------------------------------------------------- per user, per run


def run_sums(per_list: DataFrame) -> tuple[K.RunSums, dict[str, Any]]:
    """The per-user sums of :data:`kernels.ope.SUMS`, then per run: the users, Σ of each, Σ of the
    products :func:`kernels.ope.products` names (one row to the driver); and the heaviest weights with
    what they are made of: ``item`` (w, e, p, request, item, position) and, with list propensities,
    ``list`` (W, Π e, list_propensity, request), or None."""
    tops = [c for c in ("top_w", "top_list") if c in per_list.columns]
    per_user = per_list.groupBy(USER).agg(
        *[F.sum(name).alias(name) for name in K.SUMS], *[F.max(c).alias(c) for c in tops]
    )
    pairs = K.products()
    row = per_user.agg(
        F.count(F.lit(1)).alias("_n"),
        *[F.sum(name).alias(name) for name in K.SUMS],
        *[F.sum(F.col(a) * F.col(b)).alias(K.product_name(a, b)) for a, b in pairs],
        *[F.max(c).alias(c) for c in tops],
    ).collect()[0]
    top = row["top_w"]
    sums = K.RunSums(
        float(row["_n"]),
        {name: float(row[name] or 0.0) for name in K.SUMS},
        {(a, b): float(row[K.product_name(a, b)] or 0.0) for a, b in pairs},
        None if top is None else float(top["w"]),
    )
    return sums, {"item": top, "list": row["top_list"] if "top_list" in tops else None}


def check_no_copies(sums: K.RunSums, rows: int, location: str) -> None:
    """A :class:`SchemaError` when the candidate lists a logged row's (request, item, position) twice: the
    join then counted that logged row twice (``rows``: the labelled rows,
    :func:`recsys_spark.ope.logged.check_labelled`)."""
    if sums.sum("rows") != rows:
        raise SchemaError(
            f"ope.target {location}: some (request_id, item_id, position) of a logged row are listed more than "
            f"once ({int(sums.sum('rows')) - rows} extra rows); one row per (request_id, item_id, position)"
        )
