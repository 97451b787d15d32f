"""One partition of whole users, every slice, in one call: the per-user metrics and the health sums (pure numpy).

The Spark layer (:mod:`recsys_spark.per_user.user_pass`) reads each partition of the persisted user rows once, one row
per labelled exposure with its slice keys as a list (``all`` first, then ``name=value`` per dimension whose
value is not null), turns the strings into integer codes and calls :func:`score_partition`.

**Each list is scored once per distinct set of rows.**  A slice key names a subset of a user's rows; the
per-user values of (key, user) are the values of that subset.  When *every* row of a user carries the same
key of a dimension (a user-level dimension such as ``user_type`` always does; a request-level one such as
``platform`` does for a user seen on one platform that day), the subset is the user's whole set of rows,
and its values are the user's ``all`` values: they are computed once and copied under the key
(:func:`plan_keys` says which).  Only the other (row, key) pairs -- an item-level dimension (``category``,
``popularity``) splits a user's lists into sub-lists, and a user seen on two platforms has two subsets --
are scored again, as rows taken by index (``numpy.take``, no copy through the JVM).  The values are those
the exploded rows would give (the same rows in each unit), and a copied unit's are bit for bit its ``all``
unit's.

Examples
--------
Two users: ``u0`` has two rows on ``ios``; ``u1`` one on ``ios`` and one on ``web``.  ``u0``'s unit under
``platform=ios`` is its ``all`` unit (copied); ``u1``'s two rows are scored again under their keys:

>>> plan = plan_keys(np.array([0, 0, 1, 1]), np.array([0, 1, 2, 3]), np.array([1, 1, 1, 2]), np.array([0, 0, 0, 0]))
>>> plan.rows.tolist(), plan.slices.tolist()
([0, 1, 2, 3, 2, 3], [0, 0, 0, 0, 1, 2])
>>> plan.copy_user.tolist(), plan.copy_slice.tolist()
([0], [1])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from recsys_spark.kernels.health_pass import Columns, UnitSums, copy_units, slice_sums, unit_sums
from recsys_spark.kernels.ranking import Gain
from recsys_spark.kernels.users import INPUT_COLUMNS, score_units
from recsys_spark.schema import USER


@dataclass(frozen=True)
class KeyPlan:
    """Which rows are scored under which slice, and which units are copies (:func:`plan_keys`).

    ``rows[j]`` is scored under slice code ``slices[j]``: every row under 0 (``all``) first, in order, then the
    (row, key) pairs that are not a copy.  Unit (``copy_slice[j]``, ``copy_user[j]``) has exactly the rows of
    (0, ``copy_user[j]``).
    """

    rows: np.ndarray
    slices: np.ndarray
    copy_user: np.ndarray
    copy_slice: np.ndarray


def plan_keys(user: np.ndarray, key_row: np.ndarray, key_code: np.ndarray, key_dim: np.ndarray) -> KeyPlan:
    """The :class:`KeyPlan` of one partition.

    ``user``: each row's user code (0 .. U - 1); ``key_row``, ``key_code``, ``key_dim``: one entry per
    (row, key) pair other than ``all`` (slice code 0): the row, the key's slice code and its dimension's code.
    A row holds at most one key of each dimension.  A user's pairs of dimension d are a copy when there is one
    per row of the user and they all hold the same key; otherwise each is scored under its key.
    """
    user = np.asarray(user, dtype=np.int64)
    n = len(user)
    key_row = np.asarray(key_row, dtype=np.int64)
    key_code = np.asarray(key_code, dtype=np.int64)
    empty = np.array([], dtype=np.int64)
    if len(key_row) == 0:
        return KeyPlan(np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64), empty, empty)
    pair_user = user[key_row]
    dims = np.asarray(key_dim, dtype=np.int64)
    # group the pairs by (user, dimension): how many, and the smallest and largest key of each
    order = np.lexsort((key_code, dims, pair_user))
    u, d, k = pair_user[order], dims[order], key_code[order]
    new = np.r_[True, (u[1:] != u[:-1]) | (d[1:] != d[:-1])]
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], len(order)]
    rows_of_user = np.bincount(user, minlength=int(user.max()) + 1)
    whole = (ends - starts == rows_of_user[u[starts]]) & (k[starts] == k[ends - 1])
    copied = np.empty(len(order), dtype=bool)
    copied[order] = np.repeat(whole, ends - starts)
    return KeyPlan(
        np.r_[np.arange(n, dtype=np.int64), key_row[~copied]],
        np.r_[np.zeros(n, dtype=np.int64), key_code[~copied]],
        u[starts][whole],
        k[starts][whole],
    )


@dataclass
class PartitionRows:
    """One partition's rows as numbers (codes are integers >= 0; -1 for a null item or category).

    ``list_id`` codes the list a row belongs to (request, session or user); ``item_rank`` orders the items
    as their ids do (it breaks exact ties in a list, :func:`kernels.users.score_users`); ``score`` ranks the
    list (higher first); ``measures``: the business metrics' numbers per row
    (:func:`kernels.health_pass.partition_sums`).
    """

    user: np.ndarray
    request: np.ndarray
    list_id: np.ndarray
    item: np.ndarray
    item_rank: np.ndarray
    category: np.ndarray
    position: np.ndarray
    score: np.ndarray
    relevance: np.ndarray
    clicked: np.ndarray
    in_catalog: np.ndarray
    measures: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.user)


@dataclass
class PartitionResult:
    """What :func:`score_partition` returns.

    ``per_user``, ``per_k``: the per-user table's values (:func:`kernels.users.score_units`: ``slice`` and
    ``user_id`` as codes), one entry per (slice, user) with an exposed item, copies last; ``health``: the long
    rows of :func:`kernels.health_pass.partition_sums` (slice codes; keys: item and category codes);
    ``units``: every (slice, user) with a row, its copies included, and its sums (None without health sums).
    """

    per_user: dict[str, np.ndarray]
    per_k: dict[str, np.ndarray]
    health: Columns
    units: UnitSums | None = None


def _take(values: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    return values if rows is None else values[rows]


def _copies(unit_slice: np.ndarray, unit_user: np.ndarray, plan: KeyPlan) -> tuple[np.ndarray, np.ndarray]:
    """(the ``all`` unit each copy of ``plan`` copies, its slice code), for the users that have such a unit."""
    at_all = np.flatnonzero(unit_slice == 0)
    of_user = np.full(int(max(unit_user.max(initial=-1), plan.copy_user.max(initial=-1))) + 1, -1, dtype=np.int64)
    of_user[unit_user[at_all]] = at_all
    source = of_user[plan.copy_user]
    has = source >= 0
    return source[has], plan.copy_slice[has]


def score_partition(
    rows: PartitionRows,
    plan: KeyPlan,
    ks: Sequence[int] | None,
    gain: Gain,
    min_list_length: int | None,
) -> PartitionResult:
    """The per-user metrics (``ks`` None: none) and the health sums (``min_list_length`` None: none) of every
    (slice, user) unit of one partition, each distinct unit computed once (module docstring)."""
    identity = len(plan.rows) == len(rows) and bool((plan.rows == np.arange(len(rows))).all())
    taken = None if identity else plan.rows
    slice_code = plan.slices
    per_user: dict[str, np.ndarray] = {}
    per_k: dict[str, np.ndarray] = {}
    if ks is not None:
        exposed = _take(rows.item, taken) >= 0
        at = np.flatnonzero(exposed) if taken is None else taken[exposed]
        frame = pd.DataFrame(
            {
                "slice": slice_code[exposed],
                USER: rows.user[at],
                "list_id": rows.list_id[at],
                "item_id": rows.item_rank[at],
                "position": rows.position[at],
                "score": rows.score[at],
                "relevance": rows.relevance[at],
            },
            columns=list(INPUT_COLUMNS),
        )
        per_user, per_k = score_units(frame, ks, gain)
        del frame
        unit_slice = np.asarray(per_user["slice"], dtype=np.int64)
        unit_user = np.asarray(per_user[USER], dtype=np.int64)
        source, copy_slice = _copies(unit_slice, unit_user, plan)
        per_user = {name: np.concatenate([v, v[source]]) for name, v in per_user.items()}
        per_user["slice"] = np.r_[unit_slice, copy_slice]
        per_user[USER] = np.r_[unit_user, unit_user[source]]
        per_k = {name: np.concatenate([v, v[source]]) for name, v in per_k.items()}
    health: Columns = {}
    every: UnitSums | None = None
    if min_list_length is not None:
        units = unit_sums(
            slice_code,
            _take(rows.user, taken),
            _take(rows.request, taken),
            _take(rows.item, taken),
            _take(rows.category, taken),
            _take(rows.clicked, taken),
            _take(rows.in_catalog, taken),
            min_list_length,
            {name: _take(v, taken) for name, v in rows.measures.items()} or None,
        )
        source, copy_slice = _copies(units.slice, units.user, plan)
        every = copy_units(units, source, copy_slice)
        health = slice_sums(every)
    return PartitionResult(per_user, per_k, health, every)
