"""The command line as users and schedulers call it: outputs, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recsys_spark.cli import run

DATE = "2026-11-20"
CLI = [sys.executable, "-m", "recsys_spark.cli"]


def cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("recsys-spark: error:")]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0]


@pytest.mark.parametrize(
    "args, code, needle",
    [
        (["evaluate", "--input-root", "i", "--output-root", "o"], 2, "--date"),
        (["evaluate", "--date", "2026-13-01", "--input-root", "i", "--output-root", "o"], 2, "2026-13-01"),
        (["evaluate", "--date", DATE], 2, "--input-root"),
        (["frobnicate"], 2, "frobnicate"),
        (
            ["evaluate", "--start", "2026-11-05", "--end", "2026-11-01", "--input-root", "i", "--output-root", "o"],
            2,
            "before",
        ),
        (
            ["evaluate", "--date", DATE, "--input-root", "i", "--output-root", "o", "--set", "metrics.kk=1"],
            3,
            "metrics.kk",
        ),
        (
            ["evaluate", "--date", DATE, "--input-root", "i", "--output-root", "o", "--config", "/no/such.toml"],
            3,
            "/no/such.toml",
        ),
    ],
)
def test_bad_arguments_exit_with_one_line_before_spark_starts(capsys, args, code, needle):
    assert run(args) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("recsys-spark: error:") and needle in err


@pytest.mark.parametrize(
    "args, needle",
    [
        (["evalute", "--date", DATE], "did you mean 'evaluate'?"),
        (
            ["evaluate", "--date", DATE, "--input-root", "i", "--output-root", "o", "--set", "metrics.kk=[5]"],
            "unknown config key: metrics.kk (did you mean metrics.k?)",
        ),
        (
            [
                "evaluate",
                "--date",
                DATE,
                "--input-root",
                "i",
                "--output-root",
                "o",
                "--set",
                "input.columns={user_id=uid}",
            ],
            "config key input.columns: --set value '{user_id=uid}' is not valid TOML",
        ),
    ],
)
def test_a_mistyped_command_key_or_value_gets_a_suggestion(capsys, args, needle):
    assert run(args) in (2, 3)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("recsys-spark: error:") and needle in line


def test_a_bare_call_lists_the_commands_and_version_names_the_release(capsys):
    from recsys_spark import __version__

    assert run([]) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: recsys-spark")
    assert all(name in out for name in ("evaluate", "experiment", "offline", "offline-compare", "gate", "report"))
    with pytest.raises(SystemExit) as done:
        run(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"recsys-spark {__version__}"


@pytest.mark.parametrize("command", ["evaluate", "experiment", "offline", "offline-compare", "gate", "report"])
def test_every_command_has_a_description_an_example_and_the_exit_codes(capsys, command):
    with pytest.raises(SystemExit):
        run([command, "--help"])
    text = capsys.readouterr().out
    assert f"example:\n  recsys-spark {command} " in text
    assert "exit codes: 0 success" in text and "143 stopped by SIGTERM" in text
    assert text.split("\n\n")[1].strip()  # a description paragraph after the usage


@pytest.mark.parametrize(
    "extra, env, given",
    [
        ([], {"SPARK_REMOTE": "sc://localhost:15002"}, "SPARK_REMOTE=sc://localhost:15002"),
        (["--master", "sc://spark-connect.example:15002"], {}, "--master sc://"),
        (["--set", 'spark={"spark.api.mode" = "connect"}'], {}, "spark.api.mode=connect"),
    ],
)
def test_spark_connect_is_refused_with_one_line_naming_what_is_not_supported(tmp_path, extra, env, given):
    """The commands need a classic session (recsys_spark/runtime/engine.py): asked for Spark Connect, one line
    and exit 2 before any JVM or Connect server starts, never a traceback or a hang on a gRPC channel."""
    proc = subprocess.run(
        [*CLI, "evaluate", "--date", DATE, "--input-root", str(tmp_path), "--output-root", str(tmp_path / "o"), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert_one_line_error(proc, 2, "Spark Connect is not supported", "classic session", given)
    assert not (tmp_path / "o").exists()


def test_ope_on_spark_connect_is_refused_with_the_same_line(tmp_path):
    """docs/ope.md: the command is refused on Connect as every command is (exit 2, one line, no JVM); the
    run itself runs on Connect from Python
    (tests/ops/test_connect.py::test_ope_on_spark_connect_equals_the_classic_run)."""
    args = ["--run", "x", "--start", DATE, "--end", DATE, "--input-root", str(tmp_path), "--output-root"]
    proc = subprocess.run(
        [*CLI, "ope", *args, str(tmp_path / "o"), "--set", f'ope.target="{tmp_path}/target"'],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SPARK_REMOTE": "sc://localhost:15002"},
    )
    assert_one_line_error(proc, 2, "Spark Connect is not supported", "classic session", "SPARK_REMOTE=")
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "recsys_spark.synthetic.generate",
            "--date",
            DATE,
            "--output-root",
            str(root / "in"),
            "--users",
            "150",
            "--seed",
            "5",
        ],
        check=True,
        capture_output=True,
    )
    return root


def _orphans_by_hand(root: Path) -> int:
    """Events that match no exposure, by brute force in pandas: a keyed event whose (request, item) was
    not shown, or a loose one with no exposure of its user, session and item in [ts - 30 min, ts]."""
    import pandas as pd

    exposures = pd.read_parquet(root / "exposures" / f"dt={DATE}")
    clicks = pd.read_parquet(root / "clicks" / f"dt={DATE}")
    shown = exposures[exposures.item_id.notna()]
    keyed = clicks[clicks.request_id.notna()]
    pairs = set(zip(shown.request_id, shown.item_id, strict=True))
    keyed_orphans = sum((r, i) not in pairs for r, i in zip(keyed.request_id, keyed.item_id, strict=True))
    loose = clicks[clicks.request_id.isna()].reset_index(names="event_no")
    candidates = loose.merge(
        shown[["user_id", "session_id", "item_id", "ts"]],
        on=["user_id", "session_id", "item_id"],
        suffixes=("", "_exp"),
    )
    fits = candidates[
        (candidates.ts_exp <= candidates.ts) & (candidates.ts - candidates.ts_exp <= pd.Timedelta(minutes=30))
    ]
    return keyed_orphans + len(loose) - fits.event_no.nunique()


@pytest.mark.spark
@pytest.mark.process
def test_cli_on_a_generated_day_writes_the_three_outputs(generated):
    out = generated / "out"
    proc = cli(
        "evaluate",
        "--date",
        DATE,
        "--input-root",
        str(generated / "in"),
        "--output-root",
        str(out),
        "--master",
        "local[2]",
        "--set",
        "spark.spark.sql.shuffle.partitions=4",
        "--set",
        "rules.fail_on_hard=false",
    )  # generated days carry duplicates, as real logs do
    assert proc.returncode == 0, proc.stderr
    assert list((out / "metrics" / f"dt={DATE}").glob("*.parquet"))
    assert list((out / "user_metrics" / f"dt={DATE}").glob("*.parquet"))
    summary = json.loads((out / "summary" / f"dt={DATE}" / "summary.json").read_text())
    # generated days may break hard rules (duplicates, uncatalogued items); with fail_on_hard off the run
    # succeeds, and stdout says which status and which rules
    failed = [r["rule"] for r in summary["rules"] if not r["passed"]]
    assert summary["status"] == (
        "hard_rule_violated"
        if any(r["severity"] == "hard" and not r["passed"] for r in summary["rules"])
        else "soft_rule_failed"
        if failed
        else "ok"
    )
    assert f"{DATE}: {summary['status']}  auc_global=" in proc.stdout
    assert (f"rules failed: {', '.join(failed)}" in proc.stdout) == bool(failed)
    assert 0.5 < summary["headline"]["auc_global"] < 1.0
    assert summary["input_rows"]["exposures"] > 1000
    # every event is attributed or an orphan; the orphans, counted by hand from the generated files
    quality = summary["data_quality"]
    assert sum(quality["rejected_clicks"].values()) == 0
    assert quality["orphan_events"] == _orphans_by_hand(generated / "in")
    assert quality["orphan_events"] + quality["attributed_events"] == summary["input_rows"]["clicks"]
    # the driver log is JSON lines (recsys_spark/runtime/log.py): a start and an end line per stage, with the ids;
    # Spark's own lines ("spark_log") and the JVM's raw stderr ("stderr") are JSON too (tests/runtime/test_log.py)
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    events = [e for e in records if e["event"] not in ("spark_log", "stderr")]
    stages = [e["stage"] for e in events if e["event"] == "stage_end"]
    assert stages == ["read", "validate", "label", "metrics", "experiments", "health", "rules", "write"]
    assert [e["stage"] for e in events if e["event"] == "stage_start"] == stages
    assert {e["run_id"] for e in events} == {events[0]["run_id"]} and events[0]["run_id"]
    assert all(e["app_id"] for e in events if e["event"].startswith("stage"))
    # the generator writes an assignments table: one line per experiment
    assert f"{DATE}: experiment ranker_v2: SRM " in proc.stdout


@pytest.mark.spark
@pytest.mark.process
def test_missing_partition_is_one_line_and_exit_4_with_nothing_written(generated):
    out = generated / "out-missing"
    proc = cli(
        "evaluate",
        "--date",
        "2026-11-21",
        "--input-root",
        str(generated / "in"),
        "--output-root",
        str(out),
        "--master",
        "local[1]",
    )
    assert_one_line_error(proc, 4, "missing input", "dt=2026-11-21")
    assert not out.exists()


@pytest.mark.spark
@pytest.mark.process
def test_backfill_runs_every_date_and_reports_the_failed_ones(generated):
    out = generated / "out-backfill"
    proc = cli(
        "evaluate",
        "--start",
        "2026-11-19",
        "--end",
        DATE,
        "--input-root",
        str(generated / "in"),
        "--output-root",
        str(out),
        "--master",
        "local[2]",
        "--set",
        "rules.fail_on_hard=false",
        "--set",
        "metrics.k=[10]",
    )
    assert proc.returncode == 9, proc.stderr
    assert "2026-11-19: failed: missing input" in proc.stderr
    # not stopped by 11-19
    assert re.search(rf"^{DATE}: (ok|soft_rule_failed|hard_rule_violated)  auc_global=", proc.stdout, re.M)
    assert (out / "summary" / f"dt={DATE}" / "_SUCCESS").exists()
    assert not (out / "metrics" / "dt=2026-11-19").exists()
    assert "1 of 2 dates failed: 2026-11-19" in proc.stderr


def test_import_meanwhile_imports_on_its_thread_and_leaves_errors_to_the_command():
    import sys

    from recsys_spark.cli.common import import_meanwhile

    sys.modules.pop("colorsys", None)
    thread = import_meanwhile("no_such_module_for_recsys_spark", "colorsys")  # the failure does not stop the rest
    thread.join()
    assert "colorsys" in sys.modules and thread.name == "import-meanwhile"
    with pytest.raises(ModuleNotFoundError):
        import no_such_module_for_recsys_spark  # noqa: F401  # the command's own import raises as usual


def _ope_summary(status: str, recommended: dict) -> dict:
    return {
        "run": "cand",
        "start": DATE,
        "end": DATE,
        "status": status,
        "recommended": recommended,
        "diagnostics": {"users": 3.0, "rows": 9.0, "effective_sample_size": None},
        "estimates": {"logged": 0.1},
        "notes": [],
        "truth": {"value": 0.12, "delta": 0.02},
    }


@pytest.mark.parametrize(
    "status, recommended, code, first, why",
    [
        (
            "ok",
            {
                "estimator": "dr",
                "value": 0.0623,
                "ci_low": 0.0581,
                "ci_high": 0.0665,
                "delta": 0.0123,
                "delta_ci_low": 0.0081,
                "delta_ci_high": 0.0165,
                "reason": "dr: the narrowest interval that agrees with every wider one (ips, dr)",
            },
            0,
            "ok  recommended dr 0.0623 [0.0581, 0.0665], +0.0123 [+0.0081, +0.0165] against the logged policy",
            "  why: dr: the narrowest",
        ),
        (
            "no_propensities",
            {"estimator": None, "value": None, "reason": "no logged row has a propensity: nothing weighs the logs"},
            14,
            "no_propensities  no recommended estimate",
            "  why: no logged row has a propensity",
        ),
    ],
)
def test_ope_leads_with_the_recommended_estimate_and_exits_14_without_propensities(
    monkeypatch, capsys, tmp_path, status, recommended, code, first, why
):
    """docs/ope.md: the command's first line is the recommended estimate (or none), the next its reason; a run
    over logs without propensities wrote its summary but has no off-policy estimate: exit 14, not 0."""
    import recsys_spark.ope.run as ope_run
    import recsys_spark.runtime.session as session

    class Session:
        def stop(self) -> None:
            pass

    monkeypatch.setattr(session, "job_session", lambda *a, **k: Session())
    monkeypatch.setattr(ope_run, "run_ope", lambda *a, **k: _ope_summary(status, recommended))
    args = ["ope", "--run", "cand", "--start", DATE, "--end", DATE, "--input-root", str(tmp_path)]
    got = run([*args, "--output-root", str(tmp_path / "o"), "--set", 'ope.target="x"'])
    out = capsys.readouterr().out.splitlines()
    assert got == code
    assert out[0] == f"ope run=cand {DATE}..{DATE}: {first}"
    assert out[1].startswith(why)
    assert "  true value (the generator's): 0.12, +0.02 against the logged policy" in out
