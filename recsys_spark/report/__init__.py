"""The HTML report: read the tables the daily runs (and the experiment window, the offline runs and their
comparison) wrote, draw charts, render one self-contained page.

``recsys-spark report --output-root OUT --start S --end E [--out FILE]`` and
``recsys-spark evaluate ... --report`` call :func:`write_report`.  Driver-only:
small tables read with pyarrow (or through a SparkSession when the output
root is not a local path), charts as inline SVG, the page from one Jinja2
template, the data of every chart embedded beside it as JSON.  The same
inputs give the same bytes (no timestamp, no random id, sorted keys).
See docs/report.md.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from importlib import resources
from typing import Any

import pandas as pd

from recsys_spark.config import Config, ReportConfig
from recsys_spark.errors import MissingInputError, UsageError
from recsys_spark.report.build import build_sections
from recsys_spark.report.data import RunData
from recsys_spark.report.load import context_metrics, load, read_offline_auc, read_verdicts
from recsys_spark.report.parts import iter_charts
from recsys_spark.report.readers import LocalReader, Reader, SparkReader, is_local
from recsys_spark.report.sections.offline import OnlineSettings
from recsys_spark.report.svg import fmt

__all__ = ["default_path", "load_range", "render_html", "trim_leading", "write_report"]


def default_path(output_root: str, start: dt.date, end: dt.date) -> str:
    return f"{output_root.rstrip('/')}/reports/{start.isoformat()}_{end.isoformat()}.html"


def _json(value: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: sorted keys, no NaN, ``<``, ``>``, ``&`` escaped."""
    text = json.dumps(value, sort_keys=True, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def trim_leading(data: RunData) -> RunData:
    """The same data without the days before the first day that has output (for rolling windows)."""
    present = data.present
    if not present:
        return data
    first = present[0]
    data.days = [d for d in data.days if d >= first]
    data.start = dt.date.fromisoformat(first)
    return data


def _reader(output_root: str, spark: Any) -> Reader:
    if is_local(output_root):
        return LocalReader(output_root)
    if spark is None:
        from recsys_spark.runtime.session import build_session

        spark = build_session(app_name="recsys-spark-report", log_level="ERROR")
    return SparkReader(spark, output_root)


def load_range(
    output_root: str, start: dt.date, end: dt.date, offline_auc: str = "", spark: Any = None
) -> tuple[RunData, pd.DataFrame]:
    """The range's data and the metrics of the comparison days outside it."""
    if end < start:
        raise UsageError(f"--end {end} is before --start {start}")
    reader = _reader(output_root, spark)
    if not reader.exists(""):
        raise MissingInputError(f"no output root {output_root}: nothing to report (check --output-root)")
    offline = read_offline_auc(offline_auc, getattr(reader, "spark", spark)) if offline_auc else None
    data = load(reader, start, end, offline)
    data.verdicts = read_verdicts(reader, data.unreadable)
    return data, context_metrics(reader, data)


def render_html(data: RunData, context_metrics: pd.DataFrame, settings: ReportConfig) -> str:
    """The page as text (deterministic: a function of the data and the settings only)."""
    try:
        import jinja2
    except ImportError:  # pragma: no cover - jinja2 is a dependency
        raise UsageError("the report needs jinja2: pip install jinja2") from None
    sections = build_sections(data, context_metrics, OnlineSettings.of(settings))
    template_text = resources.files("recsys_spark.report").joinpath("template.html.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["json"] = lambda v: jinja2.utils.markupsafe.Markup(_json(v))
    env.filters["num"] = _num_text
    env.filters["pct"] = _pct_text
    env.filters["signed"] = _signed_text
    env.filters["safe_svg"] = lambda s: jinja2.utils.markupsafe.Markup(s)
    page = env.from_string(template_text).render(
        data=data,
        sections={s.id: s for s in sections},
        order=[s.id for s in sections],
        chart_count=sum(1 for _ in iter_charts(sections)),
        settings=settings,
    )
    return page


def _num_text(v: Any, digits: int = 4) -> str:
    return fmt(v, digits)


def _pct_text(v: Any, digits: int = 2) -> str:
    return "—" if v is None else f"{v * 100:.{digits}f}%"


def _signed_text(v: Any, percent: bool = False) -> str:
    if v is None:
        return "—"
    return f"{v * 100:+.2f} pp" if percent else f"{v:+.4g}"


def write_report(
    output_root: str,
    start: dt.date,
    end: dt.date,
    cfg: Config,
    out: str | None = None,
    offline_auc: str | None = None,
    spark: Any = None,
    rolling: bool = False,
) -> str:
    """Render the report of ``start`` .. ``end`` and write it; return its path.

    ``offline_auc`` overrides ``report.offline_auc``.  ``rolling``: drop the days before the first one with
    output (the window of ``evaluate --report``).  A non-local ``out`` is written through Spark.
    """
    data, context = load_range(output_root, start, end, offline_auc or cfg.report.offline_auc, spark)
    if rolling:
        data = trim_leading(data)
    page = render_html(data, context, cfg.report)
    path = out or default_path(output_root, data.start, data.end)
    if is_local(path):
        local = path.removeprefix("file:")
        os.makedirs(os.path.dirname(os.path.abspath(local)), exist_ok=True)
        with open(local, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(page)
    else:
        from recsys_spark.runtime import fs

        if spark is None:
            from recsys_spark.runtime.session import build_session

            spark = build_session(app_name="recsys-spark-report", log_level="ERROR")
        fs.write_text(spark, path, page)
    return path
