"""The health indicators' sufficient statistics of one partition of whole users, pure numpy.

:mod:`recsys_spark.steps.health` feeds this, one call per partition of the sliced
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
* per (slice, click count c >= 1), ``clicks_users`` rows (key: c): the users with c clicked exposures, and
  ``clicks_exposures`` rows (key: c): their exposures (:mod:`kernels.robustness`);
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
from dataclasses import dataclass
from typing import Any

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


@dataclass
class UnitSums:
    """One partition's rows reduced to its *units*, (slice, user) pairs: what :func:`slice_sums` needs.

    Every field adds up over disjoint sets of a unit's requests (a heavy user's rows split by request and
    scored in parts give the same totals once each unit's values, its (unit, category) counts and its
    (unit, item) counts are added; ``list_h`` and ``list_h2`` add as SQL sums over nulls do, NaN for none).

    * ``slice``, ``user``: each unit's codes;
    * ``values``: per unit, the per-user sums :data:`USER_SUMS` (``pv`` requests, ``covered`` / ``empty``
      / ``lists`` requests with n >= ``min_list_length`` / n = 0 / n > 0, ``exposures`` Σ n, ``clicked``,
      ``list_h`` Σ h and ``list_h2`` Σ h², NaN when no request has an item), then each measure's sum;
    * ``category_unit``, ``category``, ``category_n``: the exposures of each (unit, category);
    * ``item_unit``, ``item``, ``item_n``, ``item_listed``: the exposures of each (unit, item) and
      whether the item is in the catalog.
    """

    slice: np.ndarray
    user: np.ndarray
    values: dict[str, np.ndarray]
    category_unit: np.ndarray
    category: np.ndarray
    category_n: np.ndarray
    item_unit: np.ndarray
    item: np.ndarray
    item_n: np.ndarray
    item_listed: np.ndarray
    measures: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.slice)


#: the per-unit sums of :class:`UnitSums` before the measures
USER_SUMS = ("pv", "covered", "empty", "exposures", "clicked", "lists", "list_h", "list_h2")


def _no_units(measures: tuple[str, ...] = ()) -> UnitSums:
    ints, floats = np.array([], dtype=np.int64), np.array([], dtype=np.float64)
    values = {name: floats for name in (*USER_SUMS, *measures)}
    return UnitSums(ints, ints, values, ints, ints, floats, ints, ints, floats, np.array([], dtype=bool), measures)


def unit_sums(
    slice_code: np.ndarray,
    user_code: np.ndarray,
    request_code: np.ndarray,
    item_code: np.ndarray,
    category_code: np.ndarray,
    clicked: np.ndarray,
    in_catalog: np.ndarray,
    min_list_length: int,
    measures: Mapping[str, np.ndarray] | None = None,
) -> UnitSums:
    """The rows of one partition reduced to units (:class:`UnitSums`).

    Codes are integers, -1 for null (only ``item_code`` and ``category_code``
    may be null; a null category of an exposed item is a category of its own);
    ``clicked`` and ``in_catalog`` booleans (null as false).  ``measures``:
    name -> a number per row (finite; counted on the rows with an item only),
    summed per user.
    """
    names = tuple(measures or ())
    if len(slice_code) == 0:
        return _no_units(names)
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
    # -> (slice, user): the units
    usr, usr_first = _groups(slice_code[req_rows], user_code[req_rows])
    n_usr = len(usr_first)
    values = {
        "pv": np.bincount(usr, minlength=n_usr).astype(np.float64),
        "covered": _sum((n >= min_list_length).astype(np.float64), usr, n_usr),
        "empty": _sum((n == 0).astype(np.float64), usr, n_usr),
        "exposures": _sum(n, usr, n_usr),
        "clicked": _sum(clicked_req, usr, n_usr),
        "lists": _sum((n > 0).astype(np.float64), usr, n_usr),
        "list_h": _nansum(h, usr, n_usr),
        "list_h2": _nansum(h * h, usr, n_usr),
    }
    row_unit = usr[req[rc]]  # each row's unit
    for name, per_row in (measures or {}).items():
        per_row = np.where(exposed, np.asarray(per_row, dtype=np.float64), 0.0)
        values[name] = np.bincount(row_unit, weights=per_row, minlength=n_usr).astype(np.float64)
    unit_rows = req_rows[usr_first]
    # the exposed rows by (unit, category) and (unit, item)
    unit_of, categories, items = row_unit[exposed], category_code[exposed], item_code[exposed]
    uc, uc_first = _groups(unit_of, categories)
    ui, ui_first = _groups(unit_of, items)
    return UnitSums(
        slice_code[unit_rows].astype(np.int64),
        user_code[unit_rows].astype(np.int64),
        values,
        unit_of[uc_first].astype(np.int64),
        categories[uc_first].astype(np.int64),
        np.bincount(uc, minlength=len(uc_first)).astype(np.float64),
        unit_of[ui_first].astype(np.int64),
        items[ui_first].astype(np.int64),
        np.bincount(ui, minlength=len(ui_first)).astype(np.float64),
        np.bincount(ui, weights=in_catalog[exposed], minlength=len(ui_first)) > 0,
        names,
    )


def _rows_of(group: np.ndarray, n_groups: int, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the rows whose group is ``wanted[j]``, for each j in turn; j of each): no Python loop."""
    order = np.argsort(group, kind="stable")
    counts = np.bincount(group, minlength=n_groups)
    starts = np.cumsum(counts) - counts
    lengths = counts[wanted]
    which = np.repeat(np.arange(len(wanted)), lengths)
    offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return order[np.repeat(starts[wanted], lengths) + offsets], which


def copy_units(units: UnitSums, source: np.ndarray, slice_code: np.ndarray) -> UnitSums:
    """``units`` plus, for each j, a copy of unit ``source[j]`` (its values, categories and items) under
    ``slice_code[j]``: a unit whose rows are exactly another unit's (a user under a slice key that every one of
    its rows carries) is reduced once and copied, not reduced again."""
    source = np.asarray(source, dtype=np.int64)
    if len(source) == 0:
        return units
    n = len(units)
    cat_rows, cat_new = _rows_of(units.category_unit, n, source)
    item_rows, item_new = _rows_of(units.item_unit, n, source)
    return UnitSums(
        np.r_[units.slice, np.asarray(slice_code, dtype=np.int64)],
        np.r_[units.user, units.user[source]],
        {name: np.r_[v, v[source]] for name, v in units.values.items()},
        np.r_[units.category_unit, n + cat_new],
        np.r_[units.category, units.category[cat_rows]],
        np.r_[units.category_n, units.category_n[cat_rows]],
        np.r_[units.item_unit, n + item_new],
        np.r_[units.item, units.item[item_rows]],
        np.r_[units.item_n, units.item_n[item_rows]],
        np.r_[units.item_listed, units.item_listed[item_rows]],
        units.measures,
    )


def slice_sums(units: UnitSums) -> Columns:
    """The long rows (see the module docstring) of units: per-slice sums over the units, ``category`` and
    ``item`` rows."""
    rows: list[tuple[int, str, float]] = []  # the per-slice sums: (slice, name, value)
    parts: list[Columns] = []
    if len(units) == 0:
        return _columns(rows, parts)
    per_user = {name: units.values[name] for name in USER_SUMS}
    measured = {name: units.values[name] for name in units.measures}
    user_slice = units.slice
    for s in np.unique(user_slice):
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
    if len(units.item_unit) or len(units.category_unit):  # the heavy users' path gives categories, no items
        parts = _exposed_rows(units, rows)
    return _columns(rows, parts + _click_rows(units))


def _click_rows(units: UnitSums) -> list[Columns]:
    """The clicks-per-user histogram of each slice: ``clicks_users`` rows (key: a click count c >= 1, value:
    the units with c clicked exposures) and ``clicks_exposures`` rows (same key, value: their exposures), for
    :mod:`kernels.robustness`.  A row per distinct count, never per user."""
    clicked = np.nan_to_num(units.values["clicked"], nan=0.0)
    has = clicked > 0
    if not has.any():
        return []
    slice_code, count = units.slice[has], clicked[has].astype(np.int64)
    group, first = _groups(slice_code, count)
    users = np.bincount(group, minlength=len(first)).astype(np.float64)
    exposures = _sum(np.nan_to_num(units.values["exposures"][has], nan=0.0), group, len(first))
    return [
        _part("clicks_users", slice_code[first], count[first], users),
        _part("clicks_exposures", slice_code[first], count[first], exposures),
    ]


def partition_sums(*args: Any, **kwargs: Any) -> Columns:
    """The long rows of one partition (see the module docstring), as columns: :func:`slice_sums` of
    :func:`unit_sums`, whose arguments these are.  ``item`` rows carry ``flag``: the item is in the catalog."""
    return slice_sums(unit_sums(*args, **kwargs))


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


def _exposed_rows(units: UnitSums, rows: list[tuple[int, str, float]]) -> list[Columns]:
    """user_h / user_h2 per slice (appended to ``rows``); ``category`` and ``item`` rows, from the units'
    (unit, category) and (unit, item) counts."""
    n_units = len(units)
    # the entropy of each exposed unit's categories
    c, of_unit = units.category_n, units.category_unit
    n = _sum(c, of_unit, n_units)
    exposed = n > 0
    h = _entropy(n[exposed], _sum(_n_log_n(c), of_unit, n_units)[exposed])
    user_slice = units.slice[exposed]
    for s in np.unique(user_slice):
        hs = h[user_slice == s]
        rows += [(int(s), "user_h", float(hs.sum())), (int(s), "user_h2", float((hs * hs).sum()))]
    # exposures per (slice, category)
    category_slice = units.slice[of_unit]
    sc, sc_first = _groups(category_slice, units.category)
    categories = _part("category", category_slice[sc_first], units.category[sc_first], _sum(c, sc, len(sc_first)), None)
    # exposures and distinct users per (slice, item): a unit is one user of its slice
    item_slice = units.slice[units.item_unit]
    si, si_first = _groups(item_slice, units.item)
    exposures = _sum(units.item_n, si, len(si_first))
    users = np.bincount(si, minlength=len(si_first))
    listed = np.bincount(si, weights=units.item_listed, minlength=len(si_first)) > 0
    return [categories, _part("item", item_slice[si_first], units.item[si_first], exposures, users, listed)]
