"""Tests of the synthetic log generator (plain pytest, no Spark)."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recsys_spark.synthetic import generate as gen

DATE = "2026-11-20"
PREVIOUS = "2026-11-19"
USERS = 3000
SEED = 11
THIRTY_MINUTES = pd.Timedelta(minutes=30)

# The job's input contract, spelled out here rather than imported from the module under test.
EXPOSURES = pa.schema(
    [
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("request_id", pa.string()),
        ("item_id", pa.string()),
        ("position", pa.int32()),
        ("score", pa.float64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("platform", pa.string()),
    ]
)
CLICKS = pa.schema(
    [
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("request_id", pa.string()),
        ("item_id", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("event", pa.string()),
        ("value", pa.float64()),
        ("dwell_seconds", pa.float64()),
    ]
)
ITEMS = pa.schema([("item_id", pa.string()), ("category", pa.string())])
USERS_SCHEMA = pa.schema([("user_id", pa.string()), ("first_seen", pa.date32()), ("country", pa.string())])


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("logs")
    gen.write_days(out, DATE, days=2, users=USERS, seed=SEED)
    return out


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return gen.write_days(tmp_path_factory.mktemp("again"), DATE, days=2, users=USERS, seed=SEED)


def _read(root: Path, name: str, date: str | None = None) -> pd.DataFrame:
    path = root / name / f"dt={date}" if date else root / name
    return pq.read_table(path).to_pandas()


@pytest.fixture(scope="module")
def exposures(root: Path) -> pd.DataFrame:
    return _read(root, "exposures", DATE)


@pytest.fixture(scope="module")
def clicks(root: Path) -> pd.DataFrame:
    return _read(root, "clicks", DATE)


@pytest.fixture(scope="module")
def shown(exposures: pd.DataFrame) -> pd.DataFrame:
    return exposures[exposures.item_id.notna()]


@pytest.fixture(scope="module")
def labelled(shown: pd.DataFrame, clicks: pd.DataFrame) -> pd.DataFrame:
    """Shown exposures with clicked = 1 when a click row names their request and item."""
    hits = clicks.loc[(clicks.event == "click") & clicks.request_id.notna(), ["request_id", "item_id"]]
    hits = hits.drop_duplicates().assign(clicked=1)
    return shown.merge(hits, on=["request_id", "item_id"], how="left").fillna({"clicked": 0})


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


# --- layout, schemas, determinism -----------------------------------------------------------
def test_layout_has_every_table_and_both_days(root: Path) -> None:
    assert sorted(_files(root)) == [
        f"clicks/dt={PREVIOUS}/part-00000.parquet",
        f"clicks/dt={DATE}/part-00000.parquet",
        f"exposures/dt={PREVIOUS}/part-00000.parquet",
        f"exposures/dt={DATE}/part-00000.parquet",
        "items/part-00000.parquet",
        "users/part-00000.parquet",
    ]


@pytest.mark.parametrize(
    "name, schema",
    [
        (f"exposures/dt={DATE}", EXPOSURES),
        (f"exposures/dt={PREVIOUS}", EXPOSURES),
        (f"clicks/dt={DATE}", CLICKS),
        ("items", ITEMS),
        ("users", USERS_SCHEMA),
    ],
)
def test_schema_is_exactly_the_contract(root: Path, name: str, schema: pa.Schema) -> None:
    written = pq.read_schema(root / name / "part-00000.parquet")
    assert written.remove_metadata().equals(schema), written


def test_same_seed_gives_byte_identical_files(tmp_path: Path) -> None:
    args = dict(date=DATE, days=2, users=300, seed=3)
    gen.write_days(tmp_path / "a", **args)
    gen.write_days(tmp_path / "b", **args)
    first, second = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert first.keys() == second.keys() and first == second
    gen.write_days(tmp_path / "c", **{**args, "seed": 4})
    other = _files(tmp_path / "c")
    assert other[f"exposures/dt={DATE}/part-00000.parquet"] != first[f"exposures/dt={DATE}/part-00000.parquet"]


def test_generate_day_returns_tables_without_disk() -> None:
    pop = gen.make_population(200, 200, seed=1, end_date=dt.date(2026, 11, 20))
    day = dt.date(2026, 11, 20)
    once, twice = gen.generate_day(pop, day, 4000, seed=1), gen.generate_day(pop, day, 4000, seed=1)
    assert once.exposures.schema.equals(EXPOSURES) and once.clicks.schema.equals(CLICKS)
    assert once.exposures.equals(twice.exposures) and once.clicks.equals(twice.clicks)
    assert once.stats["exposure_rows"] == once.exposures.num_rows
    assert gen.users_table(pop).schema.equals(USERS_SCHEMA) and gen.items_table(pop).schema.equals(ITEMS)


def test_id_formats(exposures: pd.DataFrame, clicks: pd.DataFrame) -> None:
    assert exposures.user_id.str.fullmatch(r"u\d{6}").all()
    assert exposures.item_id.dropna().str.fullmatch(r"i\d{4,}").all()
    assert exposures.request_id.str.fullmatch(r"r20261120-\d+").all()
    assert exposures.session_id.str.fullmatch(r"s20261120-\d+").all()
    assert set(exposures.platform) == {"ios", "android", "web"}
    assert set(clicks.event) == {"click", "purchase"}


# --- exposures ------------------------------------------------------------------------------
def test_exposure_volume_matches_target(summary: dict, exposures: pd.DataFrame) -> None:
    assert len(exposures) == pytest.approx(USERS * gen.EXPOSURES_PER_USER, rel=0.1)
    assert summary["days"][-1]["exposure_rows"] == len(exposures)


def test_empty_responses_are_single_rows_with_null_item_position_score(exposures: pd.DataFrame) -> None:
    empty = exposures.item_id.isna()
    assert (exposures.position.isna() == empty).all() and (exposures.score.isna() == empty).all()
    rows_per_request = exposures.groupby("request_id").size()
    assert (rows_per_request[exposures.request_id[empty]] == 1).all()
    share = empty.sum() / len(rows_per_request)
    assert 0.003 < share < 0.025
    assert exposures[["user_id", "session_id", "request_id", "ts", "platform"]].notna().all().all()


def test_request_id_identifies_one_request(exposures: pd.DataFrame) -> None:
    per_request = exposures.groupby("request_id").agg(
        users=("user_id", "nunique"),
        sessions=("session_id", "nunique"),
        stamps=("ts", "nunique"),
        platforms=("platform", "nunique"),
    )
    assert (per_request == 1).all().all()


def test_lists_have_positions_1_to_n_and_realistic_lengths(shown: pd.DataFrame) -> None:
    lengths = shown.groupby("request_id").position.agg(["size", "min", "max"])
    assert (lengths["min"] == 1).all() and (lengths["max"] == lengths["size"]).all()
    assert shown.groupby(["request_id", "position"]).size().max() == 1
    assert lengths["size"].between(5, 20).all()
    assert lengths["size"].mode()[0] == 10 and (lengths["size"] != 10).mean() > 0.05


def test_few_lists_repeat_one_item(shown: pd.DataFrame) -> None:
    copies = shown.groupby(["request_id", "item_id"]).size()
    repeated = copies[copies > 1]
    assert (repeated == 2).all()
    assert repeated.groupby(level="request_id").size().max() == 1
    assert 0.001 < repeated.size / shown.request_id.nunique() < 0.012


def test_scores_in_unit_interval_and_decreasing_along_the_list(shown: pd.DataFrame) -> None:
    assert shown.score.between(0, 1).all()
    ordered = shown.sort_values(["request_id", "position"])
    step = ordered.groupby("request_id").score.diff().dropna()
    assert (step <= 0).all()


def test_sessions_and_timestamps(root: Path, exposures: pd.DataFrame) -> None:
    assert exposures.ts.min() >= pd.Timestamp(DATE, tz="UTC")
    assert exposures.ts.max() < pd.Timestamp(DATE, tz="UTC") + pd.Timedelta(days=1)
    per_user = exposures.groupby("user_id").session_id.nunique()
    assert per_user.between(1, 3).all() and per_user.nunique() == 3
    assert exposures.groupby("session_id").user_id.nunique().max() == 1


def test_activity_is_skewed_and_popularity_is_zipf_like(shown: pd.DataFrame) -> None:
    per_user = shown.groupby("user_id").size()
    assert per_user.max() > 8 * per_user.mean()
    per_item = shown.item_id.value_counts()
    assert per_item.iloc[0] > 50 * per_item.median()
    assert per_item.iloc[:10].sum() / per_item.sum() > 0.2


# --- clicks ---------------------------------------------------------------------------------
def test_ctr_is_a_few_percent_and_follows_score_and_position(
    shown: pd.DataFrame, clicks: pd.DataFrame, labelled: pd.DataFrame
) -> None:
    ctr = (clicks.event == "click").sum() / len(shown)
    assert 0.02 < ctr < 0.07
    by_clicked = labelled.groupby("clicked").score.mean()
    assert by_clicked[1] > by_clicked[0] + 0.05
    by_position = labelled.groupby("position").clicked.mean()
    assert by_position[1] > 3 * by_position[10]
    assert by_position.loc[1:10].is_monotonic_decreasing or by_position[1] > by_position[5] > by_position[10]


def test_clicks_with_request_id_follow_their_exposure(shown: pd.DataFrame, clicks: pd.DataFrame) -> None:
    keyed = clicks[clicks.request_id.notna()]
    first = shown.groupby(["request_id", "item_id"], as_index=False).agg(
        user_id=("user_id", "first"), session_id=("session_id", "first"), shown_ts=("ts", "first")
    )
    joined = keyed.merge(first, on=["request_id", "item_id"], suffixes=("", "_exp"))
    assert (joined.user_id == joined.user_id_exp).all() and (joined.session_id == joined.session_id_exp).all()
    assert (joined.ts > joined.shown_ts).all() and (joined.ts - joined.shown_ts <= THIRTY_MINUTES).all()


def test_about_a_fifth_of_clicks_lack_request_id_and_are_attributable(
    shown: pd.DataFrame, clicks: pd.DataFrame
) -> None:
    loose = clicks[clicks.request_id.isna()].reset_index(names="click")
    assert 0.15 < len(loose) / len(clicks) < 0.25
    candidates = loose.merge(
        shown[["user_id", "session_id", "item_id", "ts"]],
        on=["user_id", "session_id", "item_id"],
        suffixes=("", "_exp"),
    )
    fits = candidates[(candidates.ts_exp <= candidates.ts) & (candidates.ts - candidates.ts_exp <= THIRTY_MINUTES)]
    assert set(fits.click) == set(loose.click)


def test_some_clicks_are_orphans(summary: dict, shown: pd.DataFrame, clicks: pd.DataFrame) -> None:
    keyed = clicks[clicks.request_id.notna()]
    pairs = shown[["request_id", "item_id"]].drop_duplicates()
    joined = keyed.merge(pairs, on=["request_id", "item_id"], how="left", indicator=True)
    orphans = int((joined._merge == "left_only").sum())
    assert orphans == summary["days"][-1]["orphan_clicks"]
    assert 0.003 < orphans / len(clicks) < 0.03
    unknown_request = ~keyed.request_id.isin(set(shown.request_id))
    assert 0 < unknown_request.sum() < orphans


def test_purchases_follow_a_click(clicks: pd.DataFrame) -> None:
    bought, clicked = clicks[clicks.event == "purchase"], clicks[clicks.event == "click"]
    assert 0.05 < len(bought) / len(clicked) < 0.15
    key = ["user_id", "session_id", "item_id"]
    pairs = bought.reset_index(names="purchase").merge(clicked, on=key, suffixes=("", "_click"))
    assert set(pairs[pairs.ts_click < pairs.ts].purchase) == set(bought.index)


def test_purchases_carry_a_value_and_clicks_a_dwell_time(summary: dict, clicks: pd.DataFrame) -> None:
    # the demo day's value metrics have something to measure: every purchase has a positive revenue (to the
    # cent) and no dwell, every click a dwell time of 1 s to 30 min and no value
    bought, clicked = clicks[clicks.event == "purchase"], clicks[clicks.event == "click"]
    assert bought.value.notna().all() and (bought.value > 0).all() and bought.dwell_seconds.isna().all()
    assert (bought.value.round(2) == bought.value).all() and 10 < bought.value.median() < 60
    assert clicked.value.isna().all() and clicked.dwell_seconds.between(1, 1800).all()
    assert 20 < clicked.dwell_seconds.median() < 50
    assert summary["days"][-1]["gmv_cents"] == round(bought.value.sum() * 100)


def test_click_timestamps_within_the_day(clicks: pd.DataFrame) -> None:
    start = pd.Timestamp(DATE, tz="UTC")
    assert clicks.ts.between(start, start + pd.Timedelta(days=1), inclusive="left").all()
    assert clicks.ts.is_monotonic_increasing


# --- catalog and users ----------------------------------------------------------------------
def test_catalog_lags_and_has_unexposed_items(root: Path, shown: pd.DataFrame) -> None:
    items = _read(root, "items")
    assert items.item_id.is_unique
    exposed = set(shown.item_id)
    missing = exposed - set(items.item_id)
    assert 0.005 < len(missing) / len(exposed) < 0.05
    assert set(items.item_id) - exposed
    shares = items.category.value_counts(normalize=True)
    assert 15 <= len(shares) <= 20 and shares.iloc[0] > 2 / 20


def test_users_table_covers_active_users(root: Path, exposures: pd.DataFrame) -> None:
    users = _read(root, "users").set_index("user_id")
    assert users.index.is_unique and len(users) == USERS
    assert set(exposures.user_id) <= set(users.index)
    first_seen = pd.to_datetime(users.loc[exposures.user_id.unique(), "first_seen"])
    assert (first_seen <= pd.Timestamp(DATE)).all()
    assert users.country.nunique() > 5


def test_consecutive_days_share_users_and_items(root: Path, exposures: pd.DataFrame) -> None:
    before = _read(root, "exposures", PREVIOUS)
    assert before.ts.max() < pd.Timestamp(DATE, tz="UTC") <= exposures.ts.min()
    assert before.request_id.str.startswith("r20261119-").all()
    common = set(before.user_id) & set(exposures.user_id)
    assert len(common) > 0.5 * exposures.user_id.nunique()
    assert len(set(before.item_id.dropna()) & set(exposures.item_id.dropna())) > 100
    assert not before[["user_id", "item_id", "score"]].equals(exposures[["user_id", "item_id", "score"]])


# --- heavy user, part files, CLI ------------------------------------------------------------
def test_heavy_user_gets_exactly_m_exposures_split_in_parts(tmp_path: Path) -> None:
    summary = gen.write_days(tmp_path, DATE, users=500, seed=5, heavy_user_exposures=20_005, max_rows_per_file=6_000)
    folder = tmp_path / "exposures" / f"dt={DATE}"
    parts = sorted(folder.glob("part-*.parquet"))
    assert len(parts) == summary["days"][0]["exposure_files"] > 1
    assert all(pq.read_metadata(p).num_rows <= 6_000 for p in parts)
    exposures = pq.read_table(folder).to_pandas()
    per_user = exposures.groupby("user_id").item_id.count()
    assert per_user.idxmax() == "u000000" and per_user["u000000"] == 20_005
    assert 0 < per_user.drop("u000000").sum() == pytest.approx(500 * gen.EXPOSURES_PER_USER, rel=0.2)


def test_cli_writes_days_and_replaces_partitions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "exposures" / f"dt={DATE}" / "part-00099.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    argv = ["--date", DATE, "--output-root", str(tmp_path), "--exposures", "6000", "--days", "3", "--seed", "2"]
    assert gen.main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["date=2026-11-18", "date=2026-11-19", "date=2026-11-20"]
    assert all("exposure_rows=" in line and "clicks=" in line for line in lines)
    assert not stale.exists()
    assert sorted(p.name for p in (tmp_path / "exposures").iterdir()) == [
        "dt=2026-11-18",
        "dt=2026-11-19",
        "dt=2026-11-20",
    ]
    assert len(pq.read_table(tmp_path / "users").to_pandas()) == 300


def test_sizes_default_from_users_or_exposures() -> None:
    assert gen.resolve_sizes(None, None, None) == (2000, 40_000, 1000)
    assert gen.resolve_sizes(None, 1_000_000, None) == (50_000, 1_000_000, 25_000)
    assert gen.resolve_sizes(100, None, None) == (100, 2000, 200)


def test_format_ids_pads_and_nulls() -> None:
    ids = gen.format_ids("i", np.array([7, 42, 1234]), 4, valid=np.array([True, False, True]))
    assert ids.type == pa.string() and ids.to_pylist() == ["i0007", None, "i1234"]
    with pytest.raises(ValueError):
        gen.format_ids("i", np.array([12345]), 4)


def test_ope_mode_logs_the_exploring_loggers_propensities_and_a_candidate(tmp_path: Path) -> None:
    summary = gen.write_days(tmp_path, DATE, days=1, users=300, seed=SEED, ope=True)
    exposures = _read(tmp_path, "exposures", DATE)
    shown = exposures[exposures.item_id.notna()]
    length = shown.groupby("request_id")["position"].transform("size").astype(int)
    assert np.allclose(shown["propensity"], 1.0 / length)
    factorial = length.map(math.factorial).astype(float)
    assert np.allclose(shown["list_propensity"], 1.0 / factorial)
    rest = (length - shown["position"].astype(int)).map(math.factorial).astype(float)
    assert np.allclose(shown["prefix_propensity"], rest / factorial)
    assert not shown.duplicated(["request_id", "item_id"]).any()  # an exploring list never repeats an item
    assert exposures.loc[exposures.item_id.isna(), "propensity"].isna().all()
    target = pq.read_table(tmp_path / "candidates" / gen.CANDIDATE / "target").to_pandas()
    assert (target["probability"] == 1.0).all() and target["q_hat"].between(0, 1).all()
    assert target.groupby("request_id")["position"].max().max() == gen.CANDIDATE_LENGTH
    # the candidate re-ranks the logged list's items: every one of its rows is a logged (request, item)
    logged = set(zip(shown["request_id"], shown["item_id"], strict=True))
    assert set(zip(target["request_id"], target["item_id"], strict=True)) <= logged
    simulated = _read(tmp_path, f"simulation/{gen.CANDIDATE}", DATE)
    assert len(simulated) == len(target)
    truth = summary["truth"]
    assert truth["candidate_per_row"] > truth["logged_per_row"] > 0.01  # it ranks the appealing items first


def test_ope_mode_leaves_the_default_logs_alone(tmp_path: Path) -> None:
    plain = gen.generate_day(
        gen.make_population(300, 200, SEED, dt.date(2026, 11, 20)), dt.date(2026, 11, 20), 3000, SEED
    )
    assert plain.target is None and plain.exposures.schema.names == EXPOSURES.names


def test_surveys_answer_a_few_questions_with_scores_that_rise_with_the_users_clicks(tmp_path: Path) -> None:
    from recsys_spark.synthetic.surveys import QUESTIONS, SURVEY_SCHEMA

    gen.main(["--date", "2026-11-20", "--output-root", str(tmp_path), "--users", "2000", "--surveys"])
    table = pq.read_table(tmp_path / "surveys" / "dt=2026-11-20")
    assert table.schema.equals(SURVEY_SCHEMA)
    survey = table.to_pandas()
    clicks = pd.read_parquet(tmp_path / "clicks" / "dt=2026-11-20").groupby("user_id").size()
    shown = set(pd.read_parquet(tmp_path / "exposures" / "dt=2026-11-20")["user_id"])
    assert set(survey["question"]) == set(QUESTIONS)
    assert set(survey["user_id"]) <= shown  # only users shown something that day answer
    assert survey["score"].between(1, 5).all() and (survey["score"] == survey["score"].round()).all()
    survey["clicks"] = survey["user_id"].map(clicks).fillna(0)
    assert survey[["score", "clicks"]].corr().iloc[0, 1] > 0.2


def test_no_survey_without_the_flag(root: Path) -> None:
    assert not (root / "surveys").exists()
