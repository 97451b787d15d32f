"""Golden values of the decision on accumulated users, computed by GrowthBook's gbstats.

``make golden-gbstats`` runs it in a throwaway venv with gbstats from PyPI (``GBSTATS_VENV``); it prints the
``GBSTATS_CUMULATIVE`` literal that ``tests/experiments/test_cumulative.py`` holds, with the gbstats version.  The
fixture is ``tests/helpers/cumulative_days.py``'s three days of one experiment whose users come back: each user's
sums added over the days it was active (a user counted once), then per arm
gbstats' ``RatioStatistic`` (exposure CTR: clicked / exposures) and ``SampleMeanStatistic`` (precision@10 per user:
its precision sum over its ranked lists), in a ``SequentialTwoSidedTTest`` at α = 0.05 tuned at 5,000 users, absolute
and relative; for the accumulated users of the three days and of the first two.

    /tmp/gbvenv/bin/python tests/golden/gbstats_cumulative.py
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

from gbstats.frequentist.tests import SequentialConfig, SequentialTwoSidedTTest
from gbstats.models.statistics import RatioStatistic, SampleMeanStatistic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixture, pure Python
from helpers.cumulative_days import SUMS, accumulated  # noqa: E402

CLICKED, EXPOSURES = SUMS.index("clicked"), SUMS.index("exposures")
PRECISION, LISTS = SUMS.index("precision_at_10_sum"), SUMS.index("lists_ranked")


def ratio(users: dict[str, tuple[float, ...]]) -> RatioStatistic:
    x = [u[CLICKED] for u in users.values() if u[EXPOSURES] > 0]
    y = [u[EXPOSURES] for u in users.values() if u[EXPOSURES] > 0]
    n = len(x)
    return RatioStatistic(
        n=n,
        m_statistic=SampleMeanStatistic(n=n, sum=sum(x), sum_squares=sum(v * v for v in x)),
        d_statistic=SampleMeanStatistic(n=n, sum=sum(y), sum_squares=sum(v * v for v in y)),
        m_d_sum_of_products=sum(a * b for a, b in zip(x, y, strict=True)),
    )


def mean(users: dict[str, tuple[float, ...]]) -> SampleMeanStatistic:
    values = [u[PRECISION] / u[LISTS] for u in users.values() if u[LISTS] > 0]
    return SampleMeanStatistic(n=len(values), sum=sum(values), sum_squares=sum(v * v for v in values))


def gb(a, b, relative: bool) -> dict[str, float]:
    config = SequentialConfig(
        difference_type="relative" if relative else "absolute", alpha=0.05, sequential_tuning_parameter=5000
    )
    t = SequentialTwoSidedTTest(a, b, config)
    low, high = t.confidence_interval
    return {"estimate": float(t.point_estimate), "ci_low": float(low), "ci_high": float(high), "p": float(t.p_value)}


def golden(last: int) -> dict:
    arms = accumulated(last)
    out = {}
    for name, stat in (("exposure_ctr_global", ratio), ("precision@10_user_avg", mean)):
        a, b = stat(arms["control"]), stat(arms["treatment"])
        out[name] = {
            "n": [a.n, b.n],
            "absolute": gb(a, b, False),
            "relative": gb(a, b, True),
        }
    return out


if __name__ == "__main__":
    print(f"GBSTATS_VERSION = {importlib.metadata.version('gbstats')!r}")
    print("GBSTATS_CUMULATIVE = " + json.dumps({"days_0_1": golden(1), "days_0_2": golden(2)}, indent=1))
