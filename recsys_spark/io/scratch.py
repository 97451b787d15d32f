"""The output on Spark Connect: plain overwrites (Connect reaches no file-system API for a lock or a rename)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from recsys_spark.io.staged import DailyOutput
from recsys_spark.tables import DAILY


class ScratchOutput:
    """The day's output on Spark Connect: each table written straight to ``{root}/{table}/dt={date}`` by a
    plain Spark overwrite (``summary`` as a text file ``part-*.txt`` holding the JSON).

    No lock, no staging, no atomic commit and no ``_SUCCESS`` (those need a file system's create-if-absent
    and rename, which Connect does not reach): a reader may see a table half replaced while a run writes
    it, and a failed run leaves what it wrote.  For runs from Python on Connect (docs/catalog.md).
    """

    def __init__(
        self,
        spark: SparkSession,
        output_root: str,
        date: str,
        partition: str | None = None,
        owned: Sequence[str] = DAILY.tables,
    ) -> None:
        self.spark = spark
        self._owned = tuple(owned)
        self.root = output_root.rstrip("/")
        self.date = date
        self.partition = partition or f"dt={date}"
        self.tables: list[str] = []
        self.swept: list[str] = []
        self.recovered: list[str] = []

    def refuse_inputs_inside(self, inputs: Iterable[str]) -> None:
        DailyOutput.refuse_inputs_inside(self, inputs)  # type: ignore[arg-type]  # reads root only

    @property
    def owned(self) -> tuple[str, ...]:
        return self._owned

    def acquire(self) -> None:
        """Nothing to take: Connect has no atomic create."""

    def staged_path(self, table: str) -> str:
        return f"{self.root}/{table}/{self.partition}"

    def stage(self, table: str, df: DataFrame) -> str:
        path = self.staged_path(table)
        df.write.mode("overwrite").parquet(path)
        self.tables.append(table)
        return path

    def stage_rows(self, table: str, rows: Iterable[Sequence[Any]], ddl: str) -> str:
        return self.stage(table, self.spark.createDataFrame([tuple(r) for r in rows], ddl).coalesce(1))

    def stage_text(self, table: str, filename: str, text: str) -> str:
        path = self.staged_path(table)
        self.spark.createDataFrame([(text,)], "value string").coalesce(1).write.mode("overwrite").text(path)
        self.tables.append(table)
        return path

    def commit(self) -> None:
        """Nothing to move: every table is in place once staged."""

    def abort(self) -> None:
        """Nothing to undo (see the class docstring)."""
