"""Helper of tests/io/test_catalog.py, run in its own process: a Spark session with Hive support and an
embedded Derby metastore under ``<root>/metastore_db`` (the test suite's session has no Hive support,
and Derby admits one JVM at a time, so every step is a separate process).

    python tests/helpers/catalog_hive.py setup ROOT   # input tables logs.rec_exposures/logs.rec_clicks from ROOT/in
    python tests/helpers/catalog_hive.py query ROOT   # facts about eval_db.* as one JSON object on stdout
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def hive_settings(root: Path) -> dict[str, str]:
    """What a job needs to use that metastore (also passed to the CLI with --set spark.KEY=VALUE)."""
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
    }


def session(root: Path):
    from recsys_spark.runtime.session import build_session

    settings = {**hive_settings(root), "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}
    return build_session("recsys-catalog-test", "local[1]", settings, "ERROR")


def setup(root: Path) -> None:
    """Input tables partitioned by dt (a DATE for exposures, a 'yyyyMMdd' string ds for clicks), with
    the user column called uid, from the generated Parquet days under ROOT/in."""
    spark = session(root)
    spark.sql("CREATE DATABASE IF NOT EXISTS logs")
    from pyspark.sql import functions as F

    exposures = (
        spark.read.parquet(str(root / "in" / "exposures"))
        .withColumnRenamed("user_id", "uid")
        .withColumn("dt", F.col("dt").cast("date"))
    )
    exposures.write.partitionBy("dt").format("parquet").saveAsTable("logs.rec_exposures")

    clicks = (
        spark.read.parquet(str(root / "in" / "clicks"))
        .withColumnRenamed("user_id", "uid")
        .withColumn("ds", F.date_format(F.col("dt").cast("date"), "yyyyMMdd"))
        .drop("dt")
    )
    clicks.write.partitionBy("ds").format("parquet").saveAsTable("logs.rec_clicks")
    print(
        json.dumps(
            {
                "exposure_partitions": [r[0] for r in spark.sql("SHOW PARTITIONS logs.rec_exposures").collect()],
                "click_partitions": [r[0] for r in spark.sql("SHOW PARTITIONS logs.rec_clicks").collect()],
            }
        )
    )
    spark.stop()


def query(root: Path) -> None:
    spark = session(root)
    out: dict = {"tables": sorted(r.tableName for r in spark.sql("SHOW TABLES IN eval_db").collect())}
    for table in out["tables"]:
        rows = spark.sql(
            f"SELECT CAST(dt AS STRING) AS dt, run_id, count(*) AS n FROM eval_db.{table} "
            "GROUP BY dt, run_id ORDER BY dt, run_id"
        ).collect()
        out[table] = [r.asDict() for r in rows]
        out[f"{table}_partitions"] = [r[0] for r in spark.sql(f"SHOW PARTITIONS eval_db.{table}").collect()]
        out[f"{table}_columns"] = {f.name: f.dataType.simpleString() for f in spark.table(f"eval_db.{table}").schema}
    out["slices"] = [
        r.asDict()
        for r in spark.sql(
            "SELECT DISTINCT slice, slice_name, slice_value FROM eval_db.metrics ORDER BY slice"
        ).collect()
    ]
    out["summary_rows"] = [
        r.asDict()
        for r in spark.sql(
            "SELECT CAST(dt AS STRING) AS dt, status, exposure_rows, headline['auc_global'] AS auc, config_hash, "
            "recsys_spark_version FROM eval_db.summary ORDER BY dt"
        ).collect()
    ]
    from recsys_spark.io import catalog

    frame = catalog.table_frame(spark, "table:logs.rec_exposures[dt=2026-11-20]")
    out["plan"] = frame._jdf.queryExecution().executedPlan().toString()  # the scan's PartitionFilters
    spark.stop()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    mode, root = sys.argv[1], Path(sys.argv[2])
    {"setup": setup, "query": query}[mode](root)
