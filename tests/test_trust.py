"""Trust, round two: no lost input, no half-read day, no silent "ok" (docs/operations.md, "Hostile inputs").

Each test is one defect an operator found; each failed on the code before its fix.
"""

from __future__ import annotations

import pytest
from helpers.days import CLICK_SCHEMA, CLICKS, DAY, EXPOSURE_SCHEMA, EXPOSURES, day_input, run_day, write

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.errors import UnreadableInputError, UsageError

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
