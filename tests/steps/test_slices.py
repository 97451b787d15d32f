"""slices.py: dimensions are resolved by name, and every exposure is exploded once per slice key."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality

from recsys_spark.errors import ConfigError, SchemaError
from recsys_spark.schema import SLICE_KEYS
from recsys_spark.steps.slices import (
    SliceDims,
    explode_slices,
    resolve_slices,
    slice_column,
    with_slice_keys,
)

EXPOSURE_COLUMNS = ["user_id", "session_id", "request_id", "item_id", "position", "score", "ts", "platform"]


def test_names_resolve_to_derived_exposure_item_and_user_dimensions():
    dims = resolve_slices(
        ["hour", "platform", "category", "country", "user_type"],
        EXPOSURE_COLUMNS,
        ["item_id", "category"],
        ["user_id", "first_seen", "country"],
    )
    assert (dims.exposure, dims.item, dims.user) == (("platform",), ("category",), ("country",))
    assert dims.needs_users and dims.item_dims == ("category",)


def test_an_unknown_name_or_an_id_column_is_an_error_naming_it():
    with pytest.raises(SchemaError, match="slice 'colour' is not a derived slice .* nor a column of the exposures"):
        resolve_slices(["colour"], EXPOSURE_COLUMNS, None, None)
    with pytest.raises(ConfigError, match="'user_id' is an id column"):
        resolve_slices(["user_id"], EXPOSURE_COLUMNS, None, None)
    with pytest.raises(SchemaError, match="'user_type' needs a users table"):
        resolve_slices(["user_type"], EXPOSURE_COLUMNS, None, None)


@pytest.mark.spark
def test_explode_gives_all_plus_one_row_per_non_null_dimension_value(spark):
    rows = spark.createDataFrame(
        [("u1", "a", "ios", "X"), ("u2", None, "web", None)],
        f"user_id string, item_id string, {slice_column('platform')} string, {slice_column('category')} string",
    )
    dims = SliceDims(("platform", "category"), ("platform",), ("category",))
    got = explode_slices(rows, dims)
    # u2 is an empty response: no category, so no category row
    expected = [("u1", "all"), ("u1", "platform=ios"), ("u1", "category=X"), ("u2", "all"), ("u2", "platform=web")]
    assert_df_equality(
        got.select("user_id", "slice"),
        spark.createDataFrame(expected, "user_id string, slice string"),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    # the same keys, in the same order, as the array the one Python pass reads (all first)
    keyed = with_slice_keys(rows, dims).select("user_id", SLICE_KEYS).collect()
    assert [(r.user_id, k) for r in keyed for k in r[SLICE_KEYS]] == expected


@pytest.mark.spark
def test_without_dimensions_every_row_is_all(spark):
    rows = spark.createDataFrame([("u1",)], "user_id string")
    assert [r.slice for r in explode_slices(rows, SliceDims()).collect()] == ["all"]


@pytest.mark.spark
def test_a_day_whose_item_counts_may_not_be_broadcast_joins_them_by_item_with_the_same_numbers(
    spark, tmp_path, monkeypatch
):
    # the popularity counts are broadcast back to the persisted rows when the session's broadcast threshold allows;
    # with it at -1 (no broadcast) the rows are joined by item (slices.moves_rows) and persisted partitioned by user
    # a second time: every table the same
    import subprocess
    import sys

    import pandas as pd

    from recsys_spark.config import load_config
    from recsys_spark.daily import evaluate_day, stages

    date = "2026-11-20"
    subprocess.run(
        [sys.executable, "-m", "recsys_spark.synthetic.generate", "--date", date, "--output-root", str(tmp_path / "in")]
        + ["--users", "60", "--days", "1", "--seed", "3"],
        check=True,
        capture_output=True,
    )
    cfg = load_config(None, ['slices.names=["popularity", "platform"]', "rules.fail_on_hard=false", "metrics.k=[3]"])
    day = dt.date.fromisoformat(date)
    persisted = []
    persist = stages.persist_user_rows
    monkeypatch.setattr(stages, "persist_user_rows", lambda *a: persisted.append(1) or persist(*a))
    key = "spark.sql.autoBroadcastJoinThreshold"
    before = spark.conf.get(key)
    for run, threshold in (("broadcast", before), ("joined", "-1")):
        spark.conf.set(key, threshold)
        try:
            evaluate_day(spark, cfg, day, str(tmp_path / "in"), str(tmp_path / run))
        finally:
            spark.conf.set(key, before)
    assert persisted == [1, 1, 1]  # once on the first day, twice on the second
    for table, key in (
        ("metrics", ["slice", "metric", "k", "aggregation"]),
        ("user_metrics", ["slice", "user_id", "k"]),
    ):
        a, b = (pd.read_parquet(tmp_path / run / table / f"dt={date}") for run in ("broadcast", "joined"))
        assert len(a) > 0 and {s for s in a["slice"] if s.startswith("popularity=")} == {
            "popularity=head",
            "popularity=mid",
            "popularity=tail",
        }
        a, b = (f.sort_values(key).reset_index(drop=True) for f in (a, b))
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12, atol=1e-12)
