"""Slices (evaluation dimensions): give every labelled exposure its slice keys, explode once.

Every metric -- ranking, AUC, health, business -- groups by the ``slice``
column.  Slicing is therefore two steps, both before any metric pass:

1. :func:`add_slice_columns` (on the deduplicated exposures, before
   labelling, so the labelled table that is persisted carries them): joins
   the items table (``_category``, ``_in_catalog``) and, when a slice needs
   it, the users table, and computes one string column ``_s_<name>`` per
   slice dimension;
2. :func:`explode_slices`: each row becomes one row with ``slice = "all"``
   plus one row ``slice = "<name>=<value>"`` per dimension whose value is not
   null.  It is a narrow transformation; a JVM-side pass that reads exploded rows
   groups by slice in the same job, so S dimensions cost (1 + S) times its rows,
   never S jobs.  The job persists the rows *before* the explode, one per
   exposure with the columns :func:`slice_input_columns` names: the cache holds
   each exposure once.  The day's Python pass and the pooled AUC do not explode
   on the JVM side: they read each row's keys as one array
   (:func:`with_slice_keys`).

Dimension names (config ``slices.names``), looked up in this order:

* derived: ``hour`` (00-23, session time zone), ``weekday`` (mon..sun),
  ``day_type`` (weekday/weekend), ``user_type`` (``new`` when the users
  table's ``first_seen`` is less than ``new_user_days`` days before the
  evaluated day, else ``returning``), ``popularity`` (``head``/``mid``/``tail``
  by the day's exposures, see :func:`recsys_spark.kernels.health.popularity_thresholds`);
  ``season``, ``day_part``, ``activity`` (new/light/medium/heavy from the earlier days' exposures),
  ``item_age`` and ``item_new`` (from the items table's ``slices.item_date_column``): their cut points are in
  :mod:`recsys_spark.steps.dimensions`;
* a column of the exposures (``platform``), of the items table (``category``),
  of the users table (``country``).

Values: a null value, an item missing from the items table or a user missing
from the users table gives ``unknown``; an empty response (no item) has no
value for an item dimension (``category``, ``popularity``, item columns), so
it appears under ``all`` and the other dimensions only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config.metrics import SlicesConfig
from recsys_spark.errors import ConfigError, SchemaError
from recsys_spark.io.read import conform, exists, read_parquet
from recsys_spark.kernels.health import popularity_thresholds
from recsys_spark.runtime.engine import physical_plan
from recsys_spark.schema import (
    ALL,
    CATEGORY,
    FIRST_SEEN,
    IN_CATALOG,
    ITEM,
    ITEM_CATEGORY,
    ITEM_COLUMNS,
    ITEM_EXPOSURES,
    ITEM_PREFIX,
    REQUEST,
    SESSION,
    SLICE,
    SLICE_KEYS,
    SLICE_PREFIX,
    TS,
    UNKNOWN,
    USER,
    USER_PREFIX,
    ColumnSpec,
)
from recsys_spark.steps import dimensions
from recsys_spark.steps.dimensions import ACTIVE_DAYS, ACTIVITY, ITEM_DIMENSIONS, TIME_DIMENSIONS, Activity

TIME_SLICES = ("hour", "weekday", "day_type", *TIME_DIMENSIONS)
DERIVED_SLICES = TIME_SLICES + ("user_type", "popularity", ACTIVITY, *ITEM_DIMENSIONS)
_ID_COLUMNS = (USER, SESSION, REQUEST, ITEM)


def slice_column(name: str) -> str:
    """Internal column holding the value of dimension ``name``."""
    return f"{SLICE_PREFIX}{name}"


@dataclass(frozen=True)
class SliceDims:
    """Where each configured dimension comes from (names in config order)."""

    names: tuple[str, ...] = ()
    exposure: tuple[str, ...] = ()
    item: tuple[str, ...] = ()
    user: tuple[str, ...] = ()

    @property
    def item_dims(self) -> tuple[str, ...]:
        """Dimensions that are attributes of the item (empty responses have none)."""
        derived = ("popularity", *ITEM_DIMENSIONS)
        return self.item + tuple(n for n in self.names if n in derived)

    @property
    def needs_users(self) -> bool:
        return bool(self.user) or "user_type" in self.names


def resolve_slices(
    names: Sequence[str],
    exposure_columns: Sequence[str],
    item_columns: Sequence[str] | None,
    user_columns: Sequence[str] | None,
    item_date_column: str = FIRST_SEEN,
) -> SliceDims:
    """Sort the configured names into derived / exposures / items / users dimensions.

    ``item_columns`` / ``user_columns`` are None when that table does not
    exist.  An unknown name raises :class:`SchemaError` naming it and what was
    looked at; an id column raises :class:`ConfigError`, and so does ``item_age`` / ``item_new`` without an
    items table holding ``item_date_column`` (``slices.item_date_column``).
    """
    found: dict[str, list[str]] = {"exposure": [], "item": [], "user": []}
    for name in names:
        if name in _ID_COLUMNS or name == SLICE:
            raise ConfigError(f"config key slices.names: {name!r} is an id column, not a dimension")
        if name == "user_type":
            if user_columns is None or FIRST_SEEN not in user_columns:
                raise SchemaError(f"slice 'user_type' needs a users table with a {FIRST_SEEN!r} column")
            continue
        if name in ITEM_DIMENSIONS and (item_columns is None or item_date_column not in item_columns):
            where = "no items table" if item_columns is None else "the items table has no such column"
            raise ConfigError(
                f"config key slices.item_date_column: slice {name!r} needs the items table's column "
                f"{item_date_column!r} ({where})"
            )
        if name in DERIVED_SLICES:
            continue
        table = _table_of(name, exposure_columns, item_columns, user_columns)
        if table is None:
            raise SchemaError(
                f"slice {name!r} is not a derived slice ({', '.join(DERIVED_SLICES)}) "
                f"nor a column of the {_looked_at(item_columns, user_columns)}"
            )
        found[table].append(name)
    return SliceDims(tuple(names), tuple(found["exposure"]), tuple(found["item"]), tuple(found["user"]))


def _table_of(
    name: str, exposure_columns: Sequence[str], item_columns: Sequence[str] | None, user_columns: Sequence[str] | None
) -> str | None:
    """The first table with a column ``name``, looked up in the exposures, then the items and users tables
    (None: a table that does not exist): ``exposure``, ``item`` or ``user``; None when none has it."""
    for table, columns in (("exposure", exposure_columns), ("item", item_columns), ("user", user_columns)):
        if columns is not None and name in columns:
            return table
    return None


def _looked_at(item_columns: Sequence[str] | None, user_columns: Sequence[str] | None) -> str:
    """The tables a column was looked up in, for the error: the exposures, and the items and users tables
    when they exist (``exposures, items table, users table``)."""
    looked = (
        ["exposures"]
        + (["items table"] if item_columns is not None else [])
        + (["users table"] if user_columns is not None else [])
    )
    return ", ".join(looked)


@dataclass(frozen=True)
class KeptColumns:
    """Input columns kept with their types for the custom rules (``rules.columns``), by the table they come
    from, and whether the items table's ``first_seen`` is kept (the rules' ``item_age_days``)."""

    exposure: tuple[str, ...] = ()
    item: tuple[str, ...] = ()
    user: tuple[str, ...] = ()
    item_first_seen: bool = False

    def internal(self) -> dict[str, str]:
        """Each kept column's name -> its column on the labelled rows (``_i_<c>``, ``_u_<c>``)."""
        out = {c: c for c in self.exposure}
        out |= {c: f"{ITEM_PREFIX}{c}" for c in self.item}
        out |= {c: f"{USER_PREFIX}{c}" for c in self.user}
        if self.item_first_seen:
            out[ITEM_FIRST_SEEN] = f"{ITEM_PREFIX}{FIRST_SEEN}"
        return out


#: the name the custom rules read the items table's first_seen by (it becomes item_age_days)
ITEM_FIRST_SEEN = "item_first_seen"


def resolve_kept(
    names: Sequence[str],
    exposure_columns: Sequence[str],
    item_columns: Sequence[str] | None,
    user_columns: Sequence[str] | None,
    item_first_seen: bool = False,
) -> KeptColumns:
    """Sort the custom rules' input columns (``rules.columns``) into exposures / items / users columns,
    looked up in that order; an unknown name raises :class:`SchemaError` naming it and what was looked at."""
    found: dict[str, list[str]] = {"exposure": [], "item": [], "user": []}
    for name in names:
        if name == CATEGORY and item_columns is not None and name not in exposure_columns:
            continue  # the catalog's category: every rule reads it
        table = _table_of(name, exposure_columns, item_columns, user_columns)
        if table is None:
            raise SchemaError(
                f"config key rules.columns: {name!r} is not a column of the {_looked_at(item_columns, user_columns)}"
            )
        found[table].append(name)
    first_seen = item_first_seen and item_columns is not None and FIRST_SEEN in item_columns
    return KeptColumns(tuple(found["exposure"]), tuple(found["item"]), tuple(found["user"]), first_seen)


@dataclass(frozen=True)
class SliceInputs:
    """The resolved dimensions and the side tables they (and the health indicators) need."""

    dims: SliceDims
    catalog: DataFrame | None  # one row per item: item_id, category, item dimension columns
    users: DataFrame | None  # one row per user: user_id, user dimension columns (first_seen)
    items_path: str
    users_path: str
    kept: KeptColumns = KeptColumns()  # the custom rules' input columns
    settings: SlicesConfig = SlicesConfig()  # the derived slices' cut points


def _optional(spark: SparkSession, path: str, what: str, columns: Mapping[str, str]) -> DataFrame | None:
    return read_parquet(spark, path, what, columns) if exists(spark, path) else None


def _one_row_per(df: DataFrame, key: str) -> DataFrame:
    """One row per key: a key listed twice keeps its smallest row (compared column by column).

    The rule (docs/metrics.md, "Slices") that keeps a duplicated item or user from
    multiplying the exposures it is joined to.
    """
    others = [c for c in df.columns if c != key]
    if not others:
        return df.select(key).distinct()
    return (
        df.groupBy(key)
        .agg(F.min(F.struct(*others)).alias("_row"))
        .select(key, *[F.col(f"_row.{c}").alias(c) for c in others])
    )


def read_slice_inputs(
    spark: SparkSession,
    names: Sequence[str],
    exposure_columns: Sequence[str],
    items_path: str,
    users_path: str,
    input_columns: Mapping[str, str],
    kept_names: Sequence[str] = (),
    item_first_seen: bool = False,
    settings: SlicesConfig | None = None,
    population_columns: Mapping[str, Sequence[str]] | None = None,
) -> SliceInputs:
    """Read the items table (always, when it exists) and the users table (when a slice or a custom rule's
    column needs it), their columns renamed by ``input_columns`` (``input.columns``).  ``kept_names``: the
    custom rules' input columns (``rules.columns``); ``item_first_seen``: keep the items table's
    ``first_seen`` when it has one (custom rules); ``settings``: ``[slices]`` (the item date column and the
    derived slices' cut points; default: ``names`` with the defaults).  ``population_columns``: {config key: the
    columns an experiment's population reads}, each an exposures' or users table's column (else a
    :class:`ConfigError` naming the key and the column, before any row is read), kept like the custom rules'
    (:func:`check_population_columns`)."""
    settings = settings or SlicesConfig(names=tuple(names))
    item_date = settings.item_date_column
    raw_items = _optional(spark, items_path, "items table", input_columns)
    population_names = [c for cols in (population_columns or {}).values() for c in cols]
    wanted = [*names, *kept_names, *population_names]
    needs_users = _may_need_users(wanted, exposure_columns)
    raw_users = _optional(spark, users_path, "users table", input_columns) if needs_users else None
    item_columns = None if raw_items is None else raw_items.columns
    user_columns = None if raw_users is None else raw_users.columns
    dims = resolve_slices(names, exposure_columns, item_columns, user_columns, item_date)
    kept = resolve_kept(kept_names, exposure_columns, item_columns, user_columns, item_first_seen)
    if population_columns:
        check_population_columns(population_columns, exposure_columns, user_columns, users_path)
        more = resolve_kept(
            [c for c in dict.fromkeys(population_names) if c not in kept_names], exposure_columns, None, user_columns
        )
        kept = KeptColumns(kept.exposure + more.exposure, kept.item, kept.user + more.user, kept.item_first_seen)
    catalog = None
    if raw_items is not None:
        keep = [c for c in dims.item if c != CATEGORY]
        typed = [c for c in kept.item if c != CATEGORY] + ([FIRST_SEEN] if kept.item_first_seen else [])
        if any(n in ITEM_DIMENSIONS for n in names) and item_date not in typed:
            typed.append(item_date)  # with its own type: a date, a timestamp or an ISO string
            keep = [c for c in keep if c != item_date]
        catalog = _one_row_per(conform(raw_items, ITEM_COLUMNS, items_path, keep=keep, typed=typed), ITEM)
    users = None
    if (dims.needs_users or kept.user) and raw_users is not None:
        keep = list(dims.user) + ([FIRST_SEEN] if "user_type" in names and FIRST_SEEN not in dims.user else [])
        typed = [c for c in kept.user if c != USER]
        users = _one_row_per(conform(raw_users, (ColumnSpec(USER, "id"),), users_path, keep=keep, typed=typed), USER)
    return SliceInputs(dims, catalog, users, items_path, users_path, kept, settings)


def check_population_columns(
    population_columns: Mapping[str, Sequence[str]],
    exposure_columns: Sequence[str],
    user_columns: Sequence[str] | None,
    users_path: str,
) -> None:
    """Each column an experiment's population reads is a column of the exposures or of the users table; else a
    :class:`ConfigError` (exit 3) naming the config key, the column and where it was looked up."""
    for where, columns in population_columns.items():
        for column in columns:
            if column in exposure_columns or (user_columns is not None and column in user_columns):
                continue
            looked = (
                "the exposures or the users table"
                if user_columns is not None
                else (f"the exposures (no users table at {users_path})")
            )
            raise ConfigError(f"config key {where}: {column!r} is not a column of {looked}")


def _may_need_users(names: Sequence[str], exposure_columns: Sequence[str]) -> bool:
    return any(n == "user_type" or (n not in DERIVED_SLICES and n not in exposure_columns) for n in names)


def _value(
    name: str, dims: SliceDims, date: dt.date, new_user_days: int, settings: SlicesConfig, history: bool = False
) -> Column:
    """The string value of dimension ``name`` on an enriched exposure row (``history``: the activity slice
    has an earlier day to read)."""
    no_item = F.col(ITEM).isNull()
    if name in (*TIME_DIMENSIONS, ACTIVITY, *ITEM_DIMENSIONS):
        return _derived(name, date, settings, history)
    if name == "hour":
        return F.date_format(TS, "HH")
    if name == "weekday":
        return F.lower(F.date_format(TS, "EEE"))
    if name == "day_type":
        return F.when(F.dayofweek(TS).isin(1, 7), F.lit("weekend")).otherwise(F.lit("weekday"))
    if name == "user_type":
        age = dimensions.days_since(date, f"{USER_PREFIX}{FIRST_SEEN}")  # a first_seen that is no date: unknown
        return (
            F.when(age.isNull(), F.lit(UNKNOWN)).when(age < new_user_days, F.lit("new")).otherwise(F.lit("returning"))
        )
    if name in dims.exposure:
        return F.coalesce(F.col(name).cast("string"), F.lit(UNKNOWN))
    if name in dims.item:  # a string, also when a custom rule keeps the column with its own type
        item_value = F.col(f"{ITEM_PREFIX}{name}").cast("string")
        value = F.col(ITEM_CATEGORY) if name == CATEGORY else F.coalesce(item_value, F.lit(UNKNOWN))
        return F.when(~no_item, value)
    if name in dims.user:
        return F.coalesce(F.col(f"{USER_PREFIX}{name}").cast("string"), F.lit(UNKNOWN))
    raise ValueError(f"no value for slice {name!r}")  # popularity is set by explode_slices


def _derived(name: str, date: dt.date, settings: SlicesConfig, history: bool) -> Column:
    """The value of a dimension of :mod:`recsys_spark.steps.dimensions` (cut points in ``settings``)."""
    if name == "season":
        return dimensions.season(settings.hemisphere)
    if name == "day_part":
        return dimensions.day_part(settings.day_part_hours)
    if name == ACTIVITY:  # "unknown" for all when the history had no day
        return dimensions.activity_bucket(F.col(ACTIVE_DAYS), settings.activity_cuts, history)
    return _item_value(name, dimensions.item_age_days(date, settings.item_date_column), settings)


def _item_value(name: str, age: Column, settings: SlicesConfig) -> Column:
    """``item_age`` or ``item_new`` of an age in days."""
    if name == "item_age":
        return dimensions.item_age(age, settings.item_age_cuts)
    return dimensions.item_new(age, settings.new_item_days)


def add_slice_columns(
    exposures: DataFrame,
    inputs: SliceInputs,
    date: dt.date,
    new_user_days: int,
    activity: Activity | None = None,
) -> DataFrame:
    """The exposures plus ``_category``, ``_in_catalog`` and one ``_s_<name>`` per dimension but popularity
    (which needs the day's count per item: :func:`item_exposure_counts`, :func:`with_item_exposures`).

    The items table is left-joined on item_id, the users table on user_id
    (each has one row per key, see :func:`read_slice_inputs`); with the ``activity`` slice, the users' exposed
    days of the history window (``activity``, read by the daily job's history: None or no day read makes
    every user ``unknown``) on user_id.
    """
    dims = inputs.dims
    df = exposures
    kept = inputs.kept.internal()
    if inputs.catalog is not None:
        item_columns = [c for c in inputs.catalog.columns if c not in (ITEM, CATEGORY)]
        catalog = inputs.catalog.select(
            ITEM,
            F.col(CATEGORY).alias(f"{ITEM_PREFIX}{CATEGORY}"),
            F.lit(True).alias(IN_CATALOG),
            *[F.col(c).alias(f"{ITEM_PREFIX}{c}") for c in item_columns],
        )
        df = df.join(catalog, on=ITEM, how="left")
        category = (
            F.when(F.col(ITEM).isNull(), F.lit(None).cast("string"))
            .when(F.col(IN_CATALOG).isNull(), F.lit(UNKNOWN))
            .otherwise(F.coalesce(F.col(f"{ITEM_PREFIX}{CATEGORY}"), F.lit(UNKNOWN)))
        )
        in_catalog = F.when(F.col(ITEM).isNotNull(), F.coalesce(F.col(IN_CATALOG), F.lit(False)))
    else:
        category = F.lit(None).cast("string")
        in_catalog = F.lit(None).cast("boolean")
    if inputs.users is not None:
        users = inputs.users.select(
            USER, *[F.col(c).alias(f"{USER_PREFIX}{c}") for c in inputs.users.columns if c != USER]
        )
        df = df.join(users, on=USER, how="left")
    df = df.withColumn(ITEM_CATEGORY, category)
    if ACTIVITY in dims.names:
        df = dimensions.with_activity(df, activity)
    settings = inputs.settings
    history = activity is not None and activity.days is not None
    values = [
        _value(name, dims, date, new_user_days, settings, history).alias(slice_column(name))
        for name in dims.names
        if name != "popularity"
    ]
    carried = [F.col(c) for c in kept.values() if c not in exposures.columns]  # the rules' input columns
    return df.select(
        *[F.col(c) for c in exposures.columns], F.col(ITEM_CATEGORY), in_catalog.alias(IN_CATALOG), *values, *carried
    )


def catalog_slice_keys(inputs: SliceInputs, date: dt.date) -> tuple[Column, ...]:
    """The ``item_age`` / ``item_new`` slice keys of a row of the items table (``catalog``), for the catalog
    items each of their slices sees (item coverage, :func:`recsys_spark.steps.health_sums.catalog_pass`)."""
    age = dimensions.item_age_days(date, inputs.settings.item_date_column, prefix="")
    return tuple(
        F.concat(F.lit(f"{name}="), _item_value(name, age, inputs.settings))
        for name in inputs.dims.names
        if name in ITEM_DIMENSIONS
    )


@dataclass(frozen=True)
class PopularityCutoffs:
    """An item is head when its exposures >= head_min, tail when <= tail_max, else mid."""

    head_min: float
    tail_max: float


def item_exposure_counts(labelled: DataFrame) -> DataFrame:
    """One row per exposed item: ``item_id``, ``_item_exposures`` = its labelled exposures of the day.

    An aggregation with a partial step: what moves is at most one row per item and partition, never the
    exposure rows.  The caller persists it; its size once materialized is what lets Spark broadcast it
    (:func:`with_item_exposures`).
    """
    return labelled.where(F.col(ITEM).isNotNull()).groupBy(ITEM).agg(F.count(F.lit(1)).alias(ITEM_EXPOSURES))


def popularity_cutoffs(counts: DataFrame, head_share: float, tail_share: float) -> PopularityCutoffs:
    """Cut-offs of the popularity buckets from the histogram of the items' exposure counts.

    ``counts``: :func:`item_exposure_counts`.  One small job: the items grouped by their count c; the
    histogram (c, items with c exposures) has at most sqrt(2 * exposures) rows.
    """
    hist = counts.groupBy(ITEM_EXPOSURES).agg(F.count(F.lit(1)).alias("items")).collect()
    values = [float(r[ITEM_EXPOSURES]) for r in hist]
    items = [float(r["items"]) for r in hist]
    head_min, tail_max = popularity_thresholds(values, items, head_share, tail_share)
    return PopularityCutoffs(head_min, tail_max)


def with_item_exposures(labelled: DataFrame, counts: DataFrame) -> DataFrame:
    """``labelled`` plus ``_item_exposures`` (null for an empty response), by a left join on item_id.

    With ``counts`` persisted and materialized, Spark plans the join with the counts' real size: under
    ``spark.sql.autoBroadcastJoinThreshold`` (10 MB by default) it broadcasts them and the labelled rows stay
    where they are, partitioned by user; above it, it shuffles the rows by item and the next
    :func:`recsys_spark.steps.label.by_user` moves them back (two more shuffles, never a wrong number): see
    :func:`moves_rows`.  Either way what reaches the driver is bounded by that setting.
    """
    return labelled.join(counts, on=ITEM, how="left")


def moves_rows(rows: DataFrame) -> bool:
    """Whether the plan of ``rows`` (:func:`with_item_exposures` then ``by_user``) shuffles them: the counts
    were not broadcast, so whatever reads the rows would move them twice (the caller persists them once).

    The plan's first join, top down, is that join (the persisted inputs' own plans, printed below it, come
    later); it moves the rows unless it is a broadcast hash join."""
    joins = [line for line in physical_plan(rows).splitlines() if "Join" in line]
    return not joins or "BroadcastHashJoin" not in joins[0]


def popularity_bucket(count: Column, cutoffs: PopularityCutoffs) -> Column:
    return (
        F.when(count >= cutoffs.head_min, F.lit("head"))
        .when(count <= cutoffs.tail_max, F.lit("tail"))
        .otherwise(F.lit("mid"))
    )


def slice_input_columns(dims: SliceDims) -> list[str]:
    """The columns :func:`explode_slices` reads besides the item: ``_s_<name>`` per dimension, and
    ``_item_exposures`` for the popularity slice."""
    return [ITEM_EXPOSURES if name == "popularity" else slice_column(name) for name in dims.names]


def slice_keys(dims: SliceDims, cutoffs: PopularityCutoffs | None = None) -> Column:
    """A row's slice keys, an array: ``all`` plus ``name=value`` for each non-null dimension value."""
    keys = [F.lit(ALL)]
    for name in dims.names:
        if name == "popularity":
            if cutoffs is None:
                raise ValueError("the popularity slice needs its cut-offs")
            value = F.when(F.col(ITEM).isNotNull(), popularity_bucket(F.col(ITEM_EXPOSURES), cutoffs))
        else:
            value = F.col(slice_column(name))
        keys.append(F.concat(F.lit(f"{name}="), value))  # null when the value is null
    return F.filter(F.array(*keys), lambda k: k.isNotNull())


def explode_slices(labelled: DataFrame, dims: SliceDims, cutoffs: PopularityCutoffs | None = None) -> DataFrame:
    """One row per (exposure, slice key): ``all`` plus ``name=value`` for each non-null dimension value."""
    if not dims.names:
        return labelled.withColumn(SLICE, F.lit(ALL))
    return labelled.withColumn(SLICE, F.explode(slice_keys(dims, cutoffs)))


def with_slice_keys(labelled: DataFrame, dims: SliceDims, cutoffs: PopularityCutoffs | None = None) -> DataFrame:
    """``labelled`` with its slice keys as one array column ``_slices`` (the keys :func:`explode_slices` gives
    each row, in the same order), for the one Python pass (:mod:`recsys_spark.per_user.user_pass`): one row per exposure
    crosses to Python instead of 1 + S."""
    return labelled.withColumn(SLICE_KEYS, slice_keys(dims, cutoffs))
