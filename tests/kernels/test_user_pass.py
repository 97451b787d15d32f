"""kernels.user_pass: every slice of a partition in one call, each distinct unit scored once, against the
exploded rows scored by kernels.users.score_users and kernels.health_pass.partition_sums, and by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from recsys_spark.kernels.health_pass import copy_units, partition_sums, slice_sums, unit_sums
from recsys_spark.kernels.user_pass import PartitionRows, plan_keys, score_partition
from recsys_spark.kernels.users import score_users

KS = (1, 3)


def _rows(df: pd.DataFrame) -> PartitionRows:
    def code(col):
        return pd.Categorical(df[col]).codes.astype(np.int64)

    items = pd.Categorical(df["item"])
    return PartitionRows(
        user=code("user"),
        request=code("request"),
        list_id=code("request"),
        item=items.codes.astype(np.int64),
        item_rank=items.codes.astype(np.int64),  # categories are sorted: codes are in the ids' order
        category=code("category"),
        position=df["position"].to_numpy(dtype=np.float64),
        score=df["score"].to_numpy(dtype=np.float64),
        relevance=df["relevance"].to_numpy(dtype=np.float64),
        clicked=df["clicked"].to_numpy(dtype=bool),
        in_catalog=df["in_catalog"].to_numpy(dtype=bool),
        measures={"value": df["value"].to_numpy(dtype=np.float64)},
    )


def _keys(df: pd.DataFrame, dims: tuple[str, ...]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(slice names, all first), and the (row, key code, dimension code) of every non-null key."""
    names = ["all"]
    rows, codes, dim_codes = [], [], []
    for d, dim in enumerate(dims):
        for i, value in enumerate(df[dim]):
            if value is None:
                continue
            key = f"{dim}={value}"
            if key not in names:
                names.append(key)
            rows.append(i)
            codes.append(names.index(key))
            dim_codes.append(d)
    return names, np.array(rows, dtype=np.int64), np.array(codes, dtype=np.int64), np.array(dim_codes, dtype=np.int64)


def _exploded(df: pd.DataFrame, dims: tuple[str, ...]) -> pd.DataFrame:
    parts = [df.assign(slice="all")]
    for dim in dims:
        has = df[dim].notna()
        parts.append(df[has].assign(slice=dim + "=" + df.loc[has, dim].astype(str)))
    return pd.concat(parts, ignore_index=True)


def _random_day(seed: int, n: int = 1500) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 40, n)
    requests = users * 100 + rng.integers(0, 6, n)  # a request belongs to one user
    items = rng.integers(0, 50, n)
    empty = rng.random(n) < 0.08
    df = pd.DataFrame(
        {
            "user": [f"u{u:02d}" for u in users],
            "request": [f"r{r}" for r in requests],
            "item": [None if e else f"i{i:02d}" for i, e in zip(items, empty, strict=True)],
            "category": [None if e else f"c{i % 4}" for i, e in zip(items, empty, strict=True)],
            "position": rng.integers(1, 8, n).astype(float),
            "score": np.round(rng.random(n), 1),  # ties in score, broken by position then item
            "relevance": np.where(rng.random(n) < 0.3, 1.0, 0.0),
            "clicked": rng.random(n) < 0.2,
            "in_catalog": rng.random(n) < 0.9,
            "value": np.where(rng.random(n) < 0.1, 5.0, 0.0),
            # user level: one value per user; request level: most users on one platform, some on two
            "user_type": ["new" if u % 3 == 0 else "returning" for u in users],
            "platform": ["ios" if (u % 4 != 0 or r % 2 == 0) else "web" for u, r in zip(users, requests, strict=True)],
        }
    )
    df = df.drop_duplicates(["request", "item"]).reset_index(drop=True)  # an item once per list, as labelled
    df["popularity"] = [None if i is None else ("head" if int(i[1:]) < 10 else "tail") for i in df["item"]]
    return df


def _reference(df: pd.DataFrame, dims: tuple[str, ...]):
    exploded = _exploded(df, dims)
    exposed = exploded[exploded["item"].notna()]
    frame = pd.DataFrame(
        {
            "slice": exposed["slice"],
            "user_id": exposed["user"],
            "list_id": exposed["request"],
            "item_id": exposed["item"],
            "position": exposed["position"],
            "score": exposed["score"],
            "relevance": exposed["relevance"],
        }
    )
    users = score_users(frame, KS)
    c = {col: pd.Categorical(exploded[col]) for col in ("slice", "user", "request", "item", "category")}
    health = partition_sums(
        c["slice"].codes.astype(np.int64),
        c["user"].codes.astype(np.int64),
        c["request"].codes.astype(np.int64),
        c["item"].codes.astype(np.int64),
        c["category"].codes.astype(np.int64),
        exploded["clicked"].to_numpy(bool),
        exploded["in_catalog"].to_numpy(bool),
        2,
        {"value": exploded["value"].to_numpy(float)},
    )
    return users, _named_health(health, list(c["slice"].categories), c)


def _named_health(health, slice_names, c) -> dict:
    out = {}
    for s, name, key, value, users, flag in zip(
        *(health[k] for k in ("slice", "name", "key", "value", "users", "flag")), strict=True
    ):
        label = None
        if name == "item":
            label = c["item"].categories[key]
        elif name == "category" and key >= 0:
            label = c["category"].categories[key]
        out[(slice_names[s], name, label)] = (value, users if name == "item" else None, bool(flag))
    return out


def _ours(df: pd.DataFrame, dims: tuple[str, ...]):
    names, key_row, key_code, key_dim = _keys(df, dims)
    rows = _rows(df)
    plan = plan_keys(rows.user, key_row, key_code, key_dim)
    result = score_partition(rows, plan, KS, "exponential", 2)
    users = pd.Categorical(df["user"]).categories
    per_user = result.per_user | {
        "slice": np.asarray(names, dtype=object)[result.per_user["slice"]],
        "user_id": np.asarray(users, dtype=object)[result.per_user["user_id"]],
    }
    from recsys_spark.kernels.users import user_table

    table = user_table(per_user, result.per_k, KS)
    c = {col: pd.Categorical(df[col]) for col in ("item", "category")}
    return table, _named_health(result.health, names, c), plan


def _same_tables(a: pd.DataFrame, b: pd.DataFrame) -> None:
    key = ["slice", "user_id", "k"]
    a = a.sort_values(key).reset_index(drop=True)
    b = b.sort_values(key).reset_index(drop=True)
    assert len(a) == len(b)
    for col in a.columns:
        if col in key or a[col].dtype.kind in "iu":
            assert (a[col].to_numpy() == b[col].to_numpy()).all(), col
        else:
            np.testing.assert_allclose(b[col].to_numpy(float), a[col].to_numpy(float), rtol=1e-12, atol=0, err_msg=col)


def _same_health(a: dict, b: dict) -> None:
    assert a.keys() == b.keys(), sorted(set(a) ^ set(b), key=str)[:5]
    for k, (value, users, flag) in a.items():
        got = b[k]
        assert got[2] == flag and got[1] == users, k
        assert (np.isnan(value) and np.isnan(got[0])) or got[0] == pytest.approx(value, rel=1e-12, abs=1e-12), k


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "dims", [(), ("user_type",), ("platform",), ("popularity",), ("user_type", "platform", "popularity", "category")]
)
def test_every_slice_in_one_call_gives_what_the_exploded_rows_give(seed, dims):
    df = _random_day(seed)
    want_users, want_health = _reference(df, dims)
    got_users, got_health, _ = _ours(df, dims)
    _same_tables(want_users, got_users)
    _same_health(want_health, got_health)


def test_a_user_level_key_is_a_copy_and_an_item_level_key_is_scored_again():
    df = _random_day(0)
    rows = len(df)
    _, _, plan = _ours(df, ("user_type",))
    assert len(plan.rows) == rows and len(plan.copy_user) == df["user"].nunique()  # every user copied once
    _, _, plan = _ours(df, ("popularity",))
    exposed = int(df["item"].notna().sum())
    assert len(plan.rows) == rows + exposed and len(plan.copy_user) == 0  # each exposure once more
    _, _, plan = _ours(df, ("platform",))
    two = df.groupby("user")["platform"].nunique()
    scored_again = int(df["user"].isin(two[two > 1].index).sum())  # the rows of users seen on two platforms
    assert len(plan.rows) == rows + scored_again and len(plan.copy_user) == (two == 1).sum()


def test_copied_units_are_bit_for_bit_their_all_units():
    df = _random_day(1)
    table, health, _ = _ours(df, ("user_type",))
    everyone = table[table["slice"] == "all"].set_index(["user_id", "k"]).drop(columns="slice")
    for value in ("new", "returning"):
        sliced = table[table["slice"] == f"user_type={value}"].set_index(["user_id", "k"]).drop(columns="slice")
        pd.testing.assert_frame_equal(sliced, everyone.loc[sliced.index], check_exact=True)


def test_plan_by_hand():
    # u0: rows 0, 1 both ios (a copy); u1: row 2 ios, row 3 web (scored again); u2: row 4 no key of the
    # dimension (an empty response under an item dimension): nothing to copy or score; dimension 1 (user
    # level, key 3) on every row of u0 and u1 only
    user = np.array([0, 0, 1, 1, 2])
    key_row = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    key_code = np.array([1, 1, 1, 2, 3, 3, 3, 3])
    key_dim = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    plan = plan_keys(user, key_row, key_code, key_dim)
    assert plan.rows.tolist() == [0, 1, 2, 3, 4, 2, 3] and plan.slices.tolist() == [0, 0, 0, 0, 0, 1, 2]
    assert sorted(zip(plan.copy_user.tolist(), plan.copy_slice.tolist(), strict=True)) == [(0, 1), (0, 3), (1, 3)]
    # a user with a key on some rows only is scored again on those rows, not copied
    plan = plan_keys(np.array([0, 0]), np.array([0]), np.array([1]), np.array([0]))
    assert plan.rows.tolist() == [0, 1, 0] and plan.slices.tolist() == [0, 0, 1] and len(plan.copy_user) == 0
    # no key at all
    plan = plan_keys(np.array([0, 1]), np.array([], int), np.array([], int), np.array([], int))
    assert plan.rows.tolist() == [0, 1] and plan.slices.tolist() == [0, 0] and len(plan.copy_user) == 0


def test_unit_sums_add_up_over_requests_and_copies_move_categories_and_items():
    # one user, two requests, split in two parts by request: the parts' unit values add up to the whole's
    # (list_h as a SQL sum: NaN only when no part has one); a copy under slice 1 carries the user's categories
    # and items, so its slice sums are the all slice's
    slice_code = np.zeros(5, dtype=np.int64)
    user = np.zeros(5, dtype=np.int64)
    request = np.array([0, 0, 0, 1, 1])
    item = np.array([0, 1, 2, 0, -1])
    category = np.array([0, 0, 1, 0, -1])
    clicked = np.array([True, False, False, False, False])
    listed = np.array([True, True, False, True, False])
    whole = unit_sums(slice_code, user, request, item, category, clicked, listed, 2)
    parts = [
        unit_sums(*(a[m] for a in (slice_code, user, request, item, category, clicked, listed)), 2)
        for m in (
            request == 0,
            request == 1,
        )
    ]
    for name in whole.values:
        assert np.nansum([p.values[name][0] for p in parts]) == pytest.approx(whole.values[name][0]), name
    # by hand: r0 n = 3 (categories 0 0 1: h = ln 3 - 2 ln 2 / 3), r1 n = 1 plus an empty row: h = 0
    assert whole.values["pv"][0] == 2 and whole.values["exposures"][0] == 4 and whole.values["covered"][0] == 1
    assert whole.values["list_h"][0] == pytest.approx(np.log(3) - 2 * np.log(2) / 3)
    assert whole.category_n.tolist() == [3, 1] and whole.item_n.tolist() == [2, 1, 1]
    copied = copy_units(whole, np.array([0]), np.array([1]))
    sums = slice_sums(copied)
    by = {(s, n, k): v for s, n, k, v in zip(sums["slice"], sums["name"], sums["key"], sums["value"], strict=True)}
    assert {k[1:]: v for k, v in by.items() if k[0] == 0} == {k[1:]: v for k, v in by.items() if k[0] == 1}
    assert by[(1, "item", 0)] == 2 and by[(1, "category", 1)] == 1 and by[(1, "user_h", -1)] > 0


def test_slice_sums_without_item_units_still_give_categories_and_entropies():
    # the heavy users' path adds their (unit, item) counts in Spark and hands slice_sums the units without
    # them: the category rows and the users' entropies (category_diversity) must not depend on the items
    args = (
        np.zeros(4, dtype=np.int64),
        np.zeros(4, dtype=np.int64),
        np.array([0, 0, 1, 1]),
        np.array([0, 1, 2, 3]),
        np.array([0, 1, 0, 0]),
        np.zeros(4, dtype=bool),
        np.ones(4, dtype=bool),
        2,
    )
    whole = unit_sums(*args)
    none = np.array([], dtype=np.int64)
    no_items = dataclasses.replace(whole, item_unit=none, item=none, item_n=np.array([]), item_listed=none.astype(bool))
    with_items, without = slice_sums(whole), slice_sums(no_items)
    rows = lambda sums: {  # noqa: E731
        (n, k): v for n, k, v in zip(sums["name"], sums["key"], sums["value"], strict=True) if n != "item"
    }
    assert rows(without) == rows(with_items)
    assert rows(without)[("category", 0)] == 3 and rows(without)[("user_h", -1)] > 0
    assert "item" not in set(without["name"])
