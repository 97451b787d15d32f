"""Spark Connect: the day's computation runs on a real local Connect server and gives the classic numbers;
custom rules are evaluated there and a hostile one is refused.

The Connect session is ``SparkSession.builder.remote("local[2]")``: pyspark starts a Spark Connect
server in a JVM of its own and talks to it over gRPC, as it would to a remote one.  It runs in a
subprocess (a process holding a classic SparkContext, as this suite's does, cannot start one), and
its numbers are compared with the classic run of the same day, on the
suite's session.  The same orchestrator runs on both (:func:`recsys_spark.daily.evaluate_day`); on
Connect it writes through :class:`recsys_spark.io.scratch.ScratchOutput` (docs/catalog.md, "Spark Connect").
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DATE = "2026-11-20"
SETTINGS = [
    'slices.names=["platform", "popularity"]',
    "rules.fail_on_hard=false",  # generated days carry duplicates, as real logs do
    "execution.max_user_rows=600",  # the heavy user takes the bounded path: the set-aside users too
    "stats.bootstrap_replicates=20",
    # custom rules at two levels: evaluated on Connect as on the classic session (the rules are compared below);
    # the examples are the smallest violating keys on either engine, however many violations there are
    'rules.custom=[{name = "long_list", severity = "soft", level = "list", when = "count(*) > 8 and max(score) > 0.8",'
    ' threshold = 0.5}, {name = "top_score", severity = "soft", level = "exposure",'
    ' when = "score > 0.7 and position > 3", threshold = 1.0}]',
]
KEY = ["metric", "k", "aggregation", "slice"]

CONNECT_RUN = textwrap.dedent(
    """
    import datetime as dt, json, sys
    from pyspark.sql import SparkSession
    from recsys_spark.runtime import engine, log
    from recsys_spark.daily import evaluate_day
    from recsys_spark.config import load_config
    from recsys_spark.runtime.session import LOCAL_LOG4J_OPTION

    date, input_root, output_dir, result, *settings = sys.argv[1:]
    log.setup_logging()
    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2")
        .config("spark.driver.extraJavaOptions", LOCAL_LOG4J_OPTION)
        .getOrCreate()
    )
    assert engine.is_connect(spark), type(spark)
    cfg = load_config(None, settings)
    summary = evaluate_day(spark, cfg, dt.date.fromisoformat(date), input_root, output_dir)
    with open(result, "w") as handle:
        json.dump(summary, handle, default=str)
    spark.stop()
    """
)


@pytest.fixture(scope="module")
def days(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("connect")
    subprocess.run(
        [sys.executable, "-m", "recsys_spark.synthetic.generate", "--date", DATE, "--output-root", str(root / "in")]
        + ["--users", "150", "--days", "2", "--seed", "5", "--heavy-user-exposures", "900"],
        check=True,
        capture_output=True,
    )
    return root


def _close(a, b) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return (a is None or (isinstance(a, float) and math.isnan(a))) == (
            b is None or (isinstance(b, float) and math.isnan(b))
        )
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.spark
def test_the_days_metrics_on_spark_connect_equal_the_classic_run(spark, days):
    import pandas as pd

    from recsys_spark.config import load_config
    from recsys_spark.daily import evaluate_day

    classic = evaluate_day(
        spark, load_config(None, SETTINGS), dt.date.fromisoformat(DATE), str(days / "in"), str(days / "classic")
    )
    result = days / "connect-summary.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("SPARK_REMOTE", None)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    proc = subprocess.run(
        [sys.executable, "-c", CONNECT_RUN, DATE, str(days / "in"), str(days / "connect"), str(result), *SETTINGS],
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    on_connect = json.loads(result.read_text())
    # the one pass sets the heavy user aside on Connect as on a classic session (its output is data, no accumulator)
    assert on_connect["data_quality"]["users_over_row_bound"] == classic["data_quality"]["users_over_row_bound"] == 1

    # every metric row: the same keys, the same values (sums Spark adds in an order it does not fix: last bits)
    a = pd.read_parquet(days / "classic" / "metrics" / f"dt={DATE}").sort_values(KEY, na_position="first")
    b = pd.read_parquet(days / "connect" / "metrics" / f"dt={DATE}").sort_values(KEY, na_position="first")
    assert len(a) == len(b) > 100
    assert a[KEY].astype(str).values.tolist() == b[KEY].astype(str).values.tolist()
    for column in ["value", "n", "se", "ci_low", "ci_high", "ci_method"]:
        pairs = zip(a[column].tolist(), b[column].tolist(), strict=True)
        bad = [
            (k, x, y) for k, (x, y) in zip(a[KEY].values.tolist(), pairs, strict=True) if not (x == y or _close(x, y))
        ]
        assert not bad, f"{column} differs on Connect: {bad[:5]}"

    # the per-user table row for row
    users_a = pd.read_parquet(days / "classic" / "user_metrics" / f"dt={DATE}")
    users_b = pd.read_parquet(days / "connect" / "user_metrics" / f"dt={DATE}")
    order = ["slice", "user_id", "k"]
    pd.testing.assert_frame_equal(
        users_a.sort_values(order).reset_index(drop=True)[sorted(users_a.columns)],
        users_b.sort_values(order).reset_index(drop=True)[sorted(users_a.columns)],
        check_exact=False,
        rtol=1e-12,
    )

    # the rules (the experiments' included) and the summary's counts and headline
    assert on_connect["rules"] == classic["rules"]
    assert on_connect["status"] == classic["status"]
    assert on_connect["input_rows"] == classic["input_rows"]
    assert on_connect["data_quality"] == classic["data_quality"]
    assert on_connect["experiments"].keys() == classic["experiments"].keys()
    assert on_connect["headline"].keys() == classic["headline"].keys()
    for name, value in classic["headline"].items():
        assert _close(value, on_connect["headline"][name]), name


CONNECT_RULES = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    from recsys_spark.runtime import engine
    from recsys_spark.steps import custom_rules
    from recsys_spark.config import CustomRule
    from recsys_spark.errors import ConfigError
    from recsys_spark.runtime.session import LOCAL_LOG4J_OPTION

    result, = sys.argv[1:]
    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", LOCAL_LOG4J_OPTION)
        .getOrCreate()
    )
    assert engine.is_connect(spark), type(spark)
    rows = spark.createDataFrame(
        [("u1", "r1", "a", 1, 0.5, "books"), ("u1", "r1", "b", 2, 0.95, "books"), ("u1", "r1", "c", 3, 0.2, "books"),
         ("u2", "r2", "a", 1, 0.3, "toys")],
        "user_id string, request_id string, item_id string, position int, score double, category string",
    )
    legit = [
        CustomRule("high_score", "soft", "exposure", "coalesce(score, 0) > 0.9", 0.0),
        CustomRule("same_category", "soft", "list", "count(distinct category) < 2 and count(*) > 2", 0.0),
        CustomRule("busy_user", "soft", "user", "count(*) filter (where score > 0.25) >= 2", 0.0),
        CustomRule("low_day", "soft", "day", "case when avg(score) < 0.5 then true else false end", 0.0),
    ]
    custom_rules.check_rules(spark, legit, rows.schema)  # the server analyses each level's aggregate
    counts = {k: [c.violations, c.total, c.examples] for k, c in custom_rules.count_rules(rows, legit).items()}
    refused = {}
    for name, when in [
        ("table", "user_id in (TABLE parquet.`/no/such/file`)"),
        ("reflect", "`reflect`('java.lang.System', 'getenv', 'PATH') is not null"),
        ("raise_error", "raise_error('x') is null"),
        ("unknown_column", "scor > 1"),
    ]:
        try:
            custom_rules.check_rules(spark, [CustomRule(name, "hard", "exposure", when)], rows.schema)
            refused[name] = None
        except ConfigError as exc:
            refused[name] = [exc.exit_code, str(exc)]
    # no plan to walk on Connect: with the grammar off, what Spark's analysis accepts goes through
    custom_rules.check_expression = lambda sql: None
    try:
        raised = CustomRule("raised", "hard", "exposure", "raise_error('x') is null")
        custom_rules.check_rules(spark, [raised], rows.schema)
        unguarded = None
    except ConfigError as exc:
        unguarded = str(exc)
    with open(result, "w") as handle:
        json.dump({"counts": counts, "refused": refused, "unguarded": unguarded}, handle)
    spark.stop()
    """
)


@pytest.mark.spark
def test_custom_rules_on_spark_connect_are_evaluated_and_a_hostile_one_is_refused(tmp_path):
    # the grammar is the guard on Connect (no analysed plan reaches the client to walk): it refuses the table
    # read and the Java call before any query is sent; the server still analyses the rest (an unknown column)
    result = tmp_path / "rules.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("SPARK_REMOTE", None)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    proc = subprocess.run(
        [sys.executable, "-c", CONNECT_RULES, str(result)], capture_output=True, text=True, timeout=900, env=env
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(result.read_text())
    assert got["counts"] == {
        "high_score": [1, 4, ["r1:b"]],  # one exposure of four scores above 0.9
        "same_category": [1, 2, ["r1"]],  # r1: three books
        "busy_user": [1, 2, ["u1"]],  # u1 has two exposures above 0.25, u2 one
        "low_day": [1, 1, []],  # the mean score is 0.4875
    }
    refused = got["refused"]
    assert refused["table"] == [3, refused["table"][1]] and "a query (TABLE)" in refused["table"][1]
    assert "`reflect` called: a back-quoted name is a column" in refused["reflect"][1]
    assert "raise_error() is not allowed" in refused["raise_error"][1]
    assert refused["unknown_column"][0] == 3 and "UNRESOLVED_COLUMN" in refused["unknown_column"][1]
    assert all("\n" not in message for _, message in refused.values())
    assert got["unguarded"] is None  # documented in docs/operations.md: on Connect the grammar is the guard


OPE_CONNECT_RUN = textwrap.dedent(
    """
    import datetime as dt, json, sys
    from pyspark.sql import SparkSession
    from recsys_spark.runtime import engine, log
    from recsys_spark.config import load_config
    from recsys_spark.ope.run import run_ope
    from recsys_spark.runtime.session import LOCAL_LOG4J_OPTION

    start, end, input_root, output_root, result, *settings = sys.argv[1:]
    log.setup_logging()
    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", LOCAL_LOG4J_OPTION)
        .getOrCreate()
    )
    assert engine.is_connect(spark), type(spark)
    day = dt.date.fromisoformat
    summary = run_ope(spark, load_config(None, settings), "connect", day(start), day(end), input_root, output_root)
    with open(result, "w") as handle:
        json.dump(summary, handle, default=str)
    spark.stop()
    """
)


@pytest.mark.spark
def test_ope_on_spark_connect_equals_the_classic_run(spark, tmp_path):
    """``run_ope`` on a local Connect server (the scratch output: no lock, no ``_SUCCESS``) gives the classic
    run's estimates: two days of request ids that restart each day, a candidate with a ``dt`` column, a day
    left out for want of feedback (the checks' jobs, the keys by day, the one query of sums)."""
    import pandas as pd
    from helpers.ope_days import DAY1, DAY2, day_log, empty_clicks, target_rows, write_day, write_target

    from recsys_spark.config import load_config
    from recsys_spark.ope.run import run_ope

    third = DAY2 + dt.timedelta(days=1)
    for day in (DAY1, DAY2):
        write_day(tmp_path, day, *day_log(day, ids=str))
    write_day(tmp_path, third, day_log(third, ids=str)[0], None)
    empty_clicks(tmp_path, third, "typed")
    rows = [row for d in (DAY1, DAY2, third) for row in target_rows([(r, str(r)) for r in range(24)], day=d)]
    write_target(tmp_path, rows, with_day=True)
    settings = [f'ope.target="{tmp_path}/target"']
    cfg = load_config(None, settings)
    classic = run_ope(spark, cfg, "classic", DAY1, third, str(tmp_path / "in"), str(tmp_path / "c"))
    result = tmp_path / "connect-summary.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("SPARK_REMOTE", None)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    args = [str(DAY1), str(third), str(tmp_path / "in"), str(tmp_path / "k"), str(result), *settings]
    proc = subprocess.run(
        [sys.executable, "-c", OPE_CONNECT_RUN, *args], capture_output=True, text=True, timeout=1200, env=env
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    on_connect = json.loads(result.read_text())
    assert on_connect["status"] == classic["status"] == "ok" and on_connect["keyed_by"] == "day and request"
    assert (
        on_connect["days_without_feedback"] == classic["days_without_feedback"]
        and str(third) in classic["days_without_feedback"]
    )
    assert on_connect["counts"] == classic["counts"] and on_connect["notes"] == classic["notes"]
    a = pd.read_parquet(tmp_path / "c" / "ope" / "estimates" / "run=classic").set_index("estimator").sort_index()
    b = pd.read_parquet(tmp_path / "k" / "ope" / "estimates" / "run=connect").set_index("estimator").sort_index()
    assert list(a.index) == list(b.index) and len(a) >= 8
    for column in ("value", "se", "ci_low", "ci_high", "delta", "delta_se", "n", "units"):
        bad = [(e, x, y) for e, x, y in zip(a.index, a[column], b[column], strict=True) if not _close(x, y)]
        assert not bad, f"{column} differs on Connect: {bad}"
