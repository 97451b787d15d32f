"""Exact AUC: scikit-learn agreement with ties, grouped == one by one, histogram partials."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from recsys_spark.kernels.auc import auc, grouped_auc, merge_u, u_from_histogram


def test_hand_computed_auc_counts_ties_as_half():
    # positives 0.9, 0.5; negatives 0.1, 0.5: pairs (0.9>0.1, 0.9>0.5, 0.5>0.1, 0.5=0.5) = 3.5 / 4
    assert auc([1, 0, 1, 0], [0.9, 0.1, 0.5, 0.5]) == pytest.approx(3.5 / 4)


def test_single_class_has_no_auc():
    assert math.isnan(auc([1, 1], [0.2, 0.3]))
    assert math.isnan(auc([0, 0, 0], [0.2, 0.3, 0.1]))


@pytest.mark.parametrize("seed", range(5))
def test_matches_sklearn_with_many_ties(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    labels = rng.random(n) < 0.2
    scores = np.round(rng.random(n) + 0.3 * labels, 1)  # few distinct values: many ties
    assert auc(labels, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_grouped_auc_equals_sklearn_per_group_in_any_row_order():
    rng = np.random.default_rng(3)
    group = rng.integers(0, 50, 5000)
    labels = rng.random(5000) < 0.3
    scores = np.round(rng.normal(size=5000) + labels, 2)
    values, n_pos, n_neg = grouped_auc(group, labels, scores, 50)
    for g in range(50):
        m = group == g
        assert n_pos[g] == labels[m].sum() and n_neg[g] == (~labels[m]).sum()
        if labels[m].all() or not labels[m].any():
            assert math.isnan(values[g])
        else:
            assert values[g] == pytest.approx(roc_auc_score(labels[m], scores[m]), abs=1e-12)


def test_histogram_partials_merge_to_the_exact_pooled_auc():
    rng = np.random.default_rng(5)
    labels = rng.random(3000) < 0.25
    scores = np.round(rng.normal(size=3000) + labels, 1)
    values = np.unique(scores)
    pos = np.array([labels[scores == v].sum() for v in values])
    neg = np.array([(~labels[scores == v]).sum() for v in values])
    # cut the sorted score axis into uneven slices, as range partitions would
    cuts = [0, 3, 4, 17, len(values)]
    parts = [u_from_histogram(pos[a:b], neg[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    assert merge_u(parts).auc == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert u_from_histogram(pos, neg).auc == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_grouped_auc_has_one_value_per_group_code_and_handles_no_rows():
    # groups 0 and 2 (1 has no row): 0 ranks its positive first (AUC 1), 2 ranks it last (AUC 0)
    values, n_pos, n_neg = grouped_auc([2, 0, 2, 0], [1, 1, 0, 0], [0.2, 0.9, 0.8, 0.1])
    assert values[[0, 2]].tolist() == [1.0, 0.0] and math.isnan(values[1]) and len(values) == 3
    assert n_pos.tolist() == [1.0, 0.0, 1.0] and n_neg.tolist() == [1.0, 0.0, 1.0]
    values, n_pos, _ = grouped_auc([0, 0], [1, 0], [0.9, 0.1], 4)  # G given: trailing empty groups
    assert len(values) == len(n_pos) == 4 and values[0] == 1.0 and np.isnan(values[1:]).all()
    for n_groups, size in ((None, 0), (2, 2)):  # no rows at all
        values, n_pos, n_neg = grouped_auc([], [], [], n_groups)
        assert len(values) == len(n_pos) == len(n_neg) == size and np.isnan(values).all()


def test_grouped_auc_infers_the_groups_and_takes_integer_labels_and_scores():
    # no n_groups: G = max code + 1, so a last group with one class is NaN, not cut off; labels as 0/1
    # integers and scores as integers (ties), compared with scikit-learn per group
    rng = np.random.default_rng(11)
    group = np.repeat(np.arange(5), 40)
    rng.shuffle(group)
    labels = rng.integers(0, 2, len(group))
    labels[group == 4] = 1  # the last group: positives only
    scores = rng.integers(0, 6, len(group))
    values, n_pos, n_neg = grouped_auc(group, labels, scores)
    assert len(values) == len(n_pos) == len(n_neg) == 5
    for g in range(4):
        of = group == g
        assert values[g] == pytest.approx(roc_auc_score(labels[of], scores[of]), abs=1e-12)
        assert (n_pos[g], n_neg[g]) == (labels[of].sum(), (1 - labels[of]).sum())
    assert math.isnan(values[4]) and n_neg[4] == 0 and n_pos[4] == 40
    empty = grouped_auc(np.array([], dtype=np.int64), np.array([]), np.array([]))
    assert all(len(a) == 0 for a in empty)


def test_grouped_auc_counts_a_truthy_label_once_whatever_its_value():
    # "labels: truthy for positives": a graded label (2, 3) is one positive, not 2 or 3 of them
    group, scores = [0, 0, 0, 0, 0], [0.9, 0.8, 0.7, 0.2, 0.1]
    graded = [2, 0, 3, 0, 1]
    values, n_pos, n_neg = grouped_auc(group, graded, scores)
    assert (n_pos[0], n_neg[0]) == (3.0, 2.0)
    assert values[0] == pytest.approx(roc_auc_score([g > 0 for g in graded], scores), abs=1e-12)  # 4 / 6
