"""ROC and PR curves from a run-length histogram: hand-computed, scikit-learn's points, and the subset above
the bound (true vertices, its size, its area within 1 / (2 C) of the exact AUC)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import precision_recall_curve, roc_auc_score, roc_curve

from recsys_spark.kernels.auc import sorted_histogram
from recsys_spark.kernels.curve_summary import curves_from_histogram, score_bins
from recsys_spark.kernels.curves import (
    area_bound,
    cell_of,
    cells,
    exact_curves,
    pr_from_histogram,
    roc_from_histogram,
    roc_vertex_mask,
    subset_mask,
    trapezoid_area,
)
from tests.helpers.obp_golden import obd_logged, obd_target

BIG = 10**9  # a bound no test day reaches: the exact curves


def histogram(labels, scores):
    order = np.argsort(scores, kind="stable")
    return sorted_histogram(np.asarray(scores, dtype=float)[order], np.asarray(labels)[order])


def curves(labels, scores, bound=BIG):
    values, pos, neg = histogram(labels, scores)
    return curves_from_histogram(values, pos, neg, bound, score_bins(values, 1024))


def assert_matches_sklearn(labels, scores):
    got = curves(labels, scores)
    fpr, tpr, thr = roc_curve(labels, scores, drop_intermediate=True)
    np.testing.assert_array_equal(got.roc.x, fpr)
    np.testing.assert_array_equal(got.roc.y, tpr)
    assert np.isinf(thr[0]) and np.isnan(got.roc.threshold[0])  # sklearn's inf is our null
    np.testing.assert_array_equal(got.roc.threshold[1:], thr[1:])
    precision, recall, pthr = precision_recall_curve(labels, scores)
    np.testing.assert_allclose(got.pr.y, precision, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(got.pr.x, recall)
    np.testing.assert_array_equal(got.pr.threshold[:-1], pthr)
    assert np.isnan(got.pr.threshold[-1])
    assert trapezoid_area(got.roc.x, got.roc.y) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_hand_computed_curves_with_a_tie():
    # scores 0.9 (pos), 0.5 (pos, neg: a tie), 0.1 (neg): P = 2, N = 2
    got = curves([1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1])
    # ROC: origin; >= .9: (0, 1/2); >= .5: (1/2, 1); >= .1: (1, 1); steps (0,1) (1,1) (1,0) all differ
    assert got.roc.x.tolist() == [0.0, 0.0, 0.5, 1.0]
    assert got.roc.y.tolist() == [0.0, 0.5, 1.0, 1.0]
    # area: 0 + 1/2 * (1/2 + 1) / 2 + 1/2 * 1 = 0.875 = (1 + 1 + 1 + 1/2) / 4 pairs
    assert trapezoid_area(got.roc.x, got.roc.y) == 0.875
    # PR ascending thresholds: .1 -> 2/4, .5 -> 2/3, .9 -> 1/1, then (0, 1)
    assert got.pr.threshold[:-1].tolist() == [0.1, 0.5, 0.9]
    assert got.pr.x.tolist() == [1.0, 1.0, 0.5, 0.0]
    assert got.pr.y.tolist() == [0.5, 2 / 3, 1.0, 1.0]


def test_drop_intermediate_drops_a_point_between_equal_steps():
    # descending: .9 pos, .8 neg, .7 neg, .6 pos: the step into .8 (1 neg) equals the step into .7: .8 dropped
    got = curves([1, 0, 0, 1], [0.9, 0.8, 0.7, 0.6])
    assert got.roc.threshold[1:].tolist() == [0.9, 0.7, 0.6]
    assert got.exact_roc_points == 4 and got.exact_pr_points == 5


def test_one_class_only_has_no_curve():
    assert curves([1, 1, 1], [0.1, 0.2, 0.3]) is None
    assert curves([0, 0], [0.1, 0.2]) is None
    assert curves([], []) is None


def test_all_scores_equal_is_the_diagonal():
    got = curves([1, 0, 0, 1, 0], [0.3] * 5)
    assert got.roc.x.tolist() == [0.0, 1.0] and got.roc.y.tolist() == [0.0, 1.0]
    assert got.pr.x.tolist() == [1.0, 0.0] and got.pr.y.tolist() == [0.4, 1.0]
    assert_matches_sklearn([1, 0, 0, 1, 0], [0.3] * 5)


@pytest.mark.parametrize("seed", range(6))
def test_matches_scikit_learn_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 3000))
    labels = (rng.random(n) < rng.uniform(0.02, 0.6)).astype(int)
    labels[:2] = [0, 1]
    digits = int(rng.integers(0, 4))  # from 11 distinct scores to thousands
    scores = np.round(rng.random(n) + 0.4 * labels, digits)
    assert_matches_sklearn(labels, scores)


def test_matches_scikit_learn_on_the_open_bandit_sample():
    logged = obd_logged()
    clicks = logged["click"].to_numpy()
    # the logged propensity: one value for every row (uniform random logging): the diagonal
    assert_matches_sklearn(clicks, logged["propensity"].to_numpy())
    # a score: the Bernoulli TS candidate's q_hat of the shown (item, position), many ties
    q = obd_target("bts").set_index(["item", "position"])["q_hat"]
    scores = q.reindex(list(zip(logged["item"], logged["position"], strict=True))).to_numpy()
    scores = np.nan_to_num(scores, nan=-1.0)  # a pair the candidate never shows: below every q_hat
    assert_matches_sklearn(clicks, scores)


def test_subset_mask_keeps_each_cells_first_and_last():
    assert subset_mask(np.array([0, 0, 0, 1, 3, 3])).tolist() == [True, False, True, True, True, True]
    assert subset_mask(np.array([2])).tolist() == [True]


@pytest.mark.parametrize("bound", [5, 11, 101])
def test_the_subset_is_true_vertices_within_the_bound_and_its_area_close(bound):
    rng = np.random.default_rng(bound)
    n = 20000
    labels = (rng.random(n) < 0.1).astype(int)
    scores = rng.normal(size=n) + labels
    exact = curves(labels, scores)
    got = curves(labels, scores, bound)
    assert len(got.roc) <= bound and len(got.pr) <= bound
    assert got.exact_roc_points == len(exact.roc) and got.exact_pr_points == len(exact.pr)
    # every written point is a point of the exact curve, with its own threshold
    exact_roc = set(zip(exact.roc.threshold[1:], exact.roc.x[1:], exact.roc.y[1:], strict=True))
    assert set(zip(got.roc.threshold[1:], got.roc.x[1:], got.roc.y[1:], strict=True)) <= exact_roc
    exact_pr = set(zip(exact.pr.threshold[:-1], exact.pr.x[:-1], exact.pr.y[:-1], strict=True))
    assert set(zip(got.pr.threshold[:-1], got.pr.x[:-1], got.pr.y[:-1], strict=True)) <= exact_pr
    # the ends are kept
    assert (got.roc.x[-1], got.roc.y[-1]) == (1.0, 1.0) and got.roc.threshold[1] == exact.roc.threshold[1]
    exact_auc = roc_auc_score(labels, scores)
    assert abs(trapezoid_area(got.roc.x, got.roc.y) - exact_auc) <= area_bound(bound)


def test_the_area_bound_is_reached_in_order_of_magnitude_by_a_staircase():
    # alternating single positives and negatives: a staircase of equal steps, the worst case for chords
    n = 2000
    labels = np.tile([1, 0], n // 2)
    scores = -np.arange(n, dtype=float)
    got = curves(labels, scores, 11)  # C = 5 cells, bound 1/10
    area = trapezoid_area(got.roc.x, got.roc.y)
    assert abs(area - roc_auc_score(labels, scores)) <= area_bound(11)


def test_cell_of_is_clamped_to_the_last_cell():
    assert cell_of(np.array([0.0, 5.0, 10.0]), np.array([0.0, 5.0, 10.0]), 10.0, 10.0, 11).tolist() == [0, 2, 4]


def test_each_exact_curve_is_sklearns_on_a_histogram_with_ties():
    rng = np.random.default_rng(21)
    labels = (rng.random(300) < 0.3).astype(int)
    scores = np.round(rng.normal(size=300) + labels, 1)
    scores[0], labels[0] = scores.min() - 1.0, 1  # a positive alone at the lowest score
    order = np.argsort(scores, kind="stable")
    values, pos, neg = sorted_histogram(scores[order], labels[order])
    fpr, tpr, thr = roc_curve(labels, scores)
    roc = roc_from_histogram(values, pos, neg)
    np.testing.assert_allclose(roc.x, fpr)
    np.testing.assert_allclose(roc.y, tpr)
    np.testing.assert_array_equal(roc.threshold[1:], thr[1:])
    precision, recall, pr_thr = precision_recall_curve(labels, scores)
    pr = pr_from_histogram(values, pos, neg)
    np.testing.assert_allclose(pr.x, recall)
    np.testing.assert_allclose(pr.y, precision)
    np.testing.assert_array_equal(pr.threshold[:-1], pr_thr)


def test_small_helpers_by_hand():
    assert (cells(6), cells(7), area_bound(6)) == (2, 3, 0.25)  # an even bound: (6 - 1) // 2 = 2 cells
    # P = N = 4, bound 9: C = 4, h = 0.5; s = 0, 0.5, 1.25, 2 -> cells 0, 1, 2, 3 (the last clipped to C - 1)
    got = cell_of(np.array([0, 1, 2, 4]), np.array([0, 1, 3, 4]), 4.0, 4.0, 9)
    assert got.tolist() == [0, 1, 2, 3] and got.dtype == np.int64
    # three points, the middle one's step equals the last's: no vertex (two points are both vertices)
    assert roc_vertex_mask(np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 1.0])).tolist() == [True, False, True]
    assert roc_vertex_mask(np.array([0.0, 0.0]), np.array([1.0, 1.0])).tolist() == [True, True]
    assert subset_mask(np.zeros(0, np.int64)).dtype == bool  # a mask even when empty (it indexes arrays)
    # one positive and one negative: both curves exist
    one = exact_curves(np.array([0.2, 0.8]), np.array([0.0, 1.0]), np.array([1.0, 0.0]))
    assert one.roc.x.tolist() == [0.0, 0.0, 1.0] and one.roc.y.tolist() == [0.0, 1.0, 1.0]
