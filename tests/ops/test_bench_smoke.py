"""The benchmark harness on a tiny day: every task runs and our numbers agree with the peers'.

Structure and agreement only: speed is proven by ``make bench``, never asserted here.
"""

from __future__ import annotations

import pytest

from benchmarks import bench
from recsys_spark.config import load_config

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    return bench.run_bench(spark, load_config(None), [("3k", 3000)], root, repeats=1, warmup=0, say=lambda line: None)


def test_every_task_is_timed_once(report):
    assert [t.task for t in report.timings] == [*bench.ROUND_TASKS, "mllib_same_output", "plain"]
    # one timing each (repeats=1), all of the same generated day; the durations themselves are not checked
    assert all(len(t.seconds) == 1 and t.scale == 1 for t in report.timings)
    assert len({t.rows for t in report.timings}) == 1 and report.timings[0].rows > 2000


def test_mllib_for_the_same_output_is_priced_from_its_timed_parts(report):
    # lists + 4 *AtK metrics x ks evaluations + exact AUC (each coefficient pinned apart from the others)
    assert bench.same_output_seconds(1.0, 0.5, 5, 2.0) == 1.0 + 20 * 0.5 + 2.0
    assert bench.same_output_seconds(0.0, 1.0, 3, 0.0) == 12.0
    assert bench.same_output_seconds(3.0, 0.0, 5, 0.0) == 3.0 and bench.same_output_seconds(0, 0, 5, 7.0) == 7.0
    assert len(report.timing("3k", "mllib_same_output").seconds) == 1  # priced once per timed round


def test_sweep_times_each_setting_and_restores_the_arrow_batch(spark, tmp_path):
    before = spark.conf.get(bench.ARROW_BATCH_KEY)
    configs = {
        (b, a): load_config(None, [f"execution.rows_per_bucket={b}", f"execution.arrow_batch_rows={a}"])
        for b, a in ((200_000, 10_000), (1_000, 3))
    }
    results = bench.run_sweep(spark, configs, tmp_path, 3000, repeats=1, say=lambda line: None)
    assert [(r["rows_per_bucket"], r["arrow_batch_rows"]) for r in results] == list(configs)
    assert all(len(r["seconds"]) == 1 and r["median"] == r["seconds"][0] for r in results)
    assert spark.conf.get(bench.ARROW_BATCH_KEY) == before
    assert "| 1000 | 3 |" in bench.sweep_markdown(results, 3000, {"summary": "m"}, "cmd")


def test_our_metrics_agree_with_the_peers_where_the_definitions_coincide(report):
    judged = {(c.ours, c.peer): c for c in report.checks if c.tolerance is not None}
    assert {ours for ours, _ in judged} == {
        "per-user AUC",
        "per-user NDCG@10",
        "per-user AP@10",
        "NDCG@10, mean over lists",
        "AP@10, mean over lists",
        "precision@10, mean over lists",
        "recall@10, mean over lists",
        "global AUC (exact)",
    }
    failed = [c for c in judged.values() if not c.ok]
    assert not failed, failed
    assert all(c.n > 0 for c in judged.values())
    assert judged[("per-user AUC", "plain applyInPandas (scikit-learn AUC)")].n > 20


def test_differing_definitions_are_shown_not_judged(report):
    shown = [c for c in report.checks if c.tolerance is None]
    assert {c.peer for c in shown} == {
        "RankingEvaluator meanAveragePrecision",
        "BinaryClassificationEvaluator numBins=1000",
    }
    assert all(c.diff is not None for c in shown)


def test_labelled_exposures_are_not_shuffled_again_for_the_per_user_stage(report):
    # labelling partitions exposures by user (label.by_user) and its output keeps that partitioning:
    # the per-user pass reads the labelled rows in place (it shuffled them once more before)
    assert report.structure["shuffles of labelled exposures after labelling, per-user stage"] == 0


def test_report_is_one_markdown_table_with_targets_and_agreement(report):
    text = report.markdown()
    for label in bench.TASKS.values():
        assert label in text
    assert "| target | met | measured |" in text and "| size | ours | peer |" in text
    assert "Microsoft Recommenders" in text and "RePlay" in text  # cited, not run


def test_a_user_over_the_row_bound_takes_the_bounded_path_and_keeps_an_exact_auc(spark, tmp_path):
    cfg = load_config(None, ["execution.max_user_rows=1000"])
    skew = bench.run_skew(spark, cfg, tmp_path, rows=3000, heavy_rows=4000, say=lambda line: None)
    assert skew["users_over_row_bound"] == 1 and skew["n_exposures"] == skew["heavy_rows"] > 1000
    assert skew["auc_diff"] < 1e-12
    assert any("max_user_rows=1000" in note for note in skew["notes"])
