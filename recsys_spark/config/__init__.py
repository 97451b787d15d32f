"""Settings: one frozen, typed object loaded once from TOML plus ``--set`` overrides.

The defaults in the section modules are the single source of truth; ``conf/default.toml``
spells every one of them out with a comment (a test keeps the two equal).
Library functions never receive this object whole: the pipeline hands each
step the plain values it needs.

One module per section or family of sections, :mod:`~recsys_spark.config.load` holding the
:class:`Config` root and the TOML reading:

==========================================  ===============================================
module                                      sections
==========================================  ===============================================
:mod:`~recsys_spark.config.input`           ``[input]``, ``[validation]`` (the time zone)
:mod:`~recsys_spark.config.metrics`         ``[attribution] [labels] [ranking] [metrics]
                                            [health] [slices] [stats]``
:mod:`~recsys_spark.config.rules`           ``[rules]``, ``[[rules.custom]]``
:mod:`~recsys_spark.config.output`          ``[execution]``, ``[output]``
:mod:`~recsys_spark.config.experiments`     ``[experiments]``
:mod:`~recsys_spark.config.offline`         ``[offline]``
:mod:`~recsys_spark.config.ope`             ``[ope]``, ``[simulation]``
:mod:`~recsys_spark.config.report`          ``[report]``
:mod:`~recsys_spark.config.gate`            ``[gate]``
:mod:`~recsys_spark.config.checks`          the bounds and name checks several share
==========================================  ===============================================

Beside them: :mod:`~recsys_spark.config.templates` (input locations), :mod:`~recsys_spark.config.zones`
(the portable time zones) and :mod:`~recsys_spark.config.sql_guard` (the grammar of the user's SQL).
"""

from __future__ import annotations

from recsys_spark.config.checks import NAME_PATTERN, PATH_NAME, check_name
from recsys_spark.config.gate import GateConfig
from recsys_spark.config.load import Config, load_config
from recsys_spark.config.offline import parse_distortion, parse_range
from recsys_spark.config.output import OutputConfig
from recsys_spark.config.report import ReportConfig
from recsys_spark.config.rules import CustomRule

#: the root and the names other packages use; every section's dataclass is in its module
__all__ = [
    "NAME_PATTERN",
    "PATH_NAME",
    "Config",
    "CustomRule",
    "GateConfig",
    "OutputConfig",
    "ReportConfig",
    "check_name",
    "load_config",
    "parse_distortion",
    "parse_range",
]
