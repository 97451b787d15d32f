"""``[gate]``: what ``recsys-spark gate`` compares, and its checks (docs/gate.md)."""

from __future__ import annotations

from dataclasses import dataclass

from recsys_spark.config.checks import check_name, parsed
from recsys_spark.errors import ConfigError
from recsys_spark.kernels.gate import GateCheck
from recsys_spark.registry import metric, parse_key

#: ``gate.source``: what a gate compares (docs/gate.md)
GATE_SOURCES = ("offline", "experiment")
#: ``gate.checks[i].on``: the interval's bound (the default) or the point estimate (as TFMA and MLflow)
GATE_ON = ("bound", "point")


@dataclass(frozen=True)
class GateConfig:
    """``recsys-spark gate`` (docs/gate.md): what it compares and its checks.

    ``source = "offline"``: the offline runs ``candidate`` against ``base`` (``offline-compare``'s output);
    ``source = "experiment"``: ``variant`` against the control in the window ``start``..``end`` of
    ``experiment`` (``recsys-spark experiment``'s output).  "" (the default): no gate configured.
    """

    source: str = ""
    base: str = ""
    candidate: str = ""
    experiment: str = ""
    variant: str = "treatment"
    start: str = ""
    end: str = ""
    checks: tuple[GateCheck, ...] = ()  # [[gate.checks]], docs/gate.md
    #: true: the command's exit code says the verdict (0 passed, 13 inconclusive, 12 failed); false: exit 0 once
    #: the verdict is written, whatever its state, for a scheduler that reads verdict.json (the Airflow DAG)
    fail_on_verdict: bool = True

    def __post_init__(self) -> None:
        if self.source and self.source not in GATE_SOURCES:
            raise ConfigError(f"config key gate.source: expected one of {', '.join(GATE_SOURCES)}, got {self.source!r}")
        for key in ("base", "candidate", "experiment"):  # each becomes a directory the gate reads
            if getattr(self, key):
                check_name(getattr(self, key), f"config key gate.{key}")
        for i, c in enumerate(self.checks):
            where = f"config key gate.checks[{i}]"
            if not c.metric or not c.aggregation:
                raise ConfigError(f"{where}: expected a metric and an aggregation (and k where the metric takes one)")
            name, _, _ = parsed(f"gate.checks[{i}]", parse_key, c.key)
            if c.k is not None and c.k <= 0:
                raise ConfigError(f"{where} ({c.key}): k must be a positive integer, got {c.k}")
            if c.on not in GATE_ON:
                raise ConfigError(f"{where} ({c.key}): on: expected one of {', '.join(GATE_ON)}, got {c.on!r}")
            if c.lower_bound is None and c.upper_bound is None and not c.changes:
                raise ConfigError(
                    f"{where} ({c.key}): no threshold: expected lower_bound, upper_bound, min_absolute_change "
                    "or min_relative_change"
                )
            if c.guardrail and not c.changes:
                raise ConfigError(
                    f"{where} ({c.key}): guardrail = true needs its margin, min_absolute_change or "
                    "min_relative_change (the worsening allowed)"
                )
            if c.changes and metric(name).higher_is_better is None:
                raise ConfigError(f"{where} ({c.key}): {name} has no better direction: only lower_bound/upper_bound")
            if not c.slice or not (c.slice == "all" or "=" in c.slice):
                raise ConfigError(f'{where} ({c.key}): slice: expected "all" or NAME=VALUE, got {c.slice!r}')
