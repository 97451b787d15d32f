"""The table of tables (recsys_spark/tables.py): every output path is spelt by one declaration."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from recsys_spark import tables
from recsys_spark.errors import ConfigError
from recsys_spark.tables import DAILY, GATE, OFFLINE_COMPARISON, OFFLINE_RUN, OPE, SIMULATION, WINDOW

REPO = Path(__file__).resolve().parents[1]


def test_each_layout_spells_its_paths_and_its_marker():
    assert DAILY.path("/out/", "metrics", dt="2026-11-20") == "/out/metrics/dt=2026-11-20"
    assert DAILY.marker("/out", dt="2026-11-20") == "/out/summary/dt=2026-11-20/_SUCCESS"
    assert SIMULATION.path("/out", "metrics", run="c", dt="2026-11-20") == "/out/simulation/metrics/run=c/dt=2026-11-20"
    assert OFFLINE_RUN.marker("/out", run="base") == "/out/offline/summary/run=base/_SUCCESS"
    assert OFFLINE_COMPARISON.path("/out", "comparison", base="a", candidate="b") == (
        "/out/offline/comparison/base=a/candidate=b"
    )
    assert OPE.relative("estimates", run="r") == "ope/estimates/run=r"
    assert GATE.marker("/out", name="g") == "/out/gate/g/verdict.json"
    # the window has no summary: its decisions, moved into place last, say it is complete
    span = tables.window_span("2026-11-14", "2026-11-20")
    assert WINDOW.marker("/out", experiment="e", window=span) == (
        "/out/experiment_window_decisions/experiment=e/window=2026-11-14_2026-11-20"
    )


@pytest.mark.parametrize(
    "call, label",
    [
        (lambda: OFFLINE_RUN.spell(run="../x"), "offline run"),
        (lambda: OFFLINE_COMPARISON.spell(base="a", candidate="a/b"), "offline candidate run"),
        (lambda: OPE.spell(run=".hidden"), "ope run"),
        (lambda: GATE.spell(name="dt=2026-11-20"), "gate name"),
        (lambda: SIMULATION.spell(run="", dt="2026-11-20"), "simulation run"),
        (lambda: WINDOW.spell(experiment="..", window="a_b"), "experiment"),
    ],
)
def test_a_value_that_is_not_a_name_is_refused_naming_what_it_is(call, label):
    with pytest.raises(ConfigError, match=f"^{label} '"):
        call()


def test_a_table_the_layout_does_not_own_or_a_missing_value_is_a_programming_error():
    with pytest.raises(KeyError, match="owns no table 'metrics'"):
        OPE.path("/out", "metrics", run="r")
    with pytest.raises(TypeError, match="expected \\['run', 'dt'\\]"):
        SIMULATION.spell(run="r")


def test_no_two_layouts_under_one_root_own_one_table_with_the_same_partition_keys():
    seen: dict[tuple[str, str, tuple[str, ...]], str] = {}
    for layout in tables.LAYOUTS:
        for table in layout.tables:
            at = (layout.root, table, layout.keys)
            assert at not in seen, f"{layout.what} and {seen[at]} both write {at}"
            seen[at] = layout.what


KEYS = ("dt=", "run=", "base=", "candidate=", "experiment=", "window=")


def _spelt_partitions(source: str) -> list[int]:
    """Lines of f-strings that spell a partition by hand: a piece ending in ``run=`` (or another layout key)
    followed by a value, in a string that holds a path (a ``/``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.JoinedStr):
            continue
        pieces = node.values
        text = "".join(v.value for v in pieces if isinstance(v, ast.Constant) and isinstance(v.value, str))
        for here, after in zip(pieces, pieces[1:], strict=False):
            if (
                "/" in text
                and isinstance(here, ast.Constant)
                and isinstance(here.value, str)
                and here.value.endswith(KEYS)
                and isinstance(after, ast.FormattedValue)
            ):
                lines.append(node.lineno)
                break
    return lines


def test_the_check_below_finds_a_partition_spelt_by_hand():
    assert _spelt_partitions('p = f"{root}/ope/estimates/run={run}"\nq = f"offline run={run}: done"') == [1]


def test_no_library_module_spells_a_layouts_partition_itself():
    # the readers and writers take their paths from tables.py; the commands print such paths in prose (cli/)
    spelt = [
        f"{path.relative_to(REPO)}:{line}"
        for path in (REPO / "recsys_spark").rglob("*.py")
        if path.name != "tables.py" and "cli" not in path.parts
        for line in _spelt_partitions(path.read_text())
    ]
    assert spelt == [], spelt
