"""What a user's Spark SQL expression may hold, checked without Spark (a custom rule's ``when``).

A user's SQL reaches Spark as an expression (``F.expr``), and Spark SQL can do much more in an expression than
compute over its row: read any table or file (``x in (TABLE parquet.`/path`)``, ``exists (select ...)``), call
Java (``reflect``, ``java_method``, also spelled `` `reflect`(...)`` or ``IDENTIFIER('java_method')(...)``),
draw random numbers, read the file name of the row, or fail the query on purpose (``raise_error``).  Refusing
words does not stop that; this module parses the expression with a small grammar and refuses anything it does
not know, an allow-list (docs/operations.md, "Rules you write", has the same lists in words):

* literals: numbers (``1``, ``0.5``, ``1e3``, ``10L``, ``2.5D``, ``1BD``), strings in single or double quotes
  (adjacent ones join; ``r'...'`` raw), ``true``, ``false``, ``null``, ``DATE '2026-11-20'``,
  ``TIMESTAMP '2026-11-20 12:00:00'``;
* column names, plain or back-quoted, and ``a.b`` (a field of a struct column);
* ``+ - * / % div ||``, unary ``-`` and ``+``; comparisons ``= == <> != < <= > >= <=>``;
  ``and``, ``or``, ``not``; ``[not] between``, ``[not] in (value, ...)``, ``[not] like`` / ``ilike`` /
  ``rlike`` / ``regexp`` (with ``escape 'c'``), ``is [not] null|true|false|unknown``,
  ``is [not] distinct from``;
* ``case [x] when ... then ... [else ...] end``, ``cast(x as T)``, ``try_cast(x as T)``, ``x::T`` for the types
  of :data:`TYPES`;
* a call of a function of :data:`FUNCTIONS` by its plain name (``count(*)``, ``count(distinct x)``,
  ``sum(x) filter (where y)``).

Everything else is refused with one line saying what and where: a query (``select``, ``table``, ``values``,
``from``, ``with``, ``exists (...)``), ``IDENTIFIER(...)``, a back-quoted or qualified name called as a function, a
function outside the list (``reflect``, ``java_method``, ``rand``, ``input_file_name``, ``raise_error``,
``assert_true``, ``current_timestamp``... with the reason for the known ones), a lambda (``->``), a window
(``over``), a named argument (``=>``), a parameter marker, a comment, ``;``, subscripts and bitwise operators.
The functions are deterministic scalar and aggregate ones: the same rows give the same result, on any run.

:func:`check_expression` is the one entry point, for every place a user's SQL string reaches Spark: the
custom rules (config load and :func:`recsys_spark.steps.custom_rules.check_rules`) and the experiments' populations
(:meth:`recsys_spark.config.experiments.ExperimentsConfig.population_columns`, at config load); anything else
defined in SQL must call it too.  It is pure Python (no pyspark), so the
config is refused before a session starts.  On a classic session :mod:`recsys_spark.steps.custom_rules` also walks
Spark's analysed expression with an allow-list of expression classes (defence against a difference between this
grammar and Spark's); on Spark Connect this check is the guard.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

#: aggregate functions a rule may call (deterministic: no approximate, first/last or order-dependent ones)
AGGREGATE_FUNCTIONS = frozenset(
    {
        "count", "count_if", "sum", "avg", "mean", "min", "max", "bool_and", "bool_or", "every", "some", "any",
        "stddev", "stddev_samp", "stddev_pop", "std", "variance", "var_samp", "var_pop", "percentile", "median",
        "skewness", "kurtosis", "corr", "covar_pop", "covar_samp",
    }
)  # fmt: skip
#: scalar functions a rule may call: conditions and nulls, arithmetic, strings, dates, array columns
SCALAR_FUNCTIONS = frozenset(
    {
        # conditions and nulls
        "if", "coalesce", "nvl", "nvl2", "ifnull", "nullif", "nanvl", "isnull", "isnotnull", "isnan", "greatest",
        "least",
        # arithmetic
        "abs", "ceil", "ceiling", "floor", "round", "bround", "sqrt", "cbrt", "exp", "ln", "log", "log10", "log2",
        "pow", "power", "sign", "signum", "mod", "pmod", "positive", "negative", "try_add", "try_subtract",
        "try_multiply", "try_divide",
        # strings
        "length", "char_length", "character_length", "lower", "upper", "lcase", "ucase", "trim", "ltrim", "rtrim",
        "substr", "substring", "left", "right", "concat", "concat_ws", "instr", "locate", "lpad", "rpad", "replace",
        "startswith", "endswith", "contains", "regexp_extract", "regexp_replace", "regexp_like", "split_part",
        "initcap",
        # dates and times (in the session's time zone: validation.time_zone)
        "to_date", "to_timestamp", "date_format", "datediff", "date_diff", "date_add", "date_sub", "date_trunc",
        "trunc", "year", "quarter", "month", "day", "dayofmonth", "dayofweek", "dayofyear", "weekday",
        "weekofyear", "hour", "minute", "second",
        # array columns (a kept input column may be one)
        "size", "array_contains",
    }
)  # fmt: skip
FUNCTIONS = AGGREGATE_FUNCTIONS | SCALAR_FUNCTIONS
#: the types of ``cast`` (``decimal``, ``varchar`` and ``char`` take their sizes in parentheses)
TYPES = frozenset(
    {
        "boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long", "float", "real",
        "double", "decimal", "dec", "numeric", "string", "varchar", "char", "date", "timestamp", "timestamp_ntz",
        "timestamp_ltz", "binary",
    }
)  # fmt: skip
#: why some well-known functions are refused (any other name outside :data:`FUNCTIONS` is refused as unlisted)
REFUSED_FUNCTIONS = {
    name: why
    for names, why in (
        ("reflect java_method try_reflect", "it calls Java"),
        ("rand randn random uniform randstr uuid shuffle", "it is random (not deterministic)"),
        (
            "input_file_name input_file_block_start input_file_block_length spark_partition_id "
            "monotonically_increasing_id",
            "it depends on how the rows are read (not deterministic)",
        ),
        ("raise_error assert_true", "it fails the query on purpose"),
        (
            "current_timestamp current_date current_time current_timezone now localtimestamp unix_timestamp curdate",
            "it reads the clock (not deterministic)",
        ),
        (
            "current_user user session_user current_catalog current_database current_schema version",
            "it reads the session",
        ),
        ("identifier", "IDENTIFIER(...) names a function or a table at run time"),
        ("exists", "it is a subquery or a lambda"),
        ("first last first_value last_value any_value", "it depends on the rows' order"),
    )
    for name in names.split()
}
#: names Spark reads as a call without parentheses when no column has them (``current_date``): refused as names
NAME_FUNCTIONS = frozenset(
    {
        "current_date", "current_timestamp", "current_time", "current_timezone", "localtimestamp", "current_user",
        "user", "session_user", "current_catalog", "current_database", "current_schema", "curdate",
    }
)  # fmt: skip
#: words that start a query: a rule never holds one
QUERY_WORDS = frozenset({"select", "table", "values", "from", "with", "lateral"})
#: words of the grammar that are never a plain column name (back-quote a column named so)
RESERVED = frozenset(
    {
        "and", "or", "not", "in", "is", "null", "true", "false", "between", "like", "ilike", "rlike", "regexp",
        "case", "when", "then", "else", "end", "cast", "try_cast", "as", "distinct", "over", "interval",
        "unknown",
    }
    | QUERY_WORDS
)  # fmt: skip

_COMPARISONS = ("=", "==", "<>", "!=", "<", "<=", ">", ">=", "<=>")
# longest first: the tokenizer takes the first that matches
_OPERATORS = tuple("<=> -> => :: == <> != <= >= || && = < > + - * / % ( ) , . & | ^ ~ ! [ ] { } : ; ? $ @ #".split())
_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:BD|[LSYDF])?", re.IGNORECASE | re.ASCII)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WHITE = " \t\r\n"
_WHAT = {
    "->": "a lambda (->)",
    "=>": "a named argument (=>)",
    ";": "a second statement (;)",
    "?": "a parameter marker (?)",
    ":": "a parameter or a path (:)",
    "[": "a subscript ([)",
    "{": "a brace ({)",
    **{op: f"a bitwise operator ({op})" for op in ("&", "|", "^", "~")},
}


class UnsafeSql(ValueError):
    """An expression the grammar refuses: the message says what and at which character (1-based)."""


@dataclass(frozen=True)
class Token:
    kind: str  # "name", "quoted" (a back-quoted name), "string", "number", "op", "end"
    text: str  # a name lower-cased, a quoted name unquoted, an operator as written
    at: int  # 1-based character

    def word(self, *words: str) -> bool:
        """Is this a plain (not back-quoted) name among ``words``?"""
        return self.kind == "name" and self.text in words


@dataclass(frozen=True)
class Checked:
    """What an accepted expression uses: the functions called (lower-case) and the names read as columns."""

    functions: frozenset[str]
    columns: frozenset[str]


def _string_end(sql: str, start: int, raw: bool) -> int:
    """The index after the string literal whose quote is at ``start`` (Spark's lexer: a backslash escapes the
    next character, a doubled quote is a quote; a raw string has no escapes)."""
    quote, i = sql[start], start + 1
    while i < len(sql):
        c = sql[i]
        if c == "\\" and not raw:
            i += 2
        elif c == quote:
            if not raw and i + 1 < len(sql) and sql[i + 1] == quote:
                i += 2
            else:
                return i + 1
        else:
            i += 1
    raise UnsafeSql(f"a string that does not end (opened at character {start + 1})")


def tokenize(sql: str) -> list[Token]:
    """``sql`` as tokens; a comment, a character outside the grammar or an unfinished literal is refused."""
    out: list[Token] = []
    i = 0
    while i < len(sql):
        c = sql[i]
        if c in _WHITE:
            i += 1
        elif sql.startswith("--", i) or sql.startswith("/*", i):
            raise UnsafeSql(f"a comment ({sql[i : i + 2]}) at character {i + 1}")
        elif c in "rR" and i + 1 < len(sql) and sql[i + 1] in "'\"":
            end = _string_end(sql, i + 1, raw=True)
            out.append(Token("string", sql[i:end], i + 1))
            i = end
        elif c in "'\"":
            end = _string_end(sql, i, raw=False)
            out.append(Token("string", sql[i:end], i + 1))
            i = end
        elif c == "`":
            j = i + 1
            while True:
                j = sql.find("`", j)
                if j < 0:
                    raise UnsafeSql(f"a back-quoted name that does not end (opened at character {i + 1})")
                if sql.startswith("``", j):
                    j += 2
                    continue
                break
            out.append(Token("quoted", sql[i + 1 : j].replace("``", "`"), i + 1))
            i = j + 1
        elif c in "0123456789." and (number := _NUMBER.match(sql, i)):
            end = number.end()
            if end < len(sql) and (sql[end].isalnum() or sql[end] == "_"):
                raise UnsafeSql(f"a number followed by a name ({sql[i : end + 1]!r}) at character {i + 1}")
            out.append(Token("number", number.group(), i + 1))
            i = end
        elif name := _NAME.match(sql, i):
            out.append(Token("name", name.group().lower(), i + 1))
            i = name.end()
        else:
            op = next((o for o in _OPERATORS if sql.startswith(o, i)), None)
            if op is None:
                raise UnsafeSql(f"the character {c!r} at character {i + 1}")
            out.append(Token("op", op, i + 1))
            i += len(op)
    out.append(Token("end", "", len(sql) + 1))
    return out


class _Parser:
    """Recursive descent over :func:`tokenize`'s tokens, precedence as Spark's: or < and < not < predicate
    (comparison, between, in, like, is) < + - || < * / % div < unary < :: < primary."""

    def __init__(self, sql: str) -> None:
        self.tokens = tokenize(sql)
        self.i = 0
        self.functions: set[str] = set()
        self.columns: set[str] = set()

    # --- tokens ---
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, n: int = 1) -> Token:
        return self.tokens[min(self.i + n, len(self.tokens) - 1)]

    def take(self) -> Token:
        tok = self.tok
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return tok

    def is_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def expect_op(self, op: str) -> None:
        if not self.is_op(op):
            self.refuse(f"expected {op!r}")
        self.take()

    def expect_word(self, word: str) -> None:
        if not self.tok.word(word):
            self.refuse(f"expected {word.upper()}")
        self.take()

    def refuse(self, what: str, tok: Token | None = None) -> NoReturn:
        """Raise :class:`UnsafeSql`: ``what`` at ``tok`` (the current token), or the construct the token starts."""
        tok = tok or self.tok
        if tok.kind == "op" and tok.text in _WHAT:
            what = _WHAT[tok.text]
        elif tok.kind == "name" and tok.text in QUERY_WORDS:
            what = f"a query ({tok.text.upper()}): a rule reads its level's columns, no table or file"
        elif tok.kind == "name" and tok.text in ("over", "interval"):
            what = "a window (OVER)" if tok.text == "over" else "an interval literal"
        elif what.startswith("expected"):
            what += " but found " + ("the end" if tok.kind == "end" else repr(tok.text[:20]))
        raise UnsafeSql(f"{what} at character {tok.at}")

    # --- grammar ---
    def parse(self) -> Checked:
        self.expression()
        if self.tok.kind != "end":
            self.refuse("expected the end of the expression")
        return Checked(frozenset(self.functions), frozenset(self.columns))

    def expression(self) -> None:
        self.conjunction()
        while self.tok.word("or"):
            self.take()
            self.conjunction()

    def conjunction(self) -> None:
        self.negation()
        while self.tok.word("and"):
            self.take()
            self.negation()

    def negation(self) -> None:
        if self.tok.word("not") or self.is_op("!"):
            if self.is_op("!"):
                self.refuse("'!' (write NOT)")
            self.take()
            self.negation()
            return
        self.predicate()

    def predicate(self) -> None:
        self.value()
        while True:
            if self.tok.kind == "op" and self.tok.text in _COMPARISONS:
                self.take()
                self.value()
                continue
            negated = self.tok.word("not") and self.peek().word("between", "in", "like", "ilike", "rlike", "regexp")
            if negated:
                self.take()
            if self.tok.word("between"):
                self.take()
                self.value()
                self.expect_word("and")
                self.value()
            elif self.tok.word("in"):
                self.take()
                self.in_list()
            elif self.tok.word("like", "ilike", "rlike", "regexp"):
                self.take()
                if self.tok.word("any", "all", "some"):
                    self.refuse("LIKE ANY/ALL")
                self.value()
                if self.tok.word("escape"):
                    self.take()
                    if self.tok.kind != "string":
                        self.refuse("expected an escape character in quotes")
                    self.take()
            elif self.tok.word("is") and not negated:
                self.take()
                if self.tok.word("not"):
                    self.take()
                if self.tok.word("null", "true", "false", "unknown"):
                    self.take()
                elif self.tok.word("distinct"):
                    self.take()
                    self.expect_word("from")
                    self.value()
                else:
                    self.refuse("expected NULL, TRUE, FALSE, UNKNOWN or DISTINCT FROM after IS")
            else:
                if negated:
                    self.refuse("expected BETWEEN, IN or LIKE after NOT")
                return

    def in_list(self) -> None:
        if not self.is_op("("):
            self.refuse("expected '(' after IN")
        self.take()
        if self.tok.kind == "name" and self.tok.text in QUERY_WORDS:
            self.refuse("a subquery")
        self.value_list(")")

    def value_list(self, close: str) -> None:
        self.expression()
        while self.is_op(","):
            self.take()
            self.expression()
        self.expect_op(close)

    def value(self) -> None:
        """+ - || over * / % div over unary."""
        self.term()
        while self.is_op("+", "-", "||"):
            self.take()
            self.term()

    def term(self) -> None:
        self.unary()
        while self.is_op("*", "/", "%") or self.tok.word("div"):
            self.take()
            self.unary()

    def unary(self) -> None:
        if self.is_op("-", "+"):
            self.take()
            self.unary()
            return
        self.primary()
        while self.is_op("::"):
            self.take()
            self.data_type()

    def data_type(self) -> None:
        tok = self.tok
        if tok.kind != "name" or tok.text not in TYPES:
            self.refuse(f"a type outside {', '.join(sorted(TYPES))}")
        self.take()
        if tok.text in ("decimal", "dec", "numeric", "varchar", "char") and self.is_op("("):
            self.take()
            for n in range(2):
                if self.tok.kind != "number" or not self.tok.text.isdigit():
                    self.refuse("expected a size")
                self.take()
                if n == 0 and self.is_op(","):
                    self.take()
                    continue
                break
            self.expect_op(")")

    def primary(self) -> None:
        tok = self.tok
        if tok.kind == "number":
            self.take()
        elif tok.kind == "string":
            while self.tok.kind == "string":  # 'a' 'b' is 'ab'
                self.take()
        elif tok.word("true", "false", "null"):
            self.take()
        elif tok.word("date", "timestamp", "timestamp_ntz", "timestamp_ltz") and self.peek().kind == "string":
            self.take()
            self.take()
        elif tok.word("case"):
            self.case()
        elif tok.word("cast", "try_cast") and self.peek().kind == "op" and self.peek().text == "(":
            self.take()
            self.take()
            self.expression()
            self.expect_word("as")
            self.data_type()
            self.expect_op(")")
        elif self.is_op("("):
            self.take()
            if self.tok.kind == "name" and self.tok.text in QUERY_WORDS:
                self.refuse("a subquery")
            self.expression()
            if self.is_op(","):
                self.refuse("a row of several values (only IN takes a list)")
            self.expect_op(")")
        elif tok.kind in ("name", "quoted"):
            self.name_or_call()
        else:
            self.refuse("expected a value")

    def case(self) -> None:
        self.take()
        if not self.tok.word("when"):
            self.expression()
        if not self.tok.word("when"):
            self.refuse("expected WHEN")
        while self.tok.word("when"):
            self.take()
            self.expression()
            self.expect_word("then")
            self.expression()
        if self.tok.word("else"):
            self.take()
            self.expression()
        self.expect_word("end")

    def name_or_call(self) -> None:
        first = self.take()
        if self.is_op("("):
            self.call(first)
            return
        if first.kind == "name" and first.text in RESERVED:
            self.refuse(f"{first.text.upper()} where a value was expected", first)
        parts = [first]
        while self.is_op("."):
            self.take()
            if self.tok.kind not in ("name", "quoted"):
                self.refuse("expected a field name after '.'")
            parts.append(self.take())
        if self.is_op("("):
            self.refuse("a qualified name called as a function", parts[0])
        if len(parts) == 1 and first.text.lower() in NAME_FUNCTIONS:
            name = first.text.lower()
            self.refuse(f"{name} is not allowed: {REFUSED_FUNCTIONS[name]}", first)
        self.columns.add(".".join(p.text for p in parts))

    def call(self, name: Token) -> None:
        if name.kind == "quoted":
            self.refuse(f"`{name.text}` called: a back-quoted name is a column, never a function", name)
        if name.text not in FUNCTIONS:
            why = REFUSED_FUNCTIONS.get(name.text, "it is not in the functions a rule may call (docs/operations.md)")
            self.refuse(f"{name.text}() is not allowed: {why}", name)
        self.functions.add(name.text)
        self.take()  # (
        if self.tok.kind == "name" and self.tok.text in QUERY_WORDS:
            self.refuse("a subquery")
        if name.text == "count" and self.is_op("*"):
            self.take()
            self.expect_op(")")
        elif self.is_op(")"):
            self.take()
        else:
            if self.tok.word("distinct"):
                if name.text not in AGGREGATE_FUNCTIONS:
                    self.refuse(f"DISTINCT in {name.text}(), which is not an aggregate")
                self.take()
            self.value_list(")")
        if self.tok.word("filter") and self.peek().kind == "op" and self.peek().text == "(":
            if name.text not in AGGREGATE_FUNCTIONS:
                self.refuse(f"FILTER after {name.text}(), which is not an aggregate")
            self.take()
            self.take()
            self.expect_word("where")
            self.expression()
            self.expect_op(")")
        if self.tok.word("over", "within", "ignore", "respect"):
            self.refuse(
                "a window (OVER)" if self.tok.text == "over" else f"{self.tok.text.upper()} after a function call"
            )


def check_expression(sql: str) -> Checked:
    """Accept ``sql`` if it is an expression of the documented grammar (see the module docstring), else raise
    :class:`UnsafeSql` naming the first construct refused and its character.

    >>> sorted(check_expression("max(category_run) > 2 and count(distinct item_id) < 3").functions)
    ['count', 'max']
    >>> check_expression("`reflect`('java.lang.System', 'getenv', 'PATH') is not null")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_spark.config.sql_guard.UnsafeSql: `reflect` called: a back-quoted name is a column, ... at character 1
    """
    if not sql.strip():
        raise UnsafeSql("an empty expression")
    return _Parser(sql).parse()
