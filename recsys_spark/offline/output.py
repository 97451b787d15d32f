"""Output of one offline run: ``{output_root}/offline/run=NAME/{table}`` and ``summary.json``.

The daily job's :class:`write.DailyOutput` does the staging and the move into
place (every table staged under ``{output_root}/offline/_staging/...``, then
each moved into ``run=NAME``, the old one set aside and deleted); here only
the paths differ, and the summary is a JSON file written after the tables,
followed by ``run=NAME/_SUCCESS``.  The marker is removed before anything
moves, so a reader that sees ``_SUCCESS`` sees a complete run.  Tables of an
earlier run of the same name that this run did not produce are removed.
"""

from __future__ import annotations

import json
import uuid

from pyspark.sql import SparkSession

from recsys_spark import fs
from recsys_spark.write import DailyOutput

TABLES = ("metrics", "user_metrics", "lorenz", "calibration", "comparison")


class RunOutput(DailyOutput):
    def __init__(self, spark: SparkSession, output_root: str, run: str, prefix: str = "run=") -> None:
        super().__init__(spark, f"{output_root.rstrip('/')}/offline", run, owned=TABLES)
        self.dir_name = f"{prefix}{run}"
        self.run_dir = f"{self.root}/_staging/{self.dir_name.replace('/', '_')}-{uuid.uuid4().hex[:8]}"

    @property
    def final_dir(self) -> str:
        return f"{self.root}/{self.dir_name}"

    def final_path(self, table: str) -> str:
        return f"{self.final_dir}/{table}"

    def staged_in(self, run_dir: str, table: str) -> str:
        return f"{run_dir}/{table}"

    def commit_run(self, summary: dict) -> None:
        """Move every staged table into place, drop stale ones, then write summary.json and _SUCCESS."""
        fs.delete(self.spark, f"{self.final_dir}/_SUCCESS")
        self.commit()  # stale tables of an earlier run of the name are removed with it
        fs.write_text(self.spark, f"{self.final_dir}/summary.json", json.dumps(summary, indent=2, sort_keys=True))
        fs.write_text(self.spark, f"{self.final_dir}/_SUCCESS", "")
