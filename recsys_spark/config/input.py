"""``[input]`` and ``[validation]``: where the day's inputs are and how their rows are checked (the day's
tolerance and time zone).

``input.columns`` maps the contract's column names to an input's own.  A string value is the shared mapping,
for every input; a table named after an input (:data:`MAPPED_INPUTS`) is that input's own mapping, which wins
over the shared one for that input (:func:`columns_for`)::

    [input.columns]
    user_id = "uid"                 # every input
    exposures = { ts = "shown_at" } # the exposures (and the previous days' exposures)
    clicks = { ts = "clicked_at" }  # the clicks (and the next day's)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from recsys_spark.config.checks import MAX_TOLERANCE_MINUTES, at_most
from recsys_spark.config.templates import check_template  # {input_root}, {date}, {date:FORMAT}, table:NAME
from recsys_spark.config.zones import is_portable_zone
from recsys_spark.errors import ConfigError

#: the inputs that may have a column mapping of their own, ``input.columns.<name>``: the input settings
#: (exposures, clicks, items, users, surveys), ``experiments.assignments``, ``ope.target`` and ``simulation.lists``
MAPPED_INPUTS = ("exposures", "clicks", "items", "users", "assignments", "target", "lists", "surveys")

#: ``input.columns`` as loaded: contract name -> the input's name (a string: shared), or input -> its own such
#: mapping (a table); ``Any`` so that a reader typed ``Mapping[str, str]`` still takes it (the shared part applies)
ColumnMappings = Mapping[str, Any]


def parse_columns(value: object, key: str = "input.columns") -> ColumnMappings:
    """``input.columns`` checked: string values (the shared mapping) and tables named after an input of
    :data:`MAPPED_INPUTS` holding string values; anything else is a :class:`ConfigError` naming the key."""
    if not isinstance(value, Mapping):
        raise ConfigError(f'config key {key}: expected a table ({{ user_id = "uid" }}), got {value!r}')
    out: dict[str, Any] = {}
    for name, source in value.items():
        name = str(name)
        if isinstance(source, Mapping):
            if name not in MAPPED_INPUTS:
                raise ConfigError(
                    f"config key {key}.{name}: a table maps one input's columns, and {name!r} is no input "
                    f'(one of {", ".join(MAPPED_INPUTS)}); a contract column maps to a string: {name} = "..."'
                )
            out[name] = MappingProxyType({str(k): _column(v, f"{key}.{name}.{k}") for k, v in source.items()})
        elif name in MAPPED_INPUTS:
            raise ConfigError(
                f"config key {key}.{name}: expected the {name} input's own mapping, a table such as "
                f'{{ ts = "shown_at" }}, got {source!r}'
            )
        else:
            out[name] = _column(source, f"{key}.{name}")
    return MappingProxyType(out)


def _column(value: object, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"config key {key}: expected the input's column name (a non-empty string), got {value!r}")
    return value


def columns_for(columns: ColumnMappings, source: str | None) -> dict[str, str]:
    """The mapping (contract name -> the input's) that applies to the input ``source``: the shared one,
    overridden column by column by ``input.columns.<source>``; ``None``: the shared one only.

    >>> columns_for({"user_id": "uid", "ts": "time", "clicks": {"ts": "clicked_at"}}, "clicks")
    {'user_id': 'uid', 'ts': 'clicked_at'}
    >>> columns_for({"user_id": "uid", "clicks": {"ts": "clicked_at"}}, "exposures")
    {'user_id': 'uid'}
    """
    shared = {name: source for name, source in columns.items() if isinstance(source, str)}
    own = columns.get(source) if source is not None else None
    return {**shared, **own} if isinstance(own, Mapping) else shared


@dataclass(frozen=True)
class InputConfig:
    """Input locations; ``{input_root}`` and ``{date}`` are filled in per run."""

    exposures: str = "{input_root}/exposures/dt={date}"
    clicks: str = "{input_root}/clicks/dt={date}"
    items: str = "{input_root}/items"  # optional (item_id, category), not partitioned
    users: str = "{input_root}/users"  # optional, read only when a slice or a custom rule needs its columns
    # optional (user_id, question, score), a partition a day, e.g. "{input_root}/surveys/dt={date}"; "" (the
    # default): no survey read (daily/surveys.py)
    surveys: str = ""
    # catalog inputs (recsys_spark/config/templates.py): table:NAME inputs' partition column and its format
    partition_column: str = "dt"
    partition_format: str = "%Y-%m-%d"
    # contract column name -> the input's column name, e.g. {user_id = "uid"}, or per input:
    # {exposures = {ts = "shown_at"}, clicks = {ts = "clicked_at"}} (parse_columns, columns_for)
    columns: ColumnMappings = field(default_factory=lambda: MappingProxyType({}))
    # the first displayed position in the inputs: 1 (the contract's), or 0 (read as 1, 1 as 2, ...)
    position_base: int = 1

    def __post_init__(self) -> None:
        for name in ("exposures", "clicks", "items", "users"):
            check_template(getattr(self, name), f"input.{name}")
        if self.surveys:
            check_template(self.surveys, "input.surveys")
        object.__setattr__(self, "columns", parse_columns(self.columns))
        if self.position_base not in (0, 1):
            raise ConfigError(
                f"config key input.position_base: expected 0 or 1 (the position of the first item shown), "
                f"got {self.position_base!r}"
            )

    def columns_for(self, source: str | None) -> dict[str, str]:
        """:func:`columns_for` of this config's ``columns``."""
        return columns_for(self.columns, source)


@dataclass(frozen=True)
class ValidationConfig:
    ts_tolerance_minutes: float = 60.0
    write_rejected: bool = False
    time_zone: str = "UTC"

    def __post_init__(self) -> None:
        if not is_portable_zone(self.time_zone):  # Python (the day's bounds) and Java (Spark's session) both
            raise ConfigError(
                f"config key validation.time_zone: unknown time zone {self.time_zone!r}: expected an IANA region "
                "name that both Python and Java know, such as UTC, Asia/Shanghai or America/New_York "
                "(Etc/GMT-8 for a fixed UTC+08:00; not localtime, posix/... or right/...)"
            )
        at_most(
            "validation.ts_tolerance_minutes",
            self.ts_tolerance_minutes,
            MAX_TOLERANCE_MINUTES,
            "a day: a row further than that from its partition's day belongs to another partition",
        )
