"""Layers that interact and who is in a test, through the daily job (docs/experiments.md, "Interactions",
"Populations"): a hand-built day of two experiments in two layers with a planted interaction, checked against
statsmodels' OLS ``y ~ a * b`` (HC2, the user as the unit), and an experiment restricted to a region."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from helpers.input_ddl import CLICK_DDL, DAY, EXPOSURE_DDL, T0

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.errors import ConfigError

pytestmark = pytest.mark.spark

ASSIGNMENT_DDL = "user_id string, experiment string, variant string, layer string"
USERS_PER_CELL = 40
#: click probability per cell (a, b): A alone +0.2, B alone +0.2, both together only +0.1: an interaction of -0.3
P_CLICK = {(0, 0): 0.2, (1, 0): 0.4, (0, 1): 0.4, (1, 1): 0.3}
ARMS = ("control", "treatment")
SETTINGS = [
    "metrics.k=[10]",
    "rules.fail_on_hard=false",
    "experiments.inference=fixed",
    'experiments.metrics=["exposure_ctr_global", "precision@10_user_avg"]',
    'experiments.goals=["exposure_ctr_global"]',
    "experiments.guardrails=[]",
    "experiments.min_users_per_arm=5",
    "experiments.min_users_per_cell=10",
]


def _users() -> list[tuple[str, int, int, str, int]]:
    """(user id, a, b, region, clicks of its 10 exposures); every user has at least one click."""
    rng = np.random.default_rng(43)
    out = []
    for (a, b), p in P_CLICK.items():
        for i in range(USERS_PER_CELL):
            clicks = 1 + int(rng.binomial(9, p))
            out.append((f"u{a}{b}-{i:02d}", a, b, "north" if i % 2 == 0 else "south", clicks))
    return out


def _write_day(spark, root) -> None:
    exposure_ddl = EXPOSURE_DDL + ", region string"
    exposures, clicks, assignments = [], [], []
    for uid, a, b, region, n_clicks in _users():
        request = f"r-{uid}"
        for p in range(1, 11):
            exposures.append((uid, f"s-{uid}", request, f"i{p}", p, 1.0 - p / 100, T0, region))
            if p <= n_clicks:
                clicks.append((uid, f"s-{uid}", request, f"i{p}", T0 + dt.timedelta(minutes=1)))
        assignments += [(uid, "ea", ARMS[a], "L1"), (uid, "eb", ARMS[b], "L2")]
    spark.createDataFrame(exposures, exposure_ddl).write.parquet(f"{root}/in/exposures/dt={DAY}")
    spark.createDataFrame(clicks, CLICK_DDL).write.parquet(f"{root}/in/clicks/dt={DAY}")
    spark.createDataFrame(assignments, ASSIGNMENT_DDL).write.parquet(f"{root}/in/assignments/dt={DAY}")


@pytest.fixture(scope="module")
def day(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("interactions")
    _write_day(spark, root)
    summary = evaluate_day(spark, load_config(None, SETTINGS), DAY, f"{root}/in", f"{root}/out")
    return root, summary


def _ols_hc2(y, a, b):
    import statsmodels.formula.api as smf

    fit = smf.ols("y ~ a * b", data=pd.DataFrame({"y": y, "a": a, "b": b})).fit(cov_type="HC2")
    return float(fit.params["a:b"]), float(fit.bse["a:b"]), float(fit.pvalues["a:b"])


def _expected(users, metric: str):
    """statsmodels on the per-user values: precision@10 = clicks / 10; exposure CTR's per-user linearisation
    R_ab + (x − R_ab·y)/ȳ_ab within each cell (x clicks, y = 10 exposures)."""
    y, a, b = [], [], []
    for cell in P_CLICK:
        mine = np.array([c for _, ua, ub, _, c in users if (ua, ub) == cell], dtype=float)
        if metric == "precision":
            y.append(mine / 10)
        else:
            exposures = np.full(len(mine), 10.0)
            ratio = mine.sum() / exposures.sum()
            y.append(ratio + (mine - ratio * exposures) / exposures.mean())
        a.append(np.full(len(mine), cell[0]))
        b.append(np.full(len(mine), cell[1]))
    return _ols_hc2(np.concatenate(y), np.concatenate(a), np.concatenate(b))


def test_the_interaction_table_is_ols_with_the_interaction_term(spark, day):
    root, _ = day
    df = spark.read.parquet(f"{root}/out/experiment_interactions/dt={DAY}")
    assert df.columns == [
        "layer_a", "experiment_a", "variant_a", "layer_b", "experiment_b", "variant_b", "metric", "k",
        "aggregation", "contrast", "ci_low", "ci_high", "p_value", "p_adjusted", "users",
    ]  # fmt: skip
    rows = {r["metric"]: r.asDict() for r in df.collect()}
    assert set(rows) == {"exposure_ctr", "precision"}
    table = f"{root}/out/experiment_interactions"  # at its root, as a reader opens it: pandas and DuckDB
    import duckdb

    by_duckdb = duckdb.sql(f"SELECT * FROM read_parquet('{table}/**/*.parquet', hive_partitioning = true)").df()
    assert len(pd.read_parquet(table)) == len(by_duckdb) == 2
    users = _users()
    for metric, row in rows.items():
        assert (row["layer_a"], row["experiment_a"], row["variant_a"]) == ("L1", "ea", "treatment")
        assert (row["layer_b"], row["experiment_b"], row["variant_b"]) == ("L2", "eb", "treatment")
        coef, se, p = _expected(users, metric)
        assert row["contrast"] == pytest.approx(coef, rel=1e-9)
        assert row["p_value"] == pytest.approx(p, rel=1e-6)
        assert row["ci_high"] - row["ci_low"] == pytest.approx(2 * 1.959963985 * se, rel=1e-6)
        assert row["users"] == 4 * USERS_PER_CELL
        assert row["contrast"] < 0  # the planted -0.3 (on a click probability of the 9 exposures after the first)
    p = sorted(r["p_value"] for r in rows.values())  # Holm over the pair's two rows
    assert sorted(r["p_adjusted"] for r in rows.values()) == pytest.approx([2 * p[0], max(2 * p[0], p[1])])


def test_a_significant_interaction_fails_a_soft_rule(spark, day):
    root, summary = day
    rules = {r["rule"]: r.asDict() for r in spark.read.parquet(f"{root}/out/rule_checks/dt={DAY}").collect()}
    rule = rules["experiment_interaction:ea:eb"]
    assert rule["severity"] == "soft" and not rule["passed"] and rule["violations"] == 2
    assert rule["threshold"] == pytest.approx(0.05)
    assert "ea=treatment x eb=treatment: exposure_ctr_global contrast" in rule["examples"][0]
    assert summary["status"] == "soft_rule_failed"
    assert summary["experiments"]["interactions"]["pairs"] == ["ea x eb"]


def test_too_few_users_in_a_cell_writes_no_row_and_says_so(spark, tmp_path):
    _write_day(spark, tmp_path)
    cfg = load_config(None, [*SETTINGS, "experiments.min_users_per_cell=41"])
    summary = evaluate_day(spark, cfg, DAY, f"{tmp_path}/in", f"{tmp_path}/out")
    assert spark.read.parquet(f"{tmp_path}/out/experiment_interactions/dt={DAY}").count() == 0
    assert any("interactions ea x eb: 1 variant pair(s) not tested" in n for n in summary["notes"])


def test_a_population_restricts_srm_and_every_statistic_to_its_users(spark, tmp_path):
    _write_day(spark, tmp_path)
    population = "experiments.per_experiment={ea={population=\"region = 'north'\"}}"
    summary = evaluate_day(spark, load_config(None, [*SETTINGS, population]), DAY, f"{tmp_path}/in", f"{tmp_path}/out")
    ea = summary["experiments"]["experiments"]["ea"]
    assert ea["users"] == {"control": 2 * USERS_PER_CELL // 2, "treatment": 2 * USERS_PER_CELL // 2}
    assert ea["population"] == "region = 'north'"
    assert summary["experiments"]["experiments"]["eb"]["users"] == {"control": 80, "treatment": 80}
    rows = spark.read.parquet(f"{tmp_path}/out/experiments/dt={DAY}").where("experiment = 'ea' AND slice = 'all'")
    north = [u for u in _users() if u[3] == "north"]
    for r in rows.collect():
        assert r["n"] + r["control_n"] == len(north)
    ctr = rows.where("metric = 'exposure_ctr'").first()
    treated = [c for _, a, _, _, c in north if a == 1]
    assert ctr["value"] == pytest.approx(sum(treated) / (10 * len(treated)))
    inter = spark.read.parquet(f"{tmp_path}/out/experiment_interactions/dt={DAY}").collect()
    assert {r["users"] for r in inter} == {len(north)}  # ea's cells hold its population only


@pytest.mark.parametrize(
    ("population", "says"),
    [
        ("planet = 'mars'", "'planet' is not a column of the exposures (no users table at"),
        ("region + 1", "a population is a condition (a boolean)"),
    ],
)
def test_a_population_spark_cannot_evaluate_exits_3_before_any_row_is_read(spark, tmp_path, population, says):
    _write_day(spark, tmp_path)
    cfg = load_config(None, [*SETTINGS, f'experiments.per_experiment={{ea={{population="{population}"}}}}'])
    with pytest.raises(ConfigError, match=r"experiments\.per_experiment\.ea\.population") as err:
        evaluate_day(spark, cfg, DAY, f"{tmp_path}/in", f"{tmp_path}/out")
    assert says in str(err.value)
    assert not (tmp_path / "out" / "metrics").exists()


@pytest.mark.parametrize(
    ("population", "says"),
    [
        ("java_method('java.lang.System', 'exit', 0) = 1", "java_method"),
        ("count(region) > 1", "count is an aggregate"),
        ("1 = 1", "reads no column"),
        ("region in (select region from t)", "a query"),
    ],
)
def test_a_population_outside_the_grammar_is_refused_as_the_config_loads(population, says):
    with pytest.raises(ConfigError, match=r"experiments\.per_experiment\.ea\.population") as err:
        load_config(None, [f'experiments.per_experiment={{ea={{population="{population}"}}}}'])
    assert says in str(err.value)


def test_the_report_shows_the_interaction_table_and_flags_the_pair(day, tmp_path):
    from recsys_spark.report import write_report

    root, _ = day
    page = write_report(f"{root}/out", DAY, DAY, load_config(None, SETTINGS), out=str(tmp_path / "r.html"))
    html = open(page, encoding="utf-8").read()
    assert 'id="experiment-interactions"' in html and html.count('class="interaction"') == 2
    assert html.count('data-flagged="yes"') == 2 and "ea treatment (L1)" in html


def test_a_population_that_admits_nobody_says_so_and_does_not_blame_the_ids(spark, tmp_path):
    # every assigned id matched an exposure: the population, not an id format, left the experiment empty
    _write_day(spark, tmp_path)
    population = "experiments.per_experiment={ea={population=\"region = 'west'\"}}"
    summary = evaluate_day(spark, load_config(None, [*SETTINGS, population]), DAY, f"{tmp_path}/in", f"{tmp_path}/out")
    ea = summary["experiments"]["experiments"]["ea"]
    assert ea["state"] == "not_compared" and not ea.get("users")
    why = ea["reason"]
    assert "region = 'west'" in why and f"none of the {4 * USERS_PER_CELL}" in why, why
    assert "matched" not in why and "format" not in why, why
    assert summary["experiments"]["experiments"]["eb"]["users"] == {"control": 80, "treatment": 80}
