"""Mergeable moments of the per-user table: any split, merged in any order, gives the whole."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_spark.kernels.auc import sorted_histogram
from recsys_spark.kernels.moments import Moments, merge_by_slice, user_table_moments

#: a per-user table of two slices (one k)
_FRAME = pd.DataFrame(
    {
        "slice": ["all", "all", "p=1"],
        "user_id": ["a", "b", "a"],
        "k": [1, 1, 1],
        "n_exposures": [4, 2, 1],
        "n_relevant": [1, 0, 1],
        "n_lists": [2, 1, 1],
        "n_lists_ranked": [1, 0, 1],
        "auc": [0.5, np.nan, np.nan],
        "mrr": [1.0, np.nan, 0.5],
        "ndcg": [1.0, np.nan, 0.0],
        "map": [1.0, np.nan, 0.0],
        "precision": [1.0, np.nan, 0.0],
        "recall": [1.0, np.nan, 0.0],
        "hit_rate": [1.0, np.nan, 0.0],
        "hits": [1, 0, 0],
    }
)


def test_merged_parts_equal_the_moments_of_the_whole():
    rng = np.random.default_rng(0)
    x = rng.random(1000)
    x[rng.random(1000) < 0.2] = np.nan
    w = rng.integers(0, 5, 1000).astype(float)
    whole = Moments.of({"x": x}, {"x": w}, {"w": w})
    cuts = [0, 1, 17, 400, 999, 1000]
    parts = [Moments.of({"x": x[a:b]}, {"x": w[a:b]}, {"w": w[a:b]}) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    merged = Moments()
    for part in reversed(parts):
        merged = merged.merge(part)
    ok = ~np.isnan(x)
    assert merged.n["x"] == whole.n["x"] == ok.sum()
    assert merged.mean["x"] == pytest.approx(x[ok].mean(), abs=1e-12)
    assert merged.sd("x") == pytest.approx(x[ok].std(ddof=1), abs=1e-12)
    assert merged.wsum["x"] == pytest.approx(np.sum(x[ok] * w[ok])) and merged.w["x"] == np.sum(w[ok])
    assert merged.sums["w"] == w.sum()
    assert Moments.from_rows(merged.to_rows()) == merged


def test_sd_needs_two_values():
    assert Moments.of({"x": np.array([0.5])}, {"x": np.array([1.0])}, {}).sd("x") is None


def test_user_table_moments_per_slice():
    ks = (1,)
    frame = _FRAME
    by_slice = user_table_moments(frame, ks)
    assert set(by_slice) == {"all", "p=1"}
    m = by_slice["all"]
    assert m.sums["users"] == 2 and m.sums["users_without_ranked_list"] == 1 and m.sums["n_exposures"] == 6
    assert m.n["auc"] == 1 and m.wsum["auc"] == 0.5 * 4 and m.w["auc"] == 4
    assert m.n["mrr"] == 1 and m.mean["mrr"] == 1.0 and m.wsum["mrr"] == 1.0 * 1 and m.w["mrr"] == 1
    both = merge_by_slice(user_table_moments(frame.iloc[:1], ks), user_table_moments(frame.iloc[1:], ks))
    assert both["all"].sums == m.sums and both["all"].n == m.n and both["all"].mean == m.mean
    # "p=1" is in the second half only: merging must pass it through as it is (user a: mrr 0.5, metrics@1 0)
    p1 = both["p=1"]
    assert p1.n["mrr"] == 1 and p1.mean["mrr"] == 0.5 and p1.n["auc"] == 0 and p1.mean["ndcg@1"] == 0.0
    assert p1.sums["users"] == 1 and p1.sums["n_exposures"] == 1 and p1.sums["hits@1"] == 0


def test_a_users_rows_of_each_k_may_come_in_different_batches():
    # user a at k = 1 and 3: the k = 3 row alone in its batch; values without k are read from k = 1 only
    two_k = pd.concat([_FRAME, _FRAME.assign(k=3, ndcg=[0.5, np.nan, 1.0], hits=[2, 0, 1])], ignore_index=True)
    whole = user_table_moments(two_k, (1, 3))
    parts = merge_by_slice(
        user_table_moments(two_k.iloc[[0, 1, 2, 4, 5]], (1, 3)), user_table_moments(two_k.iloc[[3]], (1, 3))
    )
    m = whole["all"]
    assert m.sums["users"] == 2 and m.sums["n_exposures"] == 4 + 2  # not counted once per k
    assert m.mean["ndcg@1"] == 1.0 and m.mean["ndcg@3"] == 0.5 and m.sums["hits@3"] == 2 + 0
    assert parts["all"].sums == m.sums and parts["all"].mean == m.mean


def test_aggregate_rows_come_in_slice_order_whatever_order_the_tasks_reported():
    # the partitions' moments may be merged in any order (collect order, a rerun); the rows must not depend on it
    from recsys_spark.per_user.aggregate import aggregate_users

    by_slice = user_table_moments(_FRAME, (1,))
    forward, _ = aggregate_users(by_slice, (1,), {})
    backward, _ = aggregate_users(dict(reversed(list(by_slice.items()))), (1,), {})
    assert [r.slice for r in backward] == [r.slice for r in forward]
    assert [r.slice for r in forward] == sorted(r.slice for r in forward)
    assert [(r.metric, r.k, r.aggregation, r.value, r.n, r.se) for r in backward] == [
        (r.metric, r.k, r.aggregation, r.value, r.n, r.se) for r in forward
    ]
    # the values themselves are pinned by hand in tests/per_user/test_aggregate.py


def test_sorted_histogram_is_a_run_length_count():
    values, pos, neg = sorted_histogram([0.1, 0.1, 0.5, 0.7, 0.7, 0.7], [1, 0, 0, 1, 1, 0])
    assert values.tolist() == [0.1, 0.5, 0.7] and pos.tolist() == [1, 0, 2] and neg.tolist() == [1, 1, 1]
    assert [len(a) for a in sorted_histogram([], [])] == [0, 0, 0]


def test_merge_with_a_part_that_lacks_a_column_keeps_the_other_part():
    part = Moments.of({"x": np.array([1.0, 3.0])}, {"x": np.array([2.0, 1.0])}, {"s": np.array([4.0])})
    for merged in (part.merge(Moments()), Moments().merge(part)):
        assert merged.n == {"x": 2.0} and merged.mean == {"x": 2.0} and merged.m2 == {"x": 2.0}
        assert merged.wsum == {"x": 5.0} and merged.w == {"x": 3.0} and merged.sums == {"s": 4.0}
        assert (merged.wsq, merged.w2, merged.xw2) == (part.wsq, part.w2, part.xw2)


def test_merge_of_parts_without_values_then_with_values():
    # a column that is NaN in every row of two parts: n 0 (no division by 0), then a part with 1, 3
    empty = Moments.of({"x": np.array([np.nan])}, {"x": np.array([1.0])}, {})
    merged = empty.merge(empty)
    assert merged.n["x"] == 0 and merged.m2["x"] == 0.0 and merged.sd("x") is None
    full = merged.merge(Moments.of({"x": np.array([1.0, 3.0])}, {"x": np.array([1.0, 1.0])}, {}))
    assert (full.n["x"], full.mean["x"], full.m2["x"]) == (2.0, 2.0, 2.0)
    assert full.sd("x") == pytest.approx(np.sqrt(2.0))  # sd of 1, 3 (divisor n - 1 = 1)


def test_sd_of_two_values_and_of_a_missing_column():
    m = Moments.of({"x": np.array([1.0, 3.0])}, {"x": np.array([1.0, 1.0])}, {})
    assert m.sd("x") == pytest.approx(np.sqrt(2.0))
    assert m.sd("y") is None


def test_user_table_moments_read_nulls_as_missing_and_skip_unused_slices():
    # a nullable column with pd.NA, and a categorical slice column with a category no row has
    frame = _FRAME.copy()
    frame["mrr"] = pd.array([1.0, pd.NA, 0.5], dtype="Float64")
    frame["slice"] = pd.Categorical(frame["slice"], categories=["all", "p=1", "p=2"])
    by_slice = user_table_moments(frame, (1,))
    assert set(by_slice) == {"all", "p=1"}
    assert by_slice["all"].n["mrr"] == 1 and by_slice["all"].mean["mrr"] == 1.0


def test_merging_into_an_empty_part_keeps_the_mean_exactly_and_no_values_mean_zero():
    # the empty side's mean must not enter: 0.1 stays 0.1 to the last bit (not 1 + (0.1 - 1))
    part = Moments.of({"x": np.array([0.1, 0.1])}, {"x": np.array([1.0, 1.0])}, {})
    assert Moments().merge(part).mean["x"] == 0.1 and part.merge(Moments()).mean["x"] == 0.1
    empty = Moments.of({"x": np.array([np.nan])}, {"x": np.array([1.0])}, {})
    assert empty.merge(empty).mean["x"] == 0.0  # no value on either side: mean 0 by convention


def test_moments_of_a_column_without_values_has_mean_zero():
    m = Moments.of({"x": np.array([np.nan, np.nan])}, {"x": np.array([1.0, 1.0])}, {})
    assert (m.n["x"], m.mean["x"], m.m2["x"]) == (0.0, 0.0, 0.0)


def _fields(m: Moments) -> dict:
    return {part: getattr(m, part) for part in ("n", "mean", "m2", "wsum", "w", "sums", "wsq", "w2", "xw2")}


def test_nullable_pandas_columns_give_the_moments_of_plain_numpy_columns():
    # every metric column nullable Float64 with pd.NA where the plain frame has NaN, every count Int64 (a
    # per-user table built by pandas code or read back through Arrow's nullable types); each value by hand
    # on the plain frame, and the nullable frame must give the same floats, field by field
    plain = pd.concat([_FRAME, _FRAME.assign(k=3, ndcg=[0.5, np.nan, 1.0], hits=[2, 0, 1])], ignore_index=True)
    nullable = plain.copy()
    for c in ("auc", "mrr", "ndcg", "map", "precision", "recall", "hit_rate"):
        nullable[c] = pd.array([None if np.isnan(v) else v for v in plain[c]], dtype="Float64")
    for c in ("n_exposures", "n_relevant", "n_lists", "n_lists_ranked", "hits", "k"):
        nullable[c] = pd.array(plain[c].tolist(), dtype="Int64")
    arrow = plain.copy()  # Arrow-backed columns (to_pandas(types_mapper=pd.ArrowDtype)), nulls as Arrow nulls
    for c in ("auc", "mrr", "ndcg", "map", "precision", "recall", "hit_rate"):
        arrow[c] = pd.array([None if np.isnan(v) else v for v in plain[c]], dtype="double[pyarrow]")
    for c in ("n_exposures", "n_relevant", "n_lists", "n_lists_ranked", "hits"):
        arrow[c] = pd.array(plain[c].tolist(), dtype="int64[pyarrow]")
    want = user_table_moments(plain, (1, 3))
    for frame in (nullable, arrow):
        got = user_table_moments(frame, (1, 3))
        assert set(got) == set(want) == {"all", "p=1"}
        for s in want:
            assert _fields(got[s]) == _fields(want[s]), s
            for part in _fields(got[s]).values():
                assert all(type(v) is float for v in part.values()), s  # plain floats: they travel pickled
    m = got["all"]  # users a (4 exposures, 1 ranked list, auc 0.5, ndcg@3 0.5, hits@3 2) and b (no ranked list)
    assert m.n["auc"] == 1 and m.wsum["auc"] == 2.0 and m.w["auc"] == 4.0 and m.wsq["auc"] == 4.0
    assert m.n["ndcg@3"] == 1 and m.mean["ndcg@3"] == 0.5 and m.w["ndcg@3"] == 1.0 and m.xw2["ndcg@3"] == 0.5
    assert m.sums["hits@3"] == 2 and m.sums["hits@3*hits@3"] == 4 and m.sums["hits@3*n_lists_ranked"] == 2
    assert m.sums["n_lists_ranked*n_lists_ranked"] == 1 and m.sums["users_without_ranked_list"] == 1
    assert m.sums["n_relevant*n_relevant"] == 1 and m.sums["n_lists"] == 3 and m.sums["n_relevant"] == 1


def test_moments_of_integer_and_list_inputs_are_those_of_floats():
    # Moments.of casts what it is given: integer values and weights, a list with None for a missing value
    x, w = np.array([1.0, np.nan, 3.0]), np.array([2.0, 1.0, 1.0])
    want = Moments.of({"x": x}, {"x": w}, {"s": np.array([1.0, 2.0])})
    got = Moments.of({"x": [1, None, 3]}, {"x": [2, 1, 1]}, {"s": [True, 2]})
    assert _fields(got) == _fields(want)
    assert got.n["x"] == 2 and got.mean["x"] == 2.0 and got.w2["x"] == 5.0 and got.sums["s"] == 3.0
