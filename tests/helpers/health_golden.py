"""The golden day of the health / business / slice tests, with every expected value as arithmetic.

Catalog: a, b (category X), c, d (Y), e, f (Z); f is never exposed; item m is
exposed but missing from the catalog (category ``unknown``).

    u1 r1 ios   a b c d e  (+ a second copy of a: a request with duplicates)  a clicked
    u1 r2 ios   a m
    u2 r3 web   a c        (no click: platform=web has lists but no relevant one)
    u2 r4 web   empty response
    u3 r5 web   empty response (a user with only empty responses)

Previous day: u1 saw {a, b, z}; u3 saw {a}.  Clicks of the popularity window
(novelty): v1 -> a, v2 -> a, v3 -> c, v1 -> c (3 users; k_a = k_c = 2).
"""

from __future__ import annotations

import datetime as dt
import math

DAY = dt.date(2026, 11, 20)
T0 = dt.datetime(2026, 11, 20, 10, 0)

CATALOG = [("a", "X"), ("b", "X"), ("c", "Y"), ("d", "Y"), ("e", "Z"), ("f", "Z")]
# user, session, request, item, position, score, ts, platform
EXPOSURES = [
    ("u1", "s1", "r1", "a", 1, 0.9, T0, "ios"),
    ("u1", "s1", "r1", "b", 2, 0.8, T0, "ios"),
    ("u1", "s1", "r1", "c", 3, 0.7, T0, "ios"),
    ("u1", "s1", "r1", "d", 4, 0.6, T0, "ios"),
    ("u1", "s1", "r1", "e", 5, 0.5, T0, "ios"),
    ("u1", "s1", "r1", "a", 6, 0.9, T0, "ios"),
    ("u1", "s1", "r2", "a", 1, 0.9, T0, "ios"),
    ("u1", "s1", "r2", "m", 2, 0.8, T0, "ios"),
    ("u2", "s2", "r3", "a", 1, 0.9, T0, "web"),
    ("u2", "s2", "r3", "c", 2, 0.8, T0, "web"),
    ("u2", "s2", "r4", None, None, None, T0, "web"),
    ("u3", "s3", "r5", None, None, None, T0, "web"),
]
CLICKS = [("u1", "s1", "r1", "a", T0 + dt.timedelta(minutes=1))]
PREVIOUS = [("u1", "a"), ("u1", "b"), ("u1", "z"), ("u3", "a")]
POPULARITY = [("v1", "a"), ("v2", "a"), ("v3", "c"), ("v1", "c")]

# deduplicated exposure counts per item: a 3 (r1, r2, r3), c 2, b d e m 1, f 0; E = 9
LN = math.log
H_ALL = LN(9) - (4 * LN(4) + 3 * LN(3)) / 9  # categories X 4, Y 3, Z 1, unknown 1
H_R1 = LN(5) - (2 * LN(2) + 2 * LN(2)) / 5  # X 2, Y 2, Z 1
H_U1 = LN(7) - (3 * LN(3) + 2 * LN(2)) / 7  # X 3, Y 2, Z 1, unknown 1
K = 4  # X, Y, Z + unknown

EXPECTED_ALL = {
    ("pv", "global"): 5,
    ("uv", "global"): 3,
    ("pv_coverage", "global"): 1 / 5,  # only r1 has >= 5 distinct items
    ("uv_coverage", "global"): 1 / 3,
    ("pv_failure_rate", "global"): 2 / 5,  # r4, r5
    ("uv_failure_rate", "global"): 2 / 3,  # u2, u3
    ("item_coverage", "global"): 5 / 6,  # a..e of a..f
    # exposed, ascending 1 1 1 1 2 3 (n 6, T 9): (-5 - 3 - 1 + 1) * 1 + 3 * 2 + 5 * 3 = 13
    ("gini", "exposed"): 13 / (5 * 9),
    # catalog adds f = 0: 0 1 1 1 1 2 3 (n 7): (-4 - 2 + 0 + 2) * 1 + 4 * 2 + 6 * 3 = 22
    ("gini", "catalog"): 22 / (6 * 9),
    ("category_diversity", "global"): H_ALL / LN(K),
    ("category_diversity", "list_avg"): (H_R1 + LN(2) + LN(2)) / 3 / LN(K),  # r2: X, unknown; r3: X, Y
    ("category_diversity", "user_avg"): (H_U1 + LN(2)) / 2 / LN(K),
    # U = 3 clickers: log2(4) - (3 log2(3) + 2 log2(3)) / 9
    ("novelty", "global"): 2 - 5 * math.log2(3) / 9,
    # users per item a 2, c 2, b d e m 1: 1 - (2 + 2) / ((2 - 1) * 8)
    ("personalization", "global"): 0.5,
    ("update_rate", "user_avg"): 4 / 6,  # u1: c d e m are new among a b c d e m
    ("update_rate", "global"): 4 / 6,
    # the seed's dN_diff / N_last: 4 new items over the 3 (a b z) shown the day before; above 1: the list grew
    ("update_rate_previous", "user_avg"): 4 / 3,
    ("update_rate_previous", "global"): 4 / 3,
    ("exposure_ctr", "global"): 1 / 9,
    ("pv_ctr", "global"): 1 / 5,
    ("uv_ctr", "global"): 1 / 3,
    ("uv_conversion", "global"): 1 / 3,
    ("clicks_per_clicking_user", "global"): 1.0,
}
EXPECTED_WEB = {
    ("pv", "global"): 3,
    ("uv", "global"): 2,
    ("pv_coverage", "global"): 0.0,
    ("pv_failure_rate", "global"): 2 / 3,
    ("uv_failure_rate", "global"): 1.0,
    ("item_coverage", "global"): 2 / 6,
    ("gini", "exposed"): 0.0,  # a 1, c 1
    ("gini", "catalog"): (3 + 5) / (5 * 2),  # 0 0 0 0 1 1
    ("category_diversity", "global"): LN(2) / LN(K),
    ("personalization", "global"): None,  # one user with exposures: no pair
    ("update_rate", "user_avg"): None,  # u2 was not exposed the day before
    ("update_rate_previous", "user_avg"): None,
    ("exposure_ctr", "global"): 0.0,
    ("clicks_per_clicking_user", "global"): None,
}
# the catalog Lorenz curve of "all": C_i of the ascending counts 0 1 1 1 1 2 3
LORENZ_ALL = [(i / 7, c / 9) for i, c in enumerate([0, 0, 1, 2, 3, 4, 6, 9])]
