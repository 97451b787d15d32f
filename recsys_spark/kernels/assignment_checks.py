"""Checks of an experiment's assignment, from user counts: sample-ratio mismatch (:func:`srm_test`), the
independence of two layers' assignments (:func:`independence_test`), both Pearson chi-square tests, and why an
experiment has nothing to compare (:func:`why_not_compared`).

Pure numpy (``scipy.stats`` for the chi-square tail, imported when a test runs); no Spark.  The unit is the user:
every count is of users, never of exposures.  docs/experiments.md, "Checks".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def _chi2_sf(stat: float, df: int) -> float:
    """P(chi2_df > stat); scipy imported here, not with the module: its import costs half a second that a
    command checking its config before the JVM starts should not pay."""
    from scipy.stats import chi2

    return float(chi2.sf(stat, df))


@dataclass(frozen=True)
class ChiSquare:
    """Result of a Pearson chi-square test."""

    statistic: float
    p_value: float
    df: int


def srm_test(observed: Sequence[float], weights: Sequence[float] | None = None) -> ChiSquare:
    """Sample-ratio mismatch: chi-square goodness of fit of users per arm against the planned split.

    chi2 = sum_i (O_i - E_i)^2 / E_i with E_i = N w_i / sum(w), df = arms - 1,
    p = P(chi2_df > chi2).  ``weights`` default to an equal split.

    Notes: an arm with weight 0 and no user adds nothing; an arm with weight 0
    and users gives chi2 = inf and p = 0.  Fewer than two arms, or no user at
    all, gives (nan, nan, 0): nothing to test, and no p-value (p = 1 would read
    as "the split is fine" when no split was seen).

    >>> r = srm_test([600, 400])          # E = 500 each: 100**2/500 * 2 = 40
    >>> r.statistic, r.df, r.p_value < 1e-9
    (40.0, 1, True)
    """
    o = np.asarray(observed, dtype=np.float64)
    w = np.ones_like(o) if weights is None else np.asarray(weights, dtype=np.float64)
    if len(o) != len(w):
        raise ValueError("observed and weights differ in length")
    total = o.sum()
    if len(o) < 2 or total <= 0:
        return ChiSquare(math.nan, math.nan, 0)
    e = total * w / w.sum()
    zero = e == 0
    if np.any(zero & (o > 0)):
        return ChiSquare(math.inf, 0.0, len(o) - 1)
    stat = float(np.sum((o[~zero] - e[~zero]) ** 2 / e[~zero]))
    df = len(o) - 1
    return ChiSquare(stat, _chi2_sf(stat, df), df)


def why_not_compared(
    users: Mapping[str, int],
    excluded: int,
    control: str,
    assigned: int | None = None,
    assigned_example: str | None = None,
    exposure_example: str | None = None,
    population: tuple[str, int] | None = None,
) -> str | None:
    """Why an experiment has nothing to compare, in one line; None when a variant meets its control.

    ``users``: counted users per variant (the ``all`` slice); ``excluded``: users left out for several
    variants.  A comparison needs users in the arm named ``control`` and in at least one other arm.
    ``assigned`` (the daily run: distinct ids of the experiment in the assignments table) and the two
    examples name the ids of both sides when no assigned id matched a user with a valid row, so that
    a format mismatch (``1`` against ``u000001``) shows.  ``population``: the experiment's population condition
    and how many of its assigned ids had a valid row of the day before it was applied; when some had, it was the
    population that admitted none of them, and the line says so instead of naming the ids.

    >>> why_not_compared({"control": 3, "treatment": 2}, 0, "control") is None
    True
    >>> why_not_compared({}, 5, "control")
    'no user left after excluding 5 user(s) with several variants'
    >>> why_not_compared({}, 0, "control", 9, "u1", "u1", ("region = 'west'", 7))
    "the population (region = 'west') admitted none of the 7 assigned user(s) with a valid row of the day"
    """
    seen = {v: int(n) for v, n in users.items() if n > 0}
    if not seen and excluded <= 0:
        if population is not None and population[1] > 0:
            condition, before = population
            return (
                f"the population ({condition}) admitted none of the {before} assigned user(s) with a valid row of "
                "the day"
            )
        if assigned is None:
            return "no assigned user with a valid row"
        exposure = (
            f"exposure id {exposure_example!r}; ids are compared as strings"
            if exposure_example is not None
            else "exposure id none: no valid exposure that day"
        )
        return (
            f"no assigned user matched an exposure of the day: {assigned} assignment id(s), 0 matched "
            f"(e.g. assignment id {assigned_example!r}, {exposure})"
        )
    if not seen:
        return f"no user left after excluding {excluded} user(s) with several variants"
    if control not in seen:
        split = ", ".join(f"{v}={n}" for v, n in sorted(seen.items()))
        return f"no control arm named {control!r} (experiments.control); variants with users: {split}"
    if len(seen) == 1:
        return f"no variant besides the control {control!r} ({seen[control]} users)"
    return None


def independence_test(table: np.ndarray) -> ChiSquare:
    """Pearson chi-square test of independence of a contingency table (no continuity correction).

    chi2 = sum_ij (O_ij - E_ij)^2 / E_ij, E_ij = row_i col_j / N, df = (r - 1)(c - 1),
    over the rows and columns with at least one count (an empty cell of a
    non-empty row and column is a 0 that counts).  With one row or column
    left there is nothing to test: (0, 1, 0).  Equals
    ``scipy.stats.chi2_contingency(table, correction=False)``.

    >>> independence_test(np.array([[10, 10], [10, 10]])).statistic
    0.0
    """
    t = np.asarray(table, dtype=np.float64)
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
    if t.ndim != 2 or min(t.shape) < 2:
        return ChiSquare(0.0, 1.0, 0)
    e = np.outer(t.sum(axis=1), t.sum(axis=0)) / t.sum()
    stat = float(np.sum((t - e) ** 2 / e))
    df = (t.shape[0] - 1) * (t.shape[1] - 1)
    return ChiSquare(stat, _chi2_sf(stat, df), df)
