"""Open Bandit Pipeline's golden values and the inputs they were computed on (tests/golden/, made by
tests/golden/obp_ope.py with obp 0.4.1: ``make golden-obp``).

obp needs torch and pandas 1.5, so it is not a test dependency: its values are recorded here as literals
(and in tests/golden/obp_values.json, which test_ope_kernels checks against them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"

#: obp 0.4.1 (numpy 1.26.4, scikit-learn 1.9.1), n_sim 10,000; tests/golden/obp_ope.py
OBP_VERSION = "0.4.1"
OBD = {
    "bts": {
        "dm": 0.0039396386577143375,
        "dr": 0.0048930322811133724,
        "ips": 0.004683199999999999,
        "sndr": 0.004939115352998164,
        "snips": 0.004909566357980687,
        "switch_dr@10": 0.0038222200451945424,
        "switch_dr@100": 0.0048930322811133724,
    },
    "greedy": {
        "dm": 0.011458321084189857,
        "dr": 0.04754151384110486,
        "ips": 0.048,
        "replay": 0.045801526717557245,
        "sndr": 0.04588884852399425,
        "snips": 0.045801526717557245,
        "switch_dr@10": 0.011458321084189857,
        "switch_dr@100": 0.04754151384110486,
    },
    "logged_ctr": 0.0038,
    "on_policy_bts_ctr": 0.0042,  # the Bernoulli TS policy's own logs: the on-policy truth
}
SLATE = {
    "iips": 1.687295705233347,
    "logged_list": 1.7666666666666666,
    "rips": 1.395535400755109,
    "slate_ips": 1.1635867943316052,
}


def obd_logged() -> pd.DataFrame:
    """round, ts_us, item, position (1-based), click, propensity: 10,000 rows."""
    return pd.read_csv(GOLDEN_DIR / "obd_random_all.csv.gz")


def obd_target(candidate: str) -> pd.DataFrame:
    """item, position, probability, q_hat of ``candidate`` (``bts`` or ``greedy``), the same for every round."""
    targets = pd.read_csv(GOLDEN_DIR / "obd_targets.csv")
    return targets[targets["candidate"] == candidate].drop(columns="candidate").reset_index(drop=True)


def q_grid() -> np.ndarray:
    """q̂ per (item, position - 1) where a candidate shows the item (NaN elsewhere: never read there)."""
    targets = pd.read_csv(GOLDEN_DIR / "obd_targets.csv")
    grid = np.full((80, 3), np.nan)
    grid[targets["item"].to_numpy(), targets["position"].to_numpy() - 1] = targets["q_hat"].to_numpy()
    return grid


def slate_log() -> pd.DataFrame:
    """slate, position (1-based), item, reward, list_propensity, propensity, prefix_propensity."""
    return pd.read_csv(GOLDEN_DIR / "slate_log.csv.gz")


def slate_target() -> pd.DataFrame:
    """item, position, probability: the candidate's marginal at each position, the same for every list."""
    return pd.read_csv(GOLDEN_DIR / "slate_target.csv")
