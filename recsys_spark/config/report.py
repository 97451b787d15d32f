"""``[report]``: the HTML report's window, gaps and regression (docs/report.md)."""

from __future__ import annotations

from dataclasses import dataclass

from recsys_spark.config.checks import check_name, in_open_unit, parsed
from recsys_spark.registry import parse_key


@dataclass(frozen=True)
class ReportConfig:
    """The HTML report (:mod:`recsys_spark.report`); see docs/report.md."""

    offline_auc: str = ""
    window_days: int = 30
    overfit_gap: float = 0.05
    offline_online_gap: float = 0.05
    regression_x: str = "auc_impression_weighted"
    regression_y: str = "uv_ctr_global"
    min_regression_days: int = 7
    regression_level: float = 0.95
    #: "" : x of a day is its online regression_x; else the model whose offline runs MODEL.YYYY-MM-DD give x
    regression_model: str = ""
    #: "" : no prediction; else an offline run whose regression_x is the x0 of the predicted regression_y
    regression_candidate: str = ""

    def __post_init__(self) -> None:
        in_open_unit("report.regression_level", self.regression_level)
        for key in ("regression_x", "regression_y"):
            parsed(f"report.{key}", parse_key, getattr(self, key))
        for key in ("regression_model", "regression_candidate"):  # a run name, or the start of one
            if getattr(self, key):
                check_name(getattr(self, key), f"config key report.{key}")
