"""Summarise a mutmut run over recsys_spark/kernels/: score per module and every survivor with its diff.

Reads mutmut's own result files (``mutants/**/*.py.meta``) and the mutated sources beside them, so
it needs no call of ``mutmut show`` per mutant.  A survivor is *equivalent* (it cannot change any
result) only by one of the reviewed patterns below, each with its reason; every other survivor
counts against the score.

    python tests/mutation/mutmut_report.py            # after mutmut run; writes build/mutation/kernels.md
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MUTANTS = REPO / "mutants"
OUT = REPO / "build" / "mutation" / "kernels.md"

#: (regex on the mutated line, regex on the original line, reason): reviewed equivalences
EQUIVALENT = [
    (r'float\("NAN"\)', r'float\("nan"\)', 'float() parses "NAN" as NaN'),
    (r"\.astype\(None\)", r"\.astype\(np\.float64\)", "astype(None) is astype(float64)"),
    (
        r"np\.asarray\((values|items), (dtype=None)?\)",
        r"np\.asarray\((values|items), dtype=np\.float64\)",
        "histogram counts come as floats (Spark doubles) or integers, where every sum and ratio is the same",
    ),
    (
        r"kind=(None|\"STABLE\")|np\.argsort\(values\[keep\], \)",
        r'kind="stable"',
        "items with equal counts are interchangeable in every histogram formula: the order among ties is irrelevant",
    ),
    (
        r"np\.asarray\(rel_ranked, (dtype=None)?\) > 0",
        r"np\.asarray\(rel_ranked, dtype=np\.float64\) > 0",
        "relevance is numeric: x > 0 is the same in any numeric dtype",
    ),
    (
        r"grouped_auc\(np\.zeros\(len\(labels\), (np\.int64|None|)\)?, labels, scores, (1|2|None|)\)",
        r"grouped_auc\(np\.zeros\(len\(labels\), np\.int64\), labels, scores, 1\)",
        "one group (code 0): grouped_auc casts the codes to int64, and G = 1, 2 or inferred gives the same values[0]",
    ),
    (
        r"np\.errstate\(",
        r"np\.errstate\(divide=\"ignore\", invalid=\"ignore\"\)",
        "only silences the 0/0 warning of groups with one class; their AUC is set to NaN on the next line",
    ),
    (
        r"np\.r_\[False, (grp|scr)\[1:\]",
        r"np\.r_\[True, (grp|scr)\[1:\]",
        "the first row starts a group and a run anyway (maximum.accumulate of index 0; new_run includes new_group)",
    ),
]


#: mutmut's exit codes (mutmut/stats.py): 0 survived; 5 and 33 "no tests" (no test reaches the function: a
#: survivor, not a kill); None not checked, 2 interrupted, 34 skipped: not run; everything else (1 and 3 failed
#: tests, timeouts, crashes, 37 caught by the type checker) is a kill
NO_TESTS = {5, 33}
SURVIVED = {0} | NO_TESTS
NOT_RUN = {None, 2, 34}


def _functions(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    src = path.read_text().splitlines()
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and "__mutmut_" in node.name:
            out[node.name] = "\n".join(src[node.lineno - 1 : node.end_lineno])
    return out


def _diff(functions: dict[str, str], key: str) -> tuple[str, str]:
    name = key.rsplit(".", 1)[1]
    orig = functions.get(re.sub(r"__mutmut_\d+$", "__mutmut_orig", name), "")
    mutant = functions.get(name, "")
    minus, plus = [], []
    for line in difflib.ndiff(orig.splitlines()[1:], mutant.splitlines()[1:]):
        if line.startswith("- "):
            minus.append(line[2:].strip())
        elif line.startswith("+ "):
            plus.append(line[2:].strip())
    return " / ".join(minus), " / ".join(plus)


def _equivalent(old: str, new: str) -> str | None:
    for new_re, old_re, reason in EQUIVALENT:
        if re.search(new_re, new) and re.search(old_re, old):
            return reason
    return None


def main() -> int:
    metas = sorted(MUTANTS.glob("recsys_spark/kernels/*.py.meta"))
    if not metas:
        print("no mutmut results under mutants/: run mutmut first", file=sys.stderr)
        return 2
    lines = [
        "| module | mutants | killed | survived | equivalent | not run | score (killed / non-equivalent) |",
        "|---|---|---|---|---|---|---|",
    ]
    survivors = []
    totals = Counter()
    for meta in metas:
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        if not codes:
            continue
        functions = _functions(meta.with_suffix(""))
        c = Counter()
        for key, code in codes.items():
            if code in NOT_RUN:
                c["not run"] += 1
            elif code in SURVIVED:
                old, new = _diff(functions, key)
                reason = _equivalent(old, new)
                c["equivalent" if reason else "survived"] += 1
                survivors.append((key, old, new, reason, code in NO_TESTS))
            else:
                c["killed"] += 1  # failed tests (1, 3) or a timeout / crash: the mutant was noticed
        totals.update(c)
        judged = c["killed"] + c["survived"]
        score = f"{100 * c['killed'] / judged:.1f} %" if judged else "-"
        lines.append(
            f"| {meta.with_suffix('').name} | {sum(c.values())} | {c['killed']} | {c['survived']} | "
            f"{c['equivalent']} | {c['not run']} | {score} |"
        )
    judged = totals["killed"] + totals["survived"]
    lines.append(
        f"| **all** | {sum(totals.values())} | {totals['killed']} | {totals['survived']} | "
        f"{totals['equivalent']} | {totals['not run']} | "
        f"**{100 * totals['killed'] / judged:.1f} %** |"
        if judged
        else "| all | - |"
    )
    lines += ["", "## Survivors", "", "| mutant | original | mutated | equivalent because |", "|---|---|---|---|"]

    def cell(s: str) -> str:  # a Markdown table cell: escape the column separator
        return s.replace("|", "\\|")

    for key, old, new, reason, no_tests in sorted(survivors, key=lambda s: (s[3] is not None, s[0])):
        verdict = reason or ("**no test reaches it**" if no_tests else "**not equivalent: not yet killed**")
        lines.append(f"| {key.replace('recsys_spark.kernels.', '')} | `{cell(old)}` | `{cell(new)}` | {verdict} |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[: len(metas) + 3]))
    print(f"survivors written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
