"""Always-valid inference: the asymptotic confidence sequence and its p-value against GrowthBook's gbstats.

The golden values below are gbstats' ``SequentialTwoSidedTTest`` on the same sufficient statistics (means,
delta-method ratios, CUPED means, CUPED ratios; several sizes, two alphas, three tunings), made by
``tests/golden/gbstats_sequential.py`` (``make golden-gbstats``, in a throwaway venv with gbstats from PyPI)
and pasted here with its version.  Kernels only, no Spark.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from recsys_spark.kernels.comparisons import ratio_difference, welch
from recsys_spark.kernels.experiments import compare
from recsys_spark.kernels.metric_specs import MetricSpec
from recsys_spark.kernels.quantiles import z_quantile
from recsys_spark.kernels.sequential import sequential, sequential_half_width, sequential_p_value, sequential_rho
from recsys_spark.kernels.sums import MeanStats, RatioStats

#: the version of gbstats that computed GOLDEN (pip install gbstats; python tests/golden/gbstats_sequential.py)
GBSTATS_VERSION = "0.8.0"
#: per case: kind, alpha, tuning, the two arms' sums, and gbstats' absolute and relative estimate, interval, p
#: (the CUPED means' relative added in issue 40, from the same script and gbstats, the other values unchanged)
GOLDEN = [
    {
        "kind": "mean",
        "alpha": 0.05,
        "tuning": 5000,
        "control": {"n": 30.0, "x": 60.878714389075874, "xx": 291.91543304422714},
        "treatment": {"n": 40.0, "x": 67.5119051494703, "xx": 167.94136893562563},
        "gbstats": {
            "absolute": {
                "estimate": -0.3414928508991053,
                "ci_low": -4.071135753390906,
                "ci_high": 3.388150051592696,
                "p": 1.0,
            },
            "relative": {
                "estimate": -0.16828189671514304,
                "ci_low": -1.7477244838145052,
                "ci_high": 1.4111606903842193,
                "p": 1.0,
            },
        },
    },
    {
        "kind": "mean",
        "alpha": 0.05,
        "tuning": 5000,
        "control": {"n": 1000.0, "x": 1415.5444001261253, "xx": 3935.6383929400426},
        "treatment": {"n": 1000.0, "x": 1746.0038744083777, "xx": 5752.981750674058},
        "gbstats": {
            "absolute": {
                "estimate": 0.3304594742822524,
                "ci_low": 0.11765316986683694,
                "ci_high": 0.5432657786976679,
                "p": 0.0002659223200960752,
            },
            "relative": {
                "estimate": 0.2334504479356553,
                "ci_low": 0.06758638467048678,
                "ci_high": 0.39931451120082384,
                "p": 0.0013129629936887448,
            },
        },
    },
    {
        "kind": "mean",
        "alpha": 0.05,
        "tuning": 5000,
        "control": {"n": 20000.0, "x": 27593.489764436534, "xx": 72308.43062453752},
        "treatment": {"n": 19800.0, "x": 27794.4726556393, "xx": 75960.06206304615},
        "gbstats": {
            "absolute": {
                "estimate": 0.02408675701248142,
                "ci_low": -0.01898072932742765,
                "ci_high": 0.06715424335239048,
                "p": 1.0,
            },
            "relative": {
                "estimate": 0.017458289776398843,
                "ci_low": -0.01401797187053809,
                "ci_high": 0.048934551423335776,
                "p": 1.0,
            },
        },
    },
    {
        "kind": "mean",
        "alpha": 0.1,
        "tuning": 1000,
        "control": {"n": 3000.0, "x": 4149.475207533836, "xx": 10957.19112708359},
        "treatment": {"n": 3000.0, "x": 4589.393347397876, "xx": 13166.779581917863},
        "gbstats": {
            "absolute": {
                "estimate": 0.1466393799546799,
                "ci_low": 0.04311140931801645,
                "ci_high": 0.2501673505913434,
                "p": 0.0015609521711678967,
            },
            "relative": {
                "estimate": 0.106017777637355,
                "ci_low": 0.027425664300332844,
                "ci_high": 0.18460989097437713,
                "p": 0.0033754156122033268,
            },
        },
    },
    {
        "kind": "ratio",
        "alpha": 0.05,
        "tuning": 5000,
        "control": {"n": 50.0, "x": 32.0, "y": 380.0, "xx": 62.0, "yy": 3108.0, "xy": 247.0},
        "treatment": {"n": 60.0, "x": 38.0, "y": 417.0, "xx": 54.0, "yy": 3315.0, "xy": 304.0},
        "gbstats": {
            "absolute": {
                "estimate": 0.006916572005553456,
                "ci_low": -0.12996490696359492,
                "ci_high": 0.14379805097470183,
                "p": 1.0,
            },
            "relative": {
                "estimate": 0.0821342925659473,
                "ci_low": -1.6329451083708115,
                "ci_high": 1.7972136935027063,
                "p": 1.0,
            },
        },
    },
    {
        "kind": "ratio",
        "alpha": 0.05,
        "tuning": 5000,
        "control": {"n": 2000.0, "x": 1432.0, "y": 14209.0, "xx": 2492.0, "yy": 113079.0, "xy": 11566.0},
        "treatment": {"n": 2000.0, "x": 1684.0, "y": 13933.0, "xx": 3026.0, "yy": 108999.0, "xy": 13166.0},
        "gbstats": {
            "absolute": {
                "estimate": 0.020082940488391515,
                "ci_low": 0.008752800532920293,
                "ci_high": 0.031413080443862734,
                "p": 9.654187543980303e-06,
            },
            "relative": {
                "estimate": 0.19927269650806917,
                "ci_low": 0.0758757749616011,
                "ci_high": 0.32266961805453725,
                "p": 8.141132926576637e-05,
            },
        },
    },
    {
        "kind": "ratio",
        "alpha": 0.05,
        "tuning": 5000,
        "control": {"n": 30000.0, "x": 21172.0, "y": 210883.0, "xx": 35970.0, "yy": 1663187.0, "xy": 166962.0},
        "treatment": {"n": 30500.0, "x": 21949.0, "y": 213386.0, "xx": 37549.0, "yy": 1673776.0, "xy": 171841.0},
        "gbstats": {
            "absolute": {
                "estimate": 0.002463641255390281,
                "ci_low": -0.000582598579547549,
                "ci_high": 0.005509881090328111,
                "p": 0.3109494876998306,
            },
            "relative": {
                "estimate": 0.02453901657190953,
                "ci_low": -0.006175244654598809,
                "ci_high": 0.05525327779841787,
                "p": 0.3379489062863906,
            },
        },
    },
    {
        "kind": "ratio",
        "alpha": 0.1,
        "tuning": 20000,
        "control": {"n": 4000.0, "x": 2871.0, "y": 27993.0, "xx": 4903.0, "yy": 219985.0, "xy": 22477.0},
        "treatment": {"n": 4200.0, "x": 3207.0, "y": 29389.0, "xx": 5683.0, "yy": 230829.0, "xy": 24953.0},
        "gbstats": {
            "absolute": {
                "estimate": 0.006561106160276942,
                "ci_low": -0.000876158805575511,
                "ci_high": 0.013998371126129394,
                "p": 0.19201777166078943,
            },
            "relative": {
                "estimate": 0.063972499040276,
                "ci_low": -0.010853534002153553,
                "ci_high": 0.13879853208270557,
                "p": 0.22070725417899204,
            },
        },
    },
    {
        "kind": "cuped_mean",
        "alpha": 0.05,
        "tuning": 5000,
        "control": {
            "n": 500.0,
            "x": 724.7665054531728,
            "xx": 1450.7347563882379,
            "cn": 500.0,
            "cy": 724.7665054531728,
            "cyy": 1450.7347563882379,
            "cx": 646.3033980202168,
            "cxx": 1418.2975099990388,
            "cxy": 1404.1807891377164,
        },
        "treatment": {
            "n": 600.0,
            "x": 935.1672166597139,
            "xx": 1943.4384926592202,
            "cn": 600.0,
            "cy": 935.1672166597139,
            "cyy": 1943.4384926592202,
            "cx": 768.7049618002981,
            "cxx": 1666.3170339475505,
            "cxy": 1751.0561017403302,
        },
        "gbstats": {
            "absolute": {
                "estimate": 0.11830076989224847,
                "ci_low": 0.07070915085614637,
                "ci_high": 0.16589238892835056,
                "p": 6.683843144280882e-10,
            },
            "relative": {
                "estimate": 0.08161302226451443,
                "ci_low": 0.047532038598480486,
                "ci_high": 0.11569400593054838,
                "p": 3.1678491497098078e-09,
            },
        },
    },
    {
        "kind": "cuped_mean",
        "alpha": 0.05,
        "tuning": 5000,
        "control": {
            "n": 5000.0,
            "x": 7211.170651691709,
            "xx": 14066.454088751714,
            "cn": 5000.0,
            "cy": 7211.170651691709,
            "cyy": 14066.454088751714,
            "cx": 6423.200417641836,
            "cxx": 13604.288221122275,
            "cxy": 13549.455947427046,
        },
        "treatment": {
            "n": 5100.0,
            "x": 7560.6358934011605,
            "xx": 15000.063253256476,
            "cn": 5100.0,
            "cy": 7560.6358934011605,
            "cyy": 15000.063253256476,
            "cx": 6564.690110279377,
            "cxx": 13982.895726372293,
            "cxy": 14153.381400133496,
        },
        "gbstats": {
            "absolute": {
                "estimate": 0.03820053359108333,
                "ci_low": 0.024735052187205793,
                "ci_high": 0.05166601499496087,
                "p": 1.549403216461379e-15,
            },
            "relative": {
                "estimate": 0.026487054208127685,
                "ci_low": 0.01702298107878053,
                "ci_high": 0.03595112733747484,
                "p": 4.009444960718716e-15,
            },
        },
    },
    {
        "kind": "cuped_ratio",
        "alpha": 0.05,
        "tuning": 5000,
        "control": {
            "n": 800.0,
            "x": 714.0,
            "y": 5721.0,
            "xx": 1330.0,
            "yy": 45941.0,
            "xy": 5688.0,
            "cn": 800.0,
            "u": 552.0,
            "v": 5630.0,
            "uu": 936.0,
            "vv": 44162.0,
            "xu": 701.0,
            "xv": 5300.0,
            "yu": 4015.0,
            "yv": 40358.0,
            "uv": 4400.0,
        },
        "treatment": {
            "n": 800.0,
            "x": 762.0,
            "y": 5483.0,
            "xx": 1430.0,
            "yy": 42129.0,
            "xy": 5720.0,
            "cn": 800.0,
            "u": 581.0,
            "v": 5670.0,
            "uu": 965.0,
            "vv": 44692.0,
            "xu": 715.0,
            "xv": 5501.0,
            "yu": 4024.0,
            "yv": 38739.0,
            "uv": 4557.0,
        },
        "gbstats": {
            "absolute": {
                "estimate": 0.012752885037092404,
                "ci_low": -0.0067719494245324086,
                "ci_high": 0.03227771949871722,
                "p": 0.40025033482503397,
            },
            "relative": {
                "estimate": 0.10160426471249381,
                "ci_low": -0.06139251327574524,
                "ci_high": 0.26460104270073287,
                "p": 0.4595005086564089,
            },
        },
    },
]

MEAN = MetricSpec("m", "ndcg", 10, "user_avg", "mean", "num", "den")
RATIO = MetricSpec("m", "exposure_ctr", None, "global", "ratio", "num", "den")


def _named(sums: dict[str, float]) -> dict[str, float]:
    return {f"m|{part}": value for part, value in sums.items()}


def _ours(case: dict) -> dict:
    spec = MEAN if case["kind"] in ("mean", "cuped_mean") else RATIO
    return compare(
        _named(case["control"]),
        _named(case["treatment"]),
        spec,
        confidence=1 - case["alpha"],
        cuped=case["kind"].startswith("cuped"),
        inference="sequential",
        tuning=case["tuning"],
    )


def _close(ours: float | None, theirs: float, what: str) -> None:
    assert ours is not None and math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12), (what, ours, theirs)


@pytest.mark.parametrize("case", GOLDEN, ids=[f"{g['kind']}-{int(g['control']['n'])}" for g in GOLDEN])
def test_the_sequence_and_its_p_value_are_gbstats(case):
    ours, theirs = _ours(case), case["gbstats"]["absolute"]
    assert ours["ci_method"] == "sequential"
    assert ours["method"] == {"mean": "welch", "ratio": "delta", "cuped_mean": "welch_cuped"}.get(
        case["kind"], "delta_cuped"
    )
    for field, key in (("delta", "estimate"), ("ci_low", "ci_low"), ("ci_high", "ci_high"), ("p_value", "p")):
        _close(ours[field], theirs[key], field)
    if "relative" in case["gbstats"]:
        rel = case["gbstats"]["relative"]
        for field, key in (("rel_delta", "estimate"), ("rel_ci_low", "ci_low"), ("rel_ci_high", "ci_high")):
            _close(ours[field], rel[key], field)


@pytest.mark.parametrize("case", [g for g in GOLDEN if g["kind"] in ("mean", "ratio")])
def test_the_relative_p_value_is_gbstats(case):
    c, t = (case[arm] for arm in ("control", "treatment"))
    confidence = 1 - case["alpha"]
    if case["kind"] == "mean":
        comp = welch(MeanStats(c["n"], c["x"], c["xx"]), MeanStats(t["n"], t["x"], t["xx"]), confidence)
    else:
        comp = ratio_difference(
            RatioStats(*(c[p] for p in ("n", "x", "y", "xx", "yy", "xy"))),
            RatioStats(*(t[p] for p in ("n", "x", "y", "xx", "yy", "xy"))),
            confidence,
        )
    seq = sequential(comp, c["n"] + t["n"], confidence, case["tuning"])
    _close(seq.rel_p_value, case["gbstats"]["relative"]["p"], "rel_p_value")


def test_the_golden_cases_cover_both_outcomes():
    # significant and not, in every kind that has a p below 1
    ps = [g["gbstats"]["absolute"]["p"] for g in GOLDEN]
    assert min(ps) < 1e-6 and sum(p < 0.05 for p in ps) >= 4 and sum(p == 1.0 for p in ps) >= 2
    assert {g["kind"] for g in GOLDEN} == {"mean", "ratio", "cuped_mean", "cuped_ratio"}


def test_fixed_inference_keeps_the_fixed_horizon_rows():
    case = GOLDEN[1]
    fixed = compare(_named(case["control"]), _named(case["treatment"]), MEAN)
    seq = _ours(case)
    assert fixed["ci_method"] == "fixed" and seq["ci_method"] == "sequential"
    assert fixed["delta"] == seq["delta"] and fixed["se"] == seq["se"] and fixed["mde"] == seq["mde"]
    # the sequence is wider than the fixed-horizon interval at this size, and its p-value larger
    assert seq["ci_high"] - seq["ci_low"] > fixed["ci_high"] - fixed["ci_low"]
    assert seq["p_value"] > fixed["p_value"]


def test_p_below_alpha_exactly_when_the_sequence_excludes_zero():
    rng = np.random.default_rng(3)
    for confidence, tuning in ((0.95, 5000), (0.9, 1000), (0.99, 20000)):
        n = rng.integers(10, 100_000, 500).astype(float)
        var = rng.lognormal(-8, 1, 500)
        est = rng.normal(0, 3, 500) * np.sqrt(var)
        p = sequential_p_value(est, var, n, confidence, tuning)
        w = sequential_half_width(var, n, confidence, tuning)
        excluded = np.abs(est) > w
        near = np.abs(np.abs(est) - w) < 1e-9 * w  # on the boundary either may hold
        assert ((p < 1 - confidence) == excluded)[~near].all()


def test_the_sequence_is_tightest_relative_to_the_fixed_interval_near_the_tuning():
    # width / fixed width as a function of N: the sequence costs least around N = tuning (a few times it)
    n = np.array([100.0, 1000.0, 5000.0, 20_000.0, 200_000.0, 2e6])
    ratio = sequential_half_width(1.0 / n, n, 0.95, 5000) / (z_quantile(0.95) * np.sqrt(1.0 / n))
    assert (ratio > 1).all()
    assert ratio.argmin() == 2  # measured: 3.42 1.72 1.55 1.60 1.75 1.91
    assert math.isclose(sequential_rho(0.95, 5000), 0.039840066771373674, rel_tol=1e-12)


def test_edge_cases():
    assert sequential_p_value(0.1, 0.0, 100) == 0.0  # no variance, an effect: as the fixed test
    assert math.isnan(sequential_p_value(0.0, 0.0, 100))
    assert math.isnan(sequential_p_value(0.1, 1e-3, 0))
    assert math.isnan(sequential_half_width(1e-3, 0))
    assert sequential_p_value(1e6, 1e-12, 1e6) == 0.0  # ln E large: 0, no overflow
    with pytest.raises(ValueError, match="tuning"):
        sequential_rho(0.95, 0)
    with pytest.raises(ValueError, match="inference"):
        compare({}, {}, MEAN, inference="bayesian")
    # an undefined comparison stays undefined, and says how it would have been computed
    row = compare(
        {"m|n": 1.0, "m|x": 1.0, "m|xx": 1.0}, {"m|n": 3.0, "m|x": 3.0, "m|xx": 5.0}, MEAN, inference="sequential"
    )
    assert row["ci_low"] is None and row["p_value"] is None and row["ci_method"] == "sequential"
