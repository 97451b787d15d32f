"""The kernels (and schema.py, which they read) know nothing of Spark: importing them never imports pyspark."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import recsys_spark.kernels


def test_no_kernel_imports_pyspark():
    modules = sorted(f"recsys_spark.kernels.{m.name}" for m in pkgutil.iter_modules(recsys_spark.kernels.__path__))
    expected = {"users", "ranking", "auc", "health", "business", "moments"}
    assert {f"recsys_spark.kernels.{name}" for name in expected} <= set(modules)
    code = f"import sys, recsys_spark.schema, {', '.join(modules)}; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_check_would_see_pyspark():
    # the probe itself: a module that imports pyspark is caught
    code = "import sys, recsys_spark.io.read; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 1
