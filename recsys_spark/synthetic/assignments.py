"""The A/B experiments: who is in which arm (the same every day), the treatment effects on the clicks and on
the empty responses, and the ``assignments/dt=D`` table."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from recsys_spark.synthetic.columns import ASSIGNMENT_SCHEMA, format_ids, labels
from recsys_spark.synthetic.model import EMPTY_RESPONSE_RATE, EPOCH
from recsys_spark.synthetic.population import Population


class PlannedExperiment(NamedTuple):
    """One generated experiment: its layer, its name, and what its treatment does.  Each layer draws one uniform
    number per user from a stream of its own (so the layers are independent); the experiments of a layer take
    consecutive ``share``s of it (mutually exclusive), the first half of each its treatment, the second its
    control."""

    layer: str
    name: str
    #: logit shift of the treatment users' click probability (0: the same model in both arms)
    click_shift: float
    #: the treatment users' share of requests answered with an empty list (None: EMPTY_RESPONSE_RATE, as control)
    empty_rate: float | None = None
    #: a few users logged in both arms (MULTIPLE_ASSIGNMENT_RATE): an assignment bug the job must catch
    doubled: bool = False
    #: the share of the layer's users in the experiment (both arms)
    share: float = 1.0


#: the tour's experiments (``make demo``; docs/experiments.md "The tour's experiments").  Three share the layer
#: ``ranking`` (each user in at most one of them): ``ranker_v2`` (half the users) raises the click logit by 0.7
#: (about +60 % exposure CTR) and falls back to a list when retrieval finds nothing (no empty response): it ships;
#: ``fast_retrieval`` (a quarter) raises the logit by 0.3 but answers 15 % of its requests with an empty list (the
#: guardrail pv_failure_rate crossed: it must not ship); ``hd_images`` (the last quarter) raises it by 0.02 (about
#: +2 %), too little for a week of the demo's users (not enough evidence yet).  ``ui_aa``, in a layer of its own,
#: is an A/A whose assignment logs a few users in both arms (an invalid experiment).
EXPERIMENTS = (
    PlannedExperiment("ranking", "ranker_v2", 0.7, empty_rate=0.0, share=0.5),
    PlannedExperiment("ui", "ui_aa", 0.0, doubled=True),
    PlannedExperiment("ranking", "fast_retrieval", 0.3, empty_rate=0.15, share=0.25),
    PlannedExperiment("ranking", "hd_images", 0.02, share=0.25),
)
MULTIPLE_ASSIGNMENT_RATE = 0.002  # users logged in both arms of ui_aa (an assignment bug the job must catch)


def experiment_members(pop: Population, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per experiment, (in the experiment, in its ``treatment``) for each user: the same every day, independent
    across layers (layer j draws from the stream ``(seed, 3, j)``, layers numbered in order of appearance)."""
    layers = list(dict.fromkeys(planned.layer for planned in EXPERIMENTS))
    draws = {layer: np.random.default_rng([seed, 3, j]).random(pop.n_users) for j, layer in enumerate(layers)}
    taken = dict.fromkeys(layers, 0.0)
    out = {}
    for planned in EXPERIMENTS:
        u, low = draws[planned.layer], taken[planned.layer]
        taken[planned.layer] = high = low + planned.share
        out[planned.name] = ((u >= low) & (u < high), (u >= low) & (u < low + planned.share / 2))
    return out


def experiment_arms(pop: Population, seed: int) -> dict[str, np.ndarray]:
    """Per experiment, True for its users in ``treatment`` (:func:`experiment_members`)."""
    return {name: treated for name, (_, treated) in experiment_members(pop, seed).items()}


def with_experiment_effects(pop: Population, seed: int) -> Population:
    """The population whose treatment users of each experiment click with a shifted logit, and whose treatment
    users of an experiment with an ``empty_rate`` get empty lists at that rate (the later experiment's when a user is
    in the treatments of two that set one)."""
    arms = experiment_arms(pop, seed).values()  # one per experiment, in EXPERIMENTS order
    shift = np.zeros(pop.n_users)
    empty_rate = np.full(pop.n_users, EMPTY_RESPONSE_RATE) if pop.empty_rate is None else pop.empty_rate.copy()
    for planned, treated in zip(EXPERIMENTS, arms, strict=True):
        shift += planned.click_shift * treated
        if planned.empty_rate is not None:
            empty_rate[treated] = planned.empty_rate
    return dataclasses.replace(pop, click_bias=pop.click_bias + shift, empty_rate=empty_rate)


def assignments_table(pop: Population, day: dt.date, seed: int) -> pa.Table:
    """``assignments/dt=D``: one row per (user, experiment) for the users that exist on ``day``
    (``first_seen`` <= day), plus a second row with the other variant for a few users of an experiment whose
    assignment is ``doubled`` (the A/A)."""
    exists = pop.first_seen <= (day - EPOCH).days
    users = format_ids("u", np.arange(pop.n_users), pop.user_width)
    members = experiment_members(pop, seed)
    doubled = np.random.default_rng([seed, 4]).random(pop.n_users) < MULTIPLE_ASSIGNMENT_RATE
    parts = []
    for planned in EXPERIMENTS:
        member, treated = members[planned.name]
        rows = [(np.flatnonzero(exists & member), treated[exists & member])]
        if planned.doubled:
            extra = np.flatnonzero(exists & member & doubled)
            rows.append((extra, ~treated[extra]))
        for index, arm in rows:
            parts.append(
                pa.table(
                    [
                        users.take(pa.array(index)),
                        pa.array([planned.name] * len(index), pa.string()),
                        labels(("control", "treatment"), arm.astype(np.int8)),
                        pa.array([planned.layer] * len(index), pa.string()),
                    ],
                    schema=ASSIGNMENT_SCHEMA,
                )
            )
    return pa.concat_tables(parts)
