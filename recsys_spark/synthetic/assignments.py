"""The A/B experiments: who is in which arm (the same every day), the treatment effects on the clicks, and
the ``assignments/dt=D`` table."""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pyarrow as pa

from recsys_spark.synthetic.columns import ASSIGNMENT_SCHEMA, format_ids, labels
from recsys_spark.synthetic.model import EPOCH
from recsys_spark.synthetic.population import Population

#: (layer, experiment, logit shift of the treatment's click probability): two orthogonal layers, one
#: experiment with a real effect on clicks and one A/A (the same model in both arms)
EXPERIMENTS = (("ranking", "ranker_v2", 0.3), ("ui", "ui_aa", 0.0))
MULTIPLE_ASSIGNMENT_RATE = 0.002  # users logged in both arms of ui_aa (an assignment bug the job must catch)


def experiment_arms(pop: Population, seed: int) -> dict[str, np.ndarray]:
    """Per experiment, True for the users in ``treatment``: a 50/50 split per layer, independent across
    layers (each layer its own random stream) and the same every day."""
    return {
        name: np.random.default_rng([seed, 3, i]).random(pop.n_users) < 0.5
        for i, (_, name, _) in enumerate(EXPERIMENTS)
    }


def with_experiment_effects(pop: Population, seed: int) -> Population:
    """The population whose treatment users of each experiment click with a shifted logit."""
    arms = experiment_arms(pop, seed).values()  # one per experiment, in EXPERIMENTS order
    shift = sum(effect * arm for (_, _, effect), arm in zip(EXPERIMENTS, arms, strict=True))
    return dataclasses.replace(pop, click_bias=pop.click_bias + shift)


def assignments_table(pop: Population, day: dt.date, seed: int) -> pa.Table:
    """``assignments/dt=D``: one row per (user, experiment) for the users that exist on ``day``
    (``first_seen`` <= day), plus a second row with the other variant for a few users of the A/A."""
    exists = pop.first_seen <= (day - EPOCH).days
    users = format_ids("u", np.arange(pop.n_users), pop.user_width)
    arms = experiment_arms(pop, seed)
    doubled = np.random.default_rng([seed, 4]).random(pop.n_users) < MULTIPLE_ASSIGNMENT_RATE
    parts = []
    for layer, name, effect in EXPERIMENTS:
        treated = arms[name]
        rows = [(np.flatnonzero(exists), treated[exists])]
        if effect == 0.0:
            extra = np.flatnonzero(exists & doubled)
            rows.append((extra, ~treated[extra]))
        for index, arm in rows:
            parts.append(
                pa.table(
                    [
                        users.take(pa.array(index)),
                        pa.array([name] * len(index), pa.string()),
                        labels(("control", "treatment"), arm.astype(np.int8)),
                        pa.array([layer] * len(index), pa.string()),
                    ],
                    schema=ASSIGNMENT_SCHEMA,
                )
            )
    return pa.concat_tables(parts)
