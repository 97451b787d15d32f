"""The grammar a user's SQL must keep to (recsys_spark/config/sql_guard.py), checked without Spark when the config is
read: every hostile rule of issue 40 exits 3 at every level naming the rule and the construct, a realistic rule
set passes, words in strings or back-quoted names are data, and the CLI refuses before a session starts."""

from __future__ import annotations

import json

import pytest
from helpers.rule_samples import AGGREGATE_FORMS, AGGREGATES, HOSTILE, OPERATORS, SCALARS

from recsys_spark.cli import run
from recsys_spark.config import load_config, sql_guard
from recsys_spark.config.sql_guard import UnsafeSql, check_expression
from recsys_spark.errors import ConfigError

LEVELS = ("exposure", "list", "user", "day")
#: what the refusal of each of helpers.rule_samples.HOSTILE says
SAYS = {
    "table in a list": "a query (TABLE): a rule reads its level's columns, no table or file at character 13",
    "exists table": "exists() is not allowed: it is a subquery or a lambda",
    "back-quoted reflect": "`reflect` called: a back-quoted name is a column, never a function at character 1",
    "identifier java_method": "identifier() is not allowed: IDENTIFIER(...) names a function or a table at run time",
    "rand": "rand() is not allowed: it is random (not deterministic)",
    "input_file_name": "input_file_name() is not allowed: it depends on how the rows are read",
    "raise_error": "raise_error() is not allowed: it fails the query on purpose",
    "assert_true": "assert_true() is not allowed: it fails the query on purpose",
    "scalar subquery": "a query (SELECT)",
    "lambda": "exists() is not allowed",
}


def _toml(rules: list[dict]) -> str:
    def value(v):
        return json.dumps(v) if isinstance(v, str) else repr(v)

    return "\n".join("[[rules.custom]]\n" + "\n".join(f"{k} = {value(v)}" for k, v in r.items()) for r in rules)


def config(tmp_path, rules: list[dict]):
    path = tmp_path / "rules.toml"
    path.write_text(_toml(rules) + "\n")
    return load_config(path, ["metrics.k=[1]"])


def test_every_hostile_case_has_its_words():
    assert SAYS.keys() == HOSTILE.keys()


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_rule_exits_3_at_config_load_naming_the_rule_and_the_construct(tmp_path, case, level):
    # each read a file, called Java or failed only after the day was computed: the word guard let them through
    rule = {"name": "sneaky", "severity": "hard", "level": level, "when": HOSTILE[case]}
    with pytest.raises(ConfigError) as err:
        config(tmp_path, [rule])
    message = str(err.value)
    assert err.value.exit_code == 3 and "\n" not in message
    assert message.startswith("config key rules.custom[sneaky].when: ")
    assert SAYS[case] in message and repr(HOSTILE[case]) in message


@pytest.mark.parametrize(
    "sql, says",
    [
        ("x in (values 1)", "a query (VALUES)"),
        ("score > 0 or select", "a query (SELECT)"),
        ("(with t as (select 1) select 1) > 0", "a query (WITH)"),
        ("reflect('java.lang.Runtime', 'getRuntime') is not null", "reflect() is not allowed: it calls Java"),
        ("java_method('java.lang.System', 'exit', 0) = 0", "java_method() is not allowed: it calls Java"),
        ("try_reflect('a', 'b') is null", "try_reflect() is not allowed: it calls Java"),
        ("system.builtin.reflect('a', 'b') is null", "a qualified name called as a function"),
        ("current_timestamp > ts", "current_timestamp is not allowed: it reads the clock"),
        ("`current_date` > ts", "current_date is not allowed: it reads the clock"),
        ("now() > ts", "now() is not allowed: it reads the clock"),
        ("first(score) > 1", "first() is not allowed: it depends on the rows' order"),
        ("max(score) over () > 1", "a window (OVER) at character 12"),
        ("size(transform(tags, x -> x)) > 0", "transform() is not allowed: it is not in the functions a rule may"),
        ("size(x -> x) > 0", "a lambda (->) at character 8"),
        ("nvl(a => 1, 0) > 0", "a named argument (=>)"),
        ("score > 0 -- and the rest", "a comment (--) at character 11"),
        ("score > /* hidden */ 0", "a comment (/*)"),
        ("score > 0; select 1", "a second statement (;)"),
        ("tags[0] = 'a'", "a subscript ([)"),
        ("position & 1 = 1", "a bitwise operator (&)"),
        ("!clicked", "'!' (write NOT)"),
        ("ts > current_date - interval 1 day", "current_date is not allowed"),
        ("ts > interval 1 day", "an interval literal"),
        (":p = 1", "a parameter or a path (:)"),
        ("? = 1", "a parameter marker (?)"),
        ("upper(distinct category) = 'A'", "DISTINCT in upper(), which is not an aggregate"),
        ("max(score) within group (order by x) > 1", "WITHIN after a function call"),
        ("cast(score as array<int>) is null", "a type outside"),
        ("score > ", "expected a value but found the end at character 9"),
        ("'open", "a string that does not end"),
        ("`open", "a back-quoted name that does not end"),
        ("score ≥ 1", "the character '≥' at character 7"),
        (" ", "an empty expression"),
        # a raw string has no escapes (Spark's lexer): the quote after the backslash ends it, the call is code
        ("r'\\' = reflect('a', 'b')", "reflect() is not allowed"),
    ],
)
def test_anything_outside_the_grammar_is_refused_saying_what_and_where(sql, says):
    with pytest.raises(UnsafeSql) as err:
        check_expression(sql)
    assert says in str(err.value)


@pytest.mark.parametrize(
    "sql",
    [
        "max(category_run) > 2",
        "count(distinct item_id) < 3",
        "coalesce(score, 0) > 1",
        "case when score > 1 then true when score is null then false else clicked end",
        "case category when 'adult' then age < 18 else false end",
        "category = 'adult' and age < 18",
        "avg(if(item_age_days < 7, 1, 0)) < 0.1",
        "count(*) >= 4 and sum(n_clicks) = 0",
        "coalesce(sum(value), 0) < 10",
        "count(*) filter (where clicked) > 3",
        # the refused words as data: in strings, as back-quoted names, as a column named like a function
        "category = 'select * from t' or item_id = \"reflect(1)\" or `select` = 1 or `reflect` > 0",
        "max(`rand`) > 0.5 and max(max) > 1 and count(`java_method`) >= 0",
        # an escaped quote keeps the string going: what follows it is still data
        "category = 'it\\'s reflect(1)' or category = 'it''s java_method(1)'",
        "r'\\d+' = category",
    ],
)
def test_realistic_rules_and_the_refused_words_as_data_pass(sql):
    check_expression(sql)


@pytest.mark.parametrize("sql", [*AGGREGATES.values(), *SCALARS.values(), *OPERATORS, *AGGREGATE_FORMS])
def test_every_sample_rule_passes_the_grammar(sql):
    check_expression(sql)


def test_the_samples_call_every_function_of_the_list_once():
    # tests/steps/test_custom_rules.py resolves each sample through Spark's analysis and the plan walk: so every
    # function the grammar allows resolves to expression classes the walk allows
    assert set(AGGREGATES) == sql_guard.AGGREGATE_FUNCTIONS
    assert set(SCALARS) == sql_guard.SCALAR_FUNCTIONS
    for name, sql in {**AGGREGATES, **SCALARS}.items():
        assert name in check_expression(sql).functions


def test_the_functions_a_rule_uses_are_reported():
    checked = check_expression("max(category_run) > 2 and count(distinct item_id) < coalesce(max(n), 3)")
    assert checked.functions == {"max", "count", "coalesce"}
    assert checked.columns == {"category_run", "item_id", "n"}


def test_a_multi_line_rule_is_refused_in_one_line(tmp_path):
    rule = {"name": "two_lines", "severity": "hard", "level": "day", "when": "max(score) > 1\nor rand() > 0.5"}
    with pytest.raises(ConfigError, match=r"rand\(\) is not allowed.* at character 19") as err:
        config(tmp_path, [rule])
    assert "\n" not in str(err.value)


def test_the_cli_exits_3_before_a_session_starts_and_writes_nothing(tmp_path, capsys, monkeypatch):
    from recsys_spark.runtime import session

    def no_session(*args, **kwargs):
        raise AssertionError("a session was started for a config that fails")

    monkeypatch.setattr(session, "job_session", no_session)
    path = tmp_path / "rules.toml"
    path.write_text(
        _toml([{"name": "leak", "severity": "hard", "level": "exposure", "when": HOSTILE["table in a list"]}])
    )
    out = tmp_path / "out"
    code = run(
        ["evaluate", "--date", "2026-11-20", "--input-root", str(tmp_path), "--output-root", str(out)]
        + ["--config", str(path)]
    )
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1
    assert err.startswith("recsys-spark: error: config key rules.custom[leak].when: a query (TABLE)")
    assert not out.exists()
