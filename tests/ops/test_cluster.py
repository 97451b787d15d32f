"""The job through a real ``spark-submit`` on a real standalone cluster (127.0.0.1).

What local mode cannot show: the job runs from ``dist/recsys_spark.zip`` shipped
with ``--py-files`` (built by the same code as ``make package``), on a driver and
executors whose Python has pandas, pyarrow, numpy, scipy and jinja2 but not this project, with
``conf/spark-defaults.conf`` and ``conf/log4j2.properties``; its exit codes reach
spark-submit's.

The executors' venv is made once under ``build/exec-venv`` (about 15 s with pip's
cache).  The driver uses that venv too: ``.venv`` has the project installed in
editable mode, so its Python would import the repo's ``recsys_spark`` whatever
spark-submit ships; a Python without the project proves the zip is used.
pyspark itself comes from ``$SPARK_HOME/python/lib/pyspark.zip``, which
spark-submit and the worker put on the Python path, as on any Spark install.

Master, worker and spark-submit run in their own process groups, stopped by
pid (the whole group) by a finalizer, also when a test fails; should pytest
itself be killed, the kernel sends them SIGTERM (PR_SET_PDEATHSIG).

Slow (1.5-2.5 min on a busy 2-core box, most of it JVM start-up): marked ``cluster``
so that ``pytest -m "not cluster"`` leaves it out.
"""

from __future__ import annotations

import atexit
import datetime as dt
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]
DAY = dt.date(2026, 11, 20)
USERS = 300
START_TIMEOUT = 120.0  # seconds for master and worker (about 8 + 8 here)
SUBMIT_TIMEOUT = 600.0  # a run takes 40-140 s on this 2-core box, depending on its load
SPARK_LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?P<level>[A-Z]+) ", re.MULTILINE)


def _load_package_module():
    spec = importlib.util.spec_from_file_location("recsys_package_script", REPO / "jobs" / "package.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when pytest dies, even by SIGKILL (Linux prctl)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the finalizer and atexit still stop them


def _stop(proc: subprocess.Popen) -> None:
    """Stop ``proc`` and everything in its process group: TERM, then KILL after 15 s."""
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
    try:  # children left in the group (executors, Python workers) once the leader is gone
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _executor_logs(cluster: dict) -> str:
    """The end of each executor's stderr (the worker keeps them under work/app-*/N/)."""
    logs = sorted(cluster["work"].glob("app-*/*/stderr"))
    return "\n".join(f"--- {log}\n{_tail(log, 30)}" for log in logs[-2:]) or "(no executor log)"


def _clean_env(spark_home: Path, conf_dir: Path) -> dict[str, str]:
    """This environment without Spark/Python settings that could leak in, plus ours."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SPARK_", "PYSPARK_")) and k not in ("PYTHONPATH", "PYTHONHOME")
    }
    env.update(SPARK_HOME=str(spark_home), SPARK_CONF_DIR=str(conf_dir), SPARK_LOCAL_IP="127.0.0.1")
    return env


@pytest.fixture(scope="module")
def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    home = Path(_find_spark_home())
    assert (home / "bin" / "spark-submit").exists(), f"no bin/spark-submit under {home}"
    return home


@pytest.fixture(scope="module")
def artifacts() -> dict[str, Path]:
    """The --py-files zip and the executors' Python (cached in build/exec-venv)."""
    package = _load_package_module()
    return {"zip": package.build_zip(), "python": package.build_executor_venv()}


@pytest.fixture(scope="module")
def cluster(spark_home: Path, tmp_path_factory: pytest.TempPathFactory, request) -> dict:
    """A master and one worker (1 core, 1 GB) on 127.0.0.1; stopped however the tests end."""
    root = tmp_path_factory.mktemp("standalone")
    conf_dir = root / "conf"  # empty: the daemons log at INFO, nothing from the host leaks in
    conf_dir.mkdir()
    port, master_ui, worker_ui = _free_port(), _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    env = _clean_env(spark_home, conf_dir)
    env.update(
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",  # else a REST server on 6066
        SPARK_DAEMON_MEMORY="512m",
        SPARK_WORKER_DIR=str(root / "work"),  # default: inside the installed pyspark package
        SPARK_LOCAL_DIRS=str(root / "local"),
    )
    spark_class = str(spark_home / "bin" / "spark-class")
    procs: list[subprocess.Popen] = []

    def stop_all() -> None:  # idempotent: the finalizer, then atexit
        while procs:
            _stop(procs.pop())

    request.addfinalizer(stop_all)
    atexit.register(stop_all)  # also if the run is interrupted before the finalizer

    def start(name: str, *args: str) -> Path:
        log = root / f"{name}.log"
        with open(log, "wb") as out:
            procs.append(
                subprocess.Popen(
                    [spark_class, *args],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    cwd=root,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            )
        return log

    master_log = start(
        "master",
        "org.apache.spark.deploy.master.Master",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--webui-port",
        str(master_ui),
    )
    _wait_for(lambda state: state.get("status") == "ALIVE", master_ui, procs, master_log, "master ALIVE")
    worker_log = start(
        "worker",
        "org.apache.spark.deploy.worker.Worker",
        url,
        "--host",
        "127.0.0.1",
        "--cores",
        "1",
        "--memory",
        "1g",
        "--webui-port",
        str(worker_ui),
        "--work-dir",
        str(root / "work"),
    )
    _wait_for(lambda state: state.get("aliveworkers", 0) >= 1, master_ui, procs, worker_log, "worker registered")
    return {"url": url, "root": root, "work": root / "work"}


def _wait_for(ready: Callable[[dict], bool], master_ui: int, procs: list, log: Path, what: str) -> None:
    """Poll the master's JSON status page until ``ready``; fail with the log if a daemon dies."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                pytest.fail(f"{proc.args[1]} exited with {proc.returncode} before {what}:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{master_ui}/json/", timeout=2) as response:
                if ready(json.load(response)):
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    pytest.fail(f"no {what} after {START_TIMEOUT:.0f} s:\n{_tail(log)}")


@pytest.fixture(scope="module")
def input_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from recsys_spark.synthetic.generate import main as generate

    root = tmp_path_factory.mktemp("input")
    assert generate(["--date", DAY.isoformat(), "--output-root", str(root), "--users", str(USERS), "--seed", "7"]) in (
        0,
        None,
    )
    return root


def _submit(
    spark_home: Path,
    cluster: dict,
    artifacts: dict,
    day: dt.date,
    input_root: Path,
    output_root: Path,
    *job_args: str,
    watch: Callable[[str], None] | None = None,
) -> subprocess.CompletedProcess:
    """spark-submit the job as docs/operations.md says, from a directory outside the repo."""
    python = str(artifacts["python"])
    conf_dir = cluster["root"] / "submit-conf"  # empty: only what the command line names
    conf_dir.mkdir(exist_ok=True)
    cmd = [
        str(spark_home / "bin" / "spark-submit"),
        "--master",
        cluster["url"],
        "--load-spark-defaults",  # keep the cluster's own spark-defaults.conf (none here)
        "--properties-file",
        str(REPO / "conf" / "spark-defaults.conf"),
        "--driver-java-options",
        f"-Dlog4j.configurationFile=file:{REPO / 'conf' / 'log4j2.properties'}",
        "--conf",
        f"spark.pyspark.python={python}",
        "--conf",
        f"spark.pyspark.driver.python={python}",
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.sql.shuffle.partitions=2",  # --conf beats the properties file
        "--conf",
        "spark.ui.enabled=false",
        "--py-files",
        str(artifacts["zip"]),
        str(REPO / "jobs" / "evaluate_daily.py"),
        "evaluate",
        "--date",
        day.isoformat(),
        "--input-root",
        str(input_root),
        "--output-root",
        str(output_root),
        *job_args,
    ]
    cwd = cluster["root"]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=_clean_env(spark_home, conf_dir),
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    streams: dict[str, list[str]] = {"out": [], "err": []}

    def pump(stream, lines: list[str]) -> None:  # read as the run goes, so that ``watch`` sees each line
        for line in stream:
            lines.append(line)
            if watch is not None:
                watch(line)

    pumps = [
        threading.Thread(target=pump, args=(proc.stdout, streams["out"]), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, streams["err"]), daemon=True),
    ]
    for thread in pumps:
        thread.start()
    try:
        proc.wait(timeout=SUBMIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        _stop(proc)
        pytest.fail(f"spark-submit still running after {SUBMIT_TIMEOUT:.0f} s:\n{''.join(streams['err'])[-3000:]}")
    finally:
        _stop(proc)
        for thread in pumps:
            thread.join(timeout=30)
    return subprocess.CompletedProcess(cmd, proc.returncode, "".join(streams["out"]), "".join(streams["err"]))


def _local_run(input_root: Path, output_root: Path, *job_args: str) -> subprocess.CompletedProcess:
    """The job in local mode from the repo's package (the reference the cluster run is compared with)."""
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    cmd = [
        sys.executable,
        "-m",
        "recsys_spark.cli",
        "evaluate",
        "--date",
        DAY.isoformat(),
        "--input-root",
        str(input_root),
        "--output-root",
        str(output_root),
        "--master",
        "local[2]",
        "--set",
        "spark.spark.sql.shuffle.partitions=2",
        *job_args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=SUBMIT_TIMEOUT, env=env, cwd=REPO, check=False)


def _plain(frame):
    """Array and map cells (rule examples, experiment variants) as JSON text, so rows can be sorted and compared."""
    import numpy as np

    def cell(value):
        if isinstance(value, np.ndarray):
            value = value.tolist()
        return json.dumps(value, default=str, sort_keys=True) if isinstance(value, (list, tuple, dict)) else value

    for column in frame.columns:
        if frame[column].dtype == object:
            frame[column] = frame[column].map(cell)
    return frame


#: tables a small day may leave with no row (written with their columns): the interactions of 300 users' layers,
#: whose 2x2 cells fall under experiments.min_users_per_cell
MAY_BE_EMPTY = {"experiment_interactions"}


def _assert_same_table(got_dir: Path, want_dir: Path) -> None:
    """Equal Parquet tables up to row order; floats to 1e-9 (partition sums merge in any order)."""
    import pandas as pd

    got, want = _plain(pd.read_parquet(got_dir)), _plain(pd.read_parquet(want_dir))
    table = got_dir.parent.name
    assert list(got.columns) == list(want.columns), table
    assert len(got) == len(want), table
    assert len(got) > 0 or table in MAY_BE_EMPTY, table
    keys = [c for c in got.columns if not pd.api.types.is_float_dtype(got[c])]
    floats = [c for c in got.columns if c not in keys]
    order = keys + floats  # the keys identify a row; floats only break ties (lorenz: x)
    got = got.sort_values(order, na_position="first", kind="stable").reset_index(drop=True)
    want = want.sort_values(order, na_position="first", kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-9, atol=1e-12, obj=got_dir.name)


def test_the_executor_python_lacks_the_project(artifacts, tmp_path):
    """Else the cluster run below could not tell the zip from an installed package."""
    probe = subprocess.run(
        [str(artifacts["python"]), "-c", "import recsys_spark"],
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0 and "No module named 'recsys_spark'" in probe.stderr
    ok = subprocess.run(
        [str(artifacts["python"]), "-c", "import pandas, pyarrow, numpy, scipy, jinja2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr


def test_zip_holds_the_package_without_tests_or_bytecode(artifacts):
    import zipfile

    names = zipfile.ZipFile(artifacts["zip"]).namelist()
    assert "recsys_spark/__init__.py" in names and "recsys_spark/cli/__init__.py" in names
    assert "recsys_spark/kernels/__init__.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or "/tests/" in n]


def test_spark_submit_runs_the_day_on_the_cluster(spark_home, cluster, artifacts, input_root, tmp_path):
    output_root = tmp_path / "output"
    # the generator's day breaks two hard business rules on purpose (a repeated item, items
    # missing from the catalog): this test is about shipping the job, not about exit code 8
    result = _submit(spark_home, cluster, artifacts, DAY, input_root, output_root, "--set", "rules.fail_on_hard=false")

    assert result.returncode == 0, (
        f"spark-submit exited {result.returncode}:\n{result.stdout[-3000:]}\n"
        f"{result.stderr[-3000:]}\n{_executor_logs(cluster)}"
    )
    d = DAY.isoformat()
    for table in ("metrics", "user_metrics"):
        assert list((output_root / table / f"dt={d}").glob("*.parquet")), f"no {table}/dt={d}/*.parquet"
    summary_dir = output_root / "summary" / f"dt={d}"
    assert (summary_dir / "_SUCCESS").exists()
    summary = json.loads((summary_dir / "summary.json").read_text())
    assert f"{d}: {summary['status']}  auc_global=" in result.stdout  # ok, or hard_rule_violated (not fatal)
    # the numbers: the same day in local mode (the repo's package, this venv) gives the same tables
    local_root = tmp_path / "local"
    local = _local_run(input_root, local_root, "--set", "rules.fail_on_hard=false")
    assert local.returncode == 0, local.stderr[-3000:]
    tables = sorted(p.parent.name for p in output_root.glob(f"*/dt={d}") if list(p.glob("*.parquet")))
    assert {"metrics", "user_metrics"} <= set(tables)
    assert tables == sorted(p.parent.name for p in local_root.glob(f"*/dt={d}") if list(p.glob("*.parquet")))
    for table in tables:
        _assert_same_table(output_root / table / f"dt={d}", local_root / table / f"dt={d}")
    local_summary = json.loads((local_root / "summary" / f"dt={d}" / "summary.json").read_text())
    for key in ("status", "input_rows", "data_quality"):
        assert summary[key] == local_summary[key], key
    assert summary["headline"].keys() == local_summary["headline"].keys()
    for name, value in summary["headline"].items():
        want = local_summary["headline"][name]
        assert (value is None and want is None) or value == pytest.approx(want, rel=1e-9), name
    # the work ran on the cluster's executor, which fetched the zip from the driver
    assert list(cluster["work"].glob("app-*/*/recsys_spark.zip")), "the executor did not fetch the zip"
    # conf/log4j2.properties took effect: no INFO lines from Spark on the driver's stderr
    assert not [m.group(0) for m in SPARK_LOG_LINE.finditer(result.stderr) if m["level"] in ("INFO", "DEBUG")]


def test_missing_input_exits_4_with_one_error_line(spark_home, cluster, artifacts, input_root, tmp_path):
    missing_day = DAY + dt.timedelta(days=1)  # never generated
    result = _submit(spark_home, cluster, artifacts, missing_day, input_root, tmp_path / "output")

    both = f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    assert result.returncode == 4, f"spark-submit exited {result.returncode}\n{both}"
    # In client mode spark-submit's PythonRunner merges the Python driver's stderr into its
    # stdout: the job's stderr line arrives on spark-submit's stdout, as its last line.
    lines = (result.stdout + result.stderr).splitlines()
    errors = [line for line in lines if line.startswith("recsys-spark: error:")]
    assert len(errors) == 1, both
    assert "missing input" in errors[0] and f"dt={missing_day}" in errors[0]
    assert result.stdout.rstrip().splitlines()[-1] == errors[0], both
    assert "Traceback" not in result.stdout + result.stderr
    # conf/log4j2.properties took effect: no INFO lines from Spark
    assert not [m.group(0) for m in SPARK_LOG_LINE.finditer(result.stderr) if m["level"] in ("INFO", "DEBUG")]


def _executors(app_id: str) -> list[int]:
    """Pids of the executor JVMs of the application ``app_id`` (the worker starts them with ``--app-id``)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:  # the process ended meanwhile
            continue
        words = [a.decode(errors="replace") for a in args]
        if any(w.endswith("CoarseGrainedExecutorBackend") for w in words) and app_id in words:
            found.append(int(cmdline.parent.name))
    return found


def test_an_executor_killed_in_the_per_user_pass_gives_identical_output(
    spark_home, cluster, artifacts, input_root, tmp_path
):
    """SIGKILL the executor while the metric stage runs: its tasks rerun on a new executor, and the one
    pass's output is persisted rows, not an accumulator (a rerun task replaces its blocks, adds nothing), so
    every table equals a local run's."""
    killed: list[int] = []

    def watch(line: str) -> None:  # the job's JSON log lines name the application
        if not killed and '"stage_start"' in line and '"metrics"' in line:
            time.sleep(1.0)  # into the per-user pass
            for pid in _executors(json.loads(line)["app_id"]):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    output_root = tmp_path / "output"
    result = _submit(
        spark_home, cluster, artifacts, DAY, input_root, output_root, "--set", "rules.fail_on_hard=false", watch=watch
    )
    assert killed, f"no executor was running when the metric stage started:\n{result.stdout[-3000:]}"
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{_executor_logs(cluster)}"
    local_root = tmp_path / "local"
    local = _local_run(input_root, local_root, "--set", "rules.fail_on_hard=false")
    assert local.returncode == 0, local.stderr[-3000:]
    d = DAY.isoformat()
    for table in ("metrics", "user_metrics", "lorenz", "rule_checks"):
        _assert_same_table(output_root / table / f"dt={d}", local_root / table / f"dt={d}")
    summary = json.loads((output_root / "summary" / f"dt={d}" / "summary.json").read_text())
    local_summary = json.loads((local_root / "summary" / f"dt={d}" / "summary.json").read_text())
    assert summary["data_quality"] == local_summary["data_quality"]
