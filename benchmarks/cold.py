"""Cold runs: the daily job as a user starts it (a new process) against a new process that runs the floor.

``python -m benchmarks.cold --size 2M --repeats 3`` (``make bench-cold``) times, each in a fresh process
and interleaved round by round:

* ``job``: ``recsys-spark evaluate`` on the day (``python -m recsys_spark.cli``), defaults, ``local[2]``, 2 GB
  driver -- JVM and Python start-up, session, every stage, every table written;
* ``floor_plain``: a process that builds the same session and runs the fixed plain floor
  (:meth:`benchmarks.bench.Day.floor_plain`: read, clicks deduplicated with a flag, a left join on
  (request, item), per-user rows and flags, 8 shuffle partitions);
* ``floor``: a process that builds the same session and runs the benchmark's floor
  (:meth:`benchmarks.bench.Day.floor`: read, dedupe, attribution join, per-user sums);
* ``startup``: a process that builds the session, counts the day's exposure rows (``spark.read.parquet``
  of the day's exposures, ``count()``) and stops: the start-up share that every run pays (the issue's "a cold
  process that only starts a local session and counts 1,000 rows");
* ``startup_plain``: the same without the class-data archive (:mod:`recsys_spark.runtime.jvm`; ``recsys-spark warm-up``
  records it): a plain cold Spark start.

Every process but ``startup_plain`` uses the archive when it exists; the job alone also decides on the client
compiler (a small day's exposure files).  The fixed cost of a small day is the job minus ``startup``.

Writes ``cold.md`` and ``cold.json`` under ``--root`` (default build/bench). Wall-clock seconds only; nothing here
is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.bench import DATE, ensure_day, parse_size

SETTINGS = ("local[2]", "2g")


def _session():
    from recsys_spark.runtime.session import build_session, job_settings

    master, memory = SETTINGS
    return build_session(
        "recsys-spark-cold", master, job_settings(10_000, {"spark.driver.memory": memory}), log_level="ERROR"
    )


def _run_floor(input_root: str, task: str = "floor") -> None:
    """A new session running one of the benchmark's floors (``floor`` or ``floor_plain``) on the day."""
    from benchmarks.bench import Day
    from recsys_spark.config import load_config

    spark = _session()
    try:
        Day(spark, load_config(None), "cold", input_root, tempfile.mkdtemp()).run(task)
    finally:
        spark.stop()


def _run_startup(input_root: str) -> None:
    spark = _session()
    try:
        spark.read.parquet(f"{input_root}/exposures").count()
    finally:
        spark.stop()


def _timed(cmd: Sequence[str], ok: Sequence[int] = (0,), env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    env = {**os.environ, **(env or {})}
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False, env=env)
    took = time.perf_counter() - started
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    return took


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("2M"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--root", default="build/bench")
    parser.add_argument("--run-floor", help=argparse.SUPPRESS)
    parser.add_argument("--run-floor-plain", help=argparse.SUPPRESS)
    parser.add_argument("--run-startup", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_floor:
        _run_floor(args.run_floor)
        return 0
    if args.run_floor_plain:
        _run_floor(args.run_floor_plain, "floor_plain")
        return 0
    if args.run_startup:
        _run_startup(args.run_startup)
        return 0
    root = Path(args.root).resolve()
    size, rows = args.size
    input_root = ensure_day(root / "data", rows, args.seed)
    python = sys.executable
    master, memory = SETTINGS
    commands = {
        "job": (
            [
                python,
                "-m",
                "recsys_spark.cli",
                "evaluate",
                "--date",
                DATE.isoformat(),
                "--input-root",
                str(input_root),
                "--output-root",
                str(root / "work" / "cold-job"),
                "--master",
                master,
                "--set",
                f"spark.driver.memory={memory}",
            ],
            (0, 8),  # 8: a hard rule violated (generated days break some on purpose); every table is written
        ),
        "floor_plain": ([python, "-m", "benchmarks.cold", "--run-floor-plain", str(input_root)], (0,)),
        "floor": ([python, "-m", "benchmarks.cold", "--run-floor", str(input_root)], (0,)),
        "startup": ([python, "-m", "benchmarks.cold", "--run-startup", str(input_root)], (0,)),
        "startup_plain": ([python, "-m", "benchmarks.cold", "--run-startup", str(input_root)], (0,)),
    }
    no_archive = tempfile.mkdtemp(prefix="cold-no-archive-")  # an empty cache: no class-data archive
    envs = {"startup_plain": {"RECSYS_SPARK_CACHE": no_archive}}
    env_note = f"PYTHONPATH={os.environ.get('PYTHONPATH', '')}"
    seconds: dict[str, list[float]] = {k: [] for k in commands}
    for round_no in range(args.repeats):
        for name, (cmd, ok) in commands.items():
            seconds[name].append(_timed(cmd, ok, envs.get(name)))
            print(f"[cold {size}] round {round_no + 1} {name}: {seconds[name][-1]:.2f} s", flush=True)
    med = {k: statistics.median(v) for k, v in seconds.items()}
    lines = [
        f"Cold runs on the {size} day ({input_root}), {args.repeats} interleaved round(s), medians; {env_note}",
        "",
        "| process | s | × cold plain floor | × cold floor |",
        "|---|---|---|---|",
        *(
            f"| {k} | {med[k]:.2f} | {med[k] / med['floor_plain']:.2f} | {med[k] / med['floor']:.2f} |"
            for k in commands
        ),
        "",
        f"Target: cold job <= 2.5x the cold plain floor: "
        f"{'met' if med['job'] <= 2.5 * med['floor_plain'] else 'NOT met'} ({med['job'] / med['floor_plain']:.2f}x). "
        f"Start-up share: {med['startup'] / med['job']:.0%} of the job, {med['startup'] / med['floor_plain']:.0%} "
        "of the plain floor.",
        f"Fixed cost of the day (job - startup): {med['job'] - med['startup']:.2f} s; against a plain start "
        f"(job - startup_plain): {med['job'] - med['startup_plain']:.2f} s.",
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "cold.md").write_text("\n".join(lines) + "\n")
    (root / "cold.json").write_text(json.dumps({"size": size, "rows": rows, "seconds": seconds}, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
