"""The checks of an experiment (the ``experiment_checks`` rows, :class:`~.tables.Check`): sample-ratio mismatch
(:func:`srm_check`), users with several variants (:func:`multiple_assignment_check`), whether a variant met its
control (:func:`compared_check`), the layers' independence (:func:`layer_checks`), and the business rules they
make (:func:`srm_rules`).  The tests themselves are :mod:`recsys_spark.kernels.assignment_checks`'.
docs/experiments.md, "Checks".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.experiments.tables import LAYER, VARIANTS, Check
from recsys_spark.kernels.assignment_checks import independence_test, srm_test
from recsys_spark.schema import ALL, SLICE
from recsys_spark.steps.rules import RuleResult


def srm_check(experiment: str, users: Mapping[str, int], weights: Mapping[str, float], threshold: float) -> Check:
    """SRM of one experiment: counted users per variant against ``experiments.weights`` (default equal).

    With fewer than two variants or no counted user there is nothing to test: the check does not pass,
    with no statistic and no p-value (``detail`` starts with ``not tested``).
    """
    planned = {key.split("/", 1)[1]: w for key, w in weights.items() if key.split("/", 1)[0] == experiment}
    variants = sorted(set(users) | set(planned))
    w = [planned.get(v, 0.0) for v in variants] if planned else None
    r = srm_test([users.get(v, 0) for v in variants], w)
    split = ", ".join(f"{v}={users.get(v, 0)}" for v in variants)
    plan = ", ".join(f"{v}={planned.get(v, 0.0):g}" for v in variants) if planned else "equal"
    if math.isnan(r.p_value):  # one arm or no user: no split to test, and no p = 1 that reads as "ok"
        return Check(
            experiment,
            "srm",
            None,
            None,
            False,
            f"not tested: users {split or 'none'}; planned {plan}: needs counted users and two variants",
        )
    return Check(
        experiment,
        "srm",
        r.statistic,
        r.p_value,
        bool(r.p_value >= threshold),
        f"users {split}; planned {plan}; fails below p={threshold:g}",
    )


def compared_check(experiment: str, users: Mapping[str, int], control: str, reason: str | None) -> Check:
    """Whether a variant met its control: ``statistic`` = counted users; fails with ``reason``
    (:func:`~recsys_spark.kernels.assignment_checks.why_not_compared`) when nothing was compared."""
    others = ", ".join(f"{v}={n}" for v, n in sorted(users.items()) if v != control)
    detail = reason or f"{control}={users.get(control, 0)} compared with {others}"
    return Check(experiment, "compared", float(sum(users.values())), None, reason is None, detail)


def multiple_assignment_check(experiment: str, excluded: int, counted: int) -> Check:
    """Users with several variants of the experiment: ``statistic`` = the ``excluded`` users, passes only at 0;
    ``detail`` gives their share of the assigned users with a valid row (``excluded`` + ``counted``)."""
    share = excluded / (excluded + counted) if excluded + counted else 0.0
    return Check(
        experiment,
        "multiple_assignment",
        float(excluded),
        None,
        excluded == 0,
        f"{excluded} user(s) with several variants excluded ({share:.4%} of assigned exposed users)",
    )


def layer_checks(users: DataFrame, layers: Mapping[str, str], threshold: float) -> list[Check]:
    """Chi-square test of independence of the variants of users in both layers, per pair of layers.

    ``users``: the day's ``experiment_users`` rows (one per slice and user, with the ``variants``
    map); only the ``all`` slice is read.  A user's cell in a layer is its (experiment, variant);
    users with several cells in one layer, or excluded for several variants, are left out.
    """
    names = sorted(set(layers.values()))
    if len(names) < 2:
        return []
    layer_of = F.create_map(*[F.lit(x) for item in sorted(layers.items()) for x in item])
    # a user's (layer, cell) pairs come from its own row's map: no aggregation by user, no shuffle;
    # the layers where it has exactly one cell, and every pair of those, are computed in the row
    cells = users.where(F.col(SLICE) == ALL).select(
        F.filter(
            F.transform(
                F.filter(F.map_entries(VARIANTS), lambda e: e["value"].isNotNull()),  # not excluded
                lambda e: F.struct(
                    layer_of[e["key"]].alias(LAYER), F.concat_ws("/", e["key"], e["value"]).alias("cell")
                ),
            ),
            lambda c: c[LAYER].isNotNull(),
        ).alias("cells")
    )
    single = F.filter("cells", lambda a: F.size(F.filter("cells", lambda b: b[LAYER] == a[LAYER])) == 1)
    pair = F.flatten(
        F.transform(
            single,
            lambda a: F.transform(
                F.filter(single, lambda b: a[LAYER] < b[LAYER]),
                lambda b: F.struct(
                    a[LAYER].alias("la"), a["cell"].alias("ca"), b[LAYER].alias("lb"), b["cell"].alias("cb")
                ),
            ),
        )
    )
    pairs = cells.select(F.explode(pair).alias("p")).groupBy("p.la", "p.ca", "p.lb", "p.cb").count().collect()
    out = []
    for i, la in enumerate(names):
        for lb in names[i + 1 :]:
            counts = {(r["ca"], r["cb"]): r["count"] for r in pairs if r["la"] == la and r["lb"] == lb}
            ra, cb = sorted({k[0] for k in counts}), sorted({k[1] for k in counts})
            table = np.array([[counts.get((x, y), 0) for y in cb] for x in ra], dtype=np.float64).reshape(
                len(ra), len(cb)
            )
            r = independence_test(table)
            out.append(
                Check(
                    None,
                    "layer_independence",
                    r.statistic,
                    r.p_value,
                    bool(r.p_value >= threshold),
                    f"layers {la} x {lb}: {int(table.sum())} users in both, {len(ra)}x{len(cb)} cells, "
                    f"df={r.df}; fails below p={threshold:g}",
                )
            )
    return out


def srm_rules(checks: Sequence[Check], severity: str, threshold: float) -> list[RuleResult]:
    """The experiments' business rules, of severity ``experiments.srm_severity``.

    An SRM check is ``experiment_srm:<experiment>`` (its ``rate`` is the p-value: unlike other rules it
    passes at or above the threshold; an SRM not tested has none and fails); a ``compared`` check is
    ``experiment_compared:<experiment>``, which fails when nothing was compared (its example: why).
    """
    rules = []
    for c in checks:
        if c.check == "srm":
            rate, limit = c.p_value, threshold
        elif c.check == "compared":
            rate, limit = None, None
        else:
            continue
        rules.append(
            RuleResult(
                f"experiment_{c.check}:{c.experiment}",
                severity,
                0 if c.passed else 1,
                rate,
                limit,
                c.passed,
                [c.detail],
            )
        )
    return rules


def mismatched(checks: Sequence[Check]) -> list[str]:
    """The experiments whose SRM test ran and failed (an SRM not tested is no mismatch)."""
    return [str(c.experiment) for c in checks if c.check == "srm" and not c.passed and c.p_value is not None]
