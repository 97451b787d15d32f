"""Off-policy estimators from mergeable per-user sums (pure numpy; docs/ope.md has every formula).

A logged row t is one exposure: request r_t, position k_t, item a_t, reward y_t (the daily labelling's
relevance), the logging policy's propensity p_t = π_b(a_t at k_t | r_t) (optional), its probability of the
whole list ``list_propensity`` and of the list's first k_t items ``prefix_propensity`` (both optional).
The candidate gives π_e(a at k | r) for the rows it could show (absent rows are 0) and optionally a reward
model's q̂(r, a, k).  Per row::

    e_t  = π_e(a_t at k_t | r_t)                          the candidate's probability of the logged row
    w_t  = min(e_t / p_t, M)                              importance weight (M = ope.clip; no clip when 0)
    d_t  = Σ_a π_e(a at k_t | r_t) q̂(r_t, a, k_t)         the candidate's modelled reward at (r_t, k_t)
    q_t  = q̂(r_t, a_t, k_t)                               (only read where e_t > 0: elsewhere w_t = 0)

Each user u reduces their rows to the sums of :data:`SUMS`; a run is the users' sums, their count n and
the sums of the products of pairs of them (:class:`RunSums`, merged by addition).  Every estimator is a
sum of ratios of per-user sums, V = Σ_i c_i X_i / Y_i (X_i = Σ_u x_iu), so one delta-method formula gives
every interval with the **user** as the unit (:func:`estimate`)::

    ips       = Σ w y / N_p                    snips  = Σ w y / Σ w
    dm        = Σ d / N                        dr     = (Σ_p d + Σ w (y − q)) / N_p
    sndr      = Σ_p d / N_p + Σ w (y − q) / Σ w
    switch_dr = (Σ_p d + Σ 1{e/p ≤ τ} w (y − q)) / N_p
    replay    = Σ 1{e = 1} y / Σ 1{e = 1}      logged = Σ y / N

(N: rows; N_p, Σ_p: rows with a propensity.)  At the list level (one unit per request, rows in position
order, V = Σ over lists / number of lists, as obp's slate estimators)::

    slate_ips = Σ_lists W Σ_k y_k,      W = min(Π_k e_k / list_propensity, M)
    iips      = Σ_lists Σ_k min(e_k / p_k, M) y_k
    rips      = Σ_lists Σ_k min(Π_{j≤k} e_j / prefix_propensity_k, M) y_k
    logged_list = Σ_lists Σ_k y_k

The candidate's probability of a whole list (of its first k items) is the product of its position
marginals e_j: exact for a deterministic candidate and for one that fills each position independently.

>>> spec = ESTIMATORS["snips"]
>>> s = RunSums.from_users({"w_reward": np.array([2.0, 0.0]), "w": np.array([2.0, 2.0])})
>>> round(estimate(spec, s).value, 6)     # (2 + 0) / (2 + 2)
0.5
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from recsys_spark.kernels.estimates import Interval
from recsys_spark.kernels.quantiles import z_quantile
from recsys_spark.kernels.sums import non_finite

#: what each per-user sum holds (the Spark layer writes one column per name, in this order)
SUMS: dict[str, str] = {
    "rows": "logged rows (exposures with an item)",
    "reward": "Σ y over them",
    "dm": "Σ d over them",
    "mass": "Σ over them of the candidate's mass Σ_a π_e(a at k_t | r_t) at the row's request and position",
    "match": "rows whose e = 1 (the candidate shows the logged item there for sure)",
    "match_reward": "Σ y over those rows",
    "unseen": "rows whose e = 0",
    "rows_p": "rows with a propensity",
    "dm_p": "Σ d over rows with a propensity",
    "w": "Σ w",
    "w_sq": "Σ w²",
    "w_reward": "Σ w y",
    "w_residual": "Σ w (y − q) over rows with e > 0",
    "switch_residual": "Σ 1{e/p ≤ τ} w (y − q) over rows with e > 0",
    "lists": "requests with at least one logged row",
    "list_reward": "Σ over lists of Σ_k y_k",
    "lists_sips": "lists with a list propensity",
    "sips": "Σ over those lists of W Σ_k y_k",
    "lists_iips": "lists whose every row has a propensity",
    "iips": "Σ over those lists of Σ_k w_k y_k",
    "lists_rips": "lists whose every row has a prefix propensity",
    "rips": "Σ over those lists of Σ_k W_k y_k",
}

#: what an estimator needs beyond the logged rows and the candidate's probabilities
NEEDS = ("propensity", "q_hat", "deterministic", "list_propensity", "prefix_propensity")


@dataclass(frozen=True)
class Estimator:
    """V = Σ_i coefficient_i · Σ_u numerator_i / Σ_u denominator_i; ``units``: the sum counting its units."""

    name: str
    level: str  # "item" (a unit per logged row) or "list" (a unit per request)
    terms: tuple[tuple[float, str, str], ...]
    units: str
    needs: tuple[str, ...] = ()
    parameters: tuple[str, ...] = ()  # the settings it reads: "clip", "switch_tau"

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for _, num, den in self.terms for name in (num, den)))


def _e(name, level, terms, units, needs=(), parameters=()) -> Estimator:
    return Estimator(name, level, tuple(terms), units, tuple(needs), tuple(parameters))


#: every estimator, in the order of the estimates table; ``logged`` and ``logged_list`` are the logging
#: policy's observed reward (per row, per list), what the others are compared with
ESTIMATORS: dict[str, Estimator] = {
    e.name: e
    for e in (
        _e("logged", "item", [(1.0, "reward", "rows")], "rows"),
        _e("ips", "item", [(1.0, "w_reward", "rows_p")], "rows_p", ["propensity"], ["clip"]),
        _e("snips", "item", [(1.0, "w_reward", "w")], "rows_p", ["propensity"], ["clip"]),
        _e("dm", "item", [(1.0, "dm", "rows")], "rows", ["q_hat"]),
        _e(
            "dr",
            "item",
            [(1.0, "dm_p", "rows_p"), (1.0, "w_residual", "rows_p")],
            "rows_p",
            ["propensity", "q_hat"],
            ["clip"],
        ),
        _e(
            "sndr",
            "item",
            [(1.0, "dm_p", "rows_p"), (1.0, "w_residual", "w")],
            "rows_p",
            ["propensity", "q_hat"],
            ["clip"],
        ),
        _e(
            "switch_dr",
            "item",
            [(1.0, "dm_p", "rows_p"), (1.0, "switch_residual", "rows_p")],
            "rows_p",
            ["propensity", "q_hat"],
            ["clip", "switch_tau"],
        ),
        _e("replay", "item", [(1.0, "match_reward", "match")], "match", ["deterministic"]),
        _e("logged_list", "list", [(1.0, "list_reward", "lists")], "lists"),
        _e("slate_ips", "list", [(1.0, "sips", "lists_sips")], "lists_sips", ["list_propensity"], ["clip"]),
        _e("iips", "list", [(1.0, "iips", "lists_iips")], "lists_iips", ["propensity"], ["clip"]),
        _e("rips", "list", [(1.0, "rips", "lists_rips")], "lists_rips", ["prefix_propensity"], ["clip"]),
    )
}
#: the logging policy's own value at each level
BASELINE = {"item": "logged", "list": "logged_list"}


def products() -> tuple[tuple[str, str], ...]:
    """The pairs (a, b) of per-user sums whose Σ_u a_u b_u the intervals need: every pair within an
    estimator's parts and its level's baseline's (the difference to the logged value needs both)."""
    pairs: set[tuple[str, str]] = set()
    order = {name: i for i, name in enumerate(SUMS)}
    for spec in ESTIMATORS.values():
        parts = sorted(set(spec.parts) | set(ESTIMATORS[BASELINE[spec.level]].parts), key=order.__getitem__)
        pairs.update(itertools.combinations_with_replacement(parts, 2))
    return tuple(sorted(pairs, key=lambda p: (order[p[0]], order[p[1]])))


def product_name(a: str, b: str) -> str:
    """The column of Σ_u a_u b_u: ``a*b``."""
    return f"{a}*{b}"


@dataclass(frozen=True)
class RunSums:
    """A run's sufficient statistics: ``n`` users, Σ_u of every per-user sum, Σ_u of the products
    (:func:`products`), and the largest importance weight.  Merged by addition (and max)."""

    n: float
    sums: Mapping[str, float]
    prods: Mapping[tuple[str, str], float] = field(default_factory=dict)
    max_weight: float | None = None

    def sum(self, name: str) -> float:
        return float(self.sums.get(name, 0.0))

    def prod(self, a: str, b: str) -> float:
        key = (a, b) if (a, b) in self.prods else (b, a)
        return float(self.prods.get(key, 0.0))

    def merge(self, other: RunSums) -> RunSums:
        keys = set(self.sums) | set(other.sums)
        pkeys = set(self.prods) | set(other.prods)
        weights = [w for w in (self.max_weight, other.max_weight) if w is not None]
        return RunSums(
            self.n + other.n,
            {k: self.sum(k) + other.sum(k) for k in keys},
            {k: self.prods.get(k, 0.0) + other.prods.get(k, 0.0) for k in pkeys},
            max(weights) if weights else None,
        )

    @classmethod
    def from_users(cls, columns: Mapping[str, np.ndarray], max_weight: float | None = None) -> RunSums:
        """From per-user arrays (one entry per user, the same users in every array; a missing sum is 0)."""
        arrays = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}
        n = float(len(next(iter(arrays.values())))) if arrays else 0.0
        zero = np.zeros(int(n))
        full = {name: arrays.get(name, zero) for name in SUMS}
        return cls(
            n,
            {k: float(v.sum()) for k, v in full.items()},
            {(a, b): float(np.dot(full[a], full[b])) for a, b in products()},
            max_weight,
        )


@dataclass(frozen=True)
class Estimate:
    """One row of the estimates table (before the run's parameters are added)."""

    estimator: str
    level: str
    value: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str
    n: int  # users
    units: int  # the estimator's units: rows, matched rows or lists
    delta: float | None = None  # value − the logged value at the same level
    delta_se: float | None = None
    delta_ci_low: float | None = None
    delta_ci_high: float | None = None
    note: str | None = None  # why it has no interval though it has units: a sum overflowed (Interval.note)


def ratio_sum(terms: Sequence[tuple[float, str, str]], s: RunSums, confidence: float = 0.95) -> Interval:
    """V = Σ_i c_i X_i / Y_i of run sums, with the delta-method interval (the user as the unit).

    With μ_j = S_j / n the per-user means and g the gradient of V in them (∂/∂μ_{X_i} = c_i / μ_{Y_i},
    ∂/∂μ_{Y_i} = −c_i μ_{X_i} / μ_{Y_i}²), and Σ the sample (n − 1) covariance of the per-user sums::

        Var(V) ≈ gᵀ Σ g / n,    gᵀ Σ g = (Σ_jk g_j g_k P_jk − (Σ_j g_j S_j)² / n) / (n − 1)

    (P_jk = Σ_u x_ju x_ku).  For one ratio this is :attr:`kernels.sums.RatioStats.var_ratio`.  A term
    whose denominator is 0 makes V null; n < 2 gives the value without an interval; a quadratic form
    within the raw sums' rounding is 0.  A sum S_j, a product P_jk or the variance that is not finite (a
    weight of 1e156 squared) gives no interval and a :attr:`Interval.note` naming it, never se 0
    (:func:`kernels.sums.non_finite`); a value that is not finite is null.

    >>> s = RunSums(2.0, {"w_reward": 3e156, "rows_p": 2.0}, {("w_reward", "w_reward"): math.inf})
    >>> i = ratio_sum([(1.0, "w_reward", "rows_p")], s)
    >>> i.value, i.se, i.note
    (1.5e+156, None, 'Σ w_reward·w_reward = inf')
    """
    n = s.n
    if n < 1 or any(s.sum(den) == 0 for _, _, den in terms):
        return Interval.none(None)
    value = sum(c * s.sum(num) / s.sum(den) for c, num, den in terms)
    if n < 2:
        return Interval.none(value)
    grad: dict[str, float] = {}
    for c, num, den in terms:
        mu_x, mu_y = s.sum(num) / n, s.sum(den) / n
        grad[num] = grad.get(num, 0.0) + c / mu_y
        grad[den] = grad.get(den, 0.0) - c * mu_x / (mu_y * mu_y)
    names = list(grad)
    parts: dict[str, float] = {f"Σ {a}": s.sum(a) for a in names}
    parts |= {f"Σ {a}·{b}": s.prod(a, b) for i, a in enumerate(names) for b in names[i:]}
    broken = non_finite(parts)
    if broken:
        return Interval.none(value, broken)
    quad, scale = 0.0, 0.0
    for a in names:
        for b in names:
            term = grad[a] * grad[b] * s.prod(a, b)
            quad += term
            scale += abs(term)
    linear = sum(grad[a] * s.sum(a) for a in names)
    quad -= linear * linear / n
    eps = float(np.finfo(np.float64).eps)
    broken = non_finite({"the variance": quad, "Σ|gᵀPg|": scale})
    if broken:
        return Interval.none(value, broken)
    var = (quad if quad > n * eps * scale else 0.0) / (n - 1.0) / n
    se = math.sqrt(var)
    if not math.isfinite(value) or not math.isfinite(se):
        return Interval.none(value, non_finite({"the value": value, "the standard error": se}))
    half = z_quantile(confidence) * se
    return Interval(value, se, value - half, value + half, "delta")


def estimate(spec: Estimator, s: RunSums, confidence: float = 0.95) -> Estimate:
    """The estimator's value and interval, and its difference to the logged value of its level (one
    delta-method interval over both: they come from the same users)."""
    own = ratio_sum(spec.terms, s, confidence)
    base = ESTIMATORS[BASELINE[spec.level]]
    diff = ratio_sum(spec.terms + tuple((-c, num, den) for c, num, den in base.terms), s, confidence)
    same = spec.name == base.name
    return Estimate(
        spec.name,
        spec.level,
        own.value,
        own.se,
        own.ci_low,
        own.ci_high,
        own.method,
        int(s.n),
        int(round(s.sum(spec.units))),
        None if same else diff.value,
        None if same else diff.se,
        None if same else diff.ci_low,
        None if same else diff.ci_high,
        own.note or (None if same else diff.note),
    )


def estimate_all(
    s: RunSums, available: Mapping[str, bool], confidence: float = 0.95, wanted: Sequence[str] | None = None
) -> tuple[list[Estimate], list[str]]:
    """Every estimator in ``wanted`` (all by default) whose needs are ``available``; a note per one skipped.

    ``available`` maps each of :data:`NEEDS` to whether the run has it (a missing key is False).
    """
    rows: list[Estimate] = []
    notes: list[str] = []
    why = {
        "propensity": "no logged row has a propensity",
        "q_hat": "the target has no q_hat for every row the candidate shows",
        "deterministic": "the candidate is not deterministic (a probability strictly between 0 and 1)",
        "list_propensity": "no logged list has a list_propensity",
        "prefix_propensity": "no logged list has a prefix_propensity on every row",
    }
    for name in wanted or ESTIMATORS:
        spec = ESTIMATORS[name]
        missing = [need for need in spec.needs if not available.get(need, False)]
        if missing:
            notes.append(f"{name} skipped: {'; '.join(why[m] for m in missing)}")
            continue
        rows.append(estimate(spec, s, confidence))
    return rows, notes


#: the diagnostics table, in order: name -> what it is
DIAGNOSTICS: dict[str, str] = {
    "users": "users with a logged row",
    "rows": "logged rows (exposures with an item)",
    "lists": "logged requests with an item",
    "rows_without_propensity": "logged rows without a propensity (left out of the weighted estimators)",
    "effective_sample_size": "(Σ w)² / Σ w² over the rows with a propensity (Kish)",
    "effective_sample_share": "effective sample size / rows with a propensity",
    "max_weight": "largest importance weight w",
    "mean_weight": "Σ w / rows with a propensity (about 1 when the candidate lives on the logs' support)",
    "unseen_logged_share": "share of logged rows the candidate never shows (e = 0)",
    "unsupported_target_share": "share of the candidate's mass on (item, position) pairs the logs never show",
    "matched_rows": "logged rows where the candidate shows the logged item for sure (replay's units)",
    "mean_target_mass": "the candidate's mass at a logged row's request and position, on average (1: it always "
    "fills the position)",
}


def diagnostics(s: RunSums, unsupported_mass: float | None, target_mass: float | None) -> dict[str, float | None]:
    """The diagnostics of a run from its sums (``unsupported_mass``/``target_mass``: the candidate's
    probability mass on (item, position) pairs no logged row shows, and its whole mass, on the logged
    requests)."""
    rows, rows_p, w, w_sq = s.sum("rows"), s.sum("rows_p"), s.sum("w"), s.sum("w_sq")
    ess = w * w / w_sq if w_sq > 0 else None
    return {
        "users": s.n,
        "rows": rows,
        "lists": s.sum("lists"),
        "rows_without_propensity": rows - rows_p,
        "effective_sample_size": ess,
        "effective_sample_share": ess / rows_p if ess is not None and rows_p else None,
        "max_weight": s.max_weight,
        "mean_weight": w / rows_p if rows_p else None,
        "unseen_logged_share": s.sum("unseen") / rows if rows else None,
        "unsupported_target_share": (
            unsupported_mass / target_mass if unsupported_mass is not None and target_mass else None
        ),
        "matched_rows": s.sum("match"),
        "mean_target_mass": s.sum("mass") / rows if rows else None,
    }


# --------------------------------------------------------------------------- the reference, in numpy


def user_sums(
    user: np.ndarray,
    request: np.ndarray,
    position: np.ndarray,
    reward: np.ndarray,
    propensity: np.ndarray,
    list_propensity: np.ndarray,
    prefix_propensity: np.ndarray,
    e: np.ndarray,
    q: np.ndarray,
    d: np.ndarray,
    clip: float = 0.0,
    tau: float = 10.0,
    mass: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray], float | None]:
    """The per-user sums of :data:`SUMS` from logged rows, row by row (NaN = a missing propensity or q̂).

    The reference the Spark layer is tested against: ``e``, ``q``, ``d`` as in the module docstring;
    ``mass``: the candidate's mass at each row's request and position (1 by default).
    Returns (users, {sum: one value per user}, the largest weight).

    >>> users, sums, top = user_sums(np.array(["u", "u"]), np.array(["r", "r"]), np.array([1, 2]),
    ...     np.array([1.0, 0.0]), np.array([0.5, 0.5]), np.array([0.25, 0.25]), np.array([0.5, 0.25]),
    ...     np.array([1.0, 0.0]), np.array([0.3, np.nan]), np.array([0.3, 0.1]))
    >>> float(sums["w_reward"][0]), float(sums["sips"][0]), float(sums["rips"][0]), top   # 2·1; 0/0.25; 2·1
    (2.0, 0.0, 2.0, 2.0)
    """
    user = np.asarray(user).astype(str)
    request = np.asarray(request).astype(str)
    position = np.asarray(position, dtype=np.int64)
    y = np.asarray(reward, dtype=np.float64)
    p = np.asarray(propensity, dtype=np.float64)
    e = np.asarray(e, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    d = np.asarray(d, dtype=np.float64)
    mass = np.ones(len(y)) if mass is None else np.asarray(mass, dtype=np.float64)
    lp = np.asarray(list_propensity, dtype=np.float64)
    pp = np.asarray(prefix_propensity, dtype=np.float64)
    cap = clip if clip > 0 else math.inf
    has_p = ~np.isnan(p)
    raw = np.where(has_p, e / np.where(has_p, p, 1.0), 0.0)
    w = np.minimum(raw, cap)
    shown = e > 0
    residual = np.where(shown, y - np.nan_to_num(q), 0.0)
    users, index = np.unique(user, return_inverse=True)
    per = {name: np.zeros(len(users)) for name in SUMS}

    def add(name: str, values: np.ndarray, where: np.ndarray | None = None) -> None:
        v = values if where is None else np.where(where, values, 0.0)
        np.add.at(per[name], index, v)

    ones = np.ones(len(y))
    add("rows", ones)
    add("reward", y)
    add("dm", d)
    add("mass", mass)
    add("match", (e == 1.0).astype(float))
    add("match_reward", y, e == 1.0)
    add("unseen", (~shown).astype(float))
    add("rows_p", ones, has_p)
    add("dm_p", d, has_p)
    add("w", w, has_p)
    add("w_sq", w * w, has_p)
    add("w_reward", w * y, has_p)
    add("w_residual", w * residual, has_p)
    add("switch_residual", w * residual, has_p & (raw <= tau))
    lists: dict[tuple[str, str], list[int]] = {}
    for i in range(len(y)):
        lists.setdefault((user[i], request[i]), []).append(i)
    for (u, _), rows in lists.items():
        ordered = sorted(rows, key=lambda i: position[i])
        _add_list(per, int(np.searchsorted(users, u)), ordered, y, e, w, has_p, lp, pp, cap)
    top = float(w[has_p].max()) if has_p.any() else None
    return users, per, top


def _add_list(
    per: dict[str, np.ndarray],
    j: int,
    rows: list[int],
    y: np.ndarray,
    e: np.ndarray,
    w: np.ndarray,
    has_p: np.ndarray,
    lp: np.ndarray,
    pp: np.ndarray,
    cap: float,
) -> None:
    """Add one list's terms (its ``rows``, in position order) to user ``j``'s list-level sums: the list and
    its reward; W Σ y with a list propensity; Σ w y when every row has a propensity; the cascade
    Σ_k min(Π_{i≤k} e_i / prefix_propensity_k, M) y_k when every row has a prefix propensity."""
    per["lists"][j] += 1
    per["list_reward"][j] += y[rows].sum()
    if not np.isnan(lp[rows]).all():
        per["lists_sips"][j] += 1
        per["sips"][j] += min(np.prod(e[rows]) / np.nanmax(lp[rows]), cap) * y[rows].sum()
    if has_p[rows].all():
        per["lists_iips"][j] += 1
        per["iips"][j] += float(np.dot(w[rows], y[rows]))
    if not np.isnan(pp[rows]).any():
        per["lists_rips"][j] += 1
        cascade = np.minimum(np.cumprod(e[rows]) / pp[rows], cap)
        per["rips"][j] += float(np.dot(cascade, y[rows]))
