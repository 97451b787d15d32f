"""Simulation: A/A days from the generator keep the false-positive rate and the coverage of zero near
nominal; a planted effect is detected.  Kernels only (no Spark): the per-user sums come from the
generator's tables with numpy, the way the Spark side gathers them.  Small days, few repeats: a few
seconds (the measured rates are in docs/experiments.md)."""

from __future__ import annotations

import datetime as dt
import itertools

import numpy as np
import pyarrow.compute as pc
import pytest
from helpers.arm_sums import arm_sums

from recsys_spark.kernels.experiments import compare
from recsys_spark.kernels.metric_specs import MetricSpec, parse_metric
from recsys_spark.synthetic import generate as gen
from recsys_spark.synthetic.assignments import experiment_members

USERS, EXPOSURES, DAYS, SPLITS, SEED = 1500, 30_000, 20, 20, 5
START = dt.date(2026, 11, 1)
SPECS = [
    parse_metric("exposure_ctr_global"),
    parse_metric("pv_ctr_global"),
    MetricSpec("ctr_user_avg", "ctr", None, "user_avg", "mean", "clicked", "exposures"),
]


def user_sums(pop: gen.Population, logs: gen.DayLogs) -> dict[str, np.ndarray]:
    """Per user of the population: exposures (shown items), requests, clicks (click events)."""
    width = pop.user_width

    def index(col) -> np.ndarray:
        return np.asarray(pc.cast(pc.utf8_slice_codeunits(col, 1, 1 + width), "int64"))

    ex = logs.exposures
    shown = np.asarray(pc.is_valid(ex["item_id"]))
    user = index(ex["user_id"])
    requests = np.zeros(pop.n_users)
    first = np.r_[True, np.asarray(ex["request_id"])[1:] != np.asarray(ex["request_id"])[:-1]]
    np.add.at(requests, user[first], 1)
    clicks = logs.clicks.filter(pc.equal(logs.clicks["event"], "click"))
    return {
        "exposures": np.bincount(user[shown], minlength=pop.n_users).astype(float),
        "requests": requests,
        "clicked": np.bincount(index(clicks["user_id"]), minlength=pop.n_users).astype(float),
    }


def aa_runs(
    users: int = USERS, exposures: int = EXPOSURES, days: int = DAYS, splits: int = SPLITS, seed: int = SEED
) -> tuple[dict[str, list[dict]], float]:
    """A/A tests: ``days`` generated days, ``splits`` random 50/50 splits of each day's users.

    Returns the result fields per metric, and the false-positive rate of the same CTR test with the
    impression as the unit (binomial).
    """
    pop = gen.make_population(users, 300, seed, START + dt.timedelta(days=days))
    rng = np.random.default_rng(seed)
    out: dict[str, list[dict]] = {s.name: [] for s in SPECS}
    naive = []
    for d in range(days):
        sums = user_sums(pop, gen.generate_day(pop, START + dt.timedelta(days=d), exposures, seed))
        active = sums["exposures"] + sums["requests"] > 0
        for _ in range(splits):
            treated = rng.random(users) < 0.5
            c, t = arm_sums(sums, active & ~treated, SPECS), arm_sums(sums, active & treated, SPECS)
            for spec in SPECS:
                out[spec.name].append(compare(c, t, spec))
            nc, nt = sums["exposures"][~treated].sum(), sums["exposures"][treated].sum()
            pc_, pt = sums["clicked"][~treated].sum() / nc, sums["clicked"][treated].sum() / nt
            se = np.sqrt(pc_ * (1 - pc_) / nc + pt * (1 - pt) / nt)
            naive.append(abs(pt - pc_) / se > 1.959963984540054)
    return out, float(np.mean(naive))


@pytest.fixture(scope="module")
def aa_results():
    return aa_runs()


@pytest.mark.parametrize("metric", [s.name for s in SPECS])
def test_aa_false_positives_and_coverage_near_nominal(aa_results, metric):
    rows = aa_results[0][metric]
    assert len(rows) == DAYS * SPLITS
    false_positive = np.mean([r["p_value"] < 0.05 for r in rows])
    covers_zero = np.mean([r["ci_low"] <= 0 <= r["ci_high"] for r in rows])
    # 400 tests (20 per day share the day's outcomes, so they are not independent): the binomial sd of
    # the rate at 5% would be 1.1%; the bounds allow about 3 sd.  Measured: 0.060-0.070, coverage 0.93-0.94.
    assert 0.02 <= false_positive <= 0.085, false_positive
    assert 0.915 <= covers_zero <= 0.98, covers_zero


def test_impressions_as_units_would_understate_the_error(aa_results):
    results, naive_rate = aa_results
    ours = np.mean([r["p_value"] < 0.05 for r in results["exposure_ctr_global"]])
    assert naive_rate > 2 * max(ours, 0.05), (naive_rate, ours)


def test_planted_effect_is_detected_and_the_aa_layer_is_not():
    """The generator's own assignments (synthetic/assignments.EXPERIMENTS): ranker_v2 raises its treatment's click
    logit (by 0.6, on half the users of its layer), ui_aa does nothing."""
    day = START + dt.timedelta(days=1)
    pop = gen.with_experiment_effects(gen.make_population(6000, 300, SEED, day), SEED)
    sums = user_sums(pop, gen.generate_day(pop, day, 120_000, SEED))
    active = sums["exposures"] + sums["requests"] > 0
    arms = gen.experiment_arms(pop, SEED)
    member, treated = experiment_members(pop, SEED)["ranker_v2"]
    spec = SPECS[0]
    effect = compare(arm_sums(sums, active & member & ~treated, SPECS), arm_sums(sums, active & treated, SPECS), spec)
    # with +0.3 on every user of the layer, measured over 5 days at this size: p <= 1e-5, rel_delta 0.18-0.30
    assert effect["p_value"] < 0.001 and effect["rel_delta"] > 0.1
    assert effect["ci_low"] > 0
    aa = compare(arm_sums(sums, active & ~arms["ui_aa"], SPECS), arm_sums(sums, active & arms["ui_aa"], SPECS), spec)
    assert aa["p_value"] > 0.05


if __name__ == "__main__":  # the larger run: python tests/kernels/test_experiments_simulation.py USERS DAYS SPLITS
    import sys

    n_users, n_days, n_splits = (int(a) for a in (sys.argv[1:] or ["20000", "50", "20"]))
    results, naive_rate = aa_runs(n_users, 20 * n_users, n_days, n_splits)
    for name, rows in results.items():
        print(
            f"{name}: false positives {np.mean([r['p_value'] < 0.05 for r in rows]):.4f}, coverage of 0 "
            f"{np.mean([r['ci_low'] <= 0 <= r['ci_high'] for r in rows]):.4f} over {len(rows)} A/A tests"
        )
    print(f"impression as the unit: false positives {naive_rate:.4f}")


def test_ratio_cuped_on_aa_days_keeps_the_rate_and_narrows_the_interval():
    """exposure_ctr with the previous day as covariate (the generator's users keep their click propensity)."""
    spec = SPECS[0]
    pop = gen.make_population(USERS, 300, SEED, START + dt.timedelta(days=DAYS + 1))
    rng = np.random.default_rng(SEED + 1)
    days = [
        user_sums(pop, gen.generate_day(pop, START + dt.timedelta(days=d), EXPOSURES, SEED)) for d in range(DAYS + 1)
    ]
    adjusted, plain = [], []
    for pre, sums in itertools.pairwise(days):
        active = sums["exposures"] > 0
        for _ in range(SPLITS):
            treated = rng.random(USERS) < 0.5
            arms = []
            for mask in (active & ~treated, active & treated):
                x, y = sums["clicked"][mask], sums["exposures"][mask]
                u, v = pre["clicked"][mask], pre["exposures"][mask]
                named = {
                    "n": len(x),
                    "x": x.sum(),
                    "y": y.sum(),
                    "xx": x @ x,
                    "yy": y @ y,
                    "xy": x @ y,
                    "cn": (v > 0).sum(),
                    "u": u.sum(),
                    "v": v.sum(),
                    "uu": u @ u,
                    "vv": v @ v,
                    "xu": x @ u,
                    "xv": x @ v,
                    "yu": y @ u,
                    "yv": y @ v,
                    "uv": u @ v,
                }
                arms.append({f"{spec.name}|{k}": val for k, val in named.items()})
            adjusted.append(compare(*arms, spec, cuped=True))
            plain.append(compare(*arms, spec))
    assert all(r["method"] == "delta_cuped" for r in adjusted)
    false_positive = np.mean([r["p_value"] < 0.05 for r in adjusted])
    assert 0.02 <= false_positive <= 0.085, false_positive
    ratio = np.median([a["se"] / p["se"] for a, p in zip(adjusted, plain, strict=True)])
    assert ratio < 0.95, ratio  # measured: 0.909 (variance -17 %), false positives 0.048
    print(f"ratio CUPED: false positives {false_positive:.3f}, median se ratio {ratio:.3f}")
