"""Rules you write ([[rules.custom]]): the config, the check before the day, each level against pandas on a
hand-made day, hard rules and exit 8, the baseline mode, one query per level."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.days import DAY, EXPOSURE_SCHEMA, NOON, VALUED_CLICK_SCHEMA, write
from helpers.rule_samples import AGGREGATE_FORMS, AGGREGATES, HOSTILE, OPERATORS, SCALARS, SCHEMA

from recsys_spark.config import CustomRule, load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.errors import ConfigError, HardRuleViolation
from recsys_spark.steps import custom_rules
from recsys_spark.steps.custom_rules import Count, baseline_limit, check_rules, count_rules, earlier_rates, results
from recsys_spark.steps.rules import BUILT_IN_RULES

EXPOSURES = EXPOSURE_SCHEMA
CLICKS = VALUED_CLICK_SCHEMA
ITEMS = pa.schema([("item_id", pa.string()), ("category", pa.string()), ("first_seen", pa.date32())])
USERS = pa.schema([("user_id", pa.string()), ("age", pa.int32())])

# items: category, first seen (age on DAY in days); g is not in the catalog
CATALOG = {
    "a": ("adult", dt.date(2026, 11, 18)),  # 2 days
    "b": ("books", dt.date(2026, 1, 1)),
    "c": ("books", dt.date(2026, 11, 19)),  # 1 day
    "d": ("toys", dt.date(2025, 11, 20)),
    "e": ("books", dt.date(2026, 10, 1)),
    "f": ("toys", dt.date(2026, 11, 20)),  # 0 days
}
AGES = {"u1": 15, "u2": 30, "u3": 17}  # u4 is not in the users table
# per user, its requests in position order ([] an empty response)
LISTS = {
    "u1": {"r1": ["b", "c", "e", "a"], "r2": ["d", "f"]},  # r1: books x3 in a row, then adult for a minor
    "u2": {"r3": ["a", "b", "d", "g"]},
    "u3": {"r4": ["e", "b", "d"], "r5": ["a"]},  # r4: no item younger than 7 days; r5: adult for a minor
    "u4": {"r6": [], "r7": ["a", "c"]},  # no age: the adult rule's result is null, no violation
}
# (user, request, item, event, value): u1 clicks b twice; u2 buys a for 50; u3 clicks e
EVENTS = [("u1", "r1", "b", "click", None), ("u1", "r1", "b", "click", None), ("u2", "r3", "a", "purchase", 50.0)]
EVENTS += [("u3", "r4", "e", "click", None)]

RULES = [
    {"name": "no_adult_to_minors", "severity": "hard", "level": "exposure", "when": "category = 'adult' and age < 18"},
    {
        "name": "same_category_run",
        "severity": "soft",
        "level": "list",
        "when": "max(category_run) > 2",
        "threshold": 0.1,
    },
    {
        "name": "new_items_share",
        "severity": "soft",
        "level": "list",
        "when": "avg(if(item_age_days < 7, 1, 0)) < 0.1",
        "threshold": 0.5,
    },
    {
        "name": "unclicked_heavy_user",
        "severity": "soft",
        "level": "user",
        "when": "count(*) >= 4 and sum(n_clicks) = 0",
        "threshold": 0.0,
    },
    {"name": "some_revenue", "severity": "hard", "level": "day", "when": "coalesce(sum(value), 0) < 10"},
    {
        "name": "late_click",
        "severity": "soft",
        "level": "exposure",
        "when": "clicked and position > 2",
        "threshold": 0.0,
    },
]


def _toml(rules: list[dict]) -> str:
    def value(v):
        return json.dumps(v) if isinstance(v, str) else repr(v)

    return "\n".join("[[rules.custom]]\n" + "\n".join(f"{k} = {value(v)}" for k, v in r.items()) for r in rules)


def config(tmp_path, rules=RULES, *settings: str, columns=("age",)):
    path = tmp_path / "rules.toml"
    path.write_text(f"[rules]\ncolumns = {json.dumps(list(columns))}\n\n{_toml(rules)}\n")
    return load_config(path, ["metrics.k=[1]", *settings])


def write_day(root, day: dt.date = DAY):
    noon = NOON.replace(year=day.year, month=day.month, day=day.day)
    exposures, clicks = [], []
    for user, requests in LISTS.items():
        for request, items in requests.items():
            if not items:
                exposures.append((user, f"s-{user}", request, None, None, None, noon))
            for p, item in enumerate(items, start=1):
                exposures.append((user, f"s-{user}", request, item, p, round(1 - p / 10, 2), noon))
    for user, request, item, event, value in EVENTS:
        clicks.append((user, f"s-{user}", request, item, noon + dt.timedelta(minutes=1), event, value, None))
    write(root / "in" / "exposures" / f"dt={day}", exposures, EXPOSURES)
    write(root / "in" / "clicks" / f"dt={day}", clicks, CLICKS)
    write(root / "in" / "items", [(i, c, f) for i, (c, f) in CATALOG.items()], ITEMS)
    write(root / "in" / "users", list(AGES.items()), USERS)
    return root / "in"


def reference() -> dict[str, tuple[int, int, list[str]]]:
    """The same rules in pandas, written from their definitions: (violations, denominator, examples)."""
    rows = []
    for user, requests in LISTS.items():
        for request, items in requests.items():
            run, last = 0, None
            for p, item in enumerate(items, start=1):
                category, first = CATALOG.get(item, ("unknown", None))
                run = run + 1 if category == last else 1
                last = category
                clicks = sum(1 for e in EVENTS if e[:3] == (user, request, item) and e[3] == "click")
                value = sum(e[4] for e in EVENTS if e[:3] == (user, request, item) and e[4] is not None)
                rows.append(
                    {
                        "user": user,
                        "request": request,
                        "item": item,
                        "position": p,
                        "category": category,
                        "run": run,
                        "age_days": (DAY - first).days if first else np.nan,
                        "age": AGES.get(user, np.nan),
                        "n_clicks": clicks,
                        "value": value,
                    }
                )
    df = pd.DataFrame(rows)
    adult = (df["category"] == "adult") & (df["age"] < 18)
    late = (df["n_clicks"] > 0) & (df["position"] > 2)
    lists = df.groupby(["user", "request"])
    runs = lists["run"].max() > 2
    new = lists["age_days"].apply(lambda a: (a < 7).mean()) < 0.1
    users = df.groupby("user").agg(n=("item", "size"), clicks=("n_clicks", "sum"))
    unclicked = (users["n"] >= 4) & (users["clicks"] == 0)

    def keys(mask, key):
        return sorted(key[mask].tolist())[:5]

    exposure_key = df["request"] + ":" + df["item"]
    list_key = pd.Series([r for _, r in runs.index], index=runs.index)
    return {
        "no_adult_to_minors": (int(adult.sum()), len(df), keys(adult, exposure_key)),
        "late_click": (int(late.sum()), len(df), keys(late, exposure_key)),
        "same_category_run": (int(runs.sum()), len(runs), keys(runs, list_key)),
        "new_items_share": (int(new.sum()), len(new), keys(new, list_key)),
        "unclicked_heavy_user": (int(unclicked.sum()), len(users), keys(unclicked, users.index.to_series())),
        "some_revenue": (int(df["value"].sum() < 10), 1, []),
    }


# --- config ----------------------------------------------------------------------------------------
def test_a_rule_in_config_is_typed_and_baseline_is_a_threshold(tmp_path):
    cfg = config(tmp_path, [*RULES[:2], {**RULES[3], "name": "b", "threshold": "baseline"}])
    first, second, third = cfg.rules.custom
    assert first == CustomRule("no_adult_to_minors", "hard", "exposure", "category = 'adult' and age < 18")
    assert (second.threshold, second.baseline, third.threshold, third.baseline) == (0.1, False, None, True)
    assert cfg.to_dict()["rules"]["custom"][2]["baseline"] is True
    assert cfg.fingerprint() != load_config(None, ["metrics.k=[1]"]).fingerprint()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"name": "Same-Run"}, r"rules.custom\[2\].name: expected lower-case letters, digits and _"),
        ({"severity": "fatal"}, r"rules.custom\[same_category_run\].severity: expected hard or soft"),
        ({"level": "session"}, "level: expected one of exposure, list, user, day"),
        ({"threshold": None}, r"a soft rule needs a rate between 0 and 1 or \"baseline\""),
        ({"threshold": 2}, "a soft rule needs a rate between 0 and 1"),
        ({"threshold": "baselin"}, "a soft rule needs a rate"),
        ({"severity": "hard"}, "a hard rule has no threshold"),
        ({"when": " "}, "when: expected a non-empty string"),
        (
            {"threshhold": 0.1},
            r"unknown config key: rules.custom\[same_category_run\].threshhold \(did you mean threshold\?\)",
        ),
        ({"when": "(select count(*) from parquet.`/etc`) > 0"}, r"when: a query \(SELECT\)"),
        ({"when": "reflect('java.lang.Runtime', 'getRuntime') is not null"}, r"reflect\(\) is not allowed: it calls"),
        ({"when": "java_method('java.lang.System', 'exit', 0) = 0"}, r"java_method\(\) is not allowed: it calls"),
        ({"when": "max(category_run) > "}, r"when: expected a value but found the end at character 21"),
    ],
)
def test_a_bad_rule_fails_at_load_naming_it(tmp_path, change, message):
    rule = {**RULES[1], **change}
    rule = {k: v for k, v in rule.items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        config(tmp_path, [RULES[0], rule])


def test_names_are_unique_and_a_quoted_select_is_a_name(tmp_path):
    with pytest.raises(ConfigError, match="two rules named same_category_run"):
        config(tmp_path, [RULES[1], RULES[1]])
    # the words are only refused as SQL: in a string or a back-quoted name they are data
    ok = {**RULES[1], "when": "max(category_run) > 2 and max('select') is not null and count(`reflect`) >= 0"}
    assert config(tmp_path, [ok]).rules.custom[0].when == ok["when"]
    with pytest.raises(ConfigError, match="rules.baseline_min_days: expected at least 2"):
        load_config(None, ["rules.baseline_min_days=1"])


def test_the_built_in_names_are_listed_once():
    assert len(set(BUILT_IN_RULES)) == len(BUILT_IN_RULES) == 16


# --- baseline ----------------------------------------------------------------------------------------
def test_baseline_limit_is_the_mean_plus_m_standard_deviations():
    limit, line = baseline_limit([0.10, 0.12, 0.08, None], 3.0, 3)  # mean 0.10, sd 0.02
    assert limit == pytest.approx(0.16) and "over 3 earlier days" in line
    assert baseline_limit([0.1, 0.1, 0.1], 3.0, 3)[0] == pytest.approx(0.1)  # no spread: above the mean fails
    rule = CustomRule("r", "soft", "list", "true", None, True)
    history = {"r": [0.10, 0.12, 0.08]}
    failed, passed = (results([rule], {"r": Count(v, 100, ["k"])}, history, 3.0, 3)[0] for v in (17, 16))
    assert (failed.passed, failed.rate, failed.threshold, failed.severity) == (False, 0.17, pytest.approx(0.16), "soft")
    assert passed.passed and passed.examples[0] == "k" and passed.examples[-1].startswith("baseline: mean 0.1")
    young = results([rule], {"r": Count(90, 100, [])}, {"r": [0.1]}, 3.0, 3)[0]
    assert young.passed and young.threshold is None and "1 earlier day with a rate, 3 needed" in young.examples[0]


# --- Spark ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ruled(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("custom")
    write_day(root)
    cfg = config(root, RULES, "rules.fail_on_hard=false")
    summary = evaluate_day(spark, cfg, DAY, str(root / "in"), str(root / "out"))
    checks = pd.read_parquet(root / "out" / "rule_checks" / f"dt={DAY}").set_index("rule")
    return root, summary, checks


@pytest.mark.spark
@pytest.mark.parametrize("rule", [r["name"] for r in RULES])
def test_each_level_against_pandas(ruled, rule):
    _, _, checks = ruled
    violations, total, examples = reference()[rule]
    got = checks.loc[rule]
    spec = next(r for r in RULES if r["name"] == rule)
    assert (got["violations"], list(got["examples"])) == (violations, examples)
    assert got["rate"] == pytest.approx(violations / total)
    assert got["severity"] == spec["severity"]
    threshold = spec.get("threshold", 0.0)
    assert got["threshold"] == threshold
    assert got["passed"] == (violations == 0 if spec["severity"] == "hard" else violations / total <= threshold)


@pytest.mark.spark
def test_the_hand_counts_and_the_summary(ruled):
    # two minors shown the adult item (u1 in r1, u3 in r5) among 16 exposures; one list of 6 with three books
    # in a row; r4 alone has no item younger than 7 days; u2 (4 exposures, no click) is the one unclicked heavy
    # user of 4; the day's revenue is 50; b is clicked at position 1, e at 1: no late click
    _, summary, checks = ruled
    assert checks.loc["no_adult_to_minors", "examples"].tolist() == ["r1:a", "r5:a"]
    assert checks.loc["no_adult_to_minors", "rate"] == pytest.approx(2 / 16)
    assert (checks.loc["same_category_run", "rate"], checks.loc["same_category_run", "examples"].tolist()) == (
        pytest.approx(1 / 6),
        ["r1"],
    )
    assert checks.loc["new_items_share", "examples"].tolist() == ["r4"]
    assert checks.loc["unclicked_heavy_user", "examples"].tolist() == ["u2"]
    assert checks.loc["some_revenue", "passed"] and checks.loc["late_click", "passed"]
    assert summary["status"] == "hard_rule_violated"
    assert [r["rule"] for r in summary["rules"]][-len(RULES) :] == [r["name"] for r in RULES]


@pytest.mark.spark
def test_a_hard_custom_rule_exits_8_after_every_output_is_written(spark, tmp_path):
    write_day(tmp_path)
    with pytest.raises(HardRuleViolation, match="no_adult_to_minors") as err:
        evaluate_day(spark, config(tmp_path, RULES[:1]), DAY, str(tmp_path / "in"), str(tmp_path / "out"))
    assert err.value.exit_code == 8
    for table in ("metrics", "user_metrics", "lorenz", "rule_checks", "summary"):
        assert (tmp_path / "out" / table / f"dt={DAY}").is_dir(), table
    assert (tmp_path / "out" / "summary" / f"dt={DAY}" / "_SUCCESS").exists()


@pytest.mark.spark
@pytest.mark.parametrize(
    "rule, message",
    [
        (
            {**RULES[0], "when": "category = 'adult' and agee < 18"},
            r"rules.custom\[no_adult_to_minors\].when: \[UNRESOLVED_COLUMN.WITH_SUGGESTION\] .*`agee`",
        ),
        (
            {**RULES[1], "when": "max(category_run, 2) > 2"},
            r"rules.custom\[same_category_run\].when: \[WRONG_NUM_ARGS",
        ),
        ({**RULES[0], "when": "max(score) > 1"}, r"no_adult_to_minors\].when: .*level exposure: a boolean over one"),
        ({**RULES[1], "when": "score > 0.5"}, r'same_category_run\].when: \[MISSING_AGGREGATION\].*"score"'),
        ({**RULES[1], "when": "max(category_run)"}, r"same_category_run\].when: must be true or false .*got a int"),
        (
            {**RULES[1], "name": "bot_user_rate"},
            r"rules.custom\[bot_user_rate\].name: 'bot_user_rate' is the name of a built-in",
        ),
    ],
)
def test_a_rule_spark_cannot_evaluate_fails_before_a_row_is_read(spark, tmp_path, rule, message):
    from recsys_spark.daily.day import InputPaths
    from recsys_spark.daily.inputs import read_inputs
    from recsys_spark.daily.stages import check_custom_rules

    write_day(tmp_path)
    cfg = config(tmp_path, [rule])
    with pytest.raises(ConfigError, match=message) as err:
        evaluate_day(spark, cfg, DAY, str(tmp_path / "in"), str(tmp_path / "out"))
    assert err.value.exit_code == 3 and "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()  # no lock taken, nothing staged
    # the check itself runs no Spark job: it analyses the expression against the day's columns, which the
    # read stage knows from the Parquet footers
    inputs = read_inputs(spark, cfg, InputPaths.resolve(cfg, str(tmp_path / "in"), DAY.isoformat()))
    group = f"custom-rules-{tmp_path.name}"
    spark.sparkContext.setJobGroup(group, "the check must not run a job")
    try:
        with pytest.raises(ConfigError, match=message):
            check_custom_rules(spark, inputs, cfg, DAY)
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert jobs == []


@pytest.mark.spark
def test_an_unknown_input_column_is_named(spark, tmp_path):
    from recsys_spark.errors import SchemaError

    write_day(tmp_path)
    with pytest.raises(SchemaError, match="rules.columns: 'birth_year' is not a column of the exposures, items table"):
        evaluate_day(
            spark, config(tmp_path, RULES[:1], columns=["birth_year"]), DAY, str(tmp_path / "in"), str(tmp_path / "out")
        )


@pytest.mark.spark
def test_every_level_is_one_query(spark, monkeypatch):
    # two rules of each level and no violation: four levels, three queries (exposure and user share one)
    rows = spark.createDataFrame(
        [("u1", "r1", "a", 1, 0.5), ("u1", "r1", "b", 2, 0.4), ("u2", "r2", "a", 1, 0.3)],
        "user_id string, request_id string, item_id string, position int, score double",
    )
    rules = [
        CustomRule(f"{level}_{i}", "soft", level, when, 0.0)
        for level, when in (
            ("exposure", "score > 1"),
            ("user", "count(*) > 10"),
            ("list", "max(position) > 5"),
            ("day", "avg(score) > 1"),
        )
        for i in range(2)
    ]
    collects = []
    frame = type(rows)  # the engine's DataFrame class
    real = frame.collect
    monkeypatch.setattr(frame, "collect", lambda self: collects.append(1) or real(self))
    counts = count_rules(rows, rules)
    assert len(collects) == 3
    assert {name: (c.violations, c.total) for name, c in counts.items()} == {
        "exposure_0": (0, 3),
        "exposure_1": (0, 3),
        "user_0": (0, 2),
        "user_1": (0, 2),
        "list_0": (0, 2),
        "list_1": (0, 2),
        "day_0": (0, 1),
        "day_1": (0, 1),
    }


@pytest.mark.spark
def test_a_baseline_rule_reads_the_complete_earlier_days(spark, tmp_path):
    # earlier days' rule_checks: three complete days (rates .10 .12 .08: mean .10, sd .02) and one without
    # _SUCCESS (its rate is left out); today: u2 is the one unclicked heavy user of 4 (.25 > .10 + 3 x .02)
    out = tmp_path / "out"
    for back, rate, complete in ((4, 0.9, False), (3, 0.10, True), (2, 0.12, True), (1, 0.08, True)):
        day = DAY - dt.timedelta(days=back)
        table = pa.table({"rule": ["unclicked_heavy_user", "other"], "rate": [rate, 0.5]})
        (out / "rule_checks" / f"dt={day}").mkdir(parents=True)
        pq.write_table(table, out / "rule_checks" / f"dt={day}" / "part-00000.parquet")
        (out / "summary" / f"dt={day}").mkdir(parents=True)
        if complete:
            (out / "summary" / f"dt={day}" / "_SUCCESS").touch()
    assert earlier_rates(spark, str(out), DAY, 14, ["unclicked_heavy_user"]) == {
        "unclicked_heavy_user": [0.10, 0.12, 0.08]
    }
    write_day(tmp_path)
    rule = {**RULES[3], "threshold": "baseline"}
    evaluate_day(spark, config(tmp_path, [rule]), DAY, str(tmp_path / "in"), str(out))
    got = pd.read_parquet(out / "rule_checks" / f"dt={DAY}").set_index("rule").loc["unclicked_heavy_user"]
    assert (got["rate"], got["threshold"], got["passed"]) == (0.25, pytest.approx(0.16), False)
    assert got["examples"].tolist()[0] == "u2" and "over 3 earlier days" in got["examples"][-1]


@pytest.mark.spark
def test_a_kept_column_keeps_its_type_and_a_slice_of_it_is_still_a_string(spark):
    # rules.columns are read with their types (age < 18 compares numbers); a slice dimension of the same column
    # casts its own value to a string, so both can name one column
    from recsys_spark.io.read import conform
    from recsys_spark.schema import EXPOSURE_COLUMNS

    rows = [("u1", "s1", "r1", "a", 1, 0.5, NOON, 3)]
    ddl = "user_id string, session_id string, request_id string, item_id string, position int, score double"
    df = spark.createDataFrame(rows, f"{ddl}, ts timestamp, slot int")
    assert dict(conform(df, EXPOSURE_COLUMNS, "p", typed=["slot"]).dtypes)["slot"] == "int"
    assert dict(conform(df, EXPOSURE_COLUMNS, "p", keep=["slot"]).dtypes)["slot"] == "string"
    both = conform(df, EXPOSURE_COLUMNS, "p", keep=["slot"], typed=["slot"])
    assert [c for c in both.columns if c == "slot"] == ["slot"] and dict(both.dtypes)["slot"] == "int"


# --- the guard: what a rule may do ------------------------------------------------------------------------
LEVELS = ("exposure", "list", "user", "day")


def sample_rules() -> list[CustomRule]:
    """One rule per function of the grammar's list, operator and aggregate form (helpers/rule_samples.py)."""
    scalar = [*SCALARS.values(), *OPERATORS]
    aggregate = [*AGGREGATES.values(), *AGGREGATE_FORMS]
    rules = [CustomRule(f"scalar_{i}", "soft", "exposure", sql, 0.0) for i, sql in enumerate(scalar)]
    return rules + [
        CustomRule(f"aggregate_{i}", "soft", LEVELS[1 + i % 3], sql, 0.0) for i, sql in enumerate(aggregate)
    ]


@pytest.mark.spark
def test_every_function_and_form_of_the_grammar_passes_spark_and_the_plan_walk_without_a_job(spark):
    # the grammar's functions resolve to expression classes the analysed-plan walk allows (the two allow-lists
    # agree), and the check, the walk included, reads no row
    schema = spark.createDataFrame([], SCHEMA).schema
    group = "custom-rules-samples"
    spark.sparkContext.setJobGroup(group, "the check must not run a job")
    try:
        check_rules(spark, sample_rules(), schema)
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert jobs == []


@pytest.mark.spark
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", list(HOSTILE))
def test_with_the_grammar_off_spark_or_the_plan_walk_still_refuses_each_hostile_rule(spark, monkeypatch, case, level):
    # defence in depth: were the grammar to let one through (a parser difference), Spark's analysis of the
    # rule inside its level's aggregate or the walk of the analysed plan refuses it, before the day
    monkeypatch.setattr(custom_rules, "check_expression", lambda sql: None, raising=False)
    schema = spark.createDataFrame([], SCHEMA).schema
    with pytest.raises(ConfigError) as err:
        check_rules(spark, [CustomRule("sneaky", "hard", level, HOSTILE[case])], schema)
    assert err.value.exit_code == 3 and "\n" not in str(err.value)
    assert str(err.value).startswith("config key rules.custom[sneaky].when: ")


@pytest.mark.spark
@pytest.mark.parametrize(
    "sql, says",
    [
        ("raise_error('x') is null", "an expression outside the allowed ones: RaiseError (raise_error)"),
        ("assert_true(clicked) is null", "an expression outside the allowed ones: AssertTrue (assert_true)"),
        ("score > (select max(id) from range(1))", "a subquery"),
        ("exists(tags, x -> x = 'a')", "an expression outside the allowed ones: ArrayExists (exists)"),
    ],
)
def test_the_plan_walk_refuses_what_spark_analyses_without_complaint(spark, sql, says):
    from pyspark.sql import functions as F

    from recsys_spark.runtime import plan_guard

    empty = spark.createDataFrame([], SCHEMA)
    query = empty.groupBy("user_id").agg(F.sum(F.coalesce(F.expr(sql), F.lit(False)).cast("long")))
    query.schema  # noqa: B018 - Spark accepts it
    with pytest.raises(plan_guard.UnsafePlan, match=re.escape(says)):
        plan_guard.check_analysed(query, empty)


@pytest.mark.spark
def test_a_rule_that_failed_after_the_day_was_computed_now_fails_before_it(spark, tmp_path, monkeypatch):
    # rand() at the exposure level passed the old check (a select over the empty frame) and failed inside the
    # per-user sum after labelling and metrics; raise_error failed on the first row.  With the grammar off,
    # the check now analyses each rule inside its level's aggregate and walks the plan: exit 3, nothing written
    monkeypatch.setattr(custom_rules, "check_expression", lambda sql: None, raising=False)
    write_day(tmp_path)
    cfg = config(tmp_path, RULES[:1])
    for when in ("rand() > 0.5", "raise_error('x') is null"):
        rule = CustomRule("late_failure", "hard", "exposure", when)
        hostile = dataclasses.replace(cfg, rules=dataclasses.replace(cfg.rules, custom=(rule,)))
        with pytest.raises(ConfigError, match=r"rules.custom\[late_failure\].when: ") as err:
            evaluate_day(spark, hostile, DAY, str(tmp_path / "in"), str(tmp_path / "out"))
        assert err.value.exit_code == 3
        assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_an_item_first_seen_that_is_not_a_date_gives_no_age_not_a_failed_day(spark, tmp_path):
    # Spark 4's ANSI to_date raised on "soon" and failed the whole day; the age is now null for that item only
    write_day(tmp_path)
    text_dates = pa.schema([("item_id", pa.string()), ("category", pa.string()), ("first_seen", pa.string())])
    rows = [(i, c, "soon" if i == "c" else f.isoformat()) for i, (c, f) in CATALOG.items()]
    write(tmp_path / "in" / "items", rows, text_dates)
    rule = {
        "name": "new_items_share",
        "severity": "soft",
        "level": "list",
        "when": "min(item_age_days) < 2",
        "threshold": 0.5,
    }
    evaluate_day(spark, config(tmp_path, [rule]), DAY, str(tmp_path / "in"), str(tmp_path / "out"))
    checks = pd.read_parquet(tmp_path / "out" / "rule_checks" / f"dt={DAY}").set_index("rule")
    # lists with an item under 2 days old: r2 (f, 0 days); r1 and r7 only through c (1 day), now of no known age
    assert checks.loc["new_items_share", "violations"] == 1
