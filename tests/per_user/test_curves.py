"""Pooled curves in Spark (per_user/curves.py): scikit-learn's points per key under the bound, the kernel's
subset above it, the exact AUC alongside; the fixture's 2-row Arrow batches put ties across batches and bins."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import precision_recall_curve, roc_auc_score, roc_curve

from recsys_spark.kernels.auc import sorted_histogram
from recsys_spark.kernels.curve_summary import curves_from_histogram, score_bins
from recsys_spark.kernels.curves import area_bound, cells, trapezoid_area
from recsys_spark.per_user.curves import class_totals, curve_rows, daily_curves, pooled_curves, summary_frame
from recsys_spark.per_user.pooled_auc import BINS

pytestmark = pytest.mark.spark

SCHEMA = "slice string, score double, relevance double"


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


def test_a_slice_at_the_bound_is_exact_and_one_distinct_score_past_it_the_subset(keyed_rows):
    # the fixture's 2-row batches spread each slice over every partition: the whole scores of each partition
    # must add up to the slice's distinct scores exactly when they fit
    frame, rows = keyed_rows
    y, s = _of(rows, "all")
    distinct = len(np.unique(s))
    exact = daily_curves(frame, distinct + 1)
    fpr, tpr, _ = roc_curve(y, s)
    np.testing.assert_array_equal(exact.curves[("all",)].roc.x, fpr)
    np.testing.assert_array_equal(exact.curves[("all",)].roc.y, tpr)
    assert not any("slice all has" in n for n in exact.notes), exact.notes
    past = daily_curves(frame, distinct)
    assert any(f"slice all has {distinct} distinct scores" in n for n in past.notes), past.notes
    order = np.argsort(s, kind="stable")
    values, pos, neg = sorted_histogram(s[order], y[order])
    expected = curves_from_histogram(values, pos, neg, distinct, score_bins(values, BINS))
    np.testing.assert_array_equal(past.curves[("all",)].roc.threshold, expected.roc.threshold)
    np.testing.assert_array_equal(past.curves[("all",)].pr.threshold, expected.pr.threshold)


def test_the_stream_sends_a_bounded_summary_not_a_row_per_distinct_score(spark):
    rng = np.random.default_rng(11)
    n = 20000
    y = (rng.random(n) < 0.2).astype(float)
    s = rng.normal(size=n) + y  # every score distinct
    frame = spark.createDataFrame([("all", float(a), float(b)) for a, b in zip(s, y, strict=True)], SCHEMA)
    bound = 11
    totals = class_totals(frame, ("slice",))
    assert totals == {("all",): (y.sum(), n - y.sum())}
    sent = summary_frame(frame, ("slice",), totals, bound).toPandas()
    bins = sent[sent["role"] < 0]
    partitions = frame.rdd.getNumPartitions()
    # one row per bin, at most 4 (C + B) kept scores, whole scores only from a partition with at most bound - 1
    assert len(sent) - len(bins) <= 4 * (cells(bound) + len(bins)) + partitions * (bound - 1)
    assert len(sent) < n / 4
    got = pooled_curves(frame, ("slice",), bound)
    assert got.auc[("all",)].auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert abs(trapezoid_area(got.curves[("all",)].roc.x, got.curves[("all",)].roc.y) - got.auc[("all",)].auc) <= (
        area_bound(bound)
    )


def test_the_pooled_auc_of_the_curves_pass_is_plain_python_floats(spark):
    # the partials come back from Arrow as numpy scalars; a metrics row built from them failed Spark's schema
    # check in metrics_frame (DoubleType does not accept numpy.float64), which the bench smoke caught
    from recsys_spark.per_user.curves import pooled_curves

    rows = spark.createDataFrame(
        [("all", 0.9, 1.0), ("all", 0.2, 0.0), ("all", 0.6, 1.0), ("all", 0.4, 0.0)],
        "slice string, score double, relevance double",
    )
    part = pooled_curves(rows, ("slice",), 11).auc[("all",)]
    assert all(type(v) is float for v in (part.u, part.n_pos, part.n_neg)) and part.auc == 1.0
