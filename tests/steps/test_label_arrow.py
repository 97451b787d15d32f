"""The numpy labelling pass (execution.labelling = "python") against the Spark chain: the same rows, the same
labels, the same counts, on random hostile days; every user whole in one partition; one shuffle."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.coded_labels import random_day
from helpers.spark_plans import names_and_exchanges, shuffles
from pyspark.sql import functions as F

from recsys_spark.schema import CLICK_COLUMNS, EXPOSURE_COLUMNS, USER, input_ddl
from recsys_spark.steps.label import by_user, deduplicate_exposures, join_feedback, label_counts
from recsys_spark.steps.label_arrow import label_in_python

pytestmark = pytest.mark.spark

WEIGHTS = {"click": 1.0, "purchase": 3.0}


def frames(spark, seed, with_values=True):
    exposures, events = random_day(np.random.default_rng(seed))
    ddl = input_ddl(CLICK_COLUMNS) if with_values else input_ddl(CLICK_COLUMNS, optional=False) + ", event string"
    if not with_values:
        events = [e[:6] for e in events]
    return (
        spark.createDataFrame(exposures, input_ddl(EXPOSURE_COLUMNS)),
        spark.createDataFrame(events, ddl),
        len(events),
    )


def sorted_rows(df):
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.mark.parametrize(
    ("seed", "with_values", "conversions"),
    [(11, True, ("purchase",)), (12, True, ("purchase",)), (13, False, ("purchase",)), (16, True, ())],
)
def test_the_python_pass_labels_exactly_as_the_spark_chain(spark, seed, with_values, conversions):
    # conversions (): labels.conversion_events = [] leaves the events without a conversion flag
    exp, clk, n_events = frames(spark, seed, with_values)
    chain = join_feedback(deduplicate_exposures(by_user(exp, 3)), by_user(clk, 3), 20.0, WEIGHTS, "click", conversions)
    one = label_in_python(exp, clk, 3, 20.0, WEIGHTS, "click", conversions)
    assert one.columns == chain.columns
    assert [f.dataType for f in one.schema.fields] == [f.dataType for f in chain.schema.fields]
    assert sorted_rows(one) == sorted_rows(chain)  # the test session's Arrow batches hold 2 rows: users span them
    assert label_counts(one, n_events) == label_counts(chain, n_events)
    assert label_counts(one, n_events)["orphan_events"] > 0


def test_every_user_is_whole_in_one_partition_after_one_shuffle(spark):
    exp, clk, _ = frames(spark, 14)
    one = label_in_python(exp, clk, 3, 20.0, WEIGHTS, "click", ("purchase",))
    per_user = one.select(USER, F.spark_partition_id().alias("p")).distinct().groupBy(USER).count()
    assert per_user.where("count > 1").count() == 0
    assert len(shuffles(one)) == 1


def test_no_events_at_all_labels_every_exposure_unclicked(spark):
    exp, clk, _ = frames(spark, 15)
    none = clk.limit(0)
    one = label_in_python(exp, none, 3, 20.0, WEIGHTS, "click", ("purchase",))
    chain = join_feedback(
        deduplicate_exposures(by_user(exp, 3)), by_user(none, 3), 20.0, WEIGHTS, "click", ("purchase",)
    )
    assert sorted_rows(one) == sorted_rows(chain)
    assert one.where("clicked OR n_events > 0").count() == 0


def test_a_whole_day_writes_the_same_tables_either_way(spark, tmp_path):
    from helpers.input_ddl import DAY

    from recsys_spark.config import load_config
    from recsys_spark.daily import evaluate_day

    exposures, events = random_day(np.random.default_rng(16), users=60)
    spark.createDataFrame(exposures, input_ddl(EXPOSURE_COLUMNS)).write.parquet(f"{tmp_path}/in/exposures/dt={DAY}")
    spark.createDataFrame(events, input_ddl(CLICK_COLUMNS)).write.parquet(f"{tmp_path}/in/clicks/dt={DAY}")
    tables = {}
    for way in ("spark", "python"):
        settings = [
            "metrics.k=[1, 3]",
            "rules.fail_on_hard=false",
            "input.position_base=0",
            f"execution.labelling={way}",
        ]
        summary = evaluate_day(spark, load_config(None, settings), DAY, f"{tmp_path}/in", f"{tmp_path}/{way}")
        tables[way] = (
            summary["data_quality"],
            sorted_rows(spark.read.parquet(f"{tmp_path}/{way}/metrics")),
            sorted_rows(spark.read.parquet(f"{tmp_path}/{way}/user_metrics")),
        )
    assert tables["python"] == tables["spark"]
    assert tables["spark"][0]["orphan_events"] > 0 and tables["spark"][0]["duplicate_exposures"] > 0


@pytest.mark.parametrize(("way", "python_pass"), [("spark", False), ("python", True)])
def test_execution_labelling_chooses_the_path(spark, way, python_pass):
    from recsys_spark.config import load_config
    from recsys_spark.daily.stages import labelled_exposures

    exp, clk, _ = frames(spark, 17)
    cfg = load_config(None, [f"execution.labelling={way}"])
    rows = labelled_exposures(exp, clk, 3, cfg, lambda df: df)
    plan = rows._jdf.queryExecution().executedPlan().toString()
    assert ("MapInArrow" in plan) == python_pass, plan
    # either way every user whole in one partition as the rows stand (the stages after read them in place)
    where = rows.select(USER, F.spark_partition_id().alias("p")).distinct()
    assert where.groupBy(USER).count().where("count > 1").count() == 0
    if python_pass:  # one exchange of rows (exposures and events together), none after the pass
        _, exchanges = names_and_exchanges(rows)
        assert len(exchanges) == 1 and "user_id" in exchanges[0], exchanges


def test_a_heavy_user_reaches_the_kernel_in_batches_of_whole_user_item_units():
    import pyarrow as pa

    from recsys_spark.steps.label_arrow import whole_units

    users = ["a"] * 5 + ["b"] * 4
    items = ["x", "x", "y", "y", "z", None, None, "x", "x"]  # nulls sort first within a user, as Spark's sort
    table = pa.table({"user_id": users, "item_id": items, "n": list(range(9))})
    batches = table.to_batches(max_chunksize=3)
    tables = list(whole_units(iter(batches)))
    units = [list(zip(t.column("user_id").to_pylist(), t.column("item_id").to_pylist(), strict=True)) for t in tables]
    assert sum(t.num_rows for t in tables) == 9 and [n for t in tables for n in t.column("n").to_pylist()] == list(
        range(9)
    )
    seen: dict = {}
    for i, rows in enumerate(units):
        for unit in set(rows):
            assert seen.setdefault(unit, i) == i  # no (user, item) unit in two tables
    assert len({i for i, rows in enumerate(units) if any(u == "a" for u, _ in rows)}) > 1  # user a was cut


def test_empty_responses_with_null_positions_deduplicate_as_the_spark_chain(spark):
    import datetime as dt

    t = dt.datetime(2024, 1, 1, 12)
    later = t + dt.timedelta(minutes=1)
    exposures = [  # (user, session, request, item, position, score, ts)
        ("u1", "s1", "r1", None, None, None, later),
        ("u1", "s1", "r1", None, None, 0.5, t),  # the earlier copy of the empty response is kept
        ("u1", "s1", "r2", "a", 2, 0.1, t),
        ("u1", "s1", "r2", "a", 1, 0.2, later),  # the smaller position is kept
        ("u2", "s2", "r3", None, None, None, t),
    ]
    exp = spark.createDataFrame(exposures, input_ddl(EXPOSURE_COLUMNS))
    clk = spark.createDataFrame([], input_ddl(CLICK_COLUMNS))
    chain = join_feedback(
        deduplicate_exposures(by_user(exp, 2)), by_user(clk, 2), 20.0, WEIGHTS, "click", ("purchase",)
    )
    one = label_in_python(exp, clk, 2, 20.0, WEIGHTS, "click", ("purchase",))
    assert sorted_rows(one) == sorted_rows(chain)
    kept = {(r["request_id"], r["item_id"]): (r["position"], r["ts"], r["copies"]) for r in one.collect()}
    assert kept[("r1", None)] == (None, t, 2) and kept[("r2", "a")] == (1, later, 2)
