"""The 2x2 interaction contrast (recsys_spark.kernels.interactions): by hand, and against statsmodels' OLS
``y ~ a * b`` with the HC2 variance, the user as the unit (docs/experiments.md, "Interactions")."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from recsys_spark.kernels.interactions import CELLS, Pair, interaction, pair_rows
from recsys_spark.kernels.metric_specs import parse_metric
from recsys_spark.kernels.sequential import sequential_half_width, sequential_p_value
from recsys_spark.kernels.sums import MeanStats, RatioStats

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _mean_cells(values: dict[tuple[int, int], list[float]]) -> dict[tuple[int, int], MeanStats]:
    return {c: MeanStats.from_values(np.asarray(v, dtype=float)) for c, v in values.items()}


def test_hand_computed_two_by_two() -> None:
    # cell means: a1b1 = 5, a0b1 = 2, a1b0 = 3, a0b0 = 1 -> (5 - 2) - (3 - 1) = 1
    # variances s²/n: (2/2) + (2/2) + (2/2) + (0/2) = 3 -> se = sqrt 3; z = 1/sqrt 3 = 0.57735 -> p = 0.56370
    cells = _mean_cells({(1, 1): [4, 6], (0, 1): [1, 3], (1, 0): [2, 4], (0, 0): [1, 1]})
    r = interaction(cells, 0.95, "fixed")
    assert r.contrast == pytest.approx(1.0)
    assert r.se == pytest.approx(math.sqrt(3.0))
    assert r.ci_low == pytest.approx(1.0 - 1.959963985 * math.sqrt(3.0))
    assert r.ci_high == pytest.approx(1.0 + 1.959963985 * math.sqrt(3.0))
    assert r.p_value == pytest.approx(0.563703, abs=1e-6)


def _ols_hc2(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    import statsmodels.formula.api as smf

    fit = smf.ols("y ~ a * b", data=pd.DataFrame({"y": y, "a": a, "b": b})).fit(cov_type="HC2")
    return float(fit.params["a:b"]), float(fit.bse["a:b"]), float(fit.pvalues["a:b"])


def _cells(rng: np.random.Generator, effect: float) -> dict[tuple[int, int], np.ndarray]:
    sizes = {(1, 1): 180, (0, 1): 220, (1, 0): 150, (0, 0): 260}
    return {
        (a, b): rng.lognormal(0.1 * a + 0.2 * b + effect * a * b, 0.8 + 0.2 * a, size=n) for (a, b), n in sizes.items()
    }


@pytest.mark.parametrize("effect", [0.0, 0.3])
def test_mean_metric_equals_statsmodels_ols_hc2(effect: float) -> None:
    rng = np.random.default_rng(43)
    values = _cells(rng, effect)
    r = interaction({c: MeanStats.from_values(v) for c, v in values.items()}, 0.95, "fixed")
    y = np.concatenate(list(values.values()))
    a = np.concatenate([np.full(len(v), c[0]) for c, v in values.items()])
    b = np.concatenate([np.full(len(v), c[1]) for c, v in values.items()])
    coef, se, p = _ols_hc2(y, a, b)
    assert r.contrast == pytest.approx(coef, rel=1e-10)
    assert r.se == pytest.approx(se, rel=1e-10)
    assert r.p_value == pytest.approx(p, rel=1e-8)


def test_ratio_metric_equals_ols_on_the_per_user_linearisation() -> None:
    """A ratio of sums (clicks / exposures): the contrast of the four cells' ratios with the delta-method
    variances is OLS y ~ a * b (HC2) on each user's linearised value R_ab + (x − R_ab y)/ȳ_ab."""
    rng = np.random.default_rng(7)
    sizes = {(1, 1): 200, (0, 1): 240, (1, 0): 170, (0, 0): 300}
    ys, lin, a_, b_, cells = [], [], [], [], {}
    for (a, b), n in sizes.items():
        exposures = rng.poisson(6, size=n) + 1.0
        clicks = rng.binomial(exposures.astype(int), 0.1 + 0.02 * a + 0.01 * b + 0.03 * a * b).astype(float)
        cells[(a, b)] = {
            "users": n,
            "exposure_ctr_global|n": float(n),
            "exposure_ctr_global|x": clicks.sum(),
            "exposure_ctr_global|y": exposures.sum(),
            "exposure_ctr_global|xx": (clicks * clicks).sum(),
            "exposure_ctr_global|yy": (exposures * exposures).sum(),
            "exposure_ctr_global|xy": (clicks * exposures).sum(),
        }
        ratio = clicks.sum() / exposures.sum()
        lin.append(ratio + (clicks - ratio * exposures) / exposures.mean())
        ys.append(clicks)
        a_.append(np.full(n, a))
        b_.append(np.full(n, b))
    spec = parse_metric("exposure_ctr_global")
    rows = pair_rows([(Pair("l1", "e1", "t", "l2", "e2", "t"), cells)], [spec], "holm", 0.95, "fixed")
    assert len(rows) == 1
    coef, se, p = _ols_hc2(np.concatenate(lin), np.concatenate(a_), np.concatenate(b_))
    row = rows[0]
    assert row[9] == pytest.approx(coef, rel=1e-10)
    assert row[12] == pytest.approx(p, rel=1e-8)
    assert (row[11] - row[10]) / 2 == pytest.approx(1.959963985 * se, rel=1e-8)
    assert row[14] == sum(sizes.values())
    ratios = {c: cells[c]["exposure_ctr_global|x"] / cells[c]["exposure_ctr_global|y"] for c in CELLS}
    assert row[9] == pytest.approx(ratios[(1, 1)] - ratios[(0, 1)] - ratios[(1, 0)] + ratios[(0, 0)])
    stats = RatioStats(200.0, cells[(1, 1)]["exposure_ctr_global|x"], cells[(1, 1)]["exposure_ctr_global|y"], 0, 0, 0)
    assert stats.ratio == pytest.approx(ratios[(1, 1)])


def test_sequential_is_the_confidence_sequence_around_the_same_estimate() -> None:
    cells = _mean_cells({(1, 1): [4, 6, 5], (0, 1): [1, 3, 2], (1, 0): [2, 4, 3], (0, 0): [1, 1, 2]})
    fixed = interaction(cells, 0.95, "fixed")
    seq = interaction(cells, 0.95, "sequential", 5000.0)
    assert seq.contrast == fixed.contrast and seq.se == fixed.se
    w = sequential_half_width(fixed.se**2, 12, 0.95, 5000.0)
    assert seq.ci_high - seq.contrast == pytest.approx(w)
    assert seq.p_value == pytest.approx(sequential_p_value(fixed.contrast, fixed.se**2, 12, 0.95, 5000.0))


def test_a_cell_with_one_user_gives_no_row_and_holm_runs_over_the_pair() -> None:
    spec, other = parse_metric("ndcg@10_user_avg"), parse_metric("mrr_user_avg")

    def sums(values: list[float], one: bool = False) -> dict[str, float]:
        v = np.asarray(values, dtype=float)
        out = {"users": len(v)}
        for s in (spec, other):
            w = v[:1] if one and s is other else v
            out |= {f"{s.name}|n": len(w), f"{s.name}|x": w.sum(), f"{s.name}|xx": (w * w).sum()}
        return out

    cells = {(1, 1): sums([0.9, 0.8, 0.85]), (0, 1): sums([0.1, 0.2, 0.15]), (1, 0): sums([0.1, 0.2, 0.1])}
    cells[(0, 0)] = sums([0.1, 0.15, 0.2], one=True)
    rows = pair_rows([(Pair("l1", "e1", "t", "l2", "e2", "t"), cells)], [spec, other], "holm")
    assert [r[6] for r in rows] == ["ndcg"]  # mrr: one user in a cell, no variance: no row, not a zero
    assert rows[0][13] == rows[0][12]  # a family of one


def test_holm_over_the_rows_of_a_pair() -> None:
    rng = np.random.default_rng(3)
    specs = [parse_metric("ndcg@10_user_avg"), parse_metric("mrr_user_avg")]

    def cell() -> dict[str, float]:
        out: dict[str, float] = {"users": 50}
        for s in specs:
            v = rng.normal(size=50)
            out |= {f"{s.name}|n": 50, f"{s.name}|x": v.sum(), f"{s.name}|xx": (v * v).sum()}
        return out

    pairs = [(Pair("l1", "e1", v, "l2", "e2", "t"), {c: cell() for c in CELLS}) for v in ("t1", "t2")]
    rows = pair_rows(pairs, specs, "holm")
    from statsmodels.stats.multitest import multipletests

    expected = multipletests([r[12] for r in rows], method="holm")[1]
    assert [r[13] for r in rows] == pytest.approx(list(expected))
    assert len(rows) == 4


def test_cells_without_spread_and_a_cell_of_one_user() -> None:
    # every cell constant: se = 0; contrast 5 - 2 - 3 + 1 = 1 is sure (p = 0), a contrast of 0 has no p
    one = interaction(_mean_cells({(1, 1): [5, 5], (0, 1): [2, 2], (1, 0): [3, 3], (0, 0): [1, 1]}))
    assert (one.contrast, one.se, one.ci_low, one.ci_high, one.p_value) == (1.0, 0.0, 1.0, 1.0, 0.0)
    minus = interaction(_mean_cells({(1, 1): [5, 5], (0, 1): [2, 2], (1, 0): [3, 3], (0, 0): [-1, -1]}))
    assert (minus.contrast, minus.p_value) == (-1.0, 0.0)
    zero = interaction(_mean_cells({(1, 1): [5, 5], (0, 1): [2, 2], (1, 0): [3, 3], (0, 0): [0, 0]}))
    assert zero.contrast == 0.0 and math.isnan(zero.p_value)
    lone = interaction(_mean_cells({(1, 1): [5, 6], (0, 1): [2, 3], (1, 0): [3, 4], (0, 0): [1]}))
    assert all(math.isnan(v) for v in (lone.contrast, lone.se, lone.ci_low, lone.ci_high, lone.p_value))


def _sums(specs, values: list[float]) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    out: dict[str, float] = {"users": len(v)}
    for s in specs:
        out |= {f"{s.name}|n": len(v), f"{s.name}|x": v.sum(), f"{s.name}|xx": (v * v).sum()}
    return out


def test_pair_rows_pass_the_inference_and_its_tuning_and_read_holm_by_default() -> None:
    spec = parse_metric("ndcg@10_user_avg")
    values = {(1, 1): [0.9, 0.7, 0.8], (0, 1): [0.1, 0.3, 0.2], (1, 0): [0.2, 0.1, 0.4], (0, 0): [0.1, 0.2, 0.1]}
    cells = {c: _sums([spec], v) for c, v in values.items()}
    pair = Pair("l1", "e1", "t", "l2", "e2", "t")
    (row,) = pair_rows([(pair, cells)], [spec], "holm", 0.9, "sequential", 100.0)
    want = interaction(_mean_cells(values), 0.9, "sequential", 100.0)
    assert row[9:13] == (
        pytest.approx(want.contrast),
        pytest.approx(want.ci_low),
        pytest.approx(want.ci_high),
        pytest.approx(want.p_value),
    )
    assert row[10] != pytest.approx(interaction(_mean_cells(values), 0.9, "sequential").ci_low)
    assert row[12] == pytest.approx(sequential_p_value(want.contrast, want.se**2, 12, 0.9, 100.0))
    assert row[11] - row[9] == pytest.approx(sequential_half_width(want.se**2, 12, 0.9, 100.0))
    assert pair_rows([(pair, cells)], [spec]) == pair_rows([(pair, cells)], [spec], "holm", 0.95, "fixed")


def test_pair_rows_skip_an_undefined_metric_whatever_its_place_and_a_sure_contrast_has_no_p_to_adjust() -> None:
    spec, other, flat = parse_metric("ndcg@10_user_avg"), parse_metric("mrr_user_avg"), parse_metric("auc_user_avg")
    values = {(1, 1): [0.9, 0.7, 0.8], (0, 1): [0.1, 0.3, 0.2], (1, 0): [0.2, 0.1, 0.4], (0, 0): [0.1, 0.2, 0.1]}
    cells = {c: _sums([spec], v) for c, v in values.items()}
    for c in CELLS:  # mrr: one user in (0, 0); auc: constant 0.5 everywhere (contrast 0, se 0, no p)
        n = 1 if c == (0, 0) else 3
        cells[c] |= {f"{other.name}|n": n, f"{other.name}|x": 0.5 * n, f"{other.name}|xx": 0.3 * n}
        cells[c] |= {f"{flat.name}|n": 3, f"{flat.name}|x": 1.5, f"{flat.name}|xx": 0.75}
    rows = pair_rows([(Pair("l1", "e1", "t", "l2", "e2", "t"), cells)], [other, flat, spec], "holm")
    assert [r[6] for r in rows] == ["auc", "ndcg"]
    assert rows[0][9] == 0.0 and rows[0][12] is None and rows[0][13] is None  # no p: none adjusted either
    assert rows[1][13] == pytest.approx(rows[1][12])  # holm over the one p there is
