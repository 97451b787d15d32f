"""The per-user sums: each (slice, user)'s additive day sums, the ``experiment_users`` table, and reading it back.

Daily, one row per (slice, user) with a valid labelled row: the day's one pass computes the sums
(:mod:`recsys_spark.kernels.user_day`: exposures, clicked exposures, requests, empty requests, the business
sums; ranked lists, relevant items, hits and the sums of list metrics over ranked lists); the users the pass
set aside get the same sums on the JVM side (:func:`user_day_sums` of :func:`user_business_sums` and
:func:`user_values`).  :func:`user_day_table` adds each user's ``variants`` (:func:`.assignments.user_variants`)
and is staged as ``experiment_users/dt=D``: what the window and CUPED read later (:func:`read_user_tables`, the
complete days only: :func:`complete_days`, :func:`union_days`).  Sums, never means, so that a user's sums add up
over days.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.experiments.assignments import user_variants
from recsys_spark.experiments.tables import USERS_TABLE, VARIANTS, sql_name
from recsys_spark.kernels.composite import Composite, sum_column, units_column
from recsys_spark.kernels.user_day import event_columns, user_sum_column
from recsys_spark.registry import LIST_METRICS
from recsys_spark.runtime import fs
from recsys_spark.schema import CLICKED, DWELL, EVENT_FLAG_PREFIX, ITEM, N_CLICKS, REQUEST, SLICE, USER, VALUE
from recsys_spark.tables import DAILY


def user_values(users: DataFrame, ks: Sequence[int], composites: Sequence[Composite] = ()) -> DataFrame:
    """(slice, user_id, sums) from per-user rows in the per-user table's layout, one row per (slice, user, k).

    The Spark form of :func:`kernels.user_day.user_day_sums`' metric sums (the day's pass computes them;
    this serves the users the pass set aside): a user's list-metric value is a mean over its ranked lists;
    the sums here are value x ranked lists (0 without a ranked list), so they add up over days; AUC is
    summed weighted by the user's exposures (``auc_sum``, ``auc_exposures``: 0 when the user has no AUC).
    Each composite of ``composites`` adds its two columns (:func:`kernels.composite.day_columns`).
    """
    # the values without k repeat on each row of a (slice, user)
    lists = F.col("n_lists_ranked").cast("double")

    def over_lists(col: str) -> Column:
        value = F.col(col)
        return F.when((lists > 0) & value.isNotNull() & ~F.isnan(value), value * lists).otherwise(F.lit(0.0))

    def at_k(k: int, col: str) -> Column:  # a SQL expression: one py4j call (as in .arm_sums)
        return F.expr(f"max(if(k = {int(k)}, {sql_name(col)}, NULL))")

    has_auc = F.col("auc").isNotNull() & ~F.isnan("auc")
    rows = users.select(
        SLICE,
        USER,
        "k",
        lists.alias("lists_ranked"),
        F.col("n_relevant").cast("double").alias("relevant"),
        F.when(has_auc, F.col("auc") * F.col("n_exposures")).otherwise(F.lit(0.0)).alias("auc_sum"),
        F.when(has_auc, F.col("n_exposures").cast("double")).otherwise(F.lit(0.0)).alias("auc_exposures"),
        over_lists("mrr").alias(user_sum_column("mrr")),
        F.col("hits").cast("double").alias("hits"),
        *[over_lists(m).alias(m) for m in LIST_METRICS],
        *[F.col(m).alias(f"_raw_{m}") for m in _composite_columns(composites)],
    )
    per_user = [
        F.max(c).alias(c) for c in ("lists_ranked", "relevant", "auc_sum", "auc_exposures", user_sum_column("mrr"))
    ]
    per_k: list[Column] = []
    for k in ks:
        per_k.append(at_k(k, "hits").alias(f"hits_at_{k}"))
        per_k += [at_k(k, m).alias(user_sum_column(m, k)) for m in LIST_METRICS]
    return rows.groupBy(SLICE, USER).agg(*per_user, *per_k, *_composite_sums(composites))


def _composite_columns(composites: Sequence[Composite]) -> list[str]:
    return list(dict.fromkeys(t.metric for c in composites for t in c.terms))


def _composite_sums(composites: Sequence[Composite]) -> list[Column]:
    """Per composite, the user's value (0 without one) and 1 when it has one: the SQL form of
    :func:`kernels.composite.composite_values` over a user's rows (a NaN component is a missing one)."""
    out: list[Column] = []
    for c in composites:
        parts = []
        for t in c.terms:
            value = f"nanvl(`_raw_{t.metric}`, CAST(NULL AS DOUBLE))"
            at = value if t.k is None else f"if(k = {int(t.k)}, {value}, NULL)"
            parts.append(f"CAST({float(t.coefficient)!r} AS DOUBLE) * max({at})")
        total = " + ".join(parts)
        out += [
            F.expr(f"coalesce({total}, 0D)").alias(sum_column(c.name)),
            F.expr(f"if(({total}) IS NULL, 0D, 1D)").alias(units_column(c.name)),
        ]
    return out


def user_business_sums(by_user: DataFrame) -> DataFrame:
    """(slice, user_id, exposures, clicked, requests, empty_requests, ...) from the labelled rows.

    Also ``exposed`` (1 when the user has an exposure) and, with the labelled rows' business columns,
    ``click_events`` (its clicks), ``value``, ``valued`` (1 when an event of its carried a value), ``dwell``,
    and per conversion event ``ev_<e>_user`` (1 when it has one) and ``ev_<e>_exposures``
    (:func:`kernels.user_day.event_columns`).  ``by_user`` is hash-partitioned by user: both
    aggregations stay in its partitions (no shuffle of exposure rows).  An empty response is a request
    with no item.
    """
    shown = F.col(ITEM).isNotNull()
    columns = by_user.columns
    flags = [c for c in columns if c.startswith(EVENT_FLAG_PREFIX)]
    amounts = [(N_CLICKS, "click_events"), (VALUE, "value"), (DWELL, "dwell")]
    per_request = by_user.groupBy(SLICE, USER, REQUEST).agg(
        F.count(ITEM).alias("n"),
        F.count(F.when(shown & F.col(CLICKED), 1)).alias("c"),
        *[F.sum(F.when(shown, F.col(c))).alias(name) for c, name in amounts if c in columns],
        *([F.count(F.when(shown, F.col(VALUE))).alias("valued")] if VALUE in columns else []),
        *[F.count(F.when(shown & F.col(c), 1)).alias(c) for c in flags],
    )
    optional: list[Column] = [(F.sum("n") > 0).cast("double").alias("exposed")]
    optional += [F.coalesce(F.sum(name), F.lit(0)).cast("double").alias(name) for c, name in amounts if c in columns]
    if VALUE in columns:
        optional.append((F.sum("valued") > 0).cast("double").alias("valued"))
    for c in flags:
        users, exposures = event_columns(c[len(EVENT_FLAG_PREFIX) :])
        optional += [(F.sum(c) > 0).cast("double").alias(users), F.sum(c).cast("double").alias(exposures)]
    return per_request.groupBy(SLICE, USER).agg(
        F.sum("n").cast("double").alias("exposures"),
        F.sum("c").cast("double").alias("clicked"),
        F.count(F.lit(1)).cast("double").alias("requests"),
        F.count(F.when(F.col("n") == 0, 1)).cast("double").alias("empty_requests"),
        *optional,
    )


def user_day_sums(by_user: DataFrame, values: DataFrame) -> DataFrame:
    """(slice, user_id, every day sum) on the JVM side: :func:`user_business_sums` of the labelled rows and
    the per-user metrics' sums ``values`` (:func:`user_values`), for the users the day's pass set aside
    (the pass gives everyone else's, :meth:`user_pass.UserPass.day_frame`; the columns in the same order).

    Users without ranked lists (only empty responses, or no click at all) are kept with zero list sums:
    they count in the experiment all the same.
    """
    sums = [c for c in values.columns if c not in (SLICE, USER)]
    business = user_business_sums(by_user)
    own = [c for c in business.columns if c not in (SLICE, USER)]
    table = business.join(values, on=[SLICE, USER], how="left").fillna(0.0, subset=sums)
    return table.select(SLICE, USER, *own, *sums)


def user_day_table(day_sums: DataFrame, assignments: DataFrame | None) -> DataFrame:
    """One row per (slice, user) with a valid labelled row: ``variants`` and every additive sum of
    ``day_sums`` (:func:`user_day_sums`, or the day's pass's)."""
    sums = [c for c in day_sums.columns if c not in (SLICE, USER)]
    variants = (
        user_variants(assignments)
        if assignments is not None
        else day_sums.sparkSession.createDataFrame([], f"{USER} string, {VARIANTS} map<string,string>")
    )
    return day_sums.join(variants, on=USER, how="left").select(SLICE, USER, VARIANTS, *sums)


def read_user_tables(
    spark: SparkSession,
    output_root: str,
    days: Iterable[dt.date],
    skipped: list[dt.date] | None = None,
    notes: list[str] | None = None,
) -> tuple[DataFrame | None, list]:
    """The ``experiment_users`` partitions of the complete days of ``days`` (unioned), and the days found.

    A day is read only when its ``summary/dt=D/_SUCCESS`` exists (the reading contract, :func:`complete_days`);
    a day with an ``experiment_users`` partition but no marker is left out and added to ``skipped``.  The union
    holds the columns every found day has (:func:`union_days`).
    """
    found = complete_days(spark, output_root, days, skipped)
    if not found:
        return None, []
    return union_days({d: read_user_table(spark, output_root, d) for d in found}, notes), found


def read_user_table(spark: SparkSession, output_root: str, day: dt.date) -> DataFrame:
    """The ``experiment_users`` partition of ``day``."""
    return spark.read.parquet(DAILY.path(output_root, USERS_TABLE, dt=day.isoformat()))


def complete_days(
    spark: SparkSession, output_root: str, days: Iterable[dt.date], skipped: list[dt.date] | None = None
) -> list[dt.date]:
    """The days of ``days`` with an ``experiment_users`` partition and a ``summary/dt=D/_SUCCESS``; those with the
    partition and no marker (a run that did not finish) are added to ``skipped``.  Two existence checks a day."""
    found = []
    for d in days:
        if not fs.exists(spark, DAILY.path(output_root, USERS_TABLE, dt=d.isoformat())):
            continue
        if fs.exists(spark, DAILY.marker(output_root, dt=d.isoformat())):
            found.append(d)
        elif skipped is not None:
            skipped.append(d)
    return found


def union_days(
    frames: Mapping[dt.date, DataFrame], notes: list[str] | None = None, day_column: str | None = None
) -> DataFrame:
    """The days' ``experiment_users`` tables as one, with the columns every day has (and ``day_column``, the ISO
    day of each row, when named).

    A sum that some day lacks (a partition written by an older release, before the value metrics; another
    ``metrics.k`` or ``labels.conversion_events``) is left out over all of them, never read as null or 0 on those
    days, and a note naming it and the days that lack it goes to ``notes`` (docs/operations.md, "Output tables
    across upgrades").
    """
    days = list(frames)
    first = frames[days[0]]
    common = [c for c in first.columns if all(c in frames[d].columns for d in days[1:])]
    lacking = {
        d: [c for f in frames.values() for c in f.columns if c not in common and c not in frames[d].columns]
        for d in days
    }
    if notes is not None:
        notes += partial_columns_notes(lacking)

    def one(d: dt.date) -> DataFrame:
        day = [F.lit(d.isoformat()).alias(day_column)] if day_column else []
        return frames[d].select(*common, *day)

    out = one(days[0])
    for d in days[1:]:
        out = out.unionByName(one(d))
    return out


def partial_columns_notes(lacking: Mapping[dt.date, Sequence[str]]) -> list[str]:
    """One note per set of sums some days lack (``lacking``: day -> the columns other days have and it lacks).

    >>> notes = partial_columns_notes({dt.date(2026, 11, 19): ["value"], dt.date(2026, 11, 20): ["value"]})
    >>> len(notes), notes[0][:57]
    (1, "experiment_users of 2026-11-19, 2026-11-20 lack ['value']")
    """
    by_columns: dict[tuple[str, ...], list[dt.date]] = {}
    for day, columns in lacking.items():
        if columns:
            by_columns.setdefault(tuple(dict.fromkeys(columns)), []).append(day)
    return [
        f"{USERS_TABLE} of {', '.join(d.isoformat() for d in days)} lack {list(columns)} (written by an older "
        "release, or under another metrics.k or labels.conversion_events): left out on every day, the metrics "
        "that read them too"
        for columns, days in by_columns.items()
    ]


def skipped_note(days: Sequence[dt.date]) -> str:
    """The end of a note naming the days left out as incomplete (:func:`read_user_tables`' ``skipped``); "" for none.

    >>> skipped_note([dt.date(2026, 11, 19)])
    ' (left out, incomplete: no summary/dt=D/_SUCCESS: 2026-11-19)'
    """
    if not days:
        return ""
    return f" (left out, incomplete: no summary/dt=D/_SUCCESS: {', '.join(d.isoformat() for d in days)})"
