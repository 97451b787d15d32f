"""The derived slices of seed 002 §6 that :mod:`recsys_spark.steps.slices` reads from their cut points.

Each function returns the string value of one dimension on an exposure row (a Spark column), or null where the
row has no value (an empty response has no item, so no item age).  The cut points are ``[slices]`` keys
(conf/default.toml); docs/metrics.md, "Slices", has them in a table.

* ``season`` (meteorological, from the month of ``ts`` in the session's time zone, ``validation.time_zone``):
  northern hemisphere winter = Dec-Feb, spring = Mar-May, summer = Jun-Aug, autumn = Sep-Nov; the southern
  (``slices.hemisphere = "south"``) swaps winter/summer and spring/autumn;
* ``day_part`` (the hour h of ``ts``, same zone), with ``slices.day_part_hours`` = (m, a, e, n):
  ``morning`` m <= h < a, ``afternoon`` a <= h < e, ``evening`` e <= h < n, ``night`` otherwise (h >= n or h < m);
* ``activity``: the number d of the ``slices.activity_window_days`` days before the day whose exposures
  partition shows the user (:func:`active_days`), with ``slices.activity_cuts`` = (a, b): ``new`` d = 0,
  ``light`` 1 <= d <= a, ``medium`` a < d <= b, ``heavy`` d > b; ``unknown`` for every user when no partition
  of the window could be read (without history nobody can be told new);
* ``item_age``: the age A = day - the items table's ``slices.item_date_column`` (as a date) in whole days, in the
  buckets of ``slices.item_age_cuts`` (c1 < ... < cm): ``0-{c1-1}d``, ``{c1}-{c2-1}d``, ..., ``{cm}d+``;
  ``item_new``: ``new`` when A < ``slices.new_item_days``, else ``old``.  Both ``unknown`` for an item missing
  from the items table, a null or unreadable date, or a date after the day (A < 0).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.schema import ITEM, ITEM_PREFIX, TS, UNKNOWN, USER

#: the dimensions of this module (the item ones have no value on an empty response)
TIME_DIMENSIONS = ("season", "day_part")
ITEM_DIMENSIONS = ("item_age", "item_new")
ACTIVITY = "activity"
#: the user's exposed days in the history window (a column of :attr:`Activity.days`)
ACTIVE_DAYS = "_active_days"

_NORTH = {12: "winter", 1: "winter", 2: "winter", 3: "spring", 4: "spring", 5: "spring"}
_NORTH |= {6: "summer", 7: "summer", 8: "summer", 9: "autumn", 10: "autumn", 11: "autumn"}
_SWAP = {"winter": "summer", "summer": "winter", "spring": "autumn", "autumn": "spring"}


def season_of(month: int, hemisphere: str = "north") -> str:
    """The meteorological season of ``month`` (1-12).

    >>> season_of(12), season_of(3), season_of(8), season_of(11), season_of(1, "south")
    ('winter', 'spring', 'summer', 'autumn', 'summer')
    """
    season = _NORTH[month]
    return _SWAP[season] if hemisphere == "south" else season


def season(hemisphere: str) -> Column:
    """``season`` of the row's ``ts`` (:func:`season_of` as a Spark column)."""
    month = F.month(TS)
    value = F.lit(None).cast("string")
    for m in range(12, 0, -1):
        value = F.when(month == m, F.lit(season_of(m, hemisphere))).otherwise(value)
    return value


def day_part_of(hour: int, hours: Sequence[int]) -> str:
    """The part of the day of ``hour`` (0-23) with ``hours`` = (morning, afternoon, evening, night) starts.

    >>> [day_part_of(h, (6, 12, 18, 22)) for h in (0, 5, 6, 11, 12, 17, 18, 21, 22, 23)]
    ['night', 'night', 'morning', 'morning', 'afternoon', 'afternoon', 'evening', 'evening', 'night', 'night']
    """
    morning, afternoon, evening, night = hours
    if morning <= hour < afternoon:
        return "morning"
    if afternoon <= hour < evening:
        return "afternoon"
    if evening <= hour < night:
        return "evening"
    return "night"


def day_part(hours: Sequence[int]) -> Column:
    """``day_part`` of the row's ``ts`` (:func:`day_part_of` as a Spark column)."""
    morning, afternoon, evening, night = hours
    h = F.hour(TS)
    return (
        F.when(h.isNull(), F.lit(None).cast("string"))
        .when((h >= morning) & (h < afternoon), F.lit("morning"))
        .when((h >= afternoon) & (h < evening), F.lit("afternoon"))
        .when((h >= evening) & (h < night), F.lit("evening"))
        .otherwise(F.lit("night"))
    )


@dataclass(frozen=True)
class Activity:
    """The activity slice's history: ``days`` one row per user seen in the window (``user_id``,
    :data:`ACTIVE_DAYS`), None when ``found`` = 0 of the ``window`` partitions could be read."""

    days: DataFrame | None
    found: int
    window: int


def active_days(frames: Sequence[DataFrame]) -> DataFrame:
    """One row per user of ``frames`` (one frame per earlier day, its ``user_id`` column): ``user_id`` and
    :data:`ACTIVE_DAYS` = the number of frames the user appears in (an aggregation: one row per user moves)."""
    per_day = [f.where(F.col(USER).isNotNull()).select(USER).distinct() for f in frames]
    union = per_day[0]
    for frame in per_day[1:]:
        union = union.unionAll(frame)
    return union.groupBy(USER).agg(F.count(F.lit(1)).cast("int").alias(ACTIVE_DAYS))


def activity_bucket(days: Column, cuts: Sequence[int], history: bool) -> Column:
    """``activity`` from a user's exposed days (null: not seen in the window), see the module docstring."""
    if not history:
        return F.lit(UNKNOWN)
    light, medium = cuts
    return (
        F.when(days.isNull() | (days == 0), F.lit("new"))
        .when(days <= light, F.lit("light"))
        .when(days <= medium, F.lit("medium"))
        .otherwise(F.lit("heavy"))
    )


def with_activity(df: DataFrame, activity: Activity | None) -> DataFrame:
    """``df`` plus :data:`ACTIVE_DAYS` (null: the user was not seen), by a left join on user_id."""
    if activity is None or activity.days is None:
        return df.withColumn(ACTIVE_DAYS, F.lit(None).cast("int"))
    return df.join(activity.days, on=USER, how="left")


def age_labels(cuts: Sequence[int]) -> list[str]:
    """The ``item_age`` values of ``cuts``, youngest first.

    >>> age_labels((7, 30, 365))
    ['0-6d', '7-29d', '30-364d', '365d+']
    >>> age_labels((1,))
    ['0-0d', '1d+']
    """
    bounds = [0, *cuts]
    return [f"{lo}-{hi - 1}d" for lo, hi in zip(bounds, bounds[1:], strict=False)] + [f"{cuts[-1]}d+"]


def days_since(date: dt.date, column: str) -> Column:
    """Whole days from the column ``column`` (a date, a timestamp or a date string) to ``date``, negative when
    it is later; null when it is null or not a date.  Read as text then parsed (``try_to_timestamp``): a string
    that is not a date is null, never a failure of the day (``to_date`` raises on it under ANSI mode, Spark 4's
    default)."""
    parsed = F.try_to_timestamp(F.col(column).cast("string")).cast("date")
    return F.datediff(F.lit(date.isoformat()).cast("date"), parsed)


def item_age_days(date: dt.date, column: str, prefix: str = ITEM_PREFIX) -> Column:
    """Whole days from the items table's ``column`` (``_i_<column>`` on an exposure row, ``prefix`` "" on a
    catalog row; as a date) to ``date``; null when the item is missing, its date null or unreadable, or after
    ``date`` (:func:`days_since`)."""
    age = days_since(date, f"{prefix}{column}")
    return F.when(age >= 0, age)


def item_age(age: Column, cuts: Sequence[int]) -> Column:
    """``item_age`` of an age in days (null: ``unknown``), null for an empty response."""
    labels = age_labels(cuts)
    value = F.when(age.isNull(), F.lit(UNKNOWN))
    for cut, label in zip(cuts, labels, strict=False):
        value = value.when(age < cut, F.lit(label))
    return F.when(F.col(ITEM).isNotNull(), value.otherwise(F.lit(labels[-1])))


def item_new(age: Column, new_item_days: int) -> Column:
    """``item_new``: ``new`` below ``new_item_days`` days, else ``old`` (null age: ``unknown``)."""
    value = F.when(age.isNull(), F.lit(UNKNOWN)).when(age < new_item_days, F.lit("new")).otherwise(F.lit("old"))
    return F.when(F.col(ITEM).isNotNull(), value)
