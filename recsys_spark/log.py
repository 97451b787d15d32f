"""Structured driver log: one JSON line per stage with row counts and seconds."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LOGGER = logging.getLogger("recsys_spark")


def setup_logging(verbose: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s recsys_spark %(message)s"))
    LOGGER.handlers[:] = [handler]
    LOGGER.setLevel(logging.DEBUG if verbose else logging.INFO)
    LOGGER.propagate = False


def event(name: str, **fields: Any) -> None:
    LOGGER.info(json.dumps({"event": name, **fields}, default=str, sort_keys=False))


@contextmanager
def stage(name: str, timings: dict[str, float], **fields: Any) -> Iterator[dict[str, Any]]:
    """Time a stage; the caller may add counts to the yielded dict; logs one line at the end."""
    extra: dict[str, Any] = dict(fields)
    start = time.perf_counter()
    yield extra
    seconds = round(time.perf_counter() - start, 3)
    timings[name] = seconds
    event("stage", stage=name, seconds=seconds, **extra)
