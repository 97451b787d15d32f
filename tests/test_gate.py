"""``recsys-spark gate``: thresholds on interval bounds, slices by name, the verdict, the exit codes.

The checks themselves (kernels/gate.py) and the config are tested without Spark; the command over hand-written
offline and experiment-window tables with the shared session (marked spark), and its exit codes in a
subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recsys_spark.cli import run
from recsys_spark.config import load_config
from recsys_spark.errors import ConfigError, GateFailed, GateInconclusive
from recsys_spark.kernels.gate import GateCheck, Row, evaluate, gate_state, summary_line

REPO = Path(__file__).resolve().parents[1]

# --- the checks -----------------------------------------------------------------------------------------------
# ndcg@10 user_avg: the candidate is better on the point (+0.004) but its interval reaches below 0
NDCG = Row("ndcg@10_user_avg", "all", 0.31, 0.30, 0.32, 0.004, -0.001, 0.009, 0.013, -0.003, 0.029, 0.306)
# pv_failure_rate (lower is better): +0.002 [−0.001, +0.004] and a worse one, +0.008 [+0.006, +0.010]
FAILURES = Row("pv_failure_rate_global", "all", 0.012, None, None, 0.002, -0.001, 0.004, 0.2, -0.1, 0.4, 0.010)
WORSE = Row("pv_failure_rate_global", "platform=ios", 0.02, None, None, 0.008, 0.006, 0.010, 0.6, 0.4, 0.8, 0.012)


def test_better_on_the_point_but_not_on_the_bound_fails_on_the_bound_and_passes_on_the_point():
    check = GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.0)
    (bound,) = evaluate([check], [NDCG])
    (point,) = evaluate([GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.0, on="point")], [NDCG])
    assert not bound.passed and point.passed
    assert bound.bound == -0.001 and bound.checked == -0.001 and bound.value == 0.004
    assert bound.interval == (-0.001, 0.009) and bound.threshold == "min_absolute_change"
    assert "the interval's worse end is -0.001" in bound.why and "point 0.004" in bound.why
    assert point.checked == 0.004 and point.bound == -0.001  # the bound is reported, the point checked
    # the relative change: +1.3 % [−0.3 %, +2.9 %]; at least +1 % passes on the point only
    rel = GateCheck("ndcg", 10, "user_avg", min_relative_change=0.01)
    assert [r.passed for r in evaluate([rel], [NDCG])] == [False]
    assert [r.passed for r in evaluate([GateCheck(**{**rel.__dict__, "on": "point"})], [NDCG])] == [True]


def test_a_guardrail_inside_its_margin_passes_and_outside_fails_in_the_metrics_direction():
    margin = GateCheck("pv_failure_rate", None, "global", min_absolute_change=0.005, guardrail=True)
    (inside,) = evaluate([margin], [FAILURES])  # worse end +0.004 <= +0.005 allowed
    assert inside.passed and inside.bound == 0.004 and inside.limit == 0.005
    assert "may be worse (lower is better) by at most 0.005" in inside.why
    (outside,) = evaluate([GateCheck(**{**margin.__dict__, "min_absolute_change": 0.003})], [FAILURES])
    assert not outside.passed  # +0.004 > +0.003
    # a higher-is-better guardrail: ndcg may lose at most 0.002; its worse end is −0.001
    ndcg = GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.002, guardrail=True)
    assert [r.passed for r in evaluate([ndcg], [NDCG])] == [True]
    assert [r.passed for r in evaluate([GateCheck(**{**ndcg.__dict__, "min_absolute_change": 0.0005})], [NDCG])] == [
        False
    ]
    # a required gain on a lower-is-better metric: the failure rate must fall; it rose
    assert [
        r.passed for r in evaluate([GateCheck("pv_failure_rate", None, "global", min_absolute_change=0)], [FAILURES])
    ] == [False]


def test_value_thresholds_take_the_interval_end_that_faces_them():
    low = GateCheck("ndcg", 10, "user_avg", lower_bound=0.305, upper_bound=0.33)
    results = evaluate([low], [NDCG])  # value 0.31 [0.30, 0.32]
    assert [(r.threshold, r.passed, r.checked) for r in results] == [
        ("lower_bound", False, 0.30),
        ("upper_bound", True, 0.32),
    ]
    point = evaluate([GateCheck(**{**low.__dict__, "on": "point"})], [NDCG])
    assert [r.passed for r in point] == [True, True]


def test_a_missing_slice_or_metric_fails_by_name_and_a_bound_needs_an_interval():
    checks = [
        GateCheck("ndcg", 10, "user_avg", slice="platform=android", min_absolute_change=0.0),
        GateCheck("map", 10, "user_avg", min_absolute_change=0.0),
        GateCheck("pv_failure_rate", None, "global", upper_bound=0.05),  # the value has no interval
        GateCheck("pv_failure_rate", None, "global", slice="platform=ios", min_absolute_change=0.005, guardrail=True),
    ]
    slice_, metric_, no_interval, ios = evaluate(checks, [NDCG, FAILURES, WORSE])
    assert not slice_.passed
    assert slice_.why == "slice platform=android is missing from the results (slices found: all, platform=ios)"
    assert not metric_.passed and metric_.why == "map@10_user_avg is missing from the results on slice all"
    assert not no_interval.passed and 'on = "point" checks the point estimate' in no_interval.why
    assert not ios.passed  # the slice is there, and beyond the margin
    line = summary_line("g", [slice_, metric_, no_interval, ios])
    assert line.startswith("gate g: FAILED 4 of 4 checks: ") and "slice platform=android is missing" in line
    assert summary_line("g", [r for r in evaluate(checks[2:3], [NDCG, FAILURES]) if r.passed]) == (
        "gate g: PASSED 0 of 0 checks"
    )


# --- the three states: passed, failed, inconclusive (issue 42) -------------------------------------------------
def _states(checks: list[GateCheck], rows: list[Row]) -> list[str]:
    return [r.state for r in evaluate(checks, rows)]


@pytest.mark.parametrize(
    "check, row, state",
    [
        # a gain of at least m on ndcg +0.004 [−0.001, +0.009]: the interval straddles 0, lies below 0.01
        (GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.0), NDCG, "inconclusive"),
        (GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.01), NDCG, "failed"),
        (GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.002, guardrail=True), NDCG, "passed"),
        # relative: +1.3 % [−0.3 %, +2.9 %]
        (GateCheck("ndcg", 10, "user_avg", min_relative_change=0.01), NDCG, "inconclusive"),
        (GateCheck("ndcg", 10, "user_avg", min_relative_change=0.03), NDCG, "failed"),
        # the value 0.31 [0.30, 0.32]: a lower bound faces the low end, an upper bound the high end
        (GateCheck("ndcg", 10, "user_avg", lower_bound=0.29), NDCG, "passed"),
        (GateCheck("ndcg", 10, "user_avg", lower_bound=0.305), NDCG, "inconclusive"),
        (GateCheck("ndcg", 10, "user_avg", lower_bound=0.33), NDCG, "failed"),
        (GateCheck("ndcg", 10, "user_avg", upper_bound=0.31), NDCG, "inconclusive"),
        (GateCheck("ndcg", 10, "user_avg", upper_bound=0.29), NDCG, "failed"),
        # lower is better: the failure rate +0.002 [−0.001, +0.004] may rise by 0.003: maybe; [+0.006, +0.010]: no
        (
            GateCheck("pv_failure_rate", None, "global", min_absolute_change=0.003, guardrail=True),
            FAILURES,
            "inconclusive",
        ),
        (
            GateCheck("pv_failure_rate", None, "global", "platform=ios", min_absolute_change=0.005, guardrail=True),
            WORSE,
            "failed",
        ),
        (GateCheck("pv_failure_rate", None, "global", min_absolute_change=0.005, guardrail=True), FAILURES, "passed"),
        # on the point there is no interval to straddle: passed or failed
        (GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.0, on="point"), NDCG, "passed"),
        (GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.005, on="point"), NDCG, "failed"),
        # what cannot be checked fails: a missing slice, a bound without an interval
        (GateCheck("ndcg", 10, "user_avg", "platform=android", min_absolute_change=0.0), NDCG, "failed"),
        (GateCheck("pv_failure_rate", None, "global", upper_bound=0.05), FAILURES, "failed"),
    ],
)
def test_a_check_passes_fails_or_is_inconclusive_as_its_interval_sits_against_the_threshold(check, row, state):
    (result,) = evaluate([check], [row])
    assert result.state == state and result.passed is (state == "passed")
    assert result.as_dict()["state"] == state and result.as_dict()["passed"] is (state == "passed")


def test_an_inconclusive_check_says_both_ends_and_a_failed_one_its_better_end():
    (open_,) = evaluate([GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.0)], [NDCG])
    assert open_.favourable == 0.009 and open_.bound == -0.001
    assert open_.why.endswith("its better end is 0.009: the interval straddles the threshold"), open_.why
    (failed,) = evaluate([GateCheck("pv_failure_rate", None, "global", "platform=ios", min_absolute_change=0.005,
                                    guardrail=True)], [WORSE])  # fmt: skip
    assert failed.favourable == 0.006 and failed.why.endswith("even its better end is 0.006"), failed.why


def test_the_gate_takes_the_worst_state_and_words_it_never_inconclusive_as_failed():
    passed, open_, failed = (
        evaluate([GateCheck("ndcg", 10, "user_avg", min_absolute_change=m)], [NDCG])[0] for m in (-1.0, 0.0, 0.01)
    )
    assert passed.state == "passed" and open_.state == "inconclusive" and failed.state == "failed"
    assert gate_state([passed, passed]) == "passed"
    assert gate_state([passed, open_]) == "inconclusive"
    assert gate_state([passed, open_, failed]) == "failed"
    assert gate_state([passed], ["experiment invalid: sample-ratio mismatch"]) == "failed"
    assert summary_line("g", [passed, passed]) == "gate g: PASSED 2 of 2 checks"
    line = summary_line("g", [passed, open_, open_])
    assert line.startswith("gate g: NOT ENOUGH EVIDENCE YET: 2 of 3 checks inconclusive: ndcg@10_user_avg on all")
    assert "FAIL" not in line.upper().replace("FAILURE", "")
    line = summary_line("g", [passed, open_, failed])
    assert line.startswith("gate g: FAILED 1 of 3 checks: ndcg@10_user_avg on all min_absolute_change")
    assert line.endswith("(and 1 inconclusive: ndcg@10_user_avg on all min_absolute_change: change must gain at "
                         "least 0 (higher is better): the interval's worse end is -0.001 (point 0.004); its better "
                         "end is 0.009: the interval straddles the threshold)")  # fmt: skip


def test_each_check_states_its_unit_a_relative_change_as_a_percentage():
    relative, absolute, value = evaluate(
        [
            GateCheck("ndcg", 10, "user_avg", min_relative_change=0.01),
            GateCheck("ndcg", 10, "user_avg", min_absolute_change=0.0),
            GateCheck("ndcg", 10, "user_avg", lower_bound=0.3),
        ],
        [NDCG],
    )
    assert relative.unit == "percent" and relative.shown() == {
        "value": "+1.3 %", "interval": "[-0.3 %, +2.9 %]", "threshold": "1 %", "unit": "%",
    }  # fmt: skip
    assert "must gain at least +1 %" in relative.why and "the interval's worse end is -0.3 %" in relative.why
    assert absolute.as_dict()["unit"] == "metric" and absolute.as_dict()["shown"] == {
        "value": "+0.004", "interval": "[-0.001, +0.009]", "threshold": "0", "unit": "metric units",
    }  # fmt: skip
    assert value.shown() == {"value": "0.31", "interval": "[0.3, 0.32]", "threshold": "0.3", "unit": "metric units"}


def test_the_exit_code_says_the_state_unless_the_scheduler_reads_the_verdict():
    from recsys_spark.cli.gate import exit_code

    assert (GateInconclusive.exit_code, GateFailed.exit_code) == (13, 12)
    assert [exit_code(s) for s in ("passed", "inconclusive", "failed")] == [0, 13, 12]
    assert [exit_code(s, fail_on_verdict=False) for s in ("passed", "inconclusive", "failed")] == [0, 0, 0]
    assert load_config(None, ["gate.fail_on_verdict=false"]).gate.fail_on_verdict is False


def test_a_window_decision_of_an_earlier_release_is_read_in_todays_words():
    from recsys_spark.gate import decision_code

    assert decision_code("keep_running") == "not_enough_evidence"
    assert [decision_code(c) for c in ("ship", "do_not_ship", "not_enough_evidence", "invalid")] == [
        "ship", "do_not_ship", "not_enough_evidence", "invalid",
    ]  # fmt: skip


# --- the config: bad threshold files are one line and exit 3, before Spark starts -------------------------------
GOOD = """
[gate]
source = "offline"
base = "base"
candidate = "candidate"

[[gate.checks]]
metric = "ndcg"
k = 10
aggregation = "user_avg"
min_absolute_change = 0.0
"""


@pytest.mark.parametrize(
    "text, needle",
    [
        (GOOD.replace('metric = "ndcg"', 'metric = "ndgc"'), "unknown metric 'ndgc' (did you mean ndcg?)"),
        (GOOD.replace("k = 10\n", ""), "ndcg needs @k"),
        (GOOD.replace("min_absolute_change = 0.0", ""), "gate.checks[0] (ndcg@10_user_avg): no threshold"),
        (GOOD.replace("min_absolute_change = 0.0", "guardrail = true\nupper_bound = 1.0"), "needs its margin"),
        (GOOD + 'on = "bounds"\n', "on: expected one of bound, point, got 'bounds'"),
        (GOOD + "min_absolute_chnage = 1\n", "unknown config key: gate.checks[0].min_absolute_chnage (did you mean"),
        (GOOD.replace('source = "offline"', 'source = "online"'), "gate.source: expected one of offline, experiment"),
        (GOOD.replace('source = "offline"', ""), "config key gate.source"),
        (GOOD.replace('candidate = "candidate"', ""), "config key gate.candidate"),
        (GOOD.split("[[gate.checks]]")[0], "gate.checks: no check"),
        (GOOD.replace('"ndcg"', '"pv"').replace("k = 10\n", "").replace("user_avg", "global"), "pv has no better"),
        (GOOD + "min_relative_change = -0.1\n", "expected a non-negative number"),
        (GOOD + 'slice = "ios"\n', 'slice: expected "all" or NAME=VALUE'),
        (
            GOOD.replace('source = "offline"', 'source = "experiment"\nexperiment = "e"\nstart = "2026-11-31"'),
            "gate.start: expected a date YYYY-MM-DD",
        ),
        ("[gate\n", "is not valid TOML"),
    ],
)
def test_a_bad_threshold_file_is_one_clear_line_and_exit_3(tmp_path, capsys, text, needle):
    config = tmp_path / "gate.toml"
    config.write_text(text)
    assert run(["gate", "--name", "g", "--output-root", str(tmp_path), "--config", str(config)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("recsys-spark: error:") and needle in err, err


def test_a_gate_name_is_a_directory_of_its_own(tmp_path, capsys):
    config = tmp_path / "gate.toml"
    config.write_text(GOOD)
    assert run(["gate", "--name", "dt=2026-11-20", "--output-root", str(tmp_path), "--config", str(config)]) == 3
    assert "gate name 'dt=2026-11-20'" in capsys.readouterr().err
    assert GateFailed.exit_code == 12


def test_the_gate_keys_read_back_from_toml():
    cfg = load_config(
        None, ["gate.source=offline", 'gate.checks=[{metric = "mrr", aggregation = "user_avg", lower_bound = 0.1}]']
    )
    (check,) = cfg.gate.checks
    assert (check.key, check.on, check.guardrail, check.lower_bound, check.k) == (
        "mrr_user_avg",
        "bound",
        False,
        0.1,
        None,
    )
    with pytest.raises(ConfigError, match="mrr takes no @k"):
        load_config(None, ['gate.checks=[{metric = "mrr", k = 5, aggregation = "user_avg", lower_bound = 0.1}]'])


# --- the command over written tables -------------------------------------------------------------------------
def _write(path: Path, rows: list[dict], schema: pa.Schema) -> None:
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path / "part-0.parquet")


METRICS_SCHEMA = pa.schema(
    [
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("aggregation", pa.string()),
        ("slice", pa.string()),
        ("value", pa.float64()),
        ("n", pa.int64()),
        ("se", pa.float64()),
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("ci_method", pa.string()),
    ]
)
COMPARISON_SCHEMA = pa.schema(
    [(n, pa.string()) for n in ("column", "metric")]
    + [("k", pa.int32()), ("n", pa.int64())]
    + [
        (n, pa.float64())
        for n in (
            "base_mean",
            "candidate_mean",
            "delta",
            "se",
            "ci_low",
            "ci_high",
            "rel_delta",
            "rel_ci_low",
            "rel_ci_high",
            "p_value",
            "p_adjusted",
        )
    ]
    + [("method", pa.string()), ("correction", pa.string())]
)


def offline_outputs(root: Path) -> None:
    """Two complete offline runs and their comparison: ndcg@10 +0.004 [−0.001, +0.009], mrr +0.02 [+0.01, +0.03]."""
    off = root / "offline"
    for run_name in ("base", "candidate"):
        (off / "summary" / f"run={run_name}").mkdir(parents=True)
        (off / "summary" / f"run={run_name}" / "_SUCCESS").write_text("")
    _write(
        off / "metrics" / "run=candidate",
        [
            dict(
                metric="ndcg",
                k=10,
                aggregation="user_avg",
                slice="all",
                value=0.31,
                n=500,
                se=0.005,
                ci_low=0.30,
                ci_high=0.32,
                ci_method="t",
            ),
            dict(
                metric="item_coverage",
                k=None,
                aggregation="global",
                slice="all",
                value=0.4,
                n=600,
                se=None,
                ci_low=None,
                ci_high=None,
                ci_method="none",
            ),
        ],  # fmt: skip
        METRICS_SCHEMA,
    )
    pair = off / "summary" / "base=base" / "candidate=candidate"
    pair.mkdir(parents=True)
    (pair / "_SUCCESS").write_text("")
    _write(
        off / "comparison" / "base=base" / "candidate=candidate",
        [
            dict(
                column="ndcg_at_10",
                metric="ndcg",
                k=10,
                n=500,
                base_mean=0.306,
                candidate_mean=0.31,
                delta=0.004,
                se=0.0025,
                ci_low=-0.001,
                ci_high=0.009,
                rel_delta=0.013,
                rel_ci_low=-0.003,
                rel_ci_high=0.029,
                p_value=0.11,
                p_adjusted=0.11,
                method="paired_t",
                correction="holm",
            ),
            dict(
                column="mrr",
                metric="mrr",
                k=None,
                n=500,
                base_mean=0.5,
                candidate_mean=0.52,
                delta=0.02,
                se=0.005,
                ci_low=0.01,
                ci_high=0.03,
                rel_delta=0.04,
                rel_ci_low=0.02,
                rel_ci_high=0.06,
                p_value=1e-4,
                p_adjusted=2e-4,
                method="paired_t",
                correction="holm",
            ),
        ],  # fmt: skip
        COMPARISON_SCHEMA,
    )


def _config(tmp_path: Path, gate: str, checks: list[str]) -> str:
    text = "[gate]\n" + gate + "".join(f"\n[[gate.checks]]\n{c}\n" for c in checks)
    path = tmp_path / f"gate-{abs(hash(text))}.toml"
    path.write_text(text)
    return str(path)


OFFLINE = 'source = "offline"\nbase = "base"\ncandidate = "candidate"\n'
NDCG_GAIN = 'metric = "ndcg"\nk = 10\naggregation = "user_avg"\nmin_absolute_change = 0.0'


@pytest.mark.spark
def test_the_offline_gate_writes_its_verdict_and_a_rerun_replaces_it(spark, tmp_path):
    from recsys_spark.gate import run_gate, verdict_path

    out = tmp_path / "out"
    offline_outputs(out)
    checks = [
        NDCG_GAIN,
        'metric = "mrr"\naggregation = "user_avg"\nmin_relative_change = 0.01',
        'metric = "ndcg"\nk = 10\naggregation = "user_avg"\nslice = "platform=ios"\nlower_bound = 0.2',
        'metric = "item_coverage"\naggregation = "global"\nlower_bound = 0.3\non = "point"',
    ]
    cfg = load_config(_config(tmp_path, OFFLINE, checks))
    verdict = run_gate(spark, cfg, "cand", str(out))
    path = Path(verdict_path(str(out), "cand"))
    assert path == out / "gate" / "cand" / "verdict.json"
    written = json.loads(path.read_text())
    assert written["passed"] is False and verdict["passed"] is False
    assert written["state"] == verdict["state"] == "failed"  # the missing slice; the ndcg gain is inconclusive
    by = {(c["key"], c["slice"]): c for c in written["checks"]}
    ndcg = by[("ndcg@10_user_avg", "all")]
    assert (ndcg["passed"], ndcg["value"], ndcg["bound"], ndcg["threshold_value"]) == (False, 0.004, -0.001, 0.0)
    assert (ndcg["state"], ndcg["favourable"], ndcg["unit"]) == ("inconclusive", 0.009, "metric")
    assert by[("mrr_user_avg", "all")]["passed"] and by[("item_coverage_global", "all")]["passed"]
    assert by[("mrr_user_avg", "all")]["shown"]["interval"] == "[+2 %, +6 %]"
    assert "slice platform=ios is missing" in by[("ndcg@10_user_avg", "platform=ios")]["why"]
    assert by[("ndcg@10_user_avg", "platform=ios")]["state"] == "failed"
    assert written["summary"].startswith("gate cand: FAILED 1 of 4 checks")
    assert written["summary"].endswith("the interval straddles the threshold)")
    assert (written["base"], written["candidate"], written["source"]) == ("base", "candidate", "offline")
    # the same name again, on the point: it passes, and replaces the verdict whole (no lock or staging left)
    cfg = load_config(_config(tmp_path, OFFLINE, [NDCG_GAIN + '\non = "point"']))
    assert run_gate(spark, cfg, "cand", str(out))["passed"]
    assert json.loads(path.read_text())["passed"] is True and json.loads(path.read_text())["state"] == "passed"
    # on the bound alone, the ndcg gain is not enough evidence yet: inconclusive, not failed
    verdict = run_gate(spark, load_config(_config(tmp_path, OFFLINE, [NDCG_GAIN])), "cand", str(out))
    assert (verdict["state"], verdict["passed"]) == ("inconclusive", False)
    assert verdict["summary"].startswith("gate cand: NOT ENOUGH EVIDENCE YET: 1 of 1 checks inconclusive: ")
    assert sorted(p.name for p in (out / "gate" / "cand").iterdir() if not p.name.startswith(".")) == ["verdict.json"]
    assert not (out / "_locks").exists() and not (out / "_staging").exists()


@pytest.mark.spark
def test_a_run_or_a_comparison_the_config_names_that_is_not_there_is_a_config_error(spark, tmp_path):
    from recsys_spark.gate import run_gate

    out = tmp_path / "out"
    offline_outputs(out)
    cfg = load_config(_config(tmp_path, OFFLINE.replace('"candidate"', '"cand2"'), [NDCG_GAIN]))
    with pytest.raises(ConfigError, match=r"offline run 'cand2' \(gate.candidate\) not found"):
        run_gate(spark, cfg, "g", str(out))
    experiment = 'source = "experiment"\nexperiment = "ranker_v2"\nstart = "2026-11-14"\nend = "2026-11-20"\n'
    with pytest.raises(ConfigError, match="the window 2026-11-14..2026-11-20 of experiment 'ranker_v2'"):
        run_gate(spark, load_config(_config(tmp_path, experiment, [NDCG_GAIN])), "g", str(out))
    assert not (out / "gate").exists()


WINDOW_SCHEMA = pa.schema(
    [("variant", pa.string()), ("metric", pa.string()), ("k", pa.int32()), ("aggregation", pa.string())]
    + [("slice", pa.string()), ("value", pa.float64()), ("n", pa.int64()), ("control_value", pa.float64())]
    + [("control_n", pa.int64())]
    + [(n, pa.float64()) for n in ("delta", "ci_low", "ci_high", "rel_delta", "rel_ci_low", "rel_ci_high")]
    + [("p_value", pa.float64()), ("p_adjusted", pa.float64()), ("method", pa.string()), ("se", pa.float64())]
    + [("mde", pa.float64()), ("covariate_n", pa.int64()), ("ci_method", pa.string())]
)
DECISIONS_SCHEMA = pa.schema(
    [("variant", pa.string()), ("decision", pa.string()), ("reasons", pa.list_(pa.string()))]
    + [("ci_method", pa.string()), ("control_n", pa.int64()), ("variant_n", pa.int64())]
)


def window_outputs(root: Path, decision: str = "keep_running", reasons: tuple[str, ...] = ()) -> None:
    window = root / "experiment_window" / "experiment=ranker_v2" / "window=2026-11-14_2026-11-20"

    def row(metric, k, agg, slice_, delta, low, high):
        return dict(variant="treatment", metric=metric, k=k, aggregation=agg, slice=slice_, value=0.1 + delta, n=900,
                    control_value=0.1, control_n=900, delta=delta, ci_low=low, ci_high=high, rel_delta=delta / 0.1,
                    rel_ci_low=low / 0.1, rel_ci_high=high / 0.1, p_value=0.01, p_adjusted=0.02, method="delta",
                    se=0.001, mde=0.003, covariate_n=None, ci_method="sequential")  # fmt: skip

    _write(
        window,
        [
            row("exposure_ctr", None, "global", "all", 0.004, 0.001, 0.007),
            row("exposure_ctr", None, "global", "platform=ios", 0.003, -0.002, 0.008),
            row("pv_failure_rate", None, "global", "all", 0.001, -0.001, 0.003),
        ],
        WINDOW_SCHEMA,
    )
    decisions = root / "experiment_window_decisions" / "experiment=ranker_v2" / "window=2026-11-14_2026-11-20"
    _write(
        decisions,
        [
            dict(
                variant="treatment",
                decision=decision,
                reasons=list(reasons),
                ci_method="sequential",
                control_n=900,
                variant_n=900,
            )
        ],  # fmt: skip
        DECISIONS_SCHEMA,
    )


EXPERIMENT = (
    'source = "experiment"\nexperiment = "ranker_v2"\nvariant = "treatment"\nstart = "2026-11-14"\nend = "2026-11-20"\n'
)
CTR_GAIN = 'metric = "exposure_ctr"\naggregation = "global"\nmin_absolute_change = 0.0'
FAILURE_MARGIN = 'metric = "pv_failure_rate"\naggregation = "global"\nmin_absolute_change = 0.005\nguardrail = true'


@pytest.mark.spark
def test_the_experiment_gate_checks_the_variant_against_the_control_and_its_validity(spark, tmp_path):
    from recsys_spark.gate import run_gate

    out = tmp_path / "out"
    window_outputs(out)
    cfg = load_config(_config(tmp_path, EXPERIMENT, [CTR_GAIN, FAILURE_MARGIN]))
    verdict = run_gate(spark, cfg, "ranker_v2", str(out))
    assert verdict["passed"] and verdict["summary"] == "gate ranker_v2: PASSED 2 of 2 checks"
    assert (verdict["experiment"], verdict["variant"], verdict["end"]) == ("ranker_v2", "treatment", "2026-11-20")
    assert verdict["decision"] == "not_enough_evidence"  # the window's keep_running, an earlier release's code
    ios = load_config(_config(tmp_path, EXPERIMENT, [CTR_GAIN + '\nslice = "platform=ios"']))
    ios_verdict = run_gate(spark, ios, "ranker_v2", str(out))  # its interval reaches below 0: not enough evidence
    assert not ios_verdict["passed"] and ios_verdict["state"] == "inconclusive"
    # an invalid window (SRM) fails the gate whatever its checks say
    invalid = tmp_path / "invalid"
    window_outputs(invalid, "invalid", ("sample-ratio mismatch (p=1e-05): the split is not the planned one",))
    verdict = run_gate(spark, cfg, "ranker_v2", str(invalid))
    assert (
        not verdict["passed"]
        and verdict["state"] == "failed"
        and verdict["invalid"]
        == ["experiment invalid: sample-ratio mismatch (p=1e-05): the split is not the planned one"]
    )
    assert verdict["summary"].startswith("gate ranker_v2: FAILED 1 of 3 checks: experiment invalid: sample-ratio")
    with pytest.raises(ConfigError, match="'control' is not a variant of the window"):
        run_gate(
            spark,
            load_config(_config(tmp_path, EXPERIMENT.replace('"treatment"', '"control"'), [CTR_GAIN])),
            "g",
            str(out),
        )


def one_arm_outputs(root: Path, variant: str | None, reasons: tuple[str, ...]) -> None:
    """A window that compared no ``treatment``: ``variant`` None, an experiment with one arm (no result row, one
    decision row without a variant); else the only variant with users, ``variant`` (its rows and decision)."""
    window_outputs(root)
    where = Path("experiment=ranker_v2") / "window=2026-11-14_2026-11-20"
    results = pq.read_table(root / "experiment_window" / where).to_pylist()
    for r in results:
        r["variant"] = variant
    _write(root / "experiment_window" / where, results if variant else [], WINDOW_SCHEMA)
    decision = dict(variant=variant, decision="invalid" if reasons else "keep_running", reasons=list(reasons),
                    ci_method="sequential", control_n=900, variant_n=900 if variant else 0)  # fmt: skip
    _write(root / "experiment_window_decisions" / where, [decision], DECISIONS_SCHEMA)


@pytest.mark.spark
@pytest.mark.parametrize(
    "variant, reasons, why",
    [
        (
            None,
            ("not compared: no variant besides the control 'control' (900 users)",),
            "variant treatment has no user in the window 2026-11-14..2026-11-20 of ranker_v2 (variants compared "
            "with the control: none); experiment invalid: not compared: no variant besides the control 'control' "
            "(900 users)",
        ),
        (
            "treatment_b",
            (),
            "variant treatment has no user in the window 2026-11-14..2026-11-20 of ranker_v2 (variants compared "
            "with the control: treatment_b)",
        ),
    ],
    ids=["one arm", "a treatment arm without users"],
)
def test_a_window_that_did_not_compare_the_variant_is_a_failed_verdict_exit_12(spark, tmp_path, variant, reasons, why):
    # it was a config error (exit 3) with no verdict: the window exists and says the variant was not compared
    from recsys_spark.gate import run_gate

    out = tmp_path / "out"
    one_arm_outputs(out, variant, reasons)
    cfg = load_config(_config(tmp_path, EXPERIMENT, [CTR_GAIN, FAILURE_MARGIN]))
    verdict = run_gate(spark, cfg, "ranker_v2", str(out))
    written = json.loads((out / "gate" / "ranker_v2" / "verdict.json").read_text())
    assert written["passed"] is False and verdict["passed"] is False
    assert "; ".join(written["invalid"]) == why
    assert written["summary"].startswith(f"gate ranker_v2: FAILED {2 + len(written['invalid'])} of ")
    assert written["summary"].split(" checks: ", 1)[1].startswith(why)
    assert all(not c["passed"] and "missing from the results" in c["why"] for c in written["checks"])


@pytest.mark.spark
def test_the_command_exits_12_with_its_line_on_a_window_with_one_arm(spark, tmp_path, monkeypatch, capsys):
    import recsys_spark.runtime.session

    class Shared:  # the test session, kept alive past the command's stop()
        def __getattr__(self, name):
            return getattr(spark, name)

        def stop(self):
            pass

    monkeypatch.setattr(recsys_spark.runtime.session, "job_session", lambda *a, **k: Shared())
    out = tmp_path / "out"
    one_arm_outputs(out, None, ("not compared: no variant besides the control 'control' (900 users)",))
    config = _config(tmp_path, EXPERIMENT, [CTR_GAIN])
    assert run(["gate", "--name", "one", "--output-root", str(out), "--config", config]) == 12
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("gate one: FAILED 3 of 3 checks: variant treatment has no user in the window")
    assert line.endswith(f"-> {out}/gate/one/verdict.json")


@pytest.mark.spark
@pytest.mark.process
def test_the_command_prints_one_line_and_exits_0_13_or_12(tmp_path):
    out = tmp_path / "out"
    offline_outputs(out)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    for check, code, word in (
        (NDCG_GAIN, 13, "NOT ENOUGH EVIDENCE YET: 1 of 1"),  # +0.004 [−0.001, +0.009] against 0: inconclusive
        (NDCG_GAIN.replace("0.0", "0.01"), 12, "FAILED 1 of 1"),  # even +0.009 is below 0.01
        (NDCG_GAIN + '\non = "point"', 0, "PASSED 1 of 1"),
    ):
        config = _config(tmp_path, OFFLINE, [check])
        done = subprocess.run(
            [sys.executable, "-m", "recsys_spark.cli", "gate", "--name", "cand", "--output-root", str(out)]
            + ["--config", config, "--master", "local[1]", "--log-format", "json"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            cwd=REPO,
        )
        assert done.returncode == code, done.stderr[-2000:]
        (line,) = done.stdout.splitlines()
        assert line.startswith(f"gate cand: {word} checks") and line.endswith(f"-> {out}/gate/cand/verdict.json")
        written = json.loads((out / "gate" / "cand" / "verdict.json").read_text())
        assert written["passed"] is (code == 0) and written["state"] == {0: "passed", 13: "inconclusive"}.get(
            code, "failed"
        )


@pytest.mark.parametrize("example", ["gate-offline.toml", "gate-experiment.toml"])
def test_the_example_gate_configs_load_and_validate(example):
    from recsys_spark.gate import validate

    cfg = load_config(REPO / "conf" / example)
    assert len(validate(cfg.gate)) == 3


@pytest.mark.spark
def test_an_offline_threshold_row_is_no_gate_value(spark, tmp_path):
    """A run's threshold metrics (accuracy at 0.3 and at 0.7, both k null and global) are one name at several
    thresholds: no check key names one alone, so the gate reads none of them (the check says the metric is
    missing) rather than whichever row came last; the rows without a threshold read as before."""
    from recsys_spark.gate import run_gate

    out = tmp_path / "out"
    offline_outputs(out)
    schema = METRICS_SCHEMA.append(pa.field("threshold", pa.float64()))
    row = dict(k=None, aggregation="global", slice="all", n=600, se=0.01, ci_method="delta")
    rows = [
        dict(row, metric="accuracy", value=0.9, ci_low=0.88, ci_high=0.92, threshold=0.3),
        dict(row, metric="accuracy", value=0.2, ci_low=0.18, ci_high=0.22, threshold=0.7),
        dict(row, metric="item_coverage", value=0.4, ci_low=None, ci_high=None, ci_method="none", threshold=None),
    ]
    _write(out / "offline" / "metrics" / "run=candidate", rows, schema)
    checks = [
        'metric = "accuracy"\naggregation = "global"\nlower_bound = 0.5\non = "point"',
        'metric = "item_coverage"\naggregation = "global"\nlower_bound = 0.3\non = "point"',
    ]
    verdict = run_gate(spark, load_config(_config(tmp_path, OFFLINE, checks)), "cand", str(out))
    by = {c["key"]: c for c in verdict["checks"]}
    assert by["accuracy_global"]["value"] is None and "missing" in by["accuracy_global"]["why"]
    assert by["item_coverage_global"]["passed"]
