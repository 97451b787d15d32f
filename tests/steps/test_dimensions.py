"""steps/dimensions.py (issue 43 item 6): season, day_part, activity, item_age and item_new on a small
hand-built day, each value computed by hand below; and the history the daily job reads for activity."""

from __future__ import annotations

import datetime as dt

import pytest

from recsys_spark.config import load_config
from recsys_spark.config.metrics import SlicesConfig
from recsys_spark.errors import ConfigError
from recsys_spark.steps.dimensions import Activity, active_days, age_labels, day_part_of, season_of
from recsys_spark.steps.slices import SliceInputs, add_slice_columns, explode_slices, resolve_slices, slice_column

DAY = dt.date(2026, 1, 15)
EXPOSURE_DDL = "user_id string, item_id string, ts timestamp"
EXPOSURES = [
    ("u1", "i1", dt.datetime(2026, 1, 15, 7, 30)),  # morning; item of the day (age 0)
    ("u1", "i4", dt.datetime(2026, 1, 15, 5, 59)),  # night (before 06); i4 not in the items table
    ("u2", "i2", dt.datetime(2026, 1, 15, 13, 0)),  # afternoon; age 7
    ("u2", "i6", dt.datetime(2026, 1, 15, 12, 0)),  # afternoon; i6 first seen after the day
    ("u3", "i3", dt.datetime(2026, 1, 15, 19, 0)),  # evening; age 365
    ("u4", None, dt.datetime(2026, 1, 15, 23, 0)),  # night; an empty response: no item value
]
ITEMS = [
    ("i1", "A", dt.date(2026, 1, 15)),
    ("i2", "A", dt.date(2026, 1, 8)),
    ("i3", "B", dt.date(2025, 1, 15)),
    ("i5", "B", dt.date(2020, 1, 1)),
    ("i6", "B", dt.date(2026, 1, 20)),
]
#: the earlier days' users (one frame a day): u1 on 2 days, u2 on 4, u3 on 5 (twice on one), u4 on none
HISTORY = [["u1", "u2", "u3"], ["u1", "u2", "u3"], ["u2", "u3"], ["u2", "u3"], ["u3", "u3"]]
SETTINGS = SlicesConfig(
    names=("season", "day_part", "activity", "item_age", "item_new"),
    activity_window_days=6,
    activity_cuts=(2, 4),
    item_age_cuts=(7, 30, 365),
    new_item_days=7,
)


def test_the_cut_points_by_hand():
    assert [season_of(m) for m in range(1, 13)] == (
        ["winter"] * 2 + ["spring"] * 3 + ["summer"] * 3 + ["autumn"] * 3 + ["winter"]
    )
    assert [season_of(m, "south") for m in (1, 4, 7, 10)] == ["summer", "autumn", "winter", "spring"]
    assert [day_part_of(h, (5, 11, 17, 21)) for h in (4, 5, 11, 17, 21)] == [
        "night",
        "morning",
        "afternoon",
        "evening",
        "night",
    ]
    assert age_labels((7, 30, 365)) == ["0-6d", "7-29d", "30-364d", "365d+"]


def test_item_age_without_the_date_column_is_a_config_error_naming_it():
    exposure_columns = ["user_id", "item_id", "ts"]
    with pytest.raises(ConfigError, match="slices.item_date_column: slice 'item_age' needs .* 'first_seen'"):
        resolve_slices(["item_age"], exposure_columns, ["item_id", "category"], None)
    with pytest.raises(ConfigError, match="'published' \\(no items table\\)"):
        resolve_slices(["item_new"], exposure_columns, None, None, item_date_column="published")
    dims = resolve_slices(["item_new"], exposure_columns, ["item_id", "published"], None, item_date_column="published")
    assert dims.item_dims == ("item_new",)  # an empty response has no value
    # not asked for: no column needed
    assert resolve_slices(["season", "day_part", "activity"], exposure_columns, None, None).names


@pytest.mark.parametrize(
    "override, words",
    [
        ("slices.activity_cuts=[3, 28]", "slices.activity_cuts: expected two days"),
        ("slices.activity_cuts=[3]", "slices.activity_cuts: expected two days"),
        ("slices.hemisphere=east", "slices.hemisphere: expected one of north, south"),
        ("slices.day_part_hours=[6, 12, 18]", "slices.day_part_hours: expected the four hours"),
        ("slices.day_part_hours=[6, 12, 18, 25]", "slices.day_part_hours: expected strictly increasing"),
        ("slices.item_age_cuts=[]", "slices.item_age_cuts"),
        ("slices.activity_window_days=0", "slices.activity_window_days: expected a positive number"),
        ("slices.activity_window_days=400", "slices.activity_window_days: expected at most 366"),
        ("slices.new_item_days=0", "slices.new_item_days: expected a positive number"),
    ],
)
def test_bad_cut_points_are_refused_naming_the_key(override, words):
    with pytest.raises(ConfigError, match=words.replace("[", "\\[")):
        load_config(None, [override])


def _values(spark, activity, settings=SETTINGS):
    exposures = spark.createDataFrame(EXPOSURES, EXPOSURE_DDL)
    catalog = spark.createDataFrame(ITEMS, "item_id string, category string, first_seen date")
    dims = resolve_slices(settings.names, exposures.columns, catalog.columns, None)
    inputs = SliceInputs(dims, catalog, None, "items", "users", settings=settings)
    rows = add_slice_columns(exposures, inputs, DAY, 7, activity)
    names = [slice_column(n) for n in settings.names]
    got = {(r.user_id, r.item_id): tuple(r[c] for c in names) for r in rows.collect()}
    return got, explode_slices(rows, dims)


@pytest.mark.spark
def test_a_small_day_gets_the_values_computed_by_hand(spark):
    frames = [spark.createDataFrame([(u,) for u in day], "user_id string") for day in HISTORY]
    got, exploded = _values(spark, Activity(active_days(frames), len(frames), 6))
    # (season, day_part, activity, item_age, item_new)
    assert got == {
        ("u1", "i1"): ("winter", "morning", "light", "0-6d", "new"),
        ("u1", "i4"): ("winter", "night", "light", "unknown", "unknown"),
        ("u2", "i2"): ("winter", "afternoon", "medium", "7-29d", "old"),
        ("u2", "i6"): ("winter", "afternoon", "medium", "unknown", "unknown"),
        ("u3", "i3"): ("winter", "evening", "heavy", "365d+", "old"),
        ("u4", None): ("winter", "night", "new", None, None),
    }
    keys = sorted(r.slice for r in exploded.where("user_id = 'u4'").collect())
    assert keys == ["activity=new", "all", "day_part=night", "season=winter"]  # no item value, no item key


@pytest.mark.spark
def test_without_history_every_user_is_unknown_and_the_south_has_summer_in_january(spark):
    south = SlicesConfig(names=("season", "activity"), hemisphere="south")
    for activity in (None, Activity(None, 0, 28)):
        got, _ = _values(spark, activity, south)
        assert set(got.values()) == {("summer", "unknown")}


@pytest.mark.spark
def test_the_history_is_the_exposures_partitions_of_the_window(spark, tmp_path):
    from recsys_spark.daily.inputs import read_activity

    root = tmp_path / "in"
    for back, users in enumerate(HISTORY, start=1):  # the 5 days before; the window is 6: one missing
        day = DAY - dt.timedelta(days=back)
        path = root / "exposures" / f"dt={day.isoformat()}"
        rows = [(u, "x", 1, dt.datetime.combine(day, dt.time(12))) for u in users]
        frame = spark.createDataFrame(rows, "user_id string, item_id string, position int, ts timestamp")
        frame.write.parquet(str(path))
    (root / "exposures" / f"dt={(DAY - dt.timedelta(days=7)).isoformat()}").mkdir()  # outside the window
    cfg = load_config(
        None, ['slices.names=["activity"]', "slices.activity_window_days=6", "slices.activity_cuts=[2,4]"]
    )
    notes: list[str] = []
    activity = read_activity(spark, cfg, str(root), DAY, notes)
    assert (activity.found, activity.window) == (5, 6)
    assert {r.user_id: r._active_days for r in activity.days.collect()} == {"u1": 2, "u2": 4, "u3": 5}
    assert notes == ["activity: exposed days from 5 of the 6 previous days' exposures (2026-01-10..2026-01-14)"]
    empty: list[str] = []
    none = read_activity(spark, cfg, str(tmp_path / "nothing"), DAY, empty)
    assert none.days is None and none.found == 0
    assert empty == ["activity: no exposures partition in the 6 previous days; every user is unknown"]


@pytest.mark.spark
def test_the_daily_job_writes_the_new_dimensions_with_the_catalog_each_item_bucket_sees(spark, tmp_path):
    import pyarrow as pa
    from helpers import days

    root = days.day_input(tmp_path)
    previous = days.DAY - dt.timedelta(days=1)
    days.write(root / "exposures" / f"dt={previous}", [days.EXPOSURES[0]], days.EXPOSURE_SCHEMA)  # u1 only
    items = [("a", "X", dt.date(2026, 11, 18)), ("b", "X", dt.date(2026, 1, 1)), ("c", "Y", None), ("d", "Y", None)]
    schema = pa.schema([("item_id", pa.string()), ("category", pa.string()), ("first_seen", pa.date32())])
    days.write(root / "items", items, schema)
    names = '["activity", "item_age", "item_new", "season", "day_part"]'
    summary = days.run_day(spark, tmp_path, f"slices.names={names}", "slices.item_age_cuts=[7]")
    rows = spark.read.parquet(str(tmp_path / "out" / "metrics" / f"dt={days.DAY}")).collect()
    users = {r.slice: r.n for r in rows if r.metric == "ndcg" and r.aggregation == "user_avg"}
    # u1 was exposed on the one earlier day (light), u2 and u3 on none (new); noon in November
    assert users["activity=light"] == 1 and users["activity=new"] == 2
    assert users["season=autumn"] == 3 and users["day_part=afternoon"] == 3
    # a: 2 days old, b: 323, c: no date; the catalog's d (no date) counts in the unknown bucket's catalog
    coverage = {r.slice: (r.value, r.n) for r in rows if r.metric == "item_coverage"}
    assert coverage["item_age=0-6d"] == (1.0, 1) and coverage["item_age=7d+"] == (1.0, 1)
    assert coverage["item_age=unknown"] == (0.5, 2) and coverage["item_new=old"] == (1.0, 1)
    assert any(n.startswith("activity: exposed days from 1 of the 28 previous days") for n in summary["notes"])


@pytest.mark.spark
def test_an_item_date_that_is_text_not_a_date_is_unknown_not_a_failed_day(spark):
    # under ANSI mode (Spark 4's default) to_date('not a date') raised and failed the whole day
    exposures = spark.createDataFrame(EXPOSURES[:3], EXPOSURE_DDL)
    catalog = spark.createDataFrame(
        [("i1", "A", "2026-01-15"), ("i4", "A", "not a date"), ("i2", "A", "20260108")],
        "item_id string, category string, first_seen string",
    )
    settings = SlicesConfig(names=("item_age",))
    dims = resolve_slices(settings.names, exposures.columns, catalog.columns, None)
    rows = add_slice_columns(exposures, SliceInputs(dims, catalog, None, "i", "u", settings=settings), DAY, 7)
    got = {r.item_id: r[slice_column("item_age")] for r in rows.collect()}
    assert got == {"i1": "0-6d", "i4": "unknown", "i2": "unknown"}


@pytest.mark.spark
def test_a_users_first_seen_that_is_not_a_date_is_an_unknown_user_type_not_a_failed_day(spark):
    # the users table's first_seen is kept as text: under ANSI mode to_date('2026/01/10') raised
    exposures = spark.createDataFrame(EXPOSURES[:3], EXPOSURE_DDL)
    users = spark.createDataFrame(
        [("u1", "2026-01-10"), ("u2", "2026/01/10")], "user_id string, _u_first_seen string"
    ).withColumnRenamed("_u_first_seen", "first_seen")
    dims = resolve_slices(["user_type"], exposures.columns, None, users.columns)
    rows = add_slice_columns(exposures, SliceInputs(dims, None, users, "i", "u"), DAY, 7)
    assert {r.user_id: r[slice_column("user_type")] for r in rows.collect()} == {"u1": "new", "u2": "unknown"}
