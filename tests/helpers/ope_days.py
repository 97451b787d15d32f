"""Small logged days and candidates for the OPE tests (tests/ope/test_inputs.py, tests/ops/test_connect.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from recsys_spark.config import load_config
from recsys_spark.ope.run import run_ope

UTC = dt.timezone.utc
DAY1, DAY2 = dt.date(2026, 11, 19), dt.date(2026, 11, 20)
TS = pa.timestamp("us", tz="UTC")
EXPOSURES = pa.schema(
    [
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("request_id", pa.string()),
        ("item_id", pa.string()),
        ("position", pa.int32()),
        ("ts", TS),
        ("propensity", pa.float64()),
    ]
)
CLICKS = pa.schema(
    [
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("request_id", pa.string()),
        ("item_id", pa.string()),
        ("ts", TS),
    ]
)
ITEMS = 5
LENGTH = 3


def day_log(day: dt.date, ids: Callable[[int], str] = lambda r: f"r{r}", users: int = 8, lists: int = 3):
    """``users`` users with ``lists`` requests each (ids from ``ids``, request r shows items (r + k) % 5 at
    k = 1..3, propensity 0.5 / k), a click on every third row, all at 09:00 + r seconds of ``day``."""
    t0 = dt.datetime(day.year, day.month, day.day, 9, 0, tzinfo=UTC)
    exposures, clicks = [], []
    for r in range(users * lists):
        user, ts = f"u{r % users}", t0 + dt.timedelta(seconds=r)
        for k in range(1, LENGTH + 1):
            row = (user, f"s{r}", ids(r), f"i{(r + k) % ITEMS}", k, ts, 0.5 / k)
            exposures.append(row)
            if (r + k) % 3 == 0:
                clicks.append((*row[:4], ts + dt.timedelta(seconds=30)))
    return exposures, clicks


def target_rows(requests: list[Any], day: dt.date | None = None) -> list[tuple]:
    """The candidate for requests r (given as (r, the id to write)): at each position k, the logged item
    (r + k) % 5 with 0.6 and the next one with 0.4 (q̂ 0.3 and 0.2)."""
    rows = []
    for r, rid in requests:
        for k in range(1, LENGTH + 1):
            for item, p, q in (((r + k) % ITEMS, 0.6, 0.3), ((r + k + 1) % ITEMS, 0.4, 0.2)):
                rows.append((rid, f"i{item}", k, p, q, *([day] if day else [])))
    return rows


def write(path: Path, rows: list[tuple], schema: pa.Schema) -> None:
    path.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
    pq.write_table(table, path / "part-0.parquet")


def write_target(root: Path, rows: list[tuple], id_type: pa.DataType | None = None, with_day: bool = False) -> str:
    fields = [
        ("request_id", id_type or pa.string()),
        ("item_id", pa.string()),
        ("position", pa.int32()),
        ("probability", pa.float64()),
        ("q_hat", pa.float64()),
    ]
    write(root / "target", rows, pa.schema(fields + ([("dt", pa.date32())] if with_day else [])))
    return str(root / "target")


def write_day(root: Path, day: dt.date, exposures, clicks, exposure_schema: pa.Schema = EXPOSURES) -> None:
    write(root / "in" / "exposures" / f"dt={day}", exposures, exposure_schema)
    if clicks is not None:
        write(root / "in" / "clicks" / f"dt={day}", clicks, CLICKS)


def ope(spark, root: Path, start: dt.date, end: dt.date, run: str = "x", *settings: str) -> dict:
    cfg = load_config(None, [f'ope.target="{root}/target"', *settings])
    return run_ope(spark, cfg, run, start, end, str(root / "in"), str(root / "out"))


def estimates(root: Path, run: str = "x") -> pd.DataFrame:
    return pd.read_parquet(root / "out" / "ope" / "estimates" / f"run={run}").set_index("estimator")


def same_estimates(a: pd.DataFrame, b: pd.DataFrame) -> None:
    columns = ["value", "se", "ci_low", "ci_high", "delta", "delta_se", "n", "units"]
    pd.testing.assert_frame_equal(a[columns].sort_index(), b[columns].sort_index(), check_exact=False, rtol=1e-12)


def empty_clicks(root: Path, day: dt.date, kind: str) -> None:
    """A clicks partition of ``day`` with no row: absent, an empty folder, a zero-row file of untyped (Null)
    columns as pandas writes an empty frame, or a zero-row file with the clicks' types."""
    path = root / "in" / "clicks" / f"dt={day}"
    if kind == "missing":
        return
    path.mkdir(parents=True)
    if kind == "untyped":
        pd.DataFrame({name: [] for name in CLICKS.names}, dtype=object).to_parquet(path / "part-0.parquet")
        assert pq.read_schema(path / "part-0.parquet").field("user_id").type == pa.null()
    elif kind == "typed":
        pq.write_table(CLICKS.empty_table(), path / "part-0.parquet")
