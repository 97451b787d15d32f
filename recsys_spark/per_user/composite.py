"""The composite metrics of a day, ready for the pass: each component's scale read from the reference day.

A standardised component is divided by its per-user standard deviation on the reference day (docs/metrics.md,
"Composite metric"): the ``metrics`` row ``(metric, k, user_avg, all)`` of that day holds the mean's standard
error se and the users n, so the spread is s = se · √n, read as one small filtered collect (a few numbers,
never a row per user).  The reference day is ``reference_date`` when configured, else the day before the
evaluated one; it must be an earlier day than the evaluated one, and complete (``summary/dt=R/_SUCCESS``).
Without a usable reference (no such day, no row, n < 2, a spread of 0 or not finite) the composite is not
computed that day, and a note says why: no value rather than one on another scale.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from recsys_spark.config.composite import CompositeConfig, component_key
from recsys_spark.kernels.composite import Composite, Term
from recsys_spark.runtime import fs
from recsys_spark.schema import ALL
from recsys_spark.tables import DAILY


def reference_day(composite: CompositeConfig, date: dt.date) -> dt.date:
    """The composite's reference day for the evaluated ``date``: ``reference_date``, else the day before."""
    return composite.reference() or date - dt.timedelta(days=1)


def reference_spreads(
    spark: SparkSession, output_root: str, day: dt.date, keys: Sequence[tuple[str, int | None]]
) -> dict[tuple[str, int | None], float] | None:
    """{(metric, k): per-user standard deviation} of the ``user_avg`` rows of slice ``all`` on ``day`` (the ones
    with an se and n >= 2), or None when ``day`` is not complete."""
    iso = day.isoformat()
    path = DAILY.path(output_root, "metrics", dt=iso)
    if not fs.exists(spark, DAILY.marker(output_root, dt=iso)) or not fs.exists(spark, path):
        return None
    metrics = sorted({m for m, _ in keys})
    rows = (
        spark.read.parquet(path)
        .where((F.col("slice") == ALL) & (F.col("aggregation") == "user_avg") & F.col("metric").isin(metrics))
        .select("metric", "k", "n", "se")
        .collect()  # one row per (metric, k) of the components: a few numbers
    )
    out: dict[tuple[str, int | None], float] = {}
    for row in rows:
        if row["se"] is not None and row["n"] is not None and row["n"] >= 2:
            out[(row["metric"], row["k"])] = float(row["se"]) * math.sqrt(float(row["n"]))
    return out


def resolve(
    spark: SparkSession, output_root: str, composites: Sequence[CompositeConfig], date: dt.date
) -> tuple[list[Composite], list[str]]:
    """The day's composites with their scales (module docstring), and a note for each one left out."""
    ready: list[Composite] = []
    notes: list[str] = []
    for c in composites:
        keys = [component_key(comp.metric, c.name) for comp in c.components]
        scaled = [c.standardised(comp) for comp in c.components]
        spreads: dict[tuple[str, int | None], float] = {}
        if any(scaled):
            ref = reference_day(c, date)
            found = reference_spreads(spark, output_root, ref, keys) if ref < date else None
            if found is None:
                notes.append(
                    f"composite {c.name} not computed: its reference day {ref.isoformat()} is "
                    + ("not an earlier day" if ref >= date else "not a complete day under the output root")
                    + ' (metrics.composite standardise needs one; docs/metrics.md, "Composite metric")'
                )
                continue
            spreads = found
        terms, missing = [], []
        for comp, key, scale_it in zip(c.components, keys, scaled, strict=True):
            scale = spreads.get(key, math.nan) if scale_it else 1.0
            if not (math.isfinite(scale) and scale > 0):
                missing.append(comp.metric)
            terms.append(Term(key[0], key[1], comp.weight, scale))
        if missing:
            notes.append(
                f"composite {c.name} not computed: no usable per-user spread of {missing} on its reference day "
                f"{reference_day(c, date).isoformat()} (no user_avg row in slice all, fewer than 2 users, or a "
                "spread of 0)"
            )
            continue
        ready.append(Composite(c.name, tuple(terms)))
    return ready, notes
