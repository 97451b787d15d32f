"""Golden values of the sequential (always-valid) intervals and p-values, computed by GrowthBook's gbstats.

``make golden-gbstats`` runs it in a throwaway venv with gbstats from PyPI (``GBSTATS_VENV``, default
/tmp/gbvenv); it prints the ``GOLDEN`` literal that ``tests/kernels/test_sequential.py`` holds, with the gbstats
version.  Each case is a pair of arms' sufficient statistics (the sums ``recsys_spark.experiments.arm_sums.arm_sums``
gathers), generated here from a seeded numpy generator, and gbstats' ``SequentialTwoSidedTTest`` on the same
sums: absolute and relative differences, its interval and p-value.

* ``mean``: ``SampleMeanStatistic(n, Σx, Σx²)`` per arm (our Welch rows);
* ``ratio``: ``RatioStatistic`` of ``SampleMeanStatistic`` numerator and denominator and Σxy (our delta rows);
* ``cuped_mean``: ``RegressionAdjustedStatistic`` (post, pre, Σ post·pre; θ pooled by gbstats), absolute and
  relative (the adjusted difference over the unadjusted control mean, as ours since issue 40);
* ``cuped_ratio``: gbstats 0.8 has no regression-adjusted ratio; its sequence is applied to our per-arm CUPED
  ratio estimates (``kernels.cuped.cuped_ratio_compare``): a ``SampleMeanStatistic`` with that mean and
  that variance × n stands in for each arm (gbstats reads only n, the mean and the variance), so the case checks
  the sequence, not the CUPED variance (tested against an independent computation in test_experiments_kernels).

    /tmp/gbvenv/bin/python tests/golden/gbstats_sequential.py > /tmp/golden.txt
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

import numpy as np
from gbstats.frequentist.tests import SequentialConfig, SequentialTwoSidedTTest
from gbstats.models.statistics import RatioStatistic, RegressionAdjustedStatistic, SampleMeanStatistic

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo's kernels: numpy and scipy only
from recsys_spark.kernels.cuped import RatioCovariateStats, cuped_ratio_compare  # noqa: E402


def mean_sums(x: np.ndarray) -> dict[str, float]:
    return {"n": float(len(x)), "x": float(x.sum()), "xx": float(x @ x)}


def ratio_sums(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    return {
        "n": float(len(x)),
        "x": float(x.sum()),
        "y": float(y.sum()),
        "xx": float(x @ x),
        "yy": float(y @ y),
        "xy": float(x @ y),
    }


def cuped_sums(y: np.ndarray, x: np.ndarray) -> dict[str, float]:
    """A mean metric's sums with every user's covariate (the COVARIATE_PARTS of kernels.experiments)."""
    out = mean_sums(y)
    out.update(
        {
            "cn": float(len(y)),
            "cy": float(y.sum()),
            "cyy": float(y @ y),
            "cx": float(x.sum()),
            "cxx": float(x @ x),
            "cxy": float(x @ y),
        }
    )
    return out


def ratio_cuped_sums(x, y, u, v) -> dict[str, float]:
    out = ratio_sums(x, y)
    out.update(
        {
            "cn": float((v > 0).sum()),
            "u": float(u.sum()),
            "v": float(v.sum()),
            "uu": float(u @ u),
            "vv": float(v @ v),
            "xu": float(x @ u),
            "xv": float(x @ v),
            "yu": float(y @ u),
            "yv": float(y @ v),
            "uv": float(u @ v),
        }
    )
    return out


def mean_stat(s: dict[str, float]) -> SampleMeanStatistic:
    return SampleMeanStatistic(n=int(s["n"]), sum=s["x"], sum_squares=s["xx"])


def ratio_stat(s: dict[str, float]) -> RatioStatistic:
    n = int(s["n"])
    return RatioStatistic(
        n=n,
        m_statistic=SampleMeanStatistic(n=n, sum=s["x"], sum_squares=s["xx"]),
        d_statistic=SampleMeanStatistic(n=n, sum=s["y"], sum_squares=s["yy"]),
        m_d_sum_of_products=s["xy"],
    )


def cuped_stat(s: dict[str, float]) -> RegressionAdjustedStatistic:
    n = int(s["n"])
    return RegressionAdjustedStatistic(
        n=n,
        post_statistic=SampleMeanStatistic(n=n, sum=s["cy"], sum_squares=s["cyy"]),
        pre_statistic=SampleMeanStatistic(n=n, sum=s["cx"], sum_squares=s["cxx"]),
        post_pre_sum_of_products=s["cxy"],
        theta=0,
    )


def stand_in(n: int, mean: float, variance_of_mean: float) -> SampleMeanStatistic:
    """A statistic gbstats reads as n units with this mean and a per-unit variance of variance × n."""
    var = variance_of_mean * n
    return SampleMeanStatistic(n=n, sum=n * mean, sum_squares=(n - 1) * var + n * mean * mean)


def gb(stat_a, stat_b, relative: bool, alpha: float, tuning: float) -> dict[str, float]:
    config = SequentialConfig(
        difference_type="relative" if relative else "absolute", alpha=alpha, sequential_tuning_parameter=tuning
    )
    t = SequentialTwoSidedTTest(stat_a, stat_b, config)
    low, high = t.confidence_interval
    return {"estimate": float(t.point_estimate), "ci_low": float(low), "ci_high": float(high), "p": float(t.p_value)}


def cases() -> list[dict]:
    rng = np.random.default_rng(20260131)
    out: list[dict] = []
    means = ((30, 40, 0.3, 0.05, 5000), (1000, 1000, 0.25, 0.05, 5000), (20000, 19800, 0.03, 0.05, 5000))
    for nc, nt, lift, alpha, tuning in (*means, (3000, 3000, 0.08, 0.10, 1000)):
        c = rng.lognormal(0.0, 0.8, nc)
        t = rng.lognormal(0.0, 0.8, nt) * (1 + lift)
        out.append(
            {"kind": "mean", "alpha": alpha, "tuning": tuning, "control": mean_sums(c), "treatment": mean_sums(t)}
        )
    ratios = ((50, 60, 0.10, 0.13, 0.05, 5000), (2000, 2000, 0.10, 0.12, 0.05, 5000))
    for nc, nt, pc, pt, alpha, tuning in (
        *ratios,
        (30000, 30500, 0.10, 0.103, 0.05, 5000),
        (4000, 4200, 0.10, 0.107, 0.10, 20000),
    ):
        arms = []
        for n, p in ((nc, pc), (nt, pt)):
            y = rng.poisson(6.0, n).astype(float) + 1.0
            x = rng.binomial(y.astype(int), p).astype(float)
            arms.append(ratio_sums(x, y))
        out.append({"kind": "ratio", "alpha": alpha, "tuning": tuning, "control": arms[0], "treatment": arms[1]})
    for n, lift in ((500, 0.1), (5000, 0.03)):
        arms = []
        for a in range(2):
            pre = rng.lognormal(0.0, 0.7, n + 100 * a)
            post = 0.8 * pre + rng.lognormal(-1.0, 0.5, n + 100 * a) + (lift if a else 0.0)
            arms.append(cuped_sums(post, pre))
        out.append({"kind": "cuped_mean", "alpha": 0.05, "tuning": 5000, "control": arms[0], "treatment": arms[1]})
    arms = []
    for n, p in ((800, 0.10), (800, 0.12)):
        v = rng.poisson(6.0, n).astype(float) + 1.0
        u = rng.binomial(v.astype(int), 0.1).astype(float)
        y = rng.poisson(6.0, n).astype(float) + 1.0
        x = np.minimum(y, rng.binomial(y.astype(int), p) + (u > 1)).astype(float)
        arms.append(ratio_cuped_sums(x, y, u, v))
    out.append({"kind": "cuped_ratio", "alpha": 0.05, "tuning": 5000, "control": arms[0], "treatment": arms[1]})
    return out


def golden(case: dict) -> dict:
    kind, alpha, tuning = case["kind"], case["alpha"], case["tuning"]
    c, t = case["control"], case["treatment"]
    if kind == "mean":
        a, b = mean_stat(c), mean_stat(t)
    elif kind == "ratio":
        a, b = ratio_stat(c), ratio_stat(t)
    elif kind == "cuped_mean":
        a, b = cuped_stat(c), cuped_stat(t)
    else:
        rc = RatioCovariateStats(c["n"], *_ratio_covariate(c))
        rt = RatioCovariateStats(t["n"], *_ratio_covariate(t))
        (adj_c, var_c), (adj_t, var_t) = _cuped_ratio_arms(rc, rt)
        adjusted = cuped_ratio_compare(rc, rt, 1 - alpha)
        assert adjusted is not None and abs(adjusted[0].delta - (adj_t - adj_c)) < 1e-12  # the kernel's estimate
        a, b = stand_in(int(c["n"]), adj_c, var_c), stand_in(int(t["n"]), adj_t, var_t)
    return {"absolute": gb(a, b, False, alpha, tuning), "relative": gb(a, b, True, alpha, tuning)}


def _ratio_covariate(s: dict[str, float]):
    sx, sy, su, sv = s["x"], s["y"], s["u"], s["v"]
    ss = (
        (s["xx"], s["xy"], s["xu"], s["xv"]),
        (s["xy"], s["yy"], s["yu"], s["yv"]),
        (s["xu"], s["yu"], s["uu"], s["uv"]),
        (s["xv"], s["yv"], s["uv"], s["vv"]),
    )
    return (sx, sy, su, sv), ss


def _cuped_ratio_arms(rc, rt) -> list[tuple[float, float]]:
    """Each arm's adjusted ratio and its variance, by cuped_ratio_compare's formula (θ pooled over the arms)."""
    parts = []
    for arm in (rc, rt):
        mu, cov = arm.moments()
        a = np.array([1 / mu[1], -mu[0] / mu[1] ** 2, 0.0, 0.0])
        b = np.array([0.0, 0.0, 1 / mu[3], -mu[2] / mu[3] ** 2])
        parts.append((mu[0] / mu[1], mu[2] / mu[3], a @ cov @ a / arm.n, b @ cov @ b / arm.n, a @ cov @ b / arm.n))
    theta = (parts[0][4] + parts[1][4]) / (parts[0][3] + parts[1][3])
    pooled = (rc.s[2] + rt.s[2]) / (rc.s[3] + rt.s[3])
    return [(float(r - theta * (p - pooled)), float(v - 2 * theta * cv + theta**2 * w)) for r, p, v, w, cv in parts]


if __name__ == "__main__":
    table = [{**case, "gbstats": golden(case)} for case in cases()]
    print(f"GBSTATS_VERSION = {importlib.metadata.version('gbstats')!r}")
    print("GOLDEN = " + json.dumps(table, indent=1))
