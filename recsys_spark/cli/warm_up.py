"""``recsys-spark warm-up``: record the Java classes a run loads, so that later local runs start faster.

Runs the demo's tour on one small day in a JVM started with ``-XX:ArchiveClassesAtExit``, waits for that JVM
to exit (it writes the archive then), and renames the archive into place whole (:mod:`recsys_spark.jvm`).
``make`` runs it once after installing; run it again after upgrading Java or pyspark (the archive of the old
ones is simply not used).  Only local sessions the job builds itself use it; ``spark-submit`` is unaffected.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time

from recsys_spark.cli.common import Command
from recsys_spark.errors import UsageError

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
    from recsys_spark import jvm
    from recsys_spark.cli import demo

    target = jvm.archive_path()
    if target is None:
        raise UsageError("no java found (JAVA_HOME or PATH): Spark needs Java 17")
    if target.is_file() and not args.force:
        print(f"warm-up: the class-data archive of this Java and pyspark is there already: {target}")
        return 0
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="recsys-spark-warm-up-") as root, jvm.recorded(force=True) as recording:
        if recording is None:
            raise UsageError("warm-up needs a process of its own (a JVM runs in this one already)")
        tour = argparse.Namespace(
            root=root, users=60, days=1, set=[], config=None, master="local[2]", verbose=False, log_format="json"
        )
        with contextlib.redirect_stdout(io.StringIO()):
            demo.run(tour, record=False)
    if not target.is_file():
        raise UsageError(f"the JVM wrote no class-data archive ({target}): later runs start as before")
    size = target.stat().st_size / 2**20
    print(f"warm-up: {size:.0f} MiB of Java classes recorded in {time.monotonic() - began:.0f} s: {target}")
    return 0


COMMAND = Command("warm-up", HELP, DESCRIPTION, EXAMPLE, add_arguments, run, spark=False)
