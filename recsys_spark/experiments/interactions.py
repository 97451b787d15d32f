"""Layers that interact (docs/experiments.md, "Interactions"): the ``experiment_interactions`` rows of every pair of
experiments in different layers, and the soft rule that flags a significant interaction.

The pairs come from the day's ``experiment_users`` rows (``all`` slice): a user assigned to two experiments of
different layers (the assignments' ``layer``) is in one cell (its variant of A, its variant of B) of that pair.
One aggregation by (experiment A, variant A, experiment B, variant B) of those rows gives every metric's sums per
cell (:func:`.arm_sums.spec_sums`, the experiments' own); only these small sums reach the driver, where
:func:`recsys_spark.kernels.interactions.pair_rows` makes the rows.  No pass over the exposures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.config import Config
from recsys_spark.experiments.arm_sums import spec_sums
from recsys_spark.experiments.tables import VARIANTS
from recsys_spark.kernels.interactions import CELLS, Pair, pair_rows
from recsys_spark.kernels.metric_specs import MetricSpec
from recsys_spark.kernels.rules import RuleResult
from recsys_spark.registry import key
from recsys_spark.schema import ALL, SLICE

INTERACTIONS_TABLE = "experiment_interactions"
#: the cell of a pair: (experiment A, its variant, experiment B, its variant)
CellKey = tuple[str, str, str, str]


def cell_sums(
    users: DataFrame, layers: Mapping[str, str], specs: Sequence[MetricSpec]
) -> dict[CellKey, dict[str, Any]]:
    """{(experiment A, variant A, experiment B, variant B): {"users": n, f"{metric}|{part}": sum}} over the users
    of the ``all`` slice in both (A's layer before B's by name; a user with several variants of one experiment
    is in neither of its cells).  One aggregation; a few rows per pair reach the driver."""
    if len(set(layers.values())) < 2:
        return {}
    lay = F.create_map(*[F.lit(x) for e, layer in sorted(layers.items()) for x in (e, layer)])
    entries = F.filter(F.map_entries(VARIANTS), lambda e: e["value"].isNotNull() & lay[e["key"]].isNotNull())
    pairs = F.flatten(
        F.transform(
            entries,
            lambda a: F.transform(
                F.filter(entries, lambda b: lay[a["key"]] < lay[b["key"]]),
                lambda b: F.struct(
                    a["key"].alias("ea"), a["value"].alias("va"), b["key"].alias("eb"), b["value"].alias("vb")
                ),
            ),
        )
    )
    sums = [c for c in users.columns if c not in (SLICE, VARIANTS)]
    rows = users.where((F.col(SLICE) == ALL) & F.col(VARIANTS).isNotNull()).select(F.explode(pairs).alias("_p"), *sums)
    rows = rows.select("_p.ea", "_p.va", "_p.eb", "_p.vb", *sums)
    aggs = [F.count(F.lit(1)).alias("users")] + [a for spec in specs for a in spec_sums(spec, False)]
    out = {}
    for row in rows.groupBy("ea", "va", "eb", "vb").agg(*aggs).collect():
        d = row.asDict()
        out[(d.pop("ea"), d.pop("va"), d.pop("eb"), d.pop("vb"))] = d
    return out


def interaction_rows(
    sums: Mapping[CellKey, Mapping[str, Any]], layers: Mapping[str, str], specs: Sequence[MetricSpec], cfg: Config
) -> tuple[list[tuple], list[str]]:
    """(the ``experiment_interactions`` rows, notes): each pair of experiments, each variant of A against A's
    control crossed with each variant of B against B's, when each of the four cells has at least
    ``experiments.min_users_per_cell`` users (else a note says which pair was left out and its smallest cell).
    ``p_adjusted``: ``experiments.correction`` over each pair's rows."""
    ex = cfg.experiments
    control = ex.control
    confidence = float(getattr(getattr(cfg, "stats", None), "confidence", 0.95))
    rows: list[tuple] = []
    notes: list[str] = []
    for ea, eb in sorted({(k[0], k[2]) for k in sums}):
        mine = {(va, vb): d for (a, va, b, vb), d in sums.items() if a == ea and b == eb}
        variants_a = sorted({va for va, _ in mine if va != control})
        variants_b = sorted({vb for _, vb in mine if vb != control})
        without = [e for e, v in ((ea, {va for va, _ in mine}), (eb, {vb for _, vb in mine})) if control not in v]
        if without:  # its `compared` check says why; a contrast needs both controls
            notes.append(
                f"interactions {ea} x {eb}: not tested: no user of both in the control arm '{control}' of "
                f"{' and '.join(without)}"
            )
            continue
        tested: list[tuple[Pair, dict[tuple[int, int], Mapping[str, Any]]]] = []
        smallest: list[tuple[int, str]] = []
        for va in variants_a:
            for vb in variants_b:
                names = {(1, 1): (va, vb), (0, 1): (control, vb), (1, 0): (va, control), (0, 0): (control, control)}
                counts = {c: int(mine[v]["users"]) if v in mine else 0 for c, v in names.items()}
                if min(counts.values()) < ex.min_users_per_cell:
                    low = min(names, key=lambda c: counts[c])
                    smallest.append((counts[low], f"{ea}={names[low][0]}, {eb}={names[low][1]}"))
                    continue
                pair = Pair(layers[ea], ea, va, layers[eb], eb, vb)
                tested.append((pair, {c: mine[names[c]] for c in CELLS}))
        if smallest:
            n, where = min(smallest)
            notes.append(
                f"interactions {ea} x {eb}: {len(smallest)} variant pair(s) not tested: a cell has fewer than "
                f"experiments.min_users_per_cell ({ex.min_users_per_cell}) users (smallest: {where}, {n} users)"
            )
        rows += pair_rows(tested, specs, ex.correction, confidence, ex.inference, ex.sequential_tuning)
    return rows, notes


def _line(row: Sequence[Any]) -> str:
    """A flagged row in words: ``ranker_v2=treatment x ui_aa=treatment: exposure_ctr_global contrast +0.012
    [+0.004, +0.020], p_adjusted 0.003``."""
    _, ea, va, _, eb, vb, metric, k, aggregation, contrast, low, high, _, p_adjusted, _ = row
    bounds = f" [{low:+.4g}, {high:+.4g}]" if low is not None and high is not None else ""
    return (
        f"{ea}={va} x {eb}={vb}: {key(metric, k, aggregation)} contrast {contrast:+.4g}{bounds}, "
        f"p_adjusted {p_adjusted:.3g}"
    )


def interaction_rules(rows: Sequence[Sequence[Any]], alpha: float) -> tuple[list[RuleResult], dict[str, Any]]:
    """(the soft rules ``experiment_interaction:<experiment A>:<experiment B>``, one per pair with rows, and the
    summary's ``interactions`` section).  A rule fails when some row of the pair has ``p_adjusted`` < ``alpha``
    (1 − ``stats.confidence``): its violations are those rows, its rate the smallest ``p_adjusted`` (like the
    SRM rule it passes at or above its threshold), its examples the rows in words."""
    rules = []
    significant: list[str] = []
    for ea, eb in sorted({(r[1], r[4]) for r in rows}):
        mine = [r for r in rows if r[1] == ea and r[4] == eb]
        flagged = [r for r in mine if r[13] is not None and r[13] < alpha]
        ps = [r[13] for r in mine if r[13] is not None]
        lines = [_line(r) for r in flagged]
        significant += lines
        rules.append(
            RuleResult(
                f"experiment_interaction:{ea}:{eb}",
                "soft",
                len(flagged),
                min(ps) if ps else None,
                alpha,
                not flagged,
                lines[:5],
            )
        )
    pairs = sorted({f"{r[1]} x {r[4]}" for r in rows})
    return rules, {"pairs": pairs, "rows": len(rows), "significant": significant}
