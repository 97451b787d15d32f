"""slices.py: dimensions are resolved by name, and every exposure is exploded once per slice key."""

from __future__ import annotations

import pyarrow as pa
import pytest
from chispa import assert_df_equality

from recsys_spark.errors import ConfigError, SchemaError
from recsys_spark.schema import SLICE_KEYS
from recsys_spark.slices import (
    SliceDims,
    explode_arrow,
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
    # the same rows, in the same order, when a Python pass explodes the keys in Arrow
    keyed_rows = with_slice_keys(rows, dims).select("user_id", SLICE_KEYS).collect()
    keyed = pa.table({"user_id": [r.user_id for r in keyed_rows], SLICE_KEYS: [r[SLICE_KEYS] for r in keyed_rows]})
    assert explode_arrow(keyed).to_pylist() == [dict(zip(("user_id", "slice"), e, strict=True)) for e in expected]


def test_explode_arrow_repeats_each_row_once_per_key_in_order():
    table = pa.table({"user_id": ["u1", "u2", "u3"], SLICE_KEYS: [["all", "platform=ios"], ["all"], ["all", "x=1"]]})
    got = explode_arrow(table)
    assert got.column_names == ["user_id", "slice"]
    assert got.to_pydict() == {
        "user_id": ["u1", "u1", "u2", "u3", "u3"],
        "slice": ["all", "platform=ios", "all", "all", "x=1"],
    }
    already = pa.table({"user_id": ["u1"], "slice": ["all"]})
    assert explode_arrow(already) is already  # rows without keys: as they are


@pytest.mark.spark
def test_without_dimensions_every_row_is_all(spark):
    rows = spark.createDataFrame([("u1",)], "user_id string")
    assert [r.slice for r in explode_slices(rows, SliceDims()).collect()] == ["all"]
