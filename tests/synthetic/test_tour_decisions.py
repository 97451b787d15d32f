"""The tour's experiments decide as planned (``make demo``, docs/experiments.md "The tour's experiments"):
``ranker_v2`` ships, ``fast_retrieval`` must not (its guardrail crossed), ``hd_images`` has not enough evidence
yet, whether decided on each day's users or on the users accumulated since the first day.

Kernels only (no Spark): the generator's days at the demo's size and seed, the per-user sums gathered with
numpy and pandas as the experiment stage gathers them, then the job's own ``compare`` (the always-valid
interval) and ``decide`` (the default goals and guardrail).  The demo itself is the Spark-level check
(docs/experiments.md has its decisions over several seeds).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pytest
from helpers.arm_sums import arm_sums

from recsys_spark.cli import demo
from recsys_spark.config.experiments import ExperimentsConfig
from recsys_spark.kernels.decisions import Decision, Effect, Margin, Roles, Validity, decide
from recsys_spark.kernels.experiments import compare
from recsys_spark.kernels.metric_specs import parse_metric
from recsys_spark.kernels.users import score_units
from recsys_spark.synthetic import generate as gen
from recsys_spark.synthetic.assignments import experiment_members

SUMS = ("exposures", "clicked", "requests", "empty_requests", "ndcg_at_10_sum", "lists_ranked")
PLANNED = {"ranker_v2": "ship", "fast_retrieval": "do_not_ship", "hd_images": "not_enough_evidence"}


def _clicked(ex: pd.DataFrame, clicks: pd.DataFrame) -> np.ndarray:
    """A shown exposure is clicked when a click event names its request and item, or (request id dropped) its
    session and item (the job's attribution)."""
    named = clicks.dropna(subset=["request_id"])[["request_id", "item_id"]].drop_duplicates().assign(a=True)
    unnamed = clicks[clicks["request_id"].isna()][["session_id", "item_id"]].drop_duplicates().assign(b=True)
    rows = ex.merge(named, on=["request_id", "item_id"], how="left").merge(
        unnamed, on=["session_id", "item_id"], how="left"
    )
    return (rows["a"].notna() | rows["b"].notna()).to_numpy() & ex["item_id"].notna().to_numpy()


def user_sums(pop: gen.Population, logs: gen.DayLogs) -> dict[str, np.ndarray]:
    """Per user of the population (index: the user's number), one day's :data:`SUMS`: shown exposures, clicked
    exposures, requests, empty requests, and NDCG@10 (by score) summed over the lists with a clicked exposure."""
    columns = ["user_id", "session_id", "request_id", "item_id", "position", "score"]
    ex = logs.exposures.select(columns).to_pandas()
    user = ex["user_id"].str.slice(1).astype(np.int64).to_numpy()
    clicks = logs.clicks.filter(pc.equal(logs.clicks["event"], "click")).to_pandas()
    clicked = _clicked(ex, clicks)
    shown = ex["item_id"].notna().to_numpy()
    first = ~ex["request_id"].duplicated().to_numpy()
    n = pop.n_users
    out = {
        "exposures": np.bincount(user[shown], minlength=n).astype(float),
        "clicked": np.bincount(user[clicked], minlength=n).astype(float),
        "requests": np.bincount(user[first], minlength=n).astype(float),
        "empty_requests": np.bincount(user[first & ~shown], minlength=n).astype(float),
    }
    frame = pd.DataFrame(
        {
            "slice": "all",
            "user_id": user[shown],
            "list_id": ex["request_id"].to_numpy()[shown],
            "item_id": ex["item_id"].to_numpy()[shown],
            "score": ex["score"].to_numpy()[shown],
            "position": ex["position"].to_numpy()[shown],
            "relevance": clicked[shown].astype(float),
        }
    )
    per_user, per_k = score_units(frame, [10])
    users = per_user["user_id"].astype(np.int64)
    ranked = per_user["n_lists_ranked"].astype(float)
    out["lists_ranked"] = np.bincount(users, weights=ranked, minlength=n)
    out["ndcg_at_10_sum"] = np.bincount(users, weights=np.nan_to_num(per_k["ndcg"][:, 0]) * ranked, minlength=n)
    return out


def decision(name: str, sums: dict[str, np.ndarray], member: np.ndarray, treated: np.ndarray) -> Decision:
    """The decision of ``name``'s treatment on these sums: the defaults' goals and guardrails, the sequential
    interval (experiments.inference and sequential_tuning's defaults)."""
    cfg = ExperimentsConfig()
    goals, guardrails, _ = cfg.roles(name)
    roles = Roles(goals, tuple(Margin(g.metric, g.absolute_margin, g.relative_margin) for g in guardrails))
    specs = [parse_metric(m) for m in (*goals, *(g.metric for g in guardrails))]
    active = sums["requests"] > 0
    control, treatment = active & member & ~treated, active & treated
    c, t = arm_sums(sums, control, specs), arm_sums(sums, treatment, specs)
    effects = {
        s.name: Effect.of(compare(c, t, s, inference=cfg.inference, tuning=cfg.sequential_tuning)) for s in specs
    }
    validity = Validity(control_users=int(control.sum()), variant_users=int(treatment.sum()))
    return decide(name, "treatment", effects, roles, validity, cfg.min_users_per_arm)


@pytest.fixture(scope="module")
def tour() -> dict[str, list[tuple[str, str]]]:
    """Per tour experiment, each day's (decision on the day's users, decision on the users since the first day)."""
    days = demo.DAYS
    users, exposures, items = gen.resolve_sizes(demo.USERS, demo.USERS * demo.EXPOSURES_PER_USER, None)
    pop = gen.with_experiment_effects(gen.make_population(users, items, demo.SEED, demo.END), demo.SEED)
    members = experiment_members(pop, demo.SEED)
    out: dict[str, list[tuple[str, str]]] = {name: [] for name in demo.TOUR}
    accumulated: dict[str, np.ndarray] = {}
    for i in range(days):
        day = demo.END - dt.timedelta(days=days - 1 - i)
        sums = user_sums(pop, gen.generate_day(pop, day, exposures, demo.SEED))
        accumulated = {k: accumulated.get(k, 0.0) + sums[k] for k in SUMS}
        for name in demo.TOUR:
            member, treated = members[name]
            out[name].append(
                (decision(name, sums, member, treated).decision, decision(name, accumulated, member, treated).decision)
            )
    return out


def test_the_tour_decides_each_experiment_as_planned(tour):
    assert set(demo.TOUR) == set(PLANNED)
    for name, planned in PLANNED.items():
        daily, accumulated = zip(*tour[name], strict=True)
        assert daily[-1] == planned, (name, daily)  # the last day's own users
        assert set(accumulated) == {planned}, (name, accumulated)  # every night, on the users since the first day


def test_the_tour_is_the_generators_experiments():
    planned = {e.name: e for e in gen.EXPERIMENTS}
    assert set(demo.TOUR) <= set(planned)
    ranking = [e for e in gen.EXPERIMENTS if e.layer == "ranking"]
    assert {e.name for e in ranking} == set(demo.TOUR) and sum(e.share for e in ranking) == pytest.approx(1.0)
