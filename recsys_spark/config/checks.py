"""The checks several sections share: the upper bounds of keys that would overflow once Spark runs, and
the spelling of names that become metric names or directories.  No pyspark, no scipy: loaded before Spark starts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TypeVar

from recsys_spark.errors import ConfigError
from recsys_spark.tables import PATH_NAME, check_name

S = TypeVar("S")
T = TypeVar("T")

#: upper bounds of the keys whose larger values mean nothing here and would overflow a date, an interval
#: or a 32-bit column after Spark has started (conf/default.toml says why each bound is where it is)
MAX_WINDOW_MINUTES = 2880.0  # two days: an exposure's clicks are read from its day and the next, no further
MAX_TOLERANCE_MINUTES = 1440.0  # a day: a row further from its partition's day belongs to another partition
MAX_NOVELTY_DAYS = 366  # a year of clicks partitions, each one read
MAX_K = 1_000_000  # deeper than any ranked list (the tables' k is a 32-bit int)


def at_most(key: str, value: float, bound: float, why: str) -> None:
    """Refuse ``value`` above ``bound`` with a :class:`ConfigError` naming ``key``, the bound and ``why``."""
    if value > bound:
        raise ConfigError(
            f"config key {key}: expected at most {_plain_number(bound)} ({why}), got {_plain_number(value)}"
        )


def in_open_unit(key: str, value: float) -> None:
    """Refuse a ``value`` outside (0, 1) (a confidence, a level) with a :class:`ConfigError` naming ``key``.

    >>> in_open_unit("stats.confidence", 1.0)
    Traceback (most recent call last):
    ...
    recsys_spark.errors.ConfigError: config key stats.confidence: expected a number in (0, 1), got 1.0
    """
    if not 0 < value < 1:
        raise ConfigError(f"config key {key}: expected a number in (0, 1), got {value}")


def thresholds_of(key: str, value: object) -> tuple[float, ...]:
    """A list of thresholds (``offline.thresholds``): finite numbers in [0, 1], sorted, once each; ``[]`` (no
    threshold rows) allowed.  Anything else is a :class:`ConfigError` naming ``key`` (one line, exit 3).

    >>> thresholds_of("offline.thresholds", [0.7, 0.5, 0.5, 1])
    (0.5, 0.7, 1.0)
    >>> thresholds_of("offline.thresholds", [1.5])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_spark.errors.ConfigError: config key offline.thresholds: expected a list of numbers in [0, 1] ..., got [1.5]
    """

    def in_unit(v: object) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1

    if not isinstance(value, list) or not all(in_unit(v) for v in value):
        raise ConfigError(
            f"config key {key}: expected a list of numbers in [0, 1] (a score >= the threshold is a predicted "
            f"positive), got {value!r}"
        )
    return tuple(sorted({float(v) for v in value}))


def parsed(key: str, parse: Callable[[S], T], value: S) -> T:
    """``parse(value)``, its ValueError a :class:`ConfigError` naming ``key`` (a metric key, a range)."""
    try:
        return parse(value)
    except ValueError as exc:
        raise ConfigError(f"config key {key}: {exc}") from None


def _plain_number(value: float) -> str:
    """2880.0 -> 2880, 1e13 -> 10000000000000: what an operator typed, not an exponent."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e18 else repr(value)


#: the spelling of a name that becomes part of a metric or rule name (a conversion event, a custom rule)
NAME_PATTERN = re.compile(r"[a-z0-9_]+")
#: the spelling of a name that becomes one path segment, and its check: beside the table layouts it names
#: (:mod:`recsys_spark.tables`)
__all__ = ["NAME_PATTERN", "PATH_NAME", "check_name"]
