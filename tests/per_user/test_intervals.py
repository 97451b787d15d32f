"""Intervals on the daily metrics table: the user is the unit (kernels and a full Spark run on a tiny day)."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest
from helpers.input_ddl import CLICK_DDL, DAY, EXPOSURE_DDL, T0
from scipy import stats as st

from recsys_spark.kernels.business import Measured, business_values
from recsys_spark.kernels.estimates import delta_interval
from recsys_spark.kernels.intervals import business_intervals, health_intervals, ratio_stats
from recsys_spark.kernels.moments import user_table_moments
from recsys_spark.kernels.sums import RatioStats
from recsys_spark.per_user.aggregate import aggregate_users

Z95 = 1.959963984540054

# per user: its requests, each (items shown, positions clicked)
SPEC = {
    "u1": [(3, [1]), (2, [])],
    "u2": [(4, [0, 2])],
    "u3": [(2, []), (2, [1]), (1, [0])],
    "u4": [(5, [])],
    "u5": [(3, [0, 1, 2])],
    "u6": [(1, []), (4, [3])],
}


def per_user(spec=SPEC):
    """Per-user arrays computed by hand from the spec: requests, exposures, clicks, lists, hits@3, relevant."""
    out = {k: [] for k in ("pv", "e", "c", "covered3", "ranked", "hits3", "rel", "hit1", "rr")}
    for requests in spec.values():
        ranked = [(n, clicked) for n, clicked in requests if clicked]
        out["pv"].append(len(requests))
        out["e"].append(sum(n for n, _ in requests))
        out["c"].append(sum(len(cl) for _, cl in requests))
        out["covered3"].append(sum(n >= 3 for n, _ in requests))
        out["ranked"].append(len(ranked))
        out["hits3"].append(sum(sum(p < 3 for p in cl) for _, cl in ranked))
        out["rel"].append(sum(len(cl) for _, cl in ranked))
        out["hit1"].append(np.mean([0 in cl for _, cl in ranked]) if ranked else np.nan)
        out["rr"].append(np.mean([1 / (min(cl) + 1) for _, cl in ranked]) if ranked else np.nan)
    return {k: np.array(v, dtype=float) for k, v in out.items()}


def wls_ratio_se(x: np.ndarray, y: np.ndarray) -> float:
    """Independent oracle: Σx/Σy is the WLS slope of x on y (no intercept, weights 1/y); its HC1 sandwich SE
    is the delta-method SE with n - 1 variances (statsmodels)."""
    import statsmodels.api as sm

    return float(sm.WLS(x, y, weights=1 / y).fit(cov_type="HC1").bse[0])


# --------------------------------------------------------------------------- kernels


def test_delta_se_equals_the_per_user_linearisation_and_statsmodels():
    u = per_user()
    s = RatioStats.from_values(u["c"], u["e"])
    got = delta_interval(s)
    r = u["c"].sum() / u["e"].sum()  # clicks 1+2+2+0+3+1 = 9 / exposures 5+4+5+5+3+5 = 27
    assert got.value == pytest.approx(9 / 27)
    direct = np.std(u["c"] - r * u["e"], ddof=1) / math.sqrt(6) / u["e"].mean()
    assert got.se == pytest.approx(direct, rel=1e-12)
    assert got.se == pytest.approx(wls_ratio_se(u["c"], u["e"]), rel=1e-9)


def _health_sums(u):
    """The per-slice sums health.request_pass produces, computed from the per-user arrays."""
    pv, e, c, cov = u["pv"], u["e"], u["c"], u["covered3"]
    return {
        "uv": 6,
        "pv": pv.sum(),
        "pv*pv": pv @ pv,
        "exposures": e.sum(),
        "exposures*exposures": e @ e,
        "clicked": c.sum(),
        "clicked*clicked": c @ c,
        "clicked*exposures": c @ e,
        "clicked*pv": c @ pv,
        "uv_clicked": (c > 0).sum(),
        "pv_covered": cov.sum(),
        "pv_covered*pv": cov @ pv,
        "pv_covered*pv_covered": cov @ cov,
        "uv_covered": (cov > 0).sum(),
    }


def test_business_and_health_intervals_from_sums_match_per_user_arrays():
    u = per_user()
    sums = _health_sums(u)
    # per user: clicks (u2 and u5 clicked one exposure twice), value (u3 has a purchase of value 0: a converting
    # user all the same), dwell seconds, exposures with a purchase; u4 is the one user without exposures below
    k = u["c"] + np.array([0.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    value = np.array([12.5, 0.0, 0.0, 0.0, 40.0, 7.5])
    valued = np.array([1.0, 0.0, 1.0, 0.0, 2.0, 1.0])
    dwell = np.array([30.0, 95.0, 10.0, 0.0, 61.0, 5.0])
    purchase = np.array([1.0, 0.0, 1.0, 0.0, 2.0, 1.0])
    e = u["e"].copy()
    e[3] = 0.0  # u4: only an empty response
    sums |= _sums(click_events=k, exposures=e, pv=u["pv"], value=value, dwell=dwell, ev_purchase=purchase)
    sums |= {"users_exposed": 5, "uv_valued": float((valued > 0).sum()), "uv_ev_purchase": float((purchase > 0).sum())}
    sums |= _sums(clicked=u["c"], exposures=e)
    measured = Measured(clicks=True, value=True, dwell=True, events=("purchase",))
    business = business_intervals(sums, 0.95, measured)
    health = health_intervals(sums, None, False)
    ones = np.ones(6)
    exposed = e > 0
    for key, x, y in [
        (("exposure_ctr", "global"), u["c"], e),
        (("pv_ctr", "global"), u["c"], u["pv"]),
        (("uv_ctr", "global"), u["c"], ones),
        (("uv_conversion", "global"), (u["c"] > 0).astype(float), ones),
        (("clicks_per_exposure", "global"), k, e),
        (("clicks_per_request", "global"), k, u["pv"]),
        (("clicks_per_user", "global"), k, ones),
        (("clicks_per_clicking_user", "global"), k, (u["c"] > 0).astype(float)),
        (("gmv_per_exposure", "global"), value, e),
        (("gmv_per_request", "global"), value, u["pv"]),
        (("gmv_per_user", "global"), value[exposed], ones[exposed]),  # users with exposures are the unit
        (("value_per_converting_user", "global"), value, (valued > 0).astype(float)),
        (("dwell_per_click", "global"), dwell, k),
        (("dwell_per_user", "global"), dwell[exposed], ones[exposed]),
        (("purchase_user_rate", "global"), (purchase[exposed] > 0).astype(float), ones[exposed]),
        (("purchase_exposure_rate", "global"), purchase, e),
        (("pv_coverage", "global"), u["covered3"], u["pv"]),
        (("uv_coverage", "global"), (u["covered3"] > 0).astype(float), ones),
    ]:
        got = business.get(key) or health[key]
        want = delta_interval(RatioStats.from_values(x, y))
        assert got.method == "delta", key
        assert (got.value, got.se) == (pytest.approx(want.value), pytest.approx(want.se)), key
    # a mean over users (y = 1) is the t standard error: sd / sqrt(n)
    assert business[("uv_ctr", "global")].se == pytest.approx(st.sem(u["c"]))
    assert business[("gmv_per_user", "global")].se == pytest.approx(st.sem(value[exposed]))
    assert set(business) == {(m, "global") for m, _, _, _, _ in business_values(sums, measured)}


def test_gmv_per_exposure_delta_method_by_hand():
    # three users, (value, exposures): (10, 2), (0, 3), (20, 5): R = 30 / 10 = 3; residuals x - R y = 4, -9, 5;
    # their variance (16 + 81 + 25) / 2 = 61; Var(R) = 61 / (3 * (10/3)^2) = 61 / (100/3) = 1.83; se = sqrt(1.83)
    sums = {"uv": 3, "value": 30, "value*value": 500, "exposures": 10, "exposures*exposures": 38}
    sums["value*exposures"] = 10 * 2 + 0 * 3 + 20 * 5
    got = business_intervals(sums, 0.95, Measured(clicks=False, value=True))[("gmv_per_exposure", "global")]
    assert (got.value, got.se) == (3.0, pytest.approx(math.sqrt(1.83), rel=1e-12))
    assert got.ci_high - got.value == pytest.approx(Z95 * math.sqrt(1.83))


def test_ratio_stats_from_sums_with_zero_users_has_no_interval():
    assert delta_interval(ratio_stats({}, "uv", "clicked", "exposures")).method == "none"
    assert health_intervals({"uv": 1, "pv": 2, "pv*pv": 4}, None, False)[("pv_failure_rate", "global")].method == "none"


def _user_frame(u):
    import pandas as pd

    hits = u["hits3"]
    return pd.DataFrame(
        {
            "slice": "all",
            "user_id": list(SPEC),
            "n_exposures": u["e"],
            "n_relevant": u["rel"],
            "n_lists": u["pv"],
            "n_lists_ranked": u["ranked"],
            "auc": np.nan,
            "mrr": u["rr"],
            "ndcg": u["hit1"],
            "map": u["hit1"],
            "precision": u["hit1"],
            "recall": u["hit1"],
            "hit_rate": u["hit1"],
            "hits": hits,
            "k": 3,
        }
    )  # the per-user layout: one row per (user, k)


def test_aggregate_rows_get_t_and_delta_intervals_from_moments():
    u = per_user()
    rows, _ = aggregate_users(user_table_moments(_user_frame(u), (3,)), (3,), {})
    by = {(r.metric, r.k, r.aggregation): r for r in rows}
    # user_avg: t over the users with a ranked list (u4 has none): scipy's t interval
    mrr = u["rr"][~np.isnan(u["rr"])]
    low, high = st.t.interval(0.95, len(mrr) - 1, loc=mrr.mean(), scale=st.sem(mrr))
    row = by[("mrr", None, "user_avg")]
    assert row.ci_method == "t" and row.n == 5
    assert (row.value, row.se, row.ci_low, row.ci_high) == (
        pytest.approx(mrr.mean()),
        pytest.approx(st.sem(mrr)),
        pytest.approx(low),
        pytest.approx(high),
    )
    # list_avg: Σ(m_u L_u) / Σ L_u over the users with lists, delta method
    ok = u["ranked"] > 0
    want = delta_interval(RatioStats.from_values((u["rr"] * u["ranked"])[ok], u["ranked"][ok]))
    row = by[("mrr", None, "list_avg")]
    assert row.ci_method == "delta" and (row.value, row.se) == (pytest.approx(want.value), pytest.approx(want.se))
    # precision@3 global = Σ hits / (3 Σ L), recall@3 global = Σ hits / Σ R, every user a unit
    for metric, y in (("precision", 3 * u["ranked"]), ("recall", u["rel"])):
        want = delta_interval(RatioStats.from_values(u["hits3"], y))
        row = by[(metric, 3, "global")]
        assert row.ci_method == "delta", metric
        assert (row.value, row.se, row.ci_low) == (
            pytest.approx(want.value),
            pytest.approx(want.se),
            pytest.approx(want.value - Z95 * want.se),
        ), metric
    # no AUC anywhere: value and interval null
    assert by[("auc", None, "user_avg")].value is None and by[("auc", None, "user_avg")].ci_method == "none"


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_f_alpha_rows_user_avg_by_t_and_global_by_the_delta_method(alpha):
    """F_alpha@3 user_avg: the mean of each user's F from its P and R (t interval); global: F of the global
    precision@3 and recall@3, Σ (1 + a²) H / Σ (a² Rel + 3 L) over users (delta method, users as units)."""
    u = per_user()
    frame = _user_frame(u).assign(recall=np.where(u["ranked"] > 0, u["hits3"] / np.maximum(u["rel"], 1), np.nan))
    rows, _ = aggregate_users(user_table_moments(frame, (3,), f_alphas=(alpha,)), (3,), {}, f_alphas=(alpha,))
    name = "f1" if alpha == 1.0 else "f0.5"
    by = {(r.metric, r.aggregation): r for r in rows if r.metric == name}
    a2 = alpha**2
    p, r = frame["precision"].to_numpy(), frame["recall"].to_numpy()
    per_user_f = np.array([np.nan if np.isnan(x) else (0.0 if x + y == 0 else (1 + a2) * x * y / (a2 * x + y))
                           for x, y in zip(p, r, strict=True)])  # fmt: skip
    f = per_user_f[~np.isnan(per_user_f)]
    row = by[(name, "user_avg")]
    assert row.ci_method == "t" and row.n == 5 and row.k == 3
    assert (row.value, row.se) == (pytest.approx(f.mean()), pytest.approx(st.sem(f)))
    # global: F of P = Σ H / (3 Σ L) and R = Σ H / Σ Rel
    gp, gr = u["hits3"].sum() / (3 * u["ranked"].sum()), u["hits3"].sum() / u["rel"].sum()
    want = delta_interval(RatioStats.from_values((1 + a2) * u["hits3"], a2 * u["rel"] + 3 * u["ranked"]))
    row = by[(name, "global")]
    assert row.value == pytest.approx((1 + a2) * gp * gr / (a2 * gp + gr))
    assert row.ci_method == "delta" and row.se == pytest.approx(want.se)


# --------------------------------------------------------------------------- Spark: the user is the unit


def _day_rows(spec, copies: int = 1):
    """Exposures and clicks of the spec; ``copies`` > 1 repeats every request of a user under new request ids."""
    exposures, clicks = [], []
    for user, requests in spec.items():
        for copy in range(copies):
            for r, (n, clicked) in enumerate(requests):
                request = f"{user}_r{r}_{copy}"
                for p in range(n):
                    item = f"i{p}_{r}"
                    exposures.append((user, f"{user}_s", request, item, p + 1, 1.0 - p / 10, T0))
                    if p in clicked:
                        clicks.append((user, f"{user}_s", request, item, T0 + dt.timedelta(minutes=1)))
    return exposures, clicks


def _run(spark, root, spec, copies):
    from recsys_spark.config import load_config
    from recsys_spark.daily import evaluate_day

    exposures, clicks = _day_rows(spec, copies)
    spark.createDataFrame(exposures, EXPOSURE_DDL).write.parquet(f"{root}/in/exposures/dt={DAY}")
    spark.createDataFrame(clicks, CLICK_DDL).write.parquet(f"{root}/in/clicks/dt={DAY}")
    evaluate_day(
        spark,
        load_config(None, ["metrics.k=[3]", "health.min_list_length=3", "metrics.click_cap=2"]),
        DAY,
        f"{root}/in",
        f"{root}/out",
    )
    rows = spark.read.parquet(f"{root}/out/metrics").where("slice = 'all'").collect()
    return {(r["metric"], r["k"], r["aggregation"]): r for r in rows}


@pytest.mark.spark
def test_spark_intervals_follow_users_not_exposures(spark, tmp_path):
    once = _run(spark, tmp_path / "once", SPEC, 1)
    u = per_user()
    # every row carries the columns; counts have none
    assert {"se", "ci_low", "ci_high", "ci_method"} <= set(once[("pv", None, "global")].asDict())
    assert once[("pv", None, "global")].ci_method == "none" and once[("pv", None, "global")].se is None
    ctr = once[("exposure_ctr", None, "global")]
    want = delta_interval(RatioStats.from_values(u["c"], u["e"]))
    assert ctr.ci_method == "delta"
    assert (ctr.value, ctr.se, ctr.ci_low, ctr.ci_high) == (
        pytest.approx(9 / 27),
        pytest.approx(wls_ratio_se(u["c"], u["e"]), rel=1e-9),
        pytest.approx(want.ci_low),
        pytest.approx(want.ci_high),
    )
    cov = once[("pv_coverage", None, "global")]
    want = delta_interval(RatioStats.from_values(u["covered3"], u["pv"]))
    assert cov.ci_method == "delta" and (cov.value, cov.se) == (pytest.approx(want.value), pytest.approx(want.se))
    prec = once[("precision", 3, "global")]
    want = delta_interval(RatioStats.from_values(u["hits3"], 3 * u["ranked"]))
    assert prec.ci_method == "delta" and (prec.value, prec.se) == (pytest.approx(want.value), pytest.approx(want.se))
    # robustness: clicks per user 1, 2, 2, 0, 3, 1; the top ceil(0.01 * 5) = 1 clicking user has 3 of the 9;
    # Gini over 1, 1, 2, 2, 3: (-4 * 1 - 2 * 1 + 0 * 2 + 2 * 2 + 4 * 3) / (4 * 9); capped at 2: 8 / 27
    assert once[("click_concentration", None, "global")].value == pytest.approx(3 / 9)
    assert once[("clicks_gini", None, "global")].value == pytest.approx(10 / 36)
    assert once[("click_concentration", None, "global")].ci_method == "none"
    capped = once[("capped_ctr", None, "global")]
    want = delta_interval(RatioStats.from_values(np.minimum(u["c"], 2), u["e"]))
    assert capped.ci_method == "delta" and capped.n == 6
    assert (capped.value, capped.se) == (pytest.approx(8 / 27), pytest.approx(want.se))
    f1 = once[("f1", 3, "global")]  # metrics.f_alphas defaults to [1.0]: F1 at each k
    want = delta_interval(RatioStats.from_values(2 * u["hits3"], u["rel"] + 3 * u["ranked"]))
    assert f1.ci_method == "delta" and (f1.value, f1.se) == (pytest.approx(want.value), pytest.approx(want.se))
    assert once[("f1", 3, "user_avg")].ci_method == "t" and once[("f1", 3, "user_avg")].n == 5
    mrr = u["rr"][~np.isnan(u["rr"])]
    row = once[("mrr", None, "user_avg")]
    assert row.ci_method == "t" and row.se == pytest.approx(st.sem(mrr))
    assert row.ci_high == pytest.approx(mrr.mean() + st.t.ppf(0.975, len(mrr) - 1) * st.sem(mrr))

    # every user shows every request twice: per-user sums double, the users do not -> same value, same SE;
    # an exposure-level SE would shrink by sqrt(2)
    twice = _run(spark, tmp_path / "twice", SPEC, 2)
    for key in [
        ("exposure_ctr", None, "global"),
        ("pv_ctr", None, "global"),
        ("precision", 3, "global"),
        ("recall", 3, "global"),
        ("f1", 3, "global"),
        ("pv_coverage", None, "global"),
        ("mrr", None, "list_avg"),
    ]:
        assert twice[key].value == pytest.approx(once[key].value), key
        assert twice[key].se == pytest.approx(once[key].se), key
    assert twice[("exposure_ctr", None, "global")].n == 2 * ctr.n
    # the cap binds on the doubled clicks (2, 4, 4, 0, 6, 2 -> 2, 2, 2, 0, 2, 2): 10 / 54, the concentration holds
    assert twice[("capped_ctr", None, "global")].value == pytest.approx(10 / 54)
    assert twice[("click_concentration", None, "global")].value == pytest.approx(3 / 9)


# --------------------------------------------------------------------------- bootstrap keyed by user

# (user, item, exposures n_ui, in catalog); clickers k_i of the popularity window, N = 4
PAIRS = [
    ("u1", "a", 2, True),
    ("u1", "b", 1, True),
    ("u2", "a", 1, True),
    ("u2", "c", 3, False),
    ("u3", "b", 1, True),
    ("u3", "c", 1, False),
    ("u3", "d", 2, True),
    ("u4", "a", 5, True),
]
CLICKERS = {"a": 3, "b": 1, "c": 0, "d": 2}


def _brute_force_replicates(replicates: int, seed: int):
    """Each replicate rebuilt by copying every user w_ur times, then the health kernels on the copies."""
    from helpers.health_reference import gini_per_item as gini
    from helpers.health_reference import novelty_per_item as novelty
    from helpers.health_reference import personalization_pairs

    from recsys_spark.kernels.bootstrap_weights import poisson_weights

    users = sorted({u for u, *_ in PAIRS})
    w = dict(zip(users, poisson_weights(np.array(users), replicates, seed), strict=True))
    out = {"personalization": [], "novelty": [], "gini": []}
    for r in range(replicates):
        sets = [{i for u2, i, *_ in PAIRS if u2 == u} for u in users for _ in range(w[u][r])]
        exposures = {i: sum(n * w[u][r] for u, i2, n, _ in PAIRS if i2 == i) for i in CLICKERS}
        out["personalization"].append(personalization_pairs(sets))
        items = [i for i in CLICKERS if exposures[i] > 0]
        out["novelty"].append(
            novelty([exposures[i] for i in items], [CLICKERS[i] for i in items], 4) if items else np.nan
        )
        out["gini"].append(gini([exposures[i] for i in items]) if items else np.nan)
    return {k: np.array(v, dtype=float) for k, v in out.items()}


def test_bootstrap_kernels_equal_copying_users():
    from recsys_spark.kernels.bootstrap import (
        gini_replicates,
        histogram_rows,
        item_replicates,
        novelty_replicates,
        personalization_replicates,
    )
    from recsys_spark.kernels.bootstrap_weights import poisson_weights

    reps, seed = 30, 5
    items = sorted(CLICKERS)
    codes = np.array([items.index(i) for _, i, _, _ in PAIRS])
    w = poisson_weights(np.array([u for u, *_ in PAIRS]), reps, seed)
    e, c = item_replicates(codes, len(items), np.array([n for *_, n, _ in PAIRS]), w)
    users = poisson_weights(np.array(["u1", "u2", "u3", "u4"]), reps, seed).sum(0).astype(float)
    log_k = np.log2(np.array([CLICKERS[i] for i in items]) + 1.0)
    hist: dict = {}
    for r, flag, count, m in histogram_rows(e, np.array([True, True, False, True])):
        hist.setdefault(r, {})[(count, flag)] = m
    brute = _brute_force_replicates(reps, seed)
    np.testing.assert_allclose(
        personalization_replicates((c * (c - 1)).sum(0), c.sum(0), users), brute["personalization"], rtol=1e-12
    )
    np.testing.assert_allclose(
        novelty_replicates((e * log_k[:, None]).sum(0), e.sum(0), 4), brute["novelty"], rtol=1e-12
    )
    np.testing.assert_allclose(gini_replicates(hist, reps, None)[0], brute["gini"], rtol=1e-12)
    assert np.nanstd(brute["gini"]) > 0  # the replicates do vary


@pytest.mark.spark
@pytest.mark.parametrize("partitions, by", [(1, "user_id"), (3, "user_id"), (3, "item_id")])
def test_spark_bootstrap_sums_match_the_kernels_whatever_the_partitioning(spark, partitions, by):
    """By item, a user's pairs lie in several partitions: the users' weights still count once each."""
    from recsys_spark.kernels.bootstrap import personalization_replicates
    from recsys_spark.per_user.bootstrap import bootstrap_sums

    pairs = spark.createDataFrame(
        [("all", u, i, n, cat) for u, i, n, cat in PAIRS],
        "slice string, user_id string, item_id string, n long, in_catalog boolean",
    ).repartition(partitions, by)
    popularity = spark.createDataFrame(
        [(f"c{j}", i) for i, k in CLICKERS.items() for j in range(k)], "user_id string, item_id string"
    )
    boot = bootstrap_sums(pairs, popularity, 30, 5)
    brute = _brute_force_replicates(30, 5)
    s = boot.sums["all"]
    np.testing.assert_allclose(
        personalization_replicates(s["overlap"], s["pairs"], s["users"]), brute["personalization"], rtol=1e-12
    )
    from recsys_spark.per_user.bootstrap import health_bootstrap_intervals

    got = health_bootstrap_intervals(
        boot,
        "all",
        {("personalization", "global"): 0.5, ("novelty", "global"): 1.0, ("gini", "exposed"): 0.3},
        4,
        None,
        0.95,
    )
    assert got[("personalization", "global")].se == pytest.approx(np.nanstd(brute["personalization"], ddof=1))
    assert got[("novelty", "global")].se == pytest.approx(np.nanstd(brute["novelty"], ddof=1))
    assert got[("gini", "exposed")].se == pytest.approx(np.nanstd(brute["gini"], ddof=1))
    assert got[("gini", "exposed")].method == "bootstrap"


def test_bootstrap_item_coverage_counts_catalog_items_that_stay_exposed():
    from recsys_spark.per_user.bootstrap import BootstrapSums, health_bootstrap_intervals

    # replicate 0: catalog items with counts 2 and 0 (dropped by the weights), one uncatalogued; replicate 1: both
    boot = BootstrapSums(
        2,
        {},
        {"all": {0: {(2.0, True): 1.0, (0.0, True): 1.0, (3.0, False): 1.0}, 1: {(1.0, True): 2.0, (0.0, False): 1.0}}},
    )
    got = health_bootstrap_intervals(boot, "all", {("item_coverage", "global"): 0.5}, None, 2.0, 0.95, catalog_items=4)
    # coverage replicates 1/4 and 2/4: sd = 0.25 / sqrt(2)
    assert got[("item_coverage", "global")].se == pytest.approx(0.25 / math.sqrt(2))


def test_bootstrap_category_diversity_weights_each_users_category_counts():
    import pyarrow as pa
    from helpers.health_reference import normalised_entropy

    from recsys_spark.kernels.bootstrap_weights import poisson_weights
    from recsys_spark.per_user.bootstrap import BootstrapSums, _categories_fn, health_bootstrap_intervals

    # (slice, user, category, exposures); K = 3 categories
    rows = [
        ("all", "u1", "x", 3),
        ("all", "u1", "y", 1),
        ("all", "u2", "x", 1),
        ("all", "u3", "z", 2),
        ("all", "u3", None, 1),
    ]
    batch = pa.RecordBatch.from_pylist([dict(zip(["slice", "user_id", "category", "c"], r, strict=True)) for r in rows])
    boot = BootstrapSums(20)
    for out in _categories_fn(20, 9)(iter([batch.slice(0, 2), batch.slice(2)])):  # two batches, one task
        for s, name, r, _, _, v in zip(*[c.to_pylist() for c in out.columns], strict=True):
            boot.sums.setdefault(s, {}).setdefault(name, np.zeros(20))[r] += v
    got = health_bootstrap_intervals(
        boot, "all", {("category_diversity", "global"): 0.9}, None, None, 0.95, n_categories=3
    )[("category_diversity", "global")]
    w = dict(zip(["u1", "u2", "u3"], poisson_weights(np.array(["u1", "u2", "u3"]), 20, 9).astype(float), strict=True))
    brute = []
    for r in range(20):
        counts = {}
        for _, u, cat, c in rows:
            counts[cat] = counts.get(cat, 0.0) + w[u][r] * c
        brute.append(normalised_entropy(list(counts.values()), 3) if sum(counts.values()) else np.nan)
    assert got.method == "bootstrap"
    assert got.se == pytest.approx(np.nanstd(brute, ddof=1), rel=1e-12)


def test_weighted_u_equals_sklearn_weighted_auc_whatever_the_batches():
    from sklearn.metrics import roc_auc_score

    from recsys_spark.kernels.bootstrap import WeightedU, merge_weighted_u
    from recsys_spark.kernels.bootstrap_weights import poisson_weights

    rng = np.random.default_rng(4)
    n = 300
    scores = np.round(rng.random(n), 2)  # many ties
    positive = rng.random(n) < 0.3
    users = np.array([f"u{i % 40}" for i in range(n)])
    w = poisson_weights(users, 8, 3).astype(float)
    order = np.argsort(scores, kind="stable")
    s, y, ww = scores[order], positive[order], w[order]
    # two score ranges (< .5, >= .5), the first split into uneven batches that cut runs of ties
    parts = []
    for lo, hi in ((0.0, 0.5), (0.5, 1.01)):
        at = np.flatnonzero((s >= lo) & (s < hi))
        acc = WeightedU(8)
        for chunk in np.array_split(at, 7):
            acc.add(s[chunk], y[chunk], ww[chunk])
        acc.finish()
        parts.append((acc.u, acc.pos, acc.neg))
    got = merge_weighted_u(parts)
    want = [roc_auc_score(positive, scores, sample_weight=w[:, r]) for r in range(8)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.spark
def test_spark_auc_bootstrap_matches_sklearn(spark):
    from sklearn.metrics import roc_auc_score

    from recsys_spark.kernels.bootstrap_weights import poisson_weights
    from recsys_spark.per_user.bootstrap import auc_bootstrap

    rng = np.random.default_rng(8)
    n = 200
    scores = np.round(rng.normal(0, 2, n), 1)
    relevance = (rng.random(n) < 0.4).astype(float)
    users = [f"u{i % 25}" for i in range(n)]
    frame = spark.createDataFrame(
        [("all", u, float(sc), float(r)) for u, sc, r in zip(users, scores, relevance, strict=True)],
        "slice string, user_id string, score double, relevance double",
    ).repartition(3)
    got = auc_bootstrap(frame, 10, 2)["all"]
    w = poisson_weights(np.array(users), 10, 2).astype(float)
    np.testing.assert_allclose(
        got, [roc_auc_score(relevance > 0, scores, sample_weight=w[:, r]) for r in range(10)], rtol=1e-12
    )


def _sums(**columns):
    """The named sums of per-user arrays: "x" = Σx and "x*y" = Σxy for every pair (what Spark sums)."""
    out = {}
    for a, x in columns.items():
        out[a] = float(np.sum(x))
        for b, y in columns.items():
            out[f"{a}*{b}"] = float(x @ y)
    return out


def _t_reference(x: np.ndarray, confidence: float):
    """(mean, se, half-width) of a t interval by scipy."""
    se = st.sem(x)
    return x.mean(), se, st.t.ppf(0.5 + confidence / 2, len(x) - 1) * se


@pytest.mark.parametrize("confidence, k", [(0.95, 4), (0.8, 4), (0.95, 2)])
def test_every_health_interval_with_categories_and_a_previous_day(confidence, k):
    # five users with requests; four of them exposed (entropies), three returning (update rate): each row
    # has its own per-user numerator, denominator and unit count
    pv = np.array([2.0, 1.0, 4.0, 3.0, 1.0])
    empty = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    covered = np.array([1.0, 1.0, 2.0, 3.0, 0.0])
    lists = np.array([1.0, 1.0, 3.0, 3.0, 1.0])
    list_hu = np.array([0.5, 0.0, 2.5, 1.0, 0.9])  # per user, the sum of its lists' entropies (nats)
    user_h = np.array([0.7, 1.2, 0.1, 0.9])  # per exposed user, the entropy of its categories
    new, items = np.array([1.0, 0.0, 3.0]), np.array([2.0, 4.0, 5.0])  # returning users' new / shown items
    prev = np.array([3.0, 1.0, 2.0])  # and the items they were shown the day before
    # exposed users' distinct items, those they had not clicked before, those of a category they had not clicked
    novel_items, item_new, category_new = (
        np.array([4.0, 2.0, 6.0, 1.0]),
        np.array([1.0, 2, 0, 1]),
        np.array([0.0, 1, 0, 1]),
    )
    sums = {
        **_sums(pv=pv, pv_empty=empty, pv_covered=covered),
        **_sums(list_hu=list_hu, lists=lists),
        **_sums(update_new=new, update_items=items, update_prev=prev),
        **_sums(novel_items=novel_items, novel_item_new=item_new, novel_category_new=category_new),
        "novel_users": 4,
        "novel_item_sum": float((item_new / novel_items).sum()),
        "novel_item_sum2": float((item_new / novel_items) @ (item_new / novel_items)),
        "novel_category_sum": float((category_new / novel_items).sum()),
        "novel_category_sum2": float((category_new / novel_items) @ (category_new / novel_items)),
        "update_prev_sum": float((new / prev).sum()),
        "update_prev_sum2": float((new / prev) @ (new / prev)),
        "uv": 5,
        "uv_empty": float((empty > 0).sum()),
        "uv_covered": float((covered > 0).sum()),
        "users_exposed": 4,
        "user_h": float(user_h.sum()),
        "user_h2": float(user_h @ user_h),
        "returning": 3,
        "update_sum": float((new / items).sum()),
        "update_sum2": float((new / items) @ (new / items)),
    }
    got = health_intervals(sums, k, True, confidence, has_novel=True)
    z = st.norm.ppf(0.5 + confidence / 2)
    ones = np.ones(5)
    delta_rows = {
        ("pv_coverage", "global"): (covered, pv),
        ("pv_failure_rate", "global"): (empty, pv),
        ("uv_coverage", "global"): ((covered > 0).astype(float), ones),
        ("uv_failure_rate", "global"): ((empty > 0).astype(float), ones),
        ("category_diversity", "list_avg"): (list_hu / math.log(k), lists),
        ("update_rate", "global"): (new, items),
        ("update_rate_previous", "global"): (new, prev),
        ("novel_item_share", "global"): (item_new, novel_items),
        ("novel_category_share", "global"): (category_new, novel_items),
    }
    t_rows = {
        ("category_diversity", "user_avg"): user_h / math.log(k),
        ("update_rate", "user_avg"): new / items,
        ("update_rate_previous", "user_avg"): new / prev,
        ("novel_item_share", "user_avg"): item_new / novel_items,
        ("novel_category_share", "user_avg"): category_new / novel_items,
    }
    assert set(got) == set(delta_rows) | set(t_rows)
    for key, (x, y) in delta_rows.items():
        want = RatioStats.from_values(x, y)
        assert got[key].method == "delta", key
        assert got[key].value == pytest.approx(want.ratio, rel=1e-12), key
        assert got[key].se == pytest.approx(math.sqrt(want.var_ratio), rel=1e-9), key
        assert got[key].ci_high - got[key].value == pytest.approx(z * got[key].se, rel=1e-9), key
        assert got[key].value - got[key].ci_low == pytest.approx(z * got[key].se, rel=1e-9), key
    assert got[("category_diversity", "list_avg")].value == pytest.approx(list_hu.sum() / math.log(k) / lists.sum())
    for key, x in t_rows.items():
        mean, se, half = _t_reference(x, confidence)
        assert got[key].method == "t", key
        assert (got[key].value, got[key].se) == (pytest.approx(mean, rel=1e-12), pytest.approx(se, rel=1e-9)), key
        assert (got[key].ci_low, got[key].ci_high) == (pytest.approx(mean - half), pytest.approx(mean + half)), key


def test_health_intervals_with_one_category_or_none_and_without_a_previous_day():
    sums = {"uv": 3, "pv": 3, "pv*pv": 3, "lists": 5, "users_exposed": 2, "list_hu": 0.0, "user_h": 0.0}
    one = health_intervals(sums, 1, False)
    # no category at all (a catalog without categories, nothing unknown exposed): the same zeros, no log(0)
    assert (
        health_intervals(sums, 0, False)[("category_diversity", "list_avg")] == one[("category_diversity", "list_avg")]
    )
    # one category: every diversity is 0 by definition, with a zero-width interval over its own units
    for agg in ("list_avg", "user_avg"):
        i = one[("category_diversity", agg)]
        assert (i.value, i.se, i.ci_low, i.ci_high, i.method) == (0.0, 0.0, 0.0, 0.0, "t"), agg
    assert health_intervals({**sums, "users_exposed": 1}, 1, False)[("category_diversity", "user_avg")].method == "none"
    assert health_intervals({**sums, "lists": 1}, 1, False)[("category_diversity", "list_avg")].method == "none"
    keys = set(health_intervals(sums, None, False))
    assert keys == {
        ("pv_coverage", "global"),
        ("pv_failure_rate", "global"),
        ("uv_coverage", "global"),
        ("uv_failure_rate", "global"),
    }


def test_histogram_rows_count_items_per_replicate_catalog_flag_and_count():
    from recsys_spark.kernels.bootstrap import histogram_rows

    # 4 items (rows) x 2 replicates; items 0, 1, 3 in the catalog, item 2 not
    e = np.array([[1, 0], [1, 2], [5, 0], [0, 2]])
    got = histogram_rows(e, np.array([True, True, False, True]))
    assert got == [
        (0, True, 0.0, 1.0),
        (0, True, 1.0, 2.0),
        (0, False, 5.0, 1.0),
        (1, True, 0.0, 1.0),
        (1, True, 2.0, 2.0),
        (1, False, 0.0, 1.0),
    ]


def test_novelty_replicates_are_nan_without_exposures_or_clickers():
    from recsys_spark.kernels.bootstrap import novelty_replicates

    log_sum, exposures = np.array([2.0, 1.0, 3.0]), np.array([1.0, 0.0, 2.0])
    # log2(1 + 1) - 2 / 1; no exposure; log2(2) - 3 / 2
    np.testing.assert_array_equal(novelty_replicates(log_sum, exposures, 1), [-1.0, np.nan, -0.5])
    assert np.isnan(novelty_replicates(log_sum, exposures, 0)).all()  # no clickers in the window


def test_gini_replicates_over_exposed_items_and_over_the_catalog():
    from recsys_spark.kernels.bootstrap import gini_replicates

    def gini(x):  # independent: sum over sorted values of (2i - n - 1) x_i / (n sum x), times n / (n - 1)
        x = np.sort(np.asarray(x, dtype=float))
        n = len(x)
        return (2 * np.arange(1, n + 1) - n - 1) @ x / (n * x.sum()) * n / (n - 1)

    # {(count in the replicate, in catalog): items}; replicate 2 has no row; 3 catalog items never exposed
    hist = {
        0: {(2.0, True): 1.0, (0.0, True): 1.0, (1.0, False): 2.0},
        1: {(3.0, True): 1.0, (1.0, True): 2.0, (0.0, False): 1.0},
    }
    exposed, catalog = gini_replicates(hist, 3, 3.0)
    np.testing.assert_allclose(exposed, [gini([2, 1, 1]), gini([3, 1, 1]), np.nan], rtol=1e-12)
    np.testing.assert_allclose(catalog, [gini([2, 0, 1, 1, 0, 0, 0]), gini([3, 1, 1, 0, 0, 0, 0]), np.nan], rtol=1e-12)
    assert gini_replicates(hist, 3, None)[1] is None  # no catalog


def test_merge_weighted_u_by_hand():
    from recsys_spark.kernels.bootstrap import merge_weighted_u

    assert merge_weighted_u([]).shape == (0,)
    # two score ranges, three replicates: (U, P, N) per replicate
    low = (np.array([0.0, 0.5, 0.0]), np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0]))
    high = (np.array([0.0, 0.0, 0.0]), np.array([1.0, 0.0, 1.0]), np.array([0.0, 0.0, 0.0]))
    # replicate 0: the high positive beats the low negative (U 1 of 1 x 1); 1: a tie inside low (1/2);
    # 2: no negative at all
    np.testing.assert_array_equal(merge_weighted_u([low, high]), [1.0, 0.5, np.nan])
    np.testing.assert_array_equal(merge_weighted_u([low]), [np.nan, 0.5, np.nan])


def test_business_intervals_use_the_confidence_they_are_given():
    sums = _health_sums(per_user())
    z = st.norm.ppf(0.9)
    for key, i in business_intervals(sums, 0.8).items():
        assert i.method == "delta", key
        assert i.ci_high - i.value == pytest.approx(z * i.se, rel=1e-9), key
        assert i.se == pytest.approx(business_intervals(sums)[key].se, rel=1e-12), key


def test_ratio_stats_read_missing_or_null_sums_as_zero():
    got = ratio_stats({"uv": 3, "clicked": 2.0, "exposures": None}, "uv", "clicked", "exposures")
    assert got == RatioStats(3.0, 2.0, 0.0, 0.0, 0.0, 0.0)
    assert delta_interval(ratio_stats({}, "uv", "clicked", "exposures")).value is None


def test_weighted_u_takes_poissons_uint8_weights_without_overflow():
    from recsys_spark.kernels.bootstrap import WeightedU

    # 300 tied positives and 300 tied negatives of weight 1 as uint8 (poisson_weights' type): sums above 255
    scores = np.r_[np.zeros(300), np.ones(300)]
    positive = np.r_[np.zeros(300, bool), np.ones(300, bool)]
    u = WeightedU(1)
    u.add(scores, positive, np.ones((600, 1), dtype=np.uint8))
    u.finish()
    u.finish()  # a second finish adds nothing
    assert (u.u.tolist(), u.pos.tolist(), u.neg.tolist()) == ([90000.0], [300.0], [300.0])


def test_personalization_replicates_need_two_users_and_a_pair():
    from recsys_spark.kernels.bootstrap import personalization_replicates

    got = personalization_replicates(
        np.array([2.0, 2.0, 0.0, 1.0]), np.array([4.0, 4.0, 0.0, 2.0]), np.array([2.0, 1.0, 3.0, 2.0])
    )
    # 1 - 2 / (1 * 4); one user; no pair; 1 - 1 / (1 * 2)
    np.testing.assert_array_equal(got, [0.5, np.nan, np.nan, 0.5])
    # one pair, nobody shared: 1 - 0 / (1 * 1)
    assert personalization_replicates(np.array([0.0]), np.array([1.0]), np.array([2.0])).tolist() == [1.0]


def test_item_replicates_have_a_row_for_every_item_even_unexposed_ones():
    from recsys_spark.kernels.bootstrap import item_replicates

    # items 0..2, only item 0 has rows; exposures as integers, weights as poisson_weights' uint8
    e, c = item_replicates(np.array([0, 0]), 3, np.array([2, 3]), np.array([[1, 2], [1, 0]], dtype=np.uint8))
    assert e.tolist() == [[5.0, 4.0], [0.0, 0.0], [0.0, 0.0]]
    assert c.tolist() == [[2.0, 2.0], [0.0, 0.0], [0.0, 0.0]]
