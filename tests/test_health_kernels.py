"""Health and business kernels (no Spark): hand-computed cases, edge cases and invariants."""

from __future__ import annotations

import math
import sys

import health_golden as golden
import numpy as np
import pytest

from recsys_spark.kernels.business import business_values
from recsys_spark.kernels.health import (
    gini,
    gini_from_histogram,
    health_values,
    histogram_of,
    lorenz_curve,
    normalised_entropy,
    novelty,
    personalization,
    personalization_pairs,
    popularity_thresholds,
)


# --- Gini ---------------------------------------------------------------------------------------
def test_gini_of_the_seed_examples():
    assert gini([1, 1, 1, 1]) == 0.0
    assert gini([0, 0, 0, 1]) == 1.0


def test_gini_of_one_item_is_zero_and_of_nothing_is_nan():
    assert gini([5]) == 0.0           # one item: defined as 0 (0 / 0 otherwise)
    assert gini([0]) != gini([0])     # no exposures: NaN
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
        n = len(counts)
        p = np.sort(counts) / counts.sum()
        expected = np.sum((2 * np.arange(1, n + 1) - n - 1) * p) / (n - 1)   # the formula, per item
        assert gini(counts) == pytest.approx(expected)
        assert gini_from_histogram(*histogram_of(counts)) == pytest.approx(expected)
        assert 0.0 <= gini(counts) <= 1.0 + 1e-12


# --- Lorenz -------------------------------------------------------------------------------------
def test_lorenz_with_few_items_returns_every_vertex():
    x, y = lorenz_curve(*histogram_of([3, 1, 2, 0, 1, 1, 1]), 101)
    assert x.tolist() == pytest.approx([px for px, _ in golden.LORENZ_ALL])
    assert y.tolist() == pytest.approx([py for _, py in golden.LORENZ_ALL])


def test_lorenz_points_are_exact_vertices_at_the_nearest_rank():
    counts = np.random.default_rng(1).integers(0, 50, 1000)
    x, y = lorenz_curve(*histogram_of(counts), 11)
    cum = np.r_[0, np.cumsum(np.sort(counts))] / counts.sum()          # every vertex, brute force
    assert len(x) == 11 and (x[0], y[0]) == (0.0, 0.0) and (x[-1], y[-1]) == (1.0, 1.0)
    ranks = np.rint(x * 1000).astype(int)
    assert ranks.tolist() == list(range(0, 1001, 100))                   # grid 0, .1, .., 1 hits ranks exactly
    assert y == pytest.approx(cum[ranks])                                # on the curve, not interpolated


def test_lorenz_rank_rounding_is_half_up_and_points_are_distinct():
    # 4 items, 4 points: grid ranks 0, 4/3, 8/3, 4 -> 0, 1, 3, 4
    x, y = lorenz_curve(*histogram_of([1, 2, 3, 4]), 4)
    assert x.tolist() == [0.0, 0.25, 0.75, 1.0]
    assert y == pytest.approx([0, 1 / 10, 6 / 10, 1])


def test_lorenz_of_one_item_and_of_nothing():
    x, y = lorenz_curve(*histogram_of([4]), 101)
    assert x.tolist() == [0.0, 1.0] and y.tolist() == [0.0, 1.0]
    assert len(lorenz_curve(*histogram_of([0, 0]), 101)[0]) == 0


# --- entropy ------------------------------------------------------------------------------------
def test_category_diversity_edge_cases():
    assert normalised_entropy([7], 1) == 0.0                 # one category: 0 by definition
    assert normalised_entropy([3, 3, 3], 3) == pytest.approx(1.0)
    assert normalised_entropy([3, 3, 3], 4) == pytest.approx(math.log(3) / math.log(4))  # K from the catalog
    assert normalised_entropy([5, 0], 2) == 0.0
    assert math.isnan(normalised_entropy([], 3))


def test_golden_diversity_from_raw_category_counts():
    k = golden.K
    assert normalised_entropy([4, 3, 1, 1], k) == pytest.approx(golden.EXPECTED_ALL[("category_diversity", "global")])
    lists = [normalised_entropy(c, k) for c in ([2, 2, 1], [1, 1], [1, 1])]
    assert np.mean(lists) == pytest.approx(golden.EXPECTED_ALL[("category_diversity", "list_avg")])
    users = [normalised_entropy(c, k) for c in ([3, 2, 1, 1], [1, 1])]
    assert np.mean(users) == pytest.approx(golden.EXPECTED_ALL[("category_diversity", "user_avg")])


# --- personalization, novelty, popularity -------------------------------------------------------
def test_personalization_equals_the_all_pairs_definition():
    rng = np.random.default_rng(7)
    for _ in range(30):
        sets = [set(rng.choice(12, rng.integers(1, 6), replace=False).tolist()) for _ in range(rng.integers(2, 9))]
        per_item = np.bincount([i for s in sets for i in s])
        assert personalization(per_item, len(sets)) == pytest.approx(personalization_pairs(sets))


def test_personalization_bounds_and_golden():
    assert personalization([3, 3, 3], 3) == 0.0            # everyone saw the same items
    assert personalization([1, 1, 1], 3) == 1.0            # nobody shares an item
    assert math.isnan(personalization([1, 1], 1))          # one user: no pair
    sets = [{"a", "b", "c", "d", "e", "m"}, {"a", "c"}]
    assert personalization_pairs(sets) == golden.EXPECTED_ALL[("personalization", "global")]


def test_novelty_golden_and_edges():
    # exposures a 3, c 2, b d e m 1; clickers k_a = k_c = 2 of U = 3
    value = novelty([3, 2, 1, 1, 1, 1], [2, 2, 0, 0, 0, 0], 3)
    assert value == pytest.approx(golden.EXPECTED_ALL[("novelty", "global")])
    assert math.isnan(novelty([1], [0], 0))                 # nobody clicked in the window
    assert novelty([1], [5], 5) == 0.0                      # an item every clicker clicked


def test_popularity_buckets_keep_ties_together_and_unexposed_items_in_the_tail():
    head_min, tail_max = popularity_thresholds([4, 2, 1, 0], [1, 2, 4, 3], 0.2, 0.2)
    # T = 12; share above: 4 -> 0, 2 -> 4/12, 1 -> 8/12, 0 -> 1
    assert head_min == 4 and tail_max == 0
    head_min, tail_max = popularity_thresholds([4, 2, 1], [1, 2, 4], 0.5, 0.5)   # 2 -> .33 < .5; 1 -> .67 >= .5
    assert head_min == 2 and tail_max == 1


# --- assembly from sums -------------------------------------------------------------------------
def test_business_rates_and_zero_denominators():
    rows = {m: v for m, _, v, _, _ in business_values({"exposures": 9, "clicked": 1, "pv": 5, "uv": 3,
                                                        "uv_clicked": 1})}
    for (metric, _), value in golden.EXPECTED_ALL.items():
        if metric in rows:
            assert rows[metric] == pytest.approx(value)
    empty = {m: v for m, _, v, _, _ in business_values({"pv": 1, "uv": 1})}
    assert empty["exposure_ctr"] is None and empty["clicks_per_clicking_user"] is None
    assert empty["pv_ctr"] == 0.0


def test_health_values_of_a_slice_without_exposures():
    # a slice where every request was an empty response
    rows, (x, _) = health_values({"pv": 2, "uv": 1, "pv_empty": 2, "uv_empty": 1}, {}, 6, 4, 3, True, 101)
    by = {(m, a): (v, n) for m, a, v, n, _ in rows}
    assert by[("pv_failure_rate", "global")] == (1.0, 2)
    assert by[("gini", "exposed")] == (None, 0)
    assert by[("gini", "catalog")][0] is None             # no exposures: undefined, not 0
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
    assert by[("gini", "catalog")] == (0.0, 1) and by[("gini", "exposed")] == (0.0, 1)   # one item
    assert by[("item_coverage", "global")] == (1.0, 1)


def test_health_values_without_items_table_skip_catalog_metrics():
    rows, _ = health_values({"pv": 1, "uv": 1, "exposures": 2, "users_exposed": 1}, {(1.0, False): 2.0},
                            None, None, None, False, 101)
    names = {(m, a) for m, a, *_ in rows}
    assert ("gini", "exposed") in names
    assert not names & {("gini", "catalog"), ("item_coverage", "global"), ("category_diversity", "global"),
                        ("novelty", "global"), ("update_rate", "user_avg")}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
