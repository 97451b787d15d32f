"""Hostile settings and arguments, caught before Spark starts (exit 3), and errors that say why."""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
from pathlib import Path

import pytest

from recsys_spark.cli import run
from recsys_spark.config import load_config
from recsys_spark.errors import ConfigError, UnreadableInputError

ARGS = ["evaluate", "--date", "2026-11-20", "--input-root", "i", "--output-root", "o"]


@pytest.mark.parametrize(
    "override, key",
    [
        ("labels.event_weights={click = nan}", "labels.event_weights"),
        ("labels.event_weights={click = inf}", "labels.event_weights"),
        ("attribution.window_minutes=nan", "attribution.window_minutes"),
        ("rules.max_orphan_rate=nan", "rules.max_orphan_rate"),
        ("validation.ts_tolerance_minutes=inf", "validation.ts_tolerance_minutes"),
        ("slices.popularity_head_share=nan", "slices.popularity_head_share"),
    ],
)
def test_non_finite_numbers_are_rejected_naming_the_key(override, key):
    # NaN compares false both ways, so it passed every range check: weights of nan gave invalid JSON
    with pytest.raises(ConfigError, match=key):
        load_config(None, [override])


def test_non_finite_numbers_exit_3_before_spark_starts(capsys):
    assert run([*ARGS, "--set", "attribution.window_minutes=nan"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "attribution.window_minutes" in err and "finite" in err


def test_config_that_is_a_directory_or_not_utf8_exits_3(tmp_path, capsys):
    assert run([*ARGS, "--config", str(tmp_path)]) == 3
    assert "is a directory" in capsys.readouterr().err
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('[labels]\nclick_event = "cliqu\xe9"\n'.encode("latin-1"))
    assert run([*ARGS, "--config", str(latin1)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not UTF-8" in err and str(latin1) in err


def test_unknown_placeholder_in_an_input_path_exits_3(capsys):
    assert run([*ARGS, "--set", 'input.exposures="{input_root}/exposures/day={day}"']) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "input.exposures" in err and "{day}" in err
    with pytest.raises(ConfigError, match="input.clicks"):
        load_config(None, ['input.clicks="{input_root}/clicks/{date"'])


def test_time_zone_must_be_a_known_zone():
    assert load_config(None, ["validation.time_zone=Asia/Shanghai"]).validation.time_zone == "Asia/Shanghai"
    with pytest.raises(ConfigError, match="validation.time_zone"):
        load_config(None, ["validation.time_zone=Mars/Olympus"])


@pytest.mark.parametrize(
    "override, key",
    [
        # Python's zoneinfo accepts these files of its zoneinfo directory, Java's ZoneId.of (Spark's session) does not
        ("validation.time_zone=localtime", "validation.time_zone"),
        ('validation.time_zone="posix/America/New_York"', "validation.time_zone"),
        ('validation.time_zone="right/UTC"', "validation.time_zone"),
        ("validation.time_zone=Factory", "validation.time_zone"),
        ('validation.time_zone="+08:00"', "validation.time_zone"),  # Java's offset, which Python refuses
        # numbers that overflowed a date, an interval or the 32-bit k column once Spark had started
        ("attribution.window_minutes=1e13", "attribution.window_minutes"),
        ("attribution.window_minutes=2881", "attribution.window_minutes"),
        ("validation.ts_tolerance_minutes=1e13", "validation.ts_tolerance_minutes"),
        ("validation.ts_tolerance_minutes=1441", "validation.ts_tolerance_minutes"),
        ("health.novelty_days=1000000", "health.novelty_days"),
        ("metrics.k=[10, 2147483648]", "metrics.k"),
    ],
)
def test_settings_that_spark_or_java_would_refuse_later_exit_3_naming_the_key(override, key, capsys):
    # each passed validation, then failed after Spark had started: exit 1 naming no key (k: a traceback at the end)
    with pytest.raises(ConfigError, match=key) as err:
        load_config(None, [override])
    assert err.value.exit_code == 3
    assert run([*ARGS, "--set", override]) == 3
    out = capsys.readouterr().err
    assert out.count("\n") == 1 and f"config key {key}" in out


def test_the_largest_accepted_values_and_portable_zones_load():
    cfg = load_config(
        None,
        [
            "attribution.window_minutes=2880",
            "validation.ts_tolerance_minutes=1440",
            "health.novelty_days=366",
            "metrics.k=[1, 1000000]",
            "validation.time_zone=America/New_York",
        ],
    )
    assert (cfg.attribution.window_minutes, cfg.validation.ts_tolerance_minutes) == (2880.0, 1440.0)
    assert (cfg.health.novelty_days, cfg.metrics.k) == (366, (1, 1_000_000))
    for zone in ("UTC", "Etc/GMT-8", "Asia/Shanghai", "Europe/Berlin", "US/Eastern"):
        assert load_config(None, [f'validation.time_zone="{zone}"']).validation.time_zone == zone


def test_summary_is_strict_json():
    from recsys_spark.io.output import strict_json as summary_json

    text = summary_json({"headline": {"ndcg": float("nan"), "auc": float("inf"), "map": 0.5}, "n": [1.0, -math.inf]})
    assert json.loads(text) == {"headline": {"ndcg": None, "auc": None, "map": 0.5}, "n": [1.0, None]}
    assert "NaN" not in text and "Infinity" not in text


def test_day_bounds_are_instants_in_the_configured_zone():
    from recsys_spark.steps.validate import day_bounds

    start, end = day_bounds(dt.date(2026, 11, 20), 0, "Asia/Shanghai")
    utc = dt.timezone.utc
    assert start == dt.datetime(2026, 11, 19, 16, 0, tzinfo=utc) and end == dt.datetime(2026, 11, 20, 16, 0, tzinfo=utc)
    start, end = day_bounds(dt.date(2026, 11, 20), 60, "UTC")
    assert (start.utcoffset(), end - start) == (dt.timedelta(0), dt.timedelta(hours=26))
    # a day across a DST change is 23 hours long in its zone
    start, end = day_bounds(dt.date(2026, 3, 29), 0, "Europe/Berlin")
    assert end - start == dt.timedelta(hours=23)


# --- errors that say why ---------------------------------------------------------------------------
class _FakeJavaError(Exception):
    """A Py4J error: an uninformative first line, the root cause in the Java chain."""

    def __init__(self, java):
        super().__init__("An error occurred while calling o891.parquet.")
        self.java_exception = java


class _Java:
    def __init__(self, text, cause=None):
        self.text, self.cause = text, cause

    def toString(self):
        return self.text

    def getCause(self):
        return self.cause


def test_root_cause_walks_the_java_chain_to_the_message_and_the_file():
    from recsys_spark.errors import is_unreadable_input, root_cause

    chain = _Java(
        "org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 failed",
        _Java(
            "org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Error while reading file "
            "file:/data/exposures/dt=2026-11-20/part-0.parquet.",
            _Java(
                "java.lang.RuntimeException: part-0.parquet is not a Parquet file. Expected magic "
                "number at tail, but found [1, 2, 3, 4]"
            ),
        ),
    )
    message = root_cause(_FakeJavaError(chain))
    assert "is not a Parquet file" in message
    assert "file:/data/exposures/dt=2026-11-20/part-0.parquet" in message
    mkdirs = _FakeJavaError(_Java("java.io.IOException: Mkdirs failed to create file:/ro/out/_staging/x"))
    assert root_cause(mkdirs).startswith("java.io.IOException: Mkdirs failed to create file:/ro/out")
    checksum = _FakeJavaError(
        _Java(
            "org.apache.hadoop.fs.ChecksumException: Checksum error: "
            "file:/data/clicks/dt=2026-11-20/part-1.parquet at 0"
        )
    )
    assert "Checksum error" in root_cause(checksum) and is_unreadable_input(checksum)


def test_only_unreadable_input_is_relabelled_as_unreadable():
    from recsys_spark.steps.validate import count_rows

    class Failing:
        def __init__(self, exc):
            self.exc = exc

        def groupBy(self, *cols):
            raise self.exc

    # a bug (or an overflow) is not "unreadable input": it is raised as it is
    with pytest.raises(ZeroDivisionError):
        count_rows(Failing(ZeroDivisionError("division by zero")), "exposures partition", "/x")
    overflow = _FakeJavaError(_Java("org.apache.spark.SparkArithmeticException: [ARITHMETIC_OVERFLOW] overflow"))
    with pytest.raises(_FakeJavaError):
        count_rows(Failing(overflow), "exposures partition", "/x")
    corrupt = _FakeJavaError(_Java("java.lang.RuntimeException: /x/p.parquet is not a Parquet file"))
    with pytest.raises(UnreadableInputError, match="is not a Parquet file"):
        count_rows(Failing(corrupt), "exposures partition", "/x")


# --- backfills and the spark-submit entry point ------------------------------------------------------
class _Session:
    stopped = False

    def stop(self):
        self.stopped = True


def test_backfill_catches_every_failure_names_the_date_and_goes_on(monkeypatch, capsys):
    from recsys_spark import daily
    from recsys_spark.runtime import session

    done = []

    def evaluate(spark, cfg, day, input_root, output_root):
        if day == dt.date(2026, 11, 19):
            raise RuntimeError("executor lost: java.io.IOException: No space left on device")
        done.append(day)
        return {
            "status": "ok",
            "headline": {},
            "data_quality": {"duplicate_exposures": 0, "orphan_events": 0},
            "input_rows": {"exposures": 1, "clicks": 1},
            "rules": [],
        }

    monkeypatch.setattr(daily, "evaluate_day", evaluate)
    monkeypatch.setattr(session, "build_session", lambda **kwargs: _Session())
    code = run(["evaluate", "--start", "2026-11-18", "--end", "2026-11-20", "--input-root", "i", "--output-root", "o"])
    err = capsys.readouterr().err
    assert code == 9
    assert "2026-11-19: failed: unexpected RuntimeError: executor lost" in err
    assert done == [dt.date(2026, 11, 18), dt.date(2026, 11, 20)]  # went on after 11-19
    assert "1 of 3 dates failed: 2026-11-19" in err
    done.clear()
    code = run(
        [
            "evaluate",
            "--start",
            "2026-11-19",
            "--end",
            "2026-11-20",
            "--input-root",
            "i",
            "--output-root",
            "o",
            "--fail-fast",
        ]
    )
    assert code == 9 and done == []


def test_evaluate_daily_runs_with_or_without_the_evaluate_word():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "jobs"))
    try:
        from evaluate_daily import arguments
    finally:
        sys.path.pop(0)
    assert arguments(["--date", "2026-11-20"]) == ["evaluate", "--date", "2026-11-20"]
    assert arguments(["evaluate", "--date", "2026-11-20"]) == ["evaluate", "--date", "2026-11-20"]
    assert arguments(["--help"]) == ["--help"]
    for command in ("experiment", "offline", "offline-compare", "report"):  # every command can be submitted
        assert arguments([command, "--output-root", "o"]) == [command, "--output-root", "o"]


# --- names that become paths (issue 40, defect 9): one check, config.check_name, everywhere ----------------------
HOSTILE_NAMES = ["../../x", "..", ".", "a/b", "dt=2026-11-20", "_hidden", ".hidden", "x\n", "", "a" * 129]
DATES = ["--start", "2026-11-14", "--end", "2026-11-20"]
NAMED_FLAGS = [
    (["offline", "--output-root", "o", "--run", "{}"], "--run"),
    (["offline-compare", "--output-root", "o", "--base", "{}", "--candidate", "b"], "--base"),
    (["offline-compare", "--output-root", "o", "--base", "a", "--candidate", "{}"], "--candidate"),
    (["ope", "--run", "{}", *DATES, "--input-root", "i", "--output-root", "o"], "--run"),
    (["simulate", "--run", "{}", "--date", "2026-11-20", "--input-root", "i", "--output-root", "o"], "--run"),
    (["experiment", "--experiment", "{}", *DATES, "--output-root", "o"], "--experiment"),
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
@pytest.mark.parametrize("argv, flag", NAMED_FLAGS, ids=[f"{a[0]} {f}" for a, f in NAMED_FLAGS])
def test_a_name_flag_that_is_not_a_name_exits_2_naming_the_flag_before_spark(argv, flag, name, capsys, monkeypatch):
    import recsys_spark.runtime.session

    monkeypatch.setattr(recsys_spark.runtime.session, "job_session", lambda *a, **k: pytest.fail("Spark started"))
    assert run([a.replace("{}", name) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"recsys-spark: error: {flag} {name!r}: expected a name of letters, digits"), err
    # the experiment window's --experiment was not checked at all: ../../x wrote experiment_window/experiment=../../x


@pytest.mark.parametrize("key", ["gate.experiment", "gate.base", "gate.candidate"])
@pytest.mark.parametrize("name", ["../../x", "a/b", ".."])
def test_a_gate_key_that_becomes_a_path_is_checked_as_a_name_exit_3(key, name, tmp_path, capsys):
    config = tmp_path / "gate.toml"
    config.write_text(
        'source = "experiment"\nexperiment = "e"\nbase = "a"\ncandidate = "b"\nstart = "2026-11-14"\n'
        'end = "2026-11-20"\n[[checks]]\nmetric = "mrr"\naggregation = "user_avg"\nlower_bound = 0.1\n'.replace(
            "source", "[gate]\nsource"
        ).replace("[[checks]]", "[[gate.checks]]")
    )
    with pytest.raises(ConfigError, match=f"config key {key} '{name}': expected a name"):
        load_config(str(config), [f'{key}="{name}"'])
    assert run(["gate", "--name", "g", "--output-root", str(tmp_path), "--config", str(config),
                "--set", f'{key}="{name}"']) == 3  # fmt: skip
    assert f"config key {key} '{name}'" in capsys.readouterr().err
    assert not (tmp_path / "gate").exists()


def test_the_library_checks_names_where_they_become_paths():
    """A caller from Python (a notebook, a DAG) that skips the command line meets the same check."""
    from recsys_spark.daily.day import Simulation
    from recsys_spark.experiments.window import run_window
    from recsys_spark.gate import run_gate, verdict_path
    from recsys_spark.tables import OFFLINE_COMPARISON, OFFLINE_RUN, OPE, check_name

    cfg = load_config(None, ['simulation.lists="{input_root}/lists/{run}/dt={date}"'])
    for call in (
        lambda: OFFLINE_RUN.spell(run="../x"),
        lambda: OFFLINE_COMPARISON.spell(base="a", candidate="../x"),
        lambda: OPE.spell(run="../x"),
        lambda: verdict_path("o", "../x"),
        lambda: Simulation.resolve(cfg, "../x", "i", "2026-11-20"),
        lambda: run_window(None, cfg, "../x", dt.date(2026, 11, 14), dt.date(2026, 11, 20), "o"),  # type: ignore
        lambda: run_gate(None, cfg, "../x", "o"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConfigError, match="'../x': expected a name"):
            call()
    assert [check_name(n, "k") for n in ("a", "ranker_v2.1-b", "A" * 128)] == ["a", "ranker_v2.1-b", "A" * 128]


@pytest.mark.parametrize("value", ["3", "-1", "1000001", "2.5"])
def test_curve_points_below_two_cells_or_past_the_bound_exit_3_naming_the_key(value, capsys):
    assert run([*ARGS, "--set", f"metrics.curve_points={value}"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "metrics.curve_points" in err


def test_curve_points_0_turns_the_curves_off_and_5_is_the_smallest_bound():
    assert load_config(None, ["metrics.curve_points=0"]).metrics.curve_points == 0
    assert load_config(None, ["metrics.curve_points=5"]).metrics.curve_points == 5
    assert load_config(None, []).metrics.curve_points == 1001


@pytest.mark.parametrize(
    "override, key",
    [
        ("metrics.f_alphas=[0]", "metrics.f_alphas"),
        ("metrics.f_alphas=[-1.0]", "metrics.f_alphas"),
        ("metrics.f_alphas=[]", "metrics.f_alphas"),
        ("metrics.f_alphas=[1e9]", "metrics.f_alphas"),
        ("metrics.f_alphas=[nan]", "metrics.f_alphas"),
        ("metrics.click_cap=0", "metrics.click_cap"),
        ("metrics.click_cap=2.5", "metrics.click_cap"),
        ("rules.max_click_concentration=1.5", "rules.max_click_concentration"),
        ("rules.max_click_concentration=-0.1", "rules.max_click_concentration"),
    ],
)
def test_f_alphas_click_cap_and_the_concentration_threshold_are_checked(override, key, capsys):
    """F_alpha needs alpha > 0 (F_0 is precision, a name of its own); a cap below one click counts nothing; the
    concentration threshold is a share: each is one line, exit 3, before Spark starts."""
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(None, [override])
    assert run([*ARGS, "--set", override]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and key in err


def test_f_alphas_are_sorted_once_each_and_name_their_metrics():
    from recsys_spark.registry import f_score_name

    cfg = load_config(None, ["metrics.f_alphas=[2.0, 0.5, 2]"])
    assert cfg.metrics.f_alphas == (0.5, 2.0)
    assert [f_score_name(a) for a in cfg.metrics.f_alphas] == ["f0.5", "f2"]


@pytest.mark.parametrize(
    "override",
    [
        "offline.thresholds=[1.5]",
        "offline.thresholds=[-0.1]",
        "offline.thresholds=[0.5, 2]",
        'offline.thresholds=["half"]',
        "offline.thresholds=[nan]",
        "offline.thresholds=[true]",
        "offline.thresholds=0.5",
    ],
)
def test_an_offline_threshold_outside_0_1_or_not_a_number_is_refused(override, capsys, tmp_path):
    """A threshold cuts a probability: outside [0, 1] (or not a number, or not a list) is one line naming the key
    and exit 3, at config load, before Spark starts or any prediction is read (the predictions path is set)."""
    with pytest.raises(ConfigError, match=r"offline\.thresholds"):
        load_config(None, [override])
    args = ["offline", "--run", "r", "--output-root", str(tmp_path), "--set", f"offline.predictions={tmp_path}/p"]
    assert run([*args, "--set", override]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "offline.thresholds" in err and "[0, 1]" in err


def test_offline_thresholds_are_sorted_once_each_and_may_be_empty_or_hold_the_ends():
    assert load_config(None, []).offline.thresholds == (0.5,)
    assert load_config(None, ["offline.thresholds=[]"]).offline.thresholds == ()
    assert load_config(None, ["offline.thresholds=[1, 0, 0.5, 0.5]"]).offline.thresholds == (0.0, 0.5, 1.0)


@pytest.mark.parametrize(
    "override", ["metrics.thresholds=[1.5]", "metrics.thresholds=[-0.1]", "metrics.thresholds=[nan]"]
)
def test_a_daily_threshold_outside_0_1_is_refused_even_while_scores_are_not_probabilities(override, capsys, tmp_path):
    """metrics.thresholds cut probabilities: outside [0, 1] is one line naming the key and exit 3 before a row is
    read, whether or not metrics.score_is_probability turns them on (a wrong value waiting to be switched on)."""
    with pytest.raises(ConfigError, match=r"metrics\.thresholds"):
        load_config(None, [override])
    args = ["evaluate", "--date", "2026-11-20", "--input-root", str(tmp_path), "--output-root", str(tmp_path / "o")]
    assert run([*args, "--set", override]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "metrics.thresholds" in err and "[0, 1]" in err
    assert load_config(None, ["metrics.thresholds=[0.7, 0.2]"]).metrics.thresholds == (0.2, 0.7)
