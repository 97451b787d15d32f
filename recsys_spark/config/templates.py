"""Input locations: path templates with date formats, and ``table:`` specs (no pyspark here).

Loaded by the config check before Spark starts; :mod:`recsys_spark.io.catalog` reads what they resolve to.
"""

from __future__ import annotations

import datetime as dt
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from recsys_spark.errors import ConfigError

TABLE_PREFIX = "table:"
#: what a path template may name
PLACEHOLDERS = ("input_root", "date")
#: the inputs a table spec gets the day's partition filter for, when it does not name one
PARTITIONED_INPUTS = ("exposures", "clicks")

TABLE_SPEC = re.compile(r"^table:(?P<name>[^\[\]\s]+)(?:\[(?P<column>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>[^\]]*)\])?$")


@dataclass(frozen=True)
class InputSettings:
    """The part of ``[input]`` the readers need (kept apart so callers can pass plain values): the partition
    column and format of ``table:`` inputs (:func:`resolve`) and the input's column names (``columns``:
    contract name -> the input's, for :func:`recsys_spark.io.catalog.read_input`).  Each orchestrator builds
    it from its config (:meth:`of`) and hands it down; nothing keeps it between runs."""

    partition_column: str = "dt"
    partition_format: str = "%Y-%m-%d"
    columns: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, input_cfg: Any) -> InputSettings:
        return cls(
            getattr(input_cfg, "partition_column", "dt"),
            getattr(input_cfg, "partition_format", "%Y-%m-%d"),
            dict(getattr(input_cfg, "columns", {}) or {}),
        )


def is_table(location: str) -> bool:
    return location.startswith(TABLE_PREFIX)


def check_template(template: str, key: str) -> None:
    """Raise ConfigError (exit 3) for a template naming anything but {input_root}, {date}, {date:FORMAT}.

    >>> check_template("{input_root}/exposures/ds={date:%Y%m%d}", "input.exposures")
    >>> check_template("{input_root}/x/{day}", "input.clicks")
    Traceback (most recent call last):
    ...
    recsys_spark.errors.ConfigError: config key input.clicks: unknown placeholder {day} in '{input_root}/x/{day}' \
(expected {input_root}, {date} or {date:FORMAT})
    """
    try:
        fields = [(name, spec) for _, name, spec, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ConfigError(f"config key {key}: bad template {template!r}: {exc}") from None
    for name, spec in fields:
        if name not in PLACEHOLDERS or (name == "input_root" and spec):
            raise ConfigError(
                f"config key {key}: unknown placeholder {{{name}{':' + spec if spec else ''}}} in "
                f"{template!r} (expected {{input_root}}, {{date}} or {{date:FORMAT}})"
            )
    if is_table(template) and not TABLE_SPEC.match(template):
        raise ConfigError(f"config key {key}: expected table:NAME or table:NAME[column=value], got {template!r}")


def partitioned_template(template: str, kind: str, settings: InputSettings) -> str:
    """``table:NAME`` of a dated input -> ``table:NAME[col={date:FORMAT}]``; anything else unchanged.

    >>> partitioned_template("table:logs.exp", "exposures", InputSettings("ds", "%Y%m%d"))
    'table:logs.exp[ds={date:%Y%m%d}]'
    >>> partitioned_template("table:dim.items", "items", InputSettings())
    'table:dim.items'
    """
    if is_table(template) and "[" not in template and kind in PARTITIONED_INPUTS:
        return f"{template}[{settings.partition_column}={{date:{settings.partition_format}}}]"
    return template


def resolve(template: str, input_root: str, date: dt.date | str, kind: str, options: InputSettings) -> str:
    """The input location of ``date``: a path, or ``table:NAME[col=value]`` (``options``: the run's settings,
    :meth:`InputSettings.of` its config's ``[input]``).

    >>> resolve("{input_root}/exposures/ds={date:%Y%m%d}", "/lake/", dt.date(2026, 11, 20), "clicks", InputSettings())
    '/lake/exposures/ds=20261120'
    >>> resolve("table:logs.exp", "/lake", "2026-11-20", "exposures", InputSettings("ds", "%Y%m%d"))
    'table:logs.exp[ds=20261120]'
    """
    day = dt.date.fromisoformat(date) if isinstance(date, str) else date
    check_template(template, f"input.{kind}")
    filled = partitioned_template(template, kind, options)
    return filled.format(input_root=input_root.rstrip("/"), date=day)
