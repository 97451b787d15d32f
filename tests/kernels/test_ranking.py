"""List metrics: the classic worked examples, invariants, and vectorised == one-list reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recsys_spark.kernels.ranking import (
    average_precision_at_k,
    hit_rate_at_k,
    list_metrics,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
)


def test_ap_with_relevant_at_ranks_1_4_5_8_of_10_is_065():
    rel = [1, 0, 0, 1, 1, 0, 0, 1, 0, 0]
    # (1/1 + 2/4 + 3/5 + 4/8) / 4
    assert average_precision_at_k(rel, 10) == pytest.approx((1 + 2 / 4 + 3 / 5 + 4 / 8) / 4)
    assert average_precision_at_k(rel, 10) == pytest.approx(0.65)


def test_ap_with_relevant_at_ranks_1_2_4_is_09167():
    assert average_precision_at_k([1, 1, 0, 1], 10) == pytest.approx((1 + 1 + 3 / 4) / 3)
    assert round(average_precision_at_k([1, 1, 0, 1], 10), 4) == 0.9167


def test_map_at_k_divides_by_min_of_relevant_and_k():
    # relevant at ranks 1 and 3 of a list with 4 relevant items, k = 2: only rank 1 counts, / min(4, 2)
    assert average_precision_at_k([1, 0, 1, 1, 1], 2) == pytest.approx(1 / 2)


def test_ndcg_worked_example_linear_and_exponential_gain():
    rel = [7, 2, 5, 10, 1]
    dcg_lin = 7 / 1 + 2 / math.log2(3) + 5 / 2 + 10 / math.log2(5) + 1 / math.log2(6)
    idcg_lin = 10 / 1 + 7 / math.log2(3) + 5 / 2 + 2 / math.log2(5) + 1 / math.log2(6)
    assert ndcg_at_k(rel, 5, "linear") == pytest.approx(dcg_lin / idcg_lin)
    assert round(ndcg_at_k(rel, 5, "linear"), 4) == 0.8509

    def g(r):
        return 2**r - 1

    dcg_exp = g(7) + g(2) / math.log2(3) + g(5) / 2 + g(10) / math.log2(5) + g(1) / math.log2(6)
    idcg_exp = g(10) + g(7) / math.log2(3) + g(5) / 2 + g(2) / math.log2(5) + g(1) / math.log2(6)
    assert ndcg_at_k(rel, 5, "exponential") == pytest.approx(dcg_exp / idcg_exp)
    assert round(ndcg_at_k(rel, 5, "exponential"), 4) == 0.5225  # the seed document's 0.53 was a slip


def test_mrr_of_first_relevant_at_ranks_3_and_4():
    mean_rr = (reciprocal_rank([0, 0, 1]) + reciprocal_rank([0, 0, 0, 1])) / 2
    assert mean_rr == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert round(mean_rr, 4) == 0.2917


def test_precision_keeps_k_as_denominator_for_short_lists_and_recall_uses_all_relevant():
    assert precision_at_k([1, 0, 1], 10) == pytest.approx(2 / 10)
    assert recall_at_k([1, 0, 1, 1], 2) == pytest.approx(1 / 3)
    assert hit_rate_at_k([0, 0, 1], 2) == 0.0
    assert hit_rate_at_k([0, 0, 1], 3) == 1.0


def test_lists_without_relevant_items_are_undefined():
    for metric in (
        lambda r: ndcg_at_k(r, 3),
        lambda r: average_precision_at_k(r, 3),
        lambda r: precision_at_k(r, 3),
        lambda r: recall_at_k(r, 3),
        reciprocal_rank,
    ):
        assert math.isnan(metric([0, 0, 0]))


def test_perfect_ranking_scores_one_and_misses_at_the_top_score_less():
    perfect = [3, 2, 1, 0, 0]
    assert ndcg_at_k(perfect, 5) == pytest.approx(1.0)
    assert average_precision_at_k(perfect, 5) == pytest.approx(1.0)
    assert reciprocal_rank(perfect) == 1.0
    assert ndcg_at_k(perfect[::-1], 5) < 0.6


def _reference(lists, ks, kind):
    rows = []
    for rel in lists:
        row = {"mrr": reciprocal_rank(rel)}
        for k in ks:
            row[f"ndcg@{k}"] = ndcg_at_k(rel, k, kind)
            row[f"map@{k}"] = average_precision_at_k(rel, k)
            row[f"precision@{k}"] = precision_at_k(rel, k)
            row[f"recall@{k}"] = recall_at_k(rel, k)
            row[f"hit_rate@{k}"] = hit_rate_at_k(rel, k)
        rows.append(row)
    return rows


@pytest.mark.parametrize("kind", ["exponential", "linear"])
def test_vectorised_list_metrics_match_the_one_list_reference(kind):
    rng = np.random.default_rng(11)
    lists = [rng.choice([0, 0, 0, 1, 2, 3], size=rng.integers(1, 15)).astype(float) for _ in range(300)]
    ks = (1, 3, 5, 10, 20)
    starts = np.cumsum([0] + [len(r) for r in lists[:-1]])
    flat = np.concatenate(lists)
    ideal = np.concatenate([np.sort(r)[::-1] for r in lists])
    got = list_metrics(starts, flat, ideal, ks, kind)
    for i, expected in enumerate(_reference(lists, ks, kind)):
        for name, value in expected.items():
            if math.isnan(value):
                assert math.isnan(got[name][i]), (i, name)
            else:
                assert got[name][i] == pytest.approx(value), (i, name)
            assert math.isnan(got[name][i]) or 0.0 <= got[name][i] <= 1.0
    assert list(got["n"]) == [len(r) for r in lists]
