"""Time the offline top-K evaluation against MLlib ``RankingMetrics`` on the same lists; check agreement.

Both start from the same Parquet files (lists: user_id, item_id, rank; truth: user_id, item_id) and end with
user-averaged precision@k, recall@k, NDCG@k and MAP@k.  The lists have no duplicates and no train items, and the
relevance is binary: there the definitions coincide (MLlib's NDCG ideal is min(|truth|, k) ones, ours the truth
sorted, the same thing; its ``meanAveragePrecisionAt`` divides by min(|truth|, k), as ours).  Users without truth
are left out of both (MLlib would count them as 0).

Run: PYTHONPATH=. python benchmarks/offline_bench.py --users 20000 [--list 10] [--k 10]
(the issue's sizes are 1M and 5M rows: --users 100000 and --users 500000 at --list 10).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=20000)
    parser.add_argument("--list", type=int, default=10)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from pyspark.mllib.evaluation import RankingMetrics
    from pyspark.sql import functions as F

    from recsys_spark.config import load_config
    from recsys_spark.kernels import offline as K
    from recsys_spark.offline.aggregate import aggregate
    from recsys_spark.offline.evaluation import per_user
    from recsys_spark.offline.lists import clean_lists, list_rows, list_specs
    from recsys_spark.runtime.session import build_session

    rng = np.random.default_rng(0)
    n, length = args.users, args.list
    items = np.argsort(rng.random((n, args.items)), axis=1)[:, : length + 3]
    lists = pd.DataFrame(
        {
            "user_id": np.repeat([f"u{u}" for u in range(n)], length),
            "item_id": items[:, :length].ravel().astype(str),
            "rank": np.tile(np.arange(1, length + 1), n).astype(float),
        }
    )
    # truth: 1-3 items per user, drawn from the list's items and 3 items outside it
    t_user, t_item = [], []
    for_truth = rng.integers(1, 4, n)
    for u in range(n):
        pick = rng.choice(length + 3, for_truth[u], replace=False)
        t_user += [f"u{u}"] * len(pick)
        t_item += items[u, pick].astype(str).tolist()
    truth = pd.DataFrame({"user_id": t_user, "item_id": t_item})

    spark = build_session(
        master=args.master,
        settings={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"},
        log_level="ERROR",
    )
    tmp = tempfile.mkdtemp()
    spark.createDataFrame(lists).write.parquet(f"{tmp}/lists")
    spark.createDataFrame(truth).write.parquet(f"{tmp}/truth")
    k = args.k
    cfg = load_config(None, [f"metrics.k=[{k}]"])

    def ours() -> dict:
        recs = spark.read.parquet(f"{tmp}/lists").withColumn("score", F.lit(None).cast("double"))
        tr = spark.read.parquet(f"{tmp}/truth").withColumn("relevance", F.lit(1.0))
        ranked, _ = clean_lists(recs, None, False)
        users = per_user(
            list_rows(ranked, tr, None, None),
            K.LIST_INPUT,
            K.list_columns([k]),
            lambda f: K.score_lists(f, [k], "linear"),
            4,
        ).cache()
        rows = aggregate(users, list_specs([k]), cfg.offline.confidence)
        users.unpersist()
        return {(r[0], r[1]): r[4] for r in rows if r[2] == "user_avg"}

    def mllib() -> dict:
        recs = spark.read.parquet(f"{tmp}/lists")
        tr = spark.read.parquet(f"{tmp}/truth")
        pred = recs.groupBy("user_id").agg(F.sort_array(F.collect_list(F.struct("rank", "item_id"))).alias("p"))
        lab = tr.groupBy("user_id").agg(F.collect_set("item_id").alias("t"))
        pairs = pred.join(lab, "user_id").select(F.col("p.item_id").alias("p"), "t").rdd.map(lambda r: (r[0], r[1]))
        pairs = pairs.cache()
        m = RankingMetrics(pairs)
        out = {
            ("precision", k): m.precisionAt(k),
            ("recall", k): m.recallAt(k),
            ("ndcg", k): m.ndcgAt(k),
            ("map", k): m.meanAveragePrecisionAt(k),
        }
        pairs.unpersist()
        return out

    ours()  # warm-up of both paths
    mllib()
    times = {"ours": [], "mllib": []}
    for _ in range(3):
        t = time.perf_counter()
        a = ours()
        times["ours"].append(time.perf_counter() - t)
        t = time.perf_counter()
        b = mllib()
        times["mllib"].append(time.perf_counter() - t)
    for key, value in b.items():
        assert abs(a[key] - value) < 1e-9, (key, a[key], value)
    med = {name: float(np.median(v)) for name, v in times.items()}
    print(
        f"users={n} rows={n * length} k={k}: ours {med['ours']:.2f} s (with intervals), MLlib {med['mllib']:.2f} s; "
        f"ratio ours/MLlib = {med['ours'] / med['mllib']:.2f}; agreement on P, R, NDCG, MAP @ {k}: < 1e-9"
    )
    spark.stop()


if __name__ == "__main__":
    main()
