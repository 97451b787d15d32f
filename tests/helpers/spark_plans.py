"""The shape of a DataFrame's physical plan, read from the JVM, for the tests that assert it.

Tests assert the structure that gives the speed (how many exchanges move which rows), never a time.  The
walk goes through ``AdaptiveSparkPlan`` (its current plan: the initial one before the query runs, the final
one after) and through query stages (a stage's exchange is its ``plan``, not a child), and stops at a cached
relation: what a persisted table cost to build is not part of the plan that reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any


def plan_nodes(df: Any) -> Iterator[Any]:
    """Every node of ``df``'s physical plan (JVM objects), parents first."""

    def walk(node: Any) -> Iterator[Any]:
        name = str(node.nodeName())
        if name == "AdaptiveSparkPlan":
            yield from walk(node.executedPlan())
            return
        if name.endswith("QueryStage"):
            yield from walk(node.plan())
            return
        yield node
        children = node.children()
        for i in range(children.size()):
            yield from walk(children.apply(i))

    yield from walk(df._jdf.queryExecution().executedPlan())


def names_and_exchanges(df: Any) -> tuple[list[str], list[str]]:
    """(node names, the hash partitionings of the shuffle exchanges, sorted, without expression ids)."""
    nodes = list(plan_nodes(df))
    keys = [str(n.outputPartitioning().toString()) for n in nodes if str(n.nodeName()) == "Exchange"]
    return [str(n.nodeName()) for n in nodes], sorted(re.sub(r"#\d+L?", "", k) for k in keys)


def shuffles(df: Any) -> list[tuple[str, set[str]]]:
    """(``Exchange`` or ``ReusedExchange``, output column names) of every shuffle (not broadcast) exchange of
    ``df``'s final plan; runs ``df`` first."""
    df.collect()
    out = []
    for node in plan_nodes(df):
        name = str(node.nodeName())
        if name in ("Exchange", "ReusedExchange") and "Broadcast" not in str(node.getClass().getSimpleName()):
            attrs = node.output()
            out.append((name, {str(attrs.apply(i).name()) for i in range(attrs.size())}))
    return out
