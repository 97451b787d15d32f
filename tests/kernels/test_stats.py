"""The statistics kernels against REFERENCES.md golden values, scipy/statsmodels oracles and hand arithmetic."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from recsys_spark.kernels.bootstrap_weights import hash_units, poisson_weights
from recsys_spark.kernels.comparisons import adjust_p, paired_t, ratio_difference, welch
from recsys_spark.kernels.estimates import Interval, bootstrap_interval, delta_interval, t_interval
from recsys_spark.kernels.sums import MeanStats, RatioStats

# REFERENCES.md, "Statistics for decisions": delta method CTR example
C_IMPR, C_CLICKS = [10, 5, 8, 12, 3, 7], [1, 0, 2, 1, 0, 1]
T_IMPR, T_CLICKS = [9, 6, 11, 4, 10, 8], [2, 1, 2, 0, 3, 1]


def test_kernels_stats_does_not_import_pyspark_or_scipy_at_import():
    # the statistics kernels, one module per concept (kernels/stats.py until it was split)
    modules = ("quantiles", "sums", "estimates", "comparisons", "sequential", "bootstrap_weights")
    code = (
        f"import sys; import {', '.join(f'recsys_spark.kernels.{m}' for m in modules)}; "
        "sys.exit(1 if 'pyspark' in sys.modules or 'scipy' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --------------------------------------------------------------------------- MeanStats / t


def test_mean_stats_hand_values_and_merge():
    # x = 1, 2, 3, 6: n 4, sum 12, sum_sq 1 + 4 + 9 + 36 = 50; mean 3; var (50 - 144/4) / 3 = 14/3
    whole = MeanStats.from_values(np.array([1.0, 2.0, 3.0, 6.0]))
    assert (whole.n, whole.sum, whole.sum_sq, whole.m2) == (4.0, 12.0, 50.0, 14.0)  # m2 = 4 + 1 + 0 + 9
    assert whole.mean == 3.0 and whole.var == pytest.approx(14 / 3)
    merged = MeanStats.from_values(np.array([6.0, np.nan])).merge(MeanStats.from_values(np.array([1.0, 2.0, 3.0])))
    assert merged == whole  # NaN is missing, merge adds (and combines m2 by Chan et al.)
    assert MeanStats(4, 12, 50).var == whole.var == MeanStats.from_moments(4, 3.0, 14.0).var
    assert MeanStats.from_moments(4, 3.0, 14.0) == whole  # sum 4 * 3, sum_sq 14 + 4 * 9 = 50, m2 kept


def test_t_interval_matches_scipy():
    x = np.array([0.2, 0.5, 0.1, 0.9, 0.4, 0.7, 0.3])
    got = t_interval(MeanStats.from_values(x), confidence=0.9)
    low, high = st.t.interval(0.9, len(x) - 1, loc=x.mean(), scale=st.sem(x))
    assert got.method == "t"
    assert got.value == pytest.approx(x.mean(), abs=1e-15)
    assert got.se == pytest.approx(st.sem(x), rel=1e-12)
    assert (got.ci_low, got.ci_high) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))


def test_t_interval_hand_value():
    # x = 1, 2, 3: mean 2, sd 1, se 1/sqrt(3); t(0.975, 2) = 4.302652729749464
    got = t_interval(MeanStats(3, 6, 14))
    assert got.se == pytest.approx(1 / math.sqrt(3))
    assert got.ci_high == pytest.approx(2 + 4.302652729749464 / math.sqrt(3))


@pytest.mark.parametrize("stats, value", [(MeanStats(0, 0, 0), None), (MeanStats(1, 5, 25), 5.0)])
def test_t_interval_below_two_units_has_no_interval(stats, value):
    assert t_interval(stats) == Interval(value, None, None, None, "none")


def test_t_interval_of_a_constant_has_zero_width():
    got = t_interval(MeanStats.from_values(np.array([0.3, 0.3, 0.3])))
    assert got.se == pytest.approx(0.0, abs=1e-9) and got.ci_low == pytest.approx(0.3)


def test_confidence_outside_the_unit_interval_is_refused():
    with pytest.raises(ValueError, match="confidence"):
        t_interval(MeanStats(3, 6, 14), confidence=95)


# --------------------------------------------------------------------------- RatioStats / delta


def test_delta_method_golden_variances():
    c = RatioStats.from_values(np.array(C_CLICKS, float), np.array(C_IMPR, float))
    t = RatioStats.from_values(np.array(T_CLICKS, float), np.array(T_IMPR, float))
    assert c.ratio == pytest.approx(0.1111111111, abs=1e-10) and c.var_ratio == pytest.approx(
        1.0827617741e-03, rel=1e-9
    )
    assert t.ratio == pytest.approx(0.1875) and t.var_ratio == pytest.approx(1.1433919271e-03, rel=1e-9)


def test_delta_variance_equals_the_textbook_form():
    rng = np.random.default_rng(3)
    y = rng.integers(1, 30, 200).astype(float)
    x = rng.binomial(y.astype(int), rng.beta(2, 20, 200)).astype(float)
    s = RatioStats.from_values(x, y)
    n, mx, my = len(x), x.mean(), y.mean()
    vx, vy, cxy = x.var(ddof=1), y.var(ddof=1), np.cov(x, y, ddof=1)[0, 1]
    textbook = (vx / my**2 - 2 * mx * cxy / my**3 + mx**2 * vy / my**4) / n
    assert s.var_ratio == pytest.approx(textbook, rel=1e-10)
    # and the residual form: sd of x - R y over n, divided by mean y
    r = x.sum() / y.sum()
    assert math.sqrt(s.var_ratio) == pytest.approx(np.std(x - r * y, ddof=1) / math.sqrt(n) / my, rel=1e-10)


def test_delta_interval_uses_the_normal_quantile():
    s = RatioStats.from_values(np.array(C_CLICKS, float), np.array(C_IMPR, float))
    got = delta_interval(s, confidence=0.95)
    se = math.sqrt(1.0827617741197989e-03)
    assert got.method == "delta" and got.se == pytest.approx(se)
    assert got.ci_low == pytest.approx(1 / 9 - 1.959963984540054 * se)
    assert got.ci_high == pytest.approx(1 / 9 + 1.959963984540054 * se)


def test_ratio_stats_merge_is_addition():
    a = RatioStats.from_values(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    b = RatioStats.from_values(np.array([5.0]), np.array([6.0]))
    # sums: x 8, y 13, xx 1+4+25=30, yy 9+16+36=61, xy 3+8+30=41
    assert a.merge(b) == RatioStats(3, 8, 13, 30, 61, 41)


def test_variances_from_raw_sums_are_zero_when_every_unit_is_the_same():
    """Σx² − (Σx)²/n and Σ(x − R y)² from raw sums leave a rounding residue (1e-18 or so, depending on the order
    of the sums) where the exact value is 0: it is 0 whatever the order; a real small spread is kept."""
    rng = np.random.default_rng(3)
    y = rng.integers(1, 40, 77).astype(float)
    x = y / 0.3  # every user's ratio is 1/0.3: Var(R) = 0 (the raw sums leave 6e-10 to 9e-10 in Σ(x − R y)²)
    for order in (np.arange(77), rng.permutation(77), rng.permutation(77)):
        xs, ys = x[order], y[order]
        ratio = RatioStats(
            77.0,
            sum(xs.tolist()),
            sum(ys.tolist()),
            sum((xs * xs).tolist()),
            sum((ys * ys).tolist()),
            sum((xs * ys).tolist()),
        )
        assert ratio.var_ratio == 0.0 and delta_interval(ratio).se == 0.0
        mean = MeanStats(77.0, sum([0.1] * 77), sum([0.01] * 77))  # no m2: the Σx² form
        assert mean.var == 0.0
    ratio = RatioStats(77.0, *(float(v) for v in (x.sum(), y.sum(), x @ x, y @ y, x @ y)))
    assert ratio.var_x == pytest.approx(np.var(x, ddof=1), rel=1e-9) and ratio.var_y == pytest.approx(np.var(y, ddof=1))
    near = x + rng.normal(0, 1e-4, 77)  # a real spread 1e-4 around R y: kept, equal to the per-unit form
    r = RatioStats.from_values(near, y)
    reference = np.sum((near - r.ratio * y) ** 2) / 76 / (77 * y.mean() ** 2)
    assert r.var_ratio == pytest.approx(reference, rel=1e-6) and r.var_ratio > 0
    v = np.array([2.0, 2.0, 2.0 + 2e-6])  # a spread of 1e-6 on values of 2: kept
    spread = MeanStats(3.0, float(v.sum()), float(v @ v))
    assert spread.var == pytest.approx(np.var(v, ddof=1), rel=1e-3)


def test_delta_interval_edge_cases():
    assert delta_interval(RatioStats(3, 0, 0, 0, 0, 0)) == Interval(None, None, None, None, "none")  # 0 / 0
    assert delta_interval(RatioStats(1, 1, 4, 1, 16, 4)) == Interval(0.25, None, None, None, "none")  # one unit


def test_delta_se_follows_units_not_rows():
    """Splitting a user's impressions into rows that pretend to be users shrinks the SE; the user-level one does not
    change when a user's exposures are duplicated inside that user (both sums double, the ratio stays)."""
    y = np.array([10.0, 5, 8, 12, 3, 7])
    x = np.array([1.0, 0, 2, 1, 0, 1])
    by_user = delta_interval(RatioStats.from_values(x, y))
    # every user shows each exposure twice: per-user x and y double -> R same, SE same (scale-free in y)
    doubled = delta_interval(RatioStats.from_values(2 * x, 2 * y))
    assert doubled.value == pytest.approx(by_user.value) and doubled.se == pytest.approx(by_user.se)
    # treating each impression as its own unit (x in {0,1}, y = 1) gives a different, smaller SE
    clicks = np.concatenate([np.r_[np.ones(int(c)), np.zeros(int(i - c))] for c, i in zip(x, y, strict=True)])
    per_impression = delta_interval(RatioStats.from_values(clicks, np.ones_like(clicks)))
    assert per_impression.value == pytest.approx(by_user.value)
    assert per_impression.se != pytest.approx(by_user.se, rel=0.01)


# --------------------------------------------------------------------------- bootstrap interval


def test_bootstrap_interval_is_value_plus_minus_z_sd():
    got = bootstrap_interval(1.0, np.array([0.8, 1.0, 1.2, np.nan]))
    # sd(0.8, 1.0, 1.2) = 0.2
    assert got.method == "bootstrap" and got.se == pytest.approx(0.2)
    assert got.ci_low == pytest.approx(1.0 - 1.959963984540054 * 0.2)
    assert bootstrap_interval(1.0, np.array([0.9])).method == "none"
    assert bootstrap_interval(float("nan"), np.array([0.9, 1.0])) == Interval(None, None, None, None, "none")


# --------------------------------------------------------------------------- comparisons


def test_ratio_difference_reproduces_gbstats():
    c = RatioStats.from_values(np.array(C_CLICKS, float), np.array(C_IMPR, float))
    t = RatioStats.from_values(np.array(T_CLICKS, float), np.array(T_IMPR, float))
    got = ratio_difference(c, t, quantile="welch")
    assert got.method == "delta"
    assert got.delta == pytest.approx(0.0763888889, abs=1e-10)
    assert (got.ci_low, got.ci_high) == (
        pytest.approx(-0.0287500265, abs=1e-10),
        pytest.approx(0.1815278043, abs=1e-10),
    )
    assert got.p_value == pytest.approx(0.1365346068, abs=1e-10)
    assert got.rel_delta == pytest.approx(0.6875)
    assert (got.rel_ci_low, got.rel_ci_high) == (
        pytest.approx(-0.6163584281, abs=1e-10),
        pytest.approx(1.9913584281, abs=1e-10),
    )
    assert got.rel_p_value == pytest.approx(0.2672436038, abs=1e-10)


def test_ratio_difference_normal_by_default():
    c = RatioStats.from_values(np.array(C_CLICKS, float), np.array(C_IMPR, float))
    t = RatioStats.from_values(np.array(T_CLICKS, float), np.array(T_IMPR, float))
    got = ratio_difference(c, t)
    se = math.sqrt(1.0827617741197989e-03 + 1.1433919270833332e-03)
    assert got.df is None and got.se == pytest.approx(se)
    assert got.ci_high == pytest.approx(0.0763888889 + 1.959963984540054 * se)
    assert got.p_value == pytest.approx(2 * st.norm.sf(0.0763888889 / se))


def test_welch_matches_scipy():
    rng = np.random.default_rng(11)
    a, b = rng.normal(1.0, 1.0, 40), rng.normal(1.4, 2.0, 25)
    got = welch(MeanStats.from_values(a), MeanStats.from_values(b), confidence=0.9)
    ref = st.ttest_ind(b, a, equal_var=False)
    assert got.method == "welch"
    assert got.delta == pytest.approx(b.mean() - a.mean())
    assert got.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    assert got.df == pytest.approx(ref.df, rel=1e-10)
    low, high = ref.confidence_interval(0.9)
    assert (got.ci_low, got.ci_high) == (pytest.approx(low, rel=1e-10), pytest.approx(high, rel=1e-10))
    # relative lift: gbstats formula, hand-written
    vc, vt = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    rel_se = math.sqrt(vt / a.mean() ** 2 + vc * b.mean() ** 2 / a.mean() ** 4)
    assert got.rel_delta == pytest.approx(b.mean() / a.mean() - 1)
    assert got.rel_ci_high == pytest.approx(got.rel_delta + st.t.ppf(0.95, ref.df) * rel_se)


def test_welch_below_two_units_is_nan():
    got = welch(MeanStats(1, 1, 1), MeanStats.from_values(np.array([1.0, 2.0])))
    assert math.isnan(got.p_value) and math.isnan(got.ci_low)


def test_paired_t_matches_scipy():
    rng = np.random.default_rng(5)
    a = rng.normal(2.0, 1.0, 30)
    b = a + rng.normal(0.3, 0.5, 30)
    got = paired_t(MeanStats.from_values(b - a), MeanStats.from_values(a))
    ref = st.ttest_rel(b, a)
    assert got.method == "paired_t" and got.df == 29
    assert got.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    low, high = ref.confidence_interval(0.95)
    assert (got.ci_low, got.ci_high) == (pytest.approx(low, rel=1e-10), pytest.approx(high, rel=1e-10))
    assert got.rel_delta == pytest.approx((b - a).mean() / a.mean())
    assert got.rel_ci_high == pytest.approx(high / a.mean())


def test_paired_t_every_field_by_hand_and_scipy():
    a, b = np.array([1.0, 2.0, 4.0, 3.0]), np.array([2.0, 2.5, 5.0, 3.5])
    d = b - a  # 1, .5, 1, .5: mean .75
    got = paired_t(MeanStats.from_values(d), MeanStats.from_values(a), confidence=0.9)
    ref = st.ttest_rel(b, a)
    q = st.t.ppf(0.95, 3)
    se = st.sem(d)
    assert (got.delta, got.df, got.method) == (0.75, 3.0, "paired_t")
    assert got.se == pytest.approx(se, rel=1e-12)
    assert (got.ci_low, got.ci_high) == (pytest.approx(0.75 - q * se), pytest.approx(0.75 + q * se))
    assert got.p_value == pytest.approx(ref.pvalue, rel=1e-10) and got.rel_p_value == got.p_value
    rel, rel_se = 0.75 / 2.5, se / 2.5  # the control mean taken as fixed
    assert (got.rel_delta, got.rel_se) == (pytest.approx(rel), pytest.approx(rel_se))
    assert (got.rel_ci_low, got.rel_ci_high) == (pytest.approx(rel - q * rel_se), pytest.approx(rel + q * rel_se))
    two = paired_t(MeanStats.from_values(d[:2]), MeanStats.from_values(a[:2]))  # two units: 1 df
    assert two.df == 1.0 and two.p_value == pytest.approx(st.ttest_rel(b[:2], a[:2]).pvalue, rel=1e-10)
    assert two.ci_high == pytest.approx(0.75 + st.t.ppf(0.975, 1) * st.sem(d[:2]))


def test_paired_t_edges_one_unit_constant_differences_zero_control():
    one = paired_t(MeanStats.from_values(np.array([0.5])), MeanStats.from_values(np.array([2.0])))
    assert one.delta == 0.5 and one.rel_delta == 0.25
    assert all(math.isnan(v) for v in (one.df, one.se, one.ci_low, one.ci_high, one.p_value))
    # every difference the same: se 0, the t statistic infinite (p 0) unless the difference is 0 (p undefined)
    for value, p in ((0.5, 0.0), (-0.5, 0.0)):
        got = paired_t(MeanStats.from_values(np.full(3, value)), MeanStats.from_values(np.array([1.0, 2.0, 3.0])))
        assert (got.se, got.p_value, got.ci_low, got.ci_high) == (0.0, p, value, value)
    assert math.isnan(paired_t(MeanStats.from_values(np.zeros(3)), MeanStats.from_values(np.ones(3))).p_value)
    zero_control = paired_t(MeanStats.from_values(np.array([1.0, 2.0])), MeanStats.from_values(np.zeros(2)))
    assert math.isnan(zero_control.rel_delta) and math.isnan(zero_control.rel_se)


# --------------------------------------------------------------------------- multiple testing


@pytest.mark.parametrize("ours, theirs", [("holm", "holm"), ("bh", "fdr_bh")])
def test_adjust_p_matches_statsmodels(ours, theirs):
    p = np.array([0.001, 0.2, 0.03, 0.04, 0.5, 0.012, 0.04])
    assert adjust_p(p, ours) == pytest.approx(multipletests(p, method=theirs)[1], rel=1e-12)


def test_adjust_p_hand_values_and_nan():
    # Holm over 0.01, 0.04, 0.03 (m = 3): 3*0.01 = 0.03, max(0.03, 2*0.03) = 0.06, max(0.06, 1*0.04) = 0.06
    assert adjust_p([0.01, 0.04, np.nan, 0.03], "holm") == pytest.approx([0.03, 0.06, np.nan, 0.06], nan_ok=True)
    # BH: 0.01*3/1 = 0.03, 0.03*3/2 = 0.045, 0.04*3/3 = 0.04 -> min from the top: 0.03, 0.04, 0.04
    assert adjust_p([0.01, 0.04, np.nan, 0.03], "bh") == pytest.approx([0.03, 0.04, np.nan, 0.04], nan_ok=True)
    assert adjust_p([0.01, np.nan], "none") == pytest.approx([0.01, np.nan], nan_ok=True)
    assert adjust_p([], "holm").shape == (0,)
    with pytest.raises(ValueError, match="holm"):
        adjust_p([0.1], "bonferroni")


# --------------------------------------------------------------------------- Poisson weights

_IDS = np.array([f"user_{i}" for i in range(20_000)], dtype=object)


def test_poisson_weights_have_mean_one_and_variance_one():
    w = poisson_weights(_IDS, 50, seed=42).astype(float)  # 1e6 draws: sd of the mean 1e-3
    assert w.shape == (20_000, 50)
    assert w.mean() == pytest.approx(1.0, abs=5e-3)
    assert w.var() == pytest.approx(1.0, abs=1e-2)
    # the distribution, not just two moments: P(0) = P(1) = e^-1, P(2) = e^-1 / 2
    for k, p in [(0, math.exp(-1)), (1, math.exp(-1)), (2, math.exp(-1) / 2), (3, math.exp(-1) / 6)]:
        assert (w == k).mean() == pytest.approx(p, abs=3e-3)


def test_poisson_weights_are_a_function_of_unit_replicate_and_seed():
    w = poisson_weights(_IDS, 20, seed=1)
    assert (w == poisson_weights(_IDS, 20, seed=1)).all()  # same call, same weights
    # any split into batches, any order, other dtypes of the same strings
    order = np.random.default_rng(0).permutation(len(_IDS))
    parts = [poisson_weights(_IDS[order][a:b], 20, seed=1) for a, b in [(0, 1), (1, 7000), (7000, 20_000)]]
    assert (np.concatenate(parts) == w[order]).all()
    assert (poisson_weights(_IDS.astype(str), 20, seed=1) == w).all()
    # fewer replicates are a prefix of more
    assert (poisson_weights(_IDS, 5, seed=1) == w[:, :5]).all()


def test_poisson_weights_differ_across_seeds_replicates_and_units():
    a, b = poisson_weights(_IDS, 10, seed=1), poisson_weights(_IDS, 10, seed=2)
    assert (a != b).mean() > 0.5  # two independent Poisson(1): P(equal) = sum p_k^2 ~ 0.31
    assert np.corrcoef(a[:, 0], b[:, 0])[0, 1] == pytest.approx(0.0, abs=0.03)
    assert np.corrcoef(a[:, 0], a[:, 1])[0, 1] == pytest.approx(0.0, abs=0.03)


def test_hash_units_depends_on_the_whole_string():
    h = hash_units(np.array(["a", "ab", "ba", "b", "", "é", "user_1", "user_10"]))
    assert len(set(h.tolist())) == 8
    assert hash_units(np.array(["ab", "x" * 40]))[0] == hash_units(np.array(["ab"]))[0]  # padding is not content


def test_bootstrap_se_of_a_mean_is_close_to_the_t_se():
    rng = np.random.default_rng(9)
    x = rng.exponential(1.0, 20_000)
    w = poisson_weights(_IDS, 200, seed=3).astype(float)
    reps = (w * x[:, None]).sum(0) / w.sum(0)
    got = bootstrap_interval(x.mean(), reps)
    assert got.se == pytest.approx(x.std(ddof=1) / math.sqrt(len(x)), rel=0.15)  # sd of a 200-rep SE ~ 5%


def test_mean_stats_merge_with_an_empty_part_or_without_m2():
    # an empty part (n = 0, mean NaN) adds nothing: m2 of 2, 4 stays 2, not NaN
    s = MeanStats.from_values(np.array([2.0, 4.0]))
    empty = MeanStats(0.0, 0.0, 0.0, 0.0)
    for merged in (s.merge(empty), empty.merge(s)):
        assert (merged.n, merged.sum, merged.sum_sq, merged.m2, merged.var) == (2.0, 6.0, 20.0, 2.0, 2.0)
    both_empty = empty.merge(empty)
    assert (both_empty.n, both_empty.m2) == (0.0, 0.0)
    # a part known only by its sums (no m2): the merge has no m2, and the variance comes from the sums
    no_m2 = MeanStats(2.0, 6.0, 20.0)  # 2, 4
    for merged in (
        no_m2.merge(MeanStats.from_values(np.array([6.0]))),
        MeanStats.from_values(np.array([6.0])).merge(no_m2),
    ):
        assert merged.m2 is None
        assert (merged.n, merged.mean, merged.var) == (3.0, 4.0, 4.0)


def test_mean_stats_from_weighted_values_equal_the_repeated_values():
    # bootstrap weights: each unit counts w times; a NaN value is dropped together with its weight
    got = MeanStats.from_values(np.array([1.0, 2.0, np.nan, 4.0]), weights=np.array([2, 0, 5, 1], dtype=np.uint8))
    assert got == MeanStats.from_values(np.array([1.0, 1.0, 4.0]))
    assert (got.n, got.sum, got.sum_sq, got.m2) == (3.0, 6.0, 18.0, 6.0)
    # no value at all: n 0 and m2 0; None (an object column's null) is missing like NaN
    assert MeanStats.from_values(np.array([np.nan])) == MeanStats(0.0, 0.0, 0.0, 0.0)
    assert MeanStats.from_values([1.0, None, 3.0]) == MeanStats.from_values(np.array([1.0, 3.0]))


def test_t_interval_from_two_units_and_ratio_stats_with_weights():
    two = t_interval(MeanStats.from_values(np.array([1.0, 3.0])))  # mean 2, sd sqrt 2, se 1, t(.975, 1)
    assert (two.method, two.value, two.se) == ("t", 2.0, 1.0)
    assert two.ci_high == pytest.approx(2.0 + st.t.ppf(0.975, 1))
    assert t_interval(MeanStats(0.0, 0.0, 0.0)) == Interval(None, None, None, None, "none")
    # bootstrap weights: each unit counts w times
    got = RatioStats.from_values(
        np.array([1.0, 0.0, 2.0]), np.array([3.0, 1.0, 4.0]), np.array([2, 0, 1], dtype=np.uint8)
    )
    assert got == RatioStats.from_values(np.array([1.0, 1.0, 2.0]), np.array([3.0, 3.0, 4.0]))


# --- the bootstrap's hashing, against a plain-Python reference (pins every constant and step) -----------
_M64 = (1 << 64) - 1


def _splitmix64_ref(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _hash_unit_ref(unit: str) -> int:
    """FNV-1a over the id's code points (one 32-bit word each), then splitmix64(h xor splitmix64(length))."""
    h = 0xCBF29CE484222325
    for ch in unit:
        h = ((h ^ ord(ch)) * 0x100000001B3) & _M64
    return _splitmix64_ref(h ^ _splitmix64_ref(len(unit)))


def _poisson_ref(unit: str, replicate: int, seed: int) -> int:
    key = _splitmix64_ref(_hash_unit_ref(unit) ^ _splitmix64_ref(seed & _M64))
    bits = _splitmix64_ref((key + (replicate + 1) * 0x9E3779B97F4A7C15) & _M64)
    u = (bits >> 11) / 2.0**53
    k, p, cdf = 0, math.exp(-1.0), math.exp(-1.0)  # the Poisson(1) inverse CDF, the first k with F(k) > u
    while cdf <= u:
        k += 1
        p /= k
        cdf += p
    return k


UNITS = ["u1", "abc", "", "user-0042", "é😀x", "7" * 40]


def test_hash_units_matches_a_plain_python_fnv_splitmix_reference():
    got = hash_units(np.array(UNITS))
    assert [int(v) for v in got] == [_hash_unit_ref(u) for u in UNITS]
    # integers are hashed as their decimal strings; an empty array gives an empty hash
    assert int(hash_units(np.array([12345]))[0]) == _hash_unit_ref("12345")
    assert hash_units(np.array([], dtype=str)).shape == (0,)


def test_poisson_weights_match_the_reference_per_unit_replicate_and_seed():
    for seed in (0, 7, -3):
        w = poisson_weights(np.array(UNITS), 6, seed)
        assert w.dtype == np.uint8 and w.shape == (len(UNITS), 6)
        assert w.tolist() == [[_poisson_ref(u, r, seed) for r in range(6)] for u in UNITS]
    assert poisson_weights(np.array(UNITS), 0, 7).shape == (len(UNITS), 0)
    with pytest.raises(ValueError, match="replicates must be >= 0, got -1"):
        poisson_weights(np.array(UNITS), -1, 7)


def test_a_difference_without_variance_is_infinitely_significant_and_none_is_undefined():
    # se = 0 (every unit of both arms has the same value): a nonzero difference is certain (stat ±inf, p 0),
    # a zero difference undefined (NaN); the relative lift keeps its delta-method se, here 0 too
    c = MeanStats.from_values(np.array([2.0, 2.0, 2.0]))
    up, down, same = (MeanStats.from_values(np.array([v] * 3)) for v in (3.0, 1.0, 2.0))
    for treatment, sign in ((up, 1.0), (down, -1.0)):
        r = welch(c, treatment)
        assert r.se == 0.0 and r.delta == sign and r.p_value == 0.0
        assert (r.ci_low, r.ci_high) == (sign, sign) and r.rel_se == 0.0 and r.rel_delta == sign / 2
        assert math.isnan(r.rel_p_value)
    r = welch(c, same)
    assert r.delta == 0.0 and math.isnan(r.p_value)
    # a control mean of 0: no relative lift, no relative se
    zero = MeanStats.from_values(np.array([0.0, 1.0, -1.0]))
    r = welch(zero, MeanStats.from_values(np.array([1.0, 2.0, 0.0])))
    assert math.isnan(r.rel_delta) and math.isnan(r.rel_se) and r.se == pytest.approx(math.sqrt(2 / 3))


# --- edges the mutation run found unpinned (docs/mutation.md, fourth session) ---------------------------------
@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, -0.1])
def test_confidence_outside_the_open_unit_interval_is_refused(confidence):
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
        t_interval(MeanStats.from_values(np.array([1.0, 2.0, 3.0])), confidence)


def test_welch_with_two_units_per_arm_has_satterthwaite_df():
    # the smallest arms with a variance: n = 2 each; df by hand, t and p as scipy's Welch test
    c, t = np.array([1.0, 3.0]), np.array([2.0, 7.0])
    r = welch(MeanStats.from_values(c), MeanStats.from_values(t))  # the default confidence, 0.95
    vc, vt = 2.0 / 2, 12.5 / 2  # s² / n
    assert r.df == pytest.approx((vc + vt) ** 2 / (vc**2 / 1 + vt**2 / 1), rel=1e-12)
    ref = st.ttest_ind(t, c, equal_var=False)
    assert r.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    half = st.t.ppf(0.975, r.df) * math.sqrt(vc + vt)
    assert (r.ci_low, r.ci_high) == pytest.approx((r.delta - half, r.delta + half), rel=1e-12)
    assert welch(MeanStats.from_values(c), MeanStats.from_values(t), 0.95) == r


def test_welch_without_variance_in_either_arm_has_infinite_df_and_a_normal_quantile():
    # constant arms: both variances 0, Satterthwaite's denominator 0 -> df = inf; the difference is certain
    r = welch(MeanStats.from_values(np.array([1.0, 1.0, 1.0])), MeanStats.from_values(np.array([2.0, 2.0])))
    assert r.df == math.inf and r.delta == 1.0 and r.se == 0.0
    assert (r.ci_low, r.ci_high) == (1.0, 1.0) and r.p_value == 0.0


def test_welch_with_one_unit_in_an_arm_is_nan():
    r = welch(MeanStats.from_values(np.array([1.0])), MeanStats.from_values(np.array([2.0, 4.0])))
    assert math.isnan(r.df) and math.isnan(r.se) and math.isnan(r.p_value) and math.isnan(r.ci_low)


def test_ratio_difference_welch_reports_its_df_and_refuses_an_unknown_quantile():
    c = RatioStats.from_values(np.array(C_CLICKS, float), np.array(C_IMPR, float))
    t = RatioStats.from_values(np.array(T_CLICKS, float), np.array(T_IMPR, float))
    vc, vt = c.var_ratio, t.var_ratio
    r = ratio_difference(c, t, quantile="welch")
    assert r.df == pytest.approx((vc + vt) ** 2 / (vc**2 / 5 + vt**2 / 5), rel=1e-12)
    assert ratio_difference(c, t).df is None  # normal quantile: no df
    with pytest.raises(ValueError, match="quantile must be 'normal' or 'welch', got 'z'"):
        ratio_difference(c, t, quantile="z")


def test_bootstrap_interval_is_symmetric_around_the_value_and_keeps_the_value_without_replicates():
    reps = np.array([0.4, 0.5, 0.6, 0.55])
    r = bootstrap_interval(0.52, reps, 0.9)
    se = float(np.std(reps, ddof=1))
    half = st.norm.ppf(0.95) * se
    assert r == Interval(
        0.52, pytest.approx(se, rel=1e-12), pytest.approx(0.52 - half), pytest.approx(0.52 + half), "bootstrap"
    )
    assert isinstance(r.value, float)
    few = bootstrap_interval(0.52, np.array([0.4, np.nan]))  # one finite replicate: no interval, the value kept
    assert few == Interval(0.52, None, None, None, "none")


def test_adjust_p_checks_its_method_even_without_p_values():
    assert adjust_p([], "bh").tolist() == [] and adjust_p([], "holm").tolist() == []
    assert np.isnan(adjust_p([np.nan], "bh")).all()
    for p in ([], [np.nan], [0.5], [0.01, 0.2]):
        with pytest.raises(ValueError, match="method must be 'holm', 'bh' or 'none', got 'BH'"):
            adjust_p(p, "BH")


# --------------------------------------------------------------------------- sums that overflow a double


def test_a_sum_that_overflows_gives_no_interval_and_a_note_never_se_0():
    """Per-user values 1e200 and 0: Σx = 1e200 is a double, Σx² = 1e400 is not.  The old rounding guard
    read Σx² − (Σx)²/n = inf − inf = NaN as within rounding: variance 0, se 0, a zero-width interval."""
    mean = MeanStats(2.0, 1e200, math.inf)
    got = t_interval(mean)
    assert (got.value, got.se, got.ci_low, got.method) == (5e199, None, None, "none")
    assert got.note == "Σx² = inf"
    ratio = delta_interval(RatioStats(2.0, 1e200, 2.0, math.inf, 2.0, 1e200), names=("value", "exposures"))
    assert (ratio.value, ratio.se, ratio.note) == (5e199, None, "Σ value² = inf")
    summed = delta_interval(RatioStats(2.0, math.inf, 2.0, math.inf, 2.0, math.inf), names=("value", "1"))
    assert (summed.value, summed.se, summed.note) == (None, None, "Σ value = inf")  # inf is not a value
    assert Interval.none(1.0, "why") == Interval.none(1.0)  # the note is not part of the numbers
    from recsys_spark.kernels.sums import _above_rounding, non_finite

    assert math.isnan(_above_rounding(math.nan, math.inf, 2.0)) and _above_rounding(1e-20, 1.0, 2.0) == 0.0
    assert non_finite({"Σx": 1.0, "Σx²": math.inf}) == "Σx² = inf" and non_finite({"a": None, "b": 2.0}) is None


def test_a_comparison_of_values_past_1e154_has_no_interval_and_raises_nothing():
    """Welch on arms whose mean is 1e200: (1e200)² overflowed with OverflowError (a float power raises where
    a product is inf) and stopped the day; now the comparison has no standard error and no p-value."""
    control, treatment = MeanStats.from_values(np.array([1.0, 2.0, 3.0])), MeanStats(3.0, 3e200, math.inf)
    comp = welch(control, treatment)
    assert math.isnan(comp.se) and math.isnan(comp.p_value) and comp.delta == pytest.approx(1e200)
    flat, huge = RatioStats(3.0, 3.0, 3.0, 3.0, 3.0, 3.0), RatioStats(3.0, 3e200, 3.0, math.inf, 3.0, 3e200)
    ratio = ratio_difference(flat, huge)
    assert math.isnan(ratio.se) and math.isnan(ratio.p_value)


def test_business_intervals_name_the_value_that_overflowed():
    from recsys_spark.kernels.business import Measured
    from recsys_spark.kernels.intervals import business_intervals

    stats = {"uv": 2, "users_exposed": 2, "exposures": 4, "exposures*exposures": 8, "pv": 2, "pv*pv": 2}
    stats |= {"value": 1e200, "value*value": math.inf, "value*exposures": 2e200, "value*pv": 1e200, "uv_valued": 1}
    got = business_intervals(stats, measured=Measured(value=True))
    assert got[("gmv_per_user", "global")].se is None and got[("gmv_per_exposure", "global")].se is None
    assert got[("gmv_per_exposure", "global")].note == "Σ value² = inf"
    assert got[("exposure_ctr", "global")].note is None
    from recsys_spark.kernels.intervals import overflow_notes

    (note,) = overflow_notes({"all": got})
    assert note.startswith(
        "no interval for gmv_per_exposure, gmv_per_request, gmv_per_user, value_per_converting_user (slices all): "
        "a sum overflows a double (Σ value² = inf)"
    )
