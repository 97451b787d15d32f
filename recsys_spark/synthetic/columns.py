"""The Arrow side of the generator: the schema of every table it writes (the job's input contract,
``recsys_spark.schema``, plus attributes to slice by), and string columns built without a Python loop per row."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from recsys_spark.schema import (
    CLICK_COLUMNS,
    EXPOSURE_COLUMNS,
    FIRST_SEEN,
    ITEM_COLUMNS,
    LIST_PROPENSITY,
    PREFIX_PROPENSITY,
    PROPENSITY,
    USER,
)

TIMESTAMP = pa.timestamp("us", tz="UTC")

# the job's input contract (recsys_spark.schema), every column of it, plus attributes to slice by
_ARROW = {"id": pa.string(), "int": pa.int32(), "double": pa.float64(), "timestamp": TIMESTAMP, "string": pa.string()}
EXPOSURE_SCHEMA = pa.schema([(c.name, _ARROW[c.kind]) for c in EXPOSURE_COLUMNS] + [("platform", pa.string())])
CLICK_SCHEMA = pa.schema([(c.name, _ARROW[c.kind]) for c in CLICK_COLUMNS])
#: with --ope: the logging policy's propensities too
OPE_EXPOSURE_SCHEMA = (
    EXPOSURE_SCHEMA.append(pa.field(PROPENSITY, pa.float64()))
    .append(pa.field(LIST_PROPENSITY, pa.float64()))
    .append(pa.field(PREFIX_PROPENSITY, pa.float64()))
)
TARGET_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("item_id", pa.string()),
        ("position", pa.int32()),
        ("probability", pa.float64()),
        ("q_hat", pa.float64()),
    ]
)
SIMULATED_SCHEMA = pa.schema(
    [("request_id", pa.string()), ("item_id", pa.string()), ("position", pa.int32()), ("score", pa.float64())]
)
ITEM_SCHEMA = pa.schema([(c.name, _ARROW[c.kind]) for c in ITEM_COLUMNS])
USER_SCHEMA = pa.schema([(USER, pa.string()), (FIRST_SEEN, pa.date32()), ("country", pa.string())])
ASSIGNMENT_SCHEMA = pa.schema(
    [("user_id", pa.string()), ("experiment", pa.string()), ("variant", pa.string()), ("layer", pa.string())]
)


def threads() -> int:
    """Worker threads for Arrow work (arrow and numpy release the GIL): the cores, at most 4."""
    return min(4, os.cpu_count() or 1)


def id_width(n_values: int, minimum: int) -> int:
    """Digits needed to zero-pad ids 0..n_values-1."""
    return max(minimum, len(str(max(n_values - 1, 0))))


def format_ids(prefix: str, numbers: np.ndarray, width: int, valid: np.ndarray | None = None) -> pa.Array:
    """Arrow string array of ``prefix + zero-padded number``; null where ``valid`` is False."""
    numbers = np.asarray(numbers, dtype=np.int64)
    n = len(numbers)
    kept = numbers if valid is None else numbers[valid]
    head = np.frombuffer(prefix.encode(), dtype=np.uint8)
    record = len(head) + width
    data = np.empty((len(kept), record), dtype=np.uint8)
    data[:, : len(head)] = head
    rest = kept.copy()
    for digit in range(record - 1, len(head) - 1, -1):  # one pass per digit
        data[:, digit] = 48 + rest % 10
        rest //= 10
    if len(kept) and (rest.any() or kept.min() < 0):
        raise ValueError(f"ids do not fit {width} digits")
    lengths = np.full(n, record, dtype=np.int32)
    null_bitmap, null_count = None, 0
    if valid is not None:
        lengths[~valid] = 0
        null_count = int(n - np.count_nonzero(valid))
        null_bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.StringArray.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(data.reshape(-1)), null_bitmap, null_count
    )


def labels(names: Sequence[str], codes: np.ndarray) -> pa.Array:
    """Plain string array ``names[codes]``."""
    return pa.array(names, type=pa.string()).take(pa.array(np.asarray(codes, dtype=np.int32)))


def timestamps(us: np.ndarray) -> pa.Array:
    """UTC timestamp array of microseconds since the epoch."""
    return pa.array(np.asarray(us, dtype=np.int64), type=pa.int64()).view(TIMESTAMP)


def pick(names: pa.Array, index: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """``names[index]`` as a plain string array, null where ``valid`` is False."""
    mask = None if valid is None else ~valid
    return names.take(pa.array(np.asarray(index, dtype=np.int32), type=pa.int32(), mask=mask))
