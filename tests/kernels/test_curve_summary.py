"""The bounded summaries of the score bins (kernels/curve_summary.py): the subset they give is the documented one
(docs/metrics.md, "Curves", checked against a loop that states the definition), whatever the chunks the stream
cuts a bin into; every written point is a true point; the ROC's area is within 1 / (2C) of the exact AUC; the
rows kept are at most 4 (C + B) per key."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from recsys_spark.kernels.auc import sorted_histogram
from recsys_spark.kernels.curve_summary import (
    PR,
    ROC,
    WHOLE,
    BinSummary,
    curves_from_histogram,
    curves_from_summary,
    key_summary,
    score_bins,
    summarize,
)
from recsys_spark.kernels.curves import area_bound, cells, exact_curves, trapezoid_area


def random_day(seed: int):
    """A day of 50 to 5,000 rows, coarse or fine scores on a narrow or wide scale, a random positive rate."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 5000))
    labels = (rng.random(n) < rng.uniform(0.03, 0.6)).astype(int)
    labels[:2] = [0, 1]
    scores = np.round(rng.normal(size=n) * rng.choice([0.3, 3.0, 30.0]) + labels, int(rng.integers(1, 5)))
    order = np.argsort(scores, kind="stable")
    values, pos, neg = sorted_histogram(scores[order], labels[order])
    bins = score_bins(values, int(rng.choice([1, 4, 64, 1024])))
    return rng, labels, scores, (values, pos, neg, bins)


def definition(values, pos, neg, bins, bound):
    """The subset as docs/metrics.md states it, in loops over the exact curves: (ROC thresholds, PR thresholds)."""
    c = cells(bound)
    h = 2.0 / c
    n_pos, n_neg = pos.sum(), neg.sum()
    d = len(values)
    # descending (curve order): TP, FP, and the ROC vertices of drop_intermediate
    desc = list(range(d - 1, -1, -1))
    tp = np.cumsum(pos[desc])
    fp = np.cumsum(neg[desc])
    vertex = [i in (0, d - 1) or (pos[desc[i]], neg[desc[i]]) != (pos[desc[i + 1]], neg[desc[i + 1]]) for i in range(d)]

    def local(j):  # (bin, local cell) of the ascending index j
        lower = [i for i in range(j) if bins[i] == bins[j]]
        t = sum(neg[i] for i in lower) / n_neg + sum(pos[i] for i in lower) / n_pos
        return bins[j], min(int(np.floor(t / h)), c - 1)

    def ends(members, cell):  # the first and the last member of each cell (members in curve order)
        kept = set()
        for i, m in enumerate(members):
            if i == 0 or cell(members[i - 1]) != cell(m) or i == len(members) - 1 or cell(members[i + 1]) != cell(m):
                kept.add(m)
        return sorted(kept)

    def glob(i):  # global cell of the curve-order index i
        return min(int(np.floor((fp[i] / n_neg + tp[i] / n_pos) / h)), c - 1)

    roc_candidates = ends([i for i in range(d) if vertex[i]], lambda i: local(desc[i]))
    pr_candidates = ends(list(range(d)), lambda i: local(desc[i]))
    roc = ends(roc_candidates, glob)
    pr = ends(pr_candidates, glob)
    return [values[desc[i]] for i in roc], [values[desc[i]] for i in pr]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("bound", [5, 11, 41])
def test_the_subset_is_the_documented_definition(seed, bound):
    _, _, _, (values, pos, neg, bins) = random_day(seed)
    if len(values) > 400:  # the loops of the definition are quadratic
        values, pos, neg, bins = values[:400], pos[:400], neg[:400], bins[:400]
    if len(values) + 1 <= bound or pos.sum() == 0 or neg.sum() == 0:
        pytest.skip("within the bound, or one class")
    got = curves_from_histogram(values, pos, neg, bound, bins)
    roc, pr = definition(values, pos, neg, bins, bound)
    assert got.roc.threshold[1:].tolist() == roc
    assert got.pr.threshold[:-1][::-1].tolist() == pr


def chunked(values, pos, neg, bins, bound, rng):
    """The summaries as the stream builds them: each bin fed in random chunks of 1 to 3 distinct scores."""
    parts = []
    starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
    for lo, hi in zip(starts, np.r_[starts[1:], len(values)], strict=True):
        summary = BinSummary(float(pos.sum()), float(neg.sum()), bound)
        i = lo
        while i < hi:
            j = min(hi, i + int(rng.integers(1, 4)))
            summary.add(values[i:j], pos[i:j], neg[i:j], whole=0)
            i = j
        parts.append((int(bins[lo]), summary, summary.finish()))
    return key_summary(parts)


@pytest.mark.parametrize("seed", range(40))
def test_any_chunks_give_the_same_true_points_within_the_area_bound(seed):
    rng, labels, scores, (values, pos, neg, bins) = random_day(seed)
    bound = int(rng.choice([5, 11, 21, 101]))
    if len(values) + 1 <= bound:
        pytest.skip("within the bound: exact, tested against scikit-learn")
    summary = chunked(values, pos, neg, bins, bound, rng)
    got = curves_from_summary(summary, bound)
    whole = curves_from_histogram(values, pos, neg, bound, bins)
    exact = exact_curves(values, pos, neg)
    for mine, theirs in ((got.roc, whole.roc), (got.pr, whole.pr)):
        np.testing.assert_array_equal(mine.threshold, theirs.threshold)
        np.testing.assert_array_equal(mine.x, theirs.x)
        np.testing.assert_array_equal(mine.y, theirs.y)
    assert (got.exact_roc_points, got.exact_pr_points) == (exact.exact_roc_points, exact.exact_pr_points)
    assert len(got.roc) <= bound and len(got.pr) <= bound
    assert set(zip(got.roc.threshold[1:], got.roc.x[1:], got.roc.y[1:], strict=True)) <= set(
        zip(exact.roc.threshold[1:], exact.roc.x[1:], exact.roc.y[1:], strict=True)
    )
    assert set(zip(got.pr.threshold[:-1], got.pr.x[:-1], got.pr.y[:-1], strict=True)) <= set(
        zip(exact.pr.threshold[:-1], exact.pr.x[:-1], exact.pr.y[:-1], strict=True)
    )
    # the ends: the highest score first, (1, 1) last; the PR curve's lowest and highest scores
    assert got.roc.threshold[1] == exact.roc.threshold[1] and (got.roc.x[-1], got.roc.y[-1]) == (1.0, 1.0)
    assert got.pr.threshold[0] == exact.pr.threshold[0] and got.pr.threshold[-2] == exact.pr.threshold[-2]
    assert abs(trapezoid_area(got.roc.x, got.roc.y) - roc_auc_score(labels, scores)) <= area_bound(bound) + 1e-12
    # at most 2 (C + B) kept scores per role: nothing proportional to the rows
    roles = summary.rows[:, -1].astype(int)
    for bit in (PR, ROC):
        assert len(np.unique(summary.rows[(roles & bit) > 0, 0])) <= 2 * (cells(bound) + len(summary.bins))


def test_the_area_bound_holds_on_the_worst_staircase():
    # alternating single positives and negatives, every score in one bin and in 64 bins
    n = 4000
    labels = np.tile([1, 0], n // 2)
    values = np.arange(n, dtype=float) / n
    pos, neg = labels[::-1].astype(float), 1.0 - labels[::-1]
    for bins in (np.zeros(n, np.int64), np.arange(n) // 64):
        got = curves_from_histogram(values, pos, neg, 11, bins)
        area = trapezoid_area(got.roc.x, got.roc.y)
        assert abs(area - roc_auc_score(pos[::-1] > 0, -np.arange(n))) <= area_bound(11)


def test_a_bins_lowest_score_whose_step_continues_the_lower_bins_is_no_vertex():
    # ascending 0.1 neg, 0.2 neg (bin 1, same step as 0.1), 0.3 pos, then 20 more: above bound 5
    values = np.r_[0.1, 0.2, 0.3, np.linspace(0.4, 0.9, 20)]
    pos = np.r_[0.0, 0.0, 1.0, np.tile([1.0, 0.0], 10)]
    neg = 1.0 - pos
    bins = np.r_[0, 1, 1, np.full(20, 1)]
    exact = exact_curves(values, pos, neg)
    got = curves_from_histogram(values, pos, neg, 5, bins)
    assert 0.2 not in exact.roc.threshold and 0.2 not in got.roc.threshold
    assert got.exact_roc_points == exact.exact_roc_points


def test_a_key_within_the_bound_is_exact_and_one_class_has_no_curve():
    values, pos, neg = np.array([0.1, 0.5, 0.9]), np.array([0.0, 1.0, 1.0]), np.array([1.0, 1.0, 0.0])
    got = curves_from_histogram(values, pos, neg, 5)
    assert got.roc.x.tolist() == [0.0, 0.0, 0.5, 1.0] and got.pr.y.tolist() == [0.5, 2 / 3, 1.0, 1.0]
    assert curves_from_histogram(values, pos, 0 * neg, 5) is None
    with pytest.raises(ValueError, match="bin"):
        curves_from_histogram(values, pos, neg, 3)


def test_within_the_bound_the_summaries_keep_every_score_and_give_the_exact_curves():
    # 10 distinct scores in one bin, bound 11 (C = 5): the cell ends alone would skip some, WHOLE keeps them all
    values = np.linspace(0.05, 0.95, 10)
    pos = np.array([1.0, 0, 1, 0, 0, 1, 1, 0, 1, 1])
    neg = np.array([1.0, 1, 0, 1, 1, 0, 1, 1, 0, 0])
    summary = summarize(values, pos, neg, np.zeros(10, np.int64), 11)
    assert sorted(set(summary.rows[:, 0].tolist())) == values.tolist()
    assert ((summary.rows[:, -1].astype(int) & WHOLE) > 0).sum() == 10
    got, exact = curves_from_summary(summary, 11), exact_curves(values, pos, neg)
    for mine, theirs in ((got.roc, exact.roc), (got.pr, exact.pr)):
        np.testing.assert_array_equal(mine.x, theirs.x)
        np.testing.assert_array_equal(mine.y, theirs.y)
    assert (got.exact_roc_points, got.exact_pr_points) == (exact.exact_roc_points, exact.exact_pr_points)


def test_a_chunk_added_without_whole_keeps_only_the_ends_of_its_cells():
    # P = N = 5, bound 5: C = 2, h = 1; one row per score, so t = (rows below) / 5: cells 0 0 0 0 0 1 1 1 1 1
    values = np.linspace(0.05, 0.95, 10)
    pos = np.array([1.0, 0, 1, 0, 0, 1, 1, 0, 1, 0])
    neg = 1.0 - pos
    summary = BinSummary(5.0, 5.0, 5)
    summary.add(values, pos, neg)
    rows = summary.finish()
    role = rows[:, -1].astype(int)
    assert not (role & WHOLE).any()
    # PR: the first and the last of each cell: 0.05, 0.45 | 0.55, 0.95
    assert sorted(set(rows[(role & PR) > 0, 0].round(2).tolist())) == [0.05, 0.45, 0.55, 0.95]


@pytest.mark.parametrize("n_pos", [1, 2])
@pytest.mark.parametrize("swap", [False, True])
def test_a_key_with_one_or_two_of_a_class_above_the_bound_is_the_definition(n_pos, swap):
    # 30 of one class and n_pos of the other, every score distinct, in 1 or 4 bins: above bound 5 and 11
    values = np.linspace(0.01, 0.99, 30 + n_pos)
    pos = np.zeros(30 + n_pos)
    pos[[7, 25][:n_pos]] = 1.0
    neg = 1.0 - pos
    if swap:
        pos, neg = neg, pos
    for bins in (np.zeros(len(values), np.int64), np.arange(len(values)) // 8):
        for bound in (5, 11):
            got = curves_from_histogram(values, pos, neg, bound, bins)
            roc, pr = definition(values, pos, neg, bins, bound)
            assert got.roc.threshold[1:].tolist() == roc
            assert got.pr.threshold[:-1][::-1].tolist() == pr


def test_a_key_with_one_class_keeps_no_rows_and_has_no_curve():
    values = np.linspace(0.1, 0.9, 9)
    for pos, neg in ((np.ones(9), np.zeros(9)), (np.zeros(9), np.ones(9))):
        summary = summarize(values, pos, neg, np.zeros(9, np.int64), 5)
        assert summary.rows.shape == (0, 6) and summary.distinct == 9
        assert (summary.n_pos, summary.n_neg) == (pos.sum(), neg.sum())
        assert curves_from_summary(summary, 5) is None
        assert curves_from_histogram(values, pos, neg, 5, np.zeros(9, np.int64)) is None


def small_day(seed: int):
    """A histogram of 6 to 40 distinct scores with counts 0 to 2 per class in 1 to 4 bins: steps repeat often
    (scores that are no ROC vertex, at a bin's ends too), unlike the large random days."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(6, 40))
    values = np.sort(rng.choice(1000, d, replace=False)).astype(float) / 1000
    pos, neg = rng.integers(0, 3, d).astype(float), rng.integers(0, 3, d).astype(float)
    pos[(pos + neg) == 0] = 1.0
    bins = np.sort(rng.integers(0, int(rng.integers(1, 5)), d))
    return values, pos, neg, bins, int(rng.choice([5, 7, 11]))


def test_small_histograms_with_repeated_steps_are_the_definition():
    checked = 0
    # and seed 1294: the key's highest kept score is no cell's last sure vertex while the second-lowest is one
    for seed in [*range(400), 1294]:
        values, pos, neg, bins, bound = small_day(seed)
        if len(values) + 1 <= bound or pos.sum() == 0 or neg.sum() == 0:
            continue
        got = curves_from_histogram(values, pos, neg, bound, bins)
        roc, pr = definition(values, pos, neg, bins, bound)
        assert got.roc.threshold[1:].tolist() == roc, seed
        assert got.pr.threshold[:-1][::-1].tolist() == pr, seed
        checked += 1
    assert checked > 300


def test_an_empty_histogram_summarizes_to_no_bins():
    # fails on the code before session 21: the ends of the bins had one entry more than the starts (a ValueError)
    empty = np.zeros(0)
    summary = summarize(empty, empty, empty, np.zeros(0, np.int64), 5)
    assert len(summary.bins) == 0 and len(summary.row_bin) == 0 and summary.rows.shape == (0, 6)
    assert summary.distinct == 0 and curves_from_summary(summary, 5) is None


def test_score_bins_by_hand():
    # min(floor(n (atan(x) / pi + 1/2)), n - 1), n = 4: atan(+-1) / pi = +-1/4, atan(+-0.5) / pi = +-0.1476
    values = np.array([-1e300, -1.0, -0.5, 0.0, 0.5, 1.0, 1e300])
    got = score_bins(values, 4)
    assert got.tolist() == [0, 1, 1, 2, 2, 3, 3] and got.dtype == np.int64
    assert score_bins(values, 1).tolist() == [0] * 7
    assert score_bins(np.array([-1e300, 0.0, 1e300]), 1024).tolist() == [0, 512, 1023]


def test_a_key_one_distinct_score_below_the_bound_needs_no_bins():
    # D + 1 = bound: exact, no bins needed; D + 1 = bound + 1: the subset, which needs them
    values, pos, neg = np.array([0.1, 0.4, 0.6, 0.9]), np.array([0.0, 1.0, 0.0, 1.0]), np.array([1.0, 0.0, 1.0, 0.0])
    got, exact = curves_from_histogram(values, pos, neg, 5), exact_curves(values, pos, neg)
    np.testing.assert_array_equal(got.roc.x, exact.roc.x)
    np.testing.assert_array_equal(got.pr.y, exact.pr.y)
    with pytest.raises(ValueError, match="above the bound the subset needs each distinct score's bin"):
        curves_from_histogram(values, pos, neg, 4)
