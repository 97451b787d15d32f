"""Which pairs of experiments get interaction rows (recsys_spark.experiments.interactions.interaction_rows), from the
cells' sums alone (no Spark): a pair without a control arm, a cell below experiments.min_users_per_cell."""

from __future__ import annotations

from recsys_spark.config import load_config
from recsys_spark.experiments.interactions import interaction_rows, interaction_rules
from recsys_spark.kernels.metric_specs import parse_metric

SPEC = parse_metric("mrr_user_avg")


def _cell(n: int, mean: float) -> dict[str, float]:
    return {"users": n, f"{SPEC.name}|n": n, f"{SPEC.name}|x": n * mean, f"{SPEC.name}|xx": n * (mean * mean + 0.01)}


def test_only_pairs_with_both_controls_and_enough_users_in_each_cell_get_rows():
    cfg = load_config(None, ["experiments.min_users_per_cell=50", "experiments.inference=fixed"])
    sums = {
        ("ea", "control", "eb", "control"): _cell(60, 0.3),
        ("ea", "treatment", "eb", "control"): _cell(60, 0.4),
        ("ea", "control", "eb", "treatment"): _cell(60, 0.4),
        ("ea", "treatment", "eb", "treatment"): _cell(60, 0.3),
        ("ea", "control", "ec", "A"): _cell(60, 0.3),  # ec has no control arm
        ("ea", "treatment", "ec", "B"): _cell(60, 0.3),
        ("ea", "control", "ed", "control"): _cell(60, 0.3),
        ("ea", "treatment", "ed", "control"): _cell(60, 0.3),
        ("ea", "control", "ed", "treatment"): _cell(60, 0.3),
        ("ea", "treatment", "ed", "treatment"): _cell(49, 0.3),  # one cell too small
    }
    layers = {"ea": "L1", "eb": "L2", "ec": "L3", "ed": "L4"}
    rows, notes = interaction_rows(sums, layers, [SPEC], cfg)
    assert [(r[1], r[4]) for r in rows] == [("ea", "eb")]
    assert abs(rows[0][9] + 0.2) < 1e-12  # 0.3 - 0.4 - 0.4 + 0.3
    assert notes == [
        "interactions ea x ec: not tested: no user of both in the control arm 'control' of ec",
        "interactions ea x ed: 1 variant pair(s) not tested: a cell has fewer than experiments.min_users_per_cell "
        "(50) users (smallest: ea=treatment, ed=treatment, 49 users)",
    ]
    rules, section = interaction_rules(rows, 0.05)
    assert [r.rule for r in rules] == ["experiment_interaction:ea:eb"]
    assert not rules[0].passed and rules[0].severity == "soft" and section["pairs"] == ["ea x eb"]
