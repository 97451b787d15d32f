"""What a user's expression does once Spark has analysed it: a walk of the analysed plan (classic sessions).

:func:`recsys_spark.config.sql_guard.check_expression` refuses, without Spark, any expression outside its grammar.
This is the second check, on the expression as Spark resolved it, so that a difference between that grammar and
Spark's parser cannot let a table read or a Java call through: :func:`check_analysed` walks the analysed plan of
a query built on a frame of the user's columns (``_jdf.queryExecution().analyzed()``, through py4j) and refuses

* a plan node other than an aggregate, a projection or a filter, or a relation other than that frame (a
  subquery's plan, a table, a file);
* an expression whose class is not in :data:`EXPRESSIONS`: the classes the functions and operators of the
  grammar resolve to (``tests/steps/test_custom_rules.py`` resolves every function of the grammar's list through this
  walk, so the two lists agree), which leaves out subqueries, lambdas, windows, Java calls (``reflect``),
  random and file functions, ``raise_error``, user functions;
* an expression that is not deterministic (every class allowed is: a second line of defence).

It reads the plan only (no job).  On Spark Connect the client has no plan to walk: the server still analyses
the query (an unknown column fails), and the grammar check is the guard (:func:`is_available`).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions."
_PLANS = "org.apache.spark.sql.catalyst.plans.logical."
#: the plan nodes the check queries hold above the user's frame
PLANS = frozenset({"Aggregate", "Project", "Filter"})
#: the expression classes (of org.apache.spark.sql.catalyst.expressions, ``aggregate.`` for the aggregates)
#: that the grammar's literals, columns, operators and functions resolve to
EXPRESSIONS = frozenset(
    {
        # columns, literals, names, casts, conditions, nulls
        "AttributeReference", "Literal", "Alias", "GetStructField", "Cast", "If", "CaseWhen", "Coalesce", "Nvl",
        "Nvl2", "NullIf", "NullIfResult", "NaNvl", "IsNull", "IsNotNull", "IsNaN", "Greatest", "Least", "With",
        "CommonExpressionDef", "CommonExpressionRef", "CheckOverflow", "PromotePrecision", "KnownNotNull",
        # logic and comparisons
        "And", "Or", "Not", "EqualTo", "EqualNullSafe", "LessThan", "LessThanOrEqual", "GreaterThan",
        "GreaterThanOrEqual", "Between", "In", "InSet", "Like", "ILike", "RLike",
        # arithmetic
        "Add", "Subtract", "Multiply", "Divide", "IntegralDivide", "Remainder", "Pmod", "UnaryMinus",
        "UnaryPositive", "Abs", "Ceil", "Floor", "Round", "BRound", "Sqrt", "Cbrt", "Exp", "Log", "Log10", "Log2",
        "Logarithm", "Pow", "Signum", "TryAdd", "TrySubtract", "TryMultiply", "TryDivide",
        # strings
        "Length", "Lower", "Upper", "StringTrim", "StringTrimLeft", "StringTrimRight", "Substring", "Left", "Right",
        "Concat", "ConcatWs", "StringInstr", "StringLocate", "StringLPad", "StringRPad", "StringReplace",
        "StartsWith", "EndsWith", "Contains", "RegExpExtract", "RegExpReplace", "SplitPart", "InitCap",
        # dates and times
        "ParseToDate", "ParseToTimestamp", "DateFormatClass", "DateDiff", "DateAdd", "DateSub", "TruncDate",
        "TruncTimestamp", "Year", "Quarter", "Month", "DayOfMonth", "DayOfWeek", "DayOfYear", "WeekDay",
        "WeekOfYear", "Hour", "Minute", "Second",
        # arrays
        "Size", "ArrayContains",
        # aggregates
        "aggregate.AggregateExpression", "aggregate.Count", "aggregate.CountIf", "aggregate.Sum",
        "aggregate.Average", "aggregate.Min", "aggregate.Max", "aggregate.BoolAnd", "aggregate.BoolOr",
        "aggregate.StddevSamp", "aggregate.StddevPop", "aggregate.VarianceSamp", "aggregate.VariancePop",
        "aggregate.Percentile", "aggregate.Median", "aggregate.Skewness", "aggregate.Kurtosis", "aggregate.Corr",
        "aggregate.CovPopulation", "aggregate.CovSample",
    }
)  # fmt: skip


class UnsafePlan(ValueError):
    """The analysed plan holds something a user's expression may not do; the message says what."""


def is_available(df: DataFrame) -> bool:
    """Is there an analysed plan to walk (a classic session), or only a Connect plan on a server?"""
    return hasattr(df, "_jdf")


def check_analysed(df: DataFrame, source: DataFrame) -> None:
    """Walk ``df``'s analysed plan down to ``source`` (the frame the user's columns come from) and raise
    :class:`UnsafePlan` at the first node or expression refused (see the module docstring).  Classic sessions
    only (:func:`is_available`); analysis only, no job."""
    own = source._jdf.queryExecution().analyzed()
    _walk_plan(df._jdf.queryExecution().analyzed(), own)


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _walk_plan(node: Any, own: Any) -> None:
    if node.equals(own):
        return
    name = node.getClass().getName()
    if not name.startswith(_PLANS) or name[len(_PLANS) :] not in PLANS:
        what = "reads a relation" if node.children().isEmpty() else "holds a plan node"
        raise UnsafePlan(f"the expression {what} of its own ({name.rsplit('.', 1)[-1]}): a table, a file or a query")
    if not node.subqueries().isEmpty():
        raise UnsafePlan("the expression holds a subquery")
    for expression in _seq(node.expressions()):
        _walk_expression(expression)
        if not expression.deterministic():  # the classes allowed are deterministic: this is belt and braces
            raise UnsafePlan(f"a non-deterministic expression ({expression.sql()})")
    for child in _seq(node.children()):
        _walk_plan(child, own)


def _walk_expression(node: Any) -> None:
    name = node.getClass().getName()
    short = name[len(_EXPRESSIONS) :] if name.startswith(_EXPRESSIONS) else name
    if short not in EXPRESSIONS:
        kind = "a subquery" if "Subquery" in short or short in ("Exists", "ListQuery") else "an expression"
        raise UnsafePlan(f"{kind} outside the allowed ones: {short.rsplit('.', 1)[-1]} ({_pretty(node)})")
    for child in _seq(node.children()):
        _walk_expression(child)


def _pretty(node: Any) -> str:
    """The node's function name as SQL spells it (``reflect``), for the message."""
    try:
        return str(node.prettyName())
    except Exception:  # a message detail only
        return "?"
