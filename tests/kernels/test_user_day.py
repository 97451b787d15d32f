"""kernels/user_day.py: a user's day sums, by hand (no Spark)."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_spark.kernels.user_day import business_sums, user_day_columns, user_day_sums, user_value_sums
from recsys_spark.registry import LIST_METRICS


def test_the_columns_follow_the_labelled_rows_and_the_cut_offs():
    assert business_sums(["user_id", "item_id"]) == ["exposures", "clicked", "requests", "empty_requests", "exposed"]
    columns = ["user_id", "_ev_purchase", "dwell_seconds", "value", "n_clicks"]
    assert business_sums(columns)[5:] == [
        "click_events",
        "value",
        "dwell",
        "valued",
        *["ev_purchase_user", "ev_purchase_exposures"],
    ]
    assert user_value_sums([3])[:6] == ["lists_ranked", "relevant", "auc_sum", "auc_exposures", "mrr_sum", "hits_at_3"]
    assert len(user_value_sums([1, 3])) == 5 + 2 * (1 + len(LIST_METRICS))
    assert user_day_columns(columns, [3]) == business_sums(columns) + user_value_sums([3])


def test_sums_by_hand_a_unit_without_metrics_gets_zeros():
    # units: (all, u0), (all, u1), (x, u0); u1 has only an empty response (no metrics); (x, u0) has one ranked list,
    # no AUC and a NaN precision (its auc and precision sums are 0); (all, u0) has 2 ranked lists, so its mrr sum is
    # 2 x its mean mrr
    ks = [3]
    names = user_day_columns(["_ev_buy", "value"], ks)
    values = {
        "pv": np.array([2.0, 1.0, 1.0]),
        "empty": np.array([0.0, 1.0, 0.0]),
        "exposures": np.array([5.0, 0.0, 3.0]),
        "clicked": np.array([2.0, 0.0, 1.0]),
        "value": np.array([7.5, 0.0, 0.0]),
        "valued": np.array([1.0, 0.0, 0.0]),
        "ev_buy": np.array([2.0, 0.0, 0.0]),
    }
    per_user = {
        "n_lists_ranked": np.array([1, 2]),
        "n_relevant": np.array([2, 1]),
        "n_exposures": np.array([3, 5]),
        "auc": np.array([np.nan, 0.75]),
        "mrr": np.array([0.5, 0.25]),
    }
    # metric units in another order than the labelled units: matched by (slice, user)
    per_k = {m: np.array([[np.nan if m == "precision" else 0.4], [0.2]]) for m in LIST_METRICS}
    per_k["hits"] = np.array([[1], [3]])
    got = user_day_sums(
        np.array([0, 0, 1]), np.array([0, 1, 0]), values, np.array([1, 0]), np.array([0, 0]), per_user, per_k, ks, names
    )
    row = {name: got[:, j].tolist() for j, name in enumerate(names)}
    assert row["requests"] == [2, 1, 1] and row["empty_requests"] == [0, 1, 0]
    assert row["exposed"] == [1, 0, 1] and row["value"] == [7.5, 0, 0] and row["valued"] == [1, 0, 0]
    assert row["ev_buy_user"] == [1, 0, 0] and row["ev_buy_exposures"] == [2, 0, 0]
    assert row["lists_ranked"] == [2, 0, 1] and row["relevant"] == [1, 0, 2]
    assert row["auc_sum"] == [0.75 * 5, 0, 0] and row["auc_exposures"] == [5, 0, 0]
    assert row["mrr_sum"] == [0.5, 0, 0.5] and row["hits_at_3"] == [3, 0, 1]
    assert row["precision_at_3_sum"] == pytest.approx([0.4, 0, 0]) and row["ndcg_at_3_sum"] == pytest.approx(
        [0.4, 0, 0.4]
    )


def test_a_metric_unit_without_labelled_rows_is_an_error():
    ones = np.ones(1)
    per_user = {name: ones for name in ("n_lists_ranked", "n_relevant", "n_exposures", "auc", "mrr")}
    per_k = {m: np.ones((1, 1)) for m in (*LIST_METRICS, "hits")}
    units = {"pv": ones, "empty": np.zeros(1), "exposures": ones}
    with pytest.raises(ValueError, match="no labelled rows"):
        user_day_sums(np.array([0]), np.array([0]), units, np.array([1]), np.array([0]), per_user, per_k, [1], ["pv"])


def _empty_metrics(ks):
    per_user = {name: np.zeros(0) for name in ("n_lists_ranked", "n_relevant", "n_exposures", "auc", "mrr")}
    return per_user, {m: np.zeros((0, len(ks))) for m in (*LIST_METRICS, "hits")}


def test_indicators_are_one_for_any_positive_count_and_a_day_without_ranked_lists_has_zero_metric_sums():
    # one exposure makes a user exposed; two valued rows or two purchases still make it 1 (an indicator, not a
    # count); with no unit ranked at all (every list without a click) every metric sum is 0
    ks = [5]
    names = user_day_columns(["value", "_ev_buy"], ks)
    values = {
        "pv": np.array([1.0, 2.0]),
        "empty": np.array([0.0, 0.0]),
        "exposures": np.array([1.0, 4.0]),
        "clicked": np.array([0.0, 2.0]),
        "value": np.array([0.0, 3.0]),
        "valued": np.array([0.0, 2.0]),
        "ev_buy": np.array([0.0, 2.0]),
    }
    per_user, per_k = _empty_metrics(ks)
    none = np.array([], dtype=np.int64)
    got = user_day_sums(np.array([0, 0]), np.array([0, 1]), values, none, none, per_user, per_k, ks, names)
    row = {name: got[:, j].tolist() for j, name in enumerate(names)}
    assert row["exposed"] == [1, 1] and row["valued"] == [0, 1] and row["ev_buy_user"] == [0, 1]
    assert row["ev_buy_exposures"] == [0, 2] and row["clicked"] == [0, 2]
    assert all(row[name] == [0, 0] for name in user_value_sums(ks))


def test_metrics_without_any_labelled_unit_are_an_error():
    per_user = {name: np.ones(1) for name in ("n_lists_ranked", "n_relevant", "n_exposures", "auc", "mrr")}
    per_k = {m: np.ones((1, 1)) for m in (*LIST_METRICS, "hits")}
    none = np.array([], dtype=np.int64)
    with pytest.raises(ValueError, match="no labelled rows"):
        user_day_sums(none, none, {"pv": np.zeros(0)}, np.array([0]), np.array([0]), per_user, per_k, [1], ["pv"])
