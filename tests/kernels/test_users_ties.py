"""kernels.users: the item-id tie-break is found wherever the tie is (issue 18: kills surviving mutants)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_spark.kernels.ranking import segment_starts
from recsys_spark.kernels.users import score_users

COLUMNS = ["slice", "user_id", "list_id", "item_id", "position", "score", "relevance"]


@pytest.mark.parametrize("tied_first", [False, True])
def test_a_tie_in_score_and_position_is_broken_by_item_id_in_any_user_list_and_score(tied_first):
    # user v (first unit, first list, top score 0.9, positions 3 and 4) has no tie; user u's list r1 has b and
    # a tied at score 0.5, position 1 (a session list of two requests): "a" ranks first, so u's hit b is at
    # rank 2.  The rows come b before a, so keeping the input order among the tied rows would put the hit first.
    v = [("all", "v", "r0", "x", 3, 0.9, 0.0), ("all", "v", "r0", "y", 4, 0.8, 1.0)]
    u = [("all", "u", "r1", "b", 1, 0.5, 1.0), ("all", "u", "r1", "a", 1, 0.5, 0.0)]
    got = score_users(pd.DataFrame(u + v if tied_first else v + u, columns=COLUMNS), (1, 2)).set_index(["user_id", "k"])
    assert got.loc[("u", 1), "mrr"] == 0.5 and got.loc[("u", 1), "hits"] == 0 and got.loc[("u", 2), "hits"] == 1
    assert got.loc[("u", 1), "ndcg"] == 0.0 and got.loc[("u", 1), "precision"] == 0.0
    assert got.loc[("v", 1), "mrr"] == 0.5 and got.loc[("v", 2), "hits"] == 1


def test_rows_without_a_position_and_with_equal_scores_are_tied_and_broken_by_item_id():
    # a null position ranks after every position, and two null positions are equal: the item id decides
    rows = pd.DataFrame(
        [
            ("all", "u", "r", "b", None, 0.5, 1.0),
            ("all", "u", "r", "a", None, 0.5, 0.0),
            ("all", "u", "r", "c", 1, 0.5, 0.0),
        ],
        columns=COLUMNS,
    )
    rows["position"] = rows["position"].astype("Int64")
    got = score_users(rows, (1,))
    assert got["mrr"].tolist() == [1 / 3]  # c (position 1), then a, then b (the hit)


def test_a_batch_of_one_row():
    got = score_users(pd.DataFrame([("all", "u", "r", "a", 1, 0.5, 1.0)], columns=COLUMNS), (1,))
    assert len(got) == 1 and got["mrr"].tolist() == [1.0] and got["n_lists_ranked"].tolist() == [1]
    assert got["hits"].tolist() == [1] and got["n_exposures"].tolist() == [1]


def test_segment_starts_of_no_keys_and_of_runs():
    empty = segment_starts(np.array([]))
    assert len(empty) == 0 and empty.dtype == np.int64
    starts = segment_starts(np.array([3, 3, 1, 1, 1, 3]))
    assert starts.tolist() == [0, 2, 5] and starts.dtype == np.int64
