"""make lint keeps the house: the import layers (import-linter) and the size limits (.ci/limits.py) fail on a
planted breach, so that neither check is one that cannot fail (docs/design.md, "The layers")."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _limits():
    spec = importlib.util.spec_from_file_location("limits", REPO / ".ci" / "limits.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "recsys_spark", tmp_path / "recsys_spark", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is a test dependency (make setup)")
def test_an_import_from_a_lower_middle_package_into_a_higher_one_fails_lint(tmp_path):
    root = _copy(tmp_path)
    assert _lint_imports(root).returncode == 0  # the tree as it is keeps the contract
    # io/ (below the per-user pass, the steps and the wings) importing the daily wing: an arrow upwards
    read = root / "recsys_spark" / "io" / "read.py"
    read.write_text(read.read_text() + "\n\ndef _planted() -> None:\n    from recsys_spark.daily import run  # noqa\n")
    found = _lint_imports(root)
    assert found.returncode != 0
    assert "recsys_spark.io.read -> recsys_spark.daily.run" in found.stdout, found.stdout[-2000:]


def test_the_size_limits_name_a_file_and_a_function_over_them(tmp_path):
    limits = _limits()
    library = tmp_path / "recsys_spark"
    library.mkdir()
    (library / "small.py").write_text("def f():\n    return 1\n")
    assert limits.breaches(library) == []
    body = "".join(f"    x{i} = {i}\n" for i in range(limits.MAX_FUNCTION_LINES))  # def + 80 lines: 81
    (library / "long_function.py").write_text(f"def too_long():\n{body}")
    (library / "long_file.py").write_text("x = 1\n" * (limits.MAX_FILE_LINES + 1))
    assert limits.breaches(library) == [
        "recsys_spark/long_file.py: 601 lines (at most 600)",
        "recsys_spark/long_function.py:1: too_long is 81 lines (at most 80)",
    ]


def test_a_function_of_exactly_the_limit_passes(tmp_path):
    limits = _limits()
    library = tmp_path / "recsys_spark"
    library.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(limits.MAX_FUNCTION_LINES - 1))  # def + 79 lines: 80
    (library / "edge.py").write_text(f"@staticmethod\ndef edge():\n{body}")  # the decorator counts: 81
    assert limits.breaches(library) == ["recsys_spark/edge.py:2: edge is 81 lines (at most 80)"]
    (library / "edge.py").write_text(f"def edge():\n{body}")
    assert limits.breaches(library) == []
