"""Build what a cluster run ships with the job.

    python jobs/package.py zip   # dist/recsys_spark.zip: the package, for --py-files   (make package)
    python jobs/package.py env   # dist/env.tar.gz: venv-pack archive of pandas/pyarrow/numpy/scipy/jinja2
                                 # for clusters whose image lacks them               (make package-env)

The zip holds ``recsys_spark/`` at its root (so ``import recsys_spark`` works
from it), and of it only what the job runs: the modules the entry point
(``recsys_spark.cli``) imports, directly or not, found by reading their import
statements, plus the package's data files (the local log4j2 configuration).
The sample-data generator and anything else the job never imports stay out.  It is a zip, not a wheel: ``--py-files``
puts only ``.zip``, ``.egg`` and ``.jar`` files on the executors' path.  Entries
are sorted and dated 1980-01-01, so the same sources give the same bytes.

pandas, pyarrow, numpy and scipy have native code and cannot travel in ``--py-files``:
they come from the cluster image, or from the executor venv built here (pinned
to the versions of the interpreter running this script, i.e. the driver's) and
packed with venv-pack.  Only the standard library is used here, except
``venv_pack`` for ``env``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fcntl
import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "recsys_spark"
ZIP_PATH = REPO / "dist" / f"{PACKAGE}.zip"
EXECUTOR_VENV = REPO / "build" / "exec-venv"
ENV_ARCHIVE = REPO / "dist" / "env.tar.gz"
#: what executors need besides Spark's own pyspark.zip (the project itself travels in the zip)
# pandas, pyarrow, numpy run on the executors; scipy (the statistics) and jinja2 (the report) on the driver, which
# in cluster mode runs from the same archive
EXECUTOR_PACKAGES = ("pandas", "pyarrow", "numpy", "scipy", "jinja2")
#: the module spark-submit's script (jobs/evaluate_daily.py) imports: the job is what it reaches
ENTRY_MODULE = f"{PACKAGE}.cli"
#: modules the zip carries without following their imports: the demo command imports the sample-data
#: generators when it runs, on a laptop; a cluster run never does, so they stay out of the zip
NOT_FOLLOWED = {f"{PACKAGE}.cli.demo"}
#: data files the job reads from the package (session.py's local log configuration)
DATA_SUFFIXES = {".properties", ".j2"}  # log4j2 configuration, the report's page template
_MARKER = ".recsys-spark-requirements"


def _module_path(root: Path, module: str) -> Path | None:
    """``recsys_spark/x/y.py`` or ``recsys_spark/x/y/__init__.py`` relative to ``root``, if it exists."""
    base = Path(*module.split("."))
    for rel in (base.with_suffix(".py"), base / "__init__.py"):
        if (root / rel).is_file():
            return rel
    return None


def _imported_modules(source: str, module: str, is_package: bool) -> set[str]:
    """The package's modules a source file imports, at any depth of its code (lazy imports included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importing module's package
                parent = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(parent + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]  # a name may be a submodule
        else:
            continue
        out.update(name for name in names if name == PACKAGE or name.startswith(PACKAGE + "."))
    return out


def package_files(root: Path = REPO) -> list[Path]:
    """Files the job runs, relative to ``root``, sorted: every module reached from :data:`ENTRY_MODULE`
    (with the ``__init__.py`` of each package on the way) and the package's data files."""
    seen: set[Path] = set()
    todo = [ENTRY_MODULE]
    while todo:
        module = todo.pop()
        parts = module.split(".")
        # importing a.b.c runs a/__init__.py and a/b/__init__.py first
        for i in range(1, len(parts) + 1):
            rel = _module_path(root, ".".join(parts[:i]))
            if rel is None or rel in seen:
                continue
            seen.add(rel)
            name = ".".join(parts[:i])
            if name not in NOT_FOLLOWED:
                todo.extend(_imported_modules((root / rel).read_text(), name, rel.name == "__init__.py"))
    data = {p.relative_to(root) for p in (root / PACKAGE).rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES}
    return sorted(seen | data)


def build_zip(dest: Path = ZIP_PATH, root: Path = REPO) -> Path:
    """Write the ``--py-files`` zip (atomically: a reader never sees half a zip); return its path."""
    files = package_files(root)
    if Path(PACKAGE, "__init__.py") not in files:
        raise SystemExit(f"{root / PACKAGE / '__init__.py'} not found: run from a checkout of the repo")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for rel in files:
                info = zipfile.ZipInfo(rel.as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, (root / rel).read_bytes())
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def executor_requirements() -> list[str]:
    """``name==version`` of :data:`EXECUTOR_PACKAGES` as installed beside this interpreter."""
    return [f"{name}=={importlib.metadata.version(name)}" for name in EXECUTOR_PACKAGES]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # two test runs build the venv once, not twice at once
        yield


def build_executor_venv(dest: Path = EXECUTOR_VENV, requirements: Sequence[str] | None = None) -> Path:
    """A venv with only the executor packages (not this project); return its python.

    Made once and reused while the pinned requirements are unchanged (a marker
    file, written last, records them; an interrupted build is redone).
    """
    requirements = list(requirements or executor_requirements())
    python = dest / "bin" / "python"
    marker = dest / _MARKER
    wanted = "\n".join(requirements) + "\n"
    with _locked(dest.with_name(dest.name + ".lock")):
        if python.exists() and marker.exists() and marker.read_text() == wanted:
            return python
        shutil.rmtree(dest, ignore_errors=True)
        # sys.executable may itself be a venv's python: venv uses the base interpreter
        subprocess.run([sys.executable, "-m", "venv", str(dest)], check=True)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                *requirements,
            ],
            check=True,
        )
        marker.write_text(wanted)
    return python


def pack_env(venv: Path = EXECUTOR_VENV, dest: Path = ENV_ARCHIVE, python_prefix: str | None = None) -> Path:
    """venv-pack ``venv`` into ``dest`` (for ``--archives dest#environment``); return ``dest``.

    venv-pack does not pack the interpreter: ``bin/python`` stays a link to the
    base interpreter the venv was made from, so the nodes need Python 3.11 at
    that path, or at ``python_prefix`` (e.g. ``/usr``) when given.
    """
    try:
        import venv_pack
    except ImportError:
        raise SystemExit("venv-pack is not importable: run `make package-env`, which installs it") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    venv_pack.pack(prefix=str(venv), output=str(dest), python_prefix=python_prefix, force=True)
    dest.chmod(0o644)  # venv-pack leaves its temporary file's 0600
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python jobs/package.py", description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("zip", "env"), help="zip: dist/recsys_spark.zip; env: dist/env.tar.gz")
    parser.add_argument(
        "--python-prefix",
        help="env: where Python 3.11 lives on the cluster nodes (default: this interpreter's base prefix)",
    )
    args = parser.parse_args(argv)
    if args.what == "zip":
        path = build_zip()
        print(f"wrote {path.relative_to(REPO)} ({len(package_files())} files, {path.stat().st_size} bytes)")
    else:
        path = pack_env(build_executor_venv().parent.parent, python_prefix=args.python_prefix)
        prefix = args.python_prefix or sys.base_prefix
        print(
            f"wrote {path.relative_to(REPO)} ({path.stat().st_size / 1e6:.0f} MB); "
            f"its python links to {prefix}/bin/python3.11, which every node needs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
