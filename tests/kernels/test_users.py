"""The per-user batch kernel: hand-computed users, ranking rule, order independence, no Spark."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from recsys_spark.kernels.ranking import average_precision_at_k, ndcg_at_k
from recsys_spark.kernels.users import score_users
from recsys_spark.schema import USER_METRICS_COLUMNS


def frame(rows):
    return pd.DataFrame(rows, columns=["slice", "user_id", "list_id", "item_id", "position", "score", "relevance"])


# u1: list r1 ranks a(.9, miss) b(.8, hit); list r2 ranks c(.7, hit) d(.6, miss)
# u2: one list, no hit.  u3: only hits (no AUC).
GOLDEN = frame(
    [
        ("all", "u1", "r1", "a", 1, 0.9, 0.0),
        ("all", "u1", "r1", "b", 2, 0.8, 1.0),
        ("all", "u1", "r2", "c", 1, 0.7, 1.0),
        ("all", "u1", "r2", "d", 2, 0.6, 0.0),
        ("all", "u2", "r3", "a", 1, 0.5, 0.0),
        ("all", "u2", "r3", "b", 2, 0.4, 0.0),
        ("all", "u3", "r4", "e", 1, 0.3, 1.0),
    ]
)


def by_user(result, k):
    """The rows of cut-off ``k``: one per user."""
    return result[result.k == k].set_index("user_id")


COLUMNS = [name for name, _ in USER_METRICS_COLUMNS]


def test_golden_users_by_hand():
    result = score_users(GOLDEN, ks=(1, 3))
    at1, at3 = by_user(result, 1), by_user(result, 3)
    u1 = at3.loc["u1"]
    assert (u1.n_exposures, u1.n_relevant, u1.n_lists, u1.n_lists_ranked) == (4, 2, 2, 2)
    assert u1.auc == pytest.approx(0.5)  # pos .8,.7 vs neg .9,.6: 2 of 4 pairs
    assert u1.mrr == pytest.approx((1 / 2 + 1 / 1) / 2)
    assert u1.ndcg == pytest.approx((1 / math.log2(3) + 1.0) / 2)
    assert at1.loc["u1", "map"] == pytest.approx((0 + 1) / 2)
    assert u1.precision == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert at1.loc["u1"].hits == 1 and u1.hits == 2
    u2 = at3.loc["u2"]
    assert u2.n_lists_ranked == 0 and math.isnan(u2.ndcg) and math.isnan(u2.auc)
    u3 = at1.loc["u3"]
    assert math.isnan(u3.auc) and u3.mrr == 1.0 and u3.recall == 1.0
    assert list(result.columns) == COLUMNS


def test_one_row_per_user_and_k_the_values_without_k_repeat():
    result = score_users(GOLDEN, ks=(1, 3))
    assert len(result) == 3 * 2 and result.k.tolist() == [1, 3] * 3
    per_user = result[["slice", "user_id", "n_exposures", "n_relevant", "n_lists", "n_lists_ranked", "auc", "mrr"]]
    assert len(per_user.drop_duplicates()) == 3
    # changing k changes rows, not columns
    assert list(score_users(GOLDEN, ks=(5, 10, 20)).columns) == COLUMNS


def test_result_does_not_depend_on_row_order():
    a = score_users(GOLDEN, ks=(1, 3)).sort_values(["user_id", "k"]).reset_index(drop=True)
    shuffled = GOLDEN.sample(frac=1.0, random_state=4)
    b = score_users(shuffled, ks=(1, 3)).sort_values(["user_id", "k"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_ties_in_score_are_broken_by_position_then_item_id():
    # equal scores: position decides (hit at position 1 -> RR 1)
    by_position = frame([("all", "u", "r", "z", 1, 0.5, 1.0), ("all", "u", "r", "a", 2, 0.5, 0.0)])
    assert score_users(by_position, (1,)).mrr[0] == 1.0
    # equal score and position (a session list of two requests): item id decides, "a" before "b"
    by_item = frame([("all", "u", "s", "b", 1, 0.5, 1.0), ("all", "u", "s", "a", 1, 0.5, 0.0)])
    assert score_users(by_item, (1,)).mrr[0] == 0.5


def test_slices_are_separate_units():
    two = pd.concat([GOLDEN, GOLDEN.assign(slice="platform=ios")])
    got = score_users(two, (1, 3))
    assert len(got) == 6 * 2
    for _, rows in got.groupby(["user_id", "k"]):
        assert rows.drop(columns="slice").drop_duplicates().shape[0] == 1


def test_matches_references_on_random_users():
    rng = np.random.default_rng(8)
    n = 3000
    data = frame(
        {
            "slice": "all",
            "user_id": rng.integers(0, 60, n).astype(str),
            "list_id": rng.integers(0, 400, n).astype(str),
            "item_id": rng.integers(0, 10**6, n).astype(str),
            "position": rng.integers(1, 30, n),
            "score": rng.random(n).round(2),
            "relevance": rng.choice([0.0, 0.0, 0.0, 1.0, 3.0], n),
        }
    )
    got = by_user(score_users(data, (10,)), 10)
    for user, rows in data.groupby("user_id"):
        pos = rows.relevance > 0
        expected_auc = roc_auc_score(pos, rows.score) if 0 < pos.sum() < len(rows) else np.nan
        assert got.loc[user, "auc"] == pytest.approx(expected_auc, nan_ok=True)
        ndcgs, aps = [], []
        for _, lst in rows.groupby("list_id"):
            ranked = lst.sort_values(["score", "position", "item_id"], ascending=[False, True, True])
            if (ranked.relevance > 0).any():
                ndcgs.append(ndcg_at_k(ranked.relevance.to_numpy(), 10))
                aps.append(average_precision_at_k(ranked.relevance.to_numpy(), 10))
        assert got.loc[user, "ndcg"] == pytest.approx(np.mean(ndcgs) if ndcgs else np.nan, nan_ok=True)
        assert got.loc[user, "map"] == pytest.approx(np.mean(aps) if aps else np.nan, nan_ok=True)


def test_empty_batch_gives_empty_frame_with_the_schema():
    got = score_users(GOLDEN.iloc[:0], (1,))
    assert got.empty and list(got.columns) == COLUMNS


def test_null_score_position_and_relevance_and_the_output_types():
    # nullable input: a null score ranks last, a null position after every position, a null relevance is 0.
    # u1's list: a (.9, rel 1), b (null score, rel 2), c (.5, null relevance): ranked a c b
    rows = frame(
        [
            ("all", "u1", "r1", "a", 1, 0.9, 1.0),
            ("all", "u1", "r1", "b", 2, None, 2.0),
            ("all", "u1", "r1", "c", None, 0.5, None),
            ("all", "u2", "r2", "x", None, 0.5, 1.0),
            ("all", "u2", "r2", "y", 1, 0.5, 0.0),
        ]
    )
    for column, dtype in (("score", "Float64"), ("position", "Int64"), ("relevance", "Float64")):
        rows[column] = rows[column].astype(dtype)
    got = score_users(rows, ks=(1, 3), gain="linear")
    assert list(got.columns) == COLUMNS
    for name, kind in USER_METRICS_COLUMNS:
        assert got[name].dtype == {"long": np.int64, "int": np.int32, "double": np.float64}.get(kind, object), name
    u, u1k = by_user(got, 3), by_user(got, 1)
    assert u.loc["u1", "n_relevant"] == 2 and u.loc["u1", "mrr"] == 1.0
    assert u.loc["u1", "auc"] == 0.5  # positives a (.9) and b (no score) against c (.5)
    # linear gain: DCG 1 + 2 / log2(4), ideal 2 + 1 / log2(3) (the exponential gain: 1 + 3/2 over 3 + 1 / log2(3))
    assert u.loc["u1", "ndcg"] == pytest.approx((1 + 2 / 2) / (2 + 1 / math.log2(3)))
    # u2: equal scores, y (position 1) before x (null position): the hit at rank 2
    assert u.loc["u2", "mrr"] == pytest.approx(1 / 2) and u1k.loc["u2", "hits"] == 0
