"""CUPED: a metric adjusted by the same metric over the pre-period, theta pooled over the arms.

A mean metric (:class:`CovariateStats`, :func:`fill_covariate`, :func:`cuped_theta`, :func:`cuped_adjusted`,
:func:`cuped_compare`: Welch on y - theta (x - mean x)) and a ratio of sums (:class:`RatioCovariateStats`,
:func:`cuped_ratio_compare`: the delta method with the pre-period ratio as covariate), from sufficient statistics
that add up over users, as gbstats' ``RegressionAdjustedStatistic`` and ``RegressionAdjustedRatioStatistic``.
Pure numpy; no Spark.  docs/experiments.md, "CUPED".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recsys_spark.kernels.comparisons import Comparison, compare_estimates, welch
from recsys_spark.kernels.quantiles import p_value_z, z_quantile
from recsys_spark.kernels.sums import MeanStats


@dataclass(frozen=True)
class CovariateStats:
    """Sufficient statistics of a per-user outcome y and its pre-period covariate x."""

    n: float
    sum_y: float
    sum_yy: float
    sum_x: float
    sum_xx: float
    sum_xy: float

    @classmethod
    def from_values(cls, y: np.ndarray, x: np.ndarray) -> CovariateStats:
        y = np.asarray(y, dtype=np.float64)
        x = np.asarray(x, dtype=np.float64)
        return cls(float(len(y)), float(y.sum()), float(y @ y), float(x.sum()), float(x @ x), float(x @ y))

    def merge(self, other: CovariateStats) -> CovariateStats:
        return CovariateStats(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[float, ...]:
        return (self.n, self.sum_y, self.sum_yy, self.sum_x, self.sum_xx, self.sum_xy)


def fill_covariate(have: CovariateStats, missing: MeanStats, fill: float) -> CovariateStats:
    """Add the users without a covariate, their x set to ``fill`` (the pooled mean of x).

    Sums over the missing users: sum x = m c, sum x^2 = m c^2, sum xy = c sum y.
    Any constant keeps the estimate unbiased (x is pre-treatment and the fill
    does not depend on the arm); the pooled mean keeps the variance reduction
    of the users that have one.
    """
    c = float(fill)
    return CovariateStats(
        have.n + missing.n,
        have.sum_y + missing.sum,
        have.sum_yy + missing.sum_sq,
        have.sum_x + missing.n * c,
        have.sum_xx + missing.n * c * c,
        have.sum_xy + c * missing.sum,
    )


def cuped_theta(arms: Sequence[CovariateStats]) -> float:
    """theta = Cov(y, x) / Var(x) over the users of all arms pooled (one theta for every arm).

    Returns 0 (no adjustment) when x does not vary.
    """
    total = arms[0]
    for a in arms[1:]:
        total = total.merge(a)
    n = total.n
    if n < 2:
        return 0.0
    sxx = total.sum_xx - total.sum_x * total.sum_x / n
    sxy = total.sum_xy - total.sum_x * total.sum_y / n
    return float(sxy / sxx) if sxx > 1e-12 * max(total.sum_xx, 1.0) else 0.0


def cuped_adjusted(arm: CovariateStats, theta: float, x_mean: float) -> MeanStats:
    """The sums of y_cv = y - theta (x - x_mean) over the arm's users, as :class:`MeanStats`.

    mean(y_cv) = mean(y) - theta (mean_arm(x) - x_mean);
    sum y_cv^2 = sum y^2 - 2 theta sum y(x - x_mean) + theta^2 sum (x - x_mean)^2.
    """
    n, sy, syy, sx, sxx, sxy = arm.as_tuple()
    sdx = sx - n * x_mean  # sum (x - x_mean)
    sdxdx = sxx - 2 * x_mean * sx + n * x_mean * x_mean
    sydx = sxy - x_mean * sy
    return MeanStats(n, sy - theta * sdx, syy - 2 * theta * sydx + theta * theta * sdxdx)


def cuped_compare(
    control: CovariateStats, treatment: CovariateStats, confidence: float = 0.95
) -> tuple[Comparison, float]:
    """Welch's test on CUPED-adjusted values, theta pooled over both arms; returns (comparison, theta).

    The relative lift is the adjusted difference over the plain control mean, Δ_cv / ȳ_c, with the variance
    Var(y_cv)_t/(n_t ȳ_c²) + Var(y_cv)_c ȳ_t²/(n_c ȳ_c⁴) and Welch's df: what gbstats (0.8.0) computes for a
    ``RegressionAdjustedStatistic`` (its golden values in tests/kernels/test_experiments.py), so that the lift
    is the change over the ``control_value`` of the same row (docs/experiments.md, "CUPED").
    """
    theta = cuped_theta([control, treatment])
    x_mean = (control.sum_x + treatment.sum_x) / (control.n + treatment.n)
    plain = (control.sum_y / control.n, treatment.sum_y / treatment.n) if control.n and treatment.n else None
    adjusted = cuped_adjusted(control, theta, x_mean), cuped_adjusted(treatment, theta, x_mean)
    return welch(*adjusted, confidence, unadjusted=plain), theta


@dataclass(frozen=True)
class RatioCovariateStats:
    """Sums of a ratio metric's per-user numerator x and denominator y and of their pre-period u, v.

    Every first and second moment of (x, y, u, v) over the arm's users; a user
    without pre-period data has u = v = 0.
    """

    n: float
    s: tuple[float, float, float, float]  # sum x, y, u, v
    ss: tuple[tuple[float, ...], ...]  # 4 x 4 sums of products

    @classmethod
    def from_values(cls, x: np.ndarray, y: np.ndarray, u: np.ndarray, v: np.ndarray) -> RatioCovariateStats:
        m = np.vstack([np.asarray(a, dtype=np.float64) for a in (x, y, u, v)])
        return cls(float(m.shape[1]), tuple(m.sum(axis=1)), tuple(map(tuple, m @ m.T)))

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """(means, sample covariance matrix) of (x, y, u, v)."""
        mu = np.asarray(self.s) / self.n
        cov = (np.asarray(self.ss) - self.n * np.outer(mu, mu)) / (self.n - 1)
        return mu, cov


def cuped_ratio_compare(
    control: RatioCovariateStats, treatment: RatioCovariateStats, confidence: float = 0.95
) -> tuple[Comparison, float] | None:
    """CUPED for a ratio of sums R = sum x / sum y, with the pre-period ratio R' = sum u / sum v as covariate.

    Delta method per arm, with the gradients a = (1/mu_y, -mu_x/mu_y^2, 0, 0) of R and
    b = (0, 0, 1/mu_v, -mu_u/mu_v^2) of R' and the covariance S of (x, y, u, v):
    Var(R) = a'Sa/n, Var(R') = b'Sb/n, Cov(R, R') = a'Sb/n.  theta pooled over
    arms = sum Cov / sum Var(R'); per arm R_cv = R - theta (R' - R'_pooled),
    Var(R_cv) = Var(R) - 2 theta Cov + theta^2 Var(R').  Normal quantile, as the
    unadjusted delta method.  Returns (comparison with ``method = "delta_cuped"``, theta), or None when
    the adjustment is undefined: an arm with fewer than two users, or without a positive mean denominator
    (mu_y or mu_v <= 0).  A variance that rounding leaves below 0 is 0 (it is a variance of a linear
    combination, never negative).
    """
    if any(arm.n < 2 or arm.s[1] <= 0 or arm.s[3] <= 0 for arm in (control, treatment)):
        return None
    parts = []
    for arm in (control, treatment):
        mu, cov = arm.moments()
        a = np.array([1 / mu[1], -mu[0] / mu[1] ** 2, 0.0, 0.0])
        b = np.array([0.0, 0.0, 1 / mu[3], -mu[2] / mu[3] ** 2])
        parts.append((mu[0] / mu[1], mu[2] / mu[3], a @ cov @ a / arm.n, b @ cov @ b / arm.n, a @ cov @ b / arm.n))
    var_pre = parts[0][3] + parts[1][3]
    theta = float((parts[0][4] + parts[1][4]) / var_pre) if var_pre > 0 else 0.0
    pooled = (control.s[2] + treatment.s[2]) / (control.s[3] + treatment.s[3])
    (rc, pc, vc, wc, cc), (rt, pt, vt, wt, ct) = parts
    adj_c, adj_t = rc - theta * (pc - pooled), rt - theta * (pt - pooled)
    var_c = max(vc - 2 * theta * cc + theta * theta * wc, 0.0)
    var_t = max(vt - 2 * theta * ct + theta * theta * wt, 0.0)
    return compare_estimates(adj_c, var_c, adj_t, var_t, z_quantile(confidence), p_value_z, None, "delta_cuped"), theta
