"""Business rules you write (``[[rules.custom]]``): Spark SQL over the day's labelled exposures.

A rule's ``when`` is a Spark SQL expression (never Python) that is true for a violation, at one of four
levels (docs/operations.md, "Rules you write"):

* ``exposure``: a boolean over one exposure's columns; the rate is violating exposures / exposures;
* ``list`` (a request), ``user`` and ``day``: an aggregate over the level's exposures (``max(category_run)
  > 2``); the rate is violating lists / lists (requests with an exposure), violating users / users with an
  exposure, and the day's 0 or 1.

The rows a rule sees (:func:`rule_rows`, the columns of :data:`COLUMNS` and the kept input columns) are the
labelled exposures the other stages read, one row per exposure (an empty response has no exposure, so it is
in no rule's group; ``empty_response_rate`` counts those), plus a few per-list helpers.  A null result is not
a violation.

A rule's expression is checked twice before it reaches a row.  At config load, without Spark, against the
grammar of :mod:`recsys_spark.config.sql_guard` (an allow-list: no query, no table or file, no Java call, only listed
deterministic functions).  Then, before anything is computed, :func:`check_rules` analyses it against those
columns (an empty frame of the day's schema: Spark parses and resolves, no row is read), alone and inside the
aggregate its level runs, and on a classic session walks the analysed plan (:mod:`recsys_spark.runtime.plan_guard`), so
that a bad expression, an unknown column, an aggregate at the exposure level, a non-boolean result or anything
the allow-lists refuse fails the run with one line naming the rule and the reason
(:class:`~recsys_spark.errors.ConfigError`, exit 3).

Evaluation (:func:`evaluate_rules`): one query per level over the persisted user partitions -- the exposure
and user levels share one (summed per user where the partitions hold the rows, then over users), the list
level one (per request, then over requests), the day level one -- plus a small query for the examples of a
rule that has violations.  A soft rule with ``threshold = "baseline"`` is compared with the mean and standard
deviation of its own rates on the earlier days' ``rule_checks`` (:func:`earlier_rates`, :func:`baseline_limit`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow.parquet as pq
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, GroupedData, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark.config import CustomRule
from recsys_spark.config.sql_guard import UnsafeSql, check_expression
from recsys_spark.errors import ConfigError
from recsys_spark.kernels.rules import BUILT_IN_RULES, N_EXAMPLES, RuleResult, hard, soft
from recsys_spark.runtime import engine, fs, plan_guard
from recsys_spark.schema import (
    CLICKED,
    COPIES,
    DWELL,
    EVENT_FLAG_PREFIX,
    IN_CATALOG,
    ITEM,
    ITEM_CATEGORY,
    N_CLICKS,
    N_EVENTS,
    POSITION,
    RELEVANCE,
    REQUEST,
    SCORE,
    SESSION,
    TS,
    USER,
    VALUE,
)
from recsys_spark.steps.dimensions import days_since
from recsys_spark.steps.rules import smallest_keys
from recsys_spark.steps.slices import ITEM_FIRST_SEEN
from recsys_spark.tables import DAILY

#: the columns of a rule's rows: the labelled exposure's, then the helpers (docs/operations.md has the table)
COLUMNS = (USER, SESSION, REQUEST, ITEM, POSITION, SCORE, TS, RELEVANCE, CLICKED, N_EVENTS, N_CLICKS, COPIES)
#: the per-exposure helpers: the list's exposures, the run of same-category items ending at this one (in the
#: list's position order), the item's age in days on the evaluated day (items table with first_seen)
HELPERS = ("list_length", "category_run", "item_age_days")
#: what a rule's rate counts at each level, and the columns its groups are keyed by
LEVEL_KEYS: dict[str, tuple[str, ...]] = {"exposure": (USER,), "list": (USER, REQUEST), "user": (USER,), "day": ()}
LEVEL_WORDS = {
    "exposure": "a boolean over one exposure's columns",
    "list": "an aggregate over a list's (request's) exposures",
    "user": "an aggregate over a user's exposures",
    "day": "an aggregate over the day's exposures",
}


def event_column(name: str) -> str:
    """How a rule reads a conversion event flag: ``has_purchase``."""
    return f"has_{name}"


def rule_rows(rows: DataFrame, date: dt.date, kept: Mapping[str, str], has_catalog: bool) -> DataFrame:
    """The rows the custom rules read: one per labelled exposure (``rows``: the persisted user partitions,
    empty responses included; they are left out here), with the public column names.

    ``kept``: each kept input column's name -> its column on ``rows`` (:meth:`slices.KeptColumns.internal`).
    The helpers are window functions over the list (user, request), which the user partitions hold whole: a
    sort within the partitions, no shuffle; a helper no rule reads is pruned by Spark.
    """
    present = set(rows.columns)
    exposed = rows.where(F.col(ITEM).isNotNull())
    columns: list[Column] = [F.col(c) for c in COLUMNS if c in present]
    columns += [F.col(c) for c in (VALUE, DWELL) if c in present]
    columns += [
        F.col(c).alias(event_column(c[len(EVENT_FLAG_PREFIX) :]))
        for c in rows.columns
        if c.startswith(EVENT_FLAG_PREFIX)
    ]
    if has_catalog:
        columns += [F.col(ITEM_CATEGORY).alias("category"), F.col(IN_CATALOG).alias("in_catalog")]
    first_seen = kept.get(ITEM_FIRST_SEEN)
    if first_seen is not None and first_seen in present:
        # parsed as the item_age slice parses it: a first_seen that is not a date is null, not a failed day
        columns.append(days_since(date, first_seen).alias("item_age_days"))
    own = {*COLUMNS, VALUE, DWELL, "category", "in_catalog", *HELPERS}  # a kept column named so is the rules' own
    columns += [
        F.col(internal).alias(name) for name, internal in kept.items() if name != ITEM_FIRST_SEEN and name not in own
    ]
    listed = Window.partitionBy(USER, REQUEST)
    columns.append(F.count(F.lit(1)).over(listed).alias("list_length"))
    out = exposed.select(*columns)
    if has_catalog:
        ordered = listed.orderBy(POSITION, ITEM)
        started = ~F.lag("category").over(ordered).eqNullSafe(F.col("category"))  # a run starts here
        index = F.row_number().over(ordered)
        out = out.withColumn("_index", index).withColumn("_start", F.when(started | (index == 1), index))
        run_start = F.max("_start").over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        out = out.withColumn("category_run", (F.col("_index") - run_start + 1).cast("int")).drop("_index", "_start")
    return out


# --- checking the expressions before the day -------------------------------------------------------
def _reason(exc: Exception) -> str:
    """Spark's reason in one line: the message's first line without its SQLSTATE and query context."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.startswith("==")]
    first = lines[0] if lines else type(exc).__name__
    return re.sub(r"\s*SQLSTATE: \w+\.?;?", "", first).strip()


@contextlib.contextmanager
def _unlogged_analysis_errors() -> Iterator[None]:
    """PySpark 4 logs an analysis error with its query context as an ERROR line (a JVM stack) before it
    raises it; the check makes one line of its own of the error, so that logger is silent meanwhile."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # pragma: no cover - PySpark 3.5 logs nothing of the kind
        yield
        return
    logger = PySparkLogger.getLogger("SQLQueryContextLogger")
    disabled, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = disabled


def check_rules(spark: SparkSession, rules: Sequence[CustomRule], schema: T.StructType) -> None:
    """Check every rule against the rule rows' ``schema`` (no row is read); a rule that cannot or may not be
    evaluated raises :class:`ConfigError` naming it and why.

    In order: the grammar (:func:`sql_guard.check_expression`, as at config load: a rule made in code passes it
    too); a built-in rule's name; Spark's analysis of the expression (its reason: a syntax error, an unknown
    column with Spark's suggestions, an aggregate at the exposure level, a plain column at another level) and of
    the aggregate the rule's level runs in :func:`count_rules` (so an expression Spark refuses there, such as a
    non-deterministic one inside ``sum``, fails here and not after the day is computed); a result that is not a
    boolean; and on a classic session the analysed plan of that aggregate (:func:`plan_guard.check_analysed`:
    no relation but the rows, no subquery, only allowed, deterministic expression classes).  On Spark Connect
    the server analyses the same queries and the grammar is the guard (docs/operations.md, "Rules you write").

    The rules of a level are analysed together (a few queries per level, not per rule); only when that fails is
    each analysed alone, to name the rule.
    """
    for rule in rules:
        try:
            check_expression(rule.when)
        except UnsafeSql as exc:
            raise ConfigError(
                f"{_key(rule)}.when: {exc} (a rule is an expression over its level's columns): {rule.when!r}"
            ) from None
        if rule.name in BUILT_IN_RULES:
            raise ConfigError(f"{_key(rule)}.name: {rule.name!r} is the name of a built-in rule")
    empty = spark.createDataFrame([], schema)
    for level in LEVEL_KEYS:
        group = [r for r in rules if r.level == level]
        if not group:
            continue
        try:
            _check_together(empty, group)
        except (AnalysisException, _NotBoolean, plan_guard.UnsafePlan):
            for rule in group:
                _check_alone(empty, rule)
            raise ConfigError(
                f"config key rules.custom: the {level} rules {', '.join(r.name for r in group)} pass one by one "
                "but not together"
            ) from None


def _key(rule: CustomRule) -> str:
    return f"config key rules.custom[{rule.name}]"


class _NotBoolean(Exception):
    """A rule's result is not a boolean: its type."""


def _analysed(empty: DataFrame, rules: Sequence[CustomRule]) -> DataFrame:
    """Spark's analysis of ``rules`` (one level's) on the empty frame: their results (booleans, else
    :class:`_NotBoolean`), an exposure rule also as the filter of its examples (no aggregate), then the level's
    aggregate as :func:`count_rules` runs them, which is returned.  An analysis error is Spark's exception."""
    level = rules[0].level
    conditions = [F.expr(r.when).alias(f"v{i}") for i, r in enumerate(rules)]
    grouped = _grouped(empty, level)
    results = empty.select(*conditions) if level == "exposure" else grouped.agg(*conditions)
    schema = results.schema
    for i in range(len(rules)):
        kind = schema[f"v{i}"].dataType
        if not isinstance(kind, (T.BooleanType, T.NullType)):
            raise _NotBoolean(kind.simpleString())
    if level == "exposure":
        empty.where(functools.reduce(lambda a, b: a & b, [_flag(r) for r in rules])).schema  # noqa: B018
    counted = grouped.agg(*[_counted(r, f"c{i}") for i, r in enumerate(rules)])
    counted.schema  # noqa: B018 - analysis only
    return counted


def _check_together(empty: DataFrame, rules: Sequence[CustomRule]) -> None:
    """Raise (Spark's AnalysisException, :class:`_NotBoolean`, :class:`plan_guard.UnsafePlan`) when any of
    ``rules`` fails a check; :func:`_check_alone` then says which and why."""
    with _unlogged_analysis_errors():
        counted = _analysed(empty, rules)
    if plan_guard.is_available(counted):
        plan_guard.check_analysed(counted, empty)


def _check_alone(empty: DataFrame, rule: CustomRule) -> None:
    """:func:`_check_together` for one rule, raising :class:`ConfigError` that names it and why."""
    where = _key(rule)
    with _unlogged_analysis_errors():
        try:
            counted = _analysed(empty, [rule])
        except _NotBoolean as exc:
            raise ConfigError(
                f"{where}.when: must be true or false (true is a violation), got a {exc}: {rule.when!r}"
            ) from None
        except AnalysisException as exc:  # a ParseException is one
            level = f"level {rule.level}: {LEVEL_WORDS[rule.level]}"
            raise ConfigError(f"{where}.when: {_reason(exc)} ({level})") from None
    if plan_guard.is_available(counted):
        try:
            plan_guard.check_analysed(counted, empty)
        except plan_guard.UnsafePlan as exc:
            raise ConfigError(f"{where}.when: {exc} (Spark's analysed plan): {rule.when!r}") from None


# --- evaluation -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Count:
    """A rule's violations, its denominator, and a few examples (keys of violating units)."""

    violations: int
    total: int
    examples: list[str]


def _flag(rule: CustomRule) -> Column:
    """true for a violation, false otherwise (a null result is no violation)."""
    return F.coalesce(F.expr(rule.when), F.lit(False))


def _examples(df: DataFrame, condition: Column, key: Column) -> list[str]:
    """The ``N_EXAMPLES`` smallest distinct keys of the violating rows (:func:`rules.smallest_keys`): the same on
    every run."""
    keys = {r[0] for r in smallest_keys(df.where(condition), key).collect()}
    return sorted(keys)[:N_EXAMPLES]


def _grouped(rows: DataFrame, level: str) -> GroupedData:
    """The groups of a level's first aggregate in :func:`count_rules`: exposure and user rules per user, list
    rules per request, day rules over the day."""
    return rows.groupBy(*LEVEL_KEYS[level])


def _counted(rule: CustomRule, name: str) -> Column:
    """The rule's column in its level's first aggregate: an exposure rule's violations summed per user, another
    level's flag per group."""
    if rule.level == "exposure":
        return F.sum(_flag(rule).cast("long")).alias(name)
    return _flag(rule).alias(name)


def count_rules(rows: DataFrame, rules: Sequence[CustomRule]) -> dict[str, Count]:
    """Every rule's :class:`Count`, one query per level (see the module docstring).  ``rows``: :func:`rule_rows`."""
    out: dict[str, Count] = {}
    exposure = [r for r in rules if r.level == "exposure"]
    users = [r for r in rules if r.level == "user"]
    lists = [r for r in rules if r.level == "list"]
    days = [r for r in rules if r.level == "day"]
    names = {r.name: f"_r{i}" for i, r in enumerate(rules)}
    if exposure or users:
        per_user = _grouped(rows, "user").agg(
            F.count(F.lit(1)).alias("_exposures"), *[_counted(r, names[r.name]) for r in exposure + users]
        )
        total = per_user.agg(
            F.sum("_exposures").alias("_exposures"),
            F.count(F.lit(1)).alias("_users"),
            *[F.sum(names[r.name]).alias(names[r.name]) for r in exposure],
            *[F.sum(F.col(names[r.name]).cast("long")).alias(names[r.name]) for r in users],
        ).collect()[0]
        for r in exposure:
            n = int(total[names[r.name]] or 0)
            ex = _examples(rows, _flag(r), F.concat_ws(":", REQUEST, ITEM)) if n else []
            out[r.name] = Count(n, int(total["_exposures"] or 0), ex)
        for r in users:
            n = int(total[names[r.name]] or 0)
            ex = _examples(per_user, F.col(names[r.name]), F.col(USER)) if n else []
            out[r.name] = Count(n, int(total["_users"] or 0), ex)
    if lists:
        per_list = _grouped(rows, "list").agg(*[_counted(r, names[r.name]) for r in lists])
        total = per_list.agg(
            F.count(F.lit(1)).alias("_lists"),
            *[F.sum(F.col(names[r.name]).cast("long")).alias(names[r.name]) for r in lists],
        ).collect()[0]
        for r in lists:
            n = int(total[names[r.name]] or 0)
            ex = _examples(per_list, F.col(names[r.name]), F.col(REQUEST)) if n else []
            out[r.name] = Count(n, int(total["_lists"] or 0), ex)
    if days:
        day = _grouped(rows, "day").agg(F.count(F.lit(1)).alias("_n"), *[_counted(r, names[r.name]) for r in days])
        total = day.collect()[0]
        for r in days:
            out[r.name] = Count(int(bool(total[names[r.name]])), 1 if total["_n"] else 0, [])
    return out


def baseline_limit(rates: Sequence[float | None], sigmas: float, min_days: int) -> tuple[float | None, str]:
    """The highest rate a baseline rule accepts today: mean + ``sigmas`` standard deviations (n - 1) of its
    earlier days' rates, or None with fewer than ``min_days`` of them; and a line that says which.

    >>> baseline_limit([0.01, 0.02, 0.03], 2.0, 3)[0]      # mean 0.02, sd 0.01
    0.04
    >>> baseline_limit([0.01], 2.0, 3)
    (None, 'baseline: 1 earlier day with a rate, 3 needed; passes until then')
    """
    kept = [float(r) for r in rates if r is not None and math.isfinite(r)]
    if len(kept) < min_days:
        days = f"{len(kept)} earlier day{'s' if len(kept) != 1 else ''}"
        return None, f"baseline: {days} with a rate, {min_days} needed; passes until then"
    mean = sum(kept) / len(kept)
    sd = math.sqrt(sum((r - mean) ** 2 for r in kept) / (len(kept) - 1))
    limit = round(mean + sigmas * sd, 15)
    return limit, f"baseline: mean {mean:.6g} + {sigmas:g} sd {sd:.6g} over {len(kept)} earlier days"


def results(
    rules: Sequence[CustomRule],
    counts: Mapping[str, Count],
    history: Mapping[str, Sequence[float | None]],
    sigmas: float,
    min_days: int,
) -> list[RuleResult]:
    """The ``rule_checks`` rows of the custom rules, in config order."""
    out = []
    for rule in rules:
        c = counts[rule.name]
        if rule.severity == "hard":
            out.append(hard(rule.name, c.violations, c.total, c.examples))
        elif not rule.baseline:
            out.append(soft(rule.name, c.violations, c.total, float(rule.threshold or 0.0), c.examples))
        else:
            limit, line = baseline_limit(history.get(rule.name, ()), sigmas, min_days)
            rate = c.violations / c.total if c.total else None
            passed = rate is None or limit is None or rate <= limit
            out.append(RuleResult(rule.name, "soft", c.violations, rate, limit, passed, [*c.examples, line]))
    return out


def earlier_rates(
    spark: SparkSession, output_root: str, date: dt.date, days: int, names: Sequence[str]
) -> dict[str, list[float | None]]:
    """The rates of the rules ``names`` in the ``rule_checks`` of the ``days`` days before ``date`` that are
    complete (``summary/dt=D/_SUCCESS``, the reading contract), oldest first; small files read by pyarrow
    (no Spark job).  On Spark Connect (no file-system API, no ``_SUCCESS``) they are read by Spark."""
    root = output_root.rstrip("/")
    out: dict[str, list[float | None]] = {name: [] for name in names}
    wanted = set(names)
    for back in range(days, 0, -1):
        day = (date - dt.timedelta(days=back)).isoformat()
        path = DAILY.path(root, "rule_checks", dt=day)
        rows: list[tuple[str, float | None]] = []
        if engine.is_connect(spark):
            try:
                rows = [(r["rule"], r["rate"]) for r in spark.read.parquet(path).select("rule", "rate").collect()]
            except AnalysisException:  # no such day
                continue
        else:
            if not fs.exists(spark, DAILY.marker(root, dt=day)) or not fs.exists(spark, path):
                continue
            for name, is_dir in fs.entries(spark, path):
                if is_dir or not name.endswith(".parquet"):
                    continue
                with fs.open_input(spark, f"{path}/{name}") as handle:
                    table = pq.read_table(handle, columns=["rule", "rate"])
                rows += list(zip(table.column("rule").to_pylist(), table.column("rate").to_pylist(), strict=True))
        for rule, rate in rows:
            if rule in wanted:
                out[rule].append(rate)
    return out


def evaluate_rules(
    spark: SparkSession,
    rows: DataFrame,
    rules: Sequence[CustomRule],
    *,
    date: dt.date,
    kept: Mapping[str, str],
    has_catalog: bool,
    output_root: str,
    baseline_days: int,
    baseline_sigmas: float,
    baseline_min_days: int,
) -> list[RuleResult]:
    """The custom rules' results on the day's labelled rows (the persisted user partitions)."""
    if not rules:
        return []
    counts = count_rules(rule_rows(rows, date, kept, has_catalog), rules)
    baseline = [r.name for r in rules if r.baseline]
    history = earlier_rates(spark, output_root, date, baseline_days, baseline) if baseline else {}
    return results(rules, counts, history, baseline_sigmas, baseline_min_days)
