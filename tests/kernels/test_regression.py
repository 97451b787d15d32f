"""The report's regression kernel against scipy.stats (linregress, pearsonr, spearmanr, t) and by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from recsys_spark.kernels.regression import fit_line, predict


@pytest.mark.parametrize("seed,n", [(0, 3), (1, 5), (2, 14), (3, 30)])
def test_fit_line_matches_scipy(seed, n):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.6, 0.8, n)
    y = 0.05 + 0.3 * x + rng.normal(0, 0.01, n)
    y[0] = y[1]  # a tie for the ranks
    fit = fit_line(x, y, level=0.9)
    ref = stats.linregress(x, y)
    assert fit.n == n
    assert fit.slope == pytest.approx(ref.slope, rel=1e-10)
    assert fit.intercept == pytest.approx(ref.intercept, rel=1e-10)
    assert fit.slope_se == pytest.approx(ref.stderr, rel=1e-9)
    half = stats.t.ppf(0.95, n - 2) * ref.stderr
    assert fit.slope_ci_low == pytest.approx(ref.slope - half, rel=1e-9)
    assert fit.slope_ci_high == pytest.approx(ref.slope + half, rel=1e-9)
    assert fit.r_squared == pytest.approx(ref.rvalue**2, rel=1e-10)
    pr = stats.pearsonr(x, y)
    assert fit.pearson_r == pytest.approx(pr.statistic, rel=1e-10)
    assert fit.pearson_p == pytest.approx(pr.pvalue, rel=1e-7, abs=1e-14)
    assert fit.pearson_p == pytest.approx(ref.pvalue, rel=1e-7, abs=1e-14)
    sr = stats.spearmanr(x, y)
    assert fit.spearman_rho == pytest.approx(sr.statistic, rel=1e-10)
    assert fit.spearman_p == pytest.approx(sr.pvalue, rel=1e-7, abs=1e-14)


def test_hand_checked_line():
    # x = 1, 2, 3, 4; y = 2, 4, 5, 7: x̄ = 2.5, ȳ = 4.5, S_xx = 5, S_xy = 1.5*2.5 + 0.5*0.5 + 0.5*0.5 + 1.5*2.5 = 8
    fit = fit_line([1, 2, 3, 4], [2, 4, 5, 7])
    assert fit.slope == pytest.approx(8 / 5)
    assert fit.intercept == pytest.approx(4.5 - 1.6 * 2.5)
    # S_yy = 6.25 + 0.25 + 0.25 + 6.25 = 13; s² = (13 - 1.6 * 8) / 2 = 0.1; se = sqrt(0.1 / 5)
    assert fit.slope_se == pytest.approx(math.sqrt(0.1 / 5))
    assert fit.r_squared == pytest.approx(8 * 8 / (5 * 13))
    assert fit.spearman_rho == pytest.approx(1.0)


def test_edge_cases():
    nan = float("nan")
    few = fit_line([0.7, nan, 0.8], [0.1, 0.2, nan])  # two pairs dropped: one point left
    assert few.n == 1 and few.slope is None and few.pearson_r is None
    two = fit_line([0.7, 0.8], [0.1, 0.3])  # a line, but no interval or p-value from 2 points
    assert two.slope == pytest.approx(2.0) and two.slope_se is None and two.slope_ci_low is None
    assert two.pearson_r == pytest.approx(1.0) and two.pearson_p is None
    flat_x = fit_line([0.7, 0.7, 0.7], [0.1, 0.2, 0.3])
    assert flat_x.n == 3 and flat_x.slope is None
    flat_y = fit_line([0.6, 0.7, 0.8], [0.2, 0.2, 0.2])
    assert flat_y.slope == pytest.approx(0.0, abs=1e-12) and flat_y.pearson_r is None and flat_y.r_squared is None
    with pytest.raises(ValueError):
        fit_line([1, 2], [1])


@pytest.mark.parametrize("seed,n,level", [(0, 3, 0.95), (1, 7, 0.9), (2, 30, 0.95)])
def test_the_prediction_interval_is_statsmodels_new_observation_interval(seed, n, level):
    import statsmodels.api as sm

    rng = np.random.default_rng(seed)
    x = rng.uniform(0.6, 0.8, n)
    y = 0.05 + 0.3 * x + rng.normal(0, 0.01, n)
    fit = fit_line(x, y, level=level)
    model = sm.OLS(y, sm.add_constant(x)).fit()
    for x0 in (0.55, float(x.mean()), 0.7, 0.9):
        got = predict(fit, x0)
        frame = model.get_prediction(np.array([[1.0, x0]])).summary_frame(alpha=1 - level)
        assert got.y == pytest.approx(frame["mean"].iloc[0], rel=1e-10)
        assert got.low == pytest.approx(frame["obs_ci_lower"].iloc[0], rel=1e-9)
        assert got.high == pytest.approx(frame["obs_ci_upper"].iloc[0], rel=1e-9)
        # wider than the mean's confidence interval, which is not what a new candidate's value needs
        assert got.high - got.low > frame["mean_ci_upper"].iloc[0] - frame["mean_ci_lower"].iloc[0]


def test_the_prediction_interval_by_hand():
    # x = 1, 2, 3, 4; y = 2, 4, 5, 7: b = 1.6, a = 0.5, residuals -0.1, 0.3, -0.3, 0.1: s² = 0.2 / 2 = 0.1;
    # at x0 = 5: ŷ = 8.5, se = sqrt(0.1 (1 + 1/4 + 6.25/5)) = sqrt(0.25) = 0.5, t_{2, 0.975} = 4.302652...
    got = predict(fit_line([1, 2, 3, 4], [2, 4, 5, 7]), 5)
    t = 4.302652729749464
    assert (got.y, got.se) == (pytest.approx(8.5), pytest.approx(0.5))
    assert (got.low, got.high) == (pytest.approx(8.5 - 0.5 * t), pytest.approx(8.5 + 0.5 * t))


def test_no_line_no_prediction_and_two_points_no_interval():
    assert predict(fit_line([1, 1, 1], [1, 2, 3]), 2).y is None  # a constant x
    two = predict(fit_line([0, 1], [1, 3]), 2)
    assert (two.y, two.low, two.high) == (5.0, None, None)
    assert predict(fit_line([0, 1, 2], [1, 2, 4]), float("nan")).y is None
