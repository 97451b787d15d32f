"""How much a day's clicks lean on a few users (seed 002 §3.1.4.2: "PV CTR is easy to attack: a few users
contributing many clicks hide behind it"), from the histogram of clicks per user (pure numpy).

docs/metrics.md, "Robustness".  The per-user pass adds, per slice and per click count c >= 1, the clicking
users with c clicked exposures (``users_c``) and their exposures (``exposures_c``)
(:func:`kernels.health_pass.slice_sums`): a few hundred numbers a slice whatever the day's size, never a
row per user.  From them, with C = Σ_c c users_c the slice's clicked exposures and N = Σ_c users_c its
clicking users:

* ``click_concentration`` = (clicks of the ceil(0.01 N) users with the most clicks) / C.  Users tied at the
  cut are interchangeable: the share depends on their counts only, never on which of them is taken.
  One clicking user: 1.  No click: no row.
* ``clicks_gini``: the Gini coefficient of clicks over the N clicking users
  (:func:`kernels.health.gini_from_histogram`, n - 1 in the denominator so one user with every click gives 1).
  Over clicking users, not over every exposed user: with the non-clickers the Gini mostly counts them (it is
  1 - UV conversion plus the spread), which ``uv_conversion`` already says; among those who click it says
  whether a few make the clicks.  One clicking user: 0 (no inequality among one).  No click: no row.
* ``capped_ctr`` = Σ_u min(c_u, cap) / Σ_u e_u over every user of the slice (e_u its exposures, c_u its
  clicked exposures; ``metrics.click_cap``): exposure CTR with each user's clicks counted up to the cap, so
  that a user who clicks everything moves it no more than one who clicks ``cap`` times.  A ratio of
  per-user sums: its interval is the delta method's, the user as the unit, as ``exposure_ctr``'s.

The first two have no per-user form and no interval (a quantile-based share and a Gini of a histogram: no
closed form here, and the bootstrap is not wired for them).

>>> click_concentration(np.array([1.0, 50.0]), np.array([99.0, 1.0]))   # top ceil(1.0) = 1 user: 50 / 149
0.33557046979865773
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from recsys_spark.kernels.estimates import Interval, delta_interval
from recsys_spark.kernels.health import gini_from_histogram
from recsys_spark.kernels.sums import RatioStats

#: the share of clicking users whose clicks ``click_concentration`` measures
TOP_SHARE = 0.01
#: the fewest clicking users for the ``click_concentration`` rule: below 100 the top 1 % is one user, whose share
#: is at least 1 / N by arithmetic alone (the metric is written whatever N; the rule is left out)
MIN_RULE_USERS = 100


def _clicking(counts: np.ndarray, users: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(counts, dtype=np.float64)
    n = np.asarray(users, dtype=np.float64)
    keep = (c > 0) & (n > 0)
    return c[keep], n[keep]


def top_clicks(counts: np.ndarray, users: np.ndarray, top_share: float = TOP_SHARE) -> tuple[int, int]:
    """(clicks of the ceil(``top_share`` N) clicking users with the most clicks, all clicks C): the numerator
    and denominator of :func:`click_concentration` and of the ``click_concentration`` rule.

    >>> top_clicks(np.array([1.0, 50.0]), np.array([99.0, 1.0]))
    (50, 149)
    """
    c, n = _clicking(counts, users)
    total = float(np.dot(c, n))
    if total <= 0:
        return 0, 0
    top = math.ceil(top_share * float(n.sum()))
    order = np.argsort(-c, kind="stable")
    c, n = c[order], n[order]
    taken = np.minimum(n, np.maximum(top - (np.cumsum(n) - n), 0.0))  # users of each count within the top
    return int(round(float(np.dot(c, taken)))), int(round(total))


def click_concentration(counts: np.ndarray, users: np.ndarray, top_share: float = TOP_SHARE) -> float | None:
    """The share of clicks made by the ceil(``top_share`` N) clicking users with the most clicks
    (module docstring); None without a click.  ``counts``: click counts c, ``users``: users with c clicks."""
    top, total = top_clicks(counts, users, top_share)
    return top / total if total > 0 else None


def clicks_gini(counts: np.ndarray, users: np.ndarray) -> float | None:
    """The Gini of clicks over the clicking users (module docstring); None without a click."""
    c, n = _clicking(counts, users)
    if not len(c):
        return None
    return gini_from_histogram(c, n)


def capped_ctr_stats(
    counts: np.ndarray,
    users: np.ndarray,
    exposures: np.ndarray,
    cap: int,
    n_users: float,
    total_exposures: float,
    exposures_sq: float,
) -> RatioStats:
    """``capped_ctr``'s ratio of per-user sums (x_u = min(c_u, cap), y_u = e_u) over the ``n_users`` users of
    a slice, from the histogram (``exposures[j]``: the exposures of the ``users[j]`` users with ``counts[j]``
    clicks) and the slice's Σ e_u (``total_exposures``) and Σ e_u² (``exposures_sq``).  Users without a click
    add 0 to x and their exposures to y, which the slice's totals hold.

    >>> s = capped_ctr_stats(np.array([1.0, 30.0]), np.array([2.0, 1.0]), np.array([8.0, 40.0]), 10, 5, 60, 1800)
    >>> s.ratio   # (1 + 1 + 10) / 60
    0.2
    """
    c = np.asarray(counts, dtype=np.float64)
    n = np.asarray(users, dtype=np.float64)
    e = np.asarray(exposures, dtype=np.float64)
    x = np.minimum(c, float(cap))
    return RatioStats(
        float(n_users),
        float(np.dot(x, n)),
        float(total_exposures),
        float(np.dot(x * x, n)),
        float(exposures_sq),
        float(np.dot(x, e)),
    )


def robustness_values(
    histogram: Mapping[str, Mapping[float, float]],
    stats: Mapping[str, float | None],
    cap: int,
    confidence: float = 0.95,
) -> list[tuple[str, float | None, int, Interval | None]]:
    """(metric, value, n, interval) of ``click_concentration``, ``clicks_gini`` and ``capped_ctr`` (aggregation
    ``global``) of one slice, from its clicks-per-user ``histogram`` ({"clicks_users" | "clicks_exposures":
    {click count: value}}) and its sums ``stats`` (``uv``, ``exposures``, ``exposures*exposures``).  A metric
    with no value (no click; no exposure) has no row; ``n``: clicking users for the first two, users for the
    capped CTR.
    """
    users_of = histogram.get("clicks_users", {})
    counts = np.array(sorted(users_of), dtype=np.float64)
    users = np.array([users_of[c] for c in sorted(users_of)], dtype=np.float64)
    exposures_of = histogram.get("clicks_exposures", {})
    exposures = np.array([exposures_of.get(c, 0.0) for c in sorted(users_of)], dtype=np.float64)
    clicking = int(users.sum())
    out: list[tuple[str, float | None, int, Interval | None]] = []
    concentration, gini = click_concentration(counts, users), clicks_gini(counts, users)
    if concentration is not None:
        out.append(("click_concentration", concentration, clicking, None))
    if gini is not None and not math.isnan(gini):
        out.append(("clicks_gini", gini, clicking, None))
    n_users, total = float(stats.get("uv") or 0.0), float(stats.get("exposures") or 0.0)
    if total > 0:
        ratio = capped_ctr_stats(
            counts, users, exposures, cap, n_users, total, float(stats.get("exposures*exposures") or 0.0)
        )
        interval = delta_interval(ratio, confidence, ("min(clicked, cap)", "exposures"))
        out.append(("capped_ctr", interval.value, int(n_users), interval))
    return out
