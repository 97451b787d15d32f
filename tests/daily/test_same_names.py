"""One name, one formula: the daily job and the offline evaluation on the same lists report the same values.

Where the two commands write a row under the same (metric, k, aggregation), it is the same formula
(docs/metrics.md and docs/offline.md, "Same name, same formula").  The proof: one small set of lists built by
hand, written once as a day of exposures and clicks (the daily job) and once as recommendations, truth,
predictions, items and train (the offline evaluation), and every key both ``metrics`` tables hold (slice
``all``) compared.

The two inputs are made equal where the commands differ only by input:

* one request per user, so the daily job's lists are the offline users' lists (the daily ``user_avg`` is a
  mean over a user's lists, offline has one list per user);
* the truth is the day's clicked pairs, all inside the lists (the daily job's relevant items are in the list
  by construction; offline truth outside a list counts in R and in the ideal DCG);
* the predictions are the day's exposures with the click as the label (AUC);
* no list is longer than max(k), so offline's top-k_max items (beyond accuracy) are the whole list, and one
  listed item (z) is missing from the catalog, as the daily job's exposures can be (item coverage and the
  catalog Gini must treat it alike);
* novelty's popularity: the daily job counts the users who clicked each item in the previous days, offline
  the train users of each item, so the previous day's clicks are the train interactions, and train items
  are kept in the lists (``offline.exclude_train_items=false``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.registry import key, parse_key

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 20)
NOON = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.timezone.utc)
TS = pa.timestamp("us", tz="UTC")
KS = (1, 3, 5)

CATEGORY = dict(zip("abcdefghij", "XXYYZZXYZX", strict=True))  # a 10-item catalog; i and j are never shown
#: user -> their one list, (item, score, clicked); scores distinct over the whole day (no ties anywhere)
LISTS = {
    "u1": [("a", 0.95, False), ("b", 0.90, True), ("c", 0.85, False), ("d", 0.80, True)],  # 4 items < k = 5
    "u2": [("a", 0.75, True), ("c", 0.70, False), ("e", 0.65, False)],
    "u3": [("b", 0.60, False), ("e", 0.55, True), ("f", 0.50, False), ("g", 0.45, True), ("h", 0.40, False)],
    "u4": [("c", 0.35, False), ("f", 0.30, False), ("a", 0.25, True)],
    "u5": [("h", 0.20, True)],  # only a positive: no per-user AUC, in both
    "u6": [("d", 0.15, False), ("g", 0.10, False), ("z", 0.05, False)],  # no click; z is not in the catalog
}
#: the previous day's clicks (daily novelty's popularity) = the train interactions (offline's)
HISTORY = [("u1", "a"), ("u2", "a"), ("u3", "b"), ("u7", "a"), ("u7", "c"), ("u8", "e")]


def _write(path: Path, rows: list[dict], schema: pa.Schema) -> str:
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path / "part-00000.parquet")
    return str(path)


def _schema(**columns: pa.DataType) -> pa.Schema:
    return pa.schema(list(columns.items()))


def _daily(root: Path) -> Path:
    """The lists as one day of exposures and clicks, the catalog, the previous day's clicks."""
    exposures, clicks = [], []
    for u, items in LISTS.items():
        for position, (item, score, clicked) in enumerate(items, start=1):
            exposures.append(
                dict(user_id=u, session_id=f"s{u}", request_id=f"r{u}", item_id=item, position=position, score=score)
            )
            if clicked:
                clicks.append(dict(user_id=u, session_id=f"s{u}", request_id=f"r{u}", item_id=item, event="click"))
    exposure = _schema(
        user_id=pa.string(),
        session_id=pa.string(),
        request_id=pa.string(),
        item_id=pa.string(),
        position=pa.int32(),
        score=pa.float64(),
        ts=TS,
    )
    click = _schema(
        user_id=pa.string(),
        session_id=pa.string(),
        request_id=pa.string(),
        item_id=pa.string(),
        ts=TS,
        event=pa.string(),
    )
    later = NOON + dt.timedelta(minutes=1)
    inputs = root / "in"
    _write(inputs / "exposures" / f"dt={DAY}", [dict(e, ts=NOON) for e in exposures], exposure)
    _write(inputs / "clicks" / f"dt={DAY}", [dict(c, ts=later) for c in clicks], click)
    before = DAY - dt.timedelta(days=1)
    history = [
        dict(
            user_id=u,
            session_id=f"s{u}",
            request_id=f"h{u}{i}",
            item_id=i,
            ts=NOON - dt.timedelta(days=1),
            event="click",
        )
        for u, i in HISTORY
    ]
    _write(inputs / "clicks" / f"dt={before}", history, click)
    _write(inputs / "items", [dict(item_id=i, category=c) for i, c in CATEGORY.items()], _items_schema())
    return inputs


def _items_schema() -> pa.Schema:
    return _schema(item_id=pa.string(), category=pa.string())


def _offline(root: Path) -> list[str]:
    """The same lists as offline inputs; returns the config overrides."""
    pairs = _schema(user_id=pa.string(), item_id=pa.string())
    rows = [(u, item, score, clicked) for u, items in LISTS.items() for item, score, clicked in items]
    recs = _write(
        root / "recommendations",
        [dict(user_id=u, item_id=i, score=s) for u, i, s, _ in rows],
        _schema(user_id=pa.string(), item_id=pa.string(), score=pa.float64()),
    )
    truth = _write(root / "truth", [dict(user_id=u, item_id=i) for u, i, _, c in rows if c], pairs)
    predictions = _write(
        root / "predictions",
        [dict(user_id=u, item_id=i, score=s, label=float(c)) for u, i, s, c in rows],
        _schema(user_id=pa.string(), item_id=pa.string(), score=pa.float64(), label=pa.float64()),
    )
    items = _write(root / "items", [dict(item_id=i, category=c) for i, c in CATEGORY.items()], _items_schema())
    train = _write(root / "train", [dict(user_id=u, item_id=i) for u, i in HISTORY], pairs)
    return [
        f"offline.recommendations={recs}",
        f"offline.truth={truth}",
        f"offline.predictions={predictions}",
        f"offline.items={items}",
        f"offline.train={train}",
        "offline.exclude_train_items=false",  # the train items are the previous day's clicks: keep them listed
    ]


def _values(spark, path: str, where: str = "") -> dict[tuple[str, int | None, str], float | None]:
    # a threshold metric's rows (offline predictions' accuracy, precision... at each threshold) are keyed by their
    # threshold too: no registry key names one, and the gate and the report leave them out as this does
    frame = spark.read.parquet(path).where("slice = 'all' and threshold is null" + (f" and {where}" if where else ""))
    rows = frame.select("metric", "k", "aggregation", "value").collect()
    out = {(r["metric"], r["k"], r["aggregation"]): r["value"] for r in rows}
    assert len(out) == len(rows), "one row per (metric, k, aggregation)"
    return out


@pytest.fixture(scope="module")
def both(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("same_names")
    settings = [f"metrics.k={list(KS)}"]
    evaluate_day(spark, load_config(None, settings), DAY, str(_daily(root / "daily")), str(root / "daily" / "out"))
    daily = _values(spark, str(root / "daily" / "out" / "metrics"), f"dt = '{DAY}'")
    from recsys_spark.offline.run import run_offline

    cfg = load_config(None, settings + _offline(root / "offline"))
    run_offline(spark, cfg, "m", str(root / "offline" / "out"))
    offline = _values(spark, str(root / "offline" / "out" / "offline" / "metrics" / "run=m"))
    return daily, offline


#: what both commands must report (a shrinking overlap is a failure too, not a vacuous pass)
EXPECTED_COMMON = {
    *((m, k, "user_avg") for m in ("ndcg", "map", "precision", "recall", "hit_rate") for k in KS),
    *((m, k, "global") for m in ("precision", "recall") for k in KS),
    ("mrr", None, "user_avg"),
    ("auc", None, "global"),
    ("auc", None, "user_avg"),
    ("auc", None, "impression_weighted"),
    ("item_coverage", None, "global"),
    ("gini", None, "catalog"),
    ("gini", None, "exposed"),
    ("personalization", None, "global"),
    ("novelty", None, "global"),
}


def test_both_commands_report_the_shared_metrics(both):
    daily, offline = both
    common = set(daily) & set(offline)
    assert EXPECTED_COMMON <= common, sorted(EXPECTED_COMMON - common, key=str)


def test_every_row_of_both_commands_is_named_by_the_registry(both):
    # a known metric, with a cut-off exactly where the registry gives it one (gini@5 or "coverage" would fail)
    for name, k, aggregation in set(both[0]) | set(both[1]):
        assert parse_key(key(name, k, aggregation)) == (name, k, aggregation)


def test_every_shared_key_has_the_same_value(both):
    daily, offline = both
    common = sorted(set(daily) & set(offline), key=str)
    # it can fail: offline's former precision@k global (Σ hits / Σ min(|L|, k)) gives 0.4375 against 0.28 at
    # k = 5, and a catalog Gini counting z as a catalog item gives 0.2398 against 0.3158 (both checked)
    differ = [
        (row, daily[row], offline[row])
        for row in common
        if (daily[row] is None) != (offline[row] is None)
        or (daily[row] is not None and daily[row] != pytest.approx(offline[row], rel=1e-9))
    ]
    assert differ == [], f"same (metric, k, aggregation), different values (daily, offline): {differ}"
    assert all(daily[row] is not None for row in EXPECTED_COMMON)  # compared values, not nulls
