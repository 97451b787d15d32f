"""Small shims so the job runs on PySpark 3.5 as on 4.x (docs/catalog.md, "Spark and Python versions").

What the code calls that is newer than 3.5, and where it comes from:

| API | since | here |
|-----|-------|------|
| ``Column.try_cast`` | 4.0 | :func:`try_cast` below |
| ``F.try_to_timestamp``, ``F.try_divide`` | 3.5 | used as is |
| ``DataFrame.unpivot`` | 3.4 | used as is |
| ``DataFrame.mapInArrow`` | 3.3 | used as is |
| ``tomllib`` (Python) | 3.11 | ``tomli`` on 3.10 (recsys_spark/config/load.py) |
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

_BOUNDS: dict[type[T.DataType], tuple[int, int]] = {  # integral target -> its range
    T.ByteType: (-(2**7), 2**7 - 1),
    T.ShortType: (-(2**15), 2**15 - 1),
    T.IntegerType: (-(2**31), 2**31 - 1),
    T.LongType: (-(2**63), 2**63 - 1),
}


def try_cast(col: Column, to: T.DataType) -> Column:
    """``col.try_cast(to)``: null where the value does not fit ``to`` instead of an error.

    Spark 4 has ``Column.try_cast``. On 3.5 an integral target gets a range guard before the cast
    (without it a non-ANSI cast of a long wraps around, and a double saturates); NaN and
    infinities fail the guard, so they become null as with ``try_cast``. Other targets use
    ``cast``, which under 3.5's default (``spark.sql.ansi.enabled=false``) already gives null on
    failure.
    """
    if hasattr(Column, "try_cast"):
        return col.try_cast(to)
    bounds = _BOUNDS.get(type(to))
    if bounds is None:
        return col.cast(to)
    low, high = bounds
    return F.when((col >= F.lit(low)) & (col <= F.lit(high)), col.cast(to))
