"""kernels.regression's edges and argument checks: properties, never the last bit of a float sum."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from recsys_spark.kernels import regression
from recsys_spark.kernels.regression import bounded, correlation_p, fit_line


@pytest.mark.parametrize("seed", range(20))
def test_a_perfect_line_has_r_within_one_and_p_value_zero_whatever_the_rounding(seed):
    # whether the sums round r to 1 - 1e-16, 1 or 1 + 1e-16 depends on the CPU and the library:
    # assert what must hold for every one of them
    rng = np.random.default_rng(seed)
    x = rng.choice([0.0, 0.4, 0.8, 0.82, 0.86, 0.94], size=int(rng.integers(3, 9)))
    x[:2] = (0.0, 0.8)  # never constant
    slope = float(rng.choice([0.1, -3.0, 7.3]))
    fit = fit_line(x, slope * x + 0.2)
    sign = math.copysign(1.0, slope)
    for r in (fit.pearson_r, fit.spearman_rho):
        assert r is not None and -1.0 <= r <= 1.0
        assert r == pytest.approx(sign, abs=1e-12)
    assert fit.r_squared is not None and 0.0 <= fit.r_squared <= 1.0
    assert fit.pearson_p is not None and fit.pearson_p <= 1e-6
    assert fit.spearman_p is not None and fit.spearman_p <= 1e-6


def test_a_correlation_that_rounds_past_one_is_clipped_and_gets_p_zero(monkeypatch):
    # a constructed overshoot: whatever scipy returns, the kernel reports a correlation in [-1, 1]
    class Overshoot:
        statistic = 1.0 + 2**-52

    monkeypatch.setattr(regression.stats, "pearsonr", lambda x, y: Overshoot())
    fit = fit_line([0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0])
    assert fit.pearson_r == 1.0 and fit.pearson_p == 0.0 and fit.r_squared == 1.0
    assert bounded(-1.0 - 2**-52) == -1.0 and bounded(0.3) == 0.3


def test_correlation_p_is_the_t_formula():
    # r = 0.6 of n = 10: t = 0.6 * sqrt(8 / 0.64) = 2.1213...; two-sided p with 8 df
    t = 0.6 * math.sqrt(8 / 0.64)
    assert correlation_p(0.6, 10) == pytest.approx(2 * stats.t.sf(t, 8), rel=1e-12)
    assert correlation_p(-0.6, 10) == correlation_p(0.6, 10)
    assert correlation_p(-1.0, 4) == 0.0


def test_correlation_of_x_spanning_exactly_one_and_of_two_points():
    # x from 0 to 1 (its range is exactly 1): a correlation like any other
    fit = fit_line([0.0, 0.5, 1.0], [0.2, 0.1, 0.4])
    # S_xx = 0.5, S_yy = 0.0466..., S_xy = 0.1: r = 0.1 / sqrt(0.5 * S_yy)
    syy = (0.2 - 0.7 / 3) ** 2 + (0.1 - 0.7 / 3) ** 2 + (0.4 - 0.7 / 3) ** 2
    assert fit.pearson_r == pytest.approx(0.1 / math.sqrt(0.5 * syy))
    assert fit.spearman_rho == pytest.approx(0.5)  # ranks 1 2 3 against 2 1 3
    two = fit_line([0.7, 0.8], [0.1, 0.3])  # the ranks 1, 2 span exactly 1
    assert two.spearman_rho == pytest.approx(1.0) and two.spearman_p is None


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1])
def test_level_outside_the_open_unit_interval_is_refused(level):
    with pytest.raises(ValueError, match=r"^level must be in \(0, 1\), got -?[0-9.]+$"):
        fit_line([1, 2, 3], [1, 2, 4], level=level)


def test_unequal_lengths_are_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"^x and y must have the same length$"):
        fit_line([1, 2, 3], [1, 2])


def test_the_interval_uses_the_t_quantile_of_n_minus_2_degrees_of_freedom():
    x, y = [1.0, 2.0, 3.0, 4.0, 5.0], [1.1, 1.9, 3.2, 3.9, 5.3]
    fit = fit_line(x, y, level=0.8)
    ref = stats.linregress(x, y)
    half = stats.t.ppf(0.9, 3) * ref.stderr
    assert fit.slope_ci_low == pytest.approx(ref.slope - half, rel=1e-9)
    assert fit.slope_ci_high == pytest.approx(ref.slope + half, rel=1e-9)
