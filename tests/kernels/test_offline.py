"""Offline-evaluation kernels: hand-computed cases, scikit-learn oracles, the sampled-metric golden values."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import log_loss, roc_auc_score

from recsys_spark.config import parse_distortion, parse_range
from recsys_spark.kernels import offline as K
from recsys_spark.kernels import sampled as S

L3 = math.log2(3)  # discount of rank 2
L4 = 2.0  # log2(4), discount of rank 3


def list_frame(rows) -> pd.DataFrame:
    """rows: (user, rank or None, relevance[, category, self_info, new_category, has_history]) as a LIST_INPUT
    frame"""
    full = [r + (None, np.nan, np.nan, np.nan)[len(r) - 3 :] for r in rows]
    frame = pd.DataFrame(full, columns=list(K.LIST_INPUT))
    frame["rank"] = frame["rank"].astype(float)
    return frame


def lists(rows, ks=(2,), gain="linear"):
    return K.score_lists(list_frame(rows), ks, gain).set_index("user_id")


# --------------------------------------------------------------------------- top-K lists


def test_list_against_truth_by_hand():
    # list a, b, c with b relevant; truth {b, d} (d missing from the list)
    r = lists([("u", 1, 0), ("u", 2, 1), ("u", 3, 0), ("u", None, 1)]).loc["u"]
    assert r["n_list"] == 3 and r["n_truth"] == 2 and r["hits_at_2"] == 1
    assert r["precision_at_2"] == 1 / 2  # 1 hit of k = 2
    assert r["recall_at_2"] == 1 / 2  # 1 hit of 2 truth items, d included
    assert r["f1_at_2"] == pytest.approx(2 * 0.5 * 0.5 / (0.5 + 0.5))
    assert r["mrr"] == 1 / 2
    assert r["map_at_2"] == pytest.approx((1 / 2) / min(2, 2))  # P@2 at the hit, / min(R, k)
    # ideal from the truth (b and d, both 1): 1 + 1/log2 3
    assert r["ndcg_at_2"] == pytest.approx((1 / L3) / (1 + 1 / L3))
    assert r["hit_rate_at_2"] == 1.0


def test_graded_ideal_comes_from_the_truth_not_the_list():
    # list x (irrelevant), a (rel 1); truth a = 1, b = 2; exponential gain 2^rel - 1
    r = lists([("u", 1, 0), ("u", 2, 1), ("u", None, 2)], gain="exponential").loc["u"]
    dcg = 1 / L3
    idcg = 3 / 1 + 1 / L3  # b (gain 3) first, then a (gain 1)
    assert r["ndcg_at_2"] == pytest.approx(dcg / idcg)


def test_user_with_truth_but_no_list_scores_zero():
    r = lists([("u", None, 1), ("u", None, 1)]).loc["u"]
    assert r["n_list"] == 0 and r["n_truth"] == 2
    for col in ("precision_at_2", "recall_at_2", "f1_at_2", "ndcg_at_2", "map_at_2", "hit_rate_at_2", "mrr"):
        assert r[col] == 0.0, col


def test_user_with_list_but_no_truth_has_no_accuracy_value():
    r = lists([("u", 1, 0), ("u", 2, 0)]).loc["u"]
    assert r["n_truth"] == 0
    assert all(math.isnan(r[c]) for c in ("precision_at_2", "recall_at_2", "ndcg_at_2", "mrr", "serendipity"))


def test_relevant_item_below_the_cut_counts_for_mrr_but_not_at_k():
    r = lists([("u", 1, 0), ("u", 2, 0), ("u", 3, 1)]).loc["u"]
    assert r["mrr"] == 1 / 3 and r["hits_at_2"] == 0 and r["recall_at_2"] == 0.0


def test_truth_outside_a_short_list_is_never_a_hit():
    # list of 1 (a miss), k = 5: the truth item outside the list must not fall inside the top 5
    r = lists([("u", 1, 0), ("u", None, 1)], ks=(5,)).loc["u"]
    assert r["hits_at_5"] == 0 and r["mrr"] == 0.0 and r["ndcg_at_5"] == 0.0
    # a short list keeps k in the precision denominator: 1 hit in a list of 2 at k = 5
    r = lists([("u", 1, 1), ("u", 2, 0)], ks=(5,)).loc["u"]
    assert r["precision_at_5"] == 1 / 5 and r["recall_at_5"] == 1.0


def test_users_in_one_batch_do_not_mix():
    both = lists([("a", 1, 1), ("b", 1, 0), ("b", 2, 1), ("a", 2, 0), ("b", None, 1)])
    assert both.loc["a", "mrr"] == 1.0 and both.loc["a", "recall_at_2"] == 1.0
    assert both.loc["b", "mrr"] == 1 / 2 and both.loc["b", "recall_at_2"] == 1 / 2


def test_beyond_accuracy_by_hand():
    # list: a (cat A, relevant, new category), b (cat A, relevant, seen category), c (cat B, miss, new)
    r = lists([("u", 1, 1, "A", 1.0, 1.0), ("u", 2, 1, "A", 2.0, 0.0), ("u", 3, 0, "B", 6.0, 1.0)], ks=(3,)).loc["u"]
    assert r["intra_list_diversity"] == pytest.approx(1 - (2 * 1) / (3 * 2))  # pairs in different categories: 2 of 3
    assert r["novelty"] == pytest.approx((1 + 2 + 6) / 3)
    assert r["serendipity"] == pytest.approx(1 / 3)  # only a is relevant and new to the user


def test_beyond_accuracy_uses_the_top_k_max_items():
    r = lists([("u", 1, 1, "A", 1.0, 1.0), ("u", 2, 0, "B", 1.0, 1.0), ("u", 3, 1, "C", 5.0, 1.0)], ks=(2,)).loc["u"]
    assert r["intra_list_diversity"] == 1.0 and r["novelty"] == 1.0 and r["serendipity"] == 1 / 2


def test_list_kernel_agrees_with_a_per_user_reference():
    rng = np.random.default_rng(3)
    rows = []
    for u in range(30):
        n_list = int(rng.integers(0, 8))
        items = rng.permutation(20)
        listed = items[:n_list]
        truth = set(rng.choice(20, int(rng.integers(0, 5)), replace=False).tolist())
        rows += [(f"u{u}", i + 1, float(it in truth)) for i, it in enumerate(listed)]
        rows += [(f"u{u}", None, 1.0) for it in truth if it not in set(listed.tolist())]
        # reference, by brute force
        hits5 = sum(1 for it in listed[:5] if it in truth)
        if truth:
            got = lists([r for r in rows if r[0] == f"u{u}"], ks=(5,)).loc[f"u{u}"]
            assert got["recall_at_5"] == pytest.approx(hits5 / len(truth))
            dcg = sum(1 / math.log2(i + 2) for i, it in enumerate(listed[:5]) if it in truth)
            idcg = sum(1 / math.log2(i + 2) for i in range(min(len(truth), 5)))
            assert got["ndcg_at_5"] == pytest.approx(dcg / idcg)
    frame = lists(rows, ks=(5,))
    for u in frame.index:  # scoring all users at once gives each user's own values
        alone = lists([r for r in rows if r[0] == u], ks=(5,)).loc[u]
        pd.testing.assert_series_equal(frame.loc[u], alone, check_names=False)


# --------------------------------------------------------------------------- predictions


def test_predictions_match_scikit_learn():
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame(
        {
            "user_id": rng.choice(["a", "b", "c"], n),
            "score": rng.random(n).round(2),
            "label": (rng.random(n) < 0.3).astype(int),
        }
    )
    out = K.score_predictions(frame).set_index("user_id")
    for u, g in frame.groupby("user_id"):
        assert out.loc[u, "auc"] == pytest.approx(roc_auc_score(g["label"], g["score"]), abs=1e-12)
        assert out.loc[u, "logloss"] == pytest.approx(log_loss(g["label"], g["score"]), abs=1e-12)
        assert out.loc[u, "predicted_sum"] == pytest.approx(g["score"].sum())
    pooled = out["logloss_sum"].sum() / out["n_predictions"].sum()
    assert pooled == pytest.approx(log_loss(frame["label"], frame["score"]), abs=1e-12)


def test_user_with_one_class_has_no_auc():
    out = K.score_predictions(pd.DataFrame({"user_id": ["a", "a"], "score": [0.2, 0.9], "label": [1, 1]}))
    assert math.isnan(out["auc"].iloc[0]) and out["n_positive"].iloc[0] == 2


def test_calibration_table_and_ece_by_hand():
    p = np.array([0.05, 0.15, 0.55, 0.65, 0.95])
    y = np.array([0, 0, 1, 0, 1])
    b = K.calibration_bin(p, 2)  # [0, 0, 1, 1, 1]
    assert b.tolist() == [0, 0, 1, 1, 1]
    n = np.bincount(b)
    table, ece = K.calibration_table(np.array([0, 1]), n, np.bincount(b, p), np.bincount(b, y), 2)
    assert table["mean_predicted"].tolist() == pytest.approx([0.1, (0.55 + 0.65 + 0.95) / 3])
    assert table["observed_rate"].tolist() == pytest.approx([0.0, 2 / 3])
    assert ece == pytest.approx((2 * 0.1 + 3 * abs(2 / 3 - 2.15 / 3)) / 5)


# --------------------------------------------------------------------------- ratings


def test_distortion_of_the_three_star_example():
    # second source document: 1 = dislike, 2 = neutral, 3 = like; recommending a disliked item is worst
    table = parse_distortion({"3,1": 5, "2,1": 3, "3,2": 3, "1,2": 1, "2,3": 1, "1,3": 2})
    actual = np.array([1, 1, 2, 2, 3, 3, 2])
    predicted = np.array([3, 2, 3, 1, 2, 1, 2])
    e = K.rating_errors(actual, predicted, distortion=table)
    assert e["distortion"].tolist() == [5, 3, 3, 1, 1, 2, 0]
    assert e["abs"].tolist() == [2, 1, 1, 1, 1, 2, 0]
    assert not e["distortion_missing"].any()


def test_distortion_pair_not_in_table_falls_back_and_is_flagged():
    e = K.rating_errors(np.array([1.0]), np.array([3.0]), distortion={(2.0, 1.0): 3.0})
    assert e["distortion"].tolist() == [2.0] and e["distortion_missing"].tolist() == [True]


def test_rounding_predictions_on_an_integer_scale_lowers_mae():
    rating = np.array([4, 4, 2, 5])
    pred = np.array([4.3, 3.6, 2.4, 4.7])
    raw = K.rating_errors(rating, pred)["abs"].mean()  # (0.3 + 0.4 + 0.4 + 0.3) / 4 = 0.35
    rounded = K.rating_errors(rating, pred, round_predictions=True, value_range=(1, 5))["abs"].mean()  # all exact
    assert raw == pytest.approx(0.35) and rounded == 0.0
    # clipping to the range after rounding; 2.5 rounds half up
    e = K.rating_errors(np.array([5.0, 2.0]), np.array([6.2, 2.5]), True, (1, 5))
    assert e["abs"].tolist() == [0.0, 1.0]


def test_user_averaged_mae_differs_from_overall_on_unbalanced_users():
    # user a: 4 ratings, errors 0 each; user b: 1 rating, error 2
    abs_err = {"a": [0, 0, 0, 0], "b": [2]}
    overall = sum(sum(v) for v in abs_err.values()) / 5  # 2 / 5
    user_avg = np.mean([np.mean(v) for v in abs_err.values()])  # (0 + 2) / 2
    assert overall == 0.4 and user_avg == 1.0


def test_parse_range_and_distortion_errors():
    assert parse_range("") is None and parse_range("1,5") == (1.0, 5.0)
    with pytest.raises(ValueError):
        parse_range("5,1")
    with pytest.raises(ValueError):
        parse_distortion({"3": 1})


# --------------------------------------------------------------------------- sampled metrics


def test_golden_hypergeometric_probabilities():
    a = S.rank_distribution(100, 9, np.array([20]))[0]
    assert a[:4].round(4).tolist() == [0.1340, 0.3182, 0.3138, 0.1682]
    assert a == pytest.approx(stats.hypergeom.pmf(np.arange(10), 99, 19, 9), abs=1e-12)
    assert a.sum() == pytest.approx(1.0)
    b = S.rank_distribution(100, 9, np.array([20]), replace=True)[0]
    assert b == pytest.approx(stats.binom.pmf(np.arange(10), 9, 19 / 99))


def test_expected_sampled_rank():
    n, m = 100, 9
    for r in (1, 20, 100):
        a = S.rank_distribution(n, m, np.array([r]))[0]
        assert a @ np.arange(1, m + 2) == pytest.approx(1 + m * (r - 1) / (n - 1))


def test_golden_ndcg_exact_and_naive():
    assert S.metric_at_rank("ndcg", np.array([5.0]), 100, 10)[0] == pytest.approx(0.386853, abs=1e-6)
    # REFERENCES.md's naive value is the binomial law (the seed document's); hypergeometric is a little lower
    assert S.expected_naive("ndcg", 100, 9, 5, 10, replace=True) == pytest.approx(0.878856, abs=1e-6)
    assert S.expected_naive("ndcg", 100, 9, 5, 10) == pytest.approx(0.876023, abs=1e-6)


def test_sampled_auc_is_unbiased_for_every_rank():
    n, m = 100, 9
    ranks = np.arange(1, n + 1)
    a = S.rank_distribution(n, m, ranks)
    sampled_auc = (m + 1 - np.arange(1, m + 2)) / m
    assert a @ sampled_auc == pytest.approx((n - ranks) / (n - 1), abs=1e-12)


def test_naive_recall_is_one_when_the_sample_fits_in_k():
    # m + 1 <= k: every target is in the "top k" of its own sample, whatever the model
    values = S.target_metrics(np.array([1.0, 5.0, 10.0]), np.array([9, 9, 9]), [10], {})
    assert values["sampled_recall_at_10"].tolist() == [1.0, 1.0, 1.0]


def test_sampled_ranks_with_ties_match_brute_force():
    rng = np.random.default_rng(5)
    user = rng.integers(0, 6, 300)
    score = rng.integers(0, 10, 300).astype(float)  # many ties
    target = rng.random(300) < 0.1
    idx, m, above, ties = S.sampled_ranks(user, score, target)
    assert sorted(idx.tolist()) == np.flatnonzero(target).tolist()
    for i, mm, a, t in zip(idx, m, above, ties, strict=True):
        negs = score[(user == user[i]) & ~target]
        assert (mm, a, t) == (len(negs), (negs > score[i]).sum(), (negs == score[i]).sum())


def test_tied_target_takes_the_mean_of_its_two_ranks():
    # target 0.5 with one negative above (0.9) and one tied (0.5): rank 2.5
    out = S.score_sampled(
        pd.DataFrame({"user_id": ["a"] * 4, "score": [0.5, 0.9, 0.5, 0.1], "is_target": [True, False, False, False]}),
        [2],
        {},
    )
    r = out.iloc[0]
    assert r["sampled_rank"] == 2.5
    assert r["sampled_mrr"] == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert r["sampled_recall_at_2"] == pytest.approx((1 + 0) / 2)
    assert r["sampled_auc"] == pytest.approx((3 + 1 - 2.5) / 3)  # one of three negatives below, one tied


def test_corrected_estimator_tracks_the_metric_in_expectation():
    n, m = 500, 49
    table = S.correction_table("recall", n, m, 10, gamma=0.01)
    ranks = np.arange(1, n + 1)
    expected = S.rank_distribution(n, m, ranks) @ table
    truth = S.metric_at_rank("recall", ranks, n, 10)
    naive = S.rank_distribution(n, m, ranks) @ S.metric_at_rank("recall", np.arange(1, m + 2), m + 1, 10)
    # averaged over uniformly spread ranks the corrected values are close, the naive ones far
    assert abs(expected.mean() - truth.mean()) < 0.01 < abs(naive.mean() - truth.mean())


def test_simulation_corrected_is_much_closer_than_naive():
    """Full ranks known; negatives really sampled; mean naive and corrected vs the full-catalog value."""
    rng = np.random.default_rng(11)
    n, m, users = 2000, 99, 4000
    # a model whose targets' full ranks are spread like a decent recommender's: log-uniform over the catalog
    full_rank = np.minimum(np.floor(np.exp(rng.uniform(0, math.log(n), users))).astype(int), n)
    # sampled rank: how many of m items drawn without replacement from the n - 1 others sit above the target
    above = rng.hypergeometric(full_rank - 1, n - full_rank, m)
    sampled_rank = 1.0 + above
    tables = S.tables_for(n, [m], [10], gamma=0.01)
    values = S.target_metrics(sampled_rank, np.full(users, m), [10], tables)
    for name in ("ndcg", "recall", "map"):
        exact = S.metric_at_rank(name, full_rank.astype(float), n, 10).mean()
        naive = values[f"sampled_{name}_at_10"].mean()
        corrected = values[f"corrected_{name}_at_10"].mean()
        assert abs(corrected - exact) * 5 < abs(naive - exact), (name, exact, naive, corrected)
    exact_auc = ((n - full_rank) / (n - 1)).mean()
    assert values["sampled_auc"].mean() == pytest.approx(exact_auc, abs=0.01)


def test_unregularised_fit_oscillates_and_gamma_tames_it():
    # n = 1000, m = 99: unregularised values reach the hundreds (measured 391.6), gamma = 0.01 stays below 1
    wild = S.correction_table("ndcg", 1000, 99, 10, gamma=1e-9)
    tame = S.correction_table("ndcg", 1000, 99, 10, gamma=0.01)
    assert np.abs(wild).max() > 20 and np.abs(tame).max() < 1


def test_correction_rejects_bad_parameters():
    with pytest.raises(ValueError):
        S.correction_table("ndcg", 100, 9, 10, gamma=0.0)
    with pytest.raises(ValueError):
        S.correction_table("ndcg", 10, 10, 10)


def test_kernels_do_not_import_pyspark():
    import subprocess
    import sys

    code = (
        "import sys, recsys_spark.kernels.offline, recsys_spark.kernels.sampled; "
        "assert not any(m.startswith('pyspark') for m in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_offline_fails_fast_without_inputs_and_on_bad_names(capsys):
    from recsys_spark.cli import run

    assert run(["offline", "--run", "m1", "--output-root", "/tmp/nowhere"]) == 3
    assert "nothing to evaluate" in capsys.readouterr().err
    assert run(["offline", "--run", "a/b", "--output-root", "/tmp/nowhere"]) == 2
    assert run(["offline-compare", "--output-root", "/tmp/x", "--base", "a"]) == 2  # --candidate missing


def test_offline_config_rejects_bad_values():
    from recsys_spark.config import load_config
    from recsys_spark.errors import ConfigError

    for bad in (
        "offline.sampled_gamma=0",
        "offline.rating_range='5,1'",
        "offline.calibration_bins=0",
        "offline.multiple_testing=bonferroni",
        'offline.distortion={"3" = 1}',
    ):
        with pytest.raises(ConfigError, match="offline"):
            load_config(None, [bad])
    assert load_config(None, ["offline.catalog_size=0"]).offline.catalog_size == 0


def test_offline_generator_writes_every_input_and_a_loadable_config(tmp_path):
    import pyarrow.parquet as pq

    from recsys_spark.config import load_config
    from recsys_spark.synthetic.generate_offline import generate

    counts = generate(tmp_path, users=50, items=400, seed=3)
    cfg = load_config(tmp_path / "offline.toml").offline
    for key in ("recommendations", "truth", "train", "items", "predictions", "ratings", "sampled"):
        path = getattr(cfg, key).replace("{run}", "base")
        assert pq.read_table(path).num_rows > 0, key
    sampled = pq.read_table(cfg.sampled.replace("{run}", "candidate")).to_pandas()
    per_user = sampled.groupby("user_id")["is_target"].agg(["sum", "size"])
    assert (per_user["sum"] == 1).all() and (per_user["size"] == 100).all()  # one target, 99 negatives
    train = pq.read_table(cfg.train).to_pandas()
    truth = pq.read_table(cfg.truth).to_pandas()
    train_pairs = set(zip(train.user_id, train.item_id, strict=True))
    assert not train_pairs & set(zip(truth.user_id, truth.item_id, strict=True))  # a real split
    assert counts["items"] == 400
    assert generate(tmp_path / "again", users=50, items=400, seed=3) == counts  # one seed, the same data


def test_score_sampled_one_row_per_user_with_its_counts_means_and_types():
    # user b: targets 0.9 (no negative above: rank 1) and 0.5 (0.7 above: rank 2), negatives 0.7, 0.1;
    # user a: target 0.2 below both negatives 0.3, 0.8 (rank 3).  Rows in order of first appearance.
    frame = pd.DataFrame(
        {
            "user_id": ["b", "b", "b", "b", "a", "a", "a"],
            "score": [0.9, 0.5, 0.7, 0.1, 0.3, 0.2, 0.8],
            "is_target": pd.array([True, True, False, False, False, True, False], dtype="boolean"),  # nullable
        }
    )
    out = S.score_sampled(frame, [2], {})
    assert list(out.columns) == [name for name, _ in S.user_columns([2])]
    assert out["user_id"].tolist() == ["b", "a"]
    assert out["n_targets"].tolist() == [2, 1] and out["n_negatives"].tolist() == [2, 2]
    assert out["sampled_rank"].tolist() == [1.5, 3.0]  # mean of the ranks 1 and 2
    assert out["sampled_mrr"].tolist() == pytest.approx([(1 + 1 / 2) / 2, 1 / 3])
    assert out["sampled_auc"].tolist() == pytest.approx([(2 / 2 + 1 / 2) / 2, 0.0])  # (m + 1 - rank) / m
    assert out["corrected_mrr"].isna().all()  # no table for m = 2
    assert out["user_id"].dtype == object
    assert (out["n_targets"].dtype, out["n_negatives"].dtype) == (np.int64, np.int64)
    assert (out.dtypes.iloc[3:] == np.float64).all()


def test_score_sampled_without_targets_is_an_empty_frame_of_the_declared_types():
    frame = pd.DataFrame({"user_id": ["a", "a"], "score": [0.1, 0.2], "is_target": [False, False]})
    out = S.score_sampled(frame, [2], {})
    assert len(out) == 0 and list(out.columns) == [name for name, _ in S.user_columns([2])]
    spark_to_pandas = {"string": object, "long": np.int64, "double": np.float64}
    assert [out[name].dtype for name, _ in S.user_columns([2])] == [spark_to_pandas[t] for _, t in S.user_columns([2])]


def test_user_columns_name_and_type_every_sampled_and_corrected_metric():
    cols = S.user_columns([2])
    assert cols[:8] == [
        ("user_id", "string"),
        ("n_targets", "long"),
        ("n_negatives", "long"),
        ("sampled_rank", "double"),
        ("sampled_auc", "double"),
        ("corrected_auc", "double"),
        ("sampled_mrr", "double"),
        ("corrected_mrr", "double"),
    ]
    rest = [
        (S.column(name, k, kind), "double") for name, k in S.metric_names([2])[2:] for kind in ("sampled", "corrected")
    ]
    assert cols[8:] == rest and ("corrected_ndcg_at_2", "double") in rest


def test_tables_for_every_usable_number_of_negatives():
    # n = 10 items: m = 0 (nothing sampled) and m >= n (more negatives than other items) have no table
    tables = S.tables_for(10, [3, 0, 1, 9, 10, 3, 12], [2], 0.01)
    assert sorted(tables) == [1, 3, 9]
    assert set(tables[3]) == {name for name, _ in S.user_columns([2]) if name.startswith("corrected_")}
    # AUC is not corrected: its table is the naive (m + 1 - r) / m at r = 1..m+1
    np.testing.assert_allclose(tables[3]["corrected_auc"], [1.0, 2 / 3, 1 / 3, 0.0], rtol=1e-12)
    for replace in (False, True):
        got = S.tables_for(10, [3], [2], 0.01, replace=replace)[3]["corrected_ndcg_at_2"]
        np.testing.assert_allclose(got, S.correction_table("ndcg", 10, 3, 2, 0.01, replace=replace), rtol=1e-12)
    with_replacement = S.tables_for(10, [3], [2], 0.01, replace=True)[3]["corrected_ndcg_at_2"]
    assert not np.allclose(with_replacement, tables[3]["corrected_ndcg_at_2"])  # the default is without


def test_target_metrics_without_negatives_are_nan_and_with_one_are_defined():
    # m = 0: nothing was sampled, no naive value; m = 1: rank 1 or 2 of two items
    values = S.target_metrics(np.array([1.0, 1.0, 2.0]), np.array([0, 1, 1]), [1], {})
    np.testing.assert_array_equal(values["sampled_auc"], [np.nan, 1.0, 0.0])
    np.testing.assert_array_equal(values["sampled_mrr"], [np.nan, 1.0, 0.5])
    np.testing.assert_array_equal(values["sampled_recall_at_1"], [np.nan, 1.0, 0.0])
    assert np.isnan(values["corrected_mrr"]).all()  # no tables given


def test_score_predictions_columns_and_types_also_when_empty():
    spark_to_pandas = {"string": object, "long": np.int64, "double": np.float64}
    frame = pd.DataFrame({"user_id": ["b", "a", "b"], "score": [0.9, 0.2, 0.4], "label": [1.0, 0.0, 0.0]})
    for f in (frame, frame.iloc[:0]):
        out = K.score_predictions(f)
        assert list(out.columns) == [name for name, _ in K.PREDICTION_COLUMNS]
        assert [out[n].dtype for n, _ in K.PREDICTION_COLUMNS] == [spark_to_pandas[t] for _, t in K.PREDICTION_COLUMNS]
    out = K.score_predictions(frame)
    assert out["user_id"].tolist() == ["b", "a"] and out["n_predictions"].tolist() == [2, 1]
    assert out["n_positive"].tolist() == [1, 0] and out["predicted_sum"].tolist() == pytest.approx([1.3, 0.2])


def test_expected_naive_auc_is_unbiased():
    # the naive AUC (m + 1 - r~) / m has expectation (n - r) / (n - 1) at full rank r
    for replace in (False, True):
        assert S.expected_naive("auc", 100, 9, 5, replace=replace) == pytest.approx(95 / 99, rel=1e-12)


def test_calibration_bin_clips_probabilities_outside_the_unit_interval():
    # below 0 is bin 0, above 1 the last bin (scores that are not probabilities still land in a bin)
    assert K.calibration_bin(np.array([-0.5, -1e-9, 0.5, 1.5, 3.0]), 4).tolist() == [0, 0, 2, 3, 3]


def _correction_reference(name, n, m, k, gamma, replace):
    """Krichene-Rendle by hand: A[r, j] = P(r~ = j + 1 | r) from scipy's hypergeom / binom, then the solve."""
    r = np.arange(1, n + 1)[:, None]
    j = np.arange(m + 1)[None, :]
    a = stats.binom.pmf(j, m, (r - 1) / (n - 1)) if replace else stats.hypergeom.pmf(j, n - 1, r - 1, m)
    target = S.metric_at_rank(name, np.arange(1, n + 1), n, k)
    return np.linalg.solve((1 - gamma) * a.T @ a + gamma * np.diag(a.sum(axis=0)), a.T @ target)


@pytest.mark.parametrize("replace", [False, True])
def test_correction_tables_equal_the_estimator_by_hand_in_any_chunking(replace):
    metrics = [("ndcg", 2), ("auc", None), ("recall", 3)]
    for chunk in (20_000, 7):  # 7: the ranks 1..20 in three chunks
        got = S.correction_tables(metrics, 20, 4, 0.3, replace, chunk=chunk)
        for (name, k), table in zip(metrics, got, strict=True):
            np.testing.assert_allclose(
                table, _correction_reference(name, 20, 4, k, 0.3, replace), rtol=1e-9, atol=1e-12
            )
    # defaults: gamma 0.01, without replacement; correction_table is the one-metric form
    np.testing.assert_allclose(
        S.correction_tables([("ndcg", 2)], 20, 4)[0], _correction_reference("ndcg", 20, 4, 2, 0.01, False)
    )
    np.testing.assert_allclose(
        S.correction_table("ndcg", 20, 4, 2), _correction_reference("ndcg", 20, 4, 2, 0.01, False)
    )
    np.testing.assert_allclose(
        S.correction_table("ndcg", 20, 4, 2, replace=replace), _correction_reference("ndcg", 20, 4, 2, 0.01, replace)
    )


def test_correction_tables_accept_m_1_n_m_plus_1_gamma_1_and_refuse_the_rest():
    assert len(S.correction_tables([("mrr", None)], 2, 1, 1.0)[0]) == 2  # m = 1, n = m + 1, gamma = 1
    for n, m, gamma in ((5, 0, 0.5), (3, 3, 0.5), (3, 4, 0.5), (5, 2, 0.0), (5, 2, 1.5)):
        with pytest.raises(ValueError, match="need 1 <= m < n|gamma must be in"):
            S.correction_tables([("mrr", None)], n, m, gamma)


# --------------------------------------------------------------------------- the output's schema (mutation run)
def test_list_columns_and_score_lists_output_have_the_declared_names_and_types():
    expected = [("user_id", "string"), ("n_list", "long"), ("n_truth", "long"), ("mrr", "double")]
    for k in (5, 10):
        expected += [(f"{m}_at_{k}", "double") for m in ("precision", "recall", "f1", "ndcg", "map", "hit_rate")]
        expected += [(f"hits_at_{k}", "long")]
    expected += [("intra_list_diversity", "double"), ("novelty", "double"), ("serendipity", "double")]
    expected += [("serendipity_without_history", "long")]
    assert K.list_columns([5, 10]) == expected
    pandas_type = {"string": "object", "long": "int64", "double": "float64"}
    rows = [("u", 1, 2.0), ("u", 2, 0.0), ("u", None, 1.0), ("v", 1, 0.0)]
    frame = list_frame(rows)
    for f in (frame, frame.iloc[:0]):  # a batch of users, and an empty batch
        out = K.score_lists(f, [5, 10])
        assert [(c, str(t)) for c, t in out.dtypes.items()] == [(n, pandas_type[t]) for n, t in expected]
        assert len(out) == (2 if len(f) else 0)


def test_score_lists_gain_is_exponential_by_default():
    # one list: the relevance-2 item at rank 2, truth also holds a relevance-1 item not in the list
    rows = [("u", 1, 0.0), ("u", 2, 2.0), ("u", None, 1.0)]
    default = lists(rows, ks=(2,), gain="exponential").loc["u", "ndcg_at_2"]
    assert lists(rows, ks=(2,), gain="linear").loc["u", "ndcg_at_2"] == pytest.approx((2 / L3) / (2 + 1 / L3))
    assert default == pytest.approx((3 / L3) / (3 + 1 / L3))  # gains 2^2 - 1 = 3 and 2^1 - 1 = 1
    assert K.score_lists(list_frame(rows), [2]).set_index("user_id").loc["u", "ndcg_at_2"] == pytest.approx(default)


def test_a_null_relevance_is_not_truth():
    # relevance null (a list item with no label) counts as 0: not a hit, not in the truth
    labelled = lists([("u", 1, 0.0), ("u", 2, 1.0)]).loc["u"]
    unlabelled = lists([("u", 1, None), ("u", 2, 1.0)]).loc["u"]
    assert unlabelled["n_truth"] == labelled["n_truth"] == 1 and unlabelled["hits_at_2"] == 1
    assert unlabelled["precision_at_2"] == labelled["precision_at_2"] == 1 / 2


# ------------------------------------------------------------------- cases from the mutation run (fifth session)
def test_list_rows_in_any_order_give_the_same_scores():
    rows = [("a", 1, 0.0, "A", 1.0, 1.0), ("a", 2, 1.0, "B", 2.0, 1.0), ("a", 3, 1.0, "A", 3.0, 0.0)]
    rows += [("a", None, 1.0), ("b", 1, 1.0, "A", 1.0, 0.0), ("b", 2, 0.0, "A", 1.0, 1.0)]
    ordered = lists(rows, ks=(1, 3))
    for seed in range(3):
        shuffled = [rows[i] for i in np.random.default_rng(seed).permutation(len(rows))]
        pd.testing.assert_frame_equal(lists(shuffled, ks=(1, 3)).loc[ordered.index], ordered)
    assert ordered.loc["a", "mrr"] == 1 / 2 and ordered.loc["a", "hits_at_1"] == 0


def test_f1_by_hand_where_precision_and_recall_differ():
    # list a, b (both relevant), truth {a, b, c, d}: precision@2 = 1, recall@2 = 1/2, f1 = 2 * 1/2 / (3/2) = 2/3
    r = lists([("u", 1, 1.0), ("u", 2, 1.0), ("u", None, 1.0), ("u", None, 1.0)]).loc["u"]
    assert (r["precision_at_2"], r["recall_at_2"]) == (1.0, 0.5)
    assert r["f1_at_2"] == pytest.approx(2 / 3)


def test_a_null_relevance_scores_like_a_zero_in_every_metric():
    labelled = lists([("u", 1, 0.0), ("u", 2, 1.0), ("u", None, 2.0)], ks=(1, 2)).loc["u"]
    unlabelled = lists([("u", 1, None), ("u", 2, 1.0), ("u", None, 2.0)], ks=(1, 2)).loc["u"]
    pd.testing.assert_series_equal(unlabelled, labelled)
    assert labelled["ndcg_at_2"] == pytest.approx((1 / L3) / (2 + 1 / L3))


def test_a_last_user_with_truth_but_no_list_keeps_every_array_aligned():
    # the last user code has no list rows: per-user counts over list rows must still have a slot for it
    # (three users, so that a count one slot short cannot broadcast)
    out = lists([("a", 1, 1.0, "A", 1.0, 1.0), ("a", 2, 0.0, "B", 1.0, 0.0), ("b", 1, 0.0, "A"), ("c", None, 1.0)])
    assert out.loc["c", "n_list"] == 0 and out.loc["c", "recall_at_2"] == 0.0
    assert math.isnan(out.loc["c", "intra_list_diversity"]) and math.isnan(out.loc["c", "serendipity"])
    assert out.loc["a", "intra_list_diversity"] == 1.0 and out.loc["a", "serendipity"] == 1 / 2


def test_intra_list_diversity_of_several_users_does_not_mix_their_category_pairs():
    # three users over two categories (codes 0 and 1): a pair code must be unique per (user, category)
    rows = [("a", 1, 0.0, "X"), ("a", 2, 0.0, "Y"), ("a", 3, 0.0, "Y")]  # 1 same pair of 3
    rows += [("b", 1, 0.0, "X"), ("b", 2, 0.0, "X"), ("b", 3, 0.0, "X")]  # 3 same pairs of 3
    rows += [("c", 1, 0.0, "X"), ("c", 2, 0.0, "Y"), ("c", 3, 0.0, None)]  # unknown: its own category
    # two unknowns are one category; with codes X 0, Y 1, unknown 2, user 3's (d, X) sits where a
    # division u / 3 + c would put (a, Y)
    rows += [("d", 1, 0.0, None), ("d", 2, 0.0, None), ("d", 3, 0.0, "X")]
    rows += [("e", 1, 0.0, "Y")]  # one item: no pair
    out = lists(rows, ks=(3,))
    assert out["intra_list_diversity"].tolist()[:4] == pytest.approx([1 - 2 / 6, 0.0, 1.0, 1 - 2 / 6])
    assert math.isnan(out.loc["e", "intra_list_diversity"]) and out["intra_list_diversity"].dtype == np.float64


def test_serendipity_needs_a_known_category_of_a_list_item():
    known = [("u", 1, 1.0, "A", 1.0, 1.0), ("u", 2, 0.0, "A", 1.0, np.nan)]  # one item's novelty known
    unknown = [("u", 1, 1.0, "A", 1.0, np.nan), ("u", 2, 0.0, "A", 1.0, np.nan)]
    single = [("u", 1, 1.0, "A", 1.0, 1.0), ("u", None, 1.0)]  # a one-item list
    assert lists(known).loc["u", "serendipity"] == 1 / 2
    assert math.isnan(lists(unknown).loc["u", "serendipity"])
    assert lists(single).loc["u", "serendipity"] == 1.0
    # a list without truth has no serendipity even when its categories are known
    assert math.isnan(lists([("u", 1, 0.0, "A", 1.0, 1.0), ("u", 2, 0.0, "B", 1.0, 1.0)]).loc["u", "serendipity"])


def test_serendipity_of_a_user_without_a_category_history_is_left_out_and_flagged():
    # a: history known (1.0); b: no train item of a known category (0.0), so every category is "new" and the
    # value would be b's hit share 1/2; c: unknown (NaN, no train or items table), as before; d: no history
    # but no truth either (no value to leave out); e: no history and truth but no list
    rows = [("a", 1, 1.0, "A", 1.0, 1.0, 1.0), ("a", 2, 0.0, "B", 1.0, 0.0, 1.0)]
    rows += [
        ("b", 1, 1.0, "A", 1.0, 1.0, 0.0),
        ("b", 2, 0.0, "B", 1.0, 1.0, 0.0),
        ("b", None, 1.0, None, np.nan, np.nan, 0.0),
    ]
    rows += [("c", 1, 1.0, "A", 1.0, 1.0, np.nan), ("c", 2, 0.0, "B", 1.0, 1.0)]
    rows += [("d", 1, 0.0, "A", 1.0, 1.0, 0.0)]
    rows += [("e", None, 1.0, None, np.nan, np.nan, 0.0)]
    out = lists(rows)
    assert out.loc["a", "serendipity"] == 1 / 2 and out.loc["c", "serendipity"] == 1 / 2
    assert all(math.isnan(out.loc[u, "serendipity"]) for u in "bde")
    assert out["serendipity_without_history"].to_dict() == {"a": 0, "b": 1, "c": 0, "d": 0, "e": 0}
    assert out.loc["b", "recall_at_2"] == 1 / 2 and out.loc["b", "novelty"] == 1.0  # only serendipity is left out


def test_numeric_columns_may_be_object_columns_holding_none():
    # a frame built from Python rows keeps None in object columns: unknown rank (truth outside the list),
    # relevance, self-information and category novelty
    rows = [("u", 1, 1.0, "A", 2.0, 1.0), ("u", 2, 0.0, "B", None, None), ("u", None, 1.0), ("u", 3, None, "B")]
    floats = list_frame(rows)
    frame = floats.astype(object).where(floats.notna(), None)
    assert all(frame[c].dtype == object for c in ("rank", "relevance", "self_info", "new_category"))
    got = K.score_lists(frame, [2]).iloc[0]
    pd.testing.assert_series_equal(got, K.score_lists(floats, [2]).iloc[0])
    assert (got["novelty"], got["serendipity"], got["intra_list_diversity"]) == (2.0, 1 / 2, 1.0)  # the top 2 items
    assert (got["n_list"], got["n_truth"], got["recall_at_2"]) == (3, 2, 1 / 2)


def test_calibration_table_every_column_and_an_empty_table():
    bins = np.array([1, 0])  # out of order: the table is sorted by bin
    table, ece = K.calibration_table(bins, np.array([3, 2]), np.array([2.15, 0.2]), np.array([2.0, 0.0]), 4)
    expected = pd.DataFrame(
        {
            "bin": np.array([0, 1], dtype=np.int32),
            "bin_low": [0.0, 0.25],
            "bin_high": [0.25, 0.5],
            "n": np.array([2, 3], dtype=np.int64),
            "mean_predicted": [0.1, 2.15 / 3],
            "observed_rate": [0.0, 2 / 3],
        }
    )
    pd.testing.assert_frame_equal(table, expected)
    assert ece == pytest.approx((2 * 0.1 + 3 * abs(2 / 3 - 2.15 / 3)) / 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by an empty total
        empty, ece = K.calibration_table(np.array([], int), np.array([]), np.array([]), np.array([]), 4)
    assert math.isnan(ece) and empty.empty and list(empty.columns) == list(expected.columns)


def test_parse_errors_say_what_was_expected():
    for bad in ("5,1", "5,5", "1,2,3"):
        with pytest.raises(ValueError, match="expected 'LOW,HIGH' with LOW < HIGH, got"):
            parse_range(bad)
    with pytest.raises(ValueError, match=r"distortion key '3': expected 'PREDICTED,ACTUAL'"):
        parse_distortion({"3": 1})


def test_rating_errors_clip_rounded_predictions_at_both_ends_and_are_floats():
    e = K.rating_errors(np.array([1, 5]), np.array([0, 7]), True, (1, 5))  # integer input: 0 -> 1, 7 -> 5
    assert e["abs"].tolist() == [0.0, 0.0] and e["abs"].dtype == e["sq"].dtype == np.float64
    e = K.rating_errors(np.array([1, 2]), np.array([1, 4]))
    assert e["sq"].tolist() == [0.0, 4.0] and e["sq"].dtype == np.float64


def test_rating_errors_without_a_distortion_table():
    e = K.rating_errors(np.array([1.0, 2.0]), np.array([3.0, 2.0]))
    assert set(e) == {"abs", "sq", "distortion", "distortion_missing", "rating_out_of_range", "prediction_out_of_range"}
    assert np.isnan(e["distortion"]).all() and e["distortion"].dtype == np.float64
    assert e["distortion_missing"].tolist() == [False, False] and e["distortion_missing"].dtype == bool


def test_rating_errors_flag_ratings_and_raw_predictions_outside_the_range_bounds_inside():
    rating, prediction = np.array([0.5, 1.0, 5.0, 3.0, 6.0]), np.array([3.0, 0.9, 5.0, 5.4, 5.0])
    e = K.rating_errors(rating, prediction, True, (1, 5))  # flagged before rounding and clipping
    assert e["rating_out_of_range"].tolist() == [True, False, False, False, True]
    assert e["prediction_out_of_range"].tolist() == [False, True, False, True, False]
    assert e["abs"].tolist() == [2.5, 0.0, 0.0, 2.0, 1.0]  # the errors are still computed on every row
    none = K.rating_errors(rating, prediction)  # no range: nothing is out of it
    assert not none["rating_out_of_range"].any() and not none["prediction_out_of_range"].any()


def test_metric_at_rank_precision_and_map_by_hand_and_refusals():
    ranks = np.array([1, 2, 4, 5])  # integer ranks
    assert S.metric_at_rank("precision", ranks, 100, 4).tolist() == [0.25, 0.25, 0.25, 0.0]
    assert S.metric_at_rank("map", ranks, 100, 4).tolist() == [1.0, 0.5, 0.25, 0.0]
    assert S.metric_at_rank("mrr", ranks, 100).tolist() == [1.0, 0.5, 0.25, 0.2]
    with pytest.raises(ValueError, match="^ndcg needs k$"):
        S.metric_at_rank("ndcg", ranks, 100)
    with pytest.raises(ValueError, match="^unknown metric 'f1'$"):
        S.metric_at_rank("f1", ranks, 100, 4)


def test_sampled_ranks_of_no_rows_and_of_one_target_alone():
    for got in S.sampled_ranks(np.array([], int), np.array([]), np.array([], bool)):
        assert got.dtype == np.int64 and len(got) == 0
    idx, m, above, ties = S.sampled_ranks(np.array([3]), np.array([0.5]), np.array([True]))
    assert (idx.tolist(), m.tolist(), above.tolist(), ties.tolist()) == ([0], [0], [0], [0])


def test_sampled_ranks_ties_do_not_cross_users():
    # user 0's highest score (a negative) equals user 1's lowest (its target): adjacent after the sort
    user = np.array([0, 0, 1, 1])
    score = np.array([0.1, 0.5, 0.5, 0.9])
    target = np.array([True, False, True, False])
    idx, m, above, ties = S.sampled_ranks(user, score, target)
    assert (idx.tolist(), m.tolist(), above.tolist(), ties.tolist()) == ([0, 2], [1, 1], [1, 1], [0, 0])
