"""Hostile inputs a careful operator tries: no silent wrong number, a status that tells the truth.

Each test is one case of docs/operations.md ("Hostile inputs").  Inputs are written with pyarrow and zone-aware
timestamps, so that neither the test process's nor Spark's time zone changes them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.days import (
    CLICK_SCHEMA,
    CLICKS,
    DAY,
    EXPOSURE_SCHEMA,
    EXPOSURES,
    LATER,
    NOON,
    TS,
    UTC,
    day_input,
    rules_of,
    run_day,
    summary_of,
    write,
)

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.errors import HardRuleViolation, OutputError

pytestmark = pytest.mark.spark


# --- silent wrong numbers -----------------------------------------------------------------------
@pytest.mark.process
def test_the_day_does_not_follow_the_machine_time_zone(tmp_path):
    """Same data and config under TZ=Asia/Shanghai and TZ=UTC: identical outputs (it set aside 28 %)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "recsys_spark.synthetic.generate",
            "--date",
            str(DAY),
            "--output-root",
            str(tmp_path / "in"),
            "--users",
            "150",
            "--seed",
            "5",
        ],
        check=True,
        capture_output=True,
    )
    summaries = {}
    for zone in ("Asia/Shanghai", "UTC"):
        env = {
            **os.environ,
            "TZ": zone,
            "PYTHONWARNINGS": "ignore",
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "recsys_spark.cli",
                "evaluate",
                "--date",
                str(DAY),
                "--input-root",
                str(tmp_path / "in"),
                "--output-root",
                str(tmp_path / zone),
                "--master",
                "local[2]",
                "--set",
                "spark.sql.shuffle.partitions=4",
                "--set",
                "metrics.k=[10]",
            ],  # default rules: realistic logs exit 0
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        summaries[zone] = json.loads((tmp_path / zone / "summary" / f"dt={DAY}" / "summary.json").read_text())
    shanghai, utc = summaries["Asia/Shanghai"], summaries["UTC"]
    assert shanghai["data_quality"]["rejected_exposures"] == utc["data_quality"]["rejected_exposures"] == {}
    for key in ("input_rows", "data_quality", "status"):
        assert shanghai[key] == utc[key], key
    # aggregates may differ in the last bits between any two runs (partition sums merge in task order)
    assert shanghai["headline"] == pytest.approx(utc["headline"], rel=1e-12, abs=1e-12)
    assert shanghai["status"] != "hard_rule_violated"  # duplicates and uncatalogued items are soft by default


def test_a_day_whose_rows_are_all_outside_it_is_not_ok(spark, tmp_path):
    outside = [row[:-1] + (NOON - dt.timedelta(days=3),) for row in EXPOSURES]
    day_input(tmp_path, exposures=outside)
    summary = run_day(spark, tmp_path, "rules.fail_on_hard=false")
    rules = rules_of(summary)
    assert summary["status"] == "hard_rule_violated"
    assert rules["rejected_exposure_rate"]["rate"] == 1.0 and not rules["rejected_exposure_rate"]["passed"]
    assert rules["rejected_exposure_rate"]["examples"] == ["ts_outside_day: 6"]
    assert not rules["no_feedback"]["passed"]


def test_a_day_with_a_third_of_its_rows_set_aside_is_not_ok(spark, tmp_path):
    late = [("u4", "s4", f"r4{i}", "a", 1, 0.5, NOON + dt.timedelta(days=2)) for i in range(3)]
    day_input(tmp_path, exposures=EXPOSURES + late)
    summary = run_day(spark, tmp_path)
    rule = rules_of(summary)["rejected_exposure_rate"]
    assert (rule["violations"], rule["rate"], rule["threshold"]) == (3, 3 / 9, 0.02)
    assert summary["status"] == "soft_rule_failed"
    assert summary["headline"]["auc_global"] is not None  # the rest is still evaluated


def test_an_empty_clicks_partition_and_a_zero_row_file_are_the_same_day_without_feedback(spark, tmp_path):
    empty_dir, zero_rows = tmp_path / "empty", tmp_path / "zero"
    day_input(empty_dir, clicks=None)
    (empty_dir / "in" / "clicks" / f"dt={DAY}").mkdir(parents=True)
    day_input(zero_rows, clicks=[])
    for root in (empty_dir, zero_rows):
        with pytest.raises(HardRuleViolation, match="no_feedback"):
            run_day(spark, root)
    a, b = summary_of(empty_dir), summary_of(zero_rows)
    assert a["status"] == b["status"] == "hard_rule_violated"
    assert a["data_quality"] == b["data_quality"] and a["headline"] == b["headline"]
    assert rules_of(a)["no_feedback"]["examples"] == ["no feedback events in the clicks partition"]


def test_events_named_unlike_any_weight_are_counted_per_name_and_fail_the_day(spark, tmp_path):
    shouted = [c[:-1] + ("CLICK",) for c in CLICKS]
    day_input(tmp_path, clicks=shouted)
    with pytest.raises(HardRuleViolation, match="no_feedback"):
        run_day(spark, tmp_path)
    summary = summary_of(tmp_path)
    assert summary["data_quality"]["unweighted_events"] == {"CLICK": 3}
    assert "names seen: CLICK" in rules_of(summary)["no_feedback"]["examples"][0]
    unweighted = rules_of(summary)["unweighted_event_rate"]
    assert (unweighted["rate"], unweighted["passed"], unweighted["examples"]) == (1.0, False, ["CLICK: 3"])


def test_some_events_without_weight_are_a_soft_failure(spark, tmp_path):
    mixed = CLICKS + [("u1", "s1", "r1", "a", LATER, "view"), ("u2", "s2", "r2", "c", LATER, "view")]
    day_input(tmp_path, clicks=mixed)
    summary = run_day(spark, tmp_path)
    assert summary["data_quality"]["unweighted_events"] == {"view": 2}
    assert rules_of(summary)["unweighted_event_rate"]["rate"] == pytest.approx(2 / 5)
    assert rules_of(summary)["no_feedback"]["passed"]
    assert summary["status"] == "soft_rule_failed"


def test_late_feedback_after_midnight_is_read_from_the_next_partition(spark, tmp_path):
    night = dt.datetime(2026, 11, 20, 23, 58, tzinfo=UTC)
    shown = EXPOSURES + [("u5", "s5", "r5", "d", 1, 0.9, night), ("u5", "s5", "r5", "e", 2, 0.1, night)]
    day_input(tmp_path, exposures=shown)
    first = run_day(spark, tmp_path)
    assert first["provisional"] is True
    assert any(n.startswith("provisional: no clicks partition for 2026-11-21") for n in first["notes"])
    assert first["data_quality"]["clicked_exposures"] == 3
    # the next day arrives: a click at 00:05 on the exposure shown at 23:58, one by session at 00:07,
    # one at 00:10 on an item the day never showed, one at 01:00 (past the window), and one at 00:06 on
    # u5's request and item by another user (the attribution's keys hold the user: not u5's, not the day's)
    after = dt.datetime(2026, 11, 21, 0, 5, tzinfo=UTC)
    write(
        tmp_path / "in" / "clicks" / "dt=2026-11-21",
        [
            ("u5", "s5", "r5", "d", after, "click"),
            ("u5", "s5", None, "e", after + dt.timedelta(minutes=2), "click"),
            ("u9", "s9", "r9", "z", after + dt.timedelta(minutes=5), "click"),
            ("u8", "s5", "r5", "d", after + dt.timedelta(minutes=1), "click"),
            ("u1", "s1", "r1", "a", after + dt.timedelta(minutes=55), "click"),
        ],
        CLICK_SCHEMA,
    )
    second = run_day(spark, tmp_path)
    assert second["provisional"] is False
    assert second["data_quality"]["late_events"] == 2
    assert second["data_quality"]["clicked_exposures"] == 5
    assert second["data_quality"]["orphan_events"] == first["data_quality"]["orphan_events"] == 0
    assert second["input_rows"] == first["input_rows"]  # the next day's rows are not the day's input
    # u5's list had no click: it dropped out of the ranking metrics; now it counts
    assert (first["data_quality"]["lists_without_relevant"], second["data_quality"]["lists_without_relevant"]) == (1, 0)


# --- errors that say why, and inputs that used to fail the day --------------------------------------
def test_positions_of_inf_or_1e20_are_set_aside_as_bad_position(spark, tmp_path):
    schema = EXPOSURE_SCHEMA.set(4, pa.field("position", pa.float64()))
    rows = [r[:4] + (float(r[4]),) + r[5:] for r in EXPOSURES]
    rows += [
        ("u4", "s4", "r4", "a", float("inf"), 0.5, NOON),
        ("u4", "s4", "r4", "b", 1e20, 0.5, NOON),
        ("u4", "s4", "r4", "c", float("nan"), 0.5, NOON),
        ("u4", "s4", "r4", "d", 2.5, 0.5, NOON),
    ]
    write(tmp_path / "in" / "exposures" / f"dt={DAY}", rows, schema)
    write(tmp_path / "in" / "clicks" / f"dt={DAY}", CLICKS, CLICK_SCHEMA)
    summary = run_day(spark, tmp_path)
    assert summary["data_quality"]["rejected_exposures"] == {"bad_position": 4}
    assert summary["data_quality"]["exposures"] == 6


def test_nanosecond_timestamps_written_by_pandas_are_read(spark, tmp_path):
    pd = pytest.importorskip("pandas")
    exposures = pd.DataFrame(EXPOSURES, columns=EXPOSURE_SCHEMA.names)
    exposures["ts"] = pd.to_datetime(exposures["ts"], utc=True).dt.tz_localize(None)  # naive, ns: pandas' default
    exposures["position"] = exposures["position"].astype("int64")
    clicks = pd.DataFrame(CLICKS, columns=CLICK_SCHEMA.names)
    clicks["ts"] = pd.to_datetime(clicks["ts"], utc=True) + pd.Timedelta(nanoseconds=1)  # zone-aware, ns
    for name, frame in (("exposures", exposures), ("clicks", clicks)):
        (tmp_path / "in" / name / f"dt={DAY}").mkdir(parents=True)
        frame.to_parquet(tmp_path / "in" / name / f"dt={DAY}" / "part-0.parquet", engine="pyarrow")
    assert "ns" in str(pq.read_schema(tmp_path / "in" / "clicks" / f"dt={DAY}" / "part-0.parquet").field("ts").type)
    summary = run_day(spark, tmp_path)
    assert summary["input_rows"] == {"exposures": 6, "clicks": 3}
    assert summary["data_quality"]["rejected_exposures"] == {}
    assert summary["data_quality"]["clicked_exposures"] == 3


def test_an_item_in_two_categories_is_counted_and_reported(spark, tmp_path):
    day_input(tmp_path)
    write(
        tmp_path / "in" / "items",
        [("a", "books"), ("a", "toys"), ("b", "toys"), ("c", "food")],
        pa.schema([("item_id", pa.string()), ("category", pa.string())]),
    )
    summary = run_day(spark, tmp_path)
    assert summary["data_quality"]["items_in_several_categories"] == 1
    assert any("several categories" in n and "a" in n for n in summary["notes"])


def test_a_broken_earlier_day_is_a_note_not_a_failure(spark, tmp_path):
    day_input(tmp_path)
    before = tmp_path / "in" / "exposures" / "dt=2026-11-19"
    before.mkdir(parents=True)
    (before / "part-00000.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    (tmp_path / "in" / "clicks" / "dt=2026-11-18").mkdir(parents=True)  # empty partition
    summary = run_day(spark, tmp_path)
    notes = " | ".join(summary["notes"])
    assert "update_rate and exposure_change skipped" in notes and "dt=2026-11-19" in notes
    assert "novelty: the clicks of 2026-11-18 left out" in notes
    assert "exposure_change" not in rules_of(summary)
    assert summary["headline"]["auc_global"] is not None


def test_an_output_root_that_cannot_be_written_fails_before_computing(spark, tmp_path):
    day_input(tmp_path)
    (tmp_path / "blocker").write_text("a file where a directory should be")
    with pytest.raises(OutputError, match="output root .*blocker/out is not writable") as err:
        evaluate_day(spark, load_config(), DAY, str(tmp_path / "in"), str(tmp_path / "blocker" / "out"))
    assert err.value.exit_code == 10


def test_a_corrupt_partition_names_the_file_and_the_root_cause(spark, tmp_path):
    day_input(tmp_path)
    (tmp_path / "in" / "clicks" / f"dt={DAY}" / "part-00001.parquet").write_bytes(b"PAR1 garbage PAR1")
    with pytest.raises(Exception) as err:
        run_day(spark, tmp_path)
    message = str(err.value)
    assert getattr(err.value, "exit_code", None) == 6
    assert "An error occurred while calling" not in message
    assert "corrupted file" in message  # the root cause, from the bottom of the Java chain
    assert "part-00001.parquet" in message
    assert not (tmp_path / "out").exists()


# --- inputs as teams have them (issue 42) -----------------------------------------------------------------------
def test_positions_counted_from_0_are_refused_under_base_1_and_read_under_base_0(spark, tmp_path):
    # zero-based positions set aside every list's top item (a third of these rows) as bad_position, exit 0, and
    # the day's NDCG came from the rest; now the day is refused naming the column, or read as 1-based
    from recsys_spark.errors import SchemaError

    zero_based = [r[:4] + (r[4] - 1,) + r[5:] for r in EXPOSURES]
    write(tmp_path / "in" / "exposures" / f"dt={DAY}", zero_based, EXPOSURE_SCHEMA.set(4, pa.field("rank", pa.int32())))
    write(tmp_path / "in" / "clicks" / f"dt={DAY}", CLICKS, CLICK_SCHEMA)
    with pytest.raises(
        SchemaError,
        match=r"column 'position' \(the input's 'rank'\) of exposures partition .*dt="
        r"2026-11-20: 3 of 6 rows are at position 0.*set input.position_base = 0",
    ) as err:
        run_day(spark, tmp_path, 'input.columns={position = "rank"}')
    assert err.value.exit_code == 5
    assert not (tmp_path / "out" / "metrics").exists()  # nothing written
    based = run_day(spark, tmp_path, 'input.columns={position = "rank"}', "input.position_base=0", out="zero")
    day_input(tmp_path / "one")
    one = run_day(spark, tmp_path / "one")
    assert based["data_quality"]["rejected_exposures"] == {}
    assert based["headline"] == pytest.approx(one["headline"], nan_ok=True)
    ours = spark.read.parquet(str(tmp_path / "zero" / "metrics" / f"dt={DAY}")).collect()
    theirs = {
        (r.metric, r.k, r.aggregation, r.slice): r.value
        for r in spark.read.parquet(str(tmp_path / "one" / "out" / "metrics" / f"dt={DAY}")).collect()
    }
    for r in ours:
        assert theirs[(r.metric, r.k, r.aggregation, r.slice)] == pytest.approx(r.value, nan_ok=True)


def test_exposures_and_clicks_map_their_own_timestamp_columns(spark, tmp_path):
    # one input.columns served every input: exposures' shown_at and clicks' clicked_at could not both be the ts
    write(tmp_path / "in" / "exposures" / f"dt={DAY}", EXPOSURES, EXPOSURE_SCHEMA.set(6, pa.field("shown_at", TS)))
    write(tmp_path / "in" / "clicks" / f"dt={DAY}", CLICKS, CLICK_SCHEMA.set(4, pa.field("clicked_at", TS)))
    mapped = run_day(spark, tmp_path, 'input.columns={exposures = {ts = "shown_at"}, clicks = {ts = "clicked_at"}}')
    day_input(tmp_path / "plain")
    plain = run_day(spark, tmp_path / "plain")
    assert mapped["status"] == plain["status"]
    assert mapped["data_quality"]["clicked_exposures"] == plain["data_quality"]["clicked_exposures"] == 3
    assert mapped["headline"] == pytest.approx(plain["headline"], nan_ok=True)
