"""File-system operations through Hadoop's FileSystem API (local disk, HDFS, S3...) on paths (not tables).

That API is reached through py4j, which a Spark Connect session does not have: there,
:func:`exists` asks the data source instead (:func:`recsys_spark.runtime.engine.path_exists`) and every
other call fails with one line saying that it needs a classic session.
"""

from __future__ import annotations

import io
from typing import BinaryIO

from pyspark.sql import SparkSession

from recsys_spark.runtime import engine


def _path(spark: SparkSession, path: str):
    if engine.is_connect(spark):
        raise engine.refuse(f"a Spark Connect session, for a file-system call on {path}")
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "the SparkContext is stopped"
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hpath


def exists(spark: SparkSession, path: str) -> bool:
    """Whether the path exists (a file or a directory); an input that may be a ``table:`` is asked of
    :func:`recsys_spark.io.read.exists`."""
    if engine.is_connect(spark):
        return engine.path_exists(spark, path)
    fs, hpath = _path(spark, path)
    return bool(fs.exists(hpath))


def is_directory(spark: SparkSession, path: str) -> bool:
    """Whether the existing path is a directory (not a file)."""
    fs, hpath = _path(spark, path)
    return bool(fs.getFileStatus(hpath).isDirectory())


def delete(spark: SparkSession, path: str) -> None:
    fs, hpath = _path(spark, path)
    if fs.exists(hpath):
        fs.delete(hpath, True)


def rename(spark: SparkSession, source: str, target: str) -> None:
    """Move ``source`` to ``target`` (its parent is created); raise if the move fails.

    Refuses an existing ``target``: Hadoop's rename of a directory onto an existing directory
    moves it *inside* (``metrics/dt=D/dt=D/``), which breaks every reader of the table.
    """
    fs, src = _path(spark, source)
    _, dst = _path(spark, target)
    if fs.exists(dst):
        raise OSError(f"refusing to move {source} into the existing {target}")
    fs.mkdirs(dst.getParent())
    if not fs.rename(src, dst):
        raise OSError(f"could not move {source} to {target}")


def mkdirs(spark: SparkSession, path: str) -> None:
    fs, hpath = _path(spark, path)
    if not fs.mkdirs(hpath):
        raise OSError(f"Mkdirs failed to create {path}")


def age_seconds(spark: SparkSession, path: str) -> float:
    """Seconds since ``path`` was last modified."""
    import time

    fs, hpath = _path(spark, path)
    return time.time() - fs.getFileStatus(hpath).getModificationTime() / 1000.0


def touch(spark: SparkSession, path: str) -> None:
    """Set ``path``'s modification time to now."""
    import os
    import time

    local = local_path(path)
    if local is not None:
        os.utime(local)
        return
    fs, hpath = _path(spark, path)
    fs.setTimes(hpath, int(time.time() * 1000), -1)


def local_path(path: str) -> str | None:
    """The local file-system path of ``path`` (no scheme, or ``file:``), else None."""
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:"):
        return path[len("file:") :]
    return None if "://" in path else path


def create_new(spark: SparkSession, path: str, text: str) -> bool:
    """Create ``path`` holding ``text`` only if it does not exist, atomically; False when it exists.

    On a local disk with ``O_CREAT | O_EXCL`` (Hadoop's local ``create(overwrite=false)`` checks then
    creates, which two processes can both pass); elsewhere with ``create(overwrite=false)``, which is
    atomic on HDFS (on an object store it is not: see docs/operations.md ("Hostile inputs")).
    """
    import os

    local = local_path(path)
    if local is not None:
        os.makedirs(os.path.dirname(local), exist_ok=True)
        try:
            fd = os.open(local, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        return True
    fs, hpath = _path(spark, path)
    try:
        stream = fs.create(hpath, False)
    except Exception as exc:
        if "FileAlreadyExists" in str(exc) or fs.exists(hpath):
            return False
        raise
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()
    return True


def read_small(spark: SparkSession, path: str) -> str:
    """A small text file's content, through the file system (no Spark job)."""
    local = local_path(path)
    if local is not None:
        with open(local, encoding="utf-8") as handle:
            return handle.read()
    fs, hpath = _path(spark, path)
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "the SparkContext is stopped"
    stream = fs.open(hpath)
    try:
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def open_input(spark: SparkSession, path: str) -> BinaryIO:
    """``path`` opened for reading bytes, with seek (a Parquet footer is read from the end): a plain
    file on a local disk, else through Hadoop's FileSystem (:func:`open_hadoop`)."""
    local = local_path(path)
    if local is not None:
        return open(local, "rb")
    return open_hadoop(spark, path)


def open_hadoop(spark: SparkSession, path: str) -> BinaryIO:
    """``path`` opened through Hadoop's FileSystem (HDFS, S3A, ...) as a Python binary file that
    pyarrow can read: each ``read`` is one call to the JVM, so read a few large ranges, not bytes."""
    fs, hpath = _path(spark, path)
    size = int(fs.getFileStatus(hpath).getLen())
    return io.BufferedReader(_HadoopInput(spark, fs.open(hpath), size), buffer_size=1 << 16)


class _HadoopInput(io.RawIOBase):
    def __init__(self, spark: SparkSession, stream, size: int) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None, "the SparkContext is stopped"
        self._io = jvm.org.apache.commons.io.IOUtils
        self._stream, self._size, self._pos = stream, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, min(self._size, base + offset))
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self._size - self._pos)
        if count <= 0:
            return 0
        self._stream.seek(self._pos)
        data = bytes(self._io.toByteArray(self._stream, count))
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


def children(spark: SparkSession, path: str) -> list[str]:
    """Names of the entries of a directory."""
    return [name for name, _ in entries(spark, path)]


def entries(spark: SparkSession, path: str) -> list[tuple[str, bool]]:
    """(name, is a directory) of the entries of a directory, by name."""
    fs, hpath = _path(spark, path)
    return sorted((str(s.getPath().getName()), bool(s.isDirectory())) for s in fs.listStatus(hpath))


def delete_if_empty(spark: SparkSession, path: str) -> bool:
    """Remove the directory ``path`` only if it is empty, in one file-system call (a non-recursive
    delete, which the file system refuses on a non-empty directory: no other run's entry created
    between a listing and the delete can be lost).  True when it was removed."""
    fs, hpath = _path(spark, path)
    try:
        return bool(fs.delete(hpath, False))
    except Exception:  # noqa: BLE001 - not empty (PathIsNotEmptyDirectoryException, "is not empty")
        return False


def write_text(spark: SparkSession, path: str, text: str) -> None:
    write_bytes(spark, path, text.encode("utf-8"))


def write_bytes(spark: SparkSession, path: str, data: bytes) -> None:
    """Write ``data`` to the file ``path`` (replaced if it exists; parent directories created)."""
    fs, hpath = _path(spark, path)
    stream = fs.create(hpath, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()


def read_text(spark: SparkSession, path: str) -> str:
    return "\n".join(r.value for r in spark.read.text(path, wholetext=True).collect())
