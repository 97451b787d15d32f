"""Click concentration, the Gini of clicks and the capped CTR (kernels/robustness.py) against per-user arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recsys_spark.kernels.health_pass import slice_sums, unit_sums
from recsys_spark.kernels.robustness import (
    capped_ctr_stats,
    click_concentration,
    clicks_gini,
    robustness_values,
    top_clicks,
)
from recsys_spark.kernels.sums import RatioStats


def _histogram(clicks: np.ndarray, exposures: np.ndarray):
    counts, inverse = np.unique(clicks[clicks > 0], return_inverse=True)
    users = np.bincount(inverse).astype(float)
    exp = np.bincount(inverse, weights=exposures[clicks > 0])
    return counts.astype(float), users, exp


def _gini_direct(x: np.ndarray) -> float:
    """Mean absolute difference over all ordered pairs / (2 mean), rescaled by n / (n - 1)."""
    n = len(x)
    mad = np.abs(x[:, None] - x[None, :]).sum() / (n * n)
    return float(mad / (2 * x.mean()) * n / (n - 1))


def test_concentration_gini_and_capped_ctr_match_the_per_user_arrays():
    rng = np.random.default_rng(5)
    clicks = rng.poisson(0.4, 3000).astype(float)
    clicks[:7] = [80, 60, 60, 60, 45, 30, 30]  # a few heavy clickers, tied at the cut
    exposures = clicks + rng.integers(1, 30, 3000)
    counts, users, exp = _histogram(clicks, exposures)
    clicking = np.sort(clicks[clicks > 0])[::-1]
    top = math.ceil(0.01 * len(clicking))
    assert click_concentration(counts, users) == pytest.approx(clicking[:top].sum() / clicking.sum())
    assert clicks_gini(counts, users) == pytest.approx(_gini_direct(clicking))
    for cap in (1, 3, 10):
        s = capped_ctr_stats(counts, users, exp, cap, len(clicks), exposures.sum(), exposures @ exposures)
        direct = RatioStats.from_values(np.minimum(clicks, cap), exposures)
        assert s.ratio == pytest.approx(direct.ratio)
        assert s.var_ratio == pytest.approx(direct.var_ratio, rel=1e-9)


def test_edges_no_click_one_clicker_and_ties():
    assert click_concentration(np.array([]), np.array([])) is None and clicks_gini(np.array([]), np.array([])) is None
    # one clicking user: all of the clicks, no inequality among one
    assert click_concentration(np.array([4.0]), np.array([1.0])) == 1.0
    assert clicks_gini(np.array([4.0]), np.array([1.0])) == 0.0
    # 150 users with 2 clicks each: top ceil(1.5) = 2 users, 4 of 300 clicks, whichever two are taken
    assert click_concentration(np.array([2.0]), np.array([150.0])) == pytest.approx(4 / 300)
    assert clicks_gini(np.array([2.0]), np.array([150.0])) == 0.0


def test_robustness_values_rows_without_clicks_and_without_exposures():
    stats = {"uv": 3.0, "exposures": 12.0, "exposures*exposures": 56.0}  # users of 4, 4, 4 ... 16+16+16=48
    rows = {m: (v, n, i) for m, v, n, i in robustness_values({}, stats, 10)}
    assert set(rows) == {"capped_ctr"} and rows["capped_ctr"][0] == 0.0  # no click: no concentration row
    assert robustness_values({}, {"uv": 0.0, "exposures": 0.0}, 10) == []
    hist = {"clicks_users": {1.0: 2.0, 5.0: 1.0}, "clicks_exposures": {1.0: 8.0, 5.0: 4.0}}
    rows = {m: (v, n, i) for m, v, n, i in robustness_values(hist, stats, 2)}
    assert rows["click_concentration"][:2] == (pytest.approx(5 / 7), 3)  # top ceil(0.03) = 1 user: 5 of 7
    assert rows["capped_ctr"][0] == pytest.approx((1 + 1 + 2) / 12) and rows["capped_ctr"][1] == 3
    assert rows["click_concentration"][2] is None and rows["capped_ctr"][2].method == "delta"


def test_the_pass_writes_the_clicks_histogram_per_slice():
    # two slices (0, 1); users 0..2; user 0: 2 clicked of 3, user 1: 1 of 2, user 2: none of 1; slice 1: user 0
    slice_code = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1])
    user = np.array([0, 0, 0, 1, 1, 2, 0, 0, 0])
    request = np.array([0, 0, 0, 1, 1, 2, 0, 0, 0])
    item = np.array([0, 1, 2, 0, 1, 3, 0, 1, 2])
    clicked = np.array([1, 1, 0, 1, 0, 0, 1, 1, 0], dtype=bool)
    sums = slice_sums(
        unit_sums(slice_code, user, request, item, np.zeros(9, dtype=np.int64), clicked, np.ones(9, bool), 1)
    )
    got = {
        (int(s), n, int(k)): v
        for s, n, k, v in zip(sums["slice"], sums["name"], sums["key"], sums["value"], strict=True)
        if n.startswith("clicks_")
    }
    assert got == {
        (0, "clicks_users", 2): 1.0,
        (0, "clicks_users", 1): 1.0,
        (0, "clicks_exposures", 2): 3.0,
        (0, "clicks_exposures", 1): 2.0,
        (1, "clicks_users", 2): 1.0,
        (1, "clicks_exposures", 2): 3.0,
    }


def test_the_rule_counts_need_100_clicking_users_and_give_the_soft_verdict():
    from recsys_spark.kernels.rules import soft
    from recsys_spark.steps.health import click_rule_counts

    # 99 users with 1 click and one with 40: top ceil(1.0) = 1 user, 40 of 139 clicks
    hist = {"clicks_users": {1.0: 99.0, 40.0: 1.0}, "clicks_exposures": {1.0: 990.0, 40.0: 80.0}}
    counts = click_rule_counts(hist)
    assert counts == {"top_user_clicks": 40, "clicked_exposures": 139}
    assert not soft("click_concentration", counts["top_user_clicks"], counts["clicked_exposures"], 0.25).passed
    assert soft("click_concentration", 30, 139, 0.25).passed  # 30 / 139 = 0.216 <= 0.25
    assert click_rule_counts({"clicks_users": {1.0: 98.0, 40.0: 1.0}}) == {}  # 99 clicking users: left out


def test_robustness_values_against_the_per_user_arrays_with_the_interval():
    # 8 users: clicks 0 0 1 1 2 5 5 9, exposures 3 1 4 2 6 9 5 12; cap 3
    from recsys_spark.kernels.estimates import delta_interval

    clicks = np.array([0, 0, 1, 1, 2, 5, 5, 9], dtype=float)
    exposures = np.array([3, 1, 4, 2, 6, 9, 5, 12], dtype=float)
    counts, users, exp = _histogram(clicks, exposures)
    hist = {
        "clicks_users": dict(zip(counts, users, strict=True)),
        "clicks_exposures": dict(zip(counts, exp, strict=True)),
    }
    stats = {"uv": 8.0, "exposures": exposures.sum(), "exposures*exposures": exposures @ exposures}
    rows = {m: (v, n, i) for m, v, n, i in robustness_values(hist, stats, 3, confidence=0.9)}
    assert set(rows) == {"click_concentration", "clicks_gini", "capped_ctr"}
    assert rows["click_concentration"][:2] == (9 / 23, 6)  # ceil(0.06) = 1 user: 9 of 23 clicks
    assert rows["clicks_gini"][0] == pytest.approx(_gini_direct(clicks[clicks > 0])) and rows["clicks_gini"][1] == 6
    want = delta_interval(RatioStats.from_values(np.minimum(clicks, 3), exposures), 0.9)
    value, n, interval = rows["capped_ctr"]
    assert n == 8 and value == pytest.approx((1 + 1 + 2 + 3 + 3 + 3) / 42)
    assert (interval.ci_low, interval.ci_high) == (pytest.approx(want.ci_low), pytest.approx(want.ci_high))
    # a count without its exposures reads 0 exposures: only Σ x y changes
    del hist["clicks_exposures"][9.0]
    (_, _, _, partial), *_ = [r for r in robustness_values(hist, stats, 3, 0.9) if r[0] == "capped_ctr"]
    e = np.where(clicks == 9, 0.0, exposures)
    ratio = RatioStats(
        8.0,
        13.0,
        42.0,
        float(np.minimum(clicks, 3) ** 2 @ np.ones(8)),
        stats["exposures*exposures"],
        float(np.minimum(clicks, 3) @ e),
    )
    assert partial.ci_low == pytest.approx(delta_interval(ratio, 0.9).ci_low) != pytest.approx(want.ci_low)
    # no exposures histogram at all: every count reads 0 exposures
    no_exposures = robustness_values({"clicks_users": hist["clicks_users"]}, stats, 3, 0.9)
    assert [r[2] for r in no_exposures if r[0] == "capped_ctr"] == [8]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_robustness_values_one_exposure_one_click_and_the_notes_name_the_sums():
    rows = robustness_values(
        {"clicks_users": {1.0: 1.0}, "clicks_exposures": {1.0: 1.0}}, {"uv": 1.0, "exposures": 1.0}, 3
    )
    assert [(m, v, n) for m, v, n, _ in rows] == [
        ("click_concentration", 1.0, 1),
        ("clicks_gini", 0.0, 1),
        ("capped_ctr", 1.0, 1),
    ]
    hist = {"clicks_users": {2.0: 3.0}, "clicks_exposures": {2.0: 9.0}}
    inf_yy = {"uv": 4.0, "exposures": 10.0, "exposures*exposures": math.inf}
    assert [r[3].note for r in robustness_values(hist, inf_yy, 3) if r[0] == "capped_ctr"] == ["Σ exposures² = inf"]
    hist["clicks_exposures"][2.0] = 1e308  # Σ x y = 2e308 (numpy warns of the overflow)
    big = {"uv": 4.0, "exposures": 10.0, "exposures*exposures": 100.0}
    notes = [r[3].note for r in robustness_values(hist, big, 3) if r[0] == "capped_ctr"]
    assert notes == ["Σ min(clicked, cap)·exposures = inf"]


def test_top_clicks_edges_and_a_share_other_than_one_percent():
    assert top_clicks(np.array([]), np.array([])) == (0, 0)
    assert top_clicks(np.array([1.0]), np.array([1.0])) == (1, 1)
    assert click_concentration(np.array([1.0]), np.array([1.0])) == 1.0
    # a count of 0, or a count without users, is no clicking user: N = 2, top ceil(0.02) = 1 user: 3 of 6
    assert click_concentration(np.array([0.0, 3.0, 7.0]), np.array([500.0, 2.0, 0.0])) == 0.5
    # top 50 % of 4 users with 4 3 2 1 clicks: 2 users, 7 of 10
    assert click_concentration(np.array([1.0, 2.0, 3.0, 4.0]), np.ones(4), 0.5) == 0.7
    assert top_clicks(np.array([1.0, 2.0, 3.0, 4.0]), np.ones(4), 0.5) == (7, 10)
