"""kernels.ranking's DCG and discount by hand (issue 18: NDCG's ratio hides a common factor of both)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recsys_spark.kernels.ranking import dcg_at_k, discount, gain, list_metrics

METRICS = ("ndcg", "map", "precision", "recall", "hit_rate", "hits")


def test_discount_is_one_over_log2_of_rank_plus_one():
    assert discount(3).tolist() == pytest.approx([1.0, 1 / math.log2(3), 0.5])
    assert discount(0).tolist() == []


def test_dcg_by_hand_with_the_default_exponential_gain_and_with_linear_gain():
    rel = [3, 0, 1, 2]
    # exponential (the default): (2^3 - 1) / 1 + 0 + (2^1 - 1) / log2(4), cut at k = 3
    assert dcg_at_k(rel, 3) == pytest.approx(7.0 + 1.0 / 2.0)
    assert dcg_at_k(np.array(rel), 10, "linear") == pytest.approx(3.0 + 1.0 / 2.0 + 2.0 / math.log2(5))
    assert dcg_at_k([], 5) == 0.0


def test_list_metrics_default_gain_is_exponential():
    starts, rel = [0, 2], [2.0, 0.0, 0.0, 1.0]
    ideal = [2.0, 0.0, 1.0, 0.0]
    got = list_metrics(starts, rel, ideal, (2,))
    want = list_metrics(starts, rel, ideal, (2,), "exponential")
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    # list 2: its hit at rank 2, exponential gain 1 / log2(3) over the ideal 1
    assert got["ndcg@2"].tolist() == pytest.approx([1.0, 1 / math.log2(3)])


def test_list_metrics_of_no_list():
    got = list_metrics([], [], [], (1, 5))
    assert set(got) == {"n", "n_relevant", "mrr"} | {f"{m}@{k}" for m in METRICS for k in (1, 5)}
    assert all(len(v) == 0 for v in got.values())


def test_gain_default_is_exponential():
    assert gain(np.array([0.0, 1.0, 3.0])).tolist() == [0.0, 1.0, 7.0]
    assert gain([0, 1, 3], "linear").tolist() == [0.0, 1.0, 3.0]


def test_an_unknown_gain_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"^unknown gain 'cubic': use 'exponential' or 'linear'$"):
        gain([1.0], "cubic")  # type: ignore[arg-type]
