"""write.py: a day's tables are staged, then moved into place together; other dates are never touched."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

from recsys_spark.experiments import CHECKS_SCHEMA, RESULTS_SCHEMA
from recsys_spark.schema import LORENZ_DDL, METRICS_DDL, RULE_CHECKS_DDL
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


SMALL_TABLES = {
    "metrics": (
        METRICS_DDL,
        [
            ("auc", None, "user_avg", "all", 0.5, 10, 0.01, 0.48, 0.52, "t"),
            ("ndcg", 10, "list_avg", "platform=ios", float("nan"), 0, None, None, None, "none"),
            ("gini", None, "exposed", "all", float("inf"), 2**40, -0.0, float("-inf"), 1e-300, "bootstrap"),
        ],
    ),
    "lorenz": (LORENZ_DDL, [("all", 0.0, 0.0), ("类别=书", 1.0, 1.0)]),
    "rule_checks": (
        RULE_CHECKS_DDL,
        [
            ("blacklisted_item", "hard", 3, 0.25, 0.0, False, ["i1", "i2"]),
            ("duplicate_item_in_request", "soft", 0, None, 0.01, True, []),
            ("no_feedback", "hard", 0, None, None, True, None),
        ],
    ),
    "experiment_checks": (
        CHECKS_SCHEMA,
        [("exp1", "srm", 0.3, 0.58, True, "ok"), (None, "layer", None, None, False, "")],
    ),
    "experiments": (RESULTS_SCHEMA, []),
}


@pytest.mark.parametrize("table", sorted(SMALL_TABLES))
def test_a_small_table_staged_by_the_driver_reads_back_as_spark_would_have_written_it(spark, tmp_path, table):
    ddl, rows = SMALL_TABLES[table]
    out = DailyOutput(spark, str(tmp_path), DATE)
    path = out.stage_rows(table, rows, ddl)
    ours = spark.read.parquet(path)
    theirs = spark.createDataFrame(rows, ddl)
    assert ours.schema.simpleString() == theirs.schema.simpleString()
    assert_df_equality(ours, theirs, ignore_row_order=True, ignore_nullable=True, allow_nan_equality=True)
    assert len(list((tmp_path / "_staging").rglob("*.parquet"))) == 1
    out.stage_rows(table, rows[:1], ddl)  # staged again: replaced, not added to
    assert spark.read.parquet(path).count() == len(rows[:1])


def test_a_small_table_refuses_a_row_of_the_wrong_width_or_a_column_type_it_does_not_know(spark, tmp_path):
    out = DailyOutput(spark, str(tmp_path), DATE)
    path = out.stage_rows("lorenz", [("all", 0.0, 0.0)], LORENZ_DDL)
    with pytest.raises(ValueError):
        out.stage_rows("lorenz", [("all", 0.0)], LORENZ_DDL)
    assert spark.read.parquet(path).count() == 1  # a refused table leaves what was staged before
    with pytest.raises(ValueError, match="no Arrow type"):
        out.stage_rows("t", [(None,)], "ts timestamp")


def test_a_small_table_is_written_without_a_spark_job(spark, tmp_path):
    """The point of :meth:`DailyOutput.stage_rows`: a Spark job costs 0.3 s at least for a table of a few rows."""
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("small-table", "stage_rows")
    try:
        DailyOutput(spark, str(tmp_path), DATE).stage_rows("metrics", SMALL_TABLES["metrics"][1], METRICS_DDL)
        assert tracker.getJobIdsForGroup("small-table") == []
        spark.createDataFrame([(1,)], "value int").write.parquet(str(tmp_path / "spark"))  # a Spark write does run one
        assert len(tracker.getJobIdsForGroup("small-table")) >= 1
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
