"""F-scores and threshold metrics (kernels/fscores.py) against scikit-learn, hand values and the Open Bandit sample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import (
    accuracy_score,
    confusion_matrix,
    fbeta_score,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
)

from recsys_spark.kernels.fscores import (
    CONFUSION_COUNTS,
    Confusion,
    confusion_column,
    confusion_counts,
    f_alpha,
    global_f_stats,
    threshold_metrics,
    user_confusion,
)
from recsys_spark.kernels.moments import user_table_moments
from recsys_spark.kernels.sums import RatioStats
from recsys_spark.kernels.users import score_units
from recsys_spark.registry import f_score_name, metric, needs_feedback, parse_key
from tests.helpers.obp_golden import obd_logged


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
def test_f_alpha_is_sklearns_fbeta_with_beta_alpha(alpha):
    rng = np.random.default_rng(int(alpha * 10))
    for _ in range(20):
        y, pred = rng.random(50) < 0.3, rng.random(50) < 0.4
        p, r = precision_score(y, pred, zero_division=0), recall_score(y, pred, zero_division=0)
        expected = fbeta_score(y, pred, beta=alpha, zero_division=0)
        assert f_alpha(np.array([p]), np.array([r]), alpha)[0] == pytest.approx(expected, abs=1e-12)


def test_f_alpha_edges_and_hand_values():
    # P = R = 0 -> 0; a missing P or R -> NaN; F1 of (1/2, 1/4) = 2 (1/8) / (3/4) = 1/3
    out = f_alpha(np.array([0.0, np.nan, 0.5, 1.0]), np.array([0.0, 0.5, 0.25, 1.0]), 1.0)
    assert out[0] == 0.0 and np.isnan(out[1]) and out[2] == pytest.approx(1 / 3) and out[3] == 1.0
    # F2 of (1/2, 1/4) = 5 (1/8) / (4 (1/2) + 1/4) = 0.625 / 2.25; the seed's (a² + 1) P R / (a² (P + R)) differs
    assert f_alpha(np.array([0.5]), np.array([0.25]), 2.0)[0] == pytest.approx(0.625 / 2.25)
    assert 5 * 0.125 / (4 * 0.75) != pytest.approx(0.625 / 2.25)


def test_f_score_names_in_the_registry():
    assert [f_score_name(a) for a in (1.0, 0.5, 2.0, 0.25)] == ["f1", "f0.5", "f2", "f0.25"]
    assert parse_key("f0.5@10_user_avg") == ("f0.5", 10, "user_avg")
    assert parse_key("f1@5_global") == ("f1", 5, "global")
    assert metric("f0.5").higher_is_better and metric("f2").at_k and needs_feedback("f0.5")
    with pytest.raises(ValueError):
        parse_key("f0.50@10_user_avg")  # one spelling per alpha
    with pytest.raises(ValueError):
        parse_key("f0.5_user_avg")  # F takes a cut-off


def _one_list_users(rng, n_users: int, length: int) -> pd.DataFrame:
    rows = []
    for u in range(n_users):
        rel = (rng.random(length) < 0.25).astype(float)
        for i in range(length):
            rows.append(("all", f"u{u}", f"r{u}", f"i{i}", i + 1, float(length - i), rel[i]))
    return pd.DataFrame(rows, columns=["slice", "user_id", "list_id", "item_id", "position", "score", "relevance"])


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
def test_user_avg_f_at_k_is_the_mean_of_sklearns_per_list_fbeta(alpha):
    """One list per user: the user's F_alpha@k is sklearn's fbeta_score of (relevant, in the top k) over the list."""
    rng = np.random.default_rng(7)
    frame = _one_list_users(rng, 40, 8)
    ks = (3, 5)
    per_user, per_k = score_units(frame, ks)
    from recsys_spark.kernels.users import user_table

    moments = user_table_moments(user_table(per_user, per_k, ks), ks, f_alphas=(alpha,))["all"]
    for k in ks:
        expected = []
        for _, g in frame.groupby("user_id"):
            y = g["relevance"].to_numpy() > 0
            if not y.any():
                continue  # no ranked list: no value
            top = np.zeros(len(g), dtype=bool)
            top[:k] = True  # the frame's rows are in rank order (score descending)
            expected.append(fbeta_score(y, top, beta=alpha, zero_division=0))
        name = f"{f_score_name(alpha)}@{k}"
        assert moments.n[name] == len(expected)
        assert moments.mean[name] == pytest.approx(np.mean(expected), abs=1e-12)


def test_global_f_is_f_of_the_global_precision_and_recall_with_the_delta_interval():
    rng = np.random.default_rng(3)
    n, k, alpha = 200, 5, 0.5
    lists = rng.integers(1, 4, n).astype(float)
    rel = lists * rng.integers(1, 4, n)
    hits = np.minimum(rel, rng.integers(0, 3, n) * lists)
    products = {
        "hh": hits @ hits,
        "rr": rel @ rel,
        "ll": lists @ lists,
        "hr": hits @ rel,
        "hl": hits @ lists,
        "rl": rel @ lists,
    }
    stats = global_f_stats(alpha, k, n, hits.sum(), rel.sum(), lists.sum(), products)
    p, r = hits.sum() / (k * lists.sum()), hits.sum() / rel.sum()
    assert stats.ratio == pytest.approx((1 + alpha**2) * p * r / (alpha**2 * p + r))
    # the same delta-method variance as the ratio of the per-user arrays themselves
    direct = RatioStats.from_values((1 + alpha**2) * hits, alpha**2 * rel + k * lists)
    assert stats.var_ratio == pytest.approx(direct.var_ratio, rel=1e-9)


def _sklearn_threshold(scores, labels, t):
    y, pred = labels > 0, scores >= t
    tn, fp, fn, tp = confusion_matrix(y, pred, labels=[False, True]).ravel()
    p, r, f, _ = precision_recall_fscore_support(y, pred, average="binary", zero_division=np.nan)
    return (int(tp), int(fp), int(tn), int(fn)), accuracy_score(y, pred), p, r, f


def _check_against_sklearn(scores, labels, thresholds):
    for c in confusion_counts(scores, labels, thresholds):
        counts, acc, p, r, f = _sklearn_threshold(scores, labels, c.threshold)
        assert (c.tp, c.fp, c.tn, c.fn) == counts
        got = threshold_metrics(c, (1.0, 0.5))
        assert got["accuracy"] == pytest.approx(acc)
        for name, want in (("precision", p), ("recall", r), ("f1", f)):
            if np.isnan(want):
                assert got[name] is None
            else:
                assert got[name] == pytest.approx(want)
        if c.tp + c.fp + c.fn:
            pred = scores >= c.threshold
            assert got["f0.5"] == pytest.approx(fbeta_score(labels > 0, pred, beta=0.5, zero_division=np.nan))


def test_threshold_metrics_match_sklearn_on_generated_scores():
    rng = np.random.default_rng(11)
    labels = (rng.random(2000) < 0.2).astype(int)
    scores = np.clip(0.3 * labels + rng.random(2000) * 0.7, 0, 1)
    _check_against_sklearn(scores, labels, [0.0, 0.25, 0.5, 0.75, 1.0])


def test_threshold_metrics_match_sklearn_on_the_open_bandit_sample():
    """Clicks as labels, the logging policy's propensity as a probability score."""
    logged = obd_logged()
    scores, labels = logged["propensity"].to_numpy(dtype=float), logged["click"].to_numpy()
    thresholds = sorted({0.5, float(np.median(scores)), float(scores.min()), float(scores.max())})
    _check_against_sklearn(scores, labels, thresholds)


def test_threshold_metrics_with_one_row_per_denominator():
    # one row, a true positive: every ratio is 1 / 1, defined
    assert threshold_metrics(Confusion(0.5, tp=1, fp=0, tn=0, fn=0)) == {
        "accuracy": 1.0,
        "precision": 1.0,
        "recall": 1.0,
        "f1": 1.0,
    }


def test_threshold_metrics_hand_values_and_undefined_ratios():
    # scores 0.9 0.8 0.6 0.4 0.3 0.1, labels 1 0 1 1 0 0, threshold 0.5: tp 2 (0.9, 0.6), fp 1, fn 1 (0.4), tn 2
    (c,) = confusion_counts(np.array([0.9, 0.8, 0.6, 0.4, 0.3, 0.1]), np.array([1, 0, 1, 1, 0, 0]), [0.5])
    assert (c.tp, c.fp, c.tn, c.fn) == (2, 1, 2, 1)
    assert threshold_metrics(c) == {"accuracy": 4 / 6, "precision": 2 / 3, "recall": 2 / 3, "f1": pytest.approx(2 / 3)}
    # nothing predicted positive: precision and F undefined (None), not 0
    none = threshold_metrics(Confusion(0.99, tp=0, fp=0, tn=3, fn=2))
    assert none["precision"] is None and none["recall"] == 0.0 and none["accuracy"] == 0.6
    assert none["f1"] == 0.0  # 2 tp / (2 tp + fn + fp) = 0 / 2: positives exist, none is found (sklearn too)
    assert threshold_metrics(Confusion(0.5, 0, 0, 0, 0)) == {
        "accuracy": None,
        "precision": None,
        "recall": None,
        "f1": None,
    }


def test_which_new_metrics_have_a_per_user_form():
    from recsys_spark.kernels.metric_specs import parse_metric

    assert parse_metric("f1@10_global").kind == "ratio" and parse_metric("f0.5@5_global").den_terms
    assert parse_metric("capped_ctr_global", 3).num_cap == 3.0
    for name in ("f1@10_user_avg", "click_concentration_global", "clicks_gini_global"):
        with pytest.raises(ValueError, match="no per-user form"):
            parse_metric(name)


def test_user_confusion_is_confusion_counts_per_user_with_nan_scores_left_out():
    rng = np.random.default_rng(5)
    n, groups = 300, 7
    code = rng.integers(0, groups, n)
    scores = rng.random(n)
    scores[rng.random(n) < 0.1] = 0.5  # on a threshold: predicted positive (score >= t)
    scores[rng.random(n) < 0.15] = np.nan
    labels = rng.integers(0, 3, n)  # label > 0 is positive: 1 and 2 alike
    thresholds = [0.0, 0.3, 0.5, 1.0]
    out = user_confusion(code, scores, labels, groups + 1, thresholds)  # one more group: no rows, zeros
    assert sorted(out) == sorted(f"{c}_t{i}" for c in CONFUSION_COUNTS for i in range(4))
    for i, t in enumerate(thresholds):
        for g in range(groups + 1):
            (c,) = confusion_counts(scores[code == g], labels[code == g], [t])
            got = tuple(int(out[confusion_column(name, i)][g]) for name in CONFUSION_COUNTS)
            assert got == (c.tp, c.fp, c.tn, c.fn)
        assert all(out[confusion_column(name, i)].dtype == np.int64 for name in CONFUSION_COUNTS)
    # the NaN rows count nowhere: each threshold's four counts add up to the rows with a score
    for i in range(4):
        assert sum(out[confusion_column(name, i)].sum() for name in CONFUSION_COUNTS) == int((~np.isnan(scores)).sum())


def test_confusion_counts_by_hand_with_nan_scores_and_labels_above_one():
    # scores 0.9 nan 0.6 0.4 nan 0.5, labels 2 1 0 1 0 1; threshold 0.5: predicted 0.9 (pos), 0.6 (neg), 0.5 (pos)
    (c,) = confusion_counts(np.array([0.9, np.nan, 0.6, 0.4, np.nan, 0.5]), np.array([2, 1, 0, 1, 0, 1]), [0.5])
    assert (c.threshold, c.tp, c.fp, c.tn, c.fn, c.n) == (0.5, 2, 1, 0, 1, 4)
