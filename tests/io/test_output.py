"""write.py: a day's tables are staged, then moved into place together; other dates are never touched."""

from __future__ import annotations

import os
import time

import pytest
from chispa import assert_df_equality

from recsys_spark.experiments.tables import CHECKS_SCHEMA, DECISIONS_SCHEMA, RESULTS_SCHEMA
from recsys_spark.io.staged import DailyOutput
from recsys_spark.runtime import fs
from recsys_spark.schema import LORENZ_DDL, METRICS_DDL, RULE_CHECKS_DDL
from recsys_spark.tables import SUMMARY

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
            ("auc", None, "user_avg", "all", 0.5, 10, 0.01, 0.48, 0.52, "t", None),
            ("ndcg", 10, "list_avg", "platform=ios", float("nan"), 0, None, None, None, "none", None),
            ("gini", None, "exposed", "all", float("inf"), 2**40, -0.0, float("-inf"), 1e-300, "bootstrap", None),
            ("precision", None, "global", "all", 0.75, 3, 0.1, 0.55, 0.95, "delta", 0.5),
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
    "experiment_decisions": (
        DECISIONS_SCHEMA,
        [
            (
                "exp1",
                "treatment",
                "ship",
                ["goal ndcg@10_user_avg improved: +0.01 [+0.002, +0.018]"],
                "sequential",
                900,
                910,
                "cumulative",
            ),
            ("exp2", None, "invalid", [], "fixed", 0, 0, "day"),
        ],
    ),
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
        out.stage_rows("metrics", [(None,)], "ts timestamp")


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


# --- only the tables it owns; a commit that fails or is killed midway ------------------------------
def test_the_commit_touches_only_the_tables_this_output_owns(spark, tmp_path):
    # an input table and another job's table, both holding the date, under the same root
    for foreign in ("exposures", "offline_auc"):
        (tmp_path / foreign / f"dt={DATE}").mkdir(parents=True)
        (tmp_path / foreign / f"dt={DATE}" / "part-0.parquet").write_text("theirs")
    (tmp_path / "rejected" / f"dt={DATE}").mkdir(parents=True)  # ours, from an earlier run
    _day(spark, tmp_path, 1).commit()
    for foreign in ("exposures", "offline_auc"):
        assert (tmp_path / foreign / f"dt={DATE}" / "part-0.parquet").read_text() == "theirs"
    assert not (tmp_path / "rejected" / f"dt={DATE}").exists()  # a table we own and no longer write
    with pytest.raises(ValueError, match="'exposures' is not one of the tables this output owns"):
        DailyOutput(spark, str(tmp_path), DATE).stage("exposures", spark.createDataFrame([(1,)], "v int"))


def test_an_input_inside_a_table_this_output_owns_is_refused(tmp_path):
    from recsys_spark.errors import UsageError

    out = DailyOutput(None, str(tmp_path), DATE)  # type: ignore[arg-type]  # no Spark call is made
    out.refuse_inputs_inside([f"{tmp_path}/exposures/dt={DATE}", "table:logs.clicks"])  # the same root: fine
    with pytest.raises(UsageError, match=r"input .*/metrics/dt=2026-11-20/ lies inside the output table 'metrics'"):
        out.refuse_inputs_inside([f"file:{tmp_path}/metrics/dt={DATE}/"])


def _failing_rename(monkeypatch, after: int, error: type[BaseException] = OSError):
    """fs.rename whose call number ``after`` + 1 fails (once)."""
    real, calls = fs.rename, []

    def rename(spark, source, target):
        calls.append(source)
        if len(calls) == after + 1:
            raise error(f"rename failed: {source}")
        real(spark, source, target)

    monkeypatch.setattr(fs, "rename", rename)


@pytest.mark.parametrize("after", [1, 2, 3])
def test_a_commit_that_fails_midway_is_undone_and_the_old_day_stays_complete(spark, tmp_path, monkeypatch, after):
    from recsys_spark.errors import OutputError

    first = _day(spark, tmp_path, 1)
    first.stage("lorenz", spark.createDataFrame([(1,)], "value int"))
    first.commit()
    second = _day(spark, tmp_path, 2)
    second.stage("lorenz", spark.createDataFrame([(2,)], "value int"))
    _failing_rename(monkeypatch, after=after)
    with pytest.raises(OutputError, match="the commit failed and was undone"):
        second.commit()
    monkeypatch.undo()
    second.abort()
    for table in ("metrics", "lorenz"):
        assert [r.value for r in spark.read.parquet(f"{tmp_path}/{table}/dt={DATE}").collect()] == [1]
    assert (tmp_path / SUMMARY / f"dt={DATE}" / "summary.json").read_text() == '{"value": 1}'
    assert (tmp_path / SUMMARY / f"dt={DATE}" / "_SUCCESS").exists()
    assert not (tmp_path / "_staging").exists()


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs in the killed process."""


@pytest.mark.parametrize("after", [0, 1, 2, 3, 4])
def test_a_commit_killed_midway_is_finished_by_the_next_run_of_the_date(spark, tmp_path, monkeypatch, after):
    first = _day(spark, tmp_path, 1)
    first.commit()
    killed = _day(spark, tmp_path, 2)
    killed.stage("lorenz", spark.createDataFrame([(2,)], "value int"))
    killed.locked = True
    _failing_rename(monkeypatch, after=after, error=Killed)
    monkeypatch.setattr(DailyOutput, "_roll_back", lambda *a: (_ for _ in ()).throw(Killed()))  # no clean-up
    with pytest.raises(Killed):
        killed.commit()
    monkeypatch.undo()
    assert not (tmp_path / SUMMARY / f"dt={DATE}" / "_SUCCESS").exists()  # a reader trusts neither day
    nxt = DailyOutput(spark, str(tmp_path), DATE)
    nxt.acquire()  # finishes the killed run's commit before anything else
    assert nxt.recovered == [killed.run_id]
    for table in ("metrics", "lorenz"):  # the killed run's day, complete
        assert [r.value for r in spark.read.parquet(f"{tmp_path}/{table}/dt={DATE}").collect()] == [2]
    assert (tmp_path / SUMMARY / f"dt={DATE}" / "_SUCCESS").exists()
    assert not (tmp_path / "_staging" / killed.run_id).exists()
    nxt.abort()


def test_a_staging_directory_holding_a_killed_commit_is_not_swept(spark, tmp_path):
    killed = tmp_path / "_staging" / "2026-11-19-0badc0de"
    (killed / "metrics" / "dt=2026-11-19").mkdir(parents=True)
    (killed / "_commit.json").write_text('{"partition": "dt=2026-11-19", "tables": ["metrics"], "leftover": []}')
    old = time.time() - 5 * 3600
    os.utime(killed, (old, old))
    out = DailyOutput(spark, str(tmp_path), DATE)
    out.acquire()
    assert out.swept == [] and out.recovered == [] and killed.exists()  # another date's: its next run ends it
    out.abort()


def test_abort_never_removes_a_concurrent_runs_staging(spark, tmp_path, monkeypatch):
    # replayed: run A lists _staging empty, run B stages its first table, then A cleans up
    a = DailyOutput(spark, str(tmp_path), DATE)
    b = DailyOutput(spark, str(tmp_path), "2026-11-21")
    (tmp_path / "_staging").mkdir()
    monkeypatch.setattr(fs, "children", lambda spark, path: [])  # what A saw before B wrote
    b.stage("metrics", spark.createDataFrame([(1,)], "value int"))
    a.abort()
    monkeypatch.undo()
    assert [r.value for r in spark.read.parquet(b.staged_path("metrics")).collect()] == [1]


def test_complete_days_are_the_days_with_the_success_marker(spark, tmp_path):
    from recsys_spark.io.output import complete_days

    assert complete_days(spark, str(tmp_path / "nothing")) == []
    _day(spark, tmp_path, 1).commit()
    (tmp_path / SUMMARY / "dt=2026-11-19").mkdir()  # a killed commit: no marker
    (tmp_path / SUMMARY / "dt=2026-11-19" / "summary.json").write_text("{}")
    assert complete_days(spark, str(tmp_path)) == [DATE]
