"""``recsys-spark warm-up``: record the Java classes a run loads, so that later local runs start faster.

Runs the demo's tour on one small day in a process of its own whose JVM is started with
``-XX:ArchiveClassesAtExit`` (``demo --record-classes``: :func:`recsys_spark.runtime.jvm.recorded` waits for that JVM
to exit, when it writes the archive, and renames the archive into place whole).
``make`` runs it once after installing; run it again after upgrading Java or pyspark (the archive of the old
ones is simply not used).  Only local sessions the job builds itself use it; ``spark-submit`` is unaffected.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

from recsys_spark.cli.common import Command
from recsys_spark.errors import JobError, UsageError

HELP = "record the Java classes a day loads, so that later local runs start faster (once after installing)"
DESCRIPTION = (
    "Run the demo's tour on one small generated day in a JVM that records the classes it loads into a class-data "
    "archive (HotSpot's AppCDS), kept per Java runtime and pyspark installation under ~/.cache/recsys-spark "
    "($RECSYS_SPARK_CACHE). Later local runs map it instead of loading and verifying Spark's classes again: "
    "a cold small day starts seconds sooner. It changes no result; spark-submit runs do not use it."
)
EXAMPLE = "recsys-spark warm-up"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="record again even if this runtime's archive exists")


def run(args: argparse.Namespace) -> int:
    from recsys_spark.runtime import jvm

    target = jvm.archive_path()
    if target is None:
        raise UsageError("no java found (JAVA_HOME or PATH): Spark needs Java 17")
    if target.is_file() and not args.force:
        print(f"warm-up: the class-data archive of this Java and pyspark is there already: {target}")
        return 0
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="recsys-spark-warm-up-") as root:
        tour = ["demo", "--root", root, "--users", "60", "--days", "1", "--record-classes", "--log-format", "json"]
        done = subprocess.run([sys.executable, "-m", "recsys_spark.cli", *tour], capture_output=True, text=True)
    if done.returncode != 0 or not target.is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise JobError(f"the tour exited {done.returncode} without an archive (later runs start as before): {last}")
    size = target.stat().st_size / 2**20
    print(f"warm-up: {size:.0f} MiB of Java classes recorded in {time.monotonic() - began:.0f} s: {target}")
    return 0


COMMAND = Command("warm-up", HELP, DESCRIPTION, EXAMPLE, add_arguments, run, spark=False)
