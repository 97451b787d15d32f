"""Row-level checks: bad rows are set aside with a reason and counted, never dropped silently.

Each check is a (reason, condition) pair; a row gets the first reason whose
condition holds.  :func:`split_rows` returns the good rows and the rejected
ones (with a ``reject_reason`` column), both lazily from the same input.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.errors import UnreadableInputError
from recsys_spark.schema import ITEM, POSITION, REASON, REQUEST, SCORE, TS, USER

Check = tuple[str, Column]


TsBounds = tuple[dt.datetime, dt.datetime]


def day_bounds(day: dt.date, tolerance_minutes: float) -> TsBounds:
    """[start, end) of the partition's day (UTC) widened by the tolerance on both sides."""
    start = dt.datetime.combine(day, dt.time()) - dt.timedelta(minutes=tolerance_minutes)
    return start, dt.datetime.combine(day + dt.timedelta(days=1), dt.time()) + dt.timedelta(minutes=tolerance_minutes)


def _outside(bounds: TsBounds) -> Column:
    start, end = (F.lit(b).cast("timestamp") for b in bounds)
    return (F.col(TS) < start) | (F.col(TS) >= end)


def exposure_checks(has_score: bool, bounds: TsBounds) -> list[Check]:
    """Why an exposure row cannot be used (an empty response has null item and position)."""
    item_row = F.col(ITEM).isNotNull()
    checks: list[Check] = [
        ("null_user_id", F.col(USER).isNull()),
        ("null_request_id", F.col(REQUEST).isNull()),
        ("null_ts", F.col(TS).isNull()),
        ("ts_outside_day", _outside(bounds)),
        ("bad_position", item_row & (F.col(POSITION).isNull() | (F.col(POSITION) <= 0))),
    ]
    if has_score:
        score = F.col(SCORE)
        checks.append(("bad_score", item_row & (score.isNull() | F.isnan(score)
                                                | (F.abs(score) == float("inf")))))
    return checks


def click_checks(bounds: TsBounds) -> list[Check]:
    """Why a feedback event cannot be attributed at all."""
    return [
        ("null_user_id", F.col(USER).isNull()),
        ("null_item_id", F.col(ITEM).isNull()),
        ("null_ts", F.col(TS).isNull()),
        ("ts_outside_day", _outside(bounds)),
    ]


def tag_rows(df: DataFrame, checks: Sequence[Check]) -> DataFrame:
    """Add ``reject_reason``: the first failed check's name, or null for a good row."""
    reason = F.coalesce(*[F.when(cond, F.lit(name)) for name, cond in checks], F.lit(None).cast("string"))
    return df.withColumn(REASON, reason)


def split_rows(tagged: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(good rows without the reason column, rejected rows with it)."""
    good = tagged.where(F.col(REASON).isNull()).drop(REASON)
    return good, tagged.where(F.col(REASON).isNotNull())


def count_rows(tagged: DataFrame, what: str, path: str) -> dict[str, int]:
    """Rows read and rejected per reason, in one pass: {"rows": n, "<reason>": n, ...}.

    This is the first action on the input, so a corrupt or truncated file
    surfaces here: it is reported as unreadable input naming ``path``.
    """
    counts = {"rows": 0}
    try:
        rows = tagged.groupBy(REASON).count().collect()
    except Exception as exc:  # Spark wraps the Parquet reader's error in a Java exception
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise UnreadableInputError(f"unreadable input {what}: {path}: {first}") from None
    for row in rows:
        counts["rows"] += row["count"]
        if row[REASON] is not None:
            counts[row[REASON]] = row["count"]
    return counts
