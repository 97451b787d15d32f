"""The whole daily job in local mode on a hand-built day: one golden table, many paths."""

from __future__ import annotations

import datetime as dt
import json
import math

import pytest
from chispa import assert_df_equality
from helpers.input_ddl import CLICK_DDL, DAY, EXPOSURE_DDL, T0

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.daily.summary import read_summary
from recsys_spark.kernels.ranking import ndcg_at_k

pytestmark = pytest.mark.spark


# u1 (two requests): r1 ranks a(.9) b(.8, clicked); r2 ranks c(.7, clicked by session) d(.6)
# u2: r3 ranks a(.5) b(.5) c(.1), no click           -> no relevant list, no AUC
# u3: r4 one item, clicked                             -> only positives, no AUC
# u4: r5 empty response                                -> nothing to rank
# plus a duplicate (r1, a at position 3) and an orphan click (r9)
EXPOSURES = [
    ("u1", "s1", "r1", "a", 1, 0.9, T0),
    ("u1", "s1", "r1", "b", 2, 0.8, T0),
    ("u1", "s1", "r1", "a", 3, 0.9, T0),
    ("u1", "s1", "r2", "c", 1, 0.7, T0),
    ("u1", "s1", "r2", "d", 2, 0.6, T0),
    ("u2", "s2", "r3", "a", 1, 0.5, T0),
    ("u2", "s2", "r3", "b", 2, 0.5, T0),
    ("u2", "s2", "r3", "c", 3, 0.1, T0),
    ("u3", "s3", "r4", "e", 1, 0.3, T0),
    ("u4", "s4", "r5", None, None, None, T0),
]
CLICKS = [
    ("u1", "s1", "r1", "b", T0 + dt.timedelta(minutes=1)),
    ("u1", "s1", None, "c", T0 + dt.timedelta(minutes=2)),
    ("u3", "s3", "r4", "e", T0 + dt.timedelta(minutes=1)),
    ("u9", "s9", "r9", "z", T0 + dt.timedelta(minutes=3)),
]


# the golden day shows item a twice in r1: a hard-rule violation, reported but not fatal here
SETTINGS = ["metrics.k=[1, 3]", "rules.fail_on_hard=false"]


@pytest.fixture(scope="module")
def day(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("golden")
    spark.createDataFrame(EXPOSURES, EXPOSURE_DDL).write.parquet(f"{root}/in/exposures/dt={DAY}")
    spark.createDataFrame(CLICKS, CLICK_DDL).write.parquet(f"{root}/in/clicks/dt={DAY}")
    summary = evaluate_day(spark, load_config(None, SETTINGS), DAY, f"{root}/in", f"{root}/out")
    return root, summary


def metric(spark, root, name, k, aggregation):
    rows = (
        spark.read.parquet(f"{root}/out/metrics")
        .where(f"metric = '{name}' and aggregation = '{aggregation}' and slice = 'all' and dt = '{DAY}'")
        .where(f"k = {k}" if k else "k is null")
        .collect()
    )
    assert len(rows) == 1, (name, k, aggregation, rows)
    return rows[0]


def test_auc_global_user_avg_and_impression_weighted(spark, day):
    root, _ = day
    # pooled: positives b(.8) c(.7) e(.3); negatives a(.9) d(.6) a(.5) b(.5) c(.1) -> 15 pairs
    # b beats 4, c beats 4, e beats 1 (c .1)  => 9 / 15
    assert metric(spark, root, "auc", None, "global").value == pytest.approx(9 / 15)
    assert metric(spark, root, "auc", None, "global").n == 8
    # only u1 has both classes: pos .8,.7 vs neg .9,.6 -> 2 / 4
    assert metric(spark, root, "auc", None, "user_avg").value == pytest.approx(0.5)
    assert metric(spark, root, "auc", None, "user_avg").n == 1
    assert metric(spark, root, "auc", None, "impression_weighted").value == pytest.approx(0.5)


def test_list_metrics_aggregations(spark, day):
    root, _ = day
    # ranked lists: r1 (hit at 2), r2 (hit at 1), r4 (hit at 1); users u1 (r1, r2) and u3 (r4)
    ndcg_r1 = ndcg_at_k([0, 1], 3)
    assert ndcg_r1 == pytest.approx(1 / math.log2(3))
    assert metric(spark, root, "ndcg", 3, "list_avg").value == pytest.approx((ndcg_r1 + 1 + 1) / 3)
    assert metric(spark, root, "ndcg", 3, "user_avg").value == pytest.approx(((ndcg_r1 + 1) / 2 + 1) / 2)
    assert metric(spark, root, "mrr", None, "user_avg").value == pytest.approx(((0.5 + 1) / 2 + 1) / 2)
    assert metric(spark, root, "map", 1, "list_avg").value == pytest.approx(2 / 3)
    # global precision@3 = hits / (3 * lists) = 3 / 9; recall@1 = hits@1 / sum R = 2 / 3
    assert metric(spark, root, "precision", 3, "global").value == pytest.approx(3 / 9)
    assert metric(spark, root, "recall", 1, "global").value == pytest.approx(2 / 3)
    assert metric(spark, root, "hit_rate", 1, "user_avg").value == pytest.approx((0.5 + 1) / 2)
    assert metric(spark, root, "ndcg", 3, "user_avg").n == 2


def test_summary_counts_data_quality(day):
    _, summary = day
    quality = summary["data_quality"]
    assert summary["input_rows"] == {"exposures": 10, "clicks": 4}
    assert quality["duplicate_exposures"] == 1
    assert quality["orphan_events"] == 1
    assert quality["empty_responses"] == 1
    assert quality["lists_without_relevant"] == 1  # r3
    assert quality["users_without_auc"] == 2  # u2 (no positives), u3 (no negatives)
    assert summary["headline"]["auc_global"] == pytest.approx(9 / 15)


def test_user_metrics_table(spark, day):
    root, _ = day
    table = spark.read.parquet(f"{root}/out/user_metrics/dt={DAY}")
    # one row per (slice, user, k), k = 1 and 3 here; the values without a cut-off repeat on each
    assert sorted((r.user_id, r.k) for r in table.select("user_id", "k").collect()) == [
        ("u1", 1),
        ("u1", 3),
        ("u2", 1),
        ("u2", 3),
        ("u3", 1),
        ("u3", 3),
    ]
    users = table.where("k = 3").select("user_id", "n_exposures", "n_relevant", "n_lists", "n_lists_ranked", "auc")
    expected = spark.createDataFrame(
        [("u1", 4, 2, 2, 2, 0.5), ("u2", 3, 0, 1, 0, None), ("u3", 1, 1, 1, 1, None)],
        "user_id string, n_exposures long, n_relevant long, n_lists long, n_lists_ranked long, auc double",
    )
    assert_df_equality(users, expected, ignore_row_order=True, ignore_nullable=True)
    # u1: r1 hit at rank 2 (RR 1/2, NDCG@3 1/log2(3), hits@3 1), r2 hit at rank 1 (RR 1, NDCG@3 1, hits@3 1)
    u1 = table.where("user_id = 'u1' and k = 3").first()
    assert u1.mrr == pytest.approx((1 / 2 + 1) / 2) and u1.ndcg == pytest.approx((1 / math.log2(3) + 1) / 2)
    assert u1.hits == 2


def test_summary_file_and_success_marker(spark, day):
    root, summary = day
    assert read_summary(spark, f"{root}/out", DAY.isoformat()) == json.loads(json.dumps(summary))
    assert (root / "out" / "summary" / f"dt={DAY}" / "_SUCCESS").exists()
    assert not (root / "out" / "_staging").exists()


def test_rerun_replaces_the_date_and_leaves_other_dates(spark, day, tmp_path):
    root, _ = day
    before = spark.read.parquet(f"{root}/out/metrics").orderBy("metric", "k", "aggregation").collect()
    other = root / "out" / "metrics" / "dt=2026-11-19"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    evaluate_day(spark, load_config(None, SETTINGS), DAY, f"{root}/in", f"{root}/out")
    after = spark.read.parquet(f"{root}/out/metrics/dt={DAY}").orderBy("metric", "k", "aggregation").collect()
    # the same rows; values up to the last bits (the per-user pass merges its partitions' sums in the order
    # its tasks finish)
    expected = [{k: v for k, v in r.asDict().items() if k != "dt"} for r in before]
    assert [{k: v for k, v in r.asDict().items() if k != "value"} for r in after] == [
        {k: v for k, v in r.items() if k != "value"} for r in expected
    ]
    assert [r.value for r in after] == pytest.approx([r["value"] for r in expected], rel=1e-12, nan_ok=True)
    assert (other / "keep.txt").exists()


def test_session_lists_pool_the_requests_of_a_session(spark, day, tmp_path):
    root, _ = day
    evaluate_day(
        spark,
        load_config(None, [*SETTINGS, "metrics.k=[3]", "ranking.list_unit=session"]),
        DAY,
        f"{root}/in",
        str(tmp_path),
    )
    mrr = spark.read.parquet(f"{tmp_path}/metrics").where("metric = 'mrr' and aggregation = 'list_avg'").first()
    # s1 ranks a(.9) b(.8, hit) c(.7, hit) d(.6): RR 1/2; s3: RR 1  => (1/2 + 1) / 2 over 2 lists
    assert mrr.value == pytest.approx(0.75) and mrr.n == 2


@pytest.mark.parametrize("adaptive", [False, True])
def test_after_labelling_the_queries_are_planned_without_aqe_and_the_session_is_restored(
    spark, day, tmp_path, monkeypatch, adaptive
):
    # the stages after labelling run with adaptive query execution off and the day's user partitions as
    # shuffle partitions (session.fixed_shuffles); execution.adaptive_outside_label=true leaves the session
    # alone; either way the session's own values are back once the day is done
    import recsys_spark.daily.run as pipeline

    root, _ = day
    keys = ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions")
    before = {key: spark.conf.get(key) for key in keys}
    seen = {}
    real = pipeline.metric_stage

    def recording(labelled, cfg, out, **options):
        seen.update({key: spark.conf.get(key) for key in keys}, partitions=labelled.partitions)
        return real(labelled, cfg, out, **options)

    monkeypatch.setattr(pipeline, "metric_stage", recording)
    cfg = load_config(None, [*SETTINGS, f"execution.adaptive_outside_label={str(adaptive).lower()}"])
    evaluate_day(spark, cfg, DAY, f"{root}/in", f"{tmp_path}/out")
    if adaptive:
        assert {key: seen[key] for key in keys} == before
    else:
        assert seen["spark.sql.adaptive.enabled"] == "false"
        assert seen["spark.sql.shuffle.partitions"] == str(seen["partitions"])
    assert {key: spark.conf.get(key) for key in keys} == before
    assert before["spark.sql.adaptive.enabled"] == "true"  # the test session plans adaptively


def _seen_by_the_metric_stage(spark, day, tmp_path, monkeypatch, setting, look):
    """Run the day with ``setting`` and return ``look(labelled)`` of what the label stage hands the metric stage."""
    import recsys_spark.daily.run as pipeline

    root, _ = day
    seen = {}
    real = pipeline.metric_stage

    def recording(labelled, cfg, out, **options):
        seen.update(look(labelled))
        return real(labelled, cfg, out, **options)

    monkeypatch.setattr(pipeline, "metric_stage", recording)
    evaluate_day(spark, load_config(None, [*SETTINGS, setting]), DAY, f"{root}/in", f"{tmp_path}/out")
    return seen


def test_the_user_partitions_hold_each_exposure_once_and_the_slices_are_exploded_as_read(
    spark, day, tmp_path, monkeypatch
):
    # with S slice dimensions every exposure is 1 + S rows for the passes; the cache holds it once (with the
    # dimensions' values as columns) and each pass explodes the slices from it, in place: no exchange
    from helpers.spark_plans import names_and_exchanges
    from pyspark.sql import functions as F

    from recsys_spark.runtime.session import CACHE_LEVEL

    def look(labelled):
        rows, by_user = labelled.rows, labelled.by_user
        return dict(
            level=rows.storageLevel,
            columns=rows.columns,
            rows=rows.count(),
            exposures=labelled.exposures.count(),
            exploded=sorted(r[0] for r in by_user.groupBy("slice").count().collect()),
            sliced_rows=by_user.count(),
            cached_view=by_user.is_cached,
            plan=names_and_exchanges(labelled.ranked.groupBy("user_id").agg(F.count(F.lit(1)))),
        )

    seen = _seen_by_the_metric_stage(spark, day, tmp_path, monkeypatch, 'slices.names=["hour", "weekday"]', look)
    # 9 labelled exposures (10 rows, one duplicate), the empty response included; each under 3 slices
    assert seen["level"] == CACHE_LEVEL and seen["rows"] == seen["exposures"] == 9
    assert "slice" not in seen["columns"] and {"_s_hour", "_s_weekday"} <= set(seen["columns"])
    assert seen["sliced_rows"] == 27 and not seen["cached_view"]
    assert [s.split("=")[0] for s in seen["exploded"]] == ["all", "hour", "weekday"]
    names, exchanges = seen["plan"]
    assert "InMemoryTableScan" in names and "Generate" in names and exchanges == [], (names, exchanges)


def test_the_spark_jobs_of_a_small_day_are_few_and_do_not_grow_with_the_slices(spark, day, tmp_path, monkeypatch):
    # a small day runs few Spark jobs (docs/performance.md: on a cold JVM each also pays its warm-up): reading
    # runs none (the footers give the schema and the rows), and after labelling the job count is the same
    # with three slice dimensions as with none (the slices are exploded where the passes read them)
    import contextlib

    from recsys_spark.runtime import log

    root, _ = day
    real, jobs, run = log.stage, {}, ["none"]

    @contextlib.contextmanager
    def counted(name, timings, progress_seconds=None, **fields):
        group = f"count-{run[0]}-{name}"  # a group of its own per run: a group's job ids accumulate
        spark.sparkContext.setJobGroup(group, name)
        try:
            with real(name, timings, progress_seconds, **fields) as info:
                yield info
        finally:
            jobs[name] = len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)

    monkeypatch.setattr(log, "stage", counted)
    per_setting = {}
    for name, extra in (("none", []), ("three", ['slices.names=["hour", "weekday", "day_type"]'])):
        jobs.clear()
        run[0] = name
        evaluate_day(spark, load_config(None, [*SETTINGS, *extra]), DAY, f"{root}/in", f"{tmp_path}/{name}")
        per_setting[name] = dict(jobs)
    for counts in per_setting.values():
        assert counts["read"] == 0 and counts["write"] == 0
        assert counts["validate"] == 1  # exposures, clicks and the catalog counted in one job
    after = {
        name: sum(v for k, v in c.items() if k not in ("read", "validate", "label")) for name, c in per_setting.items()
    }
    assert after["three"] == after["none"] <= 12, per_setting


def test_the_python_labelling_path_moves_the_rows_once_and_persists_them_where_they_lie(
    spark, day, tmp_path, monkeypatch
):
    # execution.labelling = "python": exposures and events in one exchange by user, the pass's output persisted
    # as it stands (a second shuffle by user moved every labelled row again before), each user in one partition
    from pyspark.sql import functions as F

    def look(labelled):
        rows = labelled.rows
        where = rows.select("user_id", F.spark_partition_id().alias("p")).distinct()
        return dict(
            plan=str(rows._jdf.queryExecution().executedPlan().toString()),
            split=where.groupBy("user_id").count().where("count > 1").count(),
        )

    seen = _seen_by_the_metric_stage(spark, day, tmp_path, monkeypatch, "execution.labelling=python", look)
    assert "MapInArrow" in seen["plan"] and seen["plan"].count("Exchange") == 1, seen["plan"]
    assert seen["split"] == 0
