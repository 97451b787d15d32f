"""From per-user rows to the long metrics table (aggregate.aggregate_users), no Spark: every value by hand.

Four users of different exposure counts and AUCs, so that each aggregation differs from the others:
the impression-weighted GAUC from the plain mean of user AUCs, ``list_avg`` from ``user_avg``, and
the standard errors (sample sd, divisor n - 1, over sqrt(n)) from their near misses.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from recsys_spark.kernels.auc import UPartial
from recsys_spark.kernels.moments import merge_by_slice, user_table_moments
from recsys_spark.per_user.aggregate import aggregate_users

KS = (1,)
NAN = np.nan
# slice, user, exposures, relevant, lists, lists ranked, auc, mrr, ndcg@1, map@1, precision@1, recall@1,
# hit_rate@1, hits@1
_USERS = [
    ("all", "a", 4, 1, 2, 1, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1),
    ("all", "b", 2, 1, 1, 1, 1.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0),
    ("all", "c", 3, 0, 1, 0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0),  # no relevant list
    ("all", "d", 6, 3, 3, 2, 0.75, 0.25, 0.5, 0.5, 1.0, 0.5, 1.0, 2),
    ("p=1", "a", 4, 1, 2, 1, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1),  # one user: no se
]
FRAME = pd.DataFrame(
    _USERS,
    columns=[
        "slice",
        "user_id",
        "n_exposures",
        "n_relevant",
        "n_lists",
        "n_lists_ranked",
        "auc",
        "mrr",
        "ndcg",
        "map",
        "precision",
        "recall",
        "hit_rate",
        "hits",
    ],
).assign(k=1)  # the per-user layout: one row per (user, k)


def _rows(moments, pooled=None, ks=KS):
    rows, counts = aggregate_users(moments, ks, pooled or {})
    by = {(r.slice, r.metric, r.k, r.aggregation): r for r in rows}
    assert len(by) == len(rows)  # one row per key
    return by, counts


def test_impression_weighted_auc_weighs_each_user_by_exposures_not_equally():
    by, _ = _rows(user_table_moments(FRAME, KS))
    # users with an AUC: a 0.5 (4 exposures), b 1.0 (2), d 0.75 (6)
    gauc = by[("all", "auc", None, "impression_weighted")]
    assert gauc.value == pytest.approx((0.5 * 4 + 1.0 * 2 + 0.75 * 6) / (4 + 2 + 6))  # 8.5 / 12, not 0.75
    # a ratio of per-user sums x = auc * exposures (2, 2, 4.5) over y = exposures (4, 2, 6), delta method:
    # residuals x - R y = -5/6, 7/12, 1/4; Var = (sum of squares / (n - 1)) / (n * mean(y)^2) = (79/72 / 2) / 48
    assert gauc.n == 12 and gauc.ci_method == "delta"
    assert gauc.se == pytest.approx(math.sqrt(79 / 72 / 2 / 48))
    plain = by[("all", "auc", None, "user_avg")]
    assert plain.value == pytest.approx((0.5 + 1.0 + 0.75) / 3) and plain.n == 3


def test_user_average_standard_error_is_the_sample_sd_over_sqrt_n():
    by, _ = _rows(user_table_moments(FRAME, KS))
    # AUC 0.5, 1.0, 0.75: mean 0.75, squared deviations 1/16 + 1/16 + 0, var (1/8) / 2, sd 1/4, se (1/4) / sqrt 3
    assert by[("all", "auc", None, "user_avg")].se == pytest.approx(0.25 / math.sqrt(3))
    # MRR 1, 1/2, 1/4: mean 7/12, squared deviations (25 + 1 + 16) / 144, var 21 / 144, se sqrt(21) / 12 / sqrt 3
    mrr = by[("all", "mrr", None, "user_avg")]
    assert mrr.value == pytest.approx(7 / 12) and mrr.n == 3
    assert mrr.se == pytest.approx(math.sqrt(7) / 12)
    # a slice of one user has no standard error
    assert by[("p=1", "mrr", None, "user_avg")].se is None and by[("p=1", "mrr", None, "user_avg")].value == 1.0


def test_list_average_weighs_users_by_their_ranked_lists():
    by, _ = _rows(user_table_moments(FRAME, KS))
    # ranked lists: a 1, b 1, d 2 -> MRR (1 + 0.5 + 2 * 0.25) / 4
    lst = by[("all", "mrr", None, "list_avg")]
    assert lst.value == pytest.approx(0.5) and lst.n == 4 and lst.ci_method == "delta"
    # x = mrr * lists (1, 0.5, 0.5) over y = lists (1, 1, 2): residuals 1/2, 0, -1/2; Var = (1/2 / 2) / (3 * (4/3)^2)
    assert lst.se == pytest.approx(math.sqrt(0.25 / (16 / 3)))
    assert by[("all", "ndcg", 1, "list_avg")].value == pytest.approx((1.0 + 0.0 + 2 * 0.5) / 4)
    assert by[("all", "ndcg", 1, "user_avg")].value == pytest.approx((1.0 + 0.0 + 0.5) / 3)


def test_global_precision_and_recall_pool_the_hits():
    by, _ = _rows(user_table_moments(FRAME, KS))
    # hits@1 1 + 0 + 0 + 2 = 3 over k * ranked lists = 1 * 4, and over relevant items 1 + 1 + 0 + 3 = 5
    precision, recall = by[("all", "precision", 1, "global")], by[("all", "recall", 1, "global")]
    assert (precision.value, precision.n) == (pytest.approx(3 / 4), 4)
    assert (recall.value, recall.n) == (pytest.approx(3 / 5), 5)


def test_pooled_auc_row_and_counts():
    by, counts = _rows(user_table_moments(FRAME, KS), {"all": UPartial(3.0, 2.0, 2.0), "p=1": UPartial(0, 1, 0)})
    pooled = by[("all", "auc", None, "global")]
    assert (pooled.value, pooled.n) == (0.75, 4)  # U / (P N) = 3 / 4 over 2 + 2 exposures
    assert by[("p=1", "auc", None, "global")].value is None  # one class only: undefined, not NaN
    assert counts["all"] == {
        "users": 4,
        "users_with_auc": 3,
        "users_without_auc": 1,
        "users_without_relevant_list": 1,
        "lists": 7,
        "lists_with_relevant": 4,
        "lists_without_relevant": 3,
    }
    assert counts["p=1"]["users"] == 1 and counts["p=1"]["lists_without_relevant"] == 1


def test_rows_from_merged_partitions_equal_the_rows_of_the_whole():
    whole, _ = _rows(user_table_moments(FRAME, KS))
    parts = merge_by_slice(user_table_moments(FRAME.iloc[[3, 0]], KS), user_table_moments(FRAME.iloc[[1, 2, 4]], KS))
    merged, _ = _rows(parts)
    assert merged.keys() == whole.keys()
    for key, row in whole.items():
        assert merged[key].n == row.n, key
        for got, want in ((merged[key].value, row.value), (merged[key].se, row.se)):
            assert (got is None) == (want is None), key
            if want is not None:
                assert got == pytest.approx(want, abs=1e-12), key


def test_precision_at_k_divides_the_hits_by_k_lists():
    # the same users with their metrics at k = 2: hits@2 3 over 2 * 4 ranked lists; recall over 5 relevant
    frame = FRAME.assign(k=2)
    by, _ = _rows(user_table_moments(frame, (2,)), ks=(2,))
    assert by[("all", "precision", 2, "global")].value == pytest.approx(3 / 8)
    assert by[("all", "recall", 2, "global")].value == pytest.approx(3 / 5)
    assert by[("all", "precision", 2, "list_avg")].value == pytest.approx((1.0 + 0.0 + 2 * 1.0) / 4)


@pytest.mark.spark
def test_a_slice_spread_over_several_partitions_merges_every_partitions_moments(spark):
    # aggregate_users of the DataFrame merges one partial per (slice, partition) on the driver: the
    # rows must equal those of the pandas table as a whole, with "all" split over several partitions
    from pyspark.sql import functions as F

    users = spark.createDataFrame(FRAME).repartition(3)
    spread = users.select("slice", F.spark_partition_id().alias("part")).distinct().collect()
    assert sum(r["slice"] == "all" for r in spread) >= 2  # else the test cannot fail
    whole, whole_counts = _rows(user_table_moments(FRAME, KS))
    got, got_counts = _rows(users)
    assert got_counts == whole_counts
    assert got.keys() == whole.keys()
    for key, row in whole.items():
        assert got[key].n == row.n, key
        for value, want in ((got[key].value, row.value), (got[key].se, row.se)):
            assert (value is None) == (want is None), key
            if want is not None:
                assert value == pytest.approx(want, abs=1e-12), key
