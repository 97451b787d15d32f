"""write.py: a day's tables are staged, then moved into place together; other dates are never touched."""

from __future__ import annotations

import pytest

from recsys_spark.write import SUMMARY, DailyOutput

pytestmark = pytest.mark.spark

DATE = "2026-11-20"


def _day(spark, root, value: int) -> DailyOutput:
    out = DailyOutput(spark, str(root), DATE)
    out.stage("metrics", spark.createDataFrame([(value,)], "value int"))
    out.stage_text(SUMMARY, "summary.json", f'{{"value": {value}}}')
    return out


def test_commit_moves_every_table_into_place_with_the_summary_marker_last(spark, tmp_path):
    out = _day(spark, tmp_path, 1)
    assert not (tmp_path / "metrics").exists()  # staged only
    out.commit()
    assert [r.value for r in spark.read.parquet(out.final_path("metrics")).collect()] == [1]
    assert (tmp_path / SUMMARY / f"dt={DATE}" / "summary.json").read_text() == '{"value": 1}'
    assert (tmp_path / SUMMARY / f"dt={DATE}" / "_SUCCESS").exists()
    assert not (tmp_path / "_staging").exists()


def test_a_rerun_replaces_the_date_and_leaves_other_dates(spark, tmp_path):
    _day(spark, tmp_path, 1).commit()
    other = tmp_path / "metrics" / "dt=2026-11-19"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    _day(spark, tmp_path, 2).commit()
    assert [r.value for r in spark.read.parquet(f"{tmp_path}/metrics/dt={DATE}").collect()] == [2]
    assert (other / "keep.txt").read_text() == "x"


def test_abort_keeps_the_previous_output_and_removes_the_staging_area(spark, tmp_path):
    _day(spark, tmp_path, 1).commit()
    failed = _day(spark, tmp_path, 2)
    failed.abort()
    assert [r.value for r in spark.read.parquet(f"{tmp_path}/metrics/dt={DATE}").collect()] == [1]
    assert (tmp_path / SUMMARY / f"dt={DATE}" / "_SUCCESS").exists()
    assert not (tmp_path / "_staging").exists()
