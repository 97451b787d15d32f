"""Business metrics of a day from its counts (pure Python).

A *clicked exposure* is a (deduplicated) exposure with at least one
attributed event named ``labels.click_event``; a *click* is one such event
(an exposure clicked twice is one clicked exposure and two clicks).  With E
exposures, C clicked exposures, K clicks, PV requests (empty responses
included), UV users with a request, UE users with an exposure and UC users
with at least one clicked exposure; with a ``value`` on the events (V = Σ
value of the events attributed to an exposure of the day, UV_V = users with
such an event that carries a value), a ``dwell_seconds`` (D = Σ of it over
the same events) and conversion events (X_e = exposures with an attributed
event e, UX_e = users with one):

=============================  ==============  =========================
metric                         formula         n
=============================  ==============  =========================
``exposure_ctr``               C / E           E
``pv_ctr``                     C / PV          PV
``uv_ctr``                     C / UV          UV
``uv_conversion``              UC / UV         UV
``clicks_per_exposure``        K / E           E
``clicks_per_request``         K / PV          PV
``clicks_per_user``            K / UV          UV
``clicks_per_clicking_user``   K / UC          UC
``gmv_per_exposure``           V / E           E
``gmv_per_request``            V / PV          PV
``gmv_per_user``               V / UE          UE
``value_per_converting_user``  V / UV_V        UV_V
``dwell_per_click``            D / K           K
``dwell_per_user``             D / UE          UE
``<e>_exposure_rate``          X_e / E         E
``<e>_user_rate``              UX_e / UE       UE
=============================  ==============  =========================

The CTRs count clicked exposures (a share of exposures, as offline's
``observed_rate`` on the same day); the ``clicks_per_*`` rows count clicks,
the seed's 点击量 (docs/metrics.md, "The seed's definitions").  The value,
dwell and event rows are there when the labelled rows carry them
(:class:`Measured`).

A rate whose denominator is 0 is undefined (None), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from recsys_spark.schema import DWELL, EVENT_FLAG_PREFIX, N_CLICKS, VALUE

#: rows: (metric, aggregation, value, n, se)
Row = tuple[str, str, float | None, int, float | None]


@dataclass(frozen=True)
class Measured:
    """What the labelled exposures carried, so which business rows a day has: click counts (``n_clicks``),
    values, dwell times, and the conversion events (``labels.conversion_events``)."""

    clicks: bool = True
    value: bool = False
    dwell: bool = False
    events: tuple[str, ...] = ()


#: the rows a labelled day always has: the click counts (``n_clicks``), no value, no dwell, no conversion event
CLICKS_ONLY = Measured()


def measured_of(columns: Sequence[str]) -> Measured:
    """Which business rows labelled rows with these columns give: the clicks with ``n_clicks``, the value with
    ``value``, the dwell with ``dwell_seconds`` and an event per ``_ev_<event>`` flag."""
    return Measured(
        clicks=N_CLICKS in columns,
        value=VALUE in columns,
        dwell=DWELL in columns,
        events=tuple(c[len(EVENT_FLAG_PREFIX) :] for c in columns if c.startswith(EVENT_FLAG_PREFIX)),
    )


def event_rate_names(event: str) -> tuple[str, str]:
    """(users rate, exposures rate) of a conversion event: ``purchase_user_rate``, ``purchase_exposure_rate``."""
    return f"{event}_user_rate", f"{event}_exposure_rate"


def event_sum(event: str) -> str:
    """The name of an event's per-user sum in the health pass (its measure): ``ev_purchase``."""
    return f"ev_{event}"


#: (metric, numerator, denominator) of the rows every day has: the counts of ``stats`` (see the module docstring)
CTR_ROWS = (
    ("exposure_ctr", "clicked", "exposures"),
    ("pv_ctr", "clicked", "pv"),
    ("uv_ctr", "clicked", "uv"),
    ("uv_conversion", "uv_clicked", "uv"),
)
#: the rows of the clicks (``n_clicks``)
CLICK_ROWS = (
    ("clicks_per_exposure", "click_events", "exposures"),
    ("clicks_per_request", "click_events", "pv"),
    ("clicks_per_user", "click_events", "uv"),
    ("clicks_per_clicking_user", "click_events", "uv_clicked"),
)
#: the rows of the events' value
VALUE_ROWS = (
    ("gmv_per_exposure", "value", "exposures"),
    ("gmv_per_request", "value", "pv"),
    ("gmv_per_user", "value", "users_exposed"),
    ("value_per_converting_user", "value", "uv_valued"),
)


def business_values(stats: Mapping[str, float], measured: Measured = CLICKS_ONLY) -> list[Row]:
    """The business rows (aggregation ``global``) of one slice.

    ``stats`` holds ``exposures``, ``clicked``, ``pv``, ``uv``, ``uv_clicked``,
    ``users_exposed`` and, as ``measured`` says, ``click_events``, ``value``,
    ``uv_valued``, ``dwell``, ``ev_<event>`` and ``uv_ev_<event>`` (missing
    counts are 0).

    >>> rows = business_values({"exposures": 8, "clicked": 2, "click_events": 3, "pv": 4, "uv": 2,
    ...                         "uv_clicked": 1, "users_exposed": 2})
    >>> [m for m, *_ in rows][4:]
    ['clicks_per_exposure', 'clicks_per_request', 'clicks_per_user', 'clicks_per_clicking_user']
    >>> [v for _, _, v, _, _ in rows]          # 2/8, 2/4, 2/2, 1/2; 3/8, 3/4, 3/2, 3/1
    [0.25, 0.5, 1.0, 0.5, 0.375, 0.75, 1.5, 3.0]
    >>> value = business_values({"exposures": 8, "pv": 4, "users_exposed": 2, "value": 30.0, "uv_valued": 1},
    ...                         Measured(clicks=False, value=True))
    >>> [(m, v) for m, _, v, _, _ in value][4:]
    [('gmv_per_exposure', 3.75), ('gmv_per_request', 7.5), ('gmv_per_user', 15.0), ('value_per_converting_user', 30.0)]
    """

    def count(name: str) -> float:
        return float(stats.get(name) or 0)

    def ratio(metric: str, numerator: str, denominator: str) -> Row:
        num, den = count(numerator), count(denominator)
        return (metric, "global", num / den if den else None, int(den), None)

    rows = [ratio(*r) for r in CTR_ROWS]
    if measured.clicks:
        rows += [ratio(*r) for r in CLICK_ROWS]
    if measured.value:
        rows += [ratio(*r) for r in VALUE_ROWS]
    if measured.dwell:
        if measured.clicks:
            rows.append(ratio("dwell_per_click", "dwell", "click_events"))
        rows.append(ratio("dwell_per_user", "dwell", "users_exposed"))
    for event in measured.events:
        users, exposures = event_rate_names(event)
        name = event_sum(event)
        rows += [ratio(users, f"uv_{name}", "users_exposed"), ratio(exposures, name, "exposures")]
    return rows
