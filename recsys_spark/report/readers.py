"""How the report reads files under an output root: :class:`LocalReader` (pyarrow, no SparkSession) for a local
or mounted path, :class:`SparkReader` for any other scheme (``hdfs://``, ``s3a://``, ...).

Both answer the same :class:`Reader` questions with paths relative to the output root: a Parquet directory as
one frame, a text file, whether a path exists, its sub-directories (``_`` and ``.`` ones left out, as Spark
does) or all its entries.  A file that cannot be read raises :class:`UnreadableFile` naming it and why.
"""

from __future__ import annotations

import json
import os
from typing import Any, Protocol
from urllib.parse import urlparse

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from recsys_spark.errors import is_unreadable_input, root_cause


class UnreadableFile(Exception):
    """A file under the output root that cannot be read: ``path`` (relative to the root) and why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def _first_line(text: str, limit: int = 200) -> str:
    return (text.strip().splitlines() or [""])[0][:limit]


def parse_json(reader: Reader, path: str) -> Any | None:
    """The JSON file ``path`` (None when absent); :class:`UnreadableFile` when it is not valid JSON (a
    ``summary.json`` cut short by a full disk)."""
    text = reader.text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UnreadableFile(path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


class Reader(Protocol):
    """What the loaders ask of a file system, paths relative to the output root (:class:`LocalReader`,
    :class:`SparkReader`)."""

    def frame(self, path: str) -> pd.DataFrame | None: ...

    def text(self, path: str) -> str | None: ...

    def exists(self, path: str) -> bool: ...

    def dirs(self, path: str) -> list[str]: ...

    def names(self, path: str) -> list[str]: ...


def is_local(path: str) -> bool:
    """A path pyarrow can open itself: no URL scheme (or a one-letter Windows drive), or ``file:``."""
    scheme = urlparse(path).scheme
    return len(scheme) <= 1 or scheme == "file"


def local_path(path: str) -> str:
    """``path`` as a local file name (``file:`` taken off)."""
    return urlparse(path).path if path.startswith("file:") else path


def _hidden(name: str) -> bool:
    """Files and directories Spark and the job's staging leave aside (``_SUCCESS``, ``_staging``, ``.crc``)."""
    return name.startswith(("_", "."))


class LocalReader:
    """Reads partitions with pyarrow (files starting with ``_`` or ``.`` are skipped, as Spark does)."""

    def __init__(self, root: str) -> None:
        self.root = local_path(root).rstrip("/")

    def frame(self, path: str) -> pd.DataFrame | None:
        """The Parquet directory ``path`` (under the root) as one frame; None when absent or without data files."""
        full = f"{self.root}/{path}"
        if not os.path.isdir(full) or not any(not _hidden(name) for name in os.listdir(full)):
            return None
        try:
            return pq.read_table(full).to_pandas()
        except (pa.ArrowException, OSError) as exc:  # truncated, not Parquet, a corrupt page
            raise self._culprit(path, exc) from None

    def _culprit(self, path: str, exc: BaseException) -> UnreadableFile:
        """The first data file of ``path`` that cannot be read alone, with its own error (else the directory)."""
        full = f"{self.root}/{path}"
        for name in sorted(n for n in os.listdir(full) if not _hidden(n) and os.path.isfile(f"{full}/{n}")):
            try:
                pq.read_table(f"{full}/{name}")
            except (pa.ArrowException, OSError) as own:
                return UnreadableFile(f"{path}/{name}", _first_line(str(own)))
        return UnreadableFile(path, _first_line(str(exc)))

    def text(self, path: str) -> str | None:
        path = f"{self.root}/{path}"
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as handle:
            return handle.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(f"{self.root}/{path}")

    def dirs(self, path: str) -> list[str]:
        """Names of the sub-directories of ``path``, sorted (``_`` and ``.`` ones left out); [] when absent."""
        full = f"{self.root}/{path}"
        if not os.path.isdir(full):
            return []
        return sorted(n for n in os.listdir(full) if not _hidden(n) and os.path.isdir(f"{full}/{n}"))

    def names(self, path: str) -> list[str]:
        """Every entry of ``path`` (hidden ones too), sorted; [] when absent."""
        full = f"{self.root}/{path}"
        return sorted(os.listdir(full)) if os.path.isdir(full) else []


class SparkReader:
    """Reads partitions through a SparkSession (for HDFS, S3 and other Hadoop file systems)."""

    def __init__(self, spark: Any, root: str) -> None:
        self.spark = spark
        self.root = root.rstrip("/")

    def frame(self, path: str) -> pd.DataFrame | None:
        from recsys_spark.runtime import fs

        full = f"{self.root}/{path}"
        if not fs.exists(self.spark, full) or not any(not _hidden(n) for n, _ in fs.entries(self.spark, full)):
            return None
        try:
            return self.spark.read.parquet(full).toPandas()
        except Exception as exc:
            if is_unreadable_input(exc):  # the root cause names the file
                raise UnreadableFile(path, root_cause(exc, 300)) from None
            raise

    def text(self, path: str) -> str | None:
        from recsys_spark.runtime import fs

        full = f"{self.root}/{path}"
        return fs.read_text(self.spark, full) if fs.exists(self.spark, full) else None

    def exists(self, path: str) -> bool:
        from recsys_spark.runtime import fs

        return fs.exists(self.spark, f"{self.root}/{path}")

    def dirs(self, path: str) -> list[str]:
        from recsys_spark.runtime import fs

        full = f"{self.root}/{path}"
        if not fs.exists(self.spark, full):
            return []
        return sorted(n for n, is_dir in fs.entries(self.spark, full) if is_dir and not _hidden(n))

    def names(self, path: str) -> list[str]:
        """Every entry of ``path`` (hidden ones too), sorted; [] when absent."""
        from recsys_spark.runtime import fs

        full = f"{self.root}/{path}"
        return sorted(fs.children(self.spark, full)) if fs.exists(self.spark, full) else []
