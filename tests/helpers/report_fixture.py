"""A small output root written by hand (pyarrow, no Spark): the tables the daily runs, the experiment
window and the offline runs and comparison write, for the report's tests.

Days 2026-11-02 .. 2026-11-05 with 2026-11-04 missing; 2026-10-29 exists outside the range
(the "same weekday a week before" of 2026-11-05 is 2026-10-29).  Slices: ``platform`` (each list in
one bucket), ``popularity`` (item-level by name) and ``brand`` (a column of the items table: item-level
because its buckets see part of the catalog).  Experiments hold the cases of the colour rule: a gain, a
gain of a lower-is-better metric, a loss, a result whose unadjusted interval excludes 0 but whose
adjusted p is 0.495 (an A/A test), and a sequential interval that covers 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

DAYS = ["2026-11-02", "2026-11-03", "2026-11-05"]
MISSING = "2026-11-04"
WEEK_BEFORE = "2026-10-29"
START, END = "2026-11-02", "2026-11-05"
CATALOG = 200  # items in the catalog
SLICE_NAMES = ["platform", "popularity", "brand"]
ITEM_LEVEL = ("popularity", "brand")

METRICS_SCHEMA = pa.schema(
    [
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("aggregation", pa.string()),
        ("slice", pa.string()),
        ("value", pa.float64()),
        ("n", pa.int64()),
        ("se", pa.float64()),
    ]
)
CI_FIELDS = [("ci_low", pa.float64()), ("ci_high", pa.float64()), ("ci_method", pa.string())]


def metric_rows(i: int) -> list[dict]:
    """Day i's metric rows: values move a little from day to day (i = 0, 1, 2, ...)."""
    rows = []

    def add(metric, k, agg, slice_, value, n, se=None):
        rows.append({"metric": metric, "k": k, "aggregation": agg, "slice": slice_, "value": value, "n": n, "se": se})

    slices = (
        ("all", 0.0, CATALOG),
        ("platform=ios", 0.03, CATALOG),
        ("platform=web", -0.04, CATALOG),
        ("popularity=head", 0.08, 20),
        ("popularity=mid", 0.05, 60),
        ("popularity=tail", -0.02, 120),
        ("brand=acme", 0.06, 150),
        ("brand=other", 0.01, 50),
    )
    for s, shift, catalog in slices:
        add("auc", None, "global", s, 0.70 + 0.01 * i + shift, 5000)
        add("auc", None, "user_avg", s, 0.72 + 0.01 * i + shift, 300, 0.01)
        add("auc", None, "impression_weighted", s, 0.71 + 0.013 * i + shift, 4000)
        add("mrr", None, "user_avg", s, 0.5 + shift, 300, 0.02)
        for k in (1, 5, 10):
            add("ndcg", k, "user_avg", s, 0.3 + 0.03 * k + 0.01 * i + shift, 300, 0.02)
            add("map", k, "user_avg", s, 0.25 + 0.02 * k + shift, 300, 0.02)
            add("precision", k, "user_avg", s, 0.4 / k + shift / 10, 300, 0.01)
            add("recall", k, "user_avg", s, min(1.0, 0.2 * k**0.5) + shift / 10, 300, 0.01)
            add("hit_rate", k, "user_avg", s, min(1.0, 0.3 * k**0.5) + shift / 10, 300, 0.01)
            add("precision", k, "global", s, 0.38 / k, 500)
            add("recall", k, "global", s, min(1.0, 0.21 * k**0.5), 600)
        add("exposure_ctr", None, "global", s, 0.04 + 0.002 * i + shift / 10, 6000)
        add("uv_ctr", None, "global", s, 1.2 + 0.1 * i + shift, 200)
        add("pv_failure_rate", None, "global", s, 0.01, 600)
        add("item_coverage", None, "global", s, 0.9 - shift, catalog)  # n: the catalog items the slice sees
    add("gini", None, "catalog", "all", 0.6 - 0.01 * i, 200)
    add("gini", None, "exposed", "all", 0.58 - 0.01 * i, 190)
    return rows


def write_metrics(root: Path, day: str, i: int, with_ci: bool) -> pd.DataFrame:
    frame = pd.DataFrame(metric_rows(i))
    schema = METRICS_SCHEMA
    if with_ci:
        frame["ci_low"] = frame["value"] - 1.96 * frame["se"]
        frame["ci_high"] = frame["value"] + 1.96 * frame["se"]
        frame["ci_method"] = frame["se"].map(lambda v: None if pd.isna(v) else "t")
        schema = pa.schema(list(METRICS_SCHEMA) + [pa.field(*f) for f in CI_FIELDS])
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    path = root / "metrics" / f"dt={day}"
    path.mkdir(parents=True)
    # two part files and a _SUCCESS marker, as Spark writes them
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), path / "part-00000.parquet")
    pq.write_table(table.slice(half), path / "part-00001.parquet")
    (path / "_SUCCESS").write_text("")
    return frame


def write_day(root: Path, day: str, i: int, with_ci: bool) -> None:
    write_metrics(root, day, i, with_ci)
    lorenz = pd.DataFrame(
        {"slice": ["all"] * 5, "x": [0.0, 0.25, 0.5, 0.75, 1.0], "y": [0.0, 0.05, 0.15, 0.35 - 0.01 * i, 1.0]}
    )
    (root / "lorenz" / f"dt={day}").mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(lorenz, preserve_index=False), root / "lorenz" / f"dt={day}" / "part-0.parquet")
    write_curves(root, f"dt={day}", 0.1 * i)
    failed = i == 1  # the second day fails a hard rule
    rules = [
        {
            "rule": "no_feedback",
            "severity": "hard",
            "violations": 0,
            "rate": 0.0,
            "threshold": 0.0,
            "passed": True,
            "examples": [],
        },
        {
            "rule": "duplicate_item_in_request",
            "severity": "hard",
            "violations": 3 if failed else 0,
            "rate": 0.001 if failed else 0.0,
            "threshold": 0.0,
            "passed": not failed,
            "examples": [],
        },
        {
            "rule": "orphan_event_rate",
            "severity": "soft",
            "violations": 4,
            "rate": 0.06,
            "threshold": 0.05,
            "passed": False,
            "examples": [],
        },
        {
            "rule": "bot_user_rate",
            "severity": "soft",
            "violations": 0,
            "rate": 0.0,
            "threshold": 0.001,
            "passed": True,
            "examples": [],
        },
    ]
    (root / "rule_checks" / f"dt={day}").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rules), root / "rule_checks" / f"dt={day}" / "part-0.parquet")
    summary = {
        "date": day,
        "status": "hard_rule_violated" if failed else "ok",
        "headline": {},
        "input_rows": {"exposures": 6000 + i, "clicks": 300},
        "data_quality": {
            "rejected_exposures": {"null_key": 2 + i, "ts_outside_day": 1},
            "rejected_clicks": {"null_key": 1},
            "duplicate_exposures": 3,
            "orphan_events": 4,
            "users": 300,
            "lists": 600,
        },
        "rules": rules,
        "notes": [f"a note of {day}"],
        "config": {"stats": {"confidence": 0.95}, "slices": {"names": SLICE_NAMES}},
    }
    (root / "summary" / f"dt={day}").mkdir(parents=True)
    (root / "summary" / f"dt={day}" / "summary.json").write_text(json.dumps(summary))
    (root / "summary" / f"dt={day}" / "_SUCCESS").write_text("")


EXPERIMENTS = [
    # experiment, variant, metric, k, aggregation, value, control_value, rel_delta, rel_ci_low, rel_ci_high, p,
    # p_adjusted, ci_method; the verdict the colour rule gives it last
    ("exp_ranker", "treatment", "ndcg", 10, "user_avg", 0.66, 0.60, 0.10, 0.04, 0.16, 0.001, 0.003, None, "gain"),
    (
        "exp_ranker",
        "treatment",
        "exposure_ctr",
        None,
        "global",
        0.039,
        0.040,
        -0.025,
        -0.08,
        0.03,
        0.40,
        0.80,
        None,
        "none",
    ),
    # a lower failure rate: a significant gain
    (
        "exp_ranker",
        "treatment",
        "pv_failure_rate",
        None,
        "global",
        0.008,
        0.010,
        -0.2,
        -0.3,
        -0.1,
        0.002,
        0.004,
        None,
        "gain",
    ),
    ("exp_srm", "b", "auc", None, "user_avg", 0.70, 0.72, -0.0278, -0.05, -0.005, 0.02, 0.04, None, "loss"),
    # the A/A test: the unadjusted interval excludes 0, the adjusted p is 0.495: not significant
    ("exp_aa", "treatment", "ndcg", 10, "user_avg", 0.618, 0.60, 0.03, 0.005, 0.055, 0.0165, 0.495, None, "none"),
    # a sequential (always valid) interval covering 0 wins over a small adjusted p
    (
        "exp_aa",
        "treatment",
        "mrr",
        None,
        "user_avg",
        0.525,
        0.50,
        0.05,
        -0.01,
        0.11,
        0.004,
        0.012,
        "sequential_msprt",
        "none",
    ),
]
#: the experiment windows: (experiment, start, end); the last ends before the range (not shown)
WINDOWS = [
    ("exp_ranker", "2026-11-02", "2026-11-05"),
    ("exp_aa", "2026-11-03", "2026-11-05"),
    ("exp_ranker", "2026-10-20", "2026-10-26"),
]
RESULTS_SCHEMA = [
    ("experiment", pa.string()),
    ("variant", pa.string()),
    ("metric", pa.string()),
    ("k", pa.int32()),
    ("aggregation", pa.string()),
    ("slice", pa.string()),
    ("value", pa.float64()),
    ("n", pa.int64()),
    ("control_value", pa.float64()),
    ("control_n", pa.int64()),
    ("delta", pa.float64()),
    ("ci_low", pa.float64()),
    ("ci_high", pa.float64()),
    ("rel_delta", pa.float64()),
    ("rel_ci_low", pa.float64()),
    ("rel_ci_high", pa.float64()),
    ("p_value", pa.float64()),
    ("p_adjusted", pa.float64()),
    ("method", pa.string()),
    ("ci_method", pa.string()),
    ("mde", pa.float64()),
]


def experiment_rows(experiments: list[str] | None = None) -> pd.DataFrame:
    rows = []
    for exp, variant, metric, k, agg, value, control, rel, lo, hi, p, p_adj, ci_method, _ in EXPERIMENTS:
        if experiments is not None and exp not in experiments:
            continue
        delta = value - control
        rows.append(
            {
                "experiment": exp,
                "variant": variant,
                "metric": metric,
                "k": k,
                "aggregation": agg,
                "slice": "all",
                "value": value,
                "n": 1000,
                "control_value": control,
                "control_n": 1010,
                "delta": delta,
                "ci_low": lo * control,
                "ci_high": hi * control,
                "rel_delta": rel,
                "rel_ci_low": lo,
                "rel_ci_high": hi,
                "p_value": p,
                "p_adjusted": p_adj,
                "method": "delta",
                "ci_method": ci_method,
                "mde": 0.03,
            }
        )
    return pd.DataFrame(rows)


def experiment_checks(experiments: list[str], srm_passed: bool = False) -> list[dict]:
    checks = {
        "exp_ranker": {
            "check": "srm",
            "statistic": 0.05,
            "p_value": 0.82,
            "passed": True,
            "detail": "1000 vs 1010, expected 50/50",
        },
        "exp_srm": {
            "check": "srm",
            "statistic": 42.0,
            "p_value": 1e-10,
            "passed": srm_passed,
            "detail": "1000 vs 1300, expected 50/50",
        },
        "exp_aa": {"check": "srm", "statistic": 0.1, "p_value": 0.75, "passed": True, "detail": "1000 vs 1010"},
    }
    return [{"experiment": name, **checks[name]} for name in experiments]


def _write(frame: pd.DataFrame | list[dict], path: Path, schema: pa.Schema | None = None) -> None:
    path.mkdir(parents=True)
    table = (
        pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
        if isinstance(frame, pd.DataFrame)
        else pa.Table.from_pylist(frame)
    )
    pq.write_table(table, path / "part-0.parquet")
    (path / "_SUCCESS").write_text("")


def write_experiments(root: Path, day: str, srm_passed: bool = False) -> pd.DataFrame:
    frame = experiment_rows()
    _write(frame, root / "experiments" / f"dt={day}", pa.schema(RESULTS_SCHEMA))
    checks = experiment_checks(["exp_aa", "exp_ranker", "exp_srm"], srm_passed)
    _write(checks, root / "experiment_checks" / f"dt={day}")
    return frame


def write_windows(root: Path) -> None:
    """``experiment_window/experiment=NAME/window=S_E``: the experiments columns without ``experiment``."""
    for exp, start, end in WINDOWS:
        part = f"experiment={exp}/window={start}_{end}"
        frame = experiment_rows([exp]).drop(columns="experiment")
        frame["n"] = 4000  # users over the window
        _write(frame, root / "experiment_window" / part, pa.schema(RESULTS_SCHEMA[1:]))
        checks = [{k: v for k, v in c.items() if k != "experiment"} for c in experiment_checks([exp])]
        _write(checks, root / "experiment_window_checks" / part)


OFFLINE_METRICS_SCHEMA = pa.schema(list(METRICS_SCHEMA) + [pa.field(*f) for f in CI_FIELDS])
#: two complete runs and one without its _SUCCESS (left out)
OFFLINE_RUNS = {"base": 0.0, "candidate": 0.02, "unfinished": 0.05}
#: the comparison candidate against base: metric, k, aggregation, delta, ci_low, ci_high, p, p_adjusted, verdict
COMPARISON = [
    ("ndcg", 10, "user_avg", 0.02, 0.01, 0.03, 0.001, 0.01, "gain"),
    # unadjusted interval above 0, adjusted p 0.2: not significant
    ("recall", 10, "user_avg", 0.015, 0.001, 0.029, 0.03, 0.2, "none"),
    ("logloss", None, "global", -0.04, -0.06, -0.02, 0.0001, 0.001, "gain"),  # lower is better
    ("novelty", None, "user_avg", -0.3, -0.4, -0.2, 0.002, 0.03, "loss"),
    ("pcoc", None, "global", 0.05, 0.02, 0.08, 0.001, 0.004, "change"),  # no better side
]
COMPARISON_SCHEMA = pa.schema(
    [
        ("column", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("aggregation", pa.string()),
        ("n", pa.int64()),
        ("base_mean", pa.float64()),
        ("candidate_mean", pa.float64()),
        ("delta", pa.float64()),
        ("se", pa.float64()),
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("rel_delta", pa.float64()),
        ("rel_ci_low", pa.float64()),
        ("rel_ci_high", pa.float64()),
        ("p_value", pa.float64()),
        ("p_adjusted", pa.float64()),
        ("method", pa.string()),
        ("correction", pa.string()),
    ]
)


def offline_metric_rows(shift: float) -> pd.DataFrame:
    """A run's metrics table (slice all): some of the registry's headline keys, and one that is not."""
    rows = [
        ("auc", None, "global", 0.72 + shift, 5000, None),
        ("ndcg", 10, "user_avg", 0.05 + shift, 300, 0.007),
        ("recall", 10, "user_avg", 0.07 + shift, 300, 0.011),  # not a headline key (the headline's is global)
        ("recall", 10, "global", 0.08 + shift, 300, 0.010),
        ("mrr", None, "user_avg", 0.10 + shift, 300, 0.012),
        ("logloss", None, "global", 0.48 - shift, 5000, 0.004),
    ]
    frame = pd.DataFrame(
        [
            {"metric": m, "k": k, "aggregation": a, "slice": "all", "value": v, "n": n, "se": se}
            for m, k, a, v, n, se in rows
        ]
    )
    frame["ci_low"] = frame["value"] - 1.96 * frame["se"]
    frame["ci_high"] = frame["value"] + 1.96 * frame["se"]
    frame["ci_method"] = frame["se"].map(lambda v: None if pd.isna(v) else "t")
    return frame


def comparison_rows() -> pd.DataFrame:
    rows = []
    for metric, k, agg, delta, lo, hi, p, p_adj, _ in COMPARISON:
        base = 0.5
        rows.append(
            {
                "column": metric + (f"_at_{k}" if k else ""),
                "metric": metric,
                "k": k,
                "aggregation": agg,
                "n": 290,
                "base_mean": base,
                "candidate_mean": base + delta,
                "delta": delta,
                "se": (hi - lo) / 3.92,
                "ci_low": lo,
                "ci_high": hi,
                "rel_delta": delta / base,
                "rel_ci_low": lo / base,
                "rel_ci_high": hi / base,
                "p_value": p,
                "p_adjusted": p_adj,
                "method": "paired_t",
                "correction": "holm",
            }
        )
    return pd.DataFrame(rows)


def roc_points(lift: float) -> tuple[list[float], list[float]]:
    """A concave ROC through (0, 0) and (1, 1): tpr = fpr ** (0.4 + lift)."""
    fpr = [0.0, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0]
    return fpr, [x ** (0.4 + lift) for x in fpr]


def write_curves(root: Path, partition: str, lift: float) -> None:
    """``roc_curve/{partition}`` and ``pr_curve/{partition}`` of slice all (thresholds: the first ROC point's
    and the last PR point's null, as the job writes them)."""
    fpr, tpr = roc_points(lift)
    roc = pd.DataFrame({"slice": "all", "threshold": [None, 0.9, 0.8, 0.6, 0.4, 0.2, 0.1], "fpr": fpr, "tpr": tpr})
    recall = [1.0, 0.8, 0.6, 0.4, 0.2, 0.0]
    precision = [0.1, 0.15 + lift / 10, 0.2, 0.3, 0.45 + lift / 10, 1.0]
    pr = pd.DataFrame(
        {"slice": "all", "threshold": [0.1, 0.3, 0.5, 0.7, 0.9, None], "recall": recall, "precision": precision}
    )
    for table, frame in (("roc_curve", roc), ("pr_curve", pr)):
        (root / table / partition).mkdir(parents=True)
        frame = frame.astype({"threshold": "float64"})
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), root / table / partition / "part-0.parquet")


def write_offline(root: Path) -> None:
    """``offline/metrics/run=NAME``, ``offline/comparison/base=A/candidate=B`` and their ``offline/summary/...``
    (summary.json and _SUCCESS; the run ``unfinished`` has no _SUCCESS)."""
    offline = root / "offline"
    for run, shift in OFFLINE_RUNS.items():
        _write(offline_metric_rows(shift), offline / "metrics" / f"run={run}", OFFLINE_METRICS_SCHEMA)
        write_curves(offline, f"run={run}", 10 * shift)
        summary = offline / "summary" / f"run={run}"
        summary.mkdir(parents=True)
        notes = [f"a note of run {run}"]
        (summary / "summary.json").write_text(json.dumps({"run": run, "evaluations": ["lists"], "notes": notes}))
        if run != "unfinished":
            (summary / "_SUCCESS").write_text("")
    _write(comparison_rows(), offline / "comparison" / "base=base" / "candidate=candidate", COMPARISON_SCHEMA)
    summary = offline / "summary" / "base=base" / "candidate=candidate"
    summary.mkdir(parents=True)
    (summary / "summary.json").write_text(
        json.dumps(
            {"base": "base", "candidate": "candidate", "users_in_both": 290, "correction": "holm", "confidence": 0.95}
        )
    )
    (summary / "_SUCCESS").write_text("")


def write_offline_auc(path: Path) -> pd.DataFrame:
    """Train/test AUC per day: model m1 overfits on 11-03 (train - test = 0.10 > 0.05); its test AUC
    is far above online on 11-05 (0.95 - online)."""
    rows = []
    for day, train, test in (("2026-11-02", 0.74, 0.72), ("2026-11-03", 0.83, 0.73), ("2026-11-05", 0.96, 0.95)):
        rows += [
            {"dt": day, "model": "m1", "split": "train", "auc": train},
            {"dt": day, "model": "m1", "split": "test", "auc": test},
        ]
    frame = pd.DataFrame(rows)
    frame.to_csv(path, index=False)
    return frame


#: the OPE run ``reranker`` (recsys-spark ope): (estimator, level, value, ci_low, ci_high, delta, units)
OPE_ESTIMATES = (
    ("logged", "item", 0.050, 0.046, 0.054, None, 5000),
    ("ips", "item", 0.061, 0.052, 0.070, 0.011, 5000),
    ("dr", "item", 0.060, 0.054, 0.066, 0.010, 5000),
    ("logged_list", "list", 0.50, 0.46, 0.54, None, 500),
    ("iips", "list", 0.58, 0.49, 0.67, 0.08, 500),
)
OPE_DIAGNOSTICS = (("users", 300.0), ("effective_sample_size", 812.5), ("unsupported_target_share", 0.02))
#: the simulated day of ``reranker``: its metrics (slice all) and rules
SIMULATED_DAY = "2026-11-05"
SIMULATED_METRICS = (("pv_failure_rate", "global", 0.03), ("gini", "catalog", 0.75), ("item_coverage", "global", 0.6))


def write_ope(root: Path) -> None:
    """``ope/{estimates,diagnostics,summary}/run=reranker`` (and ``run=unfinished`` without its _SUCCESS), and
    the simulated day ``simulation/{metrics,rule_checks,summary}/run=reranker/dt=2026-11-05``."""
    rows = [
        {
            "estimator": name,
            "level": level,
            "value": value,
            "se": (high - low) / 3.92,
            "ci_low": low,
            "ci_high": high,
            "ci_method": "delta",
            "n": 300,
            "units": units,
            "delta": delta,
            "delta_se": None if delta is None else 0.004,
            "delta_ci_low": None if delta is None else delta - 0.008,
            "delta_ci_high": None if delta is None else delta + 0.008,
            "clip": None,
            "switch_tau": None,
            "confidence": 0.95,
        }
        for name, level, value, low, high, delta, units in OPE_ESTIMATES
    ]
    for run in ("reranker", "unfinished"):
        _write(rows, root / "ope" / "estimates" / f"run={run}")
        _write([{"diagnostic": d, "value": v} for d, v in OPE_DIAGNOSTICS], root / "ope" / "diagnostics" / f"run={run}")
        summary = root / "ope" / "summary" / f"run={run}"
        summary.mkdir(parents=True)
        (summary / "summary.json").write_text(
            json.dumps(
                {
                    "run": run,
                    "start": START,
                    "end": END,
                    "target": "/data/reranker",
                    "parameters": {"clip": 0.0, "switch_tau": 10.0, "confidence": 0.95},
                    "notes": ["slate_ips skipped: no logged list has a list_propensity"],
                }
            )
        )
        if run == "reranker":
            (summary / "_SUCCESS").write_text("")
    where = f"run=reranker/dt={SIMULATED_DAY}"
    metrics = [
        {"metric": m, "k": None, "aggregation": a, "slice": "all", "value": v, "n": 600, "se": None}
        for m, a, v in SIMULATED_METRICS
    ]
    _write(pd.DataFrame(metrics), root / "simulation" / "metrics" / where, METRICS_SCHEMA)
    rules = [
        {
            "rule": "empty_response_rate",
            "severity": "soft",
            "violations": 18,
            "rate": 0.03,
            "threshold": 0.02,
            "passed": False,
            "examples": [],
        },
        {
            "rule": "duplicate_item_in_request",
            "severity": "hard",
            "violations": 0,
            "rate": 0.0,
            "threshold": 0.0,
            "passed": True,
            "examples": [],
        },
    ]
    _write(rules, root / "simulation" / "rule_checks" / where)
    summary = root / "simulation" / "summary" / where
    summary.mkdir(parents=True)
    (summary / "summary.json").write_text(
        json.dumps(
            {
                "status": "soft_rule_failed",
                "simulation": {"run": "reranker", "logged_requests": 600, "answered": 582, "rows_not_logged": 0},
            }
        )
    )
    (summary / "_SUCCESS").write_text("")


def build_root(
    root: Path, with_ci: bool = True, experiments: bool = True, offline: bool = True, ope: bool = True
) -> Path:
    """The whole root; ``experiments``: the days' experiments and the windows; ``offline``: runs and comparison;
    ``ope``: an OPE run and a simulated day."""
    for i, day in enumerate(DAYS):
        write_day(root, day, i if day != "2026-11-05" else 3, with_ci)
    write_metrics(root, WEEK_BEFORE, -7, with_ci)
    (root / "summary" / f"dt={WEEK_BEFORE}").mkdir(parents=True)  # a complete day: its marker
    (root / "summary" / f"dt={WEEK_BEFORE}" / "_SUCCESS").write_text("")
    if experiments:
        write_experiments(root, DAYS[-1])
        write_windows(root)
    if offline:
        write_offline(root)
    if ope:
        write_ope(root)
    return root


#: one decision in each state on the last day (ISSUE 42): the code an earlier release wrote for not enough evidence
#: (keep_running) included
STATE_DECISIONS = (
    ("exp_ship", "ship", "goal ndcg@10_user_avg improved: +6.0% [+2.1%, +9.9%]"),
    ("exp_no", "do_not_ship", "guardrail pv_failure_rate_global beyond its margin (+0.005): +0.012 [+0.008, +0.016]"),
    ("exp_wait", "keep_running", "goal ndcg@10_user_avg inconclusive: +1.0% [-2.0%, +4.0%]"),
    ("exp_broken", "invalid", "sample-ratio mismatch (p=1e-10): the split is not the planned one"),
)
#: one gate verdict in each state: (name, state, the check's state, its relative change's shown numbers)
STATE_VERDICTS = (
    ("gate_passed", "passed", ("+6 %", "[+2.1 %, +9.9 %]")),
    ("gate_failed", "failed", ("-3 %", "[-5 %, -1 %]")),
    ("gate_inconclusive", "inconclusive", ("+1 %", "[-2 %, +4 %]")),
)


def write_states(root: Path) -> None:
    """Every state a decision or a gate can show: ``experiment_decisions`` of the last day (basis cumulative)
    and ``gate/NAME/verdict.json``."""
    rows = [
        {
            "experiment": name,
            "variant": "treatment",
            "decision": code,
            "reasons": [reason],
            "ci_method": "sequential",
            "control_n": 3000,
            "variant_n": 3000,
            "basis": "cumulative",
        }
        for name, code, reason in STATE_DECISIONS
    ]
    _write(rows, root / "experiment_decisions" / f"dt={DAYS[-1]}")
    words = {
        "passed": "PASSED 1 of 1 checks",
        "failed": "FAILED 1 of 1 checks",
        "inconclusive": "NOT ENOUGH EVIDENCE YET",
    }
    for name, state, (value, interval) in STATE_VERDICTS:
        check = {
            "key": "ndcg@10_user_avg",
            "slice": "all",
            "threshold": "min_relative_change",
            "threshold_value": 0.01,
            "guardrail": False,
            "on": "bound",
            "state": state,
            "passed": state == "passed",
            "unit": "percent",
            "shown": {"value": value, "interval": interval, "threshold": "1 %", "unit": "%"},
            "why": f"relative change must gain at least +1 % ({state})",
        }
        verdict = {
            "name": name,
            "state": state,
            "passed": state == "passed",
            "summary": f"gate {name}: {words[state]}",
            "source": "experiment",
            "experiment": "exp_ship",
            "variant": "treatment",
            "start": DAYS[0],
            "end": DAYS[-1],
            "written_at": "2026-11-05T03:00:00+00:00",
            "checks": [check],
        }
        (root / "gate" / name).mkdir(parents=True)
        (root / "gate" / name / "verdict.json").write_text(json.dumps(verdict))
