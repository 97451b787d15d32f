"""The one streaming loop of the pooled AUC and the curves (pooled_auc.bin_runs), on hand-made Arrow batches: each
(key, bin)'s distinct scores ascending, a score tied across a batch boundary one run, each bin closed once."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from recsys_spark.per_user.pooled_auc import _BIN, _POSITIVE, _partials, bin_runs


def batch(keys, bins, scores, positive):
    return pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.string()), pa.array(bins, pa.int32()), pa.array(scores), pa.array(positive)],
        names=["slice", _BIN, "score", _POSITIVE],
    )


# sorted by score across batches (as the partition is); two keys interleaved; 0.5 tied across the boundary
BATCHES = [
    batch(["a", "b", "a", "a"], [0, 0, 0, 1], [0.1, 0.2, 0.3, 0.5], [False, True, True, False]),
    batch(["a", "a", "b"], [1, 1, 1], [0.5, 0.7, 0.8], [True, True, False]),
]


def test_runs_of_each_key_and_bin_come_ascending_with_ties_across_batches_merged():
    chunks = list(bin_runs(iter(BATCHES), ("slice",)))
    runs: dict[tuple, list] = {}
    closed = []
    for key, score_bin, values, pos, neg, last in chunks:
        runs.setdefault((key[0], score_bin), []).extend(zip(values.tolist(), pos.tolist(), neg.tolist(), strict=True))
        if last:
            closed.append((key[0], score_bin))
    assert runs == {
        ("a", 0): [(0.1, 0.0, 1.0), (0.3, 1.0, 0.0)],
        ("a", 1): [(0.5, 1.0, 1.0), (0.7, 1.0, 0.0)],  # 0.5: a negative in batch 1, a positive in batch 2
        ("b", 0): [(0.2, 1.0, 0.0)],
        ("b", 1): [(0.8, 0.0, 1.0)],
    }
    assert sorted(closed) == sorted(runs)  # each (key, bin) closed exactly once, by its last chunk


def test_the_auc_partials_read_the_same_loop():
    (out,) = list(_partials(("slice",))(iter(BATCHES)))
    got = {(k, b): (u, p, n) for k, b, u, p, n in zip(*(out.column(i).to_pylist() for i in range(5)), strict=True)}
    # bin 1 of a: 0.5 (pos 1, neg 1) and 0.7 (pos 1): U = 1 * (0 + 1/2) + 1 * (1 + 0) = 1.5
    assert got[("a", 1)] == (1.5, 2.0, 1.0)
    assert got[("a", 0)] == (1.0, 1.0, 1.0)
    assert np.isclose(got[("b", 0)][0], 0.0) and got[("b", 1)] == (0.0, 0.0, 1.0)
