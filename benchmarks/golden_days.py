"""The golden days: every table the tour writes, from one tree, in a form two trees can be compared in.

A change that should not change any number (a move, a split, a faster path) is checked by running the same
small tour on the tree before and after it and comparing every output table to 1e-12::

    python -m benchmarks.golden_days run --tree /path/to/old/checkout --out build/golden/before
    python -m benchmarks.golden_days run --tree . --out build/golden/after
    python -m benchmarks.golden_days compare build/golden/before build/golden/after

``run`` runs ``recsys-spark demo`` from the tree (its own sources first on ``PYTHONPATH``, this
interpreter): two days of 200 users with three slices, CUPED over one earlier day and 20 bootstrap
replicates, so the daily tables, the experiment window, the offline runs and their comparison, the
off-policy estimates, the simulated day and the gates' verdicts are all written; then it reads every Parquet
table and JSON file under the output root into one ``golden.json`` (rows sorted, volatile keys such as
seconds, run ids and the config's fingerprint left out, the tour's folder written as ``<tour>``).
``compare`` says, table by table, what differs: a missing table or row, or a value whose difference exceeds
``--tolerance`` (relative and absolute, default 1e-12).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

SETTINGS = ("experiments.cuped_days=1", "stats.bootstrap_replicates=20")
#: keys whose values change from run to run whatever the code: times, places, run ids, versions
VOLATILE = {
    "seconds",
    "timings",
    "started",
    "finished",
    "run_id",
    "host",
    "pid",
    "path",
    "paths",
    "read",
    "output_root",
    "input_root",
    "written_at",
    "version",
    "spark_version",
    "generated_at",
    "config",
    "config_hash",
    "config_fingerprint",
    "fingerprint",
}
#: what the tour's folder is replaced by in every string, so that two runs in two folders compare
ROOT = "<tour>"


def _run(tree: Path, out: Path, users: int, extra: tuple[str, ...] = ()) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "recsys_spark.cli", "demo", "--root", str(out / "tour")]
    cmd += ["--users", str(users), "--days", "2"]
    for setting in (*SETTINGS, *extra):
        cmd += ["--set", setting]
    subprocess.run(cmd, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)


def _clean(value: Any, tour: str) -> Any:
    """``value`` without its volatile keys, its non-finite floats as text, the tour's folder as :data:`ROOT`."""
    if isinstance(value, dict):
        return {k: _clean(v, tour) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [_clean(v, tour) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        return value.replace(tour, ROOT)
    return value


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _row_order(row: Any) -> tuple[str, str]:
    """Rows in the order of their values with floats to 9 digits, then exactly: two rows equal but in a float's
    last bits (a sum in another order) and in a key keep the key's order in both trees."""
    return json.dumps(_rounded(row), sort_keys=True, default=str), json.dumps(row, sort_keys=True, default=str)


def _tables(root: Path, tour: str) -> Iterator[tuple[str, Any]]:
    """(relative folder, its rows sorted) for every folder of Parquet files; (relative file, content) for JSON."""
    for folder in sorted({p.parent for p in root.rglob("*.parquet")}):
        rows = []
        for part in sorted(folder.glob("*.parquet")):
            rows += pq.read_table(part).to_pylist()
        rows = [_clean(r, tour) for r in rows]
        rows.sort(key=_row_order)
        yield folder.relative_to(root).as_posix(), rows
    for file in sorted(root.rglob("*.json")):
        if "_staging" in file.parts or "_locks" in file.parts:
            continue
        yield file.relative_to(root).as_posix(), _clean(json.loads(file.read_text()), tour)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    _run(Path(args.tree).resolve(), out, args.users, tuple(args.set))
    dump = dict(_tables(out / "tour" / "output", str(out / "tour")))
    (out / "golden.json").write_text(json.dumps(dump, sort_keys=True, default=str))
    print(f"{len(dump)} tables and files -> {out / 'golden.json'}")
    return 0


def _diff(a: Any, b: Any, where: str, tol: float, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'after' if k not in a else 'before'}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", tol, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} rows/items before, {len(b)} after")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{where}[{i}]", tol, out)
    elif isinstance(a, float) and isinstance(b, float | int) or isinstance(b, float) and isinstance(a, int):
        if abs(a - b) > tol * max(1.0, abs(a), abs(b)):
            out.append(f"{where}: {a!r} before, {b!r} after")
    elif a != b:
        out.append(f"{where}: {a!r} before, {b!r} after")


def compare(args: argparse.Namespace) -> int:
    before = json.loads((Path(args.before) / "golden.json").read_text())
    after = json.loads((Path(args.after) / "golden.json").read_text())
    found: list[str] = []
    for dump in (before, after):  # dumps written before rows were ordered by _row_order
        for rows in dump.values():
            if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
                rows.sort(key=_row_order)
    _diff(before, after, "", args.tolerance, found)
    for line in found[:200]:
        print(line)
    print(f"{len(before)} tables before, {len(after)} after: {len(found)} difference(s) beyond {args.tolerance:g}")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.golden_days", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run the tour from a tree and dump every table")
    p.add_argument("--tree", default=".", help="the checkout whose sources run (default: this one)")
    p.add_argument("--out", required=True, help="folder for the tour's data and golden.json")
    p.add_argument("--users", type=int, default=200)
    p.add_argument("--set", action="append", default=[], help="KEY=VALUE: a setting on top of the tour's (repeat)")
    p.set_defaults(func=run)
    c = sub.add_parser("compare", help="compare two dumps table by table")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--tolerance", type=float, default=1e-12)
    c.set_defaults(func=compare)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
