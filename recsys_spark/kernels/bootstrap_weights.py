"""Unit-keyed Poisson bootstrap weights: each unit's weight in each replicate is Poisson(1), a pure function of
(unit id, replicate, seed) (:func:`poisson_weights`, from :func:`hash_units` and :func:`splitmix64`), so the same
user gets the same weight in every slice, batch and executor.  Pure numpy; no Spark.  The intervals they give:
:func:`~recsys_spark.kernels.estimates.bootstrap_interval`.
"""

from __future__ import annotations

import math

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_POISSON_MAX = 20  # P(Poisson(1) > 20) ≈ 1.6e-20: the table ends there
_POISSON_CDF = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(_POISSON_MAX + 1)])


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser (Steele, Lea & Flood 2014) on uint64, element-wise (wrapping arithmetic).

    >>> hex(int(splitmix64(np.array([0], dtype=np.uint64))[0]))   # of the state 0 + golden gamma
    '0xe220a8397b1dcdaf'
    """
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_units(unit_ids: np.ndarray) -> np.ndarray:
    """64-bit hash of each unit id: FNV-1a over its Unicode code points (32-bit words), then splitmix64.

    Vectorised over units (one numpy pass per character position, no Python
    call per id); depends only on the id string, so it is the same on every
    executor, in every batch, in every run.  Integer ids are hashed as their
    decimal strings.
    """
    ids = np.asarray(unit_ids)
    if ids.dtype.kind != "U":
        ids = ids.astype(str)
    n = len(ids)
    width = max(ids.dtype.itemsize // 4, 1)
    codes = (
        np.ascontiguousarray(ids).view(np.uint32).reshape(n, -1)
        if n and ids.dtype.itemsize
        else np.zeros((n, width), dtype=np.uint32)
    )
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(codes.shape[1]):
            c = codes[:, j].astype(np.uint64)
            live = c != 0  # numpy pads shorter strings with NUL code points: they are not part of the id
            h = np.where(live, (h ^ c) * _FNV_PRIME, h)
        lengths = np.char.str_len(ids).astype(np.uint64)
        return splitmix64(h ^ splitmix64(lengths))


def poisson_weights(unit_ids: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """Bootstrap weights (n_units, replicates), each Poisson(1), a pure function of (unit id, replicate, seed).

    u = top 53 bits of splitmix64(splitmix64(hash(unit) ⊕ splitmix64(seed)) + (r + 1)·γ) / 2⁵³,
    γ = 0x9E3779B97F4A7C15; w = the Poisson(1) inverse CDF at u (table up to 20).
    No generator state: the same unit gets the same weight whatever the
    partitioning, batch order or slice it is seen in (Chamandy et al. 2012;
    meterstick's ``PoissonBootstrap``).  Returned as uint8.

    >>> w = poisson_weights(np.array(["u1", "u2"]), 4, seed=7)
    >>> w.shape, bool((w == poisson_weights(np.array(["u2", "u1"]), 4, seed=7)[::-1]).all())
    ((2, 4), True)
    """
    if replicates < 0:
        raise ValueError(f"replicates must be >= 0, got {replicates}")
    with np.errstate(over="ignore"):
        seed_key = splitmix64(np.array([np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)], dtype=np.uint64))
        key = splitmix64(hash_units(unit_ids) ^ seed_key)
        steps = np.arange(1, replicates + 1, dtype=np.uint64) * _GOLDEN
        bits = splitmix64(key[:, None] + steps[None, :])
    u = (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    return np.searchsorted(_POISSON_CDF, u, side="right").astype(np.uint8)
