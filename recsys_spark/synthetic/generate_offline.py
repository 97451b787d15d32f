"""Sample data for ``recsys-spark offline``: a train/test split and two models' outputs.

Users and items have latent vectors; a user's affinity for an item is their
dot product plus an item popularity term.  Each user interacts with items drawn
by affinity; the interactions are split per user into train (about 80%) and
test (the held-out truth).  Two models, ``base`` and ``candidate`` (less
noise), score every item as affinity plus noise, and each writes:

* ``recommendations/model=NAME``: user_id, item_id, score, rank -- the top 20,
  where about 10% of users have a train item in their list (removed by
  ``exclude_train_items``), some lists repeat an item, 2% of users with truth
  get no list and 2% of the listed users have no truth;
* ``predictions/model=NAME``: user_id, item_id, score (a probability), label --
  every test interaction (label 1) and four sampled non-interactions (label 0);
* ``ratings/model=NAME``: user_id, item_id, rating (1..5), prediction;
* ``sampled/model=NAME``: user_id, item_id, score, is_target -- one test item per
  user and 99 items the user never interacted with, sampled without replacement.

Shared: ``train``, ``truth``, ``items`` (item_id, category), and ``offline.toml``,
a config whose paths use ``{run}`` so that ``--run base`` and ``--run candidate``
read each model's files.  Everything is numpy; one seed gives the same files.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from recsys_spark.synthetic.generate import write_table

MODELS = {"base": 1.2, "candidate": 0.7}  # noise of each model's scores
TOP_K = 20
NEGATIVES = 99


def _ids(prefix: str, numbers: np.ndarray) -> pa.Array:
    return pa.array([f"{prefix}{n:06d}" for n in numbers.tolist()], pa.string())


def generate(
    output_root: str | Path,
    users: int = 2000,
    items: int = 1000,
    categories: int = 20,
    seed: int = 7,
    interactions: int = 20,
) -> dict:
    """Write every offline input under ``output_root``; return row counts."""
    root = Path(output_root)
    rng = np.random.default_rng(seed)
    dim = 8
    u_vec = rng.normal(0, 1, (users, dim)) / np.sqrt(dim)
    category = rng.integers(0, categories, items)
    centers = rng.normal(0, 1, (categories, dim))
    i_vec = (centers[category] + rng.normal(0, 0.7, (items, dim))) / np.sqrt(dim)
    popularity = rng.normal(0, 0.8, items)
    affinity = 2.0 * u_vec @ i_vec.T + popularity[None, :]  # users x items

    # interactions: Gumbel top-n = sampling without replacement proportional to exp(affinity)
    n_per_user = np.clip(rng.poisson(interactions, users), 3, items // 4)
    gumbel = affinity + rng.gumbel(size=affinity.shape)
    order = np.argsort(-gumbel, axis=1)
    took = np.zeros_like(affinity, dtype=bool)
    rows = np.repeat(np.arange(users), n_per_user)
    cols = order[rows, np.concatenate([np.arange(n) for n in n_per_user])]
    took[rows, cols] = True
    is_test = rng.random(len(rows)) < 0.2
    train_mask = np.zeros_like(took)
    train_mask[rows[~is_test], cols[~is_test]] = True
    test_u, test_i = rows[is_test], cols[is_test]

    counts: dict[str, int] = {}

    def write(name: str, table: pa.Table) -> None:
        write_table(table, root / name)
        counts[name] = table.num_rows

    user_ids = _ids("u", np.arange(users))
    item_ids = _ids("i", np.arange(items))
    write("items", pa.table({"item_id": item_ids, "category": pa.array([f"c{c:02d}" for c in category.tolist()])}))
    tr_u, tr_i = rows[~is_test], cols[~is_test]
    write("train", pa.table({"user_id": user_ids.take(pa.array(tr_u)), "item_id": item_ids.take(pa.array(tr_i))}))
    relevance = np.where(rng.random(len(test_u)) < 0.3, 2.0, 1.0)  # graded truth: some interactions count double
    write(
        "truth",
        pa.table(
            {
                "user_id": user_ids.take(pa.array(test_u)),
                "item_id": item_ids.take(pa.array(test_i)),
                "relevance": relevance,
            }
        ),
    )

    has_test = np.bincount(test_u, minlength=users) > 0
    for model, noise in MODELS.items():
        mrng = np.random.default_rng(seed * 1000 + int(noise * 100))
        score = affinity + mrng.normal(0, noise, affinity.shape)
        # most lists exclude train items, about 10% of users keep them (the evaluation removes them)
        keeps_train = mrng.random(users) < 0.1
        masked = np.where(train_mask & ~keeps_train[:, None], -np.inf, score)
        top = np.argsort(-masked, axis=1)[:, :TOP_K]
        listed = np.ones(users, bool)
        listed[mrng.random(users) < 0.02] = False  # users with truth but no list
        lu = np.repeat(np.arange(users)[listed], TOP_K)
        li = top[listed].ravel()
        rank = np.tile(np.arange(1, TOP_K + 1), listed.sum())
        dup = mrng.random(len(lu)) < 0.01  # a repeated item, lower in the list
        lu, li = np.r_[lu, lu[dup]], np.r_[li, li[dup]]
        rank = np.r_[rank, np.full(dup.sum(), TOP_K + 1)]
        sc = score[lu, li]
        write(
            f"recommendations/model={model}",
            pa.table(
                {
                    "user_id": user_ids.take(pa.array(lu)),
                    "item_id": item_ids.take(pa.array(li)),
                    "score": sc,
                    "rank": rank.astype(np.int32),
                }
            ),
        )

        # pointwise predictions on test rows and 4 random non-interactions per test row
        neg_u = np.repeat(test_u, 4)
        neg_i = mrng.integers(0, items, len(neg_u))
        keep = ~took[neg_u, neg_i]
        pu, pi = np.r_[test_u, neg_u[keep]], np.r_[test_i, neg_i[keep]]
        label = np.r_[np.ones(len(test_u)), np.zeros(keep.sum())]
        logit = 0.9 * score[pu, pi] - 2.2
        write(
            f"predictions/model={model}",
            pa.table(
                {
                    "user_id": user_ids.take(pa.array(pu)),
                    "item_id": item_ids.take(pa.array(pi)),
                    "score": 1.0 / (1.0 + np.exp(-logit)),
                    "label": label.astype(np.int32),
                }
            ),
        )

        # ratings of the test interactions on a 1..5 scale; the model predicts from its noisy score
        latent = 3.0 + 0.8 * affinity[test_u, test_i]
        rating = np.clip(np.floor(latent + rng_normal(seed, len(test_u)) + 0.5), 1, 5)
        prediction = 3.0 + 0.8 * score[test_u, test_i]
        write(
            f"ratings/model={model}",
            pa.table(
                {
                    "user_id": user_ids.take(pa.array(test_u)),
                    "item_id": item_ids.take(pa.array(test_i)),
                    "rating": rating,
                    "prediction": prediction,
                }
            ),
        )

        # sampled: one target per user with test items, 99 negatives the user never touched
        srng = np.random.default_rng(seed + 17)  # the same targets and negatives for both models
        first_test = np.full(users, -1)
        first_test[test_u[::-1]] = test_i[::-1]
        for_users = np.flatnonzero(has_test)
        keys = srng.random((len(for_users), items)) + took[for_users]  # untouched items first
        negatives = np.argsort(keys, axis=1)[:, :NEGATIVES]
        su_list = np.r_[for_users, np.repeat(for_users, NEGATIVES)]
        si_list = np.r_[first_test[for_users], negatives.ravel()]
        tg_list = np.r_[np.ones(len(for_users), bool), np.zeros(len(for_users) * NEGATIVES, bool)]
        write(
            f"sampled/model={model}",
            pa.table(
                {
                    "user_id": user_ids.take(pa.array(su_list)),
                    "item_id": item_ids.take(pa.array(si_list)),
                    "score": score[su_list, si_list],
                    "is_target": tg_list,
                }
            ),
        )

    absolute = root.resolve()
    (root / "offline.toml").write_text(
        "# written by python -m recsys_spark.synthetic.generate_offline: run with --run base or --run candidate\n"
        "[offline]\n"
        f'recommendations = "{absolute}/recommendations/model={{run}}"\n'
        f'truth = "{absolute}/truth"\n'
        f'train = "{absolute}/train"\n'
        f'items = "{absolute}/items"\n'
        f'predictions = "{absolute}/predictions/model={{run}}"\n'
        f'ratings = "{absolute}/ratings/model={{run}}"\n'
        f'sampled = "{absolute}/sampled/model={{run}}"\n'
        'rating_range = "1,5"\n'
        "round_predictions = true\n"
        'distortion = {"5,1" = 6, "4,1" = 4, "5,2" = 4, "1,5" = 3, "1,4" = 2}\n'
    )
    return counts


def rng_normal(seed: int, n: int) -> np.ndarray:
    """The rating noise: the same for both models (it is the users', not the model's)."""
    return np.random.default_rng(seed + 99).normal(0, 0.6, n)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m recsys_spark.synthetic.generate_offline", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--output-root", required=True, type=Path)
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.users < 2 or args.items < 4 * 100:
        parser.error("need --users >= 2 and --items >= 400 (99 negatives per user among untouched items)")
    counts = generate(args.output_root, args.users, args.items, seed=args.seed)
    for name, n in counts.items():
        print(f"{name}: {n} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
