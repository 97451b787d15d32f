"""kernels.regression's edges and argument checks (issue 18: each test kills a surviving mutant)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recsys_spark.kernels.regression import betainc, fit_line, t_ppf, t_sf


def test_a_perfect_line_has_p_value_zero_and_r_clipped_to_one_when_rounding_overshoots():
    # r computed from these floats is 1.0000000000000002 (resp. -1.0000000000000002): clipped to +-1, p is 0
    x = np.array([0.8, 0.4, 0.8, 0.0, 0.4])
    up = fit_line(x, 0.1 * x)
    assert up.pearson_r == 1.0 and up.pearson_p == 0.0 and up.r_squared == 1.0
    assert up.spearman_rho == pytest.approx(1.0) and up.spearman_p == 0.0
    x = np.array([0.94, 0.82, 0.0, 0.86])
    down = fit_line(x, -3.0 * x + 0.2)
    assert down.pearson_r == -1.0 and down.pearson_p == 0.0 and down.r_squared == 1.0
    assert down.spearman_rho == pytest.approx(-1.0) and down.spearman_p == 0.0
    exact = fit_line([0, 1, 2], [1, 3, 5])
    assert exact.pearson_p == 0.0 and exact.spearman_p == 0.0


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


@pytest.mark.parametrize("q", [0.0, 1.0, 1.5, -0.5])
def test_t_quantile_outside_the_open_unit_interval_is_refused(q):
    with pytest.raises(ValueError, match=r"^q must be in \(0, 1\), got -?[0-9.]+$"):
        t_ppf(q, 5)


def test_t_median_is_exactly_zero():
    for df in (1, 3, 30):
        assert t_ppf(0.5, df) == 0.0


def test_t_tail_far_out_keeps_its_relative_precision():
    # p-values of 1e-5 .. 1e-30: the direct continued fraction, not 1 - (1 - p), which would round to 0
    from scipy import stats

    for t, df in [(40.0, 30), (12.0, 20), (8.0, 60), (25.0, 9)]:
        assert t_sf(t, df) == pytest.approx(stats.t.sf(t, df), rel=1e-9)


def test_incomplete_beta_at_the_ends_of_the_interval():
    for a, b in [(0.5, 0.5), (2.0, 0.5), (15.0, 0.5)]:
        assert betainc(a, b, 0.0) == 0.0 and betainc(a, b, 1.0) == 1.0


@pytest.mark.parametrize(
    "a, b, x, where",
    [
        (0.25, 2.25, 0.5, "the first denominator, 1 - (a + b) x / (a + 1)"),
        (1.0, 4.0, 0.5, "d after the first even step"),
        (1.0, 7.0, 0.5, "d after the second odd step"),
        (2.0, 8.0, 0.5, "d after the second odd step"),
        (3.0, 9.0, 0.75, "c after the first odd step"),
    ],
)
def test_modified_lentz_steps_over_an_exactly_zero_denominator(a, b, x, where):
    # the continued fraction's value (from scipy's I_x(a, b)) where one partial denominator is exactly 0 in
    # floating point: the modified Lentz method replaces it by 1e-300 and goes on (docs/mutation.md);
    # without the guard the step divides by zero.  Outside betainc's region x < (a + 1) / (a + b + 2),
    # so _betacf is called directly.
    from scipy.special import betainc as scipy_betainc

    from recsys_spark.kernels.regression import _betacf

    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    assert _betacf(a, b, x) == pytest.approx(scipy_betainc(a, b, x) * a / front, rel=1e-9), where
