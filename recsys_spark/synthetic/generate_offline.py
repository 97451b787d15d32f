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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa

from recsys_spark.synthetic.write import write_table

MODELS = {"base": 1.2, "candidate": 0.7}  # noise of each model's scores
TOP_K = 20
NEGATIVES = 99


def _ids(prefix: str, numbers: np.ndarray) -> pa.Array:
    return pa.array([f"{prefix}{n:06d}" for n in numbers.tolist()], pa.string())


@dataclass(frozen=True)
class World:
    """What the models are scored against: the users' affinities and interactions, split into train and test."""

    category: np.ndarray  # category code per item
    affinity: np.ndarray  # users x items: 2 u.i + the item's popularity
    took: np.ndarray  # users x items: True where the user interacted
    train: np.ndarray  # users x items: True for a train interaction
    rows: np.ndarray  # user of each interaction
    cols: np.ndarray  # item of each interaction
    is_test: np.ndarray  # per interaction: held out (about 20%)

    @property
    def test_u(self) -> np.ndarray:
        return self.rows[self.is_test]

    @property
    def test_i(self) -> np.ndarray:
        return self.cols[self.is_test]


def draw_world(rng: np.random.Generator, users: int, items: int, categories: int, interactions: int) -> World:
    """Latent vectors (items around their category's centre), affinities, and per user Poisson(interactions)
    items (at least 3, at most items/4) drawn without replacement proportional to exp(affinity)."""
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
    train = np.zeros_like(took)
    train[rows[~is_test], cols[~is_test]] = True
    return World(category, affinity, took, train, rows, cols, is_test)


Ids = tuple[pa.Array, pa.Array]  # user ids, item ids: rows pick theirs with take


def _pairs(ids: Ids, users: np.ndarray, items: np.ndarray, **columns: object) -> pa.Table:
    """A table of (user_id, item_id) pairs by index, then ``columns`` in their order."""
    user_ids, item_ids = ids
    return pa.table({"user_id": user_ids.take(pa.array(users)), "item_id": item_ids.take(pa.array(items)), **columns})


def _shared_tables(rng: np.random.Generator, world: World, ids: Ids) -> Iterator[tuple[str, pa.Table]]:
    """``items`` (item_id, category), ``train`` and ``truth`` (the test interactions, 30% of relevance 2)."""
    category = pa.array([f"c{c:02d}" for c in world.category.tolist()])
    yield "items", pa.table({"item_id": ids[1], "category": category})
    yield "train", _pairs(ids, world.rows[~world.is_test], world.cols[~world.is_test])
    relevance = np.where(rng.random(len(world.test_u)) < 0.3, 2.0, 1.0)  # graded truth: some count double
    yield "truth", _pairs(ids, world.test_u, world.test_i, relevance=relevance)


def _recommendations(mrng: np.random.Generator, world: World, score: np.ndarray, ids: Ids) -> pa.Table:
    """The top ``TOP_K`` by score: train items masked except for about 10% of users, 2% of users (with
    truth or not) without a list, 1% of the rows repeated lower in their list (rank TOP_K + 1)."""
    users = len(score)
    keeps_train = mrng.random(users) < 0.1
    masked = np.where(world.train & ~keeps_train[:, None], -np.inf, score)
    top = np.argsort(-masked, axis=1)[:, :TOP_K]
    listed = np.ones(users, bool)
    listed[mrng.random(users) < 0.02] = False  # users with truth but no list
    lu = np.repeat(np.arange(users)[listed], TOP_K)
    li = top[listed].ravel()
    rank = np.tile(np.arange(1, TOP_K + 1), listed.sum())
    dup = mrng.random(len(lu)) < 0.01  # a repeated item, lower in the list
    lu, li = np.r_[lu, lu[dup]], np.r_[li, li[dup]]
    rank = np.r_[rank, np.full(dup.sum(), TOP_K + 1)]
    return _pairs(ids, lu, li, score=score[lu, li], rank=rank.astype(np.int32))


def _predictions(mrng: np.random.Generator, world: World, score: np.ndarray, ids: Ids) -> pa.Table:
    """Pointwise predictions sigmoid(0.9 score - 2.2) on the test rows (label 1) and on 4 random items per
    test row that the user never touched (label 0)."""
    items = score.shape[1]
    test_u, test_i = world.test_u, world.test_i
    neg_u = np.repeat(test_u, 4)
    neg_i = mrng.integers(0, items, len(neg_u))
    keep = ~world.took[neg_u, neg_i]
    pu, pi = np.r_[test_u, neg_u[keep]], np.r_[test_i, neg_i[keep]]
    label = np.r_[np.ones(len(test_u)), np.zeros(keep.sum())]
    logit = 0.9 * score[pu, pi] - 2.2
    return _pairs(ids, pu, pi, score=1.0 / (1.0 + np.exp(-logit)), label=label.astype(np.int32))


def rng_normal(seed: int, n: int) -> np.ndarray:
    """The rating noise: the same for both models (it is the users', not the model's)."""
    return np.random.default_rng(seed + 99).normal(0, 0.6, n)


def _ratings(world: World, score: np.ndarray, seed: int, ids: Ids) -> pa.Table:
    """Ratings of the test interactions on a 1..5 scale (3 + 0.8 affinity + the users' noise, rounded);
    the model predicts 3 + 0.8 of its noisy score."""
    test_u, test_i = world.test_u, world.test_i
    latent = 3.0 + 0.8 * world.affinity[test_u, test_i]
    rating = np.clip(np.floor(latent + rng_normal(seed, len(test_u)) + 0.5), 1, 5)
    prediction = 3.0 + 0.8 * score[test_u, test_i]
    return _pairs(ids, test_u, test_i, rating=rating, prediction=prediction)


def sampled_pairs(world: World, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(users, items, is_target) of the sampled metrics: per user with test items its first one (the target),
    then ``NEGATIVES`` items the user never touched, sampled without replacement; the same for every model."""
    srng = np.random.default_rng(seed + 17)
    users, items = world.affinity.shape
    first_test = np.full(users, -1)
    first_test[world.test_u[::-1]] = world.test_i[::-1]
    for_users = np.flatnonzero(np.bincount(world.test_u, minlength=users) > 0)
    keys = srng.random((len(for_users), items)) + world.took[for_users]  # untouched items first
    negatives = np.argsort(keys, axis=1)[:, :NEGATIVES]
    su_list = np.r_[for_users, np.repeat(for_users, NEGATIVES)]
    si_list = np.r_[first_test[for_users], negatives.ravel()]
    tg_list = np.r_[np.ones(len(for_users), bool), np.zeros(len(for_users) * NEGATIVES, bool)]
    return su_list, si_list, tg_list


def _model_tables(world: World, model: str, noise: float, seed: int, ids: Ids) -> Iterator[tuple[str, pa.Table]]:
    """One model's four tables; its scores are the affinity plus N(0, noise) from its own stream."""
    mrng = np.random.default_rng(seed * 1000 + int(noise * 100))
    score = world.affinity + mrng.normal(0, noise, world.affinity.shape)
    yield f"recommendations/model={model}", _recommendations(mrng, world, score, ids)
    yield f"predictions/model={model}", _predictions(mrng, world, score, ids)
    yield f"ratings/model={model}", _ratings(world, score, seed, ids)
    su, si, target = sampled_pairs(world, seed)
    yield f"sampled/model={model}", _pairs(ids, su, si, score=score[su, si], is_target=target)


def write_config(root: Path) -> None:
    """``offline.toml``: every input's absolute path, ``{run}`` where each model has its own."""
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
    world = draw_world(rng, users, items, categories, interactions)
    ids = (_ids("u", np.arange(users)), _ids("i", np.arange(items)))
    tables = chain(
        _shared_tables(rng, world, ids),
        *(_model_tables(world, model, noise, seed, ids) for model, noise in MODELS.items()),
    )
    counts: dict[str, int] = {}
    for name, table in tables:  # one table in memory at a time
        write_table(table, root / name)
        counts[name] = table.num_rows
    write_config(root)
    return counts


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
