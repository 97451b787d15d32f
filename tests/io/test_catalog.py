"""Catalog inputs and outputs (recsys_spark/config/templates.py, recsys_spark/io/catalog.py; docs/catalog.md).

The end-to-end test runs the job from Hive-metastore tables to Hive-metastore tables: an embedded
Derby metastore in a temporary directory, driven through separate processes (tests/helpers/catalog_hive.py).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recsys_spark.config.templates import InputSettings, resolve
from recsys_spark.errors import ConfigError

DAY = dt.date(2026, 11, 20)
HERE = Path(__file__).resolve().parents[1]  # tests/


# --- templates (no Spark) ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "template, kind, options, expected",
    [
        ("{input_root}/exposures/dt={date}", "exposures", InputSettings(), "/lake/exposures/dt=2026-11-20"),
        ("{input_root}/exposures/ds={date:%Y%m%d}", "exposures", InputSettings(), "/lake/exposures/ds=20261120"),
        ("{input_root}/y={date:%Y}/m={date:%m}/d={date:%d}", "clicks", InputSettings(), "/lake/y=2026/m=11/d=20"),
        ("table:logs.rec_exposures", "exposures", InputSettings(), "table:logs.rec_exposures[dt=2026-11-20]"),
        ("table:logs.rec_clicks", "clicks", InputSettings("ds", "%Y%m%d"), "table:logs.rec_clicks[ds=20261120]"),
        ("table:cat.logs.exp[day={date:%d.%m.%Y}]", "exposures", InputSettings(), "table:cat.logs.exp[day=20.11.2026]"),
        ("table:dim.items", "items", InputSettings(), "table:dim.items"),  # not dated: read whole
        ("table:dim.items[dt={date}]", "items", InputSettings(), "table:dim.items[dt=2026-11-20]"),
    ],
)
def test_resolve_fills_dates_and_table_partitions(template, kind, options, expected):
    assert resolve(template, "/lake/", DAY, kind, options) == expected
    assert resolve(template, "/lake", DAY.isoformat(), kind, options) == expected


@pytest.mark.parametrize(
    "template, needle",
    [
        ("{input_root}/exposures/dt={day}", "unknown placeholder {day}"),
        ("{root}/exposures", "unknown placeholder {root}"),
        ("{input_root:x}/exposures", "unknown placeholder {input_root:x}"),
        ("{input_root}/exposures/dt={date", "bad template"),
        ("table:logs.exp[dt]", "expected table:NAME"),
    ],
)
def test_bad_templates_are_config_errors_naming_the_key(template, needle):
    with pytest.raises(ConfigError, match="config key input.exposures") as err:
        resolve(template, "/lake", DAY, "exposures", InputSettings())
    assert needle in str(err.value)
    assert err.value.exit_code == 3


def test_resolve_uses_the_settings_it_is_given_and_keeps_none():
    # the settings once lived in a module global (templates.configure) read when none were given: now they are
    # an argument, one channel from the run's config down to every reader, and nothing stays between two calls
    assert resolve("table:l.e", "/r", DAY, "exposures", InputSettings("ds", "%Y%m%d")) == "table:l.e[ds=20261120]"
    assert resolve("table:l.e", "/r", DAY, "exposures", InputSettings()) == "table:l.e[dt=2026-11-20]"
    with pytest.raises(TypeError):
        resolve("table:l.e", "/r", DAY, "exposures")


def test_config_keys_load(tmp_path):
    from recsys_spark.config import load_config

    cfg = load_config(
        None,
        [
            'input.columns={user_id = "uid", item_id = "iid"}',
            "input.partition_column=ds",
            'input.partition_format="%Y%m%d"',
            "output.catalog=eval_db",
            "output.table_format=iceberg",
        ],
    )
    assert dict(cfg.input.columns) == {"user_id": "uid", "item_id": "iid"}
    assert InputSettings.of(cfg.input) == InputSettings("ds", "%Y%m%d", {"user_id": "uid", "item_id": "iid"})
    assert (cfg.output.catalog, cfg.output.table_format, cfg.output.write_mode) == ("eval_db", "iceberg", "auto")
    with pytest.raises(ConfigError, match="output.catalog"):
        load_config(None, ["output.catalog=eval db; DROP"])
    with pytest.raises(ConfigError, match="output.write_mode"):
        load_config(None, ["output.write_mode=append"])


@pytest.mark.parametrize("value", ["parquet LOCATION '/elsewhere'", "delta OPTIONS (path '/etc')", "parquet; DROP", ""])
def test_a_table_format_is_a_name_never_sql(value):
    # output.table_format is the USING clause of the CREATE TABLE the job runs: a user's SQL reached Spark there
    from recsys_spark.config import load_config

    with pytest.raises(ConfigError, match="output.table_format: expected a data source name") as err:
        load_config(None, [f"output.table_format={json.dumps(value)}"])
    assert err.value.exit_code == 3
    for name in ("parquet", "iceberg", "delta", "org.apache.spark.sql.delta"):
        assert load_config(None, [f"output.table_format={name}"]).output.table_format == name


# --- Spark, the suite's session (no Hive) -------------------------------------------------------
@pytest.mark.spark
@pytest.mark.parametrize(
    "ddl, spec",
    [
        ("dt date", "table:v[dt=2026-11-20]"),
        ("ds string", "table:v[ds=20261120]"),
        ("ds int", "table:v[ds=20261120]"),
    ],
)
def test_partition_value_is_cast_to_the_columns_type(spark, ddl, spec):
    from recsys_spark.io import catalog

    column = ddl.split()[0]
    values = {
        "dt date": ["2026-11-19", "2026-11-20"],
        "ds string": ["20261119", "20261120"],
        "ds int": ["20261119", "20261120"],
    }[ddl]
    (
        spark.createDataFrame([("a", values[0]), ("b", values[1]), ("c", values[1])], "uid string, raw string")
        .selectExpr("uid", f"CAST(raw AS {ddl.split()[1]}) AS {column}")
        .createOrReplaceTempView("v")
    )
    rows = catalog.read_table(spark, spec, "exposures partition").collect()
    assert sorted(r.uid for r in rows) == ["b", "c"]
    assert catalog.exists(spark, spec)
    assert not catalog.exists(spark, spec.replace("20", "19", 1))  # 1926...: no rows
    assert not catalog.exists(spark, "table:no_such_view")


@pytest.mark.spark
def test_missing_tables_partitions_and_columns_are_one_line_errors(spark):
    from recsys_spark.errors import MissingInputError, SchemaError
    from recsys_spark.io import catalog

    spark.createDataFrame([("a", "2026-11-19")], "uid string, dt string").createOrReplaceTempView("w")
    with pytest.raises(MissingInputError, match=r"missing input exposures partition: table:no_such\.t"):
        catalog.read_table(spark, "table:no_such.t[dt=2026-11-20]", "exposures partition")
    with pytest.raises(MissingInputError, match=r"no rows in that partition"):
        catalog.read_table(spark, "table:w[dt=2026-11-20]", "exposures partition")
    with pytest.raises(SchemaError, match=r"missing partition column 'ds'"):
        catalog.read_table(spark, "table:w[ds=20261120]", "exposures partition")


@pytest.mark.spark
def test_input_columns_are_renamed_and_the_mapping_wins(spark):
    from recsys_spark.io import catalog

    df = spark.createDataFrame([("u1", "stale", "i1")], "uid string, user_id string, iid string")
    out = catalog.rename_columns(df, {"user_id": "uid", "item_id": "iid", "category": "cat"})
    assert out.columns == ["user_id", "item_id"]  # cat is absent: left to conform to report
    assert out.collect()[0].asDict() == {"user_id": "u1", "item_id": "i1"}


@pytest.mark.spark
def test_a_day_with_input_columns_leaves_no_mapping_behind_for_the_next_reader(spark, tmp_path):
    # input.columns travelled in a module global the day (and OPE) set and every reader read: offline's inputs,
    # read later in the same process, lost their own item_id to the day's {item_id = "iid"}.  Each reader is
    # now handed the mapping of its own run (offline's inputs: none)
    import pyarrow as pa
    from helpers.days import day_input, run_day, write

    from recsys_spark.config import load_config
    from recsys_spark.offline.inputs import read_inputs

    day_input(tmp_path)
    run_day(spark, tmp_path, 'input.columns={item_id = "iid"}')  # the day's files have no iid: nothing renamed
    schema = pa.schema([("user_id", pa.string()), ("item_id", pa.string()), ("iid", pa.string()), ("rank", pa.int32())])
    write(tmp_path / "recs", [("u1", "a", "other", 1), ("u1", "b", "other", 2)], schema)
    cfg = load_config(None, [f"offline.recommendations={tmp_path / 'recs'}"])
    recommendations = read_inputs(spark, cfg, "r")["recommendations"]
    assert sorted(r.item_id for r in recommendations.collect()) == ["a", "b"]


@pytest.mark.spark
def test_enrich_adds_run_columns_slice_parts_and_a_date(spark):
    from recsys_spark.io import catalog

    df = spark.createDataFrame(
        [("all", 1.0), ("platform=ios", 2.0), ("hour=7", 3.0), ("tag=a=b", 4.0)], "slice string, value double"
    )
    out = catalog.enrich(df, "2026-11-20", "run-1", "abc", "0.1.0")
    assert dict(out.dtypes)["dt"] == "date"
    assert out.columns[-1] == "dt"
    rows = [
        (r.slice_name, r.slice_value, r.run_id, r.config_hash, r.recsys_spark_version, str(r.dt)) for r in out.collect()
    ]
    assert rows == [
        ("all", "all", "run-1", "abc", "0.1.0", "2026-11-20"),
        ("platform", "ios", "run-1", "abc", "0.1.0", "2026-11-20"),
        ("hour", "7", "run-1", "abc", "0.1.0", "2026-11-20"),
        ("tag", "a=b", "run-1", "abc", "0.1.0", "2026-11-20"),
    ]


# --- end to end: Hive metastore tables in, tables out ---------------------------------------------
def _run(args: list[str], env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=HERE.parent,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
    )
    assert proc.returncode == 0, f"{args}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}"
    return proc


@pytest.fixture(scope="module")
def hive_run(tmp_path_factory):
    """Two generated days as Hive tables; the job over both (run-1), then day 2 again (run-2)."""
    sys.path.insert(0, str(HERE))
    from helpers.catalog_hive import hive_settings

    root = tmp_path_factory.mktemp("hive")
    _run(
        [
            sys.executable,
            "-m",
            "recsys_spark.synthetic.generate",
            "--date",
            "2026-11-20",
            "--days",
            "2",
            "--output-root",
            str(root / "in"),
            "--users",
            "120",
            "--seed",
            "3",
        ]
    )
    setup = json.loads(_run([sys.executable, str(HERE / "helpers" / "catalog_hive.py"), "setup", str(root)]).stdout)
    job = [
        sys.executable,
        "-m",
        "recsys_spark.cli",
        "evaluate",
        "--input-root",
        str(root / "in"),
        "--output-root",
        str(root / "out"),
        "--master",
        "local[2]",
        "--set",
        "input.exposures=table:logs.rec_exposures",
        "--set",
        "input.clicks=table:logs.rec_clicks[ds={date:%Y%m%d}]",
        "--set",
        'input.columns={user_id = "uid"}',
        "--set",
        "output.catalog=eval_db",
        "--set",
        "rules.fail_on_hard=false",
        "--set",
        "spark.sql.shuffle.partitions=2",
        "--set",
        "metrics.k=[5]",
    ]
    job += [arg for key, value in hive_settings(root).items() for arg in ("--set", f"{key}={value}")]
    first = _run([*job, "--start", "2026-11-19", "--end", "2026-11-20"], {"RECSYS_RUN_ID": "run-1"})
    second = _run([*job, "--date", "2026-11-20"], {"RECSYS_RUN_ID": "run-2"})
    facts = json.loads(_run([sys.executable, str(HERE / "helpers" / "catalog_hive.py"), "query", str(root)]).stdout)
    return {"root": root, "setup": setup, "first": first, "second": second, "facts": facts}


@pytest.mark.spark
@pytest.mark.hive
def test_tables_in_tables_out(hive_run):
    assert hive_run["setup"] == {
        "exposure_partitions": ["dt=2026-11-19", "dt=2026-11-20"],
        "click_partitions": ["ds=20261119", "ds=20261120"],
    }
    facts = hive_run["facts"]
    assert {"metrics", "user_metrics", "lorenz", "rule_checks", "summary"} <= set(facts["tables"])
    for table in ("metrics", "user_metrics", "lorenz", "rule_checks", "summary"):
        assert facts[f"{table}_partitions"] == ["dt=2026-11-19", "dt=2026-11-20"], table
        columns = facts[f"{table}_columns"]
        assert columns["dt"] == "date" and list(columns)[-1] == "dt"
        assert {"run_id", "config_hash", "recsys_spark_version"} <= set(columns)
    assert {"slice_name", "slice_value"} <= set(facts["metrics_columns"])
    assert {"slice": "all", "slice_name": "all", "slice_value": "all"} in facts["slices"]
    summary = facts["summary_rows"]
    assert [s["dt"] for s in summary] == ["2026-11-19", "2026-11-20"]
    # the generated days trip the soft empty-response rule (the tour's fast_retrieval arm: docs/experiments.md)
    statuses = [s["status"] for s in summary]
    assert all(s in ("ok", "soft_rule_failed", "hard_rule_violated") for s in statuses), statuses
    assert all(0.5 < s["auc"] < 1 for s in summary)
    assert {s["recsys_spark_version"] for s in summary} == {"0.1.0"}


@pytest.mark.spark
@pytest.mark.hive
def test_each_table_holds_as_many_rows_as_the_paths_output(hive_run):
    """The catalog partition is the committed path output, row for row (no rows lost, none doubled)."""
    import pyarrow.parquet as pq

    out = hive_run["root"] / "out"
    facts = hive_run["facts"]
    for table in ("metrics", "user_metrics", "lorenz", "rule_checks"):
        for day in ("2026-11-19", "2026-11-20"):
            files = list((out / table / f"dt={day}").glob("*.parquet"))
            expected = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
            got = sum(r["n"] for r in facts[table] if r["dt"] == day)
            assert got == expected > 0, (table, day)


@pytest.mark.spark
@pytest.mark.hive
def test_rerun_replaces_only_its_partition(hive_run):
    facts = hive_run["facts"]
    for table in ("metrics", "user_metrics", "lorenz", "rule_checks", "summary"):
        by_day = {}
        for row in facts[table]:
            by_day.setdefault(row["dt"], set()).add(row["run_id"])
        # the rerun of 11-20 replaced that partition (no run-1 rows left, nothing doubled) and left 11-19 alone
        assert by_day == {"2026-11-19": {"run-1"}, "2026-11-20": {"run-2"}}, table
    assert [s["exposure_rows"] for s in facts["summary_rows"]][1] > 0


@pytest.mark.spark
@pytest.mark.hive
def test_the_partition_filter_is_pushed_down_and_logs_are_json(hive_run):
    assert facts_plan(hive_run)
    lines = [json.loads(line) for line in hive_run["second"].stderr.splitlines() if line.startswith("{")]
    events = [e for e in lines if e["event"] not in ("spark_log", "stderr")]  # the job's own, not Spark's lines
    published = [e["table"] for e in events if e["event"] == "stage_end" and e["stage"].startswith("publish_")]
    assert published[-1] == "eval_db.summary" and "eval_db.metrics" in published
    assert {e["run_id"] for e in events} == {"run-2"}


def facts_plan(hive_run) -> bool:
    plan = hive_run["facts"]["plan"]
    return "PartitionFilters: [isnotnull(dt" in plan and "2026-11-20" in plan
