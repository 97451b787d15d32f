"""The :class:`Config` root and :func:`load_config`: defaults, then a TOML file, then ``--set`` overrides,
each value checked against its section's type (a bad key fails naming itself, exit 3)."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from recsys_spark.config.checks import thresholds_of
from recsys_spark.config.experiments import ExperimentsConfig
from recsys_spark.config.gate import GateConfig
from recsys_spark.config.input import InputConfig, ValidationConfig, parse_columns
from recsys_spark.config.metrics import (
    AttributionConfig,
    HealthConfig,
    LabelsConfig,
    MetricsConfig,
    RankingConfig,
    SlicesConfig,
    StatsConfig,
)
from recsys_spark.config.offline import OfflineConfig
from recsys_spark.config.ope import OpeConfig, SimulationConfig
from recsys_spark.config.output import ExecutionConfig, OutputConfig
from recsys_spark.config.report import ReportConfig
from recsys_spark.config.rules import CustomRule, RulesConfig
from recsys_spark.errors import ConfigError

if sys.version_info >= (3, 11):  # Python 3.10: the tomli backport, same API
    import tomllib
else:  # pragma: no cover - exercised by make test-compat
    import tomli as tomllib


@dataclass(frozen=True)
class Config:
    """Every setting, one frozen dataclass per TOML section (their modules hold the defaults and the checks);
    ``spark`` is the ``[spark]`` table, handed to the session as it is."""

    input: InputConfig = field(default_factory=InputConfig)
    attribution: AttributionConfig = field(default_factory=AttributionConfig)
    labels: LabelsConfig = field(default_factory=LabelsConfig)
    ranking: RankingConfig = field(default_factory=RankingConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    health: HealthConfig = field(default_factory=HealthConfig)
    slices: SlicesConfig = field(default_factory=SlicesConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    experiments: ExperimentsConfig = field(default_factory=ExperimentsConfig)
    offline: OfflineConfig = field(default_factory=OfflineConfig)
    ope: OpeConfig = field(default_factory=OpeConfig)
    simulation: SimulationConfig = field(default_factory=SimulationConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    spark: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON-able) of every setting."""
        return json.loads(json.dumps(_plain(self)))

    def fingerprint(self) -> str:
        """Short hash of the settings, to tell runs with different configurations apart."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


_CHOICES: dict[tuple[str, ...], tuple[str, ...]] = {
    ("ranking", "list_unit"): ("request", "session", "user"),
    ("metrics", "ndcg_gain"): ("exponential", "linear"),
    ("execution", "log_level"): ("ERROR", "WARN", "INFO", "DEBUG"),
    ("execution", "labelling"): ("spark", "python"),
    ("offline", "multiple_testing"): ("holm", "bh", "none"),
    ("output", "write_mode"): ("auto", "insert_overwrite", "overwrite_partitions"),
    ("experiments", "inference"): ("sequential", "fixed"),
    ("slices", "hemisphere"): ("north", "south"),
}
#: integer keys that take one of a few values (0 included)
_INT_CHOICES: dict[tuple[str, ...], tuple[int, ...]] = {
    ("input", "position_base"): (0, 1),
}


def load_config(path: str | Path | None = None, overrides: typing.Sequence[str] = ()) -> Config:
    """Defaults, then the TOML file at ``path``, then each ``KEY=VALUE`` override.

    VALUE is read as a TOML value (``[5, 10]``, ``{click = 1}``, ``3``); a bare
    word that is not valid TOML is taken as a string.  Unknown keys and values
    of the wrong type raise :class:`ConfigError` naming the key.
    """
    tree: dict[str, Any] = {}
    if path is not None:
        try:
            tree = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except IsADirectoryError:
            raise ConfigError(f"config file {path} is a directory, not a TOML file") from None
        except PermissionError:
            raise ConfigError(f"config file {path} cannot be read (permission denied)") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start})") from None
        except OSError as exc:
            raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        parts = key.strip().split(".")
        if parts[0] == "spark" and len(parts) > 1:  # Spark's own keys contain dots
            parts = ["spark", ".".join(parts[1:])]
        _assign(tree, parts, _parse_value(raw.strip(), key.strip(), _expects_structure(parts)))
    if isinstance(tree.get("spark"), Mapping):  # every Spark key starts with "spark.": the prefix may be left out
        tree["spark"] = {(k if str(k).startswith("spark.") else f"spark.{k}"): v for k, v in tree["spark"].items()}
    return _build(Config, tree, ())


def _expects_structure(parts: Sequence[str]) -> bool:
    """Whether the config key ``parts`` holds a table or a list (not a string nor a number)."""
    node: Any = Config
    for part in parts:
        if not (isinstance(node, type) and dataclasses.is_dataclass(node)):
            return False
        hints = typing.get_type_hints(node)
        if part not in hints:
            return False
        node = hints[part]
    origin = typing.get_origin(node)
    return (isinstance(node, type) and dataclasses.is_dataclass(node)) or origin in (tuple, list, dict, Mapping)


def _parse_value(raw: str, key: str = "", structured: bool = False) -> Any:
    """``raw`` read as a TOML value; a bare word that is not TOML is a string (``{input_root}/logs``), but
    for a key that holds a table or a list, a value that is not valid TOML is an error that says so
    (``{user_id=uid}``: its string needs quotes)."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError as exc:
        if structured:
            reason = str(exc).replace("(at line 1, column", "(at column")
            raise ConfigError(
                f"config key {key}: --set value {raw!r} is not valid TOML: {reason} (strings inside a table or a "
                'list need quotes: {user_id = "uid"}, ["platform"])'
            ) from None
        return raw


def _assign(tree: dict[str, Any], parts: list[str], value: Any) -> None:
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"config key {'.'.join(parts)}: {part} is not a table")
    node[parts[-1]] = value


def _build(cls: type, tree: Mapping[str, Any], prefix: tuple[str, ...]) -> Any:
    if not isinstance(tree, Mapping):
        raise ConfigError(f"config key {'.'.join(prefix)} must be a table")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in tree:
        if key not in names:
            near = difflib.get_close_matches(str(key), sorted(names), n=1)
            hint = f" (did you mean {'.'.join(prefix + (near[0],))}?)" if near else ""
            raise ConfigError(f"unknown config key: {'.'.join(prefix + (key,))}{hint}")
    values = {}
    # in the fields' order: [metrics] registers the composite names that [experiments] then reads
    for name in [f.name for f in dataclasses.fields(cls) if f.name in tree]:
        values[name] = _coerce(hints[name], tree[name], prefix + (name,))
    return cls(**values)


def _coerce(hint: Any, value: Any, key: tuple[str, ...]) -> Any:
    dotted = ".".join(key)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):  # X | None: TOML has no null, a value is an X
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value, key)
    if key == ("input", "columns"):  # a shared mapping and per-input tables (config/input.py)
        return parse_columns(value, dotted)
    if key in (("offline", "thresholds"), ("metrics", "thresholds")):  # may be empty, may hold 0 (not positive)
        return thresholds_of(dotted, value)
    origin = typing.get_origin(hint)
    if origin is tuple and typing.get_args(hint)[0] is CustomRule:  # [[rules.custom]]: a list of tables
        if not isinstance(value, list):
            raise ConfigError(f"config key {dotted}: expected a list of tables ([[{dotted}]]), got {value!r}")
        return tuple(CustomRule.parse(table, f"{dotted}[{i + 1}]") for i, table in enumerate(value))
    args = typing.get_args(hint)
    if origin is tuple and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):  # an array of tables
        if not isinstance(value, list):
            raise ConfigError(f"config key {dotted}: expected an array of tables, got {value!r}")
        return tuple(_build(args[0], v, (*key[:-1], f"{key[-1]}[{i}]")) for i, v in enumerate(value))
    if origin in (Mapping, dict) and isinstance(args[1], type) and dataclasses.is_dataclass(args[1]):
        if not isinstance(value, Mapping):
            raise ConfigError(f"config key {dotted}: expected a table, got {value!r}")
        return MappingProxyType({str(k): _build(args[1], v, (*key, str(k))) for k, v in value.items()})
    try:
        if origin is tuple and typing.get_args(hint)[0] is str:  # names: may be empty, order kept
            if not isinstance(value, list):
                raise TypeError("a list of strings")
            return tuple(dict.fromkeys(_scalar(str, v) for v in value))
        if origin is tuple:
            if not isinstance(value, list) or not value:
                raise TypeError("a non-empty list")
            items = tuple(_scalar(typing.get_args(hint)[0], v) for v in value)
            if any(i <= 0 for i in items):
                raise TypeError("positive numbers")
            return tuple(sorted(set(items)))
        if origin in (Mapping, dict) or origin is typing.get_origin(Mapping[str, str]):
            if not isinstance(value, Mapping):
                raise TypeError("a table")
            val_type = typing.get_args(hint)[1]
            out = {str(k): _scalar(val_type, v) for k, v in value.items()}
            if val_type is float and any(v < 0 for v in out.values()):
                raise TypeError("non-negative numbers")
            return MappingProxyType(out)
        result = _scalar(hint, value)
    except TypeError as exc:
        raise ConfigError(f"config key {dotted}: expected {exc}, got {value!r}") from None
    choices = _CHOICES.get(key)
    if choices and result not in choices:
        raise ConfigError(f"config key {dotted}: expected one of {', '.join(choices)}, got {value!r}")
    if key in _INT_CHOICES:
        if result not in _INT_CHOICES[key]:
            allowed = ", ".join(map(str, _INT_CHOICES[key]))
            raise ConfigError(f"config key {dotted}: expected one of {allowed}, got {value!r}")
        return result
    if isinstance(result, (int, float)) and not isinstance(result, bool):
        # thresholds and tolerances may be 0
        zero_ok = key[0] in ("rules", "validation", "experiments", "offline", "stats", "gate", "ope")
        zero_ok = zero_ok or key == ("metrics", "curve_points")  # 0: no curves
        if result < 0 or (result == 0 and not zero_ok):
            raise ConfigError(
                f"config key {dotted}: expected a {'non-negative' if zero_ok else 'positive'} number, got {value!r}"
            )
    return result


def _scalar(hint: Any, value: Any) -> Any:
    if hint is bool:
        if not isinstance(value, bool):
            raise TypeError("true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("an integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError("a number")
        if not math.isfinite(value):  # NaN compares false both ways and would pass every range check
            raise TypeError("a finite number")
        return float(value)
    if hint is str:
        if isinstance(value, (dict, list)):
            raise TypeError("a string")
        return str(value).lower() if isinstance(value, bool) else str(value)
    raise TypeError(f"a value of type {hint}")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
