"""The health indicators' sufficient statistics of one partition of whole users, pure numpy.

:mod:`recsys_spark.health` feeds this, one call per partition of the sliced
labelled exposures (every row of a user in one partition), the columns
``slice``, ``user_id``, ``request_id``, ``item_id`` (null: an empty
response), ``_category`` and ``clicked``, as integer codes.  It returns long
rows ``(slice code, name, key code, value, users)`` that add up over
partitions:

* per slice, sums over the partition's users (``key`` -1):

  - from the requests (a request's n = its exposed items, h = its category
    entropy ln n - Σ_c n_c ln n_c / n when n > 0):
    ``pv`` requests, ``pv_covered`` with n >= ``min_list_length``,
    ``pv_empty`` with n = 0, ``lists`` with n > 0;
  - per user u, over its requests: ``uv`` users, ``uv_covered`` / ``uv_empty``
    / ``uv_clicked`` / ``users_exposed`` users with a covered / empty request,
    a clicked exposure, an exposure; ``exposures`` Σ n, ``clicked`` Σ clicked
    exposures, ``list_h`` Σ h, ``list_h2`` Σ h²; the per-user products of
    :data:`PRODUCTS` (Σ_u x_u y_u, for the delta-method intervals) and
    ``list_hu`` = Σ_u (the user's Σ h);
  - per user, the entropy of the categories of its exposures, h_u:
    ``user_h`` Σ h_u, ``user_h2`` Σ h_u² (users with an exposure);
  - per *measure* m (the business metrics' per-exposure numbers, when given:
    ``click_events``, ``value``, ``valued``, ``dwell``, ``ev_<event>``), with
    m_u the user's sum over its exposures: ``m`` Σ m_u, ``uv_m`` users with
    m_u > 0, and the products ``m*m``, ``m*exposures``, ``m*pv`` and
    ``m*click_events`` (Σ_u m_u x_u, for the delta-method intervals);
* per (slice, category) of the exposed rows, ``category`` rows (key: the
  category code): its exposures;
* per (slice, item), ``item`` rows (key: the item code): its exposures
  (value), its distinct users (users) -- a user lives in one partition,
  so distinct users add up over partitions -- and whether it is in the
  catalog (flag).

A sum over no value (``list_h`` when no request of the slice has an item) is
NaN here, null in Spark (a SQL ``SUM`` over nulls), so that the totals keep
the meaning of :func:`kernels.health.health_values`' inputs.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

#: per-user products summed per slice for the delta-method intervals: name -> (x, y), x and y per-user sums
PRODUCTS: dict[str, tuple[str, str]] = {
    "pv*pv": ("pv", "pv"),
    "pv_covered*pv": ("covered", "pv"),
    "pv_covered*pv_covered": ("covered", "covered"),
    "pv_empty*pv": ("empty", "pv"),
    "pv_empty*pv_empty": ("empty", "empty"),
    "exposures*exposures": ("exposures", "exposures"),
    "clicked*clicked": ("clicked", "clicked"),
    "clicked*exposures": ("clicked", "exposures"),
    "clicked*pv": ("clicked", "pv"),
    "lists*lists": ("lists", "lists"),
    "list_hu*list_hu": ("list_h", "list_h"),
    "list_hu*lists": ("list_h", "lists"),
}

#: the output: columns of long rows, ``slice`` (code), ``name``, ``key`` (code, -1 for none), ``value``,
#: ``users`` (NaN but on ``item`` rows)
Columns = dict[str, np.ndarray]


def _groups(*codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group id of each row over the given code columns (integers >= -1), and the first row of each group.

    The columns are folded into one int64 key (mixed radix) when it fits, so that one 1-d ``np.unique``
    (a sort) does the grouping.
    """
    key = np.zeros(len(codes[0]), dtype=np.int64)
    radix = 1
    for c in codes:
        base = int(c.max()) + 2 if len(c) else 1  # -1 (null) .. max -> 0 .. max + 1
        radix *= base
        if radix >= 2**62:
            keys = np.stack(codes, axis=1)
            _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
            return inverse.reshape(-1), first
        key = key * base + (c.astype(np.int64) + 1)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return inverse.reshape(-1), first


def _n_log_n(n: np.ndarray) -> np.ndarray:
    """n ln n, 0 for n = 0."""
    out = np.zeros(len(n), dtype=np.float64)
    pos = n > 0
    out[pos] = n[pos] * np.log(n[pos])
    return out


def _entropy(n: np.ndarray, s: np.ndarray) -> np.ndarray:
    """ln n - s / n from n = Σ c and s = Σ c ln c; NaN when n = 0."""
    out = np.full(len(n), np.nan)
    pos = n > 0
    out[pos] = np.log(n[pos]) - s[pos] / n[pos]
    return out


def _sum(values: np.ndarray, groups: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(groups, weights=values, minlength=size).astype(np.float64)


def _nansum(values: np.ndarray, groups: np.ndarray, size: int) -> np.ndarray:
    """Σ of the non-NaN values per group; NaN for a group without any (SQL SUM over nulls)."""
    has = ~np.isnan(values)
    out = np.bincount(groups[has], weights=values[has], minlength=size).astype(np.float64)  # int64 when empty
    out[np.bincount(groups[has], minlength=size) == 0] = np.nan
    return out


def _total(values: np.ndarray) -> float:
    """Σ of the non-NaN values; NaN when there is none."""
    has = ~np.isnan(values)
    return float(values[has].sum()) if has.any() else float("nan")


def partition_sums(
    slice_code: np.ndarray,
    user_code: np.ndarray,
    request_code: np.ndarray,
    item_code: np.ndarray,
    category_code: np.ndarray,
    clicked: np.ndarray,
    in_catalog: np.ndarray,
    min_list_length: int,
    measures: Mapping[str, np.ndarray] | None = None,
) -> Columns:
    """The long rows of one partition (see the module docstring), as columns.

    Codes are integers, -1 for null (only ``item_code`` and ``category_code``
    may be null; a null category of an exposed item is a category of its own);
    ``clicked`` and ``in_catalog`` booleans (null as false).  ``item`` rows
    carry ``flag``: the item is in the catalog.  ``measures``: name -> a number
    per row (finite; counted on the rows with an item only), summed per user.
    """
    rows: list[tuple[int, str, float]] = []  # the per-slice sums: (slice, name, value)
    parts: list[Columns] = []
    if len(slice_code) == 0:
        return _columns(rows, parts)
    exposed = item_code >= 0
    # (slice, user, request, category): n items and clicked items; empty responses give n = 0
    rc, first = _groups(slice_code, user_code, request_code, category_code)
    size = len(first)
    n_rc = np.bincount(rc, weights=exposed, minlength=size)
    clicked_rc = np.bincount(rc, weights=exposed & clicked, minlength=size)
    # -> (slice, user, request)
    req, req_first = _groups(slice_code[first], user_code[first], request_code[first])
    n_req = len(req_first)
    n = _sum(n_rc, req, n_req)
    h = _entropy(n, _sum(_n_log_n(n_rc), req, n_req))
    clicked_req = _sum(clicked_rc, req, n_req)
    req_rows = first[req_first]  # a row of each request, for its slice and user
    # -> (slice, user)
    usr, usr_first = _groups(slice_code[req_rows], user_code[req_rows])
    n_usr = len(usr_first)
    per_user = {
        "pv": np.bincount(usr, minlength=n_usr).astype(np.float64),
        "covered": _sum((n >= min_list_length).astype(np.float64), usr, n_usr),
        "empty": _sum((n == 0).astype(np.float64), usr, n_usr),
        "exposures": _sum(n, usr, n_usr),
        "clicked": _sum(clicked_req, usr, n_usr),
        "lists": _sum((n > 0).astype(np.float64), usr, n_usr),
        "list_h": _nansum(h, usr, n_usr),
        "list_h2": _nansum(h * h, usr, n_usr),
    }
    measured: dict[str, np.ndarray] = {}
    if measures:
        row_user = usr[req[rc]]  # each row's (slice, user) group
        for name, values in measures.items():
            per_row = np.where(exposed, np.asarray(values, dtype=np.float64), 0.0)
            measured[name] = np.bincount(row_user, weights=per_row, minlength=n_usr).astype(np.float64)
    user_slice = slice_code[req_rows[usr_first]]
    slices = np.unique(user_slice)
    for s in slices:
        of = user_slice == s
        u = {k: v[of] for k, v in per_user.items()}
        sums = {
            "pv": u["pv"].sum(),
            "pv_covered": u["covered"].sum(),
            "pv_empty": u["empty"].sum(),
            "uv": float(of.sum()),
            "uv_covered": float((u["covered"] > 0).sum()),
            "uv_empty": float((u["empty"] > 0).sum()),
            "exposures": u["exposures"].sum(),
            "clicked": u["clicked"].sum(),
            "uv_clicked": float((u["clicked"] > 0).sum()),
            "users_exposed": float((u["exposures"] > 0).sum()),
            "lists": u["lists"].sum(),
            "list_h": _total(u["list_h"]),
            "list_h2": _total(u["list_h2"]),
        }
        filled = {k: np.nan_to_num(v, nan=0.0) for k, v in u.items()}
        for name, (a, b) in PRODUCTS.items():
            sums[name] = float(np.dot(filled[a], filled[b]))
        sums["list_hu"] = float(filled["list_h"].sum())
        sums |= _measure_sums({k: v[of] for k, v in measured.items()}, filled["exposures"], filled["pv"])
        rows += [(int(s), name, float(value)) for name, value in sums.items()]
    if exposed.any():
        parts = _exposed_rows(
            slice_code[exposed],
            user_code[exposed],
            item_code[exposed],
            category_code[exposed],
            in_catalog[exposed],
            rows,
        )
    return _columns(rows, parts)


def _measure_sums(per_user: Mapping[str, np.ndarray], exposures: np.ndarray, pv: np.ndarray) -> dict[str, float]:
    """The sums of each measure over one slice's users (see the module docstring)."""
    out: dict[str, float] = {}
    clicks = per_user.get("click_events")
    for name, m in per_user.items():
        out[name] = float(m.sum())
        out[f"uv_{name}"] = float((m > 0).sum())
        out[f"{name}*{name}"] = float(m @ m)
        out[f"{name}*exposures"] = float(m @ exposures)
        out[f"{name}*pv"] = float(m @ pv)
        if clicks is not None:
            out[f"{name}*click_events"] = float(m @ clicks)
    return out


def _columns(sums: list[tuple[int, str, float]], parts: list[Columns]) -> Columns:
    n = len(sums)
    head: Columns = {
        "slice": np.array([r[0] for r in sums], dtype=np.int64),
        "name": np.array([r[1] for r in sums], dtype=object),
        "key": np.full(n, -1, dtype=np.int64),
        "value": np.array([r[2] for r in sums], dtype=np.float64),
        "users": np.full(n, np.nan),
        "flag": np.zeros(n, dtype=bool),
    }
    return {k: np.concatenate([head[k], *(p[k] for p in parts)]) for k in head}


def _part(
    name: str,
    slice_code: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    users: np.ndarray | None = None,
    flag: np.ndarray | None = None,
) -> Columns:
    n = len(key)
    return {
        "slice": slice_code.astype(np.int64),
        "name": np.full(n, name, dtype=object),
        "key": key.astype(np.int64),
        "value": value.astype(np.float64),
        "users": np.full(n, np.nan) if users is None else users.astype(np.float64),
        "flag": np.zeros(n, dtype=bool) if flag is None else flag.astype(bool),
    }


def _exposed_rows(
    slice_code: np.ndarray,
    user_code: np.ndarray,
    item_code: np.ndarray,
    category_code: np.ndarray,
    in_catalog: np.ndarray,
    rows: list[tuple[int, str, float]],
) -> list[Columns]:
    """user_h / user_h2 per slice (appended to ``rows``); ``category`` and ``item`` rows, from the exposed rows."""
    # the entropy of each user's categories
    uc, uc_first = _groups(slice_code, user_code, category_code)
    c = np.bincount(uc, minlength=len(uc_first)).astype(np.float64)
    usr, usr_first = _groups(slice_code[uc_first], user_code[uc_first])
    n_usr = len(usr_first)
    h = _entropy(_sum(c, usr, n_usr), _sum(_n_log_n(c), usr, n_usr))
    user_slice = slice_code[uc_first[usr_first]]
    for s in np.unique(user_slice):
        hs = h[user_slice == s]
        rows += [(int(s), "user_h", float(hs.sum())), (int(s), "user_h2", float((hs * hs).sum()))]
    # exposures per (slice, category)
    sc, sc_first = _groups(slice_code, category_code)
    categories = _part(
        "category", slice_code[sc_first], category_code[sc_first], np.bincount(sc, minlength=len(sc_first)), None
    )
    # exposures and distinct users per (slice, item)
    si, si_first = _groups(slice_code, item_code)
    exposures = np.bincount(si, minlength=len(si_first))
    pairs, pairs_first = _groups(si, user_code)
    users = np.bincount(si[pairs_first], minlength=len(si_first))
    listed = np.bincount(si, weights=in_catalog, minlength=len(si_first)) > 0
    return [categories, _part("item", slice_code[si_first], item_code[si_first], exposures, users, listed)]
