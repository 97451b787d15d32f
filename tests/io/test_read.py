"""read.py: reading a partition and bringing it to the contract's columns and types, or one clear error."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality
from helpers.input_ddl import CLICK_DDL, DAY, T0

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.errors import EmptyInputError, MissingInputError, SchemaError, UnreadableInputError
from recsys_spark.io.read import conform, read_parquet
from recsys_spark.schema import EXPOSURE_COLUMNS, input_ddl

pytestmark = pytest.mark.spark

CLICKS = [("u1", "s1", "r1", "b", T0)]


def test_conform_casts_to_the_contract_and_keeps_only_what_is_asked(spark):
    raw = spark.createDataFrame(
        [
            (7, "s", 3, 11, 2.0, "2026-11-20 10:00:00", "ios", "extra"),
            (8, "s", 4, 12, 2.5, "not a time", "web", "extra"),
        ],
        "user_id long, session_id string, request_id int, item_id long, position double, ts string, "
        "platform string, other string",
    )
    got = conform(raw, EXPOSURE_COLUMNS, "exposures", keep=["platform"])
    # ids become strings; a whole float position becomes an int, 2.5 null (validation sets it aside); an
    # unparsable ts becomes null; the optional score is absent and stays absent; "other" is dropped
    expected = spark.createDataFrame(
        [("7", "s", "3", "11", 2, dt.datetime(2026, 11, 20, 10, 0), "ios"), ("8", "s", "4", "12", None, None, "web")],
        "user_id string, session_id string, request_id string, item_id string, position int, ts timestamp, "
        "platform string",
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_missing_optional_column_is_left_out_and_a_missing_kept_column_is_named(spark):
    raw = spark.createDataFrame(
        [("u", "s", "r", "a", 1, T0)],
        "user_id string, session_id string, request_id string, item_id string, position int, ts timestamp",
    )
    assert "score" not in conform(raw, EXPOSURE_COLUMNS, "exposures").columns
    with pytest.raises(SchemaError, match="missing column 'platform' in exposures \\(named in the config\\)"):
        conform(raw, EXPOSURE_COLUMNS, "exposures", keep=["platform"])


def test_read_parquet_names_a_missing_or_empty_path(spark, tmp_path):
    with pytest.raises(MissingInputError, match=f"missing input exposures partition: {tmp_path}/nope"):
        read_parquet(spark, f"{tmp_path}/nope", "exposures partition", {})
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmptyInputError, match="no Parquet files"):
        read_parquet(spark, f"{tmp_path}/empty", "exposures partition", {})
    spark.createDataFrame(CLICKS, CLICK_DDL).write.parquet(f"{tmp_path}/ok")
    assert read_parquet(spark, f"{tmp_path}/ok", "clicks", {}).count() == 1


@pytest.mark.parametrize(
    "ddl, rows, error, needle",
    [
        (
            "user_id string, session_id string, request_id string, position int, ts timestamp",
            [("u", "s", "r", 1, T0)],
            SchemaError,
            "missing column 'item_id'",
        ),
        (
            "user_id string, session_id string, request_id string, item_id string, position string, ts timestamp",
            [("u", "s", "r", "a", "first", T0)],
            SchemaError,
            "column 'position'",
        ),
        (
            "user_id array<string>, session_id string, request_id string, item_id string, position int, ts timestamp",
            [(["u"], "s", "r", "a", 1, T0)],
            SchemaError,
            "column 'user_id'",
        ),
    ],
)
def test_bad_schema_names_the_column_and_the_job_writes_nothing(spark, tmp_path, ddl, rows, error, needle):
    spark.createDataFrame(rows, ddl).write.parquet(f"{tmp_path}/in/exposures/dt={DAY}")
    spark.createDataFrame(CLICKS, CLICK_DDL).write.parquet(f"{tmp_path}/in/clicks/dt={DAY}")
    with pytest.raises(error, match=needle):
        evaluate_day(spark, load_config(), DAY, f"{tmp_path}/in", f"{tmp_path}/out")
    assert not (tmp_path / "out").exists()


def test_corrupt_and_empty_partitions_are_named_and_the_job_writes_nothing(spark, tmp_path):
    spark.createDataFrame(CLICKS, CLICK_DDL).write.parquet(f"{tmp_path}/in/clicks/dt={DAY}")
    exposures = tmp_path / "in" / "exposures" / f"dt={DAY}"
    exposures.mkdir(parents=True)
    with pytest.raises(EmptyInputError, match="exposures"):
        evaluate_day(spark, load_config(), DAY, f"{tmp_path}/in", f"{tmp_path}/out")
    (exposures / "part-00000.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(UnreadableInputError, match=str(exposures)):
        evaluate_day(spark, load_config(), DAY, f"{tmp_path}/in", f"{tmp_path}/out")
    assert not (tmp_path / "out").exists()


def test_the_tests_ddl_is_the_contract():
    assert input_ddl(EXPOSURE_COLUMNS) == (
        "user_id string, session_id string, request_id string, item_id string, position int, score double, ts timestamp"
    )


# --- inputs as teams have them (issue 42) -------------------------------------------------------------------------
def test_a_single_parquet_file_is_read_as_its_directory_would_be(spark, tmp_path):
    # ope.target and every input location may name one file: it was listed as a directory (a path below the file)
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"request_id": ["r1", "r2"], "item_id": ["a", "b"], "position": pa.array([1, 2], pa.int32())})
    pq.write_table(table, tmp_path / "target.parquet")
    df = read_parquet(spark, f"{tmp_path}/target.parquet", "ope.target", {})
    assert sorted(tuple(r) for r in df.collect()) == [("r1", "a", 1), ("r2", "b", 2)]
    assert (
        read_parquet(spark, str(tmp_path / "target.parquet"), "ope.target", {"request_id": "request_id"}).count() == 2
    )


def test_each_input_is_renamed_by_its_own_mapping_over_the_shared_one(spark, tmp_path):
    # exposures' shown_at and clicks' clicked_at are both the contract's ts; a per-input table wins over the shared
    spark.createDataFrame([("u1", "x", T0)], "uid string, item_id string, shown_at timestamp").write.parquet(
        f"{tmp_path}/exposures"
    )
    spark.createDataFrame([("u1", "x", T0)], "uid string, item_id string, clicked_at timestamp").write.parquet(
        f"{tmp_path}/clicks"
    )
    columns = load_config(
        None, ['input.columns={user_id = "uid", exposures = {ts = "shown_at"}, clicks = {ts = "clicked_at"}}']
    ).input.columns
    exposures = read_parquet(spark, f"{tmp_path}/exposures", "exposures partition", columns)
    clicks = read_parquet(spark, f"{tmp_path}/clicks", "next day's clicks partition", columns)
    assert exposures.columns == clicks.columns == ["user_id", "item_id", "ts"]
    assert read_parquet(spark, f"{tmp_path}/clicks", "a table", columns, source="clicks").columns[-1] == "ts"
    assert read_parquet(spark, f"{tmp_path}/clicks", "a table", columns).columns[-1] == "clicked_at"  # shared only


def test_positions_counted_from_0_are_read_1_based_under_position_base_0(spark):
    raw = spark.createDataFrame(
        [("u", "s", "r", "a", 0, T0), ("u", "s", "r", "b", 1, T0), ("u", "s", "r", None, None, T0)]
        + [("u", "s", "r", "c", 2147483647, T0)],
        "user_id string, session_id string, request_id string, item_id string, position long, ts timestamp",
    )
    got = [r.position for r in conform(raw, EXPOSURE_COLUMNS, "exposures", position_base=0).collect()]
    assert got == [1, 2, None, None]  # past the integer range: null (a bad position), never an overflow
    assert [r.position for r in conform(raw, EXPOSURE_COLUMNS, "exposures").collect()][:2] == [0, 1]
