"""Row-level checks: bad rows are set aside with a reason and counted, never dropped silently.

Each check is a (reason, condition) pair; a row gets the first reason whose
condition holds.  :func:`split_rows` returns the good rows and the rejected
ones (with a ``reject_reason`` column), both lazily from the same input.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping, Sequence
from zoneinfo import ZoneInfo

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.errors import SchemaError, UnreadableInputError, is_unreadable_input, root_cause
from recsys_spark.schema import DWELL, ITEM, POSITION, REASON, REQUEST, SCORE, TS, USER, VALUE

Check = tuple[str, Column]


TsBounds = tuple[dt.datetime, dt.datetime]


def day_start(day: dt.date, time_zone: str) -> dt.datetime:
    """Midnight starting ``day`` in ``time_zone``, as a zone-aware instant (in UTC).

    Zone-aware on purpose: PySpark turns a naive datetime into a timestamp in the *driver's*
    local zone (the process's ``TZ``), so a naive bound moves with the machine.  An aware one
    is an instant.  A day across a DST change lasts 23 or 25 hours.

    ``time_zone`` is the run's ``validation.time_zone``, handed down by its orchestrator, which also sets
    it on the session (:func:`recsys_spark.runtime.session.apply_time_zone`); it has no default, so that
    a caller that forgets it fails rather than reading the day in UTC.

    >>> day_start(dt.date(2026, 11, 20), "Asia/Shanghai").isoformat()
    '2026-11-19T16:00:00+00:00'
    """
    local = dt.datetime.combine(day, dt.time(), tzinfo=ZoneInfo(time_zone))
    return local.astimezone(dt.timezone.utc)


def day_bounds(day: dt.date, tolerance_minutes: float, time_zone: str) -> TsBounds:
    """[start, end) of the partition's day in ``time_zone`` (:func:`day_start`), widened by the tolerance on
    both sides, as zone-aware instants."""
    widen = dt.timedelta(minutes=tolerance_minutes)
    return day_start(day, time_zone) - widen, day_start(day + dt.timedelta(days=1), time_zone) + widen


def instant(value: dt.datetime) -> Column:
    """A timestamp literal for a zone-aware ``value``, the same whatever the driver's or session's zone."""
    if value.tzinfo is None:
        raise ValueError("naive datetime: its instant would depend on the driver's time zone")
    micros = round((value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) / dt.timedelta(microseconds=1))
    return F.timestamp_micros(F.lit(micros))


def _outside(bounds: TsBounds) -> Column:
    start, end = (instant(b) for b in bounds)
    return (F.col(TS) < start) | (F.col(TS) >= end)


def _blank(column: str) -> Column:
    """An id that is empty or only white space (a common "logged out" or "unknown" value): not an id."""
    return F.col(column).isNotNull() & (F.trim(F.col(column)) == "")


#: the reason of an item row at position 0 when positions start at 1: the day is refused, not set aside
ZERO_POSITION = "zero_position"


def exposure_checks(has_score: bool, bounds: TsBounds, zero_position: bool = False) -> list[Check]:
    """Why an exposure row cannot be used (an empty response has null item and position).

    ``zero_position``: an item row at position 0 gets its own reason, :data:`ZERO_POSITION` (rather than
    ``bad_position``), so that the day's count of such rows can refuse the day (:func:`refuse_zero_positions`).
    """
    item_row = F.col(ITEM).isNotNull()
    checks: list[Check] = [
        ("null_user_id", F.col(USER).isNull()),
        ("blank_user_id", _blank(USER)),
        ("null_request_id", F.col(REQUEST).isNull()),
        ("blank_request_id", _blank(REQUEST)),
        ("blank_item_id", _blank(ITEM)),
        ("null_ts", F.col(TS).isNull()),
        ("ts_outside_day", _outside(bounds)),
        ("bad_position", item_row & (F.col(POSITION).isNull() | (F.col(POSITION) <= 0))),
    ]
    if zero_position:
        checks.insert(-1, (ZERO_POSITION, item_row & (F.col(POSITION) == 0)))
    if has_score:
        score = F.col(SCORE)
        checks.append(("bad_score", item_row & (score.isNull() | F.isnan(score) | (F.abs(score) == float("inf")))))
    return checks


def refuse_zero_positions(counts: Mapping[str, int], what: str, path: str, source: str = POSITION) -> None:
    """A :class:`SchemaError` (exit 5) when ``counts`` (:func:`count_rows` of rows tagged with
    ``exposure_checks(..., zero_position=True)``) holds item rows at position 0: positions start at 1
    (``input.position_base = 1``), and a list that counts from 0 would lose its first item to the set-aside
    rows (a tenth of a day of ten-item lists) and lower every ranking metric.  ``source``: the input's own
    name of the column (``input.columns``)."""
    zero = counts.get(ZERO_POSITION, 0)
    if not zero:
        return
    named = repr(POSITION) if source == POSITION else f"{POSITION!r} (the input's {source!r})"
    raise SchemaError(
        f"column {named} of {what} {path}: {zero} of {counts.get('rows', 0)} rows are at position 0, but "
        "positions start at 1 (input.position_base = 1): if the input counts positions from 0, set "
        "input.position_base = 0"
    )


def click_checks(bounds: TsBounds, columns: Sequence[str] = ()) -> list[Check]:
    """Why a feedback event cannot be attributed at all, or would bring a wrong number with it.

    ``columns``: the clicks' columns; with ``value`` or ``dwell_seconds`` among them, an event whose value
    (dwell) is NaN, infinite or negative is set aside (``bad_value``, ``bad_dwell``): a refund is not a
    purchase, and one such value would make every sum it enters wrong.  Null is fine: the event has none.
    """
    checks: list[Check] = [
        ("null_user_id", F.col(USER).isNull()),
        ("blank_user_id", _blank(USER)),
        ("null_item_id", F.col(ITEM).isNull()),
        ("blank_item_id", _blank(ITEM)),
        ("null_ts", F.col(TS).isNull()),
        ("ts_outside_day", _outside(bounds)),
    ]
    for name, reason in ((VALUE, "bad_value"), (DWELL, "bad_dwell")):
        if name in columns:
            amount = F.col(name)
            checks.append(
                (reason, amount.isNotNull() & (F.isnan(amount) | (F.abs(amount) == float("inf")) | (amount < 0)))
            )
    return checks


def tag_rows(df: DataFrame, checks: Sequence[Check]) -> DataFrame:
    """Add ``reject_reason``: the first failed check's name, or null for a good row."""
    reason = F.coalesce(*[F.when(cond, F.lit(name)) for name, cond in checks], F.lit(None).cast("string"))
    return df.withColumn(REASON, reason)


def split_rows(tagged: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(good rows without the reason column, rejected rows with it)."""
    good = tagged.where(F.col(REASON).isNull()).drop(REASON)
    return good, tagged.where(F.col(REASON).isNotNull())


def count_rows(
    tagged: DataFrame, what: str, path: str, by: Column | None = None
) -> tuple[dict[str, int], dict[str, int]]:
    """Rows read and rejected per reason, in one pass: ({"rows": n, "<reason>": n, ...}, by_counts).

    ``by`` (optional): a string column; ``by_counts`` counts the *kept* rows per non-null value of it
    (e.g. the event names that have no weight), in the same pass.

    This is the first action on the input, so a corrupt or truncated file
    surfaces here: it is reported as unreadable input naming ``path`` and the
    root cause.  Any other failure (a bug, a lost executor) is raised as it is.
    """
    ((counts, by_counts),) = count_inputs([(tagged, what, path, by)])
    return counts, by_counts


Counted = tuple[DataFrame, str, str, "Column | None"]  # tagged rows, what they are, their path, the by column


def count_inputs(inputs: Sequence[Counted]) -> list[tuple[dict[str, int], dict[str, int]]]:
    """:func:`count_rows` of several tagged inputs, in one Spark job (the union of their counts per reason):
    a day pays one job for counting its inputs, not one per input.  When that job finds an unreadable
    file, each input is counted on its own, so that the error names the one that is unreadable."""
    try:
        parts = [_by_reason(tagged, by).withColumn("_input", F.lit(i)) for i, (tagged, _, _, by) in enumerate(inputs)]
        rows = functools.reduce(DataFrame.unionByName, parts).collect()
    except Exception as exc:  # Spark wraps the Parquet reader's error in a Java exception
        if not is_unreadable_input(exc):
            raise
        if len(inputs) > 1:
            for one in inputs:
                count_inputs([one])  # raises, naming the input that is unreadable
        named = "; ".join(f"{what}: {path}" for _, what, path, _ in inputs)  # one input, or none named alone
        raise UnreadableInputError(f"unreadable input {named}: {root_cause(exc)}") from None
    return [_tally([r for r in rows if r["_input"] == i]) for i in range(len(inputs))]


def _by_reason(tagged: DataFrame, by: Column | None) -> DataFrame:
    if by is None:
        return tagged.groupBy(REASON).count().withColumn("_by", F.lit(None).cast("string"))
    return tagged.groupBy(F.col(REASON), by.alias("_by")).count()


def _tally(rows: Sequence) -> tuple[dict[str, int], dict[str, int]]:
    counts = {"rows": 0}
    by_counts: dict[str, int] = {}
    for row in rows:
        counts["rows"] += row["count"]
        if row[REASON] is not None:
            counts[row[REASON]] = counts.get(row[REASON], 0) + row["count"]
        elif row["_by"] is not None:
            by_counts[row["_by"]] = by_counts.get(row["_by"], 0) + row["count"]
    return counts, dict(sorted(by_counts.items()))
