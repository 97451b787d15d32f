"""Health and business kernels (no Spark): hand-computed cases, edge cases and invariants."""

from __future__ import annotations

import doctest
import math
import sys

import numpy as np
import pytest
from helpers import health_golden as golden
from helpers.health_reference import (
    entropy_sums,
    gini_per_item,
    histogram_of,
    normalised_entropy,
    novelty_per_item,
    overlap_sums,
    personalization_pairs,
)

from recsys_spark.kernels import business as business_kernels
from recsys_spark.kernels import health as health_kernels
from recsys_spark.kernels.business import Measured, business_values
from recsys_spark.kernels.health import (
    category_diversity,
    gini_from_histogram,
    health_values,
    lorenz_curve,
    novelty,
    personalization,
    popularity_thresholds,
)


def gini(counts) -> float:
    """Gini of raw counts through the production kernel (the histogram the Spark layer collects)."""
    return gini_from_histogram(*histogram_of(counts))


@pytest.mark.parametrize("module", [health_kernels, business_kernels])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


# --- Gini ---------------------------------------------------------------------------------------
def test_gini_of_the_seed_examples():
    assert gini([1, 1, 1, 1]) == 0.0
    assert gini([0, 0, 0, 1]) == 1.0


def test_gini_of_one_item_is_zero_and_of_nothing_is_nan():
    assert gini([5]) == 0.0  # one item: defined as 0 (0 / 0 otherwise)
    assert gini([0]) != gini([0])  # no exposures: NaN
    assert math.isnan(gini([]))


def test_gini_hand_computed():
    # ascending 0 1 1 1 1 2 3 (n 7, T 9): coefficients -6 -4 -2 0 2 4 6 -> 0 - 4 - 2 + 0 + 2 + 8 + 18 = 22
    assert gini([3, 1, 2, 0, 1, 1, 1]) == pytest.approx(22 / (6 * 9))


def test_gini_from_histogram_matches_raw_counts_and_stays_in_0_1():
    rng = np.random.default_rng(3)
    for _ in range(50):
        counts = rng.integers(0, 6, rng.integers(2, 40))
        if counts.sum() == 0:
            continue
        expected = gini_per_item(counts)  # the formula, per item
        assert gini(counts) == pytest.approx(expected)
        assert 0.0 <= gini(counts) <= 1.0 + 1e-12


# --- Lorenz -------------------------------------------------------------------------------------
def test_lorenz_with_few_items_returns_every_vertex():
    x, y = lorenz_curve(*histogram_of([3, 1, 2, 0, 1, 1, 1]), 101)
    assert x.tolist() == pytest.approx([px for px, _ in golden.LORENZ_ALL])
    assert y.tolist() == pytest.approx([py for _, py in golden.LORENZ_ALL])


def test_lorenz_points_are_exact_vertices_at_the_nearest_rank():
    counts = np.random.default_rng(1).integers(0, 50, 1000)
    x, y = lorenz_curve(*histogram_of(counts), 11)
    cum = np.r_[0, np.cumsum(np.sort(counts))] / counts.sum()  # every vertex, brute force
    assert len(x) == 11 and (x[0], y[0]) == (0.0, 0.0) and (x[-1], y[-1]) == (1.0, 1.0)
    ranks = np.rint(x * 1000).astype(int)
    assert ranks.tolist() == list(range(0, 1001, 100))  # grid 0, .1, .., 1 hits ranks exactly
    assert y == pytest.approx(cum[ranks])  # on the curve, not interpolated


def test_lorenz_rank_rounding_is_half_up_and_points_are_distinct():
    # 4 items, 4 points: grid ranks 0, 4/3, 8/3, 4 -> 0, 1, 3, 4
    x, y = lorenz_curve(*histogram_of([1, 2, 3, 4]), 4)
    assert x.tolist() == [0.0, 0.25, 0.75, 1.0]
    assert y == pytest.approx([0, 1 / 10, 6 / 10, 1])


def test_lorenz_of_one_item_and_of_nothing():
    x, y = lorenz_curve(*histogram_of([4]), 101)
    assert x.tolist() == [0.0, 1.0] and y.tolist() == [0.0, 1.0]
    assert len(lorenz_curve(*histogram_of([0, 0]), 101)[0]) == 0


# --- category diversity, from N = sum c and S = sum c ln c -----------------------------------------
def diversity(counts, k) -> float:
    return category_diversity(*entropy_sums(counts), k)


def test_category_diversity_edge_cases():
    assert diversity([7], 1) == 0.0  # one category: 0 by definition
    assert diversity([3, 3, 3], 3) == pytest.approx(1.0)
    assert diversity([3, 3, 3], 4) == pytest.approx(math.log(3) / math.log(4))  # K from the catalog
    assert diversity([5, 0], 2) == 0.0
    assert math.isnan(diversity([], 3))
    assert math.isnan(category_diversity(0, 0.0, 1))  # no exposures: NaN even with one category


def test_category_diversity_hand_computed():
    # counts 2, 1, 1 of K = 4: N = 4, S = 2 ln 2; H = ln 4 - 2 ln 2 / 4 = 1.5 ln 2; ln 4 = 2 ln 2
    assert category_diversity(4, 2 * math.log(2), 4) == pytest.approx(0.75)
    # counts 4, 3, 1, 1 of K = 4 (the golden day)
    assert category_diversity(9, 4 * math.log(4) + 3 * math.log(3), 4) == pytest.approx(
        golden.EXPECTED_ALL[("category_diversity", "global")]
    )


def test_category_diversity_equals_the_term_by_term_entropy():
    rng = np.random.default_rng(5)
    for _ in range(50):
        counts = rng.integers(0, 9, rng.integers(1, 8))
        if counts.sum() == 0:
            continue
        k = int(rng.integers(len(counts), len(counts) + 3))
        assert diversity(counts, k) == pytest.approx(normalised_entropy(counts, k))


# --- personalization, novelty, popularity -------------------------------------------------------
def test_personalization_equals_the_all_pairs_definition():
    rng = np.random.default_rng(7)
    for _ in range(30):
        sets = [set(rng.choice(12, rng.integers(1, 6), replace=False).tolist()) for _ in range(rng.integers(2, 9))]
        assert personalization(*overlap_sums(sets)) == pytest.approx(personalization_pairs(sets))


def test_personalization_bounds_and_hand_computed():
    assert personalization(3 * 3 * 2, 9, 3) == 0.0  # 3 users saw the same 3 items: c = 3, 3, 3
    assert personalization(0, 3, 3) == 1.0  # nobody shares an item: c = 1, 1, 1
    assert math.isnan(personalization(0, 2, 1))  # one user: no pair
    assert math.isnan(personalization(0, 0, 3))  # no user-item pairs
    # golden: {a b c d e m} and {a c}: c_a = c_c = 2, four items with c = 1: 1 - (2 + 2) / ((2 - 1) * 8)
    assert personalization(4, 8, 2) == 0.5
    # 3 users {a b}, {b c}, {b}: c = 1, 3, 1; overlap 6, pairs 5: 1 - 6 / (2 * 5)
    assert personalization(*overlap_sums([{"a", "b"}, {"b", "c"}, {"b"}])) == pytest.approx(0.4)


def test_novelty_hand_computed_and_edges():
    # exposures a 3, c 2, b d e m 1; clickers k_a = k_c = 2 of U = 3: log2 4 - (3 log2 3 + 2 log2 3) / 9
    value = novelty(5 * math.log2(3), 9, 3)
    assert value == pytest.approx(2 - 5 * math.log2(3) / 9)
    assert value == pytest.approx(novelty_per_item([3, 2, 1, 1, 1, 1], [2, 2, 0, 0, 0, 0], 3))
    assert math.isnan(novelty(0.0, 1, 0))  # nobody clicked in the window
    assert math.isnan(novelty(0.0, 0, 3))  # no exposures
    assert novelty(math.log2(6), 1, 5) == 0.0  # an item every clicker clicked
    assert novelty(0.0, 4, 7) == 3.0  # items nobody clicked: log2(7 + 1)


def test_novelty_equals_the_item_by_item_mean():
    rng = np.random.default_rng(11)
    for _ in range(30):
        e = rng.integers(0, 5, 10).astype(float)
        u = int(rng.integers(1, 6))
        k = rng.integers(0, u + 1, 10).astype(float)
        if e.sum() == 0:
            continue
        assert novelty(float(np.dot(e, np.log2(k + 1))), e.sum(), u) == pytest.approx(novelty_per_item(e, k, u))


def test_popularity_buckets_keep_ties_together_and_unexposed_items_in_the_tail():
    head_min, tail_max = popularity_thresholds([4, 2, 1, 0], [1, 2, 4, 3], 0.2, 0.2)
    # T = 12; share above: 4 -> 0, 2 -> 4/12, 1 -> 8/12, 0 -> 1
    assert head_min == 4 and tail_max == 0
    head_min, tail_max = popularity_thresholds([4, 2, 1], [1, 2, 4], 0.5, 0.5)  # 2 -> .33 < .5; 1 -> .67 >= .5
    assert head_min == 2 and tail_max == 1


def test_popularity_cut_offs_exactly_on_the_boundary_share():
    # counts 3 and 1 (T = 4): the items above 1 take 3/4 of the exposures, above 3 nothing.
    # head_share 3/4: 1 is not head (3/4 is not < 3/4); tail_share 1/4: 1 is tail (3/4 >= 1 - 1/4)
    assert popularity_thresholds([3, 1], [1, 1], 0.75, 0.25) == (3.0, 1.0)
    # just past each boundary the other way
    assert popularity_thresholds([3, 1], [1, 1], 0.875, 0.125) == (1.0, -1.0)
    # nothing exposed: no head, everything tail
    assert popularity_thresholds([0], [5], 0.5, 0.5) == (math.inf, 0.0)


def test_popularity_cut_offs_ignore_counts_that_no_item_has():
    # ascending 1 (3 items), 2 (no item), 4 (1 item), T = 7: above 1 is 4/7, above 4 nothing.
    # tail_share 0.45: tail when above >= 0.55, i.e. count 1 only (a count no item has is no cut-off)
    assert popularity_thresholds([4, 2, 1], [1, 0, 3], 0.5, 0.45) == (4.0, 1.0)


@pytest.mark.parametrize("head, tail", [(0.0, 0.5), (0.5, 0.0), (0.6, 0.5), (1.0, 0.0), (-0.1, 0.5)])
def test_popularity_shares_out_of_range_are_refused(head, tail):
    with pytest.raises(ValueError, match=r"need 0 < head_share, tail_share < 1 and head_share \+ tail_share <= 1"):
        popularity_thresholds([1], [1], head, tail)


def test_histograms_are_validated():
    with pytest.raises(ValueError, match="values and items must have the same length"):
        gini_from_histogram([1, 2], [1])
    with pytest.raises(ValueError, match="counts must be >= 0"):
        gini_from_histogram([-1, 2], [1, 1])
    with pytest.raises(ValueError, match="counts must be >= 0"):
        gini_from_histogram([1, 2], [1, -1])


def test_lorenz_needs_two_points_and_two_suffice():
    x, y = lorenz_curve([1, 3], [2, 1], 2)  # counts 1, 1, 3: only the ends
    assert x.tolist() == [0.0, 1.0] and y.tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="max_points must be at least 2"):
        lorenz_curve([1], [1], 1)
    x, y = lorenz_curve([0], [3], 5)  # no exposures: no curve at all
    assert len(x) == len(y) == 0


# --- assembly from sums -------------------------------------------------------------------------
def test_business_rows_in_full():
    # E 8, C 2 clicked exposures, K 3 clicks (one exposure clicked twice), PV 4, UV 2, UC 1:
    # (metric, aggregation, value, n, se); the CTRs count clicked exposures, the clicks_per_* rows clicks
    stats = {"exposures": 8, "clicked": 2, "click_events": 3, "pv": 4, "uv": 2, "uv_clicked": 1}
    assert business_values(stats) == [
        ("exposure_ctr", "global", 2 / 8, 8, None),
        ("pv_ctr", "global", 2 / 4, 4, None),
        ("uv_ctr", "global", 2 / 2, 2, None),
        ("uv_conversion", "global", 1 / 2, 2, None),
        ("clicks_per_exposure", "global", 3 / 8, 8, None),
        ("clicks_per_request", "global", 3 / 4, 4, None),
        ("clicks_per_user", "global", 3 / 2, 2, None),
        ("clicks_per_clicking_user", "global", 3 / 1, 1, None),  # the seed's 点击量/点击uv: clicks, not 2 exposures
    ]
    assert business_values({"exposures": None, "pv": 3})[1] == ("pv_ctr", "global", 0.0, 3, None)
    # without click counts (labelled rows from elsewhere) no row counts clicks
    assert [m for m, *_ in business_values(stats, Measured(clicks=False))] == [
        "exposure_ctr",
        "pv_ctr",
        "uv_ctr",
        "uv_conversion",
    ]


def test_value_dwell_and_conversion_rows_by_hand():
    # E 10 exposures, PV 5 requests, UV 4 users of whom UE 3 with an exposure, K 4 clicks; V 50 from 2 users
    # with a value, D 120 s; 3 exposures of 2 users with a purchase
    stats = {
        "exposures": 10,
        "pv": 5,
        "uv": 4,
        "users_exposed": 3,
        "click_events": 4,
        "value": 50.0,
        "uv_valued": 2,
        "dwell": 120.0,
        "ev_purchase": 3,
        "uv_ev_purchase": 2,
    }
    rows = business_values(stats, Measured(clicks=True, value=True, dwell=True, events=("purchase",)))
    got = {m: (v, n) for m, _, v, n, _ in rows}
    assert {m: got[m] for m in list(got)[8:]} == {
        "gmv_per_exposure": (5.0, 10),
        "gmv_per_request": (10.0, 5),
        "gmv_per_user": (50 / 3, 3),  # over the users with an exposure, not the 4 with a request
        "value_per_converting_user": (25.0, 2),
        "dwell_per_click": (30.0, 4),
        "dwell_per_user": (40.0, 3),
        "purchase_user_rate": (2 / 3, 3),
        "purchase_exposure_rate": (3 / 10, 10),
    }
    empty = {m: v for m, _, v, _, _ in business_values({}, Measured(value=True, dwell=True, events=("purchase",)))}
    assert all(v is None for m, v in empty.items() if m != "pv_ctr"), empty


def test_business_rates_and_zero_denominators():
    stats = {"exposures": 9, "clicked": 1, "click_events": 1, "pv": 5, "uv": 3, "uv_clicked": 1}
    rows = {m: v for m, _, v, _, _ in business_values(stats)}
    for (metric, _), value in golden.EXPECTED_ALL.items():
        if metric in rows:
            assert rows[metric] == pytest.approx(value)
    empty = {m: v for m, _, v, _, _ in business_values({"pv": 1, "uv": 1})}
    assert empty["exposure_ctr"] is None and empty["clicks_per_clicking_user"] is None
    assert empty["pv_ctr"] == 0.0


#: the sums the Spark layer collects for the golden day's ``all`` slice (see health_golden), by hand
_LN2 = math.log(2)
GOLDEN_ALL_STATS = {
    "pv": 5,
    "uv": 3,
    "pv_covered": 1,
    "uv_covered": 1,
    "pv_empty": 2,
    "uv_empty": 2,
    "exposures": 9,
    "clicked": 1,
    "uv_clicked": 1,
    "lists": 3,
    "list_h": golden.H_R1 + 2 * _LN2,
    "list_h2": golden.H_R1**2 + 2 * _LN2**2,  # r1, r2, r3
    "users_exposed": 2,
    "user_h": golden.H_U1 + _LN2,
    "user_h2": golden.H_U1**2 + _LN2**2,  # u1, u2
    "cat_n": 9,
    "cat_s": 4 * math.log(4) + 3 * math.log(3),
    "user_overlap": 2 * 1 + 2 * 1,
    "user_items": 8,  # users per item: a 2, c 2, b d e m 1
    "novelty_log": 3 * math.log2(3) + 2 * math.log2(3),  # a (3 exposures) and c (2) clicked by 2 users each
    "returning": 1,
    "update_sum": 4 / 6,
    "update_sum2": (4 / 6) ** 2,
    "update_new": 4,
    "update_items": 6,
    "update_prev": 3,  # u1 was shown a, b, z the day before
    "update_prev_sum": 4 / 3,
    "update_prev_sum2": (4 / 3) ** 2,
}
#: exposure counts per item: a 3, c 2, b d e 1 (catalog), m 1 (not in the catalog)
GOLDEN_ALL_HIST = {(3.0, True): 1.0, (2.0, True): 1.0, (1.0, True): 3.0, (1.0, False): 1.0}


def test_health_values_of_the_golden_day_are_the_hand_computed_values():
    rows, (x, y) = health_values(GOLDEN_ALL_STATS, GOLDEN_ALL_HIST, 6, golden.K, 3, True, 101)
    by = {(m, a): (v, n, se) for m, a, v, n, se in rows}
    assert len(by) == len(rows)  # one row per (metric, aggregation)
    for key, value in golden.EXPECTED_ALL.items():
        if key[0] in ("exposure_ctr", "pv_ctr", "uv_ctr", "uv_conversion", "clicks_per_clicking_user"):
            continue  # business_values' rows
        assert by[key][0] == pytest.approx(value), key
    counts = {key: n for key, (_, n, _) in by.items()}
    assert counts == {
        ("pv", "global"): 5,
        ("uv", "global"): 3,
        ("pv_coverage", "global"): 5,
        ("uv_coverage", "global"): 3,
        ("pv_failure_rate", "global"): 5,
        ("uv_failure_rate", "global"): 3,
        ("gini", "exposed"): 6,
        ("item_coverage", "global"): 6,
        ("gini", "catalog"): 7,
        ("category_diversity", "global"): 9,
        ("category_diversity", "list_avg"): 3,
        ("category_diversity", "user_avg"): 2,
        ("novelty", "global"): 9,
        ("personalization", "global"): 2,
        ("update_rate", "user_avg"): 1,
        ("update_rate", "global"): 6,
        ("update_rate_previous", "user_avg"): 1,
        ("update_rate_previous", "global"): 3,
    }
    # standard errors of the means: sample sd (divisor n - 1) / sqrt(n), divided by ln K.
    # lists H_R1, ln 2, ln 2 (d = H_R1 - ln 2): squared deviations (4 + 1 + 1) d^2 / 9, var d^2 / 3, se |d| / 3
    assert by[("category_diversity", "list_avg")][2] == pytest.approx(abs(golden.H_R1 - _LN2) / 3 / math.log(4))
    # users H_U1, ln 2: sd |d| / sqrt 2, se |d| / 2
    assert by[("category_diversity", "user_avg")][2] == pytest.approx(abs(golden.H_U1 - _LN2) / 2 / math.log(4))
    assert by[("update_rate", "user_avg")][2] is None  # one returning user: no se
    assert all(se is None for (m, a), (_, _, se) in by.items() if a in ("global", "exposed", "catalog"))
    assert x.tolist() == pytest.approx([px for px, _ in golden.LORENZ_ALL])
    assert y.tolist() == pytest.approx([py for _, py in golden.LORENZ_ALL])


def test_health_values_standard_error_of_update_rate():
    # two returning users with update rates 1/2 and 1: mean 3/4, sd 1/(2 sqrt 2), se = sd / sqrt 2 = 1/4
    stats = {
        "pv": 2,
        "uv": 2,
        "returning": 2,
        "update_sum": 1.5,
        "update_sum2": 0.25 + 1.0,
        "update_new": 3,
        "update_items": 4,
    }
    rows, _ = health_values(stats, {}, None, None, None, True, 101)
    by = {(m, a): (v, n, se) for m, a, v, n, se in rows}
    assert by[("update_rate", "user_avg")] == (0.75, 2, pytest.approx(0.25))
    assert by[("update_rate", "global")] == (0.75, 4, None)
    rows, _ = health_values(stats, {}, None, None, None, False, 101)
    assert "update_rate" not in {m for m, *_ in rows}  # no previous day


def test_health_values_of_a_slice_without_exposures():
    # a slice where every request was an empty response
    rows, (x, _) = health_values({"pv": 2, "uv": 1, "pv_empty": 2, "uv_empty": 1}, {}, 6, 4, 3, True, 101)
    by = {(m, a): (v, n) for m, a, v, n, _ in rows}
    assert by[("pv_failure_rate", "global")] == (1.0, 2)
    assert by[("gini", "exposed")] == (None, 0)
    assert by[("gini", "catalog")][0] is None  # no exposures: undefined, not 0
    assert by[("item_coverage", "global")] == (0.0, 6)
    assert by[("category_diversity", "global")][0] is None
    assert by[("personalization", "global")][0] is None
    assert len(x) == 0


def test_health_values_with_a_one_category_catalog_give_zero_diversity():
    # 3 exposures of one item in 2 lists of 1 user; the catalog has one category (K = 1: ln K = 0)
    stats = {"pv": 2, "uv": 1, "exposures": 3, "lists": 2, "users_exposed": 1, "cat_n": 3, "cat_s": 3 * math.log(3)}
    rows, _ = health_values(stats, {(3.0, True): 1.0}, 1, 1, None, False, 101)
    by = {(m, a): (v, n) for m, a, v, n, _ in rows}
    assert by[("category_diversity", "global")] == (0.0, 3)
    assert by[("category_diversity", "list_avg")] == (0.0, 2)
    assert by[("category_diversity", "user_avg")] == (0.0, 1)
    se = {(m, a): e for m, a, _, _, e in rows}
    assert se[("category_diversity", "list_avg")] == 0.0 and se[("category_diversity", "user_avg")] is None
    rows, _ = health_values({**stats, "lists": 0, "users_exposed": 0}, {(3.0, True): 1.0}, 1, 1, None, False, 101)
    none = {(m, a): (v, n, e) for m, a, v, n, e in rows}
    assert none[("category_diversity", "list_avg")] == (None, 0, None)  # no list: undefined, not 0
    assert none[("category_diversity", "user_avg")] == (None, 0, None)
    assert by[("gini", "catalog")] == (0.0, 1) and by[("gini", "exposed")] == (0.0, 1)  # one item
    assert by[("item_coverage", "global")] == (1.0, 1)


def test_health_values_read_null_sums_as_zero():
    # Spark's sum over no row is null: a slice whose requests all had items has pv_empty null, not 0
    rows, _ = health_values(
        {"pv": 2, "uv": 1, "pv_empty": None, "uv_empty": None, "pv_covered": 1}, {}, None, None, None, False, 101
    )
    by = {(m, a): v for m, a, v, _, _ in rows}
    assert by[("pv_failure_rate", "global")] == 0.0 and by[("uv_failure_rate", "global")] == 0.0
    assert by[("pv_coverage", "global")] == 0.5


def test_health_values_with_two_categories_divide_by_ln_2():
    # two lists with entropies ln 2 and 0 over K = 2: list diversities 1 and 0, mean 1/2, se 1/2
    stats = {
        "pv": 2,
        "uv": 1,
        "exposures": 3,
        "lists": 2,
        "list_h": _LN2,
        "list_h2": _LN2**2,
        "users_exposed": 1,
        "user_h": _LN2,
        "user_h2": _LN2**2,
        "cat_n": 2,
        "cat_s": 0.0,
    }
    rows, _ = health_values(stats, {(1.0, True): 2.0}, 2, 2, None, False, 101)
    by = {(m, a): (v, n, e) for m, a, v, n, e in rows}
    assert by[("category_diversity", "global")] == (pytest.approx(1.0), 2, None)
    assert by[("category_diversity", "list_avg")] == (pytest.approx(0.5), 2, pytest.approx(0.5))
    assert by[("category_diversity", "user_avg")] == (pytest.approx(1.0), 1, None)


def test_health_values_with_an_empty_catalog():
    # an items table without rows: K = 0 categories, every exposed item is missing from the catalog
    stats = {"pv": 1, "uv": 1, "exposures": 1, "lists": 1, "users_exposed": 1, "cat_n": 1, "cat_s": 0.0}
    rows, _ = health_values(stats, {(1.0, False): 1.0}, 0, 0, None, False, 101)
    by = {(m, a): (v, n) for m, a, v, n, _ in rows}
    assert by[("category_diversity", "global")] == (0.0, 1) and by[("category_diversity", "list_avg")] == (0.0, 1)
    assert by[("item_coverage", "global")] == (None, 0)


def test_health_values_without_items_table_skip_catalog_metrics():
    rows, _ = health_values(
        {"pv": 1, "uv": 1, "exposures": 2, "users_exposed": 1}, {(1.0, False): 2.0}, None, None, None, False, 101
    )
    names = {(m, a) for m, a, *_ in rows}
    assert ("gini", "exposed") in names
    assert not names & {
        ("gini", "catalog"),
        ("item_coverage", "global"),
        ("category_diversity", "global"),
        ("novelty", "global"),
        ("update_rate", "user_avg"),
    }


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


def test_popularity_shares_must_be_inside_the_unit_interval():
    message = r"^need 0 < head_share, tail_share < 1 and head_share \+ tail_share <= 1$"
    refused = ((1.0, 0.1), (1.5, 0.1), (0.0, 0.1), (0.5, 1.0), (0.5, 0.0), (0.6, 0.5), (math.nan, 0.2), (0.2, math.nan))
    for head, tail in refused:
        with pytest.raises(ValueError, match=message):
            popularity_thresholds([3, 1], [1, 1], head, tail)
    assert popularity_thresholds([3, 1], [1, 1], 0.5, 0.5) == (3.0, 1.0)  # the sum may be exactly 1
    # counts 10, 5, 3, 1 (x2), T = 20; shares above: 0, .5, .75, .9: head < .5, tail >= .5
    assert popularity_thresholds([10, 5, 3, 1], [1, 1, 1, 2], 0.5, 0.5) == (10.0, 5.0)


# ------------------------------------------------------------------- cases from the mutation run (fifth session)
def test_histogram_and_lorenz_refusals_say_why():
    with pytest.raises(ValueError, match="^values and items must have the same length$"):
        lorenz_curve([1, 2], [1], 11)
    with pytest.raises(ValueError, match="^counts must be >= 0$"):
        lorenz_curve([1, -2], [1, 1], 11)
    with pytest.raises(ValueError, match="^max_points must be at least 2$"):
        lorenz_curve([1], [1], 1)
