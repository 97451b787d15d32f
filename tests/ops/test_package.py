"""jobs/package.py: the --py-files zip holds what the job runs, and only that."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _package_script():
    spec = importlib.util.spec_from_file_location("recsys_package_script", REPO / "jobs" / "package.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _modules_the_job_imports() -> set[str]:
    """An independent oracle: import the entry point and what it imports lazily, in a fresh interpreter."""
    commands = (
        "recsys_spark.daily",
        "recsys_spark.experiments.window",
        "recsys_spark.offline.run",
        "recsys_spark.offline.compare",
        "recsys_spark.ope.run",
        "recsys_spark.report",
        "recsys_spark.report.build",
        "recsys_spark.gate",
        "recsys_spark.notebook",  # recsys_spark.evaluate / RankingEvaluator: __init__ imports it lazily
    )  # what each subcommand runs
    code = (
        f"import sys, recsys_spark.cli, recsys_spark.runtime.session, recsys_spark.runtime.log, {', '.join(commands)}; "
        "print('\\n'.join(m for m in sys.modules if m.startswith('recsys_spark')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_zip_lists_only_what_the_job_runs(tmp_path):
    names = zipfile.ZipFile(_package_script().build_zip(tmp_path / "recsys_spark.zip")).namelist()
    # `unzip -l` of the zip: the modules the job imports, as files, and the local log configuration
    expected = set()
    for module in _modules_the_job_imports():
        path = Path(*module.split("."))
        expected.add((path / "__init__.py" if (REPO / path).is_dir() else path.with_suffix(".py")).as_posix())
    assert set(names) == expected | {
        "recsys_spark/runtime/log4j2-local.properties",
        "recsys_spark/report/template.html.j2",
    }
    assert names == sorted(names)
    assert "recsys_spark/synthetic/generate.py" not in names  # users make sample data with it; the job never runs it
    assert not [n for n in names if not n.startswith("recsys_spark/") or "__pycache__" in n or n.endswith(".pyc")]


def test_the_zip_is_reproducible(tmp_path):
    package = _package_script()
    first = package.build_zip(tmp_path / "a.zip").read_bytes()
    assert package.build_zip(tmp_path / "b.zip").read_bytes() == first


def test_lazy_and_relative_imports_are_followed(tmp_path):
    package = _package_script()
    pkg = tmp_path / "recsys_spark"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("def main():\n    from recsys_spark.sub import a\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from . import b\n")
    (pkg / "sub" / "b.py").write_text("")
    (pkg / "tool.py").write_text("import recsys_spark.cli\n")  # imports the job, but the job never imports it
    assert [p.as_posix() for p in package.package_files(tmp_path)] == [
        "recsys_spark/__init__.py",
        "recsys_spark/cli.py",
        "recsys_spark/sub/__init__.py",
        "recsys_spark/sub/a.py",
        "recsys_spark/sub/b.py",
    ]
