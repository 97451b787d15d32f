"""The Spark-3.5 shims give what Spark 4's APIs give (runs on both: make test-compat runs it on 3.5)."""

from __future__ import annotations

import math

import pytest
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark.runtime import compat

pytestmark = pytest.mark.spark


def test_try_cast_to_int_is_null_outside_the_range(spark, monkeypatch):
    rows = [
        (1.0, 1),
        (2.5, 2),
        (3e9, 3_000_000_000),
        (-3e9, -3_000_000_000),
        (math.nan, 2**31 - 1),
        (math.inf, -(2**31)),
        (None, None),
    ]
    df = spark.createDataFrame(rows, "d double, n long")
    expected_d = [1, 2, None, None, None, None, None]  # 2.5 truncates as cast does; out of range -> null
    expected_n = [1, 2, None, None, 2**31 - 1, -(2**31), None]

    def run():
        out = df.select(
            compat.try_cast(F.col("d"), T.IntegerType()).alias("d"),
            compat.try_cast(F.col("n"), T.IntegerType()).alias("n"),
        ).collect()
        return [r.d for r in out], [r.n for r in out]

    assert run() == (expected_d, expected_n)
    if hasattr(Column, "try_cast"):  # Spark 4: the 3.5 path agrees with the real try_cast
        monkeypatch.delattr(Column, "try_cast")
        assert run() == (expected_d, expected_n)


def test_try_cast_to_other_types_casts(spark):
    df = spark.createDataFrame([("1.5",), ("x",)], "s string")
    assert [r.v for r in df.select(compat.try_cast(F.col("s"), T.DoubleType()).alias("v")).collect()] == [1.5, None]
