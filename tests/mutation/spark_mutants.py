"""Curated single-point mutants of the Spark layer's formula and rule lines, each run against its tests.

mutmut (``make mutate``) covers ``recsys_spark/kernels/`` with the fast tests.  The Spark modules'
formulas live in column expressions whose tests start a SparkSession (40 s to 3 min a module on the
shared 2-core box), too slow for a tool that generates hundreds of mutants.  This script applies a
hand-picked list instead: each mutant is one operator, constant or function changed on a line that
holds a formula or a rule (a wrong number the job would write), tested by the test module that owns
that line.

Each mutant runs in its own copy of the package (``build/mutation/spark/<name>/recsys_spark``, put
first on PYTHONPATH, which Spark's Python workers inherit), so the worktree is never modified, even
when the run is interrupted.  A mutant is *killed* when its tests fail (pytest exit 1), *survived*
when they pass (exit 0); anything else (collection error, no test selected) is an *error* and counts
as neither.

    python tests/mutation/spark_mutants.py                 # every mutant
    python tests/mutation/spark_mutants.py --only label-   # names starting with label-
    python tests/mutation/spark_mutants.py --list

Results: stdout and ``build/mutation/spark.md``; docs/mutation.md keeps the recorded score.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "build" / "mutation"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # module, relative to the repo
    old: str  # must occur exactly once in the module
    new: str
    tests: tuple[str, ...]  # pytest node ids or files, relative to the repo
    wrong: str  # the wrong number it would write


AGG = "recsys_spark/per_user/aggregate.py"
LABEL = "recsys_spark/steps/label.py"
POOLED = "recsys_spark/per_user/pooled_auc.py"
RULES = "recsys_spark/steps/rules.py"
RULE_TABLE = "recsys_spark/kernels/rules.py"  # the rules' table and verdicts (the step counts)
SLICES = "recsys_spark/steps/slices.py"
HEALTH = "recsys_spark/steps/health_sums.py"  # the health sums' Spark branches
STATS = "recsys_spark/kernels/sums.py"  # MeanStats (kernels/stats.py until it was split)
ARM_SUMS = "recsys_spark/experiments/arm_sums.py"  # experiments/stage.py until it was split
USER_SUMS = "recsys_spark/experiments/user_sums.py"
BOOTSTRAP = "recsys_spark/per_user/bootstrap.py"
OFFLINE = "recsys_spark/offline/aggregate.py"

T_AGG = ("tests/per_user/test_aggregate.py",)
T_LABEL = ("tests/steps/test_label.py",)
T_PIPE = ("tests/daily/test_pipeline.py",)
T_BOUNDED = ("tests/per_user/test_table.py::test_exact_auc_matches_scikit_learn_per_key_with_ties_across_batches",)
T_OPS = ("tests/daily/test_operations.py::test_hard_rules", "tests/daily/test_operations.py::test_soft_rules")
T_HEALTH = ("tests/steps/test_health.py",)
T_EXP = ("tests/experiments/test_experiments.py",)
#: the set-aside users' day sums (the Spark form of kernels/user_day.py) against the pass's
T_DAY_SUMS = (
    "tests/daily/test_value_metrics.py::test_experiment_users_by_hand_and_the_same_when_every_user_takes_the_bounded_path",
)
T_INTERVALS = ("tests/per_user/test_intervals.py",)
T_OFFLINE = ("tests/offline/test_offline.py",)

MUTANTS = [
    # --- aggregate.py: per-user table -> metrics table (the fast tests reach aggregate_users) ----------------
    Mutant(
        "agg-gauc-plain-mean",
        AGG,
        '_weighted(m, "auc", confidence), int(agg["auc__w"] or 0)',
        '_t(m, "auc", confidence), int(agg["auc__w"] or 0)',
        T_AGG,
        "GAUC as the plain mean of user AUCs",
    ),
    Mutant(
        "agg-gauc-n-users",
        AGG,
        'int(agg["auc__w"] or 0)',
        'int(agg["auc__n"] or 0)',
        T_AGG,
        "GAUC's n as users instead of exposures",
    ),
    Mutant(
        "agg-se-sqrt-n-minus-1",
        STATS,
        "math.sqrt(self.var / self.n)",
        "math.sqrt(self.var / (self.n - 1))",
        T_AGG,
        "se of user averages over sqrt(n - 1)",
    ),
    Mutant(
        "agg-list-avg-over-users",
        AGG,
        '_weighted(m, col, confidence), agg["lists_ranked"] or 0)',
        '_t(m, col, confidence), agg["lists_ranked"] or 0)',
        T_AGG,
        "list_avg divided by users",
    ),
    Mutant(
        "agg-precision-without-k",
        AGG,
        '"n_lists_ranked", scale=k)',
        '"n_lists_ranked", scale=1)',
        T_AGG,
        "precision@k = hits / lists",
    ),
    Mutant(
        "agg-recall-over-lists",
        AGG,
        '_sum_ratio(m, metric_name("hits", k), "n_relevant")',
        '_sum_ratio(m, metric_name("hits", k), "n_lists_ranked")',
        T_AGG,
        "recall@k over lists instead of relevant items",
    ),
    Mutant(
        "agg-users-without-auc",
        AGG,
        '"users_without_auc": agg["users"] - agg["auc__n"],',
        '"users_without_auc": agg["users"] - agg["lists_ranked"],',
        T_AGG,
        "wrong count",
    ),
    Mutant(
        "agg-partials-last-only",
        AGG,
        "merge_by_slice(out, {slice_value: Moments.from_rows(rows)})",
        "out[slice_value] = Moments.from_rows(rows)",
        (
            "tests/per_user/test_aggregate.py::test_a_slice_spread_over_several_partitions_merges_every_partitions_moments",
        ),
        "only the last partition's moments of a slice kept",
    ),
    # --- label.py: attribution -----------------------------------------------------------------------------
    Mutant(
        "label-window-lower-edge",
        LABEL,
        'candidates["_exp_ts"] <= grouped[TS]',
        'candidates["_exp_ts"] < grouped[TS]',
        T_LABEL,
        "event at its exposure's timestamp is an orphan",
    ),
    Mutant(
        "label-window-upper-edge",
        LABEL,
        'candidates["_exp_ts"] >= grouped[TS] - window',
        'candidates["_exp_ts"] > grouped[TS] - window',
        T_LABEL,
        "event exactly window minutes late is an orphan",
    ),
    Mutant(
        "label-window-length",
        LABEL,
        "int(round(window_minutes * 60))",
        "int(round(window_minutes * 61))",
        T_LABEL,
        "window one minute per hour too long",
    ),
    Mutant(
        "label-earliest-exposure",
        LABEL,
        'F.max(F.struct("_exp_ts", "_req")).alias("_match")',
        'F.min(F.struct("_exp_ts", "_req")).alias("_match")',
        T_LABEL,
        "event given to the earliest exposure",
    ),
    Mutant(
        "label-relevance-min-weight",
        LABEL,
        'F.max("weight").alias(RELEVANCE)',
        'F.min("weight").alias(RELEVANCE)',
        T_LABEL,
        "relevance = smallest event weight",
    ),
    Mutant(
        "label-clicked-all-events",
        LABEL,
        'F.max("is_click").alias(CLICKED)',
        'F.min("is_click").alias(CLICKED)',
        T_LABEL,
        "clicked only when every event is a click",
    ),
    Mutant(
        "label-dedup-largest-position",
        LABEL,
        "keep = F.min(F.struct(POSITION, TS, *others))",
        "keep = F.max(F.struct(POSITION, TS, *others))",
        T_LABEL,
        "dedup keeps the largest position",
    ),
    Mutant(
        "label-orphans-count",
        LABEL,
        'counts["orphan_events"] = events - counts["attributed_events"]',
        'counts["orphan_events"] = events - counts["attributed_events"] - counts["clicked_exposures"]',
        T_LABEL,
        "orphans undercounted",
    ),
    # the labelling's keys hold the user (a (request, item) pair logged under two users is two exposures)
    Mutant(
        "label-dedup-without-user",
        LABEL,
        "exposures.where(F.col(USER).isNotNull())\n        .groupBy(USER, REQUEST, ITEM)",
        "exposures.where(F.col(USER).isNotNull())\n"
        '        .withColumn(USER, F.expr("min(user_id) over (partition by request_id, item_id)"))\n'
        "        .groupBy(USER, REQUEST, ITEM)",
        T_LABEL,
        "a (request, item) pair under two users deduplicated into one exposure",
    ),
    Mutant(
        "label-feedback-join-without-user",
        LABEL,
        'exposures.join(attributed, on=[USER, REQUEST, ITEM], how="left")',
        'exposures.join(attributed.drop(USER).dropDuplicates([REQUEST, ITEM]), on=[REQUEST, ITEM], how="left")',
        T_LABEL,
        "another user's event on the same (request, item) labels this user's exposure",
    ),
    # --- experiments/: the per-user sums and the arms' sufficient statistics (SQL expressions since 3a99260) ----
    Mutant(
        "exp-ratio-cross-product",
        ARM_SUMS,
        's(f"{num} * {den}", "xy")',
        's(f"{num} * {num}", "xy")',
        T_EXP,
        "delta-method variance of a ratio metric with the wrong covariance",
    ),
    Mutant(
        "exp-mean-users-without-lists",
        ARM_SUMS,
        'has = f"{den} > 0"',
        'has = f"{den} >= 0"',
        T_EXP,
        "users without a ranked list counted in a per-user mean",
    ),
    Mutant(
        "exp-user-values-not-weighted",
        USER_SUMS,
        "F.when((lists > 0) & value.isNotNull() & ~F.isnan(value), value * lists)",
        "F.when((lists > 0) & value.isNotNull() & ~F.isnan(value), value)",
        T_DAY_SUMS,
        "a user's list-metric sum is its mean, not mean x ranked lists",
    ),
    Mutant(
        "exp-empty-requests",
        USER_SUMS,
        'F.count(F.when(F.col("n") == 0, 1)).cast("double").alias("empty_requests")',
        'F.count(F.when(F.col("n") <= 1, 1)).cast("double").alias("empty_requests")',
        T_DAY_SUMS,
        "a one-item response counted as empty",
    ),
    Mutant(
        "exp-cuped-ratio-users-with-pre-period",
        ARM_SUMS,
        's(f"if({v} > 0, 1D, 0D)", "cn")',
        's(f"if({v} >= 0, 1D, 0D)", "cn")',
        T_EXP,
        "every user counted as having pre-period data",
    ),
    # --- bootstrap.py: the replicates' partition-local sums (Poisson weights keyed by user) ------------------
    Mutant(
        "boot-overlap-pairs",
        BOOTSTRAP,
        '("overlap", (cs * (cs - 1.0)).sum(0))',
        '("overlap", (cs * cs).sum(0))',
        T_INTERVALS,
        "personalization's replicates count a user's pair with itself",
    ),
    Mutant(
        "boot-novelty-clickers",
        BOOTSTRAP,
        'np.log2(attrs["k"].fillna(0).to_numpy(dtype=np.float64) + 1.0)',
        'np.log2(attrs["k"].fillna(0).to_numpy(dtype=np.float64) + 2.0)',
        T_INTERVALS,
        "novelty's replicates with the wrong smoothing of the clickers",
    ),
    Mutant(
        "boot-users-per-row",
        BOOTSTRAP,
        "pairs = pd.concat(frames).drop_duplicates([SLICE, USER])",
        "pairs = pd.concat(frames)",
        T_INTERVALS,
        "a replicate's users counted once per (user, item) row",
    ),
    Mutant(
        "boot-auc-positive",
        BOOTSTRAP,
        '(F.col(RELEVANCE) > 0).alias("_positive")',
        '(F.col(RELEVANCE) >= 0).alias("_positive")',
        T_INTERVALS,
        "every exposure a positive in the AUC's replicates",
    ),
    Mutant(
        "boot-coverage-unexposed",
        BOOTSTRAP,
        "if cat and v > 0)",
        "if cat and v >= 0)",
        T_INTERVALS,
        "item coverage's replicates count catalog items whose weighted exposures fell to 0",
    ),
    Mutant(
        "boot-category-counts",
        BOOTSTRAP,
        'df["c"].to_numpy(dtype=np.float64), _weights(df[USER].to_numpy(), replicates, seed)',
        "np.ones(len(df)), _weights(df[USER].to_numpy(), replicates, seed)",
        T_INTERVALS,
        "category diversity's replicates count users, not their exposures",
    ),
    # --- offline/aggregate.py: offline evaluation's sums and intervals ----------------------------------------
    Mutant(
        "offline-nan-counted",
        OFFLINE,
        'F.when(c.isNotNull() & ~F.isnan(c), c.cast("double"))',
        'F.when(c.isNotNull(), c.cast("double"))',
        T_OFFLINE,
        "users without a value (NaN: a list but no truth) counted in a mean",
    ),
    Mutant(
        "offline-ratio-unpaired",
        OFFLINE,
        "both = x.isNotNull() & y.isNotNull()",
        "both = x.isNotNull()",
        T_OFFLINE,
        "a pooled ratio's numerator and denominator from different users",
    ),
    Mutant(
        "offline-ratio-cross-product",
        OFFLINE,
        'F.sum(x * y).alias(f"s{i}_sxy")',
        'F.sum(x * x).alias(f"s{i}_sxy")',
        T_OFFLINE,
        "delta-method interval of a pooled ratio with the wrong covariance",
    ),
    Mutant(
        "offline-transform-se",
        OFFLINE,
        "slope = (hi - lo) / (iv.ci_high - iv.ci_low) if iv.ci_high != iv.ci_low else 0.0",
        "slope = 1.0",
        T_OFFLINE,
        "the se of a transformed metric (e.g. RMSE from MSE) not carried through the transform",
    ),
    # --- pooled_auc.py: exact global AUC -------------------------------------------------------------------
    Mutant(
        "pooled-positive-threshold",
        POOLED,
        "(F.col(RELEVANCE) > 0).alias(_POSITIVE)",
        "(F.col(RELEVANCE) >= 0).alias(_POSITIVE)",
        T_BOUNDED,
        "every exposure positive",
    ),
    Mutant(
        "pooled-tie-across-batches",
        POOLED,
        "if values[0] == held[1]:",
        "if False:",
        T_BOUNDED,
        "a score tied across a batch boundary counted as two runs",
    ),
    Mutant(
        "pooled-last-run-dropped",
        POOLED,
        "return key, b, np.array([score]), np.array([pos]), np.array([neg]), True",
        "return key, b, np.zeros(0), np.zeros(0), np.zeros(0), True",
        T_BOUNDED,
        "the last run of each bin left out",
    ),
    Mutant(
        "pooled-bins-reversed",
        POOLED,
        "key=lambda r: (tuple(r[k] for k in keys), r[_BIN])",
        "key=lambda r: (tuple(r[k] for k in keys), -r[_BIN])",
        T_BOUNDED,
        "bins merged in descending order",
    ),
    # --- rules.py --------------------------------------------------------------------------------------------
    Mutant(
        "rules-soft-threshold-strict",
        RULE_TABLE,
        "rate is None or rate <= threshold",
        "rate is None or rate < threshold",
        ("tests/daily/test_operations.py::test_rule_verdicts_at_their_boundaries",),
        "a rate exactly at its threshold fails",
    ),
    Mutant(
        "rules-score-range-low",
        RULES,
        "(F.col(SCORE) < 0) | (F.col(SCORE) > 1)",
        "(F.col(SCORE) <= 0) | (F.col(SCORE) > 1)",
        ("tests/steps/test_rules.py::test_scores_exactly_0_and_1_are_in_range",),
        "score 0 counted out of range",
    ),
    Mutant(
        "rules-duplicate-copies",
        RULES,
        "duplicated = item_row & (F.col(COPIES) > 1)",
        "duplicated = item_row & (F.col(COPIES) >= 1)",
        T_OPS,
        "every exposure a duplicate",
    ),
    Mutant(
        "rules-bot-inclusive",
        RULES,
        'F.sum((F.col("requests") > max_requests).cast("long"))',
        'F.sum((F.col("requests") >= max_requests).cast("long"))',
        T_OPS,
        "users at the limit are bots",
    ),
    Mutant(
        "rules-exposure-change-signed",
        RULE_TABLE,
        'out["exposure_change"] = abs(counts["exposure_rows"] - previous_exposure_rows)',
        'out["exposure_change"] = counts["exposure_rows"] - previous_exposure_rows',
        T_OPS,
        "a drop in rows gives a negative rate",
    ),
    Mutant(
        "rules-empty-rate-denominator",
        RULE_TABLE,
        '"empty_responses", "requests",',
        '"empty_responses", "exposure_rows",',
        T_OPS,
        "empty responses / rows, not requests",
    ),
    Mutant(
        "rules-orphan-rate-denominator",
        RULE_TABLE,
        '"orphan_events", "valid_events",',
        '"orphan_events", "exposure_rows",',
        T_OPS,
        "orphans / rows, not events",
    ),
    # --- slices.py: the popularity bucket ------------------------------------------------------------------
    Mutant(
        "slices-head-strict",
        SLICES,
        'F.when(count >= cutoffs.head_min, F.lit("head"))',
        'F.when(count > cutoffs.head_min, F.lit("head"))',
        T_HEALTH,
        "the head cut-off item is not head",
    ),
    Mutant(
        "slices-tail-strict",
        SLICES,
        '.when(count <= cutoffs.tail_max, F.lit("tail"))',
        '.when(count < cutoffs.tail_max, F.lit("tail"))',
        T_HEALTH,
        "the tail cut-off item is not tail",
    ),
    Mutant(
        "slices-items-per-count",
        SLICES,
        'hist = counts.groupBy(ITEM_EXPOSURES).agg(F.count(F.lit(1)).alias("items")).collect()',
        'hist = counts.groupBy(ITEM_EXPOSURES).agg(F.sum(ITEM_EXPOSURES).alias("items")).collect()',
        ("tests/steps/test_health.py::test_popularity_cutoffs_count_items_not_rows",),
        "histogram counts rows as items",
    ),
    # --- health_sums.py: the sufficient statistics of the health kernels ----------------------------------
    Mutant(
        "health-category-entropy",
        HEALTH,
        'F.sum(_n_log_n(c)).alias("cat_s")',
        'F.sum(c * c).alias("cat_s")',
        T_HEALTH,
        "global category diversity (the per-list and per-user entropies are kernels/health_pass.py's, under mutmut)",
    ),
    Mutant(
        "health-unknown-category",
        HEALTH,
        'F.when(F.col("key") == UNKNOWN, c)',
        'F.when(F.col("key") != UNKNOWN, c)',
        T_HEALTH,
        "the unknown category counts in K",
    ),
    Mutant(
        "health-overlap",
        HEALTH,
        'F.sum(users * (users - 1)).alias("user_overlap")',
        'F.sum(users * users).alias("user_overlap")',
        T_HEALTH,
        "personalization",
    ),
    Mutant(
        "health-novelty-smoothing",
        HEALTH,
        'F.log2(F.coalesce(F.col("k"), F.lit(0)) + 1)',
        'F.log2(F.coalesce(F.col("k"), F.lit(0)) + 2)',
        T_HEALTH,
        "novelty",
    ),
    Mutant(
        "health-update-new",
        HEALTH,
        'F.size(F.array_except("today", "before")).alias("new")',
        'F.size(F.array_intersect("today", "before")).alias("new")',
        T_HEALTH,
        "update_rate",
    ),
]


def run_one(m: Mutant, work: Path) -> tuple[str, float, str]:
    """(killed | survived | error, seconds, last line of pytest's output)."""
    root = work / m.name
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(REPO / "recsys_spark", root / "recsys_spark", ignore=shutil.ignore_patterns("__pycache__"))
    target = root / m.path
    src = target.read_text()
    if src.count(m.old) != 1:
        return "error", 0.0, f"the original text occurs {src.count(m.old)} times in {m.path}"
    target.write_text(src.replace(m.old, m.new))
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    # pyproject's pytest `pythonpath = ["."]` puts the repo first on sys.path, ahead of PYTHONPATH: the
    # driver would import the unmutated package.  Override it with the copy first (Spark's Python workers
    # get the copy from PYTHONPATH), and check under pytest itself which package the tests import.
    pytest_args = [sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", f"pythonpath={root} ."]
    probe_test = root / "test_probe_mutated_copy.py"
    probe_test.write_text(
        "import recsys_spark, recsys_spark.per_user.aggregate\n\n\ndef test_the_mutated_copy_is_imported():\n"
        f"    assert recsys_spark.__file__.startswith({str(root)!r}), recsys_spark.__file__\n"
    )
    probe = subprocess.run(
        [*pytest_args, "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"), str(probe_test)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        lines = probe.stdout.strip().splitlines() or [""]
        return "error", 0.0, f"the mutated copy is not the one the tests import: {lines[-1]}"
    started = time.perf_counter()
    proc = subprocess.run(
        [*pytest_args, "-x", "-m", "not cluster", *m.tests],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - started
    shutil.rmtree(root, ignore_errors=True)
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    status = {0: "survived", 1: "killed"}.get(proc.returncode, "error")
    return status, took, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="run the mutants whose names start with these")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or any(m.name.startswith(p) for p in args.only)]
    if args.list:
        for m in chosen:
            print(f"{m.name:32} {m.path:28} {m.wrong}")
        return 0
    work = OUT / "spark"
    work.mkdir(parents=True, exist_ok=True)
    rows, started = [], time.perf_counter()
    for m in chosen:
        status, took, last = run_one(m, work)
        rows.append((m, status, took, last))
        print(f"{status:8} {took:6.0f} s  {m.name}: {last}", flush=True)
    total = time.perf_counter() - started
    killed = sum(s == "killed" for _, s, _, _ in rows)
    survived = [m.name for m, s, _, _ in rows if s == "survived"]
    errors = [m.name for m, s, _, _ in rows if s == "error"]
    judged = killed + len(survived)
    score = f"{killed}/{judged} killed ({100 * killed / judged:.0f} %)" if judged else "nothing judged"
    lines = [
        f"# Spark-layer mutants: {score}, {total / 60:.1f} min",
        "",
        "| mutant | module | wrong number | result | seconds |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {m.name} | {m.path} | {m.wrong} | {s} | {t:.0f} |" for m, s, t, _ in rows]
    (OUT / "spark.md").write_text("\n".join(lines) + "\n")
    print(f"{score} in {total / 60:.1f} min; survived: {survived or 'none'}; errors: {errors or 'none'}")
    return 1 if survived or errors else 0


if __name__ == "__main__":
    sys.exit(main())
