"""From :class:`~recsys_spark.report.data.RunData` to the page's sections, in the page's order: the one place
that says which sections the page has (each one is a function in :mod:`recsys_spark.report.sections`).

Each chart is a :class:`~recsys_spark.report.parts.Chart`: its SVG and the plain data it was drawn from
(embedded next to it as JSON).  Sections degrade gracefully: no interval columns, no band or whisker; no
experiments table, no experiment section (the same for the decisions, the gates' verdicts, the experiment
windows, the offline runs and their comparisons, the OPE runs and the simulated days); no offline AUC table, a
note saying how to give one.

Three rules keep the page from misleading (docs/report.md):

* a colour or a word that says "significant" follows the *adjusted* p-value
  (:func:`recsys_spark.report.colour_rule.verdict`), and the metric's better side from the registry;
* an item-level slice dimension (:func:`recsys_spark.report.sections.daily.item_level_dimensions`) is never
  drawn against the ``all`` line it cannot be compared with;
* no metric that is 1 by construction on logged lists takes a headline row
  (:data:`recsys_spark.report.sections.daily.HEADLINE_ROWS`).
"""

from __future__ import annotations

import pandas as pd

from recsys_spark.report.data import RunData
from recsys_spark.report.metric_rows import Metrics
from recsys_spark.report.parts import Section
from recsys_spark.report.sections.curves import offline_curves_section, roc_section
from recsys_spark.report.sections.daily import (
    curves_section,
    headline_section,
    lorenz_section,
    quality_section,
    slices_section,
    trends_section,
)
from recsys_spark.report.sections.decisions import decisions_section
from recsys_spark.report.sections.experiments import experiments_section, windows_section
from recsys_spark.report.sections.gate import gates_section
from recsys_spark.report.sections.offline import (
    OnlineSettings,
    comparison_section,
    offline_runs_section,
    offline_section,
)
from recsys_spark.report.sections.ope import ope_section
from recsys_spark.report.sections.simulation import simulation_section
from recsys_spark.report.sections.thresholds import thresholds_section


def build_sections(
    data: RunData,
    context_metrics: pd.DataFrame,
    online: OnlineSettings,
) -> list[Section]:
    """The page's sections in order: the daily ones; the experiments, then the decisions and the gates'
    verdicts; the experiment windows, the offline runs, their comparisons, the OPE runs, the simulated days;
    offline versus online (``online``: its settings) last.  Without an experiments section the decisions and
    the gates come just before offline versus online.  A section with nothing to show (None) is left out."""
    m = Metrics(data.tables.get("metrics", pd.DataFrame()))
    daily = [
        headline_section(data, m, Metrics(context_metrics)),
        trends_section(data, m),
        curves_section(data, m),
        lorenz_section(data, m),
        roc_section(data, m),
        thresholds_section(data),
        slices_section(data, m),
        quality_section(data),
    ]
    experiments = experiments_section(data)
    decided = [decisions_section(data), gates_section(data.verdicts)]
    others = [
        windows_section(data),
        offline_runs_section(data),
        comparison_section(data),
        offline_curves_section(data),
        ope_section(data),
        simulation_section(data),
    ]
    last = offline_section(data, m, online)
    if experiments is not None:
        ordered = [*daily, experiments, *decided, *others, last]
    else:
        ordered = [*daily, *others, *decided, last]
    return [s for s in ordered if s is not None]
