"""``[ope]`` and ``[simulation]``: off-policy evaluation of a candidate, and the offline simulation's lists."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from recsys_spark.config.templates import check_template
from recsys_spark.errors import ConfigError


def _ope_estimators() -> tuple[str, ...]:
    from recsys_spark.kernels.ope import ESTIMATORS

    return tuple(ESTIMATORS)


@dataclass(frozen=True)
class OpeConfig:
    """Off-policy evaluation (``recsys-spark ope``, docs/ope.md): the candidate (a path or ``table:NAME``,
    ``{input_root}`` and ``{run}`` filled in), the estimators, weight clipping (0: none), Switch-DR's τ, and
    the smallest share of the logged requests the candidate must answer (below it the run fails, exit 7)."""

    target: str = ""
    estimators: tuple[str, ...] = field(default_factory=_ope_estimators)
    clip: float = 0.0
    switch_tau: float = 10.0
    min_matched_share: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.min_matched_share <= 1:
            raise ConfigError(
                "config key ope.min_matched_share: expected a share of the logged requests in (0, 1], got "
                f"{self.min_matched_share}"
            )
        known = _ope_estimators()
        for name in self.estimators:
            if name not in known:
                near = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise ConfigError(
                    f"config key ope.estimators: unknown estimator {name!r}{hint}; expected some of {', '.join(known)}"
                )


@dataclass(frozen=True)
class SimulationConfig:
    """Offline simulation (``recsys-spark simulate``, docs/ope.md): where the candidate's lists for the logged
    requests are (``{input_root}``, ``{date}`` and ``{run}`` filled in)."""

    lists: str = "{input_root}/simulation/{run}/dt={date}"

    def __post_init__(self) -> None:
        check_template(self.lists.replace("{run}", "run"), "simulation.lists")
