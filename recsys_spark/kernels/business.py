"""Business metrics of a day from its counts (pure Python).

A *clicked exposure* is a (deduplicated) exposure with at least one
attributed event named ``labels.click_event``.  With E exposures, C clicked
exposures, PV requests (empty responses included), UV users with a request
and UC users with at least one clicked exposure:

=========================  ==============  =========================
metric                     formula         n
=========================  ==============  =========================
``exposure_ctr``           C / E           E
``pv_ctr``                 C / PV          PV
``uv_ctr``                 C / UV          UV
``uv_conversion``          UC / UV         UV
``clicks_per_clicking_user``  C / UC       UC
=========================  ==============  =========================

A rate whose denominator is 0 is undefined (None), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping

#: rows: (metric, aggregation, value, n, se)
Row = tuple[str, str, float | None, int, float | None]


def business_values(stats: Mapping[str, float]) -> list[Row]:
    """The business rows (aggregation ``global``) of one slice.

    ``stats`` holds ``exposures``, ``clicked``, ``pv``, ``uv`` and
    ``uv_clicked`` (missing counts are 0).

    >>> rows = business_values({"exposures": 8, "clicked": 2, "pv": 4, "uv": 2, "uv_clicked": 1})
    >>> [m for m, *_ in rows]
    ['exposure_ctr', 'pv_ctr', 'uv_ctr', 'uv_conversion', 'clicks_per_clicking_user']
    >>> [v for _, _, v, _, _ in rows]          # 2/8, 2/4, 2/2, 1/2, 2/1
    [0.25, 0.5, 1.0, 0.5, 2.0]
    """

    def count(name: str) -> int:
        return int(stats.get(name) or 0)

    def rate(num: int, den: int) -> float | None:
        return num / den if den else None

    e, c, pv, uv, uc = (count(k) for k in ("exposures", "clicked", "pv", "uv", "uv_clicked"))
    return [
        ("exposure_ctr", "global", rate(c, e), e, None),
        ("pv_ctr", "global", rate(c, pv), pv, None),
        ("uv_ctr", "global", rate(c, uv), uv, None),
        ("uv_conversion", "global", rate(uc, uv), uv, None),
        ("clicks_per_clicking_user", "global", rate(c, uc), uc, None),
    ]
