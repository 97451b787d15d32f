"""fs.py: the Hadoop file-system calls the outputs are made of (on a local path, through Hadoop's API)."""

from __future__ import annotations

import os
import time

import pytest

from recsys_spark.runtime import fs

pytestmark = pytest.mark.spark


def test_rename_refuses_to_nest_into_an_existing_directory(spark, tmp_path):
    (tmp_path / "staged" / "dt=D").mkdir(parents=True)
    (tmp_path / "final" / "dt=D").mkdir(parents=True)
    with pytest.raises(OSError, match="refusing to move"):
        fs.rename(spark, str(tmp_path / "staged" / "dt=D"), str(tmp_path / "final" / "dt=D"))
    assert not (tmp_path / "final" / "dt=D" / "dt=D").exists()


def test_entries_list_names_and_kinds_sorted(spark, tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "a.parquet").write_text("x")
    (tmp_path / "_SUCCESS").write_text("")
    assert fs.entries(spark, str(tmp_path)) == [("_SUCCESS", False), ("a.parquet", False), ("b", True)]
    assert fs.children(spark, str(tmp_path)) == ["_SUCCESS", "a.parquet", "b"]


def test_delete_if_empty_never_removes_a_directory_that_holds_something(spark, tmp_path):
    full, empty = tmp_path / "full", tmp_path / "empty"
    (full / "run").mkdir(parents=True)
    empty.mkdir()
    assert fs.delete_if_empty(spark, str(full)) is False and (full / "run").is_dir()
    assert fs.delete_if_empty(spark, str(empty)) is True and not empty.exists()
    assert fs.delete_if_empty(spark, str(tmp_path / "absent")) is False


def test_create_new_is_atomic_and_refuses_an_existing_file(spark, tmp_path):
    path = str(tmp_path / "locks" / "dt=D.lock")
    assert fs.create_new(spark, path, "first") is True
    assert fs.create_new(spark, path, "second") is False
    assert fs.read_small(spark, path) == "first"


def test_touch_moves_the_modification_time_to_now(spark, tmp_path):
    path = tmp_path / "lock"
    path.write_text("x")
    old = time.time() - 3600
    os.utime(path, (old, old))
    assert fs.age_seconds(spark, str(path)) > 3000
    fs.touch(spark, str(path))
    assert fs.age_seconds(spark, str(path)) < 60
