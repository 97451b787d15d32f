"""The Spark side of A/B experiments: per-user sums by experiment and variant, the checks, the analysis.

The step the day and the window share (the maths is :mod:`recsys_spark.kernels.experiments`'s).  Daily
(:func:`experiment_stage`, called by :mod:`recsys_spark.daily` after the metric stage):

1. read ``experiments.assignments`` (``user_id, experiment, variant[, layer]``); when the path
   does not exist, nothing else happens and the summary says so;
2. :func:`user_day_table`: one row per (slice, user) with a valid labelled row that day:
   additive per-user sums (:mod:`recsys_spark.kernels.user_day`: exposures, clicked exposures,
   requests, empty requests, the business sums; ranked lists, relevant items, hits and the sums of
   list metrics over ranked lists), computed by the day's one pass over the user partitions (the
   users it set aside by :func:`user_day_sums` on the JVM side), and ``variants``: a map experiment ->
   variant (null when the user has several variants of that experiment).  Staged as
   ``experiment_users/dt=D``: what the window command and CUPED read later;
3. :func:`arm_sums`: one ``groupBy(experiment, variant, slice)`` of those rows gives every
   metric's sufficient statistics (n, sums, sums of squares and products over users); only these
   small sums reach the driver, where :mod:`recsys_spark.kernels.experiments` turns them into the
   ``experiments`` and ``experiment_checks`` tables.

Over a window (:func:`recsys_spark.experiments.window.run_window`, ``recsys-spark experiment``): the
``experiment_users`` partitions of the window's complete days (:func:`read_user_tables`), each user's sums
added over the days (:func:`window_users`: a user counts once), then the same steps 3 and on.  No raw
log is read again.  The command and the lines it prints live in :mod:`recsys_spark.cli`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config, templates
from recsys_spark.errors import ConfigError
from recsys_spark.io.output import Output
from recsys_spark.io.read import ColumnSpec, conform, exists, read_parquet
from recsys_spark.kernels.decisions import DECISION_COLUMNS, Decision, Margin, Roles, Validity, decide, effects_of
from recsys_spark.kernels.experiments import (
    COVARIATE_PARTS,
    RESULT_COLUMNS,
    MetricSpec,
    ResultRow,
    analyse_experiment,
    event_columns,
    independence_test,
    is_indicator,
    overflow_notes,
    parse_metric,
    srm_test,
    user_sum_column,
    why_not_compared,
)
from recsys_spark.registry import LIST_METRICS
from recsys_spark.runtime import fs
from recsys_spark.schema import (
    ALL,
    CLICKED,
    DWELL,
    EVENT_FLAG_PREFIX,
    ITEM,
    N_CLICKS,
    REQUEST,
    SLICE,
    USER,
    VALUE,
)
from recsys_spark.steps.rules import RuleResult
from recsys_spark.tables import DAILY

EXPERIMENT, VARIANT, LAYER, VARIANTS = "experiment", "variant", "layer", "variants"
ASSIGNMENT_COLUMNS = (
    ColumnSpec(USER, "id"),
    ColumnSpec(EXPERIMENT, "string"),
    ColumnSpec(VARIANT, "string"),
    ColumnSpec(LAYER, "string", required=False),
)
USERS_TABLE, RESULTS_TABLE, CHECKS_TABLE = "experiment_users", "experiments", "experiment_checks"
DECISIONS_TABLE = "experiment_decisions"
CHECKS_SCHEMA = "experiment string, check string, statistic double, p_value double, passed boolean, detail string"
RESULTS_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in RESULT_COLUMNS)
DECISIONS_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in DECISION_COLUMNS)


# --- reading ---------------------------------------------------------------------------------
def user_values(users: DataFrame, ks: Sequence[int]) -> DataFrame:
    """(slice, user_id, sums) from per-user rows in the per-user table's layout, one row per (slice, user, k).

    The Spark form of :func:`kernels.user_day.user_day_sums`' metric sums (the day's pass computes them;
    this serves the users the pass set aside): a user's list-metric value is a mean over its ranked lists;
    the sums here are value x ranked lists (0 without a ranked list), so they add up over days; AUC is
    summed weighted by the user's exposures (``auc_sum``, ``auc_exposures``: 0 when the user has no AUC).
    """
    # the values without k repeat on each row of a (slice, user)
    lists = F.col("n_lists_ranked").cast("double")

    def over_lists(col: str) -> Column:
        value = F.col(col)
        return F.when((lists > 0) & value.isNotNull() & ~F.isnan(value), value * lists).otherwise(F.lit(0.0))

    def at_k(k: int, col: str) -> Column:  # a SQL expression: one py4j call (see _spec_sums)
        return F.expr(f"max(if(k = {int(k)}, {_q(col)}, NULL))")

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
    )
    per_user = [
        F.max(c).alias(c) for c in ("lists_ranked", "relevant", "auc_sum", "auc_exposures", user_sum_column("mrr"))
    ]
    per_k: list[Column] = []
    for k in ks:
        per_k.append(at_k(k, "hits").alias(f"hits_at_{k}"))
        per_k += [at_k(k, m).alias(user_sum_column(m, k)) for m in LIST_METRICS]
    return rows.groupBy(SLICE, USER).agg(*per_user, *per_k)


def user_business_sums(by_user: DataFrame) -> DataFrame:
    """(slice, user_id, exposures, clicked, requests, empty_requests, ...) from the labelled rows.

    Also ``exposed`` (1 when the user has an exposure) and, with the labelled rows' business columns,
    ``click_events`` (its clicks), ``value``, ``valued`` (1 when an event of its carried a value), ``dwell``,
    and per conversion event ``ev_<e>_user`` (1 when it has one) and ``ev_<e>_exposures``
    (:func:`kernels.experiments.event_columns`).  ``by_user`` is hash-partitioned by user: both
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


def specs_with_columns(specs: Sequence[MetricSpec], columns: Sequence[str]) -> tuple[list[MetricSpec], list[str]]:
    """The metrics whose per-user sums the table has, and a note naming those left out (a value metric on
    a day whose clicks carry no value, a conversion event not in ``labels.conversion_events``)."""
    kept = [s for s in specs if s.num in columns and s.den in columns]
    left = [s.name for s in specs if s not in kept]
    note = (
        f"experiments.metrics {left} left out: the per-user table has no sums for them (no value or dwell "
        "column in the clicks, an event not in labels.conversion_events, or a day written before they existed)"
    )
    return kept, [note] if left else []


def read_assignments(spark: SparkSession, path: str, columns: Mapping[str, str]) -> DataFrame:
    """The assignments table, its columns renamed by ``columns`` (``input.columns``) and conformed (ids as
    strings); rows with a null id, experiment or variant dropped."""
    df = conform(read_parquet(spark, path, "assignments", columns), ASSIGNMENT_COLUMNS, path)
    return df.where(F.col(USER).isNotNull() & F.col(EXPERIMENT).isNotNull() & F.col(VARIANT).isNotNull())


def user_variants(assignments: DataFrame) -> DataFrame:
    """(user_id, variants): map experiment -> variant, null for a user with several variants of it.

    One aggregation by user (the variants of each experiment are resolved in the user's row: an
    aggregation by (user, experiment) first cost a second shuffle).
    """
    pairs = F.array_distinct(F.collect_list(F.struct(EXPERIMENT, VARIANT)))
    experiments = F.array_distinct(F.transform("pairs", lambda p: p[EXPERIMENT]))
    variant = F.transform(
        experiments,
        lambda e: F.transform(F.filter("pairs", lambda p: p[EXPERIMENT] == e), lambda p: p[VARIANT]),
    )
    one = F.transform(variant, lambda vs: F.when(F.size(vs) == 1, vs[0]))
    return (
        assignments.groupBy(USER)
        .agg(pairs.alias("pairs"))
        .select(USER, F.map_from_arrays(experiments, one).alias(VARIANTS))
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


# --- sufficient statistics ---------------------------------------------------------------------
def _q(name: str) -> str:
    """A column name quoted for a SQL expression."""
    return "`" + name.replace("`", "``") + "`"


def _spec_sums(spec: MetricSpec, cuped: bool) -> list[Column]:
    """Aggregations of one metric over the users of a group, named ``f"{spec.name}|{part}"``.

    Written as SQL expressions, one py4j call each (the Column API takes several per column; what that
    costs the driver: docs/performance.md).
    """
    num, den = _q(spec.num), _q(spec.den)
    has = f"{den} > 0"

    def s(expr: str, part: str, where: str = has) -> Column:
        return F.expr(f"sum(if({where}, {expr}, 0D))").alias(f"{spec.name}|{part}")

    if spec.kind == "ratio":
        out = [
            s("1D", "n"),
            s(num, "x"),
            s(den, "y"),
            s(f"{num} * {num}", "xx"),
            s(f"{den} * {den}", "yy"),
            s(f"{num} * {den}", "xy"),
        ]
        if cuped:  # pre-period numerator u and denominator v, both 0 without pre-period rows or either sum
            cnum, cden = _q("_cov_" + spec.num), _q("_cov_" + spec.den)
            both = f"{cnum} IS NOT NULL AND {cden} IS NOT NULL"
            u, v = f"if({both}, {cnum}, 0D)", f"if({both}, {cden}, 0D)"
            out += [
                s(f"if({v} > 0, 1D, 0D)", "cn"),
                s(u, "u"),
                s(v, "v"),
                s(f"{u} * {u}", "uu"),
                s(f"{v} * {v}", "vv"),
                s(f"{num} * {u}", "xu"),
                s(f"{num} * {v}", "xv"),
                s(f"{den} * {u}", "yu"),
                s(f"{den} * {v}", "yv"),
                s(f"{u} * {v}", "uv"),
            ]
        return out
    y = f"if({den} > 0, try_divide({num}, {den}), NULL)"
    out = [s("1D", "n"), s(y, "x"), s(f"{y} * {y}", "xx")]
    if cuped:
        cnum, cden = _q("_cov_" + spec.num), _q("_cov_" + spec.den)
        x = f"if({cden} > 0, try_divide({cnum}, {cden}), NULL)"
        with_x = f"{has} AND {x} IS NOT NULL"
        exprs = ("1D", y, f"{y} * {y}", x, f"{x} * {x}", f"{x} * {y}")
        out += [s(expr, part, with_x) for expr, part in zip(exprs, COVARIATE_PARTS, strict=True)]
    return out


def arm_sums(rows: DataFrame, specs: Sequence[MetricSpec], cuped: bool) -> dict[tuple[str, str | None, str], dict]:
    """{(experiment, variant, slice): {"users": n, f"{metric}|{part}": sum}}: one aggregation, small collect.

    ``variant`` None collects the users excluded for several variants.
    """
    aggs = [F.count(F.lit(1)).alias("users")] + [a for spec in specs for a in _spec_sums(spec, cuped)]
    out = {}
    for row in rows.groupBy(EXPERIMENT, VARIANT, SLICE).agg(*aggs).collect():
        d = row.asDict()
        out[(d.pop(EXPERIMENT), d.pop(VARIANT), d.pop(SLICE))] = d
    return out


def explode_variants(users: DataFrame, experiment: str | None = None) -> DataFrame:
    """One row per (experiment, slice, user) of the users assigned to it (``variant`` null: several)."""
    rows = users.select("*", F.explode(VARIANTS).alias(EXPERIMENT, VARIANT)).drop(VARIANTS)
    return rows if experiment is None else rows.where(F.col(EXPERIMENT) == experiment)


def with_covariates(rows: DataFrame, previous: DataFrame | None, specs: Sequence[MetricSpec]) -> DataFrame:
    """Add ``_cov_<sum>``: the user's sums over the pre-period days on which it was not yet in the
    experiment (null when there is no such day).

    A covariate must not carry the treatment: a pre-period day on which the
    user was already assigned to the experiment (either variant) is left out,
    so a daily run of a running experiment adjusts only by days before each
    user's exposure.  ``rows`` has one row per (experiment, slice, user).  A sum the pre-period tables lack
    (:func:`read_user_tables`: written by an older release) is null for every user: no covariate, never 0
    (:func:`covariate_notes`).
    """
    names = sorted({c for s in specs for c in (s.num, s.den)})
    if previous is None:
        return rows.select("*", *[F.lit(None).cast("double").alias(f"_cov_{c}") for c in names])
    absent = F.lit(None).cast("double")
    pre = previous.select(
        SLICE,
        USER,
        F.col(VARIANTS).alias("_pre_variants"),
        *[F.col(c) if c in previous.columns else absent.alias(c) for c in names],
    )
    before = F.col("_pre_variants").isNull() | ~F.map_contains_key("_pre_variants", F.col(EXPERIMENT))
    others = [c for c in rows.columns if c not in (EXPERIMENT, SLICE, USER)]
    return (
        rows.join(
            pre.select(SLICE, USER, "_pre_variants", *[F.col(c).alias(f"_pre_{c}") for c in names]),
            on=[SLICE, USER],
            how="left",
        )
        .groupBy(EXPERIMENT, SLICE, USER)
        .agg(
            *[F.first(c).alias(c) for c in others],
            *[F.sum(F.when(before, F.col(f"_pre_{c}"))).alias(f"_cov_{c}") for c in names],
        )
    )


def covariate_notes(previous: DataFrame | None, specs: Sequence[MetricSpec]) -> list[str]:
    """A note naming the metrics whose sums the pre-period tables lack (read as no covariate, unadjusted)."""
    if previous is None:
        return []
    left = [s.name for s in specs if s.num not in previous.columns or s.den not in previous.columns]
    return (
        [f"CUPED: {left} have no covariate: the pre-period {USERS_TABLE} lack their sums (left unadjusted)"]
        if left
        else []
    )


def read_user_tables(
    spark: SparkSession,
    output_root: str,
    days: Iterable[dt.date],
    skipped: list[dt.date] | None = None,
    notes: list[str] | None = None,
) -> tuple[DataFrame | None, list]:
    """The ``experiment_users`` partitions of the complete days of ``days`` (unioned), and the days found.

    A day is read only when its ``summary/dt=D/_SUCCESS`` exists (the reading contract); a day with an
    ``experiment_users`` partition but no marker is left out and added to ``skipped``.  The union holds the
    columns every found day has: a sum that some day lacks (a partition written by an older release, before
    the value metrics; another ``metrics.k`` or ``labels.conversion_events``) is left out over all of them,
    never read as null or 0 on those days, and a note naming it and the days that lack it goes to ``notes``
    (docs/operations.md, "Output tables across upgrades").
    """
    found = []
    for d in days:
        if not fs.exists(spark, DAILY.path(output_root, USERS_TABLE, dt=d.isoformat())):
            continue
        if fs.exists(spark, DAILY.marker(output_root, dt=d.isoformat())):
            found.append(d)
        elif skipped is not None:
            skipped.append(d)
    if not found:
        return None, []
    frames = [spark.read.parquet(DAILY.path(output_root, USERS_TABLE, dt=d.isoformat())) for d in found]
    common = [c for c in frames[0].columns if all(c in f.columns for f in frames[1:])]
    lacking = {
        d: [c for f in frames for c in f.columns if c not in common and c not in day.columns]
        for d, day in zip(found, frames, strict=True)
    }
    if notes is not None:
        notes += partial_columns_notes(lacking)
    out = frames[0].select(*common)
    for f in frames[1:]:
        out = out.unionByName(f.select(*common))
    return out, found


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
    if not days:
        return ""
    return f" (left out, incomplete: no summary/dt=D/_SUCCESS: {', '.join(d.isoformat() for d in days)})"


# --- checks ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Check:
    experiment: str | None
    check: str
    statistic: float | None
    p_value: float | None
    passed: bool
    detail: str


def srm_check(experiment: str, users: Mapping[str, int], weights: Mapping[str, float], threshold: float) -> Check:
    """SRM of one experiment: counted users per variant against ``experiments.weights`` (default equal).

    With fewer than two variants or no counted user there is nothing to test: the check does not pass,
    with no statistic and no p-value (``detail`` starts with ``not tested``).
    """
    planned = {key.split("/", 1)[1]: w for key, w in weights.items() if key.split("/", 1)[0] == experiment}
    variants = sorted(set(users) | set(planned))
    w = [planned.get(v, 0.0) for v in variants] if planned else None
    r = srm_test([users.get(v, 0) for v in variants], w)
    split = ", ".join(f"{v}={users.get(v, 0)}" for v in variants)
    plan = ", ".join(f"{v}={planned.get(v, 0.0):g}" for v in variants) if planned else "equal"
    if math.isnan(r.p_value):  # one arm or no user: no split to test, and no p = 1 that reads as "ok"
        return Check(
            experiment,
            "srm",
            None,
            None,
            False,
            f"not tested: users {split or 'none'}; planned {plan}: needs counted users and two variants",
        )
    return Check(
        experiment,
        "srm",
        r.statistic,
        r.p_value,
        bool(r.p_value >= threshold),
        f"users {split}; planned {plan}; fails below p={threshold:g}",
    )


def compared_check(experiment: str, users: Mapping[str, int], control: str, reason: str | None) -> Check:
    """Whether a variant met its control: ``statistic`` = counted users; fails with ``reason``
    (:func:`~recsys_spark.kernels.experiments.why_not_compared`) when nothing was compared."""
    others = ", ".join(f"{v}={n}" for v, n in sorted(users.items()) if v != control)
    detail = reason or f"{control}={users.get(control, 0)} compared with {others}"
    return Check(experiment, "compared", float(sum(users.values())), None, reason is None, detail)


def multiple_assignment_check(experiment: str, excluded: int, counted: int) -> Check:
    share = excluded / (excluded + counted) if excluded + counted else 0.0
    return Check(
        experiment,
        "multiple_assignment",
        float(excluded),
        None,
        excluded == 0,
        f"{excluded} user(s) with several variants excluded ({share:.4%} of assigned exposed users)",
    )


def layer_checks(users: DataFrame, layers: Mapping[str, str], threshold: float) -> list[Check]:
    """Chi-square test of independence of the variants of users in both layers, per pair of layers.

    ``users``: the day's ``experiment_users`` rows (one per slice and user, with the ``variants``
    map); only the ``all`` slice is read.  A user's cell in a layer is its (experiment, variant);
    users with several cells in one layer, or excluded for several variants, are left out.
    """
    names = sorted(set(layers.values()))
    if len(names) < 2:
        return []
    layer_of = F.create_map(*[F.lit(x) for item in sorted(layers.items()) for x in item])
    # a user's (layer, cell) pairs come from its own row's map: no aggregation by user, no shuffle;
    # the layers where it has exactly one cell, and every pair of those, are computed in the row
    cells = users.where(F.col(SLICE) == ALL).select(
        F.filter(
            F.transform(
                F.filter(F.map_entries(VARIANTS), lambda e: e["value"].isNotNull()),  # not excluded
                lambda e: F.struct(
                    layer_of[e["key"]].alias(LAYER), F.concat_ws("/", e["key"], e["value"]).alias("cell")
                ),
            ),
            lambda c: c[LAYER].isNotNull(),
        ).alias("cells")
    )
    single = F.filter("cells", lambda a: F.size(F.filter("cells", lambda b: b[LAYER] == a[LAYER])) == 1)
    pair = F.flatten(
        F.transform(
            single,
            lambda a: F.transform(
                F.filter(single, lambda b: a[LAYER] < b[LAYER]),
                lambda b: F.struct(
                    a[LAYER].alias("la"), a["cell"].alias("ca"), b[LAYER].alias("lb"), b["cell"].alias("cb")
                ),
            ),
        )
    )
    pairs = cells.select(F.explode(pair).alias("p")).groupBy("p.la", "p.ca", "p.lb", "p.cb").count().collect()
    out = []
    for i, la in enumerate(names):
        for lb in names[i + 1 :]:
            counts = {(r["ca"], r["cb"]): r["count"] for r in pairs if r["la"] == la and r["lb"] == lb}
            ra, cb = sorted({k[0] for k in counts}), sorted({k[1] for k in counts})
            table = np.array([[counts.get((x, y), 0) for y in cb] for x in ra], dtype=np.float64).reshape(
                len(ra), len(cb)
            )
            r = independence_test(table)
            out.append(
                Check(
                    None,
                    "layer_independence",
                    r.statistic,
                    r.p_value,
                    bool(r.p_value >= threshold),
                    f"layers {la} x {lb}: {int(table.sum())} users in both, {len(ra)}x{len(cb)} cells, "
                    f"df={r.df}; fails below p={threshold:g}",
                )
            )
    return out


# --- analysis (daily and window) ---------------------------------------------------------------
@dataclass
class ExperimentResult:
    """What the pipeline needs back: summary section, rules, notes, log fields, and the rows written."""

    summary: dict[str, Any]
    rules: list[RuleResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    rows: list[ResultRow] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)


def metric_specs(cfg: Config, available_ks: Sequence[int]) -> tuple[list[MetricSpec], list[str]]:
    """The tested metrics (``experiments.metrics``, then the decisions' goals, guardrails and secondary metrics
    it does not list), and a note for those left out because their cut-off is not in ``metrics.k`` (a run with
    ``--set metrics.k=[5]`` should not fail over the default experiment metrics at @10)."""
    names = dict.fromkeys([*cfg.experiments.metrics, *cfg.experiments.decision_metrics()])
    specs = [parse_metric(m) for m in names]
    kept = [s for s in specs if s.k is None or s.k in available_ks]
    left = [s.name for s in specs if s not in kept]
    notes = (
        [f"experiments.metrics {left} left out: their cut-off is not in metrics.k {list(available_ks)}"] if left else []
    )
    if not kept:
        raise ConfigError(
            f"config key experiments.metrics: no metric can be tested with metrics.k "
            f"{list(available_ks)}: {list(cfg.experiments.metrics)}"
        )
    return kept, notes


def _confidence(cfg: Config) -> float:
    """``stats.confidence`` when the config has it, else 0.95."""
    return float(getattr(getattr(cfg, "stats", None), "confidence", 0.95))


@dataclass(frozen=True)
class Assigned:
    """One experiment's side of the assignments table: its distinct user ids, and one of them."""

    ids: int
    example: str | None


def analyse(
    rows: DataFrame,
    cfg: Config,
    specs: Sequence[MetricSpec],
    cuped: bool,
    assigned: Mapping[str, Assigned] | None = None,
    exposure_example: Callable[[], str | None] | None = None,
) -> tuple[list[ResultRow], list[Check], dict[str, Any]]:
    """Result rows, checks and the summary section from exploded per-user rows (one per experiment, slice, user).

    ``assigned`` (the daily run): the experiments of the assignments table; one that no user with a
    valid row belongs to is analysed too (not compared, with both sides' ids named: an id format
    mismatch loses every user).  ``exposure_example`` gives a user id of the day, called only then.
    """
    ex = cfg.experiments
    sums = arm_sums(rows, specs, cuped)
    results: list[ResultRow] = []
    checks: list[Check] = []
    section: dict[str, Any] = {}
    confidence = _confidence(cfg)
    assigned = assigned or {}
    example: list[str | None] = []  # the exposure example, fetched once
    for name in sorted({e for e, _, _ in sums} | set(assigned)):
        users = {v: int(d["users"]) for (e, v, s), d in sums.items() if e == name and s == ALL and v is not None}
        excluded = sum(int(d["users"]) for (e, v, s), d in sums.items() if e == name and s == ALL and v is None)
        side = assigned.get(name)
        if side is not None and not users and not excluded and not example:
            example.append(exposure_example() if exposure_example is not None else None)
        reason = why_not_compared(
            users,
            excluded,
            ex.control,
            side.ids if side is not None else None,
            side.example if side is not None else None,
            example[0] if example else None,
        )
        srm = srm_check(name, users, ex.weights, ex.srm_p_threshold)
        checks += [
            compared_check(name, users, ex.control, reason),
            srm,
            multiple_assignment_check(name, excluded, sum(users.values())),
        ]
        by_arm = {(v, s): d for (e, v, s), d in sums.items() if e == name and v is not None}
        rows_of = analyse_experiment(
            name,
            by_arm,
            specs,
            ex.control,
            ex.correction,
            confidence,
            ex.power,
            cuped,
            ex.inference,
            ex.sequential_tuning,
        )
        results += rows_of
        overflow = overflow_notes(name, by_arm, specs)
        alpha = 1 - confidence
        section[name] = {
            "state": "not_compared" if reason else "ok" if srm.passed else "srm_failed",
            "reason": reason,
            "users": users,
            "excluded_multiple_variants": excluded,
            "control": ex.control,
            "srm_p_value": srm.p_value,
            "srm_passed": srm.passed,
            "control_missing": ex.control not in users,
            "significant": [
                _brief(r) for r in rows_of if r.slice == ALL and r.p_adjusted is not None and r.p_adjusted < alpha
            ],
        }
        if overflow:
            section[name]["overflow"] = overflow
        if side is not None:
            section[name].update(assigned_ids=side.ids, matched_ids=sum(users.values()) + excluded)
        if cuped:
            section[name]["users_with_covariate"] = {
                r.metric + (f"@{r.k}" if r.k else "") + "_" + r.aggregation: r.covariate_n
                for r in rows_of
                if r.slice == ALL and r.covariate_n is not None
            }
    return results, checks, section


def decisions(
    results: Sequence[ResultRow], checks: Sequence[Check], section: dict[str, Any], cfg: Config
) -> list[Decision]:
    """The ship decision of every variant of every analysed experiment (:func:`kernels.decisions.decide`), from
    the ``all`` slice's rows and the checks; each experiment's summary section gets its ``decisions``
    (variant -> decision and reasons) and the ``decision_metrics`` they read (goals, guardrails, secondary).
    An experiment with no variant besides the control has one row with a null variant (invalid: not
    compared)."""
    ex = cfg.experiments
    out: list[Decision] = []
    for name, e in sorted(section.items()):
        goals, guardrails, secondary = ex.roles(name)
        roles = Roles(
            goals, tuple(Margin(g.metric, g.absolute_margin, g.relative_margin) for g in guardrails), secondary
        )
        srm = next((c for c in checks if c.experiment == name and c.check == "srm"), None)
        variants = sorted(v for v in e["users"] if v != ex.control) or [None]
        e["decision_metrics"] = {
            "goals": list(goals),
            "guardrails": [
                {"metric": g.metric, "absolute_margin": g.absolute_margin, "relative_margin": g.relative_margin}
                for g in guardrails
            ],
            "secondary": list(secondary),
        }
        e["decisions"] = {}
        for variant in variants:
            validity = Validity(
                compared=e["state"] != "not_compared",
                not_compared_reason=e["reason"],
                srm_passed=srm is None or srm.passed or srm.p_value is None,  # not tested: no mismatch
                srm_p_value=srm.p_value if srm is not None else None,
                multiple_assignment=int(e["excluded_multiple_variants"]),
                control_users=int(e["users"].get(ex.control, 0)),
                variant_users=int(e["users"].get(variant, 0)) if variant is not None else 0,
            )
            effects = effects_of(results, name, variant) if variant is not None else {}
            d = decide(name, variant, effects, roles, validity, ex.min_users_per_arm, ex.inference)
            out.append(d)
            e["decisions"][variant or ""] = {"decision": d.decision, "reasons": d.reasons}
    return out


def decision_tuples(rows: Sequence[Decision]) -> list[tuple]:
    """The ``experiment_decisions`` rows, in :data:`DECISIONS_SCHEMA`'s column order."""
    return [d.as_tuple() for d in rows]


def _brief(r: ResultRow) -> dict[str, Any]:
    name = f"{r.metric}{'@' + str(r.k) if r.k else ''}_{r.aggregation}"
    return {
        "variant": r.variant,
        "metric": name,
        "rel_delta": r.rel_delta,
        "rel_ci_low": r.rel_ci_low,
        "rel_ci_high": r.rel_ci_high,
        "p_adjusted": r.p_adjusted,
    }


def result_tuples(results: Sequence[ResultRow]) -> list[tuple]:
    """The ``experiments`` (and window) rows, in :data:`RESULTS_SCHEMA`'s column order."""
    return [r.as_tuple() for r in results]


def check_tuples(checks: Sequence[Check]) -> list[tuple]:
    """The ``experiment_checks`` rows, in :data:`CHECKS_SCHEMA`'s column order."""
    return [(c.experiment, c.check, c.statistic, c.p_value, c.passed, c.detail) for c in checks]


def srm_rules(checks: Sequence[Check], severity: str, threshold: float) -> list[RuleResult]:
    """The experiments' business rules, of severity ``experiments.srm_severity``.

    An SRM check is ``experiment_srm:<experiment>`` (its ``rate`` is the p-value: unlike other rules it
    passes at or above the threshold; an SRM not tested has none and fails); a ``compared`` check is
    ``experiment_compared:<experiment>``, which fails when nothing was compared (its example: why).
    """
    rules = []
    for c in checks:
        if c.check == "srm":
            rate, limit = c.p_value, threshold
        elif c.check == "compared":
            rate, limit = None, None
        else:
            continue
        rules.append(
            RuleResult(
                f"experiment_{c.check}:{c.experiment}",
                severity,
                0 if c.passed else 1,
                rate,
                limit,
                c.passed,
                [c.detail],
            )
        )
    return rules


def mismatched(checks: Sequence[Check]) -> list[str]:
    """The experiments whose SRM test ran and failed (an SRM not tested is no mismatch)."""
    return [str(c.experiment) for c in checks if c.check == "srm" and not c.passed and c.p_value is not None]


def status_and_notes(section: Mapping[str, Any], checks: Sequence[Check]) -> tuple[str, list[str], list[str]]:
    """(status, not compared experiments, notes) of an analysis: ``srm_failed`` when an SRM test failed,
    else ``not_compared`` when an experiment compared nothing, else ``ok``."""
    failed = mismatched(checks)
    not_compared = [name for name, e in sorted(section.items()) if e["state"] == "not_compared"]
    notes = [f"experiment {name} not compared: {section[name]['reason']}" for name in not_compared]
    notes += [note for _, e in sorted(section.items()) for note in e.get("overflow", [])]
    if failed:
        notes.append(f"sample-ratio mismatch in {', '.join(failed)}: their results are not to be trusted")
    return ("srm_failed" if failed else "not_compared" if not_compared else "ok"), not_compared, notes


def previous_days(date: dt.date, days: int) -> list[dt.date]:
    return [date - dt.timedelta(days=i) for i in range(days, 0, -1)]


def experiment_stage(
    spark: SparkSession, cfg: Config, date: dt.date, input_root: str, day_sums: DataFrame | None, out: Output
) -> ExperimentResult:
    """The day's experiments: stage ``experiment_users``, ``experiments`` and ``experiment_checks``.

    ``day_sums``: one row per (slice, user) with its day sums (the metric stage's
    :attr:`daily.day.Metrics.day_sums`).  Without an assignments table, returns a summary section that
    says so and stages nothing.
    """
    ex = cfg.experiments
    path = templates.resolve(ex.assignments, input_root, date, "assignments", templates.InputSettings.of(cfg.input))
    if not exists(spark, path):
        note = f"no assignments table at {path}: experiments skipped"
        return ExperimentResult(
            {"status": "skipped", "assignments": path, "note": note}, notes=[note], info={"skipped": True}
        )
    specs, notes = metric_specs(cfg, cfg.metrics.k)
    assignments = read_assignments(spark, path, cfg.input.columns)
    # one aggregation of the assignments: each experiment's distinct ids and one of them (named when
    # none matches an exposure), and its layer (the greatest, should an experiment name several)
    has_layer = LAYER in assignments.columns
    per_experiment = (
        assignments.groupBy(EXPERIMENT)
        .agg(
            F.count_distinct(USER).alias("ids"),
            F.min(USER).alias("example"),
            *([F.max(LAYER).alias(LAYER)] if has_layer else []),
        )
        .collect()
    )
    assigned = {r[EXPERIMENT]: Assigned(int(r["ids"]), r["example"]) for r in per_experiment}
    layers = {r[EXPERIMENT]: r[LAYER] for r in per_experiment if has_layer and r[LAYER] is not None}
    if day_sums is None:
        raise ValueError("the experiments need the metric stage's day sums")
    table = user_day_table(day_sums, assignments)
    staged = out.stage(USERS_TABLE, table)
    users = spark.read.schema(table.schema).parquet(staged)  # read back as written: no inference job
    specs, missing = specs_with_columns(specs, users.columns)
    notes += missing
    rows = explode_variants(users)
    cuped = ex.cuped_days > 0
    if cuped:
        incomplete: list[dt.date] = []
        previous, found = read_user_tables(spark, out.root, previous_days(date, ex.cuped_days), incomplete)
        notes.append(
            f"CUPED covariate from {len(found)} of the {ex.cuped_days} previous day(s)' {USERS_TABLE} "
            f"tables{': none found, no adjustment' if not found else ''}" + skipped_note(incomplete)
        )
        notes += covariate_notes(previous, specs)
        rows = with_covariates(rows, previous, specs)

    def exposure_example() -> str | None:
        first = users.where(F.col(SLICE) == ALL).agg(F.min(USER)).first()
        return None if first is None else first[0]

    results, checks, section = analyse(rows, cfg, specs, cuped, assigned, exposure_example)
    if layers:
        checks += layer_checks(users, layers, ex.srm_p_threshold)
    decided = decisions(results, checks, section, cfg)
    out.stage_rows(RESULTS_TABLE, result_tuples(results), RESULTS_SCHEMA)
    out.stage_rows(CHECKS_TABLE, check_tuples(checks), CHECKS_SCHEMA)
    out.stage_rows(DECISIONS_TABLE, decision_tuples(decided), DECISIONS_SCHEMA)
    status, not_compared, more = status_and_notes(section, checks)
    notes += more
    failed = mismatched(checks)
    summary = {
        "status": status,
        "assignments": path,
        "not_compared": not_compared,
        "experiments": section,
        "checks_failed": [f"{c.check}:{c.experiment or c.detail.split(':')[0]}" for c in checks if not c.passed],
    }
    return ExperimentResult(
        summary,
        srm_rules(checks, ex.srm_severity, ex.srm_p_threshold),
        notes,
        {
            "experiments": len(section),
            "rows": len(results),
            "srm_failed": failed,
            "not_compared": not_compared,
            "decisions": {f"{d.experiment}/{d.variant}": d.decision for d in decided},
        },
        results,
        checks,
    )


# --- window ------------------------------------------------------------------------------------
def window_users(users: DataFrame, experiment: str) -> DataFrame:
    """Each (slice, user) of ``experiment`` once over the window: sums added over days; ``variant``
    null when the user had several variants (or several on one day) within the window."""
    rows = explode_variants(users, experiment)
    sums = [c for c in rows.columns if c not in (SLICE, USER, EXPERIMENT, VARIANT)]
    return (
        rows.groupBy(EXPERIMENT, SLICE, USER)
        .agg(
            F.array_distinct(F.collect_list(VARIANT)).alias("vs"),
            F.max(F.col(VARIANT).isNull().cast("int")).alias("several"),
            *[(F.max(c) if is_indicator(c) else F.sum(c)).alias(c) for c in sums],  # a user is a user once
        )
        .select(
            EXPERIMENT,
            SLICE,
            USER,
            F.when((F.size("vs") == 1) & (F.col("several") == 0), F.col("vs")[0]).alias(VARIANT),
            *sums,
        )
    )
