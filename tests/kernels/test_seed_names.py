"""docs/metrics.md, "The seeds' names, mapped to ours": the worked examples of the seeds whose words differ from
ours, computed by our kernels (issue 43 item 10)."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_spark.kernels.ranking import average_precision_at_k, hit_rate_at_k, precision_at_k
from recsys_spark.kernels.sampled import metric_at_rank
from recsys_spark.registry import parse_key


def test_seed_000s_hit_ratio_is_our_precision_at_k_not_our_hit_rate():
    # 击中率: "the share of relevant data among the first K": 2 relevant among the first 5 -> 0.4
    rel = np.array([1, 0, 1, 0, 0, 1])
    assert precision_at_k(rel, 5) == pytest.approx(2 / 5)
    assert hit_rate_at_k(rel, 5) == 1.0  # ours: at least one relevant in the first k


def test_seed_004s_hits_at_k_is_our_sampled_recall_at_k():
    # two positives ranked against four synthetic negatives each: ranks 2 and 1 among 5; Hits@3 = 1.0, Hits@1 = 0.5
    ranks = np.array([2.0, 1.0])
    assert metric_at_rank("recall", ranks, 5, 3).mean() == 1.0
    assert metric_at_rank("recall", ranks, 5, 1).mean() == 0.5
    assert parse_key("recall@3_sampled_naive") == ("recall", 3, "sampled_naive")


def test_seed_004s_ap_divides_by_all_relevant_and_ours_by_min_r_k():
    # 3 relevant, at ranks 1, 2 and 4; k = 2: the seeds' AP@2 = (1 + 1) / 3, ours (1 + 1) / min(3, 2) = 1
    rel = np.array([1, 1, 0, 1])
    assert average_precision_at_k(rel, 2) == pytest.approx(1.0)
    assert average_precision_at_k(rel, 4) == pytest.approx((1 + 1 + 3 / 4) / 3)  # R <= k: the same
