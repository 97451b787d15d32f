"""Intervals of the health and business rows from per-user sums of one slice (pure Python, no Spark).

:mod:`recsys_spark.steps.health` reduces each slice to sums over its users; besides
the sums that give the values (``pv``, ``clicked``, ...), its per-user
aggregation adds the sums of squares and cross products of the per-user
numerators and denominators (names below), so every ratio of sums gets a
delta-method interval with the **user** as the unit
(:func:`kernels.estimates.delta_interval`) and every mean over users a t interval.

Per user u (``uv`` users: those with a request in the slice): pv_u requests,
covered_u requests with at least ``min_list_length`` items, empty_u empty
responses, e_u exposures, c_u clicked exposures, k_u clicks, v_u value, d_u
dwell seconds, x_u exposures with a conversion event e, l_u non-empty lists,
hl_u the sum of the category entropies of u's lists; for returning users new_u
/ items_u (and prev_u, the user's items the day before).  A mean over the users
with exposures (``gmv_per_user``) takes those users as n: the others add 0 to
every sum.

==========================================  ============================  ====================
row                                         per-user numerator / denom.   sums used
==========================================  ============================  ====================
pv_coverage global                          covered_u / pv_u              covered*pv ...
pv_failure_rate global                      empty_u / pv_u                empty*pv ...
uv_coverage, uv_failure_rate, uv_conversion 1[...] / 1                    uv_covered, uv_empty, uv_clicked
exposure_ctr, pv_ctr, uv_ctr                c_u / e_u, pv_u, 1            clicked*exposures ...
clicks_per_exposure, _request, _user        k_u / e_u, pv_u, 1            click_events*exposures ...
clicks_per_clicking_user                    k_u / 1[c_u > 0]              click_events, uv_clicked
gmv_per_exposure, gmv_per_request           v_u / e_u, pv_u               value*exposures, value*pv ...
gmv_per_user, dwell_per_user                v_u, d_u / 1 (users exposed)  value*value, dwell*dwell
value_per_converting_user                   v_u / 1[a value]              value, uv_valued
dwell_per_click                             d_u / k_u                     dwell*click_events ...
<e>_exposure_rate, <e>_user_rate            x_u / e_u, 1[x_u > 0] / 1     ev_<e>*exposures, uv_ev_<e>
category_diversity list_avg                 hl_u / l_u (÷ ln K)           list_hu*lists ...
category_diversity user_avg                 mean of h_u (÷ ln K), t       user_h, user_h2
update_rate global                          new_u / items_u               update_new*update_items ...
update_rate user_avg                        mean of new_u/items_u, t      update_sum, update_sum2
update_rate_previous global, user_avg       new_u / prev_u; its mean, t   update_new*update_prev ...
novel_item_share, novel_category_share      novel_u / items_u; mean, t    novel_item_new*novel_items ...
==========================================  ============================  ====================

Counts (pv, uv) have no interval; Gini, item coverage, personalization,
novelty and the global category diversity have no closed form in per-user
sums and get none here (``ci_method`` "none").

>>> s = {"uv": 2, "pv": 3, "pv*pv": 5, "exposures": 8, "exposures*exposures": 34, "clicked": 2,
...      "clicked*clicked": 2, "clicked*exposures": 8, "clicked*pv": 3, "uv_clicked": 2}
>>> i = business_intervals(s)[("exposure_ctr", "global")]     # users (1 click, 3 exp), (1, 5): R = 2/8
>>> i.method, i.value                                          # x - R y = 0.25, -0.25: var .125 / (2 * 4^2)
('delta', 0.25)
>>> round(i.se, 6) == round((0.125 / 32) ** 0.5, 6)
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from recsys_spark.kernels.business import CLICKS_ONLY, Measured, event_rate_names, event_sum
from recsys_spark.kernels.estimates import Interval, delta_interval, t_interval
from recsys_spark.kernels.sums import MeanStats, RatioStats

Key = tuple[str, str]  # (metric, aggregation)


def _get(stats: Mapping[str, float | None], name: str) -> float:
    return float(stats.get(name) or 0.0)


def ratio_stats(
    stats: Mapping[str, float | None],
    n: str,
    x: str,
    y: str | None,
    *,
    x_indicator: bool = False,
    y_indicator: bool = False,
    scale: float = 1.0,
) -> RatioStats:
    """RatioStats of Σx / Σy over ``n`` users from the named sums.

    ``y`` None: y_u = 1 (a mean over users).  ``x_indicator`` / ``y_indicator``:
    the per-user value is 0 or 1, so its sum of squares is its sum.  The
    product of x and y is read as ``"x*y"`` (or Σx when y is 1, or Σx when y
    indicates x > 0: then x y = x).  ``scale`` divides x (entropy by ln K).
    """

    def g(name: str) -> float:
        return _get(stats, name)

    users = g(n)
    sx = g(x)
    sxx = sx if x_indicator else g(f"{x}*{x}")
    if y is None:
        sy, syy, sxy = users, users, sx
    else:
        sy = g(y)
        syy = sy if y_indicator else g(f"{y}*{y}")
        sxy = sx if y_indicator else g(f"{x}*{y}")
    return RatioStats(users, sx / scale, sy, sxx / scale**2, syy, sxy / scale)


def health_intervals(
    stats: Mapping[str, float | None],
    n_categories: int | None,
    has_previous_day: bool,
    confidence: float = 0.95,
    has_novel: bool = False,
) -> dict[Key, Interval]:
    """{(metric, aggregation): Interval} of the health rows of one slice that have a closed form."""
    out: dict[Key, Interval] = {
        ("pv_coverage", "global"): delta_interval(ratio_stats(stats, "uv", "pv_covered", "pv"), confidence),
        ("pv_failure_rate", "global"): delta_interval(ratio_stats(stats, "uv", "pv_empty", "pv"), confidence),
        ("uv_coverage", "global"): delta_interval(
            ratio_stats(stats, "uv", "uv_covered", None, x_indicator=True), confidence
        ),
        ("uv_failure_rate", "global"): delta_interval(
            ratio_stats(stats, "uv", "uv_empty", None, x_indicator=True), confidence
        ),
    }
    if n_categories is not None:
        log_k = math.log(n_categories) if n_categories > 1 else 0.0
        if log_k:
            out[("category_diversity", "list_avg")] = delta_interval(
                ratio_stats(stats, "uv", "list_hu", "lists", scale=log_k), confidence
            )
            users = _get(stats, "users_exposed")
            out[("category_diversity", "user_avg")] = t_interval(
                MeanStats(users, _get(stats, "user_h") / log_k, _get(stats, "user_h2") / log_k**2), confidence
            )
        else:  # one category: every value is 0 by definition, no uncertainty
            for agg, n in (("list_avg", "lists"), ("user_avg", "users_exposed")):
                out[("category_diversity", agg)] = t_interval(MeanStats(_get(stats, n), 0.0, 0.0), confidence)
    if has_previous_day:
        out[("update_rate", "user_avg")] = t_interval(
            MeanStats(_get(stats, "returning"), _get(stats, "update_sum"), _get(stats, "update_sum2")), confidence
        )
        out[("update_rate", "global")] = delta_interval(
            ratio_stats(stats, "returning", "update_new", "update_items"), confidence
        )
        out[("update_rate_previous", "user_avg")] = t_interval(
            MeanStats(_get(stats, "returning"), _get(stats, "update_prev_sum"), _get(stats, "update_prev_sum2")),
            confidence,
        )
        out[("update_rate_previous", "global")] = delta_interval(
            ratio_stats(stats, "returning", "update_new", "update_prev"), confidence
        )
    if has_novel:
        users = _get(stats, "novel_users")
        for metric, part in (("novel_item_share", "novel_item"), ("novel_category_share", "novel_category")):
            if part == "novel_category" and n_categories is None:
                continue
            out[(metric, "user_avg")] = t_interval(
                MeanStats(users, _get(stats, f"{part}_sum"), _get(stats, f"{part}_sum2")), confidence
            )
            out[(metric, "global")] = delta_interval(
                ratio_stats(stats, "novel_users", f"{part}_new", "novel_items"), confidence
            )
    return out


def business_intervals(
    stats: Mapping[str, float | None], confidence: float = 0.95, measured: Measured = CLICKS_ONLY
) -> dict[Key, Interval]:
    """{(metric, "global"): Interval} of the business rows of one slice (all ratios of per-user sums).

    ``measured``: which rows the slice has (:func:`kernels.business.business_values`).  A mean over the users
    with exposures is a ratio whose denominator is 1 for each of them (n = ``users_exposed``).
    """

    def delta(n: str, x: str, y: str | None, **kw: bool) -> Interval:
        return delta_interval(ratio_stats(stats, n, x, y, **kw), confidence, (x, y or "1"))

    def per_unit(x: str, names: tuple[str, str, str, str], user_n: str, flag: str) -> dict[Key, Interval]:
        """``x`` per exposure, per request, per user (over ``user_n`` users) and per user with ``flag``, the
        indicator of x_u > 0 (so x_u 1[flag_u] = x_u: a user with a click has a clicked exposure and back, a
        user's value is 0 unless an event of it has one)."""
        per_exposure, per_request, per_user, per_flagged = names
        return {
            (per_exposure, "global"): delta("uv", x, "exposures"),
            (per_request, "global"): delta("uv", x, "pv"),
            (per_user, "global"): delta(user_n, x, None),
            (per_flagged, "global"): delta("uv", x, flag, y_indicator=True),
        }

    out = {
        ("exposure_ctr", "global"): delta("uv", "clicked", "exposures"),
        ("pv_ctr", "global"): delta("uv", "clicked", "pv"),
        ("uv_ctr", "global"): delta("uv", "clicked", None),
        ("uv_conversion", "global"): delta("uv", "uv_clicked", None, x_indicator=True),
    }
    if measured.clicks:
        clicks = ("clicks_per_exposure", "clicks_per_request", "clicks_per_user", "clicks_per_clicking_user")
        out |= per_unit("click_events", clicks, "uv", "uv_clicked")
    if measured.value:
        value = ("gmv_per_exposure", "gmv_per_request", "gmv_per_user", "value_per_converting_user")
        out |= per_unit("value", value, "users_exposed", "uv_valued")
    if measured.dwell:
        if measured.clicks:
            out[("dwell_per_click", "global")] = delta("uv", "dwell", "click_events")
        out[("dwell_per_user", "global")] = delta("users_exposed", "dwell", None)
    for event in measured.events:
        users, exposures = event_rate_names(event)
        name = event_sum(event)
        out[(users, "global")] = delta("users_exposed", f"uv_{name}", None, x_indicator=True)
        out[(exposures, "global")] = delta("uv", name, "exposures")
    return out


def overflow_notes(by_slice: Mapping[str, Mapping[Key, Interval]]) -> list[str]:
    """One note per sum that overflowed a double (:attr:`kernels.estimates.Interval.note`), naming the rows and
    slices left without an interval by it: never a standard error of 0 (docs/statistics.md).

    >>> row = {("gmv_per_user", "global"): Interval.none(None, "Σ value = inf")}
    >>> note = overflow_notes({"all": row, "platform=ios": row})[0]
    >>> note.split("; ")[0]
    'no interval for gmv_per_user (slices all, platform=ios): a sum overflows a double (Σ value = inf)'
    """
    found: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    for slice_key, intervals in by_slice.items():
        for (metric, _), interval in intervals.items():
            if interval.note:
                metrics, slices = found.setdefault(interval.note, ({}, {}))
                metrics[metric] = None
                slices[slice_key] = None
    return [
        f"no interval for {', '.join(metrics)} (slices {', '.join(slices)}): a sum overflows a double ({note}); "
        "a value that is not finite is null"
        for note, (metrics, slices) in found.items()
    ]
