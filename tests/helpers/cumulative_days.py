"""Three days of one experiment's ``experiment_users`` rows whose users come back, for the accumulated decision.

Pure Python (``random.Random``, stable across versions), so that ``tests/golden/gbstats_cumulative.py`` builds
the same rows in gbstats' venv and ``tests/experiments/test_cumulative.py`` writes them as partitions.  Each of
``USERS`` users per arm has its own click propensity (the treatment's ``LIFT`` higher) and is active on a day with
probability ``ACTIVE``: a user's days are correlated, so counting a user once (its sums added over the days) is not
the same as counting each day's users.  (A user with several variants over the days is left out and makes the
decision invalid: the window's rule, ``tests/experiments/test_experiments.py`` tests it.)
"""

from __future__ import annotations

import datetime as dt
import random

EXPERIMENT = "acc"
DAYS = (dt.date(2026, 11, 18), dt.date(2026, 11, 19), dt.date(2026, 11, 20))
USERS, ACTIVE, LIFT, SEED = 500, 0.6, 0.05, 42
#: the per-user sums the two tested metrics read: exposure_ctr_global (clicked / exposures, a ratio) and
#: precision@10_user_avg (precision_at_10_sum / lists_ranked, a per-user mean)
SUMS = ("exposures", "clicked", "requests", "empty_requests", "lists_ranked", "precision_at_10_sum")
DDL = "slice string, user_id string, variants map<string,string>, " + ", ".join(f"{c} double" for c in SUMS)


def days() -> list[list[tuple]]:
    """The rows of each day of :data:`DAYS`, in :data:`DDL`'s column order."""
    rng = random.Random(SEED)
    users = [
        (f"{arm}-{i}", arm, rng.uniform(0.05, 0.25) + (LIFT if arm == "treatment" else 0.0))
        for arm in ("control", "treatment")
        for i in range(USERS)
    ]
    out = []
    for _ in DAYS:
        rows = []
        for uid, arm, p in users:
            if rng.random() >= ACTIVE:
                continue
            exposures = rng.randint(1, 10)
            clicked = sum(rng.random() < p for _ in range(exposures))
            lists = rng.randint(1, 3)
            precision = sum(min(1.0, max(0.0, p * 2 + rng.uniform(-0.1, 0.1))) for _ in range(lists))
            rows.append(_row(uid, arm, exposures, clicked, lists, precision))
        out.append(rows)
    return out


def _row(uid: str, arm: str, exposures: int, clicked: int, lists: int, precision: float) -> tuple:
    return ("all", uid, {EXPERIMENT: arm}, float(exposures), float(clicked), 1.0, 0.0, float(lists), precision)


def accumulated(last: int = len(DAYS) - 1) -> dict[str, dict[str, tuple[float, ...]]]:
    """Each user's sums added over days 0..``last`` (:data:`SUMS` order), by arm (as
    ``experiments.window.count_once`` counts a user once; one with several variants would be left out)."""
    sums: dict[str, list[float]] = {}
    arms: dict[str, set[str]] = {}
    for rows in days()[: last + 1]:
        for _, uid, variants, *values in rows:
            arms.setdefault(uid, set()).add(variants[EXPERIMENT])
            got = sums.setdefault(uid, [0.0] * len(SUMS))
            for i, v in enumerate(values):
                got[i] += v
    out: dict[str, dict[str, tuple[float, ...]]] = {"control": {}, "treatment": {}}
    for uid, values in sums.items():
        if len(arms[uid]) == 1:
            out[next(iter(arms[uid]))][uid] = tuple(values)
    return out
