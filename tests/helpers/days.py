"""One small day of logs written with pyarrow (zone-aware timestamps), and running the job on it.

Neither the test process's nor Spark's time zone changes these inputs.  Three users, two items each, one
click each: every ranking metric is defined.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day

DAY = dt.date(2026, 11, 20)
UTC = dt.timezone.utc
NOON = dt.datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
EXPOSURE_SCHEMA = pa.schema(
    [
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("request_id", pa.string()),
        ("item_id", pa.string()),
        ("position", pa.int32()),
        ("score", pa.float64()),
        ("ts", TS),
    ]
)
CLICK_SCHEMA = pa.schema(
    [
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("request_id", pa.string()),
        ("item_id", pa.string()),
        ("ts", TS),
        ("event", pa.string()),
    ]
)
#: the clicks with what the business metrics read: the event's value and the dwell time
VALUED_CLICK_SCHEMA = CLICK_SCHEMA.append(pa.field("value", pa.float64())).append(
    pa.field("dwell_seconds", pa.float64())
)
EXPOSURES = [
    ("u1", "s1", "r1", "a", 1, 0.9, NOON),
    ("u1", "s1", "r1", "b", 2, 0.8, NOON),
    ("u2", "s2", "r2", "a", 1, 0.5, NOON),
    ("u2", "s2", "r2", "c", 2, 0.4, NOON),
    ("u3", "s3", "r3", "b", 1, 0.7, NOON),
    ("u3", "s3", "r3", "c", 2, 0.2, NOON),
]
LATER = NOON + dt.timedelta(minutes=1)
CLICKS = [
    ("u1", "s1", "r1", "b", LATER, "click"),
    ("u2", "s2", "r2", "a", LATER, "click"),
    ("u3", "s3", "r3", "b", LATER, "click"),
]


def write(path: Path, rows: list[tuple], schema: pa.Schema, name: str = "part-00000.parquet") -> None:
    path.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
    pq.write_table(table, path / name)


def day_input(root: Path, exposures=EXPOSURES, clicks=CLICKS, day: dt.date = DAY) -> Path:
    write(root / "in" / "exposures" / f"dt={day}", exposures, EXPOSURE_SCHEMA)
    if clicks is not None:
        write(root / "in" / "clicks" / f"dt={day}", clicks, CLICK_SCHEMA)
    return root / "in"


def run_day(spark, root: Path, *settings: str, out: str = "out") -> dict:
    return evaluate_day(spark, load_config(None, ["metrics.k=[1]", *settings]), DAY, str(root / "in"), str(root / out))


def summary_of(root: Path, out: str = "out") -> dict:
    return json.loads((root / out / "summary" / f"dt={DAY}" / "summary.json").read_text())


def rules_of(summary: dict) -> dict:
    return {r["rule"]: r for r in summary["rules"]}
