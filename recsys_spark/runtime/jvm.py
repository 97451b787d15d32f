"""The driver JVM's start-up options, for the local sessions the job builds itself.

A cold local run of a small day spends most of its time in the JVM, not on the data: loading and verifying
Spark's classes, and compiling them.  Two standard HotSpot options cut that (docs/performance.md, "The fixed
cost of a small day"):

* **A class-data archive** (HotSpot's AppCDS, ``-XX:SharedArchiveFile``): the classes a day loads, parsed and
  verified once and mapped from a file by every later JVM.  ``recsys-spark warm-up`` records it (a one-day
  tour with ``-XX:ArchiveClassesAtExit``; ``make test`` runs it, and ``demo`` records one as it goes when
  there is none: :func:`recorded`); it is kept per Java runtime and
  pyspark installation (:func:`archive_path`) and used when it exists.  It changes no result, only how fast
  the JVM starts: a missing or foreign archive means a plain start.  The JVM crashes on a truncated archive,
  so one is only ever renamed into place whole, after the JVM that wrote it has exited.
* **The client compiler only, and the serial collector** (``-XX:TieredStopAtLevel=1 -XX:+UseSerialGC``,
  :data:`SMALL_JVM`) for small inputs: the optimizing compiler and the parallel collector's threads compete
  with the work for the cores and pay off only on long runs and large heaps.  The code cache keeps the size
  it has with both compilers (240 MiB reserved): with the client compiler alone the JVM reserves 48 MiB,
  which a day's 20,000-odd compiled methods nearly fill (a longer run fills it, and the JVM then stops
  compiling and warns on the terminal).  ``evaluate`` of one date asks for them below
  :data:`SMALL_INPUT_BYTES` of the day's exposure files (:func:`input_bytes`): a short process.  A backfill,
  the demo and a large day run longer and are slower with them (the measurements: docs/performance.md).

Neither applies under ``spark-submit`` (the JVM is already running) or when the config sets
``spark.driver.extraJavaOptions`` itself.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from recsys_spark.runtime.fs import local_path

#: the day's exposure files below this size start the JVM with :data:`SMALL_JVM` (4 MiB: about 300,000
#: generated exposures, well below where the client compiler stops paying; docs/performance.md)
SMALL_INPUT_BYTES = 4 * 2**20
#: the options of a JVM for a small input
SMALL_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"
#: silence the JVM's own warning when an archive does not fit (a plain start follows)
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

_recording: Path | None = None


def java_executable() -> Path | None:
    """The ``java`` that spark-submit starts: ``$JAVA_HOME/bin/java``, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def cache_dir() -> Path:
    """``$RECSYS_SPARK_CACHE``, else ``$XDG_CACHE_HOME/recsys-spark``, else ``~/.cache/recsys-spark``."""
    if os.environ.get("RECSYS_SPARK_CACHE"):
        return Path(os.environ["RECSYS_SPARK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "recsys-spark"


def archive_path() -> Path | None:
    """Where the class-data archive of this Java runtime and pyspark installation lives (None without a
    ``java``).  The name hashes the runtime's path, size and time and pyspark's place and version: an
    upgrade of either names a new archive instead of reusing one that does not fit."""
    java = java_executable()
    if java is None:
        return None
    import pyspark

    stat = java.stat()
    key = f"{java}|{stat.st_size}|{stat.st_mtime_ns}|{Path(pyspark.__file__).parent}|{pyspark.__version__}"
    return cache_dir() / f"classes-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


@contextmanager
def recording(path: Path) -> Iterator[None]:
    """Sessions built inside start a JVM that writes its loaded classes to ``path`` when it exits."""
    global _recording
    _recording = path
    try:
        yield
    finally:
        _recording = None


def driver_options(small_input: bool) -> str:
    """HotSpot options for the driver of a local session: the archive (recording it inside
    :func:`recording`, else using it when it exists) and, for a small input, :data:`SMALL_JVM`."""
    options = []
    if _recording is not None:
        options += [f"-XX:ArchiveClassesAtExit={_recording}", _QUIET]  # quiet: classes it cannot keep
    else:
        archive = archive_path()
        if archive is not None and archive.is_file():
            options += [f"-XX:SharedArchiveFile={archive}", _QUIET]
    if small_input:
        options.append(SMALL_JVM)
    return " ".join(options)


def input_bytes(locations: Iterable[str]) -> int | None:
    """The bytes of the files under ``locations`` (local paths), or None when one is not a local path (a
    table, HDFS, S3: the size is not known before Spark starts).  A missing location counts 0 (the job
    reports it once Spark runs)."""
    total = 0
    for location in locations:
        path = local_path(location) if not location.startswith("table:") else None
        if path is None:
            return None
        for root, _, files in os.walk(path):
            total += sum(os.path.getsize(os.path.join(root, name)) for name in files)
    return total


@contextmanager
def recorded(force: bool = False) -> Iterator[Path | None]:
    """Record the classes of the JVM started inside into this runtime's archive, when there is none yet (or
    ``force``) and no JVM runs in this process yet; yields the archive's path when it records, else None.

    On the way out the JVM is stopped and waited for (it writes the archive as it exits), and the archive
    renamed into place whole once a JVM starts with it (:func:`maps`); on an error nothing is left behind, and
    a cache that cannot be written means no recording, not a failure.  For a command that owns its process
    (``demo``, ``warm-up``): the process's JVM is gone afterwards.
    """
    from pyspark import SparkContext

    target = archive_path()
    if target is None or (target.is_file() and not force) or SparkContext._gateway is not None:
        yield None
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # a cache that cannot be written: run as usual, without recording
        yield None
        return
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        with recording(partial):
            yield target
    except BaseException:
        wait_for_exit()
        partial.unlink(missing_ok=True)
        raise
    wait_for_exit()
    if partial.is_file() and maps(partial):
        os.replace(partial, target)  # whole, or not at all: the JVM crashes on a truncated archive
    partial.unlink(missing_ok=True)


def maps(archive: Path) -> bool:
    """Whether a JVM starts with ``archive`` (a truncated one, e.g. written to a full disk, aborts it)."""
    java = java_executable()
    if java is None:
        return False
    with tempfile.TemporaryDirectory(prefix="recsys-spark-cds-") as scratch:  # the crash report of a bad one
        command = [str(java), f"-XX:SharedArchiveFile={archive}", *_QUIET.split(), "-XX:-CreateCoredumpOnCrash"]
        command += [f"-XX:ErrorFile={scratch}/hs_err.log", "-version"]
        return subprocess.run(command, capture_output=True, check=False, cwd=scratch).returncode == 0


def wait_for_exit() -> None:
    """Stop this process's JVM and wait until it has exited (and so written an archive it records)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    process = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if process is not None:
        process.stdin.close()  # the JVM exits when its stdin closes (PythonGatewayServer)
        process.wait(timeout=300)
