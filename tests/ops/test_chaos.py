"""Chaos: the driver killed (SIGKILL, SIGTERM) inside the commit and during the computation.

For each kill: a reader that follows the ``_SUCCESS`` contract sees the old day or the new one, never a
mix; the lock is released (SIGTERM) or taken over by the next run (SIGKILL); and a rerun gives output
identical to a clean run (values to 1e-12).  A SIGTERM while the driver waits in a ``collect`` or a write
(a py4j call) ends the run with 143 within seconds, one line, lock and staging released: for ``evaluate``,
``ope`` and ``offline``.  ``make test`` runs a seeded sample of the kill points; ``make chaos``
(``RECSYS_CHAOS=all``) runs every file operation of the commit with both signals, every collect of the
day, and more random moments.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from helpers.days import CLICKS, DAY, EXPOSURE_SCHEMA, EXPOSURES, day_input, write

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day

pytestmark = [pytest.mark.spark, pytest.mark.chaos]

OLD = ["metrics.k=[1]"]  # the day as an earlier run wrote it ...
NEW = ["metrics.k=[1, 2]"]  # ... and as the killed run (and the rerun) write it: user_metrics has k = 2 rows
TABLES = ("metrics", "user_metrics", "lorenz", "rule_checks", "summary")
HELPER = Path(__file__).parents[1] / "helpers" / "chaos.py"
SWEEP = os.environ.get("RECSYS_CHAOS") == "all"
COMMIT_CALLS = 40  # more than any commit makes (a commit of 5 tables makes about 25 file-system calls)
DAY_COLLECTS = 6  # the day's collects once its lock is taken (evaluate, this fixture); it stages one table
IN_SPARK = ("collect", "write")  # the kill points where the driver waits in a py4j call (tests/helpers/chaos.py)
PROMPT_SECONDS = 60  # a SIGTERM during a Spark job ends the run this soon (the job waits 300 s unless cancelled)


def _points() -> list[tuple[str, str]]:
    rng = random.Random(20261126)
    if SWEEP:
        commit = [(s, f"commit:{n}") for s in ("KILL", "TERM") for n in range(COMMIT_CALLS)]
        spark = [(s, f"collect:{n}") for s in ("TERM", "TERMGROUP") for n in range(DAY_COLLECTS)]
        spark += [("TERM", "write:0"), ("TERMGROUP", "write:0")]
        return commit + spark + [(s, f"after:{rng.uniform(8, 40):.1f}") for s in ("KILL", "TERM") for _ in range(4)]
    return [
        ("KILL", f"commit:{rng.randrange(2, 14)}"),
        ("TERM", f"commit:{rng.randrange(2, 14)}"),
        ("KILL", f"after:{rng.uniform(10, 25):.1f}"),
        ("TERM", f"collect:{rng.randrange(DAY_COLLECTS)}"),
        ("TERMGROUP", f"collect:{rng.randrange(DAY_COLLECTS)}"),  # the JVM's process group signalled too
    ]


def _kill(signal_name: str, when: str, argv: list[str], mark: Path) -> subprocess.CompletedProcess:
    """Run ``recsys-spark ARGV`` under the chaos helper, killed by ``signal_name`` at ``when``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HELPER.parents[2]), str(HELPER.parents[1])]),
        "RECSYS_CHAOS_MARK": str(mark),
    }
    return subprocess.run(
        [sys.executable, str(HELPER), signal_name, when, "--", *argv, "--master", "local[1]"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        start_new_session=True,  # a process group of its own, which TERMGROUP signals
    )


def _assert_terminated(done: subprocess.CompletedProcess, out: Path, mark: Path, ended: float) -> None:
    """Exit 143, one line and no traceback, the lock and staging released; after a signal sent during a
    Spark job (``mark`` written), within :data:`PROMPT_SECONDS` of it (the job was cancelled)."""
    assert done.returncode == 143, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == "recsys-spark: terminated (SIGTERM): no lock or staging left behind"
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr, done.stderr[-2000:]
    assert not list(out.rglob("_locks")) and not list(out.rglob("_staging")), sorted(out.rglob("*"))
    if mark.exists():
        assert ended - float(mark.read_text()) < PROMPT_SECONDS


def _table(out: Path, table: str) -> pd.DataFrame | dict:
    path = out / table / f"dt={DAY}"
    if table == "summary":
        summary = json.loads((path / "summary.json").read_text())
        return {k: summary[k] for k in ("status", "headline", "input_rows", "config_hash")}
    frame = pd.read_parquet(path)
    return frame.sort_values(list(frame.columns[:4])).reset_index(drop=True)


def _view(out: Path) -> dict | None:
    """What a reader following the contract sees: the day's tables when ``_SUCCESS`` exists, else None."""
    if not (out / "summary" / f"dt={DAY}" / "_SUCCESS").exists():
        return None
    return {t: _table(out, t) for t in TABLES}


def _same(a: dict, b: dict) -> bool:
    for table in TABLES:
        if table == "summary":
            if a[table]["config_hash"] != b[table]["config_hash"] or a[table]["input_rows"] != b[table]["input_rows"]:
                return False
            continue
        x, y = a[table], b[table]
        if list(x.columns) != list(y.columns) or len(x) != len(y):
            return False
        try:
            pd.testing.assert_frame_equal(x, y, check_exact=False, rtol=1e-12, atol=1e-12)
        except AssertionError:
            return False
    return True


@pytest.fixture(scope="module")
def references(spark, tmp_path_factory):
    """The old day and the new day, each from a clean run in this process."""
    root = tmp_path_factory.mktemp("chaos")
    inputs = day_input(root)
    views = {}
    for name, settings in (("old", OLD), ("new", NEW)):
        evaluate_day(spark, load_config(None, settings), DAY, str(inputs), str(root / name))
        views[name] = _view(root / name)
    assert not _same(views["old"], views["new"])  # the harness can tell them apart
    return root, views


@pytest.mark.parametrize("signal_name, when", _points())
def test_a_killed_run_leaves_the_old_day_or_the_new_one_and_a_rerun_is_clean(
    spark, references, tmp_path, signal_name, when
):
    root, views = references
    out = tmp_path / "out"
    shutil.copytree(root / "old", out)
    argv = ["evaluate", "--date", str(DAY), "--input-root", str(root / "in"), "--output-root", str(out)]
    argv += [a for s in NEW for a in ("--set", s)]
    done = _kill(signal_name, when, argv, tmp_path / "mark")
    killed = done.returncode == -signal.SIGKILL
    in_spark = when.partition(":")[0] in IN_SPARK  # the signal comes before the commit: never a 0
    if signal_name.startswith("TERM") and (done.returncode != 0 or in_spark):  # the handler ran
        _assert_terminated(done, out, tmp_path / "mark", time.time())
        if in_spark:
            assert _same(_view(out), views["old"])
    else:
        assert killed or done.returncode == 0, done.stderr[-2000:]
    seen = _view(out)
    if seen is not None:  # never a mix: the old day or the new one
        assert _same(seen, views["old"]) or _same(seen, views["new"]), when
    elif not killed:
        pytest.fail(f"{when}: no complete day after a run that was not SIGKILLed")
    # the next run takes the lock over (a dead process on this host), ends or undoes the killed commit
    evaluate_day(spark, load_config(None, NEW), DAY, str(root / "in"), str(out))
    assert _same(_view(out), views["new"])
    assert not (out / "_locks").exists() and not (out / "_staging").exists()


T0 = DAY.isoformat()
OPE_SCHEMA = EXPOSURE_SCHEMA.append(pa.field("propensity", pa.float64()))


def _ope(root: Path, out: Path) -> tuple[list[str], object]:
    """An ``ope`` run of the fixture's day (4 collects once its lock is taken) and the in-process rerun."""
    from recsys_spark.ope.run import run_ope

    inputs = day_input(root, clicks=CLICKS)
    write(inputs / "exposures" / f"dt={DAY}", [(*r, 0.5) for r in EXPOSURES], OPE_SCHEMA)
    (root / "target").mkdir()
    target = pd.DataFrame({"request_id": ["r1", "r2", "r3"], "item_id": ["b", "a", "c"], "probability": 1.0})
    target.assign(position=pd.array([1, 1, 1], dtype="int32")).to_parquet(root / "target" / "part-0.parquet")
    settings = [f'ope.target="{root / "target"}"']
    argv = ["ope", "--run", "r", "--start", T0, "--end", T0, "--input-root", str(inputs), "--output-root", str(out)]
    argv += [a for s in settings for a in ("--set", s)]

    def rerun(spark) -> Path:
        run_ope(spark, load_config(None, settings), "r", DAY, DAY, str(inputs), str(out))
        return out / "ope" / "summary" / "run=r" / "_SUCCESS"

    return argv, rerun


def _offline(root: Path, out: Path) -> tuple[list[str], object]:
    """An ``offline`` run (2 collects once its lock is taken, in its write stage) and the in-process rerun."""
    from recsys_spark.offline.run import run_offline

    frames = {
        "recs": pd.DataFrame(
            {"user_id": ["u1", "u1", "u2", "u2"], "item_id": list("abcd"), "score": [0.9, 0.8, 0.7, 0.6]}
        ),
        "truth": pd.DataFrame({"user_id": ["u1", "u2"], "item_id": ["b", "c"]}),
    }
    for name, frame in frames.items():
        (root / name).mkdir()
        frame.to_parquet(root / name / "part-0.parquet")
    settings = [f'offline.recommendations="{root / "recs"}"', f'offline.truth="{root / "truth"}"']
    argv = ["offline", "--run", "a", "--output-root", str(out), *(a for s in settings for a in ("--set", s))]

    def rerun(spark) -> Path:
        run_offline(spark, load_config(None, settings), "a", str(out))
        return out / "offline" / "summary" / "run=a" / "_SUCCESS"

    return argv, rerun


@pytest.mark.parametrize(
    "command, signal_name, when",
    [("ope", "TERM", "collect:1"), ("offline", "TERM", "collect:0"), ("offline", "TERMGROUP", "collect:1")],
)
def test_a_sigterm_during_a_collect_ends_143_with_the_lock_and_staging_released(
    spark, tmp_path, command, signal_name, when
):
    out = tmp_path / "out"
    argv, rerun = {"ope": _ope, "offline": _offline}[command](tmp_path, out)
    done = _kill(signal_name, when, argv, tmp_path / "mark")
    _assert_terminated(done, out, tmp_path / "mark", time.time())
    assert (tmp_path / "mark").exists()  # the signal came during the collect's job
    assert not list(out.rglob("_SUCCESS"))
    assert rerun(spark).exists()
    assert not list(out.rglob("_locks")) and not list(out.rglob("_staging"))
