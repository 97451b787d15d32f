"""A small output root written by hand (pyarrow, no Spark): the tables the daily runs and the
statistics and experiments branches write, for the report's tests.

Days 2026-11-02 .. 2026-11-05 with 2026-11-04 missing; 2026-10-29 exists outside the range
(the "same weekday a week before" of 2026-11-05 is 2026-10-29).
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

    for s, shift in (("all", 0.0), ("platform=ios", 0.03), ("platform=web", -0.04)):
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
    failed = i == 1  # the second day fails a hard rule
    rules = [
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
    }
    (root / "summary" / f"dt={day}").mkdir(parents=True)
    (root / "summary" / f"dt={day}" / "summary.json").write_text(json.dumps(summary))
    (root / "summary" / f"dt={day}" / "_SUCCESS").write_text("")


EXPERIMENTS = [
    # experiment, variant, metric, k, aggregation, value, control_value, rel_delta, rel_ci_low, rel_ci_high, p
    ("exp_ranker", "treatment", "ndcg", 10, "user_avg", 0.66, 0.60, 0.10, 0.04, 0.16, 0.001),
    ("exp_ranker", "treatment", "exposure_ctr", None, "global", 0.039, 0.040, -0.025, -0.08, 0.03, 0.40),
    ("exp_srm", "b", "auc", None, "user_avg", 0.70, 0.72, -0.0278, -0.05, -0.005, 0.02),
]


def write_experiments(root: Path, day: str, srm_passed: bool = False) -> pd.DataFrame:
    rows = []
    for exp, variant, metric, k, agg, value, control, rel, lo, hi, p in EXPERIMENTS:
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
                "delta": value - control,
                "ci_low": (value - control) - 0.01,
                "ci_high": (value - control) + 0.01,
                "rel_delta": rel,
                "rel_ci_low": lo,
                "rel_ci_high": hi,
                "p_value": p,
                "p_adjusted": min(1.0, 2 * p),
                "method": "delta",
                "mde": 0.03,
            }
        )
    frame = pd.DataFrame(rows)
    schema = pa.schema(
        [
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
            ("mde", pa.float64()),
        ]
    )
    (root / "experiments" / f"dt={day}").mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pandas(frame, schema=schema, preserve_index=False),
        root / "experiments" / f"dt={day}" / "part-0.parquet",
    )
    checks = [
        {
            "experiment": "exp_ranker",
            "check": "srm",
            "statistic": 0.05,
            "p_value": 0.82,
            "passed": True,
            "detail": "1000 vs 1010, expected 50/50",
        },
        {
            "experiment": "exp_srm",
            "check": "srm",
            "statistic": 42.0,
            "p_value": 1e-10,
            "passed": srm_passed,
            "detail": "1000 vs 1300, expected 50/50",
        },
    ]
    (root / "experiment_checks" / f"dt={day}").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(checks), root / "experiment_checks" / f"dt={day}" / "part-0.parquet")
    return frame


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


def build_root(root: Path, with_ci: bool = True, experiments: bool = True) -> Path:
    for i, day in enumerate(DAYS):
        write_day(root, day, i if day != "2026-11-05" else 3, with_ci)
    write_metrics(root, WEEK_BEFORE, -7, with_ci)
    (root / "summary" / f"dt={WEEK_BEFORE}").mkdir(parents=True)  # a complete day: its marker
    (root / "summary" / f"dt={WEEK_BEFORE}" / "_SUCCESS").write_text("")
    if experiments:
        write_experiments(root, DAYS[-1])
    return root
