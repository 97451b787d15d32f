"""The composite metric of a user: a weighted sum of the user's own per-user metrics (pure numpy).

``[[metrics.composite]]`` (docs/metrics.md, "Composite metric") names a metric and its components, each a
per-user metric key of the per-user table (``ndcg@10_user_avg``, ``mrr_user_avg``, ``auc_user_avg``) with a
weight w_c and, when standardised, a scale s_c (the component's per-user standard deviation on the reference
day; 1 otherwise).  A user's composite is

    C_u = Σ_c (w_c / s_c) · x_{u,c}

over the components, and a user that lacks any component (no ranked list, an AUC with one class only) has no
composite (it is left out of the mean, as a user without a ranked list is left out of NDCG's).  The metric is
the mean of C_u over the users that have one, its interval the user-level t interval of every ``user_avg`` row.
The scales shift and stretch nothing but the weights: C_u stays linear in the user's values.

>>> c = Composite("overall", (Term("ndcg", 10, 0.5), Term("mrr", None, 1.0, 2.0)))
>>> per_user = {"mrr": np.array([1.0, 0.5, np.nan])}
>>> per_k = {"ndcg": np.array([[0.2, 0.4], [0.0, 1.0], [0.3, 0.3]])}
>>> composite_values(c, per_user, per_k, (5, 10)).tolist()   # 0.5*0.4 + 1.0/2*1.0; 0.5*1.0 + 0.5*0.5; no mrr
[0.7, 0.75, nan]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas only where the table is read: loading a config (metric_specs) imports this module
    import pandas as pd


@dataclass(frozen=True)
class Term:
    """One component: the per-user table's column ``metric`` at cut-off ``k`` (None: a column without one,
    ``mrr`` or ``auc``), its weight, and the scale it is divided by (1: not standardised)."""

    metric: str
    k: int | None
    weight: float
    scale: float = 1.0

    @property
    def coefficient(self) -> float:
        """w_c / s_c: what the user's value is multiplied by."""
        return self.weight / self.scale


@dataclass(frozen=True)
class Composite:
    """A composite metric ready to compute: its name and its terms (scales resolved)."""

    name: str
    terms: tuple[Term, ...]


def sum_column(name: str) -> str:
    """The per-user day sum of a composite in ``experiment_users``: the user's composite, 0 without one."""
    return f"composite_{name}_sum"


def units_column(name: str) -> str:
    """The per-user day count of a composite in ``experiment_users``: 1 when the user has a composite that day."""
    return f"composite_{name}_units"


def day_columns(composites: Sequence[Composite]) -> list[str]:
    """The ``experiment_users`` columns of the composites, in order."""
    return [c for comp in composites for c in (sum_column(comp.name), units_column(comp.name))]


def composite_values(
    composite: Composite, per_user: Mapping[str, np.ndarray], per_k: Mapping[str, np.ndarray], ks: Sequence[int]
) -> np.ndarray:
    """C_u for each unit (module docstring) from the pass's per-unit arrays: ``per_user[metric]`` (one value per
    unit) for a term without k, column ``ks.index(k)`` of ``per_k[metric]`` for one with; NaN when a component
    is missing (NaN) for the unit."""
    total: np.ndarray | None = None
    for term in composite.terms:
        if term.k is None:
            x = np.asarray(per_user[term.metric], dtype=np.float64)
        else:
            x = np.asarray(per_k[term.metric], dtype=np.float64)[:, list(ks).index(term.k)]
        part = term.coefficient * x
        total = part if total is None else total + part
    return np.asarray(total if total is not None else np.empty(0), dtype=np.float64)


def table_values(composites: Sequence[Composite], frame: pd.DataFrame, ks: Sequence[int]) -> dict[str, np.ndarray]:
    """{name: C_u of each user} from rows of the per-user table of one slice (one row per (user, k), in any
    order: the set-aside users' rows too), users in order of first appearance; one hash of the user ids for
    every composite, no call per user (a user without a row at a term's k has no value for it)."""
    import pandas as pd

    codes, users = pd.factorize(frame["user_id"])
    k_of_row = frame["k"].to_numpy()
    out: dict[str, np.ndarray] = {}
    for composite in composites:
        total = np.zeros(len(users))
        for term in composite.terms:
            at = k_of_row == (ks[0] if term.k is None else term.k)
            x = np.full(len(users), np.nan)
            x[codes[at]] = frame[term.metric].to_numpy(dtype=np.float64, na_value=np.nan)[at]
            total = total + term.coefficient * x
        out[composite.name] = total
    return out
