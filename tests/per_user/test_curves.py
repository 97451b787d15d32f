"""Pooled curves in Spark (per_user/curves.py): scikit-learn's points per key under the bound, the kernel's
subset above it, the exact AUC alongside; the fixture's 2-row Arrow batches put ties across batches and bins."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import precision_recall_curve, roc_auc_score, roc_curve

from recsys_spark.kernels.auc import sorted_histogram
from recsys_spark.kernels.curve_summary import curves_from_histogram, score_bins
from recsys_spark.per_user.curves import curve_rows, daily_curves, pooled_curves
from recsys_spark.per_user.pooled_auc import BINS

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def keyed_rows(spark):
    """400 rows with their slice keys as an array; scores coarse (ties) and spread over many score bins
    (negative and positive, large and small); ``user_type=new``: 5 negatives only."""
    rng = np.random.default_rng(5)
    rows = []
    for i in range(400):
        carried = ["all"] + [k for k in ("platform=ios", "popularity=head") if rng.random() < 0.5]
        if i < 5:
            carried.append("user_type=new")
        y = 0.0 if i < 5 else float(rng.random() < 0.3)
        score = float(np.round(rng.normal(0, 3) + 2 * y, 1))
        rows.append((carried, score, y))
    frame = spark.createDataFrame(rows, "_slices array<string>, score double, relevance double").cache()
    return frame, rows


def _of(rows, key):
    y = np.array([r[2] > 0 for r in rows if key in r[0]], dtype=int)
    s = np.array([r[1] for r in rows if key in r[0]])
    return y, s


def test_exact_curves_per_slice_are_scikit_learns_and_the_auc_is_exact(keyed_rows):
    frame, rows = keyed_rows
    got = daily_curves(frame, 10**6)
    assert set(got.curves) == {("all",), ("platform=ios",), ("popularity=head",)}
    assert any("user_type=new" in n and "all negatives" in n for n in got.notes), got.notes
    for (key,), c in got.curves.items():
        y, s = _of(rows, key)
        fpr, tpr, thr = roc_curve(y, s)
        np.testing.assert_array_equal(c.roc.x, fpr)
        np.testing.assert_array_equal(c.roc.y, tpr)
        np.testing.assert_array_equal(c.roc.threshold[1:], thr[1:])
        precision, recall, pthr = precision_recall_curve(y, s)
        np.testing.assert_allclose(c.pr.y, precision, atol=1e-15)
        np.testing.assert_array_equal(c.pr.x, recall)
        np.testing.assert_array_equal(c.pr.threshold[:-1], pthr)
        assert got.auc[(key,)].auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert math.isnan(got.auc[("user_type=new",)].auc)


def test_above_the_bound_the_spark_subset_is_the_kernels(keyed_rows):
    frame, rows = keyed_rows
    bound = 11
    got = daily_curves(frame, bound)
    assert any("at most 0.1 apart" in n for n in got.notes), got.notes
    for (key,), c in got.curves.items():
        y, s = _of(rows, key)
        order = np.argsort(s, kind="stable")
        values, pos, neg = sorted_histogram(s[order], y[order])
        expected = curves_from_histogram(values, pos, neg, bound, score_bins(values, BINS))
        for mine, theirs in ((c.roc, expected.roc), (c.pr, expected.pr)):
            np.testing.assert_array_equal(mine.threshold, theirs.threshold)
            np.testing.assert_allclose(mine.x, theirs.x, atol=1e-15)
            np.testing.assert_allclose(mine.y, theirs.y, atol=1e-15)
        assert (c.exact_roc_points, c.exact_pr_points) == (expected.exact_roc_points, expected.exact_pr_points)
        assert len(c.roc) <= bound and len(c.pr) <= bound


def test_curve_rows_write_the_ends_threshold_as_null(spark):
    frame = spark.createDataFrame(
        [("all", 0.9, 1.0), ("all", 0.5, 1.0), ("all", 0.5, 0.0), ("all", 0.1, 0.0)],
        "slice string, score double, relevance double",
    )
    roc, pr = curve_rows(pooled_curves(frame, ("slice",), 1000).curves)
    assert roc == [("all", None, 0.0, 0.0), ("all", 0.9, 0.0, 0.5), ("all", 0.5, 0.5, 1.0), ("all", 0.1, 1.0, 1.0)]
    assert pr == [("all", 0.1, 1.0, 0.5), ("all", 0.5, 1.0, 2 / 3), ("all", 0.9, 0.5, 1.0), ("all", None, 0.0, 1.0)]
