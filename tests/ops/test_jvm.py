"""The driver JVM's start-up options (recsys_spark/runtime/jvm.py) and ``recsys-spark warm-up``.

The fast tests check which options a local session gets and when; the Spark test records a real class-data
archive and starts a JVM that must load Spark's classes from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recsys_spark.cli import run
from recsys_spark.runtime import jvm, session

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RECSYS_SPARK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_plain_start_without_an_archive_and_the_client_compiler_only_for_a_small_input(cache):
    assert jvm.driver_options(small_input=False) == ""
    small = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"
    assert jvm.driver_options(small_input=True) == small
    log4j = session.LOCAL_LOG4J_OPTION
    assert session.local_java_options(False) == log4j
    assert session.local_java_options(True) == f"{log4j} {small}"


def test_a_small_input_jvm_keeps_a_code_cache_a_day_cannot_fill():
    # with the client compiler alone HotSpot reserves 48 MiB of code cache; a cold day compiles about 20,000
    # methods (20 MiB), a few days in one process fill it, and the JVM stops compiling and warns
    java = jvm.java_executable()
    assert java is not None
    done = subprocess.run(
        [str(java), *jvm.SMALL_JVM.split(), "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    flags = {line.split()[1]: line.split()[3] for line in done.stdout.splitlines() if line.count("=") == 1}
    assert int(flags["ReservedCodeCacheSize"]) >= 200 * 2**20 and flags["TieredStopAtLevel"] == "1"


def test_the_archive_is_used_once_it_is_in_place_and_recorded_inside_recording(cache, tmp_path):
    archive = jvm.archive_path()
    assert archive is not None and archive.parent == cache and archive.suffix == ".jsa"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"x")
    options = jvm.driver_options(small_input=False).split()
    assert options[0] == f"-XX:SharedArchiveFile={archive}"
    assert "-Xlog:cds=off" in options  # a foreign archive: a plain start, without the JVM's warning
    with jvm.recording(tmp_path / "new.jsa"):
        recorded = jvm.driver_options(small_input=True).split()
    assert recorded[0] == f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}"
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in recorded)
    assert recorded[-3:] == jvm.SMALL_JVM.split()
    assert jvm.driver_options(small_input=False).split()[0].startswith("-XX:SharedArchiveFile")  # recording ended


def test_the_archive_is_named_for_the_java_runtime_and_the_pyspark_installation(cache, monkeypatch, tmp_path):
    import pyspark

    first = jvm.archive_path()
    monkeypatch.setattr(pyspark, "__version__", "0.0.1")
    assert jvm.archive_path() != first  # another pyspark: another archive, never one that does not fit
    monkeypatch.setattr(pyspark, "__version__", pyspark.__version__)
    fake = tmp_path / "jdk" / "bin" / "java"
    fake.parent.mkdir(parents=True)
    fake.write_text("")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert jvm.java_executable() == fake.resolve()
    assert jvm.archive_path() not in (None, first)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nothing"))
    assert jvm.archive_path() is None and jvm.driver_options(small_input=False) == ""


def test_an_archive_is_installed_only_if_a_jvm_starts_with_it(tmp_path):
    java = jvm.java_executable()
    assert java is not None
    whole = tmp_path / "whole.jsa"
    subprocess.run([str(java), f"-XX:ArchiveClassesAtExit={whole}", "-version"], capture_output=True, check=True)
    assert whole.stat().st_size > 10_000 and jvm.maps(whole)
    for size in (1000, whole.stat().st_size // 2):  # cut short, as a full disk leaves it: the JVM would abort
        cut = tmp_path / f"cut-{size}.jsa"
        cut.write_bytes(whole.read_bytes()[:size])
        assert not jvm.maps(cut)


def test_a_cache_that_cannot_be_written_means_no_recording(monkeypatch, tmp_path):
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("RECSYS_SPARK_CACHE", str(tmp_path / "file" / "cache"))
    with jvm.recorded() as archive:
        assert archive is None and "ArchiveClassesAtExit" not in jvm.driver_options(small_input=False)


def test_input_bytes_of_local_paths_only(tmp_path):
    day = tmp_path / "exposures" / "dt=2026-11-20"
    day.mkdir(parents=True)
    (day / "part-0.parquet").write_bytes(b"a" * 1000)
    (day / "sub").mkdir()
    (day / "sub" / "part-1.parquet").write_bytes(b"b" * 24)
    assert jvm.input_bytes([str(day)]) == 1024
    assert jvm.input_bytes([f"file://{day}", str(tmp_path / "missing")]) == 1024
    assert jvm.input_bytes([str(day), "hdfs://nn/logs/dt=2026-11-20"]) is None
    assert jvm.input_bytes(["table:logs.exposures[dt=2026-11-20]"]) is None


def _session_of(monkeypatch, argv):
    """The keyword arguments ``evaluate`` builds its session with (it stops there)."""
    seen = {}

    class Stop(Exception):
        pass

    def job_session(cfg, master=None, verbose=False, app_name="", small_input=False):
        seen["small_input"] = small_input
        raise Stop

    monkeypatch.setattr(session, "job_session", job_session)
    assert run(argv) == 1  # Stop is unexpected: one line, exit 1
    return seen


def test_evaluate_asks_for_the_client_compiler_for_a_small_day_only(monkeypatch, tmp_path):
    day = tmp_path / "in" / "exposures" / "dt=2026-11-20"
    day.mkdir(parents=True)
    (day / "part-0.parquet").write_bytes(b"a" * 1000)
    argv = ["evaluate", "--date", "2026-11-20", "--input-root", str(tmp_path / "in"), "--output-root", "o"]
    assert _session_of(monkeypatch, argv) == {"small_input": True}
    monkeypatch.setattr(jvm, "SMALL_INPUT_BYTES", 1000)
    assert _session_of(monkeypatch, argv) == {"small_input": False}
    table = ["--set", 'input.exposures="table:logs.exposures"']
    monkeypatch.setattr(jvm, "SMALL_INPUT_BYTES", 10**9)
    assert _session_of(monkeypatch, [*argv, *table]) == {"small_input": False}  # size unknown: the default
    week = ["evaluate", "--start", "2026-11-14", "--end", "2026-11-20", "--input-root", str(tmp_path / "in")]
    assert _session_of(monkeypatch, [*week, "--output-root", "o"]) == {"small_input": False}  # a backfill runs on


@pytest.mark.spark
def test_warm_up_records_an_archive_that_a_jvm_maps(tmp_path):
    env = {**os.environ, "RECSYS_SPARK_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "recsys_spark.cli", "warm-up"], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(files) == 1 and files[0].endswith(".jsa"), files  # whole, renamed into place: no partial left
    assert "Java classes recorded" in done.stdout
    again = subprocess.run(
        [sys.executable, "-m", "recsys_spark.cli", "warm-up"], env=env, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0 and "there already" in again.stdout
    # a session started with it loads Spark's classes from the archive (HotSpot logs each class's source)
    loaded = tmp_path / "classes.log"
    probe = (
        "from recsys_spark.runtime import session\n"
        "s = session.build_session('probe', 'local[1]', {session.JAVA_OPTIONS: "
        f"session.local_java_options(True) + ' -Xlog:class+load=info:file={loaded}'}}, 'ERROR')\n"
        "print(s.range(3).count())\n"
    )
    mapped = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert mapped.returncode == 0 and mapped.stdout.strip().endswith("3"), mapped.stderr[-2000:]
    sources = [line for line in loaded.read_text().splitlines() if " org.apache.spark.SparkContext " in line]
    assert sources and sources[0].endswith("source: shared objects file (top)"), sources
