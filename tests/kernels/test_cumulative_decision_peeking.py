"""Peeking at the nightly decision: A/A experiments decided every night on the users accumulated since their start.

Each simulated experiment has a pool of users per arm who come back: a user is active on a night with probability
``ACTIVE``, with its own click propensity and its own level of a per-user mean, so a user's nights are correlated.
Every night each arm's users so far are counted once (their sums added over the nights, as
``experiments.window.count_once`` does), the kernels compare the arms (``kernels.experiments.compare``, the sequence
by default) and decide (``kernels.decisions.decide``, one goal, no guardrail).  Under no effect, a decision of
``ship`` or ``do_not_ship`` on any of the ``LOOKS`` nights is an error: with the always-valid sequence its rate stays
at most α (the Monte Carlo slack stated below); with the fixed-horizon interval looked at every night it does not.
Kernels only, numpy; about 7 s (each night's decision through ``compare`` and ``decide``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from recsys_spark.kernels.decisions import Effect, Roles, Validity, decide
from recsys_spark.kernels.experiments import compare
from recsys_spark.kernels.metric_specs import parse_metric

EXPERIMENTS, LOOKS, USERS, ACTIVE, SEED = 200, 14, 400, 0.35, 20261128
ALPHA = 0.05
#: one-sided 99 % Monte Carlo slack on a rate of α over EXPERIMENTS runs: 2.33 sqrt(α (1 − α) / 200) = 0.036
SLACK = 2.33 * math.sqrt(ALPHA * (1 - ALPHA) / EXPERIMENTS)
RATIO, MEAN = parse_metric("exposure_ctr_global"), parse_metric("ndcg@10_user_avg")


def nightly_sums(rng: np.random.Generator, lift: float, experiments: int) -> dict[str, np.ndarray]:
    """One arm's users' sums accumulated night after night, shape (experiments, looks, users): clicked and
    exposures (the ratio), the mean's numerator (a per-night value) and denominator (active nights)."""
    shape = (experiments, 1, USERS)
    propensity = rng.beta(2.0, 18.0, shape) * (1 + lift)
    level = rng.normal(0.0, 0.6, shape)
    active = rng.random((experiments, LOOKS, USERS)) < ACTIVE
    exposures = (rng.poisson(4.0, active.shape) + 1.0) * active
    clicked = rng.binomial(exposures.astype(np.int64), np.broadcast_to(propensity, active.shape)).astype(float)
    value = np.exp(level + rng.normal(0.0, 0.5, active.shape)) * (1 + lift) * active
    return {
        "clicked": clicked.cumsum(1),
        "exposures": exposures.cumsum(1),
        "num": value.cumsum(1),
        "den": active.astype(float).cumsum(1),
    }


def arm(sums: dict[str, np.ndarray], e: int, night: int) -> tuple[dict[str, float], int]:
    """The arm's sufficient statistics on ``night`` (the users seen so far, each once), as ``arm_sums`` names them,
    and its users."""
    seen = sums["den"][e, night] > 0
    x, y = sums["clicked"][e, night][seen], sums["exposures"][e, night][seen]
    m = sums["num"][e, night][seen] / sums["den"][e, night][seen]
    r, u = RATIO.name, MEAN.name
    out = {f"{r}|n": float(seen.sum()), f"{r}|x": x.sum(), f"{r}|y": y.sum(), f"{r}|xx": x @ x, f"{r}|yy": y @ y}
    out |= {f"{r}|xy": x @ y, f"{u}|n": float(seen.sum()), f"{u}|x": m.sum(), f"{u}|xx": m @ m}
    return out, int(seen.sum())


def decided(lift: float, inference: str, seed: int = SEED, experiments: int = EXPERIMENTS) -> dict[str, np.ndarray]:
    """Each experiment's decision every night, per goal: {goal: array (experiments, looks) of decision codes}."""
    rng = np.random.default_rng(seed)
    control, treatment = nightly_sums(rng, 0.0, experiments), nightly_sums(rng, lift, experiments)
    out = {spec.name: np.empty((experiments, LOOKS), dtype=object) for spec in (RATIO, MEAN)}
    for e in range(experiments):
        for night in range(LOOKS):
            (c, nc), (t, nt) = arm(control, e, night), arm(treatment, e, night)
            for spec in (RATIO, MEAN):
                row = compare(c, t, spec, 1 - ALPHA, inference=inference)
                effects = {spec.name: Effect.of(row)}
                validity = Validity(control_users=nc, variant_users=nt)
                d = decide("aa", "treatment", effects, Roles(goals=(spec.name,)), validity, 100, inference)
                out[spec.name][e, night] = d.decision
    return out


@pytest.fixture(scope="module")
def aa() -> dict[str, dict[str, np.ndarray]]:
    return {inference: decided(0.0, inference) for inference in ("sequential", "fixed")}


@pytest.mark.parametrize("goal", [RATIO.name, MEAN.name])
def test_an_aa_decision_looked_at_every_night_ships_or_stops_at_most_alpha(aa, goal):
    """200 A/A experiments x 14 nightly looks at the accumulated users: the share with a ship or do-not-ship on
    some night is at most α + the slack (0.036) with the sequence; the fixed-horizon interval, looked at every
    night, makes more errors than one look allows."""
    wrong = np.isin(aa["sequential"][goal], ("ship", "do_not_ship"))
    ever = wrong.any(axis=1).mean()
    assert set(np.unique(aa["sequential"][goal])) <= {"ship", "do_not_ship", "not_enough_evidence"}
    assert ever <= ALPHA + SLACK, (goal, ever)
    fixed_ever = np.isin(aa["fixed"][goal], ("ship", "do_not_ship")).any(axis=1).mean()
    fixed_last = np.isin(aa["fixed"][goal][:, -1], ("ship", "do_not_ship")).mean()
    assert fixed_ever > max(ever, ALPHA) and fixed_ever > fixed_last, (goal, fixed_ever, fixed_last, ever)


def test_a_real_lift_is_shipped_as_the_users_accumulate():
    """A 30 % lift (60 runs): the nightly decision ships it on some night in most runs, and never says do not ship."""
    got = decided(0.30, "sequential", SEED + 1, experiments=60)
    for goal, codes in got.items():
        shipped = (codes == "ship").any(axis=1).mean()
        assert shipped >= 0.6 and not (codes == "do_not_ship").any(), (goal, shipped)
        first = np.where((codes == "ship").any(axis=1), (codes == "ship").argmax(axis=1), LOOKS)
        assert np.median(first) < LOOKS - 1, goal


if __name__ == "__main__":  # the measured rates: python tests/kernels/test_cumulative_decision_peeking.py
    for lift in (0.0, 0.30):
        for inference in ("sequential", "fixed"):
            codes = decided(lift, inference)
            for goal, c in codes.items():
                decisive = np.isin(c, ("ship", "do_not_ship"))
                print(
                    f"lift {lift:.0%} {inference} {goal}: some night {decisive.any(1).mean():.3f}, "
                    f"last night {decisive[:, -1].mean():.3f}, ship some night {(c == 'ship').any(1).mean():.3f}"
                )
