"""Two runs of one date, killed runs and reruns: no corrupted partition, nothing stale left behind."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.days import DAY, EXPOSURES, day_input

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.errors import ConcurrentRunError

pytestmark = pytest.mark.spark

SETTINGS = ["metrics.k=[1]"]


def lock_file(out: Path) -> Path:
    return out / "_locks" / f"dt={DAY}.lock"


def hold_lock(out: Path, pid: int, age_seconds: float = 0.0) -> None:
    lock = lock_file(out)
    lock.parent.mkdir(parents=True, exist_ok=True)
    epoch = time.time() - age_seconds
    lock.write_text(
        json.dumps(
            {"run_id": f"{DAY}-feedbeef", "host": socket.gethostname(), "pid": pid, "started": "then", "epoch": epoch}
        )
    )


def test_two_concurrent_runs_of_one_date_never_nest_or_mix_partitions(tmp_path):
    day_input(tmp_path)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [
        sys.executable,
        "-m",
        "recsys_spark.cli",
        "evaluate",
        "--date",
        str(DAY),
        "--input-root",
        str(tmp_path / "in"),
        "--output-root",
        str(out),
        "--master",
        "local[1]",
        "--set",
        "metrics.k=[1]",
    ]
    runs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)
    ]
    results = [(p.wait(timeout=900), p.stderr.read()) for p in runs]
    codes = sorted(code for code, _ in results)
    # either both ran one after the other, or the second one saw the first one's lock and said so
    assert codes in ([0, 0], [0, 11]), results
    for code, err in results:
        if code == 11:
            assert "another run" in err and "is writing this date" in err
    for table in ("metrics", "user_metrics", "rule_checks", "summary", "lorenz"):
        partition = out / table / f"dt={DAY}"
        assert partition.is_dir() and not list(partition.glob("dt=*")), table  # never nested
    assert (out / "summary" / f"dt={DAY}" / "_SUCCESS").exists()
    assert not (out / "_locks").exists() and not (out / "_staging").exists()


def test_a_live_run_holding_the_date_makes_the_second_fail_clearly(spark, tmp_path):
    day_input(tmp_path)
    out = tmp_path / "out"
    evaluate_day(spark, load_config(None, SETTINGS), DAY, str(tmp_path / "in"), str(out))
    before = sorted(p.name for p in (out / "metrics" / f"dt={DAY}").iterdir())
    hold_lock(out, os.getpid())  # this process is alive: a live run
    with pytest.raises(ConcurrentRunError, match=f"{DAY}-feedbeef") as err:
        evaluate_day(spark, load_config(None, SETTINGS), DAY, str(tmp_path / "in"), str(out))
    assert err.value.exit_code == 11
    assert sorted(p.name for p in (out / "metrics" / f"dt={DAY}").iterdir()) == before
    assert lock_file(out).exists()  # still the live run's
    # a lock whose process is gone, or older than output.stale_minutes, is a dead run's: taken over
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    hold_lock(out, int(dead.stdout))
    evaluate_day(spark, load_config(None, SETTINGS), DAY, str(tmp_path / "in"), str(out))
    hold_lock(out, os.getpid(), age_seconds=5 * 3600)
    evaluate_day(spark, load_config(None, SETTINGS), DAY, str(tmp_path / "in"), str(out))
    assert not lock_file(out).exists()


def test_the_staging_of_the_run_whose_lock_was_taken_over_is_swept_at_once(spark, tmp_path):
    # a run killed while it staged its tables leaves a fresh staging directory: the run that takes its lock over
    # knows it is dead and removes it whatever its age; a fresh staging directory of another run stays (it may be
    # a live run of another date on another host)
    day_input(tmp_path)
    out = tmp_path / "out"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    hold_lock(out, int(dead.stdout))
    killed = out / "_staging" / f"{DAY}-feedbeef" / "metrics"
    other = out / "_staging" / "2026-01-01-cafecafe" / "metrics"
    for path in (killed, other):
        path.mkdir(parents=True)
        (path / "part-00000.parquet").write_bytes(b"half")
    summary = evaluate_day(spark, load_config(None, SETTINGS), DAY, str(tmp_path / "in"), str(out))
    assert not killed.parent.exists() and other.exists()
    assert any(f"{DAY}-feedbeef" in note for note in summary["notes"])
    assert not lock_file(out).exists()


def test_a_lock_whose_heartbeat_stopped_is_taken_over(spark, tmp_path):
    # a run on another host (its pid cannot be checked) that beats every 2 s
    day_input(tmp_path)
    out = tmp_path / "out"
    lock = lock_file(out)
    lock.parent.mkdir(parents=True)
    holder = {"run_id": f"{DAY}-0ther0000", "host": "elsewhere", "pid": 1, "epoch": time.time(), "heartbeat": 2}
    lock.write_text(json.dumps(holder))
    with pytest.raises(ConcurrentRunError, match="0ther0000"):  # beating: alive
        evaluate_day(spark, load_config(None, SETTINGS), DAY, str(tmp_path / "in"), str(out))
    silent = time.time() - 9  # four beats (8 s) and more without a refresh: that run died
    os.utime(lock, (silent, silent))
    evaluate_day(spark, load_config(None, SETTINGS), DAY, str(tmp_path / "in"), str(out))
    assert not lock.exists() and (out / "summary" / f"dt={DAY}" / "_SUCCESS").exists()


def test_a_running_job_refreshes_its_lock(spark, tmp_path):
    from recsys_spark.io.staged import DailyOutput

    out = DailyOutput(spark, str(tmp_path), str(DAY), heartbeat_seconds=0.2)
    out.acquire()
    try:
        old = time.time() - 60
        os.utime(lock_file(tmp_path), (old, old))
        time.sleep(1.0)
        assert time.time() - lock_file(tmp_path).stat().st_mtime < 30
        assert json.loads(lock_file(tmp_path).read_text())["heartbeat"] == 0.2
    finally:
        out.abort()
    assert not lock_file(tmp_path).exists()


def test_a_killed_runs_staging_is_swept_by_age_never_a_live_runs(spark, tmp_path):
    day_input(tmp_path)
    out = tmp_path / "out"
    dead = out / "_staging" / "2026-11-19-0badc0de" / "metrics" / "dt=2026-11-19"
    young = out / "_staging" / "2026-11-18-5eedf00d" / "metrics" / "dt=2026-11-18"
    for path in (dead, young):
        path.mkdir(parents=True)
        (path / "part-0.parquet").write_bytes(b"half written")
    old = time.time() - 5 * 3600
    os.utime(dead.parents[1], (old, old))
    summary = evaluate_day(spark, load_config(None, SETTINGS), DAY, str(tmp_path / "in"), str(out))
    assert not dead.parents[1].exists()
    assert young.parents[1].exists()  # may be a live run: younger than output.stale_minutes
    assert any("2026-11-19-0badc0de" in n for n in summary["notes"])


def test_a_rerun_replaces_every_table_of_the_date_even_those_it_no_longer_writes(spark, tmp_path):
    outside = (["u9", "s9", "r9", "a", 1, 0.5, dt.datetime(2026, 11, 25, tzinfo=dt.timezone.utc)],)

    day_input(tmp_path, exposures=EXPOSURES + [tuple(outside[0])])
    out = tmp_path / "out"
    evaluate_day(
        spark, load_config(None, [*SETTINGS, "validation.write_rejected=true"]), DAY, str(tmp_path / "in"), str(out)
    )
    assert (out / "rejected" / f"dt={DAY}").is_dir()
    (out / "rejected" / "dt=2026-11-19").mkdir()  # another date: untouched
    evaluate_day(spark, load_config(None, SETTINGS), DAY, str(tmp_path / "in"), str(out))
    assert not (out / "rejected" / f"dt={DAY}").exists()
    assert (out / "rejected" / "dt=2026-11-19").is_dir()
    assert (out / "summary" / f"dt={DAY}" / "_SUCCESS").exists()
