"""Simulation behind docs/offline.md: naive vs Krichene-Rendle corrected sampled metrics, full ranks known.

For each scenario, each of `users` targets gets a full-catalog rank r from the model's rank law; m negatives are
drawn without replacement from the n - 1 other items (the sampled rank is 1 + how many of them the model ranks
above the target: a hypergeometric draw); the mean naive and corrected values are compared with the mean metric
at the full ranks.  Run: PYTHONPATH=. python benchmarks/sampled_simulation.py
"""

from __future__ import annotations

import math

import numpy as np

from recsys_spark.kernels import sampled as S


def scenario(
    n: int, m: int, users: int, law: str, gamma: float, seed: int = 1
) -> dict[str, tuple[float, float, float]]:
    rng = np.random.default_rng(seed)
    if law == "log-uniform":  # a decent model: targets spread over orders of magnitude of rank
        r = np.exp(rng.uniform(0, math.log(n), users))
    elif law == "strong":  # most targets in the top 1%
        r = rng.exponential(n / 100, users) + 1
    else:  # a weak model: uniform ranks
        r = rng.uniform(1, n + 1, users)
    r = np.minimum(np.floor(r), n).astype(np.int64)
    sampled = 1.0 + rng.hypergeometric(r - 1, n - r, m)
    values = S.target_metrics(sampled, np.full(users, m), [10], S.tables_for(n, [m], [10], gamma))
    out = {}
    for name, k in (("ndcg", 10), ("recall", 10), ("map", 10), ("mrr", None), ("auc", None)):
        col = name if k is None else f"{name}_at_{k}"
        exact = S.metric_at_rank(name, r.astype(float), n, k).mean()
        out[col] = (exact, values[f"sampled_{col}"].mean(), values[f"corrected_{col}"].mean())
    return out


if __name__ == "__main__":
    print("| n | m | rank law | gamma | metric | exact | naive | corrected |")
    print("|---|---|---|---|---|---|---|---|")
    for n, m, law, gamma in (
        (2000, 99, "log-uniform", 0.01),
        (2000, 99, "strong", 0.01),
        (2000, 99, "weak", 0.01),
        (20000, 99, "log-uniform", 0.01),
        (20000, 99, "log-uniform", 0.1),
    ):
        for col, (exact, naive, corrected) in scenario(n, m, 20000, law, gamma).items():
            print(f"| {n} | {m} | {law} | {gamma} | {col} | {exact:.4f} | {naive:.4f} | {corrected:.4f} |")
