"""kernels.health_pass.partition_sums against a plain pandas reference and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from recsys_spark.kernels.health_pass import PRODUCTS, _groups, partition_sums


def _frame(rows):
    return pd.DataFrame(rows, columns=["slice", "user", "request", "item", "category", "clicked", "in_catalog"])


def _codes(df: pd.DataFrame) -> dict[str, np.ndarray]:
    def code(col):
        return pd.Categorical(df[col]).codes.astype(np.int64)  # -1 for null

    return {
        "slice_code": code("slice"),
        "user_code": code("user"),
        "request_code": code("request"),
        "item_code": code("item"),
        "category_code": code("category"),
        "clicked": df["clicked"].astype("boolean").fillna(False).to_numpy(dtype=bool),
        "in_catalog": df["in_catalog"].astype("boolean").fillna(False).to_numpy(dtype=bool),
    }


def _run(df: pd.DataFrame, min_list_length: int = 2) -> pd.DataFrame:
    out = partition_sums(**_codes(df), min_list_length=min_list_length)
    slices = pd.Categorical(df["slice"]).categories
    items = pd.Categorical(df["item"]).categories
    categories = pd.Categorical(df["category"]).categories
    got = pd.DataFrame(out)
    got["slice"] = slices[got["slice"]]
    got["key"] = [
        items[k]
        if n == "item"
        else (categories[k] if k >= 0 else None)
        if n == "category"
        else (str(k) if n.startswith("clicks_") else None)  # the clicks histogram: key a click count
        for n, k in zip(got["name"], got["key"], strict=True)
    ]
    return got


def _sums(got: pd.DataFrame, slice_value: str) -> dict[str, float]:
    return dict(got[(got["slice"] == slice_value) & got["key"].isna()][["name", "value"]].to_numpy())


# u1 r1: a(X) b(X) c(Y), a clicked; u1 r2: empty; u2 r3: a(X); u2 r4: d(Y) d(Y) (shown twice), d clicked
GOLDEN = [
    ("all", "u1", "r1", "a", "X", True, True),
    ("all", "u1", "r1", "b", "X", False, True),
    ("all", "u1", "r1", "c", "Y", False, False),
    ("all", "u1", "r2", None, None, False, None),
    ("all", "u2", "r3", "a", "X", False, True),
    ("all", "u2", "r4", "d", "Y", True, True),
    ("all", "u2", "r4", "d", "Y", False, True),
]


def test_golden_partition_by_hand():
    got = _run(_frame(GOLDEN), min_list_length=2)
    s = _sums(got, "all")
    # requests: r1 n=3 h = ln3 - (2 ln2)/3; r2 n=0; r3 n=1 h=0; r4 n=2 h=0 (one category)
    h1 = math.log(3) - 2 * math.log(2) / 3
    assert s["pv"] == 4 and s["pv_covered"] == 2 and s["pv_empty"] == 1 and s["lists"] == 3
    assert s["uv"] == 2 and s["uv_covered"] == 2 and s["uv_empty"] == 1 and s["uv_clicked"] == 2
    assert s["users_exposed"] == 2 and s["exposures"] == 6 and s["clicked"] == 2
    assert s["list_h"] == pytest.approx(h1, abs=1e-15) and s["list_h2"] == pytest.approx(h1 * h1, abs=1e-15)
    # per user: u1 pv 2, covered 1, empty 1, exposures 3, clicked 1, lists 1, list_h h1; u2 pv 2, covered 1,
    # empty 0, exposures 3, clicked 1, lists 2, list_h 0
    assert s["pv*pv"] == 8 and s["pv_covered*pv"] == 4 and s["pv_empty*pv_empty"] == 1 and s["pv_empty*pv"] == 2
    assert s["exposures*exposures"] == 18 and s["clicked*exposures"] == 6 and s["clicked*pv"] == 4
    assert s["lists*lists"] == 5 and s["list_hu*lists"] == pytest.approx(h1) and s["list_hu"] == pytest.approx(h1)
    # users' category entropies: u1 X X Y -> h1; u2 X Y Y -> h1 as well
    assert s["user_h"] == pytest.approx(2 * h1) and s["user_h2"] == pytest.approx(2 * h1 * h1)
    cats = dict(got[got["name"] == "category"][["key", "value"]].to_numpy())
    assert cats == {"X": 3, "Y": 3}
    items = got[got["name"] == "item"].set_index("key")
    assert items["value"].to_dict() == {"a": 2, "b": 1, "c": 1, "d": 2}
    assert items["users"].to_dict() == {"a": 2, "b": 1, "c": 1, "d": 1}
    assert items["flag"].to_dict() == {"a": True, "b": True, "c": False, "d": True}


def test_a_slice_without_any_exposed_item_has_null_entropy_sums():
    got = _run(_frame([("s", "u1", "r1", None, None, False, None), ("s", "u2", "r2", None, None, False, None)]))
    s = _sums(got, "s")
    assert s["pv"] == 2 and s["pv_empty"] == 2 and s["lists"] == 0 and s["exposures"] == 0
    assert math.isnan(s["list_h"]) and math.isnan(s["list_h2"])  # a SQL SUM over nulls: null
    assert s["list_hu"] == 0 and "user_h" not in s
    assert (got["name"] == "item").sum() == 0


def test_empty_partition():
    out = partition_sums(*(np.array([], dtype=np.int64) for _ in range(5)), np.array([], bool), np.array([], bool), 1)
    assert all(len(v) == 0 for v in out.values())


def _reference(df: pd.DataFrame, min_list_length: int) -> dict[str, dict[str, float]]:
    """The Spark-side definitions (the former request_pass), in plain pandas groupbys."""
    df = df.copy()
    df["exposed"] = df["item"].notna()
    df["ck"] = df["exposed"] & df["clicked"].fillna(False).astype(bool)
    out: dict[str, dict[str, float]] = {}
    for s, g in df.groupby("slice"):
        rc = g.groupby(["user", "request", g["category"].fillna("<null>")]).agg(n=("exposed", "sum"), c=("ck", "sum"))
        rc["nl"] = np.where(rc["n"] > 0, rc["n"] * np.log(rc["n"].where(rc["n"] > 0, 1)), 0.0)
        req = rc.groupby(level=[0, 1]).agg(n=("n", "sum"), s=("nl", "sum"), c=("c", "sum"))
        req["h"] = np.where(req["n"] > 0, np.log(req["n"].where(req["n"] > 0, 1)) - req["s"] / req["n"].clip(1), np.nan)
        req["h2"] = req["h"] ** 2
        users = req.groupby(level=0).agg(
            pv=("n", "size"),
            covered=("n", lambda n: (n >= min_list_length).sum()),
            empty=("n", lambda n: (n == 0).sum()),
            exposures=("n", "sum"),
            clicked=("c", "sum"),
            lists=("n", lambda n: (n > 0).sum()),
            list_h=("h", lambda h: h.sum(min_count=1)),
            list_h2=("h2", lambda h: h.sum(min_count=1)),
        )
        f = users.fillna(0.0)
        r = {
            "pv": users["pv"].sum(),
            "pv_covered": users["covered"].sum(),
            "pv_empty": users["empty"].sum(),
            "uv": len(users),
            "uv_covered": (users["covered"] > 0).sum(),
            "uv_empty": (users["empty"] > 0).sum(),
            "exposures": users["exposures"].sum(),
            "clicked": users["clicked"].sum(),
            "uv_clicked": (users["clicked"] > 0).sum(),
            "users_exposed": (users["exposures"] > 0).sum(),
            "lists": users["lists"].sum(),
            "list_h": users["list_h"].sum(min_count=1),
            "list_h2": users["list_h2"].sum(min_count=1),
            "list_hu": f["list_h"].sum(),
        }
        for name, (a, b) in PRODUCTS.items():
            r[name] = float((f[a] * f[b]).sum())
        e = g[g["exposed"]]
        if len(e):
            uc = e.groupby(["user", "category"]).size()
            un = uc.groupby(level=0).sum()
            us = (uc * np.log(uc)).groupby(level=0).sum()
            hu = np.log(un) - us / un
            r["user_h"], r["user_h2"] = hu.sum(), (hu**2).sum()
            for item, ig in e.groupby("item"):
                listed = bool(ig["in_catalog"].astype("boolean").fillna(False).any())
                r[f"item:{item}"] = (len(ig), ig["user"].nunique(), listed)
            for cat, n in e.groupby("category").size().items():
                r[f"category:{cat}"] = n
        out[str(s)] = r
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_the_pandas_reference_on_random_partitions(seed):
    rng = np.random.default_rng(seed)
    n = 3000
    items = rng.integers(0, 60, n)
    df = pd.DataFrame(
        {
            "slice": rng.choice(["all", "p=a", "p=b"], n),
            "user": rng.integers(0, 80, n).astype(str),
            "request": rng.integers(0, 400, n).astype(str),
            "item": [f"i{i}" for i in items],
            "category": [f"c{i % 7}" for i in items],
            "clicked": rng.random(n) < 0.2,
            "in_catalog": pd.array(items % 5 != 0, dtype="boolean"),
        }
    )
    empty = rng.random(n) < 0.1  # empty responses: no item, no category
    df.loc[empty, ["item", "category", "in_catalog"]] = None
    min_len = int(rng.integers(1, 4))
    got = _run(df, min_len)
    want = _reference(df, min_len)
    assert set(got["slice"]) == set(want)
    for s, ref in want.items():
        sums = _sums(got, s)
        for name, value in ref.items():
            if name.startswith("item:"):
                row = got[(got["slice"] == s) & (got["name"] == "item") & (got["key"] == name[5:])].iloc[0]
                assert (row["value"], row["users"], bool(row["flag"])) == value, (s, name)
            elif name.startswith("category:"):
                row = got[(got["slice"] == s) & (got["name"] == "category") & (got["key"] == name[9:])].iloc[0]
                assert row["value"] == value, (s, name)
            else:
                assert sums[name] == pytest.approx(value, rel=1e-12, abs=1e-12), (s, name)
        assert len(sums) == len([k for k in ref if ":" not in k]), s


def test_groups_fall_back_to_rows_when_the_folded_key_would_overflow():
    big = np.array([2**40, 0, 2**40, 5], dtype=np.int64)
    other = np.array([2**30, 1, 2**30, 1], dtype=np.int64)
    group, first = _groups(big, other)
    assert group[0] == group[2] and len(set(group.tolist())) == 3 and len(first) == 3
    small_a, small_b = np.array([0, -1, 0, 1]), np.array([-1, -1, -1, 0])
    group, first = _groups(small_a, small_b)
    assert group[0] == group[2] and len(set(group.tolist())) == 3


def test_without_an_items_table_the_null_category_is_one_category():
    # no items table: exposed items have no category; they count as one (null) category, as a SQL GROUP BY does
    rows = [("all", "u1", "r1", "a", None, False, None), ("all", "u1", "r1", "b", None, True, None)]
    got = _run(_frame(rows), min_list_length=1)
    cats = got[got["name"] == "category"]
    assert len(cats) == 1 and cats["key"].isna().all() and cats["value"].tolist() == [2]
    s = _sums(got, "all")
    assert s["list_h"] == 0 and s["user_h"] == 0 and s["clicked"] == 1
    assert got[got["name"] == "item"]["flag"].tolist() == [False, False]


def _same_partition(group: np.ndarray, first: np.ndarray, *codes: np.ndarray) -> None:
    """group / first describe the grouping of the rows by equal code tuples (pandas as the reference)."""
    frame = pd.DataFrame({f"c{i}": c for i, c in enumerate(codes)})
    want = frame.groupby(list(frame.columns), sort=True).ngroup().to_numpy()
    # the same partition of the rows, whatever the group numbering
    pairs = set(zip(group.tolist(), want.tolist(), strict=True))
    assert len(pairs) == len(set(group.tolist())) == len(set(want.tolist())), "rows grouped differently"
    assert len(first) == len(set(want.tolist()))
    assert sorted(first.tolist()) == sorted(frame.reset_index().groupby(list(frame.columns))["index"].min())
    assert (group[first] == np.arange(len(first))).all()  # first[g] is a row of group g


def test_groups_keep_keys_above_two_to_the_53_exact():
    # folded keys around 2^60: exact in int64, not in float64 (rows differing in the last column only)
    a = np.array([2**40, 2**40, 2**40, 0, 7], dtype=np.int64)
    b = np.array([1, 2, 1, 2**19, -1], dtype=np.int64)
    group, first = _groups(a, b)
    _same_partition(group, first, a, b)
    assert group[0] == group[2] != group[1]


def test_groups_fall_back_before_the_folded_key_wraps_around():
    # radix (2^32 + 1) * 2^32 is above 2^63: folded into int64, (2^32 - 1, b) would land on (-1, b)
    # ((2^32 - 1 + 1) * 2^32 = 2^64 = 0 mod 2^64); the fallback must keep them apart
    a = np.array([2**32 - 1, -1, 2**32 - 1, -1, 5], dtype=np.int64)
    b = np.array([3, 3, 2**32 - 2, 2**32 - 2, -1], dtype=np.int64)
    group, first = _groups(a, b)
    _same_partition(group, first, a, b)
    assert len(first) == 5
    # three columns whose product of radixes passes 2^62 only at the third
    c = np.array([0, 0, 1, 1, 1], dtype=np.int64)
    d = np.array([2**30, 2**30, 0, 2**30, 0], dtype=np.int64)
    e = np.array([2**31, 5, 2**31, 2**31, 2**31], dtype=np.int64)
    group, first = _groups(c, d, e)
    _same_partition(group, first, c, d, e)


@pytest.mark.parametrize("seed", [0, 1])
def test_groups_match_pandas_on_random_codes_with_nulls(seed):
    rng = np.random.default_rng(seed)
    cols = [rng.integers(-1, m, 400) for m in (3, 50, 2, 9)]
    group, first = _groups(*cols)
    _same_partition(group, first, *cols)
    group, first = _groups(cols[1])
    _same_partition(group, first, cols[1])


def _dtypes(out) -> dict[str, str]:
    return {k: str(v.dtype) for k, v in out.items()}


#: the output layout partition_pass hands to Arrow: integer slice and key codes (``take`` indices), float
#: value and users (NaN -> null), boolean flag, the names as Python strings
LAYOUT = {"slice": "int64", "name": "object", "key": "int64", "value": "float64", "users": "float64", "flag": "bool"}


def test_output_layout_and_the_defaults_of_the_non_item_rows():
    for rows in (GOLDEN, [("s", "u1", "r1", None, None, False, None)]):
        out = partition_sums(**_codes(_frame(rows)), min_list_length=2)
        assert _dtypes(out) == LAYOUT
        assert len({len(v) for v in out.values()}) == 1
        item = out["name"] == "item"
        sums = ~np.isin(out["name"], ["item", "category", "clicks_users", "clicks_exposures"])
        assert (out["key"][sums] == -1).all() and np.isnan(out["users"][~item]).all()
        assert not out["flag"][~item].any()
        assert all(type(n) is str for n in out["name"])
    empty = partition_sums(*(np.array([], dtype=np.int64) for _ in range(5)), np.array([], bool), np.array([], bool), 1)
    assert _dtypes(empty) == LAYOUT


def test_single_item_requests_null_item_rows_beside_items_and_users_without_exposures():
    # slice s: u1 r1 a(X), u1 r2 empty; u2 r3 b(X) c(Y) plus a row without an item (a null item id in a
    # non-empty response); u3 r4 empty.  slice t: u4 r5 d(Y), one item.
    rows = [
        ("s", "u1", "r1", "a", "X", True, True),
        ("s", "u1", "r2", None, None, False, None),
        ("s", "u2", "r3", "b", "X", False, True),
        ("s", "u2", "r3", "c", "Y", False, False),
        ("s", "u2", "r3", None, None, False, None),
        ("s", "u3", "r4", None, None, False, None),
        ("t", "u4", "r5", "d", "Y", False, True),
    ]
    got = _run(_frame(rows), min_list_length=2)
    s, t = _sums(got, "s"), _sums(got, "t")
    ln2 = math.log(2)
    # r1 n = 1, h = ln 1 - 0 = 0; r3 n = 2 (the null row is no exposure), X and Y: h = ln 2; r2, r4 n = 0
    assert s["pv"] == 4 and s["lists"] == 2 and s["exposures"] == 3 and s["pv_empty"] == 2 and s["pv_covered"] == 1
    assert s["uv"] == 3 and s["users_exposed"] == 2 and s["uv_empty"] == 2 and s["uv_covered"] == 1
    assert s["uv_clicked"] == 1 and s["clicked"] == 1
    assert s["list_h"] == pytest.approx(ln2) and s["list_h2"] == pytest.approx(ln2 * ln2)
    assert s["list_hu*lists"] == pytest.approx(ln2) and s["list_hu*list_hu"] == pytest.approx(ln2 * ln2)
    # users' category entropies: u1 X -> 0 (one exposure), u2 X Y -> ln 2; u3 has no exposure
    assert s["user_h"] == pytest.approx(ln2) and s["user_h2"] == pytest.approx(ln2 * ln2)
    # t: one request of one item: entropies 0, not missing
    assert t["list_h"] == 0 and t["list_h2"] == 0 and t["user_h"] == 0 and t["user_h2"] == 0
    assert t["users_exposed"] == 1 and t["uv_covered"] == 0 and t["lists"] == 1
    want = _reference(_frame(rows), 2)
    for name, value in want["s"].items():
        if ":" not in name:
            assert s[name] == pytest.approx(value, rel=1e-12, abs=1e-12), name
    items = got[got["name"] == "item"].set_index(["slice", "key"])
    assert items["value"].to_dict() == {("s", "a"): 1, ("s", "b"): 1, ("s", "c"): 1, ("t", "d"): 1}
    cats = got[got["name"] == "category"].set_index(["slice", "key"])["value"].to_dict()
    assert cats == {("s", "X"): 2, ("s", "Y"): 1, ("t", "Y"): 1}


def test_no_user_exposed_in_a_slice_counts_no_exposed_user():
    got = _run(_frame([("s", "u1", "r1", None, None, False, None), ("s", "u2", "r2", None, None, True, None)]))
    s = _sums(got, "s")
    assert s["users_exposed"] == 0 and s["uv_clicked"] == 0 and s["uv_empty"] == 2 and s["uv_covered"] == 0


def test_a_partition_of_one_row():
    got = _run(_frame(GOLDEN[:1]), min_list_length=1)
    s = _sums(got, "all")
    assert s["pv"] == 1 and s["lists"] == 1 and s["exposures"] == 1 and s["clicked"] == 1 and s["pv_covered"] == 1
    assert s["list_h"] == 0 and s["user_h"] == 0 and s["uv"] == 1
    items = got[got["name"] == "item"]
    assert items["key"].tolist() == ["a"] and items["value"].tolist() == [1] and items["flag"].tolist() == [True]


def test_groups_of_no_rows():
    group, first = _groups(np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert len(group) == 0 and len(first) == 0


@pytest.mark.parametrize("seed", [0, 1])
def test_measures_are_summed_per_user_as_pandas_does(seed):
    # the business metrics' numbers per exposure (clicks, value, a purchase flag) summed per (slice, user) by
    # pandas, then the per-slice sums, users with a positive sum and products the intervals read; an empty
    # response's numbers never count (it has no exposure)
    rng = np.random.default_rng(seed)
    n = 2000
    df = pd.DataFrame(
        {
            "slice": rng.choice(["all", "p=a"], n),
            "user": rng.integers(0, 50, n).astype(str),
            "request": rng.integers(0, 300, n).astype(str),
            "item": [f"i{i}" for i in rng.integers(0, 40, n)],
            "category": "X",
            "clicked": rng.random(n) < 0.2,
            "in_catalog": True,
        }
    )
    empty = rng.random(n) < 0.1
    df.loc[empty, ["item", "category"]] = None
    measures = {
        "click_events": rng.integers(0, 3, n).astype(float),
        "value": np.where(rng.random(n) < 0.1, rng.gamma(2.0, 20.0, n), 0.0),
        "ev_purchase": (rng.random(n) < 0.05).astype(float),
    }
    out = pd.DataFrame(partition_sums(**_codes(df), min_list_length=2, measures=measures))
    out["slice"] = pd.Categorical(df["slice"]).categories[out["slice"]]
    exposed = df["item"].notna().to_numpy()
    for s in ("all", "p=a"):
        of = (df["slice"] == s).to_numpy()
        frame = df[of][["user", "request"]].assign(**{k: np.where(exposed, v, 0.0)[of] for k, v in measures.items()})
        per_user = frame.groupby("user").agg({k: "sum" for k in measures} | {"request": "nunique"})
        exposures = df[of & exposed].groupby("user").size().reindex(per_user.index, fill_value=0).to_numpy()
        got = dict(out[(out["slice"] == s) & (out["key"] == -1)][["name", "value"]].to_numpy())
        for m in measures:
            x = per_user[m].to_numpy()
            assert got[m] == pytest.approx(x.sum()), (s, m)
            assert got[f"uv_{m}"] == (x > 0).sum(), (s, m)
            assert got[f"{m}*{m}"] == pytest.approx(x @ x), (s, m)
            assert got[f"{m}*exposures"] == pytest.approx(x @ exposures), (s, m)
            assert got[f"{m}*pv"] == pytest.approx(x @ per_user["request"].to_numpy()), (s, m)
            assert got[f"{m}*click_events"] == pytest.approx(x @ per_user["click_events"].to_numpy()), (s, m)
    # without measures nothing of theirs is written
    assert not any(str(name).startswith("value") for name in partition_sums(**_codes(df), min_list_length=2)["name"])


def test_the_seeds_strict_coverage_is_ours_at_one_item_more():
    # the seed's COV_pv = N*_{l>c} / N*_pv counts lists longer than c; pv_coverage counts lists of at least
    # health.min_list_length distinct items: the same count at min_list_length = c + 1 (docs/metrics.md, "The
    # seed's definitions"). Lists of 3, 4 and 5 distinct items and an empty response, c = 4: one list, not two
    rows = [("all", "u1", "r1", f"i{i}", "X", False, True) for i in range(3)]
    rows += [("all", "u1", "r2", f"i{i}", "X", False, True) for i in range(4)]
    rows += [("all", "u2", "r3", f"i{i}", "X", False, True) for i in range(5)]
    rows += [("all", "u2", "r4", None, None, False, None)]
    c = 4
    strict = sum(n > c for n in (3, 4, 5, 0))
    got = _sums(_run(_frame(rows), min_list_length=c + 1), "all")
    assert got["pv_covered"] == strict == 1 and got["uv_covered"] == 1
    assert _sums(_run(_frame(rows), min_list_length=c), "all")["pv_covered"] == 2  # ">= c" would count r2 too
