"""The house's size limits, checked by ``make lint`` (docs/design.md, "Limits").

    python .ci/limits.py [ROOT]

Over the library (``recsys_spark/`` under ROOT, default the checkout): no file over :data:`MAX_FILE_LINES`
lines, no function over :data:`MAX_FUNCTION_LINES` lines (from its ``def`` to its last line, decorators and
docstring included), and, where the ``duplicates`` command is on the PATH (the developers' machines), at most
:data:`MAX_DUPLICATE_PAIRS` pairs of places sharing six or more lines.  Prints one line per breach and exits 1
when there is one, else prints a summary and exits 0.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_DUPLICATE_PAIRS = 12


def breaches(library: Path) -> list[str]:
    """One line per file or function over its limit, ``path:line: what``, relative to ``library``'s parent."""
    out = []
    for path in sorted(library.rglob("*.py")):
        rel = path.relative_to(library.parent)
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_FILE_LINES:
            out.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - first + 1
                if length > MAX_FUNCTION_LINES:
                    out.append(f"{rel}:{node.lineno}: {node.name} is {length} lines (at most {MAX_FUNCTION_LINES})")
    return out


def duplicate_pairs(library: Path) -> tuple[int, int] | None:
    """``(pairs, boilerplate)``: the pairs the ``duplicates`` command finds in ``library`` and how many of them it
    marks boilerplate (same-shape argument declarations, field lists: they may stay, docs/design.md "Limits"),
    or None without the command."""
    tool = shutil.which("duplicates")
    if tool is None:
        return None
    found = subprocess.run(
        [tool, "--repo", str(library), "--seconds", "120", "--most", "200"], capture_output=True, text=True
    )
    lines = found.stdout.splitlines()
    first = lines[0] if lines else ""
    if first.startswith("no duplicates"):
        return 0, 0
    match = re.match(r"(\d+) pairs? of places", first)
    if match is None:
        raise SystemExit(f"limits: cannot read the duplicates command's answer: {first!r}")
    rows = [line for line in lines[1:] if re.match(r"D\d+ ", line)]
    boilerplate = sum(1 for line in rows if re.search(r"\bboilerplate\b", line))
    return int(match.group(1)), boilerplate


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    library = root / "recsys_spark"
    found = breaches(library)
    pairs = duplicate_pairs(library)
    if pairs is not None and pairs[0] - pairs[1] > MAX_DUPLICATE_PAIRS:
        found.append(
            f"recsys_spark: {pairs[0] - pairs[1]} duplicate pairs besides boilerplate (at most "
            f"{MAX_DUPLICATE_PAIRS}; `duplicates --repo recsys_spark --most 60`)"
        )
    for line in found:
        print(f"limits: {line}")
    if found:
        return 1
    dup = (
        "duplicates not checked (no duplicates command)"
        if pairs is None
        else f"{pairs[0] - pairs[1]} duplicate pairs besides {pairs[1]} of boilerplate"
    )
    print(f"limits: files <= {MAX_FILE_LINES} lines, functions <= {MAX_FUNCTION_LINES} lines, {dup}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
