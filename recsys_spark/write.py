"""Idempotent daily output: stage every table, then move them into place together.

Each run writes its tables under ``{output_root}/_staging/{run_id}/``.  Only
when all of them are written does :meth:`DailyOutput.commit` replace, table
by table, ``{output_root}/{table}/dt={date}`` (the old partition is moved aside
first and deleted at the end); the ``summary`` table goes last and ends with a
``_SUCCESS`` file, so a reader that sees ``summary/dt=D/_SUCCESS`` sees a
complete day.  A failure before the commit leaves the previous output
untouched; other dates are never touched.
"""

from __future__ import annotations

import uuid

from pyspark.sql import DataFrame, SparkSession

from recsys_spark import fs

SUMMARY = "summary"


class DailyOutput:
    def __init__(self, spark: SparkSession, output_root: str, date: str) -> None:
        self.spark = spark
        self.root = output_root.rstrip("/")
        self.date = date
        self.run_dir = f"{self.root}/_staging/{date}-{uuid.uuid4().hex[:8]}"
        self.tables: list[str] = []

    def final_path(self, table: str) -> str:
        return f"{self.root}/{table}/dt={self.date}"

    def staged_path(self, table: str) -> str:
        return f"{self.run_dir}/{table}/dt={self.date}"

    def stage(self, table: str, df: DataFrame) -> str:
        """Write ``df`` as Parquet into the staging area; return the staged path."""
        path = self.staged_path(table)
        df.write.mode("overwrite").parquet(path)
        self.tables.append(table)
        return path

    def stage_text(self, table: str, filename: str, text: str) -> str:
        path = self.staged_path(table)
        fs.write_text(self.spark, f"{path}/{filename}", text)
        self.tables.append(table)
        return path

    def commit(self) -> None:
        """Replace this date's partition of every staged table; summary last, then _SUCCESS."""
        trash = f"{self.run_dir}/_replaced"
        ordered = [t for t in self.tables if t != SUMMARY] + [t for t in self.tables if t == SUMMARY]
        # the summary's marker goes first, so no reader trusts a day while it changes
        fs.delete(self.spark, f"{self.final_path(SUMMARY)}/_SUCCESS")
        for table in ordered:
            final = self.final_path(table)
            if fs.exists(self.spark, final):
                fs.rename(self.spark, final, f"{trash}/{table}")
            fs.rename(self.spark, self.staged_path(table), final)
        if SUMMARY in self.tables:
            fs.write_text(self.spark, f"{self.final_path(SUMMARY)}/_SUCCESS", "")
        self.abort()

    def abort(self) -> None:
        """Forget everything staged by this run."""
        fs.delete(self.spark, self.run_dir)
        staging = f"{self.root}/_staging"
        if fs.exists(self.spark, staging) and not fs.children(self.spark, staging):
            fs.delete(self.spark, staging)
