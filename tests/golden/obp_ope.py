"""Golden values of Open Bandit Pipeline's estimators for tests/ope/test_ope.py (``make golden-obp``).

Runs in a throwaway venv with obp (it needs torch and pandas 1.5; see the Makefile target), never in
the project's.  It writes, next to itself:

* ``obd_random_all.csv.gz``: the Open Bandit Dataset sample that ships inside obp's wheel (uniform-random
  logs of the "all" campaign, 10,000 rows), reduced to what the job reads: round, timestamp (µs since the
  epoch, UTC), item, position (1-based), click, propensity.  The Open Bandit Dataset is by ZOZO, Inc.
  (CC BY 4.0); obp is Apache-2.0.
* ``obd_targets.csv``: the candidates' probabilities per (item, position), the same for every round, and
  q̂ per (item, position) from a simple reward model fitted here (a logistic regression of the click on the
  item and the position, one-hot): ``bts`` is obp's ``BernoulliTS(is_zozotown_prior=True, campaign='all',
  random_state=12345)`` (action distribution from 10,000 simulations, as in REFERENCES.md), ``greedy``
  a deterministic candidate (at each position the item with the most clicks there in these logs).
* ``slate_log.csv.gz`` and ``slate_target.csv``: a slate log from obp's ``SyntheticSlateBanditDataset``
  (10 items, lists of 3 drawn without replacement by a linear behaviour policy, exact Plackett-Luce
  propensities of the list, of each item at its position, and of each prefix), and a position-wise
  candidate (a softmax over the items per position, the same for every list).
* ``obp_values.json``: obp's estimates on those inputs (and the versions), which tests/ope/test_ope.py holds
  as literals.

    python tests/golden/obp_ope.py          # writes the inputs and obp_values.json, prints the values
    python tests/golden/obp_ope.py --check  # writes nothing: the values must equal obp_values.json
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
N_SIM = 10_000  # REFERENCES.md's IPW 0.0046832 and SNIPW 0.0049096 come from 10,000 simulations
SWITCH_TAUS = (10.0, 100.0)
SLATE_ROUNDS, SLATE_ITEMS, SLATE_LEN = 600, 10, 3


def obd(write: bool) -> dict:
    import sklearn
    from obp.dataset import OpenBanditDataset
    from obp.ope import (
        DirectMethod,
        DoublyRobust,
        InverseProbabilityWeighting,
        ReplayMethod,
        SelfNormalizedDoublyRobust,
        SelfNormalizedInverseProbabilityWeighting,
        SwitchDoublyRobust,
    )
    from obp.policy import BernoulliTS
    from sklearn.linear_model import LogisticRegression

    ds = OpenBanditDataset(behavior_policy="random", campaign="all")
    bf = ds.obtain_batch_bandit_feedback()
    n, n_items, len_list = bf["n_rounds"], ds.n_actions, ds.len_list
    ts = pd.to_datetime(ds.data["timestamp"], utc=True)
    us = (ts - pd.Timestamp("1970-01-01", tz="UTC")) // pd.Timedelta(microseconds=1)
    logged = pd.DataFrame(
        {
            "round": np.arange(n),
            "ts_us": us.to_numpy(np.int64),
            "item": bf["action"],
            "position": bf["position"] + 1,
            "click": bf["reward"],
            "propensity": bf["pscore"],
        }
    )
    if write:
        logged.to_csv(HERE / "obd_random_all.csv.gz", index=False)

    # q̂(item, position): logistic regression on one-hot item and position, fitted on the random logs
    def design(items: np.ndarray, positions: np.ndarray) -> np.ndarray:
        x = np.zeros((len(items), n_items + len_list))
        x[np.arange(len(items)), items] = 1.0
        x[np.arange(len(items)), n_items + positions] = 1.0
        return x

    model = LogisticRegression(C=1.0, max_iter=1000).fit(design(bf["action"], bf["position"]), bf["reward"])
    grid_items, grid_positions = np.meshgrid(np.arange(n_items), np.arange(len_list), indexing="ij")
    q_grid = model.predict_proba(design(grid_items.ravel(), grid_positions.ravel()))[:, 1].reshape(n_items, len_list)

    bts = BernoulliTS(n_actions=n_items, len_list=len_list, is_zozotown_prior=True, campaign="all", random_state=12345)
    bts_dist = bts.compute_batch_action_dist(n_sim=N_SIM, n_rounds=1)[0]  # the same for every round
    # the deterministic candidate: at each position in turn, the item with the most clicks there in these
    # logs among those not placed yet (ties: the smallest item); an optimistic choice, so that it has clicks
    clicks = np.zeros((n_items, len_list))
    np.add.at(clicks, (bf["action"], bf["position"]), bf["reward"])
    greedy_items: list[int] = []
    for position in range(len_list):
        order = np.lexsort((np.arange(n_items), -clicks[:, position]))
        greedy_items.append(int(next(i for i in order if i not in greedy_items)))
    greedy_dist = np.zeros((n_items, len_list))
    greedy_dist[greedy_items, np.arange(len_list)] = 1.0
    targets = []
    for name, dist in (("bts", bts_dist), ("greedy", greedy_dist)):
        for item in range(n_items):
            for position in range(len_list):
                if dist[item, position] > 0:
                    targets.append((name, item, position + 1, dist[item, position], q_grid[item, position]))
    if write:
        pd.DataFrame(targets, columns=["candidate", "item", "position", "probability", "q_hat"]).to_csv(
            HERE / "obd_targets.csv", index=False, float_format="%.17g"
        )

    values: dict = {"on_policy_bts_ctr": float(OpenBanditDataset.calc_on_policy_policy_value_estimate("bts", "all"))}
    q_all = np.repeat(q_grid[None], n, axis=0)
    for name, dist in (("bts", bts_dist), ("greedy", greedy_dist)):
        action_dist = np.repeat(dist[None], n, axis=0)
        common = dict(reward=bf["reward"], action=bf["action"], position=bf["position"], pscore=bf["pscore"])
        est = {
            "ips": InverseProbabilityWeighting().estimate_policy_value(action_dist=action_dist, **common),
            "snips": SelfNormalizedInverseProbabilityWeighting().estimate_policy_value(
                action_dist=action_dist, **common
            ),
            "dm": DirectMethod().estimate_policy_value(
                action_dist=action_dist, estimated_rewards_by_reg_model=q_all, position=bf["position"]
            ),
            "dr": DoublyRobust().estimate_policy_value(
                action_dist=action_dist, estimated_rewards_by_reg_model=q_all, **common
            ),
            "sndr": SelfNormalizedDoublyRobust().estimate_policy_value(
                action_dist=action_dist, estimated_rewards_by_reg_model=q_all, **common
            ),
        }
        for tau in SWITCH_TAUS:
            est[f"switch_dr@{tau:g}"] = SwitchDoublyRobust(tau=tau).estimate_policy_value(
                action_dist=action_dist, estimated_rewards_by_reg_model=q_all, **common
            )
        if name == "greedy":
            est["replay"] = ReplayMethod().estimate_policy_value(
                reward=bf["reward"], action=bf["action"], position=bf["position"], action_dist=action_dist
            )
        values[name] = {k: float(v) for k, v in est.items()}
    values["logged_ctr"] = float(bf["reward"].mean())
    values["sklearn"] = sklearn.__version__
    return values


def slate(write: bool) -> dict:
    from obp.dataset import SyntheticSlateBanditDataset, linear_behavior_policy_logit
    from obp.ope import SlateIndependentIPS, SlateRewardInteractionIPS, SlateStandardIPS

    ds = SyntheticSlateBanditDataset(
        n_unique_action=SLATE_ITEMS,
        len_list=SLATE_LEN,
        dim_context=2,
        reward_type="binary",
        reward_structure="cascade_additive",
        behavior_policy_function=linear_behavior_policy_logit,
        random_state=12345,
    )
    bf = ds.obtain_batch_bandit_feedback(n_rounds=SLATE_ROUNDS, return_pscore_item_position=True)
    log = pd.DataFrame(
        {
            "slate": bf["slate_id"],
            "position": bf["position"] + 1,
            "item": bf["action"],
            "reward": bf["reward"],
            "list_propensity": bf["pscore"],
            "propensity": bf["pscore_item_position"],
            "prefix_propensity": bf["pscore_cascade"],
        }
    )
    if write:
        log.to_csv(HERE / "slate_log.csv.gz", index=False, float_format="%.17g")
    # the candidate: a softmax over the items at each position, the same for every list
    logits = np.random.default_rng(2024).normal(0.0, 1.0, (SLATE_LEN, SLATE_ITEMS))
    marginal = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)  # (position, item)
    rows = [(item, k + 1, marginal[k, item]) for k in range(SLATE_LEN) for item in range(SLATE_ITEMS)]
    if write:
        pd.DataFrame(rows, columns=["item", "position", "probability"]).to_csv(
            HERE / "slate_target.csv", index=False, float_format="%.17g"
        )
    e = marginal[bf["position"], bf["action"]]  # the candidate's probability of each logged row
    cascade = e.reshape(-1, SLATE_LEN).cumprod(axis=1)
    whole = np.repeat(cascade[:, -1], SLATE_LEN)
    common = dict(slate_id=bf["slate_id"], reward=bf["reward"], position=bf["position"])
    return {
        "slate_ips": float(
            SlateStandardIPS(len_list=SLATE_LEN).estimate_policy_value(
                pscore=bf["pscore"], evaluation_policy_pscore=whole, **common
            )
        ),
        "iips": float(
            SlateIndependentIPS(len_list=SLATE_LEN).estimate_policy_value(
                pscore_item_position=bf["pscore_item_position"], evaluation_policy_pscore_item_position=e, **common
            )
        ),
        "rips": float(
            SlateRewardInteractionIPS(len_list=SLATE_LEN).estimate_policy_value(
                pscore_cascade=bf["pscore_cascade"], evaluation_policy_pscore_cascade=cascade.ravel(), **common
            )
        ),
        "logged_list": float(bf["reward"].reshape(-1, SLATE_LEN).sum(axis=1).mean()),
    }


def main(argv: list[str]) -> int:
    import obp

    warnings.filterwarnings("ignore")  # obp 0.4.1 on pandas 1.5: deprecation warnings (here, not at import)

    write = "--check" not in argv
    values = {"obp": obp.__version__, "numpy": np.__version__, "n_sim": N_SIM, "obd": obd(write), "slate": slate(write)}
    text = json.dumps(values, indent=2, sort_keys=True)
    if "--check" in argv:
        recorded = json.loads((HERE / "obp_values.json").read_text())
        if recorded != values:
            print("obp's values differ from obp_values.json", file=sys.stderr)
            print(text)
            return 1
        print("obp_values.json: the same values")
        return 0
    (HERE / "obp_values.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
