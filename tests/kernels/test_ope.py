"""kernels/ope.py without Spark: obp's golden values through the numpy reference, hand-computed slates, the
delta method against its linearisation, clipping, and what is skipped."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import obp_golden as G
from helpers.ope_hand import HAND

from recsys_spark import registry
from recsys_spark.kernels import ope as K
from recsys_spark.kernels import ope_answer as A
from recsys_spark.kernels.sums import RatioStats


def _run(user, request, position, reward, p, lp, pp, e, q, d, clip=0.0, tau=10.0) -> K.RunSums:
    users, per, top = K.user_sums(user, request, position, reward, p, lp, pp, e, q, d, clip=clip, tau=tau)
    return K.RunSums.from_users(per, top)


def _values(s: K.RunSums, available=None) -> dict[str, float | None]:
    available = available or dict.fromkeys(K.NEEDS, True)
    rows, _ = K.estimate_all(s, available)
    return {r.estimator: r.value for r in rows}


def obd_run(candidate: str, tau: float = 10.0) -> K.RunSums:
    logged = G.obd_logged()
    target = G.obd_target(candidate)
    dist = np.zeros((80, 3))
    dist[target["item"], target["position"] - 1] = target["probability"]
    q = G.q_grid()
    item, k = logged["item"].to_numpy(), logged["position"].to_numpy() - 1
    n = len(logged)
    rounds = logged["round"].astype(str).to_numpy()
    return _run(
        rounds,
        rounds,
        k + 1,
        logged["click"].to_numpy(float),
        logged["propensity"].to_numpy(float),
        np.full(n, np.nan),
        np.full(n, np.nan),
        dist[item, k],
        q[item, k],
        (dist * np.nan_to_num(q)).sum(axis=0)[k],  # q̂ is known where the candidate shows the item
        tau=tau,
    )


@pytest.mark.parametrize("candidate", ["bts", "greedy"])
def test_the_item_level_estimators_equal_obps_on_the_open_bandit_dataset(candidate):
    golden = G.OBD[candidate]
    for tau in (10.0, 100.0):
        got = _values(obd_run(candidate, tau))
        for name, want in golden.items():
            estimator, _, at = name.partition("@")
            if at and float(at) != tau:
                continue
            if estimator == "replay" and candidate != "greedy":
                continue
            assert got[estimator] == pytest.approx(want, abs=1e-12), (candidate, name)
        assert got["logged"] == pytest.approx(G.OBD["logged_ctr"], abs=1e-15)


def test_the_recorded_golden_values_are_the_ones_the_script_wrote():
    recorded = json.loads((G.GOLDEN_DIR / "obp_values.json").read_text())
    assert recorded["obp"] == G.OBP_VERSION
    for candidate in ("bts", "greedy"):
        assert recorded["obd"][candidate] == G.OBD[candidate]
    assert recorded["obd"]["on_policy_bts_ctr"] == G.OBD["on_policy_bts_ctr"]
    assert recorded["slate"] == G.SLATE


def slate_run() -> K.RunSums:
    log = G.slate_log()
    target = G.slate_target()
    marginal = np.zeros((10, 3))
    marginal[target["item"], target["position"] - 1] = target["probability"]
    slate = log["slate"].astype(str).to_numpy()
    users = (log["slate"] % 37).astype(str).to_numpy()  # several lists per user: the value does not change
    n = len(log)
    return _run(
        users,
        slate,
        log["position"].to_numpy(),
        log["reward"].to_numpy(float),
        log["propensity"].to_numpy(float),
        log["list_propensity"].to_numpy(float),
        log["prefix_propensity"].to_numpy(float),
        marginal[log["item"], log["position"] - 1],
        np.full(n, np.nan),
        np.zeros(n),
    )


def test_the_slate_estimators_equal_obps_on_a_synthetic_slate_log():
    got = _values(slate_run())
    for name, want in G.SLATE.items():
        assert got[name] == pytest.approx(want, abs=1e-12), name


# --------------------------------------------------------------------------- a slate log by hand


def hand_run(clip: float = 0.0) -> K.RunSums:
    cols = list(zip(*HAND, strict=True))
    n = len(HAND)
    return _run(
        np.array(cols[0]),
        np.array(cols[1]),
        np.array(cols[2]),
        np.array(cols[3]),
        np.array(cols[4]),
        np.array(cols[5]),
        np.array(cols[6]),
        np.array(cols[7]),
        np.full(n, np.nan),
        np.zeros(n),
        clip=clip,
    )


def test_slate_estimators_by_hand():
    got = _values(hand_run())
    # slate IPS: r1: 0.5·1.0/0.1 = 5, rewards 1 -> 5; r2: 0 -> 0; r3: 0.4·0.5/0.05 = 4, rewards 2 -> 8
    assert got["slate_ips"] == pytest.approx((5 + 0 + 8) / 3)
    # IIPS: r1: 1·0.5/0.5 = 1; r2: 1·0.5/0.4 = 1.25; r3: 0.4/0.2 + 0.5/0.5 = 3
    assert got["iips"] == pytest.approx((1 + 1.25 + 3) / 3)
    # RIPS: r1: 1·0.5/0.5 = 1; r2: position 2's cascade 0·0.5/0.2 = 0; r3: 0.4/0.2 + 0.2/0.05 = 6
    assert got["rips"] == pytest.approx((1 + 0 + 6) / 3)
    assert got["logged_list"] == pytest.approx(4 / 3)
    # the item level on the same rows: w = 1, 4, 0, 1.25, 2, 1
    assert got["ips"] == pytest.approx((1 + 0 + 0 + 1.25 + 2 + 1) / 6)
    assert got["snips"] == pytest.approx((1 + 1.25 + 2 + 1) / (1 + 4 + 0 + 1.25 + 2 + 1))
    assert got["logged"] == pytest.approx(4 / 6)


def test_clipping_caps_every_importance_weight():
    got = _values(hand_run(clip=2.0))
    assert got["ips"] == pytest.approx((1 + 0 + 0 + 1.25 + 2 + 1) / 6)  # no rewarded weight above 2
    assert got["snips"] == pytest.approx((1 + 1.25 + 2 + 1) / (1 + 2 + 0 + 1.25 + 2 + 1))  # 4 -> 2
    assert got["slate_ips"] == pytest.approx((2 + 0 + 4) / 3)  # list weights 5 -> 2 and 4 -> 2
    assert got["rips"] == pytest.approx((1 + 0 + 2 + 2) / 3)  # r3's cascade weights 2 and 4 -> 2 and 2


def test_switch_dr_uses_the_model_above_tau_and_dr_below():
    # one user, two rows: weights 1 and 4; q̂ = 0.5 on both; d = 0.3 at both positions
    args = (
        np.array(["u", "u"]),
        np.array(["r", "r"]),
        np.array([1, 2]),
        np.array([1.0, 0.0]),
        np.array([0.5, 0.25]),
        np.array([np.nan, np.nan]),
        np.array([np.nan, np.nan]),
        np.array([0.5, 1.0]),
        np.array([0.5, 0.5]),
        np.array([0.3, 0.3]),
    )
    dr = _values(_run(*args, tau=10.0))["dr"]
    assert dr == pytest.approx((0.6 + 1 * 0.5 + 4 * -0.5) / 2)
    assert _values(_run(*args, tau=10.0))["switch_dr"] == pytest.approx(dr)
    assert _values(_run(*args, tau=2.0))["switch_dr"] == pytest.approx((0.6 + 0.5) / 2)  # the weight 4 is switched
    assert _values(_run(*args, tau=4.0))["switch_dr"] == pytest.approx(dr)  # w <= τ keeps its term (obp: iw <= tau)
    assert _values(_run(*args, tau=0.5))["switch_dr"] == pytest.approx(_values(_run(*args))["dm"])
    sndr = _values(_run(*args))["sndr"]
    assert sndr == pytest.approx(0.3 + (0.5 - 2.0) / 5)


# --------------------------------------------------------------------------- intervals


def test_one_ratio_is_the_delta_method_of_statistics_md():
    x = np.array([1.0, 0.0, 2.0, 1.0, 0.0, 1.0])
    y = np.array([10.0, 5.0, 8.0, 12.0, 3.0, 7.0])
    s = K.RunSums.from_users({"reward": x, "rows": y})
    got = K.ratio_sum([(1.0, "reward", "rows")], s)
    assert got.value == pytest.approx(0.1111111111)
    assert got.se**2 == pytest.approx(RatioStats.from_values(x, y).var_ratio, rel=1e-12)
    assert got.se**2 == pytest.approx(1.0827617741e-03, rel=1e-9)  # REFERENCES.md


def test_a_sum_of_ratios_has_the_variance_of_its_linearisation():
    rng = np.random.default_rng(3)
    n = 200
    cols = {name: rng.gamma(2.0, 1.0, n) for name in ("dm_p", "rows_p", "w_residual", "w")}
    s = K.RunSums.from_users(cols)
    got = K.ratio_sum(K.ESTIMATORS["sndr"].terms, s)
    a, b, c, d = (cols[k] for k in ("dm_p", "rows_p", "w_residual", "w"))
    ra, rc = a.sum() / b.sum(), c.sum() / d.sum()
    # influence of user u: (a_u − ra b_u) / b̄ + (c_u − rc d_u) / d̄; Var = sample var / n
    influence = (a - ra * b) / b.mean() + (c - rc * d) / d.mean()
    assert got.value == pytest.approx(ra + rc)
    assert got.se == pytest.approx(np.std(influence, ddof=1) / math.sqrt(n), rel=1e-10)


def test_the_user_is_the_unit_a_user_seen_twice_as_often_leaves_the_interval_as_it_was():
    s1 = hand_run()
    doubled = K.RunSums(s1.n, {k: 2 * v for k, v in s1.sums.items()}, {k: 4 * v for k, v in s1.prods.items()})
    for spec in K.ESTIMATORS.values():
        a, b = K.estimate(spec, s1), K.estimate(spec, doubled)
        assert a.value == pytest.approx(b.value) and (a.se or 0) == pytest.approx(b.se or 0), spec.name


def test_the_difference_to_the_logged_value_has_its_own_interval():
    s = hand_run()
    ips = K.estimate(K.ESTIMATORS["ips"], s)
    logged = K.estimate(K.ESTIMATORS["logged"], s)
    assert ips.delta == pytest.approx(ips.value - logged.value)
    assert ips.delta_se is not None and ips.delta_ci_low < ips.delta < ips.delta_ci_high
    assert logged.delta is None  # the baseline is not compared with itself


def test_no_unit_no_value_and_one_user_no_interval():
    empty = K.RunSums(0.0, {})
    assert K.estimate(K.ESTIMATORS["ips"], empty).value is None
    one = K.RunSums.from_users({"w_reward": np.array([1.0]), "rows_p": np.array([2.0])})
    got = K.estimate(K.ESTIMATORS["ips"], one)
    assert got.value == 0.5 and got.se is None and got.ci_method == "none"


# --------------------------------------------------------------------------- skipped, named, diagnosed


def test_an_estimator_without_its_input_is_skipped_and_says_why():
    rows, notes = K.estimate_all(hand_run(), {"propensity": True, "list_propensity": True})
    names = [r.estimator for r in rows]
    assert "ips" in names and "iips" in names and "dm" not in names and "replay" not in names
    assert any(n.startswith("dm skipped: the target has no q_hat") for n in notes)
    assert any(n.startswith("replay skipped: the candidate is not deterministic") for n in notes)
    assert any(n.startswith("rips skipped") for n in notes)


def test_every_estimator_and_diagnostic_has_a_registry_entry():
    assert list(K.ESTIMATORS) == list(registry.OPE_ESTIMATORS)
    assert list(K.DIAGNOSTICS) == list(registry.OPE_DIAGNOSTICS)
    assert set(K.BASELINE.values()) <= set(K.ESTIMATORS)


def test_diagnostics_by_hand():
    d = K.diagnostics(hand_run(), 0.25, 1.0)
    w = np.array([1, 4, 0, 1.25, 2, 1])
    assert d["effective_sample_size"] == pytest.approx(w.sum() ** 2 / (w**2).sum())
    assert d["max_weight"] == 4.0 and d["mean_weight"] == pytest.approx(w.mean())
    assert d["unseen_logged_share"] == pytest.approx(1 / 6)
    assert d["unsupported_target_share"] == 0.25 and d["rows_without_propensity"] == 0
    assert d["matched_rows"] == 1 and d["users"] == 2 and d["lists"] == 3
    assert d["rows"] == 6 and d["effective_sample_share"] == pytest.approx(w.sum() ** 2 / (w**2).sum() / 6)
    assert d["mean_target_mass"] == pytest.approx(hand_run().sum("mass") / 6) and hand_run().sum("mass") > 0
    assert list(d) == list(K.DIAGNOSTICS)


def test_diagnostics_without_rows_weights_or_masses_are_none_not_an_error():
    empty = K.diagnostics(K.RunSums(0.0, {}), None, None)
    assert empty["users"] == 0 and empty["rows"] == 0 and empty["rows_without_propensity"] == 0
    for name in ("effective_sample_size", "effective_sample_share", "mean_weight", "unseen_logged_share"):
        assert empty[name] is None, name
    assert empty["unsupported_target_share"] is None and empty["mean_target_mass"] is None
    # rows without propensities: no weight, no share; a zero target mass gives no unsupported share
    d = K.diagnostics(K.RunSums(1.0, {"rows": 4.0, "unseen": 1.0, "mass": 2.0}), 0.5, 0.0)
    assert d["rows_without_propensity"] == 4.0 and d["effective_sample_size"] is None
    assert d["effective_sample_share"] is None and d["mean_weight"] is None
    assert d["unsupported_target_share"] is None and d["unseen_logged_share"] == 0.25 and d["mean_target_mass"] == 0.5
    # weights below 1 in total: the effective sample size is still Σw² > 0's
    d = K.diagnostics(K.RunSums(1.0, {"rows": 2.0, "rows_p": 2.0, "w": 0.5, "w_sq": 0.25}), 0.0, 1.0)
    assert d["effective_sample_size"] == pytest.approx(1.0) and d["effective_sample_share"] == pytest.approx(0.5)
    assert d["mean_weight"] == 0.25 and d["unsupported_target_share"] == 0.0
    # propensities but every weight 0 (the candidate shows none of the logged items): no effective sample
    d = K.diagnostics(K.RunSums(1.0, {"rows": 2.0, "rows_p": 2.0, "w": 0.0, "w_sq": 0.0}), 0.5, 2.0)
    assert d["effective_sample_size"] is None and d["effective_sample_share"] is None and d["mean_weight"] == 0.0
    assert d["unsupported_target_share"] == 0.25


def test_merged_parts_are_the_whole_run_whatever_the_split():
    # the Spark layer merges per-partition RunSums: any split of the users, merged in any order, gives the
    # whole run's sums, products, user count and largest weight (None when no part has one)
    rng = np.random.default_rng(11)
    cols = {name: rng.gamma(2.0, 1.0, 9) for name in ("reward", "rows", "w_reward", "rows_p")}
    whole = K.RunSums.from_users({**cols, "rows_p": np.r_[cols["rows_p"][:4], np.zeros(5)]}, 7.5)
    parts = [
        K.RunSums.from_users({k: v[:4] for k, v in cols.items()}, 3.0),
        K.RunSums.from_users({k: v[4:] for k, v in cols.items() if k != "rows_p"}, 7.5),  # a sum one part lacks: 0
        K.RunSums.from_users({}, None),
    ]
    for merged in (parts[0].merge(parts[1]).merge(parts[2]), parts[2].merge(parts[1].merge(parts[0]))):
        assert merged.n == whole.n == 9 and merged.max_weight == 7.5
        assert set(merged.sums) == set(whole.sums) and set(merged.prods) == set(whole.prods)
        for k, v in whole.sums.items():
            assert merged.sum(k) == pytest.approx(v, rel=1e-12), k
        for (a, b), v in whole.prods.items():
            assert merged.prod(a, b) == pytest.approx(v, rel=1e-12) and merged.prod(b, a) == merged.prod(a, b)
    assert K.RunSums(0.0, {}).merge(K.RunSums(0.0, {})).max_weight is None
    assert parts[0].merge(K.RunSums(2.0, {"reward": 1.0}, {}, None)).max_weight == 3.0
    # parts built by hand may hold different sums and products: a missing one is 0 on that side
    x = K.RunSums(1.0, {"reward": 1.0}, {("reward", "reward"): 1.0})
    y = K.RunSums(2.0, {"rows": 2.0}, {("rows", "rows"): 4.0}, 1.5)
    for m in (x.merge(y), y.merge(x)):
        assert m.n == 3.0 and m.max_weight == 1.5
        assert m.sums == {"reward": 1.0, "rows": 2.0}
        assert m.prods == {("reward", "reward"): 1.0, ("rows", "rows"): 4.0}


def test_user_sums_by_hand_rows_without_propensity_masses_and_the_cascade_in_position_order():
    # u: one request, rows logged out of position order (3, 1, 2), the middle row without a propensity;
    # v: one row whose weight 10.5 is past switch-DR's default tau = 10
    nan = np.nan
    args = (
        np.array(["u", "u", "u", "v"]),
        np.array(["r", "r", "r", "s"]),
        np.array([3, 1, 2, 1]),
        np.array([1.0, 0.0, 1.0, 1.0]),  # reward
        np.array([0.5, nan, 0.25, 1 / 10.5]),  # propensity
        np.full(4, nan),  # no list propensity: no SIPS
        np.array([0.2, 0.5, 0.4, 1.0]),  # prefix propensity (row order)
        np.array([1.0, 1.0, 0.5, 1.0]),  # e
        np.array([0.3, nan, 0.2, 0.0]),  # q
        np.array([0.4, 0.1, 0.2, 0.0]),  # d
    )
    users, per, top = K.user_sums(*args, mass=np.array([0.5, 1.0, 0.25, 1.0]))
    assert users.tolist() == ["u", "v"] and top == pytest.approx(10.5)
    u = {k: float(v[0]) for k, v in per.items()}
    assert (u["rows"], u["rows_p"], u["reward"], u["mass"]) == (3.0, 2.0, 2.0, 1.75)
    assert u["dm"] == pytest.approx(0.7) and u["dm_p"] == pytest.approx(0.6)
    assert (u["match"], u["match_reward"], u["unseen"]) == (2.0, 1.0, 0.0)
    # weights 2, (none), 0.5 / 0.25 = 2; residuals 0.7, -, 0.8
    assert (u["w"], u["w_sq"], u["w_reward"]) == (4.0, 8.0, 4.0)
    assert u["w_residual"] == pytest.approx(3.0) and u["switch_residual"] == pytest.approx(3.0)
    assert (u["lists"], u["list_reward"], u["lists_sips"], u["sips"], u["lists_iips"]) == (1.0, 2.0, 0.0, 0.0, 0.0)
    # in position order: e 1, 0.5, 1 -> cumprod 1, 0.5, 0.5 over prefix propensities 0.5, 0.4, 0.2; rewards 0, 1, 1
    assert u["lists_rips"] == 1.0 and u["rips"] == pytest.approx(0.5 / 0.4 + 0.5 / 0.2)
    v = {k: float(x[1]) for k, x in per.items()}
    assert v["w_residual"] == pytest.approx(10.5) and v["switch_residual"] == 0.0
    # clipping at 0.5 (below 1): every weight and cascade term capped
    _, clipped, top = K.user_sums(*args, clip=0.5)
    assert top == 0.5 and clipped["w"][0] == 1.0 and clipped["w_sq"][0] == 0.5
    assert clipped["rips"][0] == pytest.approx(1.0) and clipped["mass"][0] == 3.0  # mass defaults to 1 a row
    # no propensity at all: no weight, no largest weight
    none = (*args[:4], np.full(4, nan), *args[5:])
    _, per, top = K.user_sums(*none)
    assert top is None and per["rows_p"].sum() == 0 and per["w"].sum() == 0 and per["lists_iips"].sum() == 0


# --------------------------------------------------------------------------- sums that overflow a double


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_a_weight_whose_square_overflows_gives_no_interval_and_a_note_never_se_0():
    """Two users: one clicked row of weight 3e156 (a propensity of about 1e-160), one row of weight 1 not
    clicked.  IPS = (3e156 + 0) / 2 = 1.5e156 is a number; Σ_u (w y)² = 9e312 is not a double, so its
    interval is none (the old code read the NaN quadratic form as within rounding: se 0, [1.5e156, 1.5e156])."""
    s = K.RunSums.from_users(
        {
            "rows": np.array([1.0, 1.0]),
            "reward": np.array([1.0, 0.0]),
            "rows_p": np.array([1.0, 1.0]),
            "w": np.array([3e156, 1.0]),
            "w_reward": np.array([3e156, 0.0]),
        }
    )
    assert math.isinf(s.prod("w_reward", "w_reward"))
    ips = K.estimate(K.ESTIMATORS["ips"], s)
    assert ips.value == pytest.approx(1.5e156) and ips.n == 2
    assert (ips.se, ips.ci_low, ips.ci_high, ips.ci_method) == (None, None, None, "none")
    assert (ips.delta_se, ips.delta_ci_low, ips.delta_ci_high) == (None, None, None)  # no significant difference
    assert ips.note == "Σ w_reward·w_reward = inf"
    snips = K.estimate(K.ESTIMATORS["snips"], s)  # (3e156 + 0) / (3e156 + 1) = 1 - 1/3e156: a value, no interval
    assert snips.value == pytest.approx(1.0) and snips.se is None and snips.note
    logged = K.estimate(K.ESTIMATORS["logged"], s)  # 1/2 with users (1, 1), (0, 1): se = sd(1, 0)/sqrt(2) = 0.5
    assert logged.note is None and logged.se == pytest.approx(0.5)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_a_weight_that_is_itself_infinite_gives_no_value():
    """e / p with p = 1e-320 (a subnormal) is inf: Σ w y is inf, so IPS has no value at all."""
    s = K.RunSums.from_users(
        {"rows": np.ones(2), "rows_p": np.ones(2), "w": np.array([math.inf, 1.0]), "w_reward": np.array([math.inf, 0])}
    )
    ips = K.estimate(K.ESTIMATORS["ips"], s)
    assert ips.value is None and ips.se is None and ips.note == "Σ w_reward = inf"


def test_the_note_is_kept_only_for_sums_that_overflow():
    """The hand-computed interval of one ratio is untouched: users (x, y) = (1, 1), (3, 1): V = 2, the
    per-user x − V y = −1, 1, so Var = 2 / (1 · 2 · 1) = 1, se 1."""
    s = K.RunSums.from_users({"w_reward": np.array([1.0, 3.0]), "rows_p": np.array([1.0, 1.0])})
    got = K.ratio_sum([(1.0, "w_reward", "rows_p")], s)
    assert (got.value, got.se, got.note) == (2.0, pytest.approx(1.0), None)


# --------------------------------------------------------------------------- the recommended estimate


def _e(name: str, value: float, half: float, delta: float = 0.01) -> K.Estimate:
    return K.Estimate(
        name,
        "item",
        value,
        half / 1.96,
        value - half,
        value + half,
        "delta",
        500,
        5000,
        delta,
        half / 1.96,
        delta - half,
        delta + half,
    )


GOOD = {
    "rows": 5000.0,
    "rows_without_propensity": 0.0,
    "effective_sample_size": 2000.0,
    "max_weight": 10.0,
    "mean_weight": 1.0,
    "unsupported_target_share": 0.0,
    "mean_target_mass": 1.0,
}


def test_the_recommendation_is_the_narrowest_interval_that_agrees_with_every_wider_one():
    """SLOPE: ips (widest), snips, dr, sndr agree within their intervals: sndr, the narrowest, is recommended,
    with its interval and its difference to the logged policy."""
    rows = [_e("ips", 0.100, 0.030), _e("snips", 0.104, 0.020), _e("dr", 0.098, 0.012), _e("sndr", 0.099, 0.010)]
    got = A.recommend(rows, GOOD)
    assert got["estimator"] == "sndr"
    assert (got["value"], got["ci_low"], got["ci_high"]) == (0.099, 0.099 - 0.010, 0.099 + 0.010)
    assert (got["delta"], got["delta_ci_low"], got["delta_ci_high"]) == (0.01, 0.01 - 0.010, 0.01 + 0.010)
    assert got["reason"].startswith(
        "sndr: the narrowest interval that agrees with every wider one (ips, snips, dr, sndr)"
    )
    assert "effective sample 2,000 rows" in got["reason"]
    assert set(got) == set(A.RECOMMENDED_FIELDS)


def test_a_narrower_estimator_that_disagrees_beyond_the_intervals_stops_the_rule_and_is_named():
    """SNIPS 0.110 against DR 0.062 (the issue's demo): dr disagrees with the wider ips beyond their intervals, so
    the rule keeps the wider one and says which disagreed."""
    rows = [_e("ips", 0.070, 0.010), _e("dr", 0.030, 0.004)]  # |0.07 − 0.03| = 0.04 > 0.004 + 1.449 · 0.010
    got = A.recommend(rows, GOOD)
    assert got["estimator"] == "ips"
    assert "dr (0.03) disagrees with ips (0.07) beyond their intervals" in got["reason"]
    kept, rejected = A.slope(rows)
    assert [e.estimator for e in kept] == ["ips"] and rejected is not None and rejected.estimator == "dr"


def test_a_candidate_that_leaves_positions_empty_is_not_answered_by_snips_or_sndr():
    """With mean_target_mass 0.6 snips and sndr estimate per filled position (0.110 against dr's 0.062 per
    logged position): never recommended, and the reason says why."""
    rows = [_e("ips", 0.060, 0.010), _e("snips", 0.110, 0.002), _e("dr", 0.062, 0.005), _e("sndr", 0.108, 0.001)]
    got = A.recommend(rows, GOOD | {"mean_target_mass": 0.6})
    assert got["estimator"] == "dr"
    assert "snips and sndr left out: the candidate leaves positions empty" in got["reason"]
    filled = A.recommend(rows, GOOD)  # every position filled: snips is compared, and disagrees with ips and dr
    assert filled["estimator"] == "dr" and "snips (0.11) disagrees with dr (0.062)" in filled["reason"]


@pytest.mark.parametrize(
    "change, words",
    [
        ({"rows_without_propensity": 5000.0}, "no logged row has a propensity: nothing weighs the logs"),
        ({"unsupported_target_share": 0.10}, "the logs show only 90.0% of the candidate's choices"),
        ({"effective_sample_size": 80.0}, "effective sample of 80 rows (at least 100 needed)"),
        ({"effective_sample_size": None}, "effective sample of none rows"),
        ({"max_weight": 400.0}, "one logged row carries 8.0% of the total importance weight"),
    ],
)
def test_no_recommendation_when_support_the_effective_sample_or_one_weight_say_the_logs_cannot_answer(change, words):
    got = A.recommend([_e("ips", 0.1, 0.01), _e("dr", 0.1, 0.005)], GOOD | change)
    assert got["estimator"] is None and got["value"] is None and got["delta_ci_high"] is None
    assert words in got["reason"]


def test_no_recommendation_without_an_interval_or_with_list_level_estimates_only():
    overflowed = K.Estimate("ips", "item", 1e156, None, None, None, "none", 5, 50, note="Σ w_reward·w_reward = inf")
    got = A.recommend([overflowed], GOOD)
    assert got["estimator"] is None and "has an interval" in got["reason"]
    slate = K.Estimate("slate_ips", "list", 1.2, 0.1, 1.0, 1.4, "delta", 5, 50)
    got = A.recommend([slate], GOOD | {"rows_without_propensity": 5000.0})
    assert got["estimator"] is None and "only the list-level estimates ran (slate_ips" in got["reason"]
    assert A.recommend([], GOOD)["estimator"] is None  # ope.estimators chose none of them


def test_the_recommendation_on_the_open_bandit_dataset_holds_the_on_policy_value():
    """The Bernoulli TS candidate on obp's sample (docs/ope.md, "How far from the truth"): a recommendation
    whose interval holds the policy's own logged CTR, 0.0042."""
    s = obd_run("bts")
    rows, _ = K.estimate_all(s, dict.fromkeys(K.NEEDS, True) | {"deterministic": False})
    got = A.recommend(rows, K.diagnostics(s, 0.0, 1.0))
    assert got["estimator"] == "dr"  # switch_dr's narrower interval leaves out the model's error: not a candidate
    assert got["ci_low"] <= 0.0042 <= got["ci_high"], got
