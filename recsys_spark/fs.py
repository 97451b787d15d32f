"""File-system operations through Hadoop's FileSystem API (local disk, HDFS, S3...)."""

from __future__ import annotations

from pyspark.sql import SparkSession


def _path(spark: SparkSession, path: str):
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hpath


def exists(spark: SparkSession, path: str) -> bool:
    if path.startswith("table:"):  # [catalog hook, issue 17] a table (partition) instead of a path
        from recsys_spark import catalog
        return catalog.exists(spark, path)
    fs, hpath = _path(spark, path)
    return bool(fs.exists(hpath))


def delete(spark: SparkSession, path: str) -> None:
    fs, hpath = _path(spark, path)
    if fs.exists(hpath):
        fs.delete(hpath, True)


def rename(spark: SparkSession, source: str, target: str) -> None:
    """Move ``source`` to ``target`` (its parent is created); raise if the move fails."""
    fs, src = _path(spark, source)
    _, dst = _path(spark, target)
    fs.mkdirs(dst.getParent())
    if not fs.rename(src, dst):
        raise OSError(f"could not move {source} to {target}")


def children(spark: SparkSession, path: str) -> list[str]:
    """Names of the entries of a directory."""
    fs, hpath = _path(spark, path)
    return [status.getPath().getName() for status in fs.listStatus(hpath)]


def write_text(spark: SparkSession, path: str, text: str) -> None:
    fs, hpath = _path(spark, path)
    stream = fs.create(hpath, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def read_text(spark: SparkSession, path: str) -> str:
    return "\n".join(r.value for r in spark.read.text(path, wholetext=True).collect())
