"""Golden values of CUPED's fixed-horizon test, absolute and relative, computed by GrowthBook's gbstats.

``make golden-gbstats`` runs it in a throwaway venv with gbstats from PyPI (``GBSTATS_VENV``); it prints the
``GBSTATS_CUPED`` literal that ``tests/kernels/test_experiments.py`` holds, with the gbstats version.  The
fixture is that file's six users per arm (y, and the pre-period covariate x): gbstats'
``RegressionAdjustedStatistic`` per arm (θ pooled by gbstats) in a ``TwoSidedTTest`` at α = 0.05, absolute and
relative (the adjusted difference over the plain control mean).

    /tmp/gbvenv/bin/python tests/golden/gbstats_cuped.py
"""

from __future__ import annotations

import importlib.metadata
import json

import numpy as np
from gbstats.frequentist.tests import FrequentistConfig, TwoSidedTTest
from gbstats.models.statistics import RegressionAdjustedStatistic, SampleMeanStatistic

YC, XC = np.array([3, 5, 2, 8, 4, 6.0]), np.array([2, 4, 2, 7, 3, 5.0])
YT, XT = np.array([4, 7, 3, 9, 5, 8.0]), np.array([2, 5, 2, 7, 4, 6.0])


def arm(y: np.ndarray, x: np.ndarray) -> RegressionAdjustedStatistic:
    n = len(y)
    return RegressionAdjustedStatistic(
        n=n,
        post_statistic=SampleMeanStatistic(n=n, sum=float(y.sum()), sum_squares=float(y @ y)),
        pre_statistic=SampleMeanStatistic(n=n, sum=float(x.sum()), sum_squares=float(x @ x)),
        post_pre_sum_of_products=float(x @ y),
        theta=0,
    )


def result(relative: bool) -> dict[str, float]:
    test = TwoSidedTTest(
        arm(YC, XC), arm(YT, XT), FrequentistConfig(difference_type="relative" if relative else "absolute")
    )
    low, high = test.confidence_interval
    return {
        "estimate": float(test.point_estimate),
        "ci_low": float(low),
        "ci_high": float(high),
        "p": float(test.p_value),
        "theta": float(test.stat_a.theta),
    }


if __name__ == "__main__":
    print(f"GBSTATS_VERSION = {importlib.metadata.version('gbstats')!r}")
    print("GBSTATS_CUPED = " + json.dumps({"absolute": result(False), "relative": result(True)}, indent=1))
