"""Trust, round two: no lost input, no half-read day, no silent "ok" (docs/operations.md, "Hostile inputs").

Each test is one defect an operator found; each failed on the code before its fix.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.days import CLICK_SCHEMA, CLICKS, DAY, EXPOSURE_SCHEMA, EXPOSURES, NOON, day_input, run_day, write
from pyspark.sql import functions as F

from recsys_spark.config import load_config
from recsys_spark.config.zones import PORTABLE_ZONES, is_portable_zone
from recsys_spark.daily import evaluate_day
from recsys_spark.errors import EmptyInputError, SchemaError, UnreadableInputError, UsageError
from recsys_spark.io.read import conform, footers, read_parquet
from recsys_spark.runtime import fs
from recsys_spark.schema import EXPOSURE_COLUMNS

pytestmark = pytest.mark.spark


# --- a day read in part --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "table, folder",
    [
        ("exposures", "hour=23"),  # an hour's folder beside the day's files: Spark read only the folder
        ("clicks", "hour=23"),
        ("exposures", f"dt={DAY}"),  # a nested partition left by a rename onto an existing folder
        ("exposures", "late"),  # a folder that is not name=value: Spark ignored it
    ],
)
def test_a_partition_with_files_and_a_sub_folder_is_refused_naming_the_folder(spark, tmp_path, table, folder):
    root = day_input(tmp_path)
    rows, schema = (EXPOSURES, EXPOSURE_SCHEMA) if table == "exposures" else (CLICKS, CLICK_SCHEMA)
    write(root / table / f"dt={DAY}" / folder, rows[:1], schema)
    with pytest.raises(UnreadableInputError, match=rf"{table}/dt={DAY}.* beside the sub-folder {folder}/") as err:
        run_day(spark, tmp_path)
    assert err.value.exit_code == 6
    assert "read only part of it" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_day_in_hour_folders_only_is_read_whole(spark, tmp_path):
    # the same rows split over hour=11 and hour=12 folders: every row read, the same metrics as one file
    day_input(tmp_path / "whole")
    whole = run_day(spark, tmp_path / "whole")
    root = tmp_path / "split" / "in"
    write(root / "exposures" / f"dt={DAY}" / "hour=11", EXPOSURES[:3], EXPOSURE_SCHEMA)
    write(root / "exposures" / f"dt={DAY}" / "hour=12", EXPOSURES[3:], EXPOSURE_SCHEMA)
    write(root / "clicks" / f"dt={DAY}", CLICKS, CLICK_SCHEMA)
    split = run_day(spark, tmp_path / "split")
    assert split["input_rows"] == whole["input_rows"] == {"exposures": 6, "clicks": 3}
    assert split["headline"] == pytest.approx(whole["headline"], nan_ok=True)


def test_sub_folders_of_two_partition_columns_or_a_nested_same_column_are_refused(spark, tmp_path):
    root = day_input(tmp_path)
    (root / "exposures" / f"dt={DAY}" / "part-00000.parquet").unlink()
    write(root / "exposures" / f"dt={DAY}" / "hour=11", EXPOSURES[:3], EXPOSURE_SCHEMA)
    write(root / "exposures" / f"dt={DAY}" / "region=eu", EXPOSURES[3:], EXPOSURE_SCHEMA)
    with pytest.raises(UnreadableInputError, match=r"sub-folders of several partition columns \(hour, region\)"):
        run_day(spark, tmp_path)
    (root / "exposures" / f"dt={DAY}" / "region=eu" / "part-00000.parquet").rename(
        root / "exposures" / f"dt={DAY}" / "hour=11" / "part-00001.parquet"
    )
    (root / "exposures" / f"dt={DAY}" / "region=eu").rmdir()
    write(root / "exposures" / f"dt={DAY}" / "hour=11" / "hour=12", EXPOSURES[3:], EXPOSURE_SCHEMA)
    with pytest.raises(UnreadableInputError, match=r"hour=11 holds data files .* beside the sub-folder hour=12/"):
        run_day(spark, tmp_path)


# --- a run that deletes what it does not own ----------------------------------------------------------
def test_an_output_root_equal_to_the_input_root_keeps_the_inputs_and_foreign_tables(spark, tmp_path):
    root = day_input(tmp_path)
    foreign = root / "offline_auc" / f"dt={DAY}"  # another job's table the report reads
    foreign.mkdir(parents=True)
    (foreign / "part-0.parquet").write_text("theirs")
    for _ in range(2):  # a run and a rerun, both exit 0
        summary = evaluate_day(spark, load_config(None, ["metrics.k=[1]"]), DAY, str(root), str(root))
        assert summary["input_rows"] == {"exposures": 6, "clicks": 3}
    for table in ("exposures", "clicks"):
        assert list((root / table / f"dt={DAY}").glob("*.parquet")), table
    assert (foreign / "part-0.parquet").read_text() == "theirs"
    assert (root / "summary" / f"dt={DAY}" / "_SUCCESS").exists()


def test_an_input_inside_an_output_table_is_refused_before_anything_runs(spark, tmp_path):
    day_input(tmp_path)
    settings = ["metrics.k=[1]", f'input.items="{tmp_path}/out/metrics"', 'slices.names=["category"]']
    with pytest.raises(UsageError, match=r"input .*out/metrics lies inside the output table 'metrics'") as err:
        evaluate_day(spark, load_config(None, settings), DAY, str(tmp_path / "in"), str(tmp_path / "out"))
    assert err.value.exit_code == 2
    assert not (tmp_path / "out").exists()


# --- blank ids --------------------------------------------------------------------------------------
def test_empty_and_blank_ids_are_set_aside_and_counted_not_merged_into_one_user(spark, tmp_path):
    # u1's rows arrive with user_id "" (a common logged-out value), one of u2's with " "; one more row of
    # u3 has no request id
    exposures = [("", *r[1:]) if r[0] == "u1" else r for r in EXPOSURES]
    exposures[3] = (" ", *exposures[3][1:])
    exposures.append(("u3", "s3", "", "d", 3, 0.1, EXPOSURES[0][-1]))
    clicks = [("", *c[1:]) if c[0] == "u1" else c for c in CLICKS]
    day_input(tmp_path, exposures=exposures, clicks=clicks)
    summary = run_day(spark, tmp_path)
    rejected = summary["data_quality"]["rejected_exposures"]
    assert rejected == {"blank_user_id": 3, "blank_request_id": 1}
    assert summary["data_quality"]["rejected_clicks"] == {"blank_user_id": 1}
    assert summary["status"] != "ok"  # 4 of 6 exposure rows set aside: rejected_exposure_rate fails
    assert {r["rule"] for r in summary["rules"] if not r["passed"]} >= {"rejected_exposure_rate"}


def test_a_click_with_a_blank_request_id_is_attributed_by_session(spark, tmp_path):
    clicks = [(*c[:2], "  ", *c[3:]) for c in CLICKS]  # no request id: matched by user, session and item
    day_input(tmp_path, clicks=clicks)
    blank = run_day(spark, tmp_path)
    day_input(tmp_path / "ref")
    reference = run_day(spark, tmp_path / "ref")
    assert blank["data_quality"]["rejected_clicks"] == {}
    assert blank["headline"] == pytest.approx(reference["headline"], nan_ok=True)


# --- a partition whose files disagree ------------------------------------------------------------------
def _pandas_exposures(rows, naive: bool):
    """Exposures as pandas writes them: nanosecond timestamps (zone-aware, or naive wall clocks in UTC)."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(rows, columns=EXPOSURE_SCHEMA.names)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    if naive:
        frame["ts"] = frame["ts"].dt.tz_localize(None)
    return frame


def _exposure_times(spark, path) -> list[int]:
    df = conform(read_parquet(spark, str(path), "exposures partition", {}), EXPOSURE_COLUMNS, str(path))
    return sorted(r[0] for r in df.select(F.unix_micros("ts")).collect())


@pytest.mark.parametrize("naive", [False, True], ids=["zone-aware", "naive"])
@pytest.mark.parametrize("nanos_first", [True, False], ids=["nanos-file-first", "micros-file-first"])
def test_a_partition_mixing_nanosecond_and_microsecond_files_reads_every_row_at_its_time(
    spark, tmp_path, nanos_first, naive
):
    # pandas wrote half the day (TIMESTAMP(NANOS)), a Spark or pyarrow writer the other half (MICROS): when the
    # nanosecond file came first, every microsecond value was read as 1970 and set aside as ts_outside_day
    day_input(tmp_path / "whole")
    whole = run_day(spark, tmp_path / "whole")
    part = tmp_path / "mixed" / "in" / "exposures" / f"dt={DAY}"
    part.mkdir(parents=True)
    nanos_name, micros_name = ("part-00000.parquet", "part-00001.parquet")[:: 1 if nanos_first else -1]
    _pandas_exposures(EXPOSURES[:3], naive).to_parquet(part / nanos_name, engine="pyarrow")
    write(part, EXPOSURES[3:], EXPOSURE_SCHEMA, name=micros_name)
    write(tmp_path / "mixed" / "in" / "clicks" / f"dt={DAY}", CLICKS, CLICK_SCHEMA)
    assert "ns" in str(pq.read_schema(part / nanos_name).field("ts").type)
    noon = int(NOON.timestamp()) * 1_000_000
    assert _exposure_times(spark, part) == [noon] * 6
    mixed = run_day(spark, tmp_path / "mixed")
    assert mixed["input_rows"] == whole["input_rows"] == {"exposures": 6, "clicks": 3}
    assert mixed["data_quality"]["rejected_exposures"] == {}
    assert mixed["headline"] == pytest.approx(whole["headline"], nan_ok=True)


def test_a_zero_row_file_of_untyped_columns_does_not_decide_the_schema(spark, tmp_path):
    # an empty pandas frame written upstream: every column of Parquet's Null type (read by Spark as int);
    # sorting first, it became the partition's schema and the day failed on "column 'ts' ... has type int"
    pd = pytest.importorskip("pandas")
    day_input(tmp_path / "whole")
    whole = run_day(spark, tmp_path / "whole")
    root = day_input(tmp_path / "empty_first")
    for table, schema in (("exposures", EXPOSURE_SCHEMA), ("clicks", CLICK_SCHEMA)):
        pd.DataFrame(columns=schema.names).to_parquet(root / table / f"dt={DAY}" / "part-0-empty.parquet")
    assert str(pq.read_schema(root / "clicks" / f"dt={DAY}" / "part-0-empty.parquet").field("ts").type) == "null"
    summary = run_day(spark, tmp_path / "empty_first")
    assert summary["input_rows"] == {"exposures": 6, "clicks": 3}
    assert summary["headline"] == pytest.approx(whole["headline"], nan_ok=True)


def test_a_partition_of_only_zero_row_untyped_files_is_an_empty_partition_naming_the_file(spark, tmp_path):
    pd = pytest.importorskip("pandas")
    root = day_input(tmp_path)
    exposures = root / "exposures" / f"dt={DAY}"
    (exposures / "part-00000.parquet").unlink()
    pd.DataFrame(columns=EXPOSURE_SCHEMA.names).to_parquet(exposures / "part-0-empty.parquet")
    with pytest.raises(
        EmptyInputError, match=r"empty input exposures partition: .*part-0-empty\.parquet has no rows"
    ) as err:
        run_day(spark, tmp_path)
    assert err.value.exit_code == 7 and "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("string_first", [True, False], ids=["string-file-first", "bigint-file-first"])
def test_two_files_with_different_types_for_one_column_are_a_schema_error_naming_both(spark, tmp_path, string_first):
    # it was exit 6 "unreadable input" (a Parquet column data type mismatch in a task), or a cast in one order
    root = day_input(tmp_path)
    part = root / "exposures" / f"dt={DAY}"
    (part / "part-00000.parquet").unlink()
    as_ints = EXPOSURE_SCHEMA.set(0, pa.field("user_id", pa.int64()))
    names = ("part-00000.parquet", "part-00001.parquet")[:: 1 if string_first else -1]
    write(part, EXPOSURES[:3], EXPOSURE_SCHEMA, name=names[0])
    write(part, [(i,) + r[1:] for i, r in enumerate(EXPOSURES[3:])], as_ints, name=names[1])
    with pytest.raises(SchemaError) as err:
        run_day(spark, tmp_path)
    message = str(err.value)
    assert err.value.exit_code == 5 and "\n" not in message
    assert "'user_id'" in message and "string" in message and "bigint" in message
    assert "part-00000.parquet" in message and "part-00001.parquet" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("narrow_first", [True, False], ids=["int-file-first", "bigint-file-first"])
def test_integers_of_two_widths_in_one_partition_are_read_as_the_wider(spark, tmp_path, narrow_first):
    # position int32 (Spark, pyarrow) in one file and int64 (pandas) in another: in one order a task failed
    day_input(tmp_path / "whole")
    whole = run_day(spark, tmp_path / "whole")
    root = day_input(tmp_path / "mixed")
    part = root / "exposures" / f"dt={DAY}"
    (part / "part-00000.parquet").unlink()
    wide = EXPOSURE_SCHEMA.set(4, pa.field("position", pa.int64()))
    names = ("part-00000.parquet", "part-00001.parquet")[:: 1 if narrow_first else -1]
    write(part, EXPOSURES[:3], EXPOSURE_SCHEMA, name=names[0])
    write(part, EXPOSURES[3:], wide, name=names[1])
    summary = run_day(spark, tmp_path / "mixed")
    assert summary["input_rows"] == {"exposures": 6, "clicks": 3}
    assert summary["headline"] == pytest.approx(whole["headline"], nan_ok=True)


def test_a_file_with_two_columns_differing_only_in_case_is_named(spark, tmp_path):
    root = day_input(tmp_path)
    part = root / "exposures" / f"dt={DAY}"
    shouting = EXPOSURE_SCHEMA.append(pa.field("USER_ID", pa.string()))
    write(part, [r + ("X",) for r in EXPOSURES], shouting, name="part-00001.parquet")
    with pytest.raises(SchemaError) as err:
        run_day(spark, tmp_path)
    message = str(err.value)
    assert err.value.exit_code == 5 and "\n" not in message
    assert "part-00001.parquet" in message and "'user_id'" in message and "'USER_ID'" in message
    assert not (tmp_path / "out").exists()


def test_footers_read_through_hadoop_are_the_files_own(spark, tmp_path):
    # HDFS and S3 paths are read through Hadoop's FileSystem; a local file through it gives the same footer
    day_input(tmp_path)
    path = tmp_path / "in" / "exposures" / f"dt={DAY}" / "part-00000.parquet"
    with fs.open_hadoop(spark, f"file://{path}") as handle:
        through_hadoop = pq.read_metadata(handle)
    assert through_hadoop.equals(pq.read_metadata(path))
    (found,) = footers(spark, [f"file://{path}"], "exposures partition")
    assert (found.rows, found.columns, found.nanos) == (6, tuple(EXPOSURE_SCHEMA.names), ())


# --- settings Java refuses after Spark has started ----------------------------------------------------------
def test_the_portable_time_zones_are_what_python_and_the_jvm_both_accept(spark):
    # validation.time_zone is checked at config load against a list (no JVM there); this keeps the list true:
    # Python's zoneinfo accepted localtime and posix/..., which Java's ZoneId.of refused once Spark had started
    import zoneinfo

    jvm = spark.sparkContext._jvm

    def java_accepts(name: str) -> bool:
        try:
            jvm.java.time.ZoneId.of(name)
        except Exception:  # noqa: BLE001 - py4j's error for ZoneRulesException / DateTimeException
            return False
        return True

    def python_accepts(name: str) -> bool:
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return False
        return True

    refused_by_java = sorted(n for n in PORTABLE_ZONES if not java_accepts(n))
    refused_by_python = sorted(n for n in PORTABLE_ZONES if not python_accepts(n))
    assert refused_by_java == refused_by_python == []
    missing = sorted(
        n for n in jvm.java.time.ZoneId.getAvailableZoneIds() if n not in PORTABLE_ZONES and python_accepts(n)
    )
    assert missing == [], f"known to this JVM and to Python: add them to recsys_spark/config/zones.py: {missing}"
    for name in ("localtime", "posix/America/New_York", "right/UTC", "Factory", "EST", "posixrules", "+08:00", "Z"):
        assert not is_portable_zone(name)
        assert not (java_accepts(name) and python_accepts(name)), name
    before = spark.conf.get("spark.sql.session.timeZone")
    try:
        for name in ("America/New_York", "Etc/GMT-8", "GMT+0", "Asia/Kolkata"):
            spark.conf.set("spark.sql.session.timeZone", name)  # what the job does with the setting
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
