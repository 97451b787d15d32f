"""A/B experiments through the whole daily job and the window command, on hand-built days whose
per-user values are the golden examples of REFERENCES.md ("one golden table, many paths")."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from helpers.days import NOON, day_input, run_day, write
from helpers.input_ddl import CLICK_DDL, DAY, EXPOSURE_DDL, T0
from pyspark.sql import functions as F
from scipy import stats

from recsys_spark.cli.lines import experiment_lines
from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.experiments.arm_sums import arm_sums
from recsys_spark.experiments.assignments import user_variants
from recsys_spark.experiments.checks import srm_check
from recsys_spark.experiments.tables import EXPERIMENT, VARIANT
from recsys_spark.experiments.user_sums import user_business_sums, user_values
from recsys_spark.experiments.window import run_window
from recsys_spark.io.staged import DailyOutput
from recsys_spark.kernels.metric_specs import parse_metric
from recsys_spark.registry import LIST_METRICS
from recsys_spark.schema import SLICE, USER, USER_METRICS_DDL

pytestmark = pytest.mark.spark

PREVIOUS = DAY - dt.timedelta(days=1)
ASSIGNMENT_DDL = "user_id string, experiment string, variant string, layer string"

# experiment "ctr" (layer L1): per-user impressions and clicks of the delta-method golden example
CTR = {"control": ([10, 5, 8, 12, 3, 7], [1, 0, 2, 1, 0, 1]), "treatment": ([9, 6, 11, 4, 10, 8], [2, 1, 2, 0, 3, 1])}
# experiment "cup" (layer L2): one list of 10 items a day; clicks on the first y items today, x yesterday, so
# precision@10 (user_avg) is y / 10 today and x / 10 yesterday: the CUPED golden example divided by 10
CUP = {"control": ([3, 5, 2, 8, 4, 6], [2, 4, 2, 7, 3, 5]), "treatment": ([4, 7, 3, 9, 5, 8], [2, 5, 2, 7, 4, 6])}
# experiment "srm" (layer L1): 600 vs 400 users with one exposure each (planned 50/50); the same users are
# in "lay" (layer L3): control 300 A / 300 B, treatment 100 A / 300 B
SRM = {"control": 600, "treatment": 400}
#: the golden values are the fixed-horizon tests' (the default, sequential, is checked against them below); the
#: decisions read exposure_ctr only, so the tested metrics are these two
FIXED = ["experiments.inference=fixed", 'experiments.goals=["exposure_ctr_global"]', "experiments.guardrails=[]"]
SETTINGS = [
    "metrics.k=[10]",
    "rules.fail_on_hard=false",
    "experiments.cuped_days=1",
    'experiments.metrics=["exposure_ctr_global", "precision@10_user_avg"]',
    "experiments.min_users_per_arm=5",
    *FIXED,
]


def _day_rows(day: dt.date, cup_index: int):
    t0 = T0.replace(year=day.year, month=day.month, day=day.day)
    exposures, clicks = [], []

    def user(uid: str, n_items: int, n_clicks: int) -> None:
        request = f"{uid}-{day}"
        for p in range(1, n_items + 1):
            exposures.append((uid, f"s-{uid}", request, f"i{p}", p, 1.0 - p / 100, t0))
            if p <= n_clicks:
                clicks.append((uid, f"s-{uid}", request, f"i{p}", t0 + dt.timedelta(minutes=1)))

    for arm, (impressions, n_clicks) in CTR.items():  # today only: no covariate, the plain delta method
        for i, (n, c) in enumerate(zip(impressions, n_clicks, strict=True)):
            if day == DAY:
                user(f"ctr-{arm}-{i}", n, c)
    for arm, values in CUP.items():
        for i, y in enumerate(values[cup_index]):
            user(f"cup-{arm}-{i}", 10, y)
    user("cup-both", 10, 1)  # assigned to both arms of cup: excluded and counted
    for arm, n in SRM.items():
        for i in range(n):
            user(f"srm-{arm}-{i}", 1, 0)
    return exposures, clicks


def _assignments(day: dt.date):
    rows = [(f"ctr-{arm}-{i}", "ctr", arm, "L1") for arm in CTR for i in range(6)]
    rows += [("ctr-control-nobody", "ctr", "control", "L1")]  # assigned, never exposed: does not count
    # cup starts today (yesterday is its users' pre-period: the CUPED covariate); cupw, the same users and
    # arms in the same layer, runs both days (the window test)
    for name in ("cup", "cupw") if day == DAY else ("cupw",):
        rows += [(f"cup-{arm}-{i}", name, arm, "L2") for arm in CUP for i in range(6)]
        rows += [("cup-both", name, "control", "L2"), ("cup-both", name, "treatment", "L2")]
    for arm, n in SRM.items():
        for i in range(n):
            lay = "A" if (arm == "control" and i < 300) or (arm == "treatment" and i < 100) else "B"
            rows += [(f"srm-{arm}-{i}", "srm", arm, "L1"), (f"srm-{arm}-{i}", "lay", lay, "L3")]
    return rows


@pytest.fixture(scope="module")
def golden(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("experiments")
    cfg = load_config(None, SETTINGS)
    summaries = {}
    for day, cup_index in ((PREVIOUS, 1), (DAY, 0)):
        exposures, clicks = _day_rows(day, cup_index)
        spark.createDataFrame(exposures, EXPOSURE_DDL).write.parquet(f"{root}/in/exposures/dt={day}")
        spark.createDataFrame(clicks, CLICK_DDL).write.parquet(f"{root}/in/clicks/dt={day}")
        spark.createDataFrame(_assignments(day), ASSIGNMENT_DDL).write.parquet(f"{root}/in/assignments/dt={day}")
        summaries[day] = evaluate_day(spark, cfg, day, f"{root}/in", f"{root}/out")
    return root, summaries


def _rows(spark, path):
    return [r.asDict() for r in spark.read.parquet(path).collect()]


def _one(rows, **where):
    found = [r for r in rows if all(r[k] == v for k, v in where.items())]
    assert len(found) == 1, (where, found)
    return found[0]


def test_ratio_metric_reproduces_the_delta_method_golden(spark, golden):
    root, _ = golden
    row = _one(_rows(spark, f"{root}/out/experiments/dt={DAY}"), experiment="ctr", metric="exposure_ctr", slice="all")
    assert row["method"] == "delta" and (row["n"], row["control_n"]) == (6, 6) and row["covariate_n"] == 0
    assert row["control_value"] == pytest.approx(0.1111111111, abs=1e-10)
    assert row["value"] == pytest.approx(0.1875)
    assert row["delta"] == pytest.approx(0.0763888889, abs=1e-10)
    assert row["se"] ** 2 == pytest.approx(1.0827617741e-03 + 1.1433919271e-03, rel=1e-9)
    assert row["rel_delta"] == pytest.approx(0.6875)
    z = row["delta"] / row["se"]
    assert row["p_value"] == pytest.approx(2 * stats.norm.sf(z), rel=1e-9)
    assert row["ci_low"] == pytest.approx(row["delta"] - stats.norm.ppf(0.975) * row["se"], rel=1e-9)
    assert row["mde"] == pytest.approx((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * row["se"], rel=1e-9)


def test_cuped_reproduces_the_golden_from_the_previous_days_table(spark, golden):
    root, summaries = golden
    row = _one(
        _rows(spark, f"{root}/out/experiments/dt={DAY}"),
        experiment="cup",
        metric="precision",
        aggregation="user_avg",
        slice="all",
    )
    assert row["method"] == "welch_cuped" and row["covariate_n"] == 12
    # cupw ran yesterday too: its users' yesterday is not pre-treatment, so it gives no covariate
    cupw = _one(
        _rows(spark, f"{root}/out/experiments/dt={DAY}"),
        experiment="cupw",
        metric="precision",
        aggregation="user_avg",
        slice="all",
    )
    assert cupw["method"] == "welch" and cupw["covariate_n"] == 0
    assert row["delta"] == pytest.approx(0.07630685675, abs=1e-10)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((0.02309329785, 0.12952041566), abs=1e-9)
    assert row["p_value"] == pytest.approx(0.0097343930, abs=1e-9)
    section = summaries[DAY]["experiments"]["experiments"]["cup"]
    assert section["users_with_covariate"]["precision@10_user_avg"] == 12
    assert section["excluded_multiple_variants"] == 1


def test_holm_over_the_metrics_of_an_experiment(spark, golden):
    root, _ = golden
    rows = [
        r for r in _rows(spark, f"{root}/out/experiments/dt={DAY}") if r["experiment"] == "cup" and r["slice"] == "all"
    ]
    assert len(rows) == 2  # two metrics x one treatment
    p = sorted(r["p_value"] for r in rows)
    adjusted = {r["p_value"]: r["p_adjusted"] for r in rows}
    assert adjusted[p[0]] == pytest.approx(min(1.0, 2 * p[0]))
    assert adjusted[p[1]] == pytest.approx(max(min(1.0, 2 * p[0]), p[1]))


def test_srm_fails_as_a_soft_rule_and_is_flagged(spark, golden):
    root, summaries = golden
    checks = _rows(spark, f"{root}/out/experiment_checks/dt={DAY}")
    srm = _one(checks, experiment="srm", check="srm")
    assert srm["p_value"] == pytest.approx(2.5396285894708634e-10, rel=1e-9) and not srm["passed"]
    assert _one(checks, experiment="ctr", check="srm")["passed"]
    assert _one(checks, experiment="ctr", check="compared")["passed"]
    assert _one(checks, experiment="ctr", check="compared")["detail"] == "control=6 compared with treatment=6"
    assert _one(checks, experiment="cup", check="multiple_assignment")["statistic"] == 1
    summary = summaries[DAY]
    assert summary["status"] == "soft_rule_failed"  # soft: flagged, not fatal (and never "ok")
    rule = next(r for r in summary["rules"] if r["rule"] == "experiment_srm:srm")
    assert rule["severity"] == "soft" and not rule["passed"]
    assert summary["experiments"]["status"] == "srm_failed"
    lines = experiment_lines(str(DAY), summary["experiments"])
    assert any("experiment srm: SRM FAILED" in line and "not to be trusted" in line for line in lines)
    # the assigned user without an exposure does not count
    assert summary["experiments"]["experiments"]["ctr"]["users"] == {"control": 6, "treatment": 6}


def test_layer_independence_is_chi2_contingency(spark, golden):
    root, _ = golden
    checks = [c for c in _rows(spark, f"{root}/out/experiment_checks/dt={DAY}") if c["check"] == "layer_independence"]
    assert len(checks) == 3  # L1 x L2, L1 x L3, L2 x L3
    l1_l3 = next(c for c in checks if c["detail"].startswith("layers L1 x L3"))
    ref = stats.chi2_contingency(np.array([[300, 300], [100, 300]]), correction=False)
    assert l1_l3["statistic"] == pytest.approx(ref.statistic) and l1_l3["p_value"] == pytest.approx(ref.pvalue)
    assert not l1_l3["passed"]
    assert all(c["passed"] for c in checks if c is not l1_l3)  # no user in both layers: nothing to test


def test_window_counts_each_user_once(spark, golden):
    root, _ = golden
    cfg = load_config(None, SETTINGS[:2] + ['experiments.metrics=["precision@10_user_avg"]', *FIXED])
    one_day = run_window(spark, cfg, "cupw", DAY, DAY, f"{root}/out")
    assert one_day["experiments"]["cupw"]["users"] == {"control": 6, "treatment": 6}
    rows = _rows(spark, f"{root}/out/experiment_window/experiment=cupw/window={DAY}_{DAY}")
    row = _one(rows, metric="precision", slice="all")
    # the unadjusted golden (no CUPED): Welch on y / 10
    assert row["method"] == "welch" and row["delta"] == pytest.approx(0.13333333333)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((-0.15845511087, 0.42512177753), abs=1e-9)
    assert row["p_value"] == pytest.approx(0.3322826189, abs=1e-9)
    # two days: a user's precision is over its two lists, (y + x) / 20; not a mean of daily results
    run_window(spark, cfg, "cupw", PREVIOUS, DAY, f"{root}/out")
    two = _one(
        _rows(spark, f"{root}/out/experiment_window/experiment=cupw/window={PREVIOUS}_{DAY}"),
        metric="precision",
        slice="all",
    )
    (yc, xc), (yt, xt) = (np.array(v, float) for v in CUP["control"]), (np.array(v, float) for v in CUP["treatment"])
    ref = stats.ttest_ind((yt + xt) / 20, (yc + xc) / 20, equal_var=False)
    assert two["delta"] == pytest.approx(((yt + xt) / 20).mean() - ((yc + xc) / 20).mean())
    assert two["p_value"] == pytest.approx(ref.pvalue, rel=1e-9)
    checks = _rows(spark, f"{root}/out/experiment_window_checks/experiment=cupw/window={PREVIOUS}_{DAY}")
    assert _one(checks, check="multiple_assignment")["statistic"] == 1
    # each table opens at its root, with the experiment and the window as columns from the path
    for table in ("experiment_window", "experiment_window_checks", "experiment_window_decisions"):
        spark_rows = spark.read.parquet(f"{root}/out/{table}").where("experiment = 'cupw'").count()
        frame = pd.read_parquet(f"{root}/out/{table}")
        assert spark_rows == len(frame[frame["experiment"] == "cupw"]) > 0
        assert "window" in ds.dataset(f"{root}/out/{table}", partitioning="hive").schema.names


def test_a_window_that_fails_srm_exits_8_when_its_severity_is_hard(spark, golden):
    from recsys_spark.cli.experiment import fail_on_hard_rules
    from recsys_spark.errors import HardRuleViolation

    root, _ = golden
    cfg = load_config(None, SETTINGS[:2] + ['experiments.metrics=["precision@10_user_avg"]', *FIXED])
    section = run_window(spark, cfg, "srm", DAY, DAY, f"{root}/out")
    assert section["status"] == "srm_failed"
    fail_on_hard_rules(section, "soft")  # soft: flagged on the lines and in the checks, exit 0
    with pytest.raises(HardRuleViolation, match="srm_failed") as raised:
        fail_on_hard_rules(section, "hard")
    assert raised.value.exit_code == 8
    checks = _rows(spark, f"{root}/out/experiment_window_checks/experiment=srm/window={DAY}_{DAY}")
    assert not _one(checks, check="srm")["passed"]  # written before the exit
    fail_on_hard_rules(run_window(spark, cfg, "ctr", DAY, DAY, f"{root}/out"), "hard")  # a sound window: exit 0


def test_without_assignments_the_job_says_so(spark, tmp_path):
    cfg = load_config(None, SETTINGS)
    from recsys_spark.experiments.stage import experiment_stage

    result = experiment_stage(spark, cfg, DAY, str(tmp_path / "nothing"), None, DailyOutput(spark, str(tmp_path), "x"))
    assert result.summary["status"] == "skipped" and "no assignments table" in result.notes[0]
    assert result.rules == [] and "skipped" in experiment_lines("d", result.summary)[0]


def test_business_sums_stay_in_the_user_partitions(spark):
    rows = spark.createDataFrame(
        [("all", "u1", "r1", "a", True), ("all", "u1", "r2", None, False)],
        f"{SLICE} string, {USER} string, request_id string, item_id string, clicked boolean",
    )
    by_user = rows.repartition(3, USER)
    plan = user_business_sums(by_user)._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1, plan  # the repartition by user only
    got = user_business_sums(by_user).collect()[0].asDict()
    assert (got["exposures"], got["clicked"], got["requests"], got["empty_requests"]) == (1, 1, 2, 1)


def test_summary_is_json_with_the_experiment_section(golden):
    _, summaries = golden
    text = json.dumps(summaries[DAY])
    assert '"experiments"' in text and summaries[PREVIOUS]["experiments"]["status"] == "srm_failed"


def test_experiment_command_parses_and_checks_its_window(capsys):
    from recsys_spark.cli import build_parser, run

    args = build_parser().parse_args(
        ["experiment", "--experiment", "x", "--start", "2026-11-01", "--end", "2026-11-03", "--output-root", "o"]
    )
    assert (args.command, args.experiment, args.end - args.start) == ("experiment", "x", dt.timedelta(days=2))
    assert (
        run(["experiment", "--experiment", "x", "--start", "2026-11-03", "--end", "2026-11-01", "--output-root", "o"])
        == 2
    )
    assert "before --start" in capsys.readouterr().err


def test_srm_severity_is_a_setting():
    from recsys_spark.experiments.checks import srm_rules
    from recsys_spark.experiments.tables import Check

    checks = [
        Check("e", "srm", 40.0, 2.5e-10, False, "users control=600, treatment=400"),
        Check("e", "multiple_assignment", 0.0, None, True, ""),
    ]
    (soft,) = srm_rules(checks, "soft", 0.001)
    (hard,) = srm_rules(checks, "hard", 0.001)
    assert (soft.rule, soft.severity, soft.passed, soft.rate) == ("experiment_srm:e", "soft", False, 2.5e-10)
    assert hard.severity == "hard"  # the pipeline then exits 8 after writing every output
    with pytest.raises(Exception, match="srm_severity"):
        load_config(None, ["experiments.srm_severity=fatal"])


def test_user_variants_one_map_per_user_null_for_several_variants_in_one_shuffle(spark):
    rows = [
        ("u1", "e1", "control", None),
        ("u1", "e1", "control", None),  # the same assignment twice: one variant
        ("u1", "e2", "treatment", None),
        ("u2", "e1", "control", None),
        ("u2", "e1", "treatment", None),  # two variants of e1: excluded from e1 (null), kept in e2
        ("u2", "e2", "control", None),
    ]
    assignments = spark.createDataFrame(rows, "user_id string, experiment string, variant string, layer string")
    got = {r[USER]: dict(r["variants"]) for r in user_variants(assignments).collect()}
    assert got == {"u1": {"e1": "control", "e2": "treatment"}, "u2": {"e1": None, "e2": "control"}}
    plan = user_variants(assignments)._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange hashpartitioning") == 1, plan  # one aggregation by user, no second shuffle


def test_per_user_sums_weight_list_means_by_ranked_lists_and_user_means_skip_users_without_lists(spark, tmp_path):
    # user_metrics as the metric stage writes it (one row per slice, user and k): a has two ranked lists
    # (mean precision@10 0.3), b one (0.1), c none (no value); the experiment sums must give
    # precision@10 per user over a and b only, (0.3 + 0.1) / 2, and per list (0.6 + 0.1) / 3
    def row(user, lists, precision):
        values = {m: (precision if m == "precision" else 0.5) if lists else float("nan") for m in LIST_METRICS}
        return ("all", user, 10, 10, 1, lists, lists, 0.5, 0.5, *values.values(), lists)

    path = str(tmp_path / "user_metrics")
    rows = [row("a", 2, 0.3), row("b", 1, 0.1), row("c", 0, None)]
    spark.createDataFrame(rows, USER_METRICS_DDL).write.parquet(path)
    values = user_values(spark.read.schema(USER_METRICS_DDL).parquet(path), [10])
    sums = {r[USER]: r["precision_at_10_sum"] for r in values.collect()}
    assert sums == pytest.approx({"a": 0.6, "b": 0.1, "c": 0.0})
    specs = [parse_metric("precision@10_user_avg"), parse_metric("precision@10_list_avg")]
    arms = arm_sums(values.withColumn(EXPERIMENT, F.lit("e")).withColumn(VARIANT, F.lit("control")), specs, False)
    arm = arms[("e", "control", "all")]
    per_user, per_list = specs[0].name, specs[1].name
    assert (arm[f"{per_user}|n"], arm[f"{per_user}|x"]) == pytest.approx((2.0, 0.4))
    assert (arm[f"{per_list}|x"], arm[f"{per_list}|y"]) == pytest.approx((0.7, 3.0))
    assert arm["users"] == 3


@pytest.mark.parametrize("cuped", [False, True])
def test_f_global_and_capped_ctr_are_experiment_metrics_with_the_daily_formulas(spark, cuped):
    """f1@10_global and f0.5@10_global: Σ H / Σ (a² Rel + 10 L) (1 + a²), the daily global F; capped_ctr_global
    (cap 2): Σ min(clicked, 2) / Σ exposures; each with the delta method over the arm's users.  With CUPED and no
    pre-period (null covariates) nothing is adjusted: a capped null stays null (least(null, 2) would be 2)."""
    from recsys_spark.kernels.experiments import arm_stats
    from recsys_spark.kernels.sums import RatioStats

    hits = np.array([1.0, 0.0, 3.0, 2.0, 0.0])
    lists = np.array([1.0, 2.0, 2.0, 1.0, 0.0])
    rel = np.array([2.0, 1.0, 4.0, 2.0, 0.0])
    clicked = np.array([1.0, 0.0, 5.0, 2.0, 0.0])
    exposures = np.array([10.0, 8.0, 20.0, 9.0, 4.0])
    columns = ["hits_at_10", "lists_ranked", "relevant", "clicked", "exposures"]
    rows = [("e", "control", "all", *map(float, r)) for r in zip(hits, lists, rel, clicked, exposures, strict=True)]
    ddl = f"{EXPERIMENT} string, {VARIANT} string, {SLICE} string, " + ", ".join(f"{c} double" for c in columns)
    frame = spark.createDataFrame(rows, ddl)
    if cuped:
        frame = frame.select("*", *[F.lit(None).cast("double").alias(f"_cov_{c}") for c in columns])
    specs = [parse_metric("f1@10_global"), parse_metric("f0.5@10_global"), parse_metric("capped_ctr_global", 2)]
    arm = arms = arm_sums(frame, specs, cuped)[("e", "control", "all")]
    for spec, alpha in zip(specs[:2], (1.0, 0.5), strict=True):
        got, a2 = arm_stats(arm, spec), alpha**2
        p, r = hits.sum() / (10 * lists.sum()), hits.sum() / rel.sum()
        assert got.ratio == pytest.approx((1 + a2) * p * r / (a2 * p + r))
        ok = a2 * rel + 10 * lists > 0  # the users with a ranked list
        want = RatioStats.from_values((1 + a2) * hits[ok], (a2 * rel + 10 * lists)[ok])
        assert got.var_ratio == pytest.approx(want.var_ratio, rel=1e-9)
    got = arm_stats(arm, specs[2])
    want = RatioStats.from_values(np.minimum(clicked, 2), exposures)  # (1 + 0 + 2 + 2 + 0) / 51
    assert (got.ratio, got.var_ratio) == (pytest.approx(5 / 51), pytest.approx(want.var_ratio, rel=1e-9))
    if cuped:
        assert arms[f"{specs[2].name}|cn"] == 0.0


# --- nothing compared: never "SRM ok" nor "no significant difference" -----------------------------------------
# four users with one request of two items each, one click each; three experiments on them: "nocontrol" (arms
# A and B, no arm named control), "allboth" (every user in both arms) and "fine" (2 control, 2 treatment); a
# second day has the same exposures and an assignments table whose ids are integers (1 for "u1")
FOUR = [
    (f"u{i}", f"s{i}", f"r{i}", item, p, 1.0 - p / 10, NOON) for i in range(1, 5) for p, item in ((1, "a"), (2, "b"))
]
FOUR_CLICKS = [(f"u{i}", f"s{i}", f"r{i}", "a", NOON + dt.timedelta(minutes=1), "click") for i in range(1, 5)]
UNCOMPARED = (
    [("u1", "nocontrol", "A"), ("u2", "nocontrol", "A"), ("u3", "nocontrol", "B"), ("u4", "nocontrol", "B")]
    + [(f"u{i}", "allboth", arm) for i in range(1, 5) for arm in ("control", "treatment")]
    + [("u1", "fine", "control"), ("u2", "fine", "control"), ("u3", "fine", "treatment"), ("u4", "fine", "treatment")]
)
INT_IDS = [(1, "intids", "control"), (2, "intids", "control"), (3, "intids", "treatment"), (4, "intids", "treatment")]
SMALL = ("rules.fail_on_hard=false", 'experiments.metrics=["exposure_ctr_global"]')


def _assignment_schema(id_type: pa.DataType) -> pa.Schema:
    return pa.schema([("user_id", id_type), ("experiment", pa.string()), ("variant", pa.string())])


@pytest.fixture(scope="module")
def uncompared(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("uncompared")
    summaries = {}
    for name, rows, id_type in (("strings", UNCOMPARED, pa.string()), ("ints", INT_IDS, pa.int64())):
        day_input(root / name, FOUR, FOUR_CLICKS)
        write(root / name / "in" / "assignments" / f"dt={DAY}", rows, _assignment_schema(id_type))
        summaries[name] = run_day(spark, root / name, *SMALL)
    return root, summaries


def _line(summary, experiment):
    (line,) = [x for x in experiment_lines(str(DAY), summary["experiments"]) if f"experiment {experiment}:" in x]
    return line


def _says_nothing_was_compared(line):
    return "NOT COMPARED" in line and "SRM ok" not in line and "no significant difference" not in line


def test_an_experiment_without_a_control_arm_is_not_compared_and_fails_a_soft_rule(spark, uncompared):
    root, summaries = uncompared
    summary = summaries["strings"]
    checks = _rows(spark, f"{root}/strings/out/experiment_checks/dt={DAY}")
    compared = _one(checks, experiment="nocontrol", check="compared")
    assert not compared["passed"] and compared["statistic"] == 4
    assert compared["detail"] == "no control arm named 'control' (experiments.control); variants with users: A=2, B=2"
    section = summary["experiments"]["experiments"]["nocontrol"]
    assert (section["state"], section["reason"]) == ("not_compared", compared["detail"])
    assert section["users"] == {"A": 2, "B": 2} and section["significant"] == []
    rule = next(r for r in summary["rules"] if r["rule"] == "experiment_compared:nocontrol")
    assert rule["severity"] == "soft" and not rule["passed"] and rule["examples"] == [compared["detail"]]
    assert summary["status"] == "soft_rule_failed"
    assert summary["experiments"]["status"] == "not_compared"
    assert set(summary["experiments"]["not_compared"]) == {"nocontrol", "allboth"}
    assert f"experiment nocontrol not compared: {compared['detail']}" in summary["notes"]
    assert _says_nothing_was_compared(_line(summary, "nocontrol"))
    # the experiment beside it is compared as before
    fine = summary["experiments"]["experiments"]["fine"]
    assert (fine["state"], fine["reason"]) == ("ok", None)
    assert "SRM ok" in _line(summary, "fine") and "NOT COMPARED" not in _line(summary, "fine")
    assert next(r for r in summary["rules"] if r["rule"] == "experiment_compared:fine")["passed"]


def test_an_experiment_whose_users_are_all_in_both_arms_is_not_compared_and_its_srm_is_not_tested(spark, uncompared):
    root, summaries = uncompared
    summary = summaries["strings"]
    checks = _rows(spark, f"{root}/strings/out/experiment_checks/dt={DAY}")
    srm = _one(checks, experiment="allboth", check="srm")
    assert srm["p_value"] is None and srm["statistic"] is None and not srm["passed"]  # not p = 1, "ok"
    assert srm["detail"].startswith("not tested: ")
    compared = _one(checks, experiment="allboth", check="compared")
    assert compared["detail"] == "no user left after excluding 4 user(s) with several variants"
    assert not compared["passed"] and compared["statistic"] == 0
    assert _one(checks, experiment="allboth", check="multiple_assignment")["statistic"] == 4
    section = summary["experiments"]["experiments"]["allboth"]
    assert section["state"] == "not_compared" and section["srm_p_value"] is None and not section["srm_passed"]
    assert not any(r["rule"] == "experiment_srm:allboth" and r["passed"] for r in summary["rules"])
    assert not next(r for r in summary["rules"] if r["rule"] == "experiment_compared:allboth")["passed"]
    assert not any("sample-ratio mismatch" in n for n in summary["notes"])  # no split was seen: no mismatch
    line = _line(summary, "allboth")
    assert _says_nothing_was_compared(line) and "excluded=4" in line


def test_assignment_ids_in_another_format_than_the_exposures_are_reported_not_lost(spark, uncompared):
    root, summaries = uncompared
    summary = summaries["ints"]
    detail = (
        "no assigned user matched an exposure of the day: 4 assignment id(s), 0 matched "
        "(e.g. assignment id '1', exposure id 'u1'; ids are compared as strings)"
    )
    checks = _rows(spark, f"{root}/ints/out/experiment_checks/dt={DAY}")
    compared = _one(checks, experiment="intids", check="compared")
    assert (compared["passed"], compared["detail"]) == (False, detail)
    assert not _one(checks, experiment="intids", check="srm")["passed"]
    section = summary["experiments"]["experiments"]["intids"]
    assert (section["state"], section["reason"]) == ("not_compared", detail)
    assert (section["assigned_ids"], section["matched_ids"], section["users"]) == (4, 0, {})
    assert summary["status"] == "soft_rule_failed" and summary["experiments"]["status"] == "not_compared"
    assert not next(r for r in summary["rules"] if r["rule"] == "experiment_compared:intids")["passed"]
    assert _says_nothing_was_compared(_line(summary, "intids")) and "'u1'" in _line(summary, "intids")
    # a day whose ids match says how many of them did
    fine = summaries["strings"]["experiments"]["experiments"]["fine"]
    assert (fine["assigned_ids"], fine["matched_ids"]) == (4, 4)


def test_an_uncompared_experiment_is_a_rule_with_the_srm_severity():
    from recsys_spark.experiments.checks import srm_rules
    from recsys_spark.experiments.tables import Check

    checks = [
        Check("e", "srm", None, None, False, "not tested: users none; planned equal"),
        Check("e", "compared", 0.0, None, False, "no user left after excluding 4 user(s) with several variants"),
        Check("e", "multiple_assignment", 4.0, None, False, ""),
    ]
    rules = {r.rule: r for r in srm_rules(checks, "hard", 0.001)}
    assert set(rules) == {"experiment_srm:e", "experiment_compared:e"}
    compared = rules["experiment_compared:e"]
    assert (compared.severity, compared.passed, compared.violations, compared.rate) == ("hard", False, 1, None)
    assert compared.examples == ["no user left after excluding 4 user(s) with several variants"]
    assert (rules["experiment_srm:e"].passed, rules["experiment_srm:e"].rate) == (False, None)


@pytest.mark.parametrize(
    "experiment, reason",
    [
        ("nocontrol", "no control arm named 'control' (experiments.control); variants with users: A=2, B=2"),
        ("allboth", "no user left after excluding 4 user(s) with several variants"),
    ],
)
def test_window_of_an_experiment_where_nothing_was_compared_says_so(spark, uncompared, experiment, reason):
    root, _ = uncompared
    cfg = load_config(None, ["metrics.k=[1]", *SMALL])
    section = run_window(spark, cfg, experiment, DAY, DAY, f"{root}/strings/out")
    assert section["status"] == "not_compared" and section["experiments"][experiment]["reason"] == reason
    assert f"experiment {experiment} not compared: {reason}" in section["notes"]
    (line,) = experiment_lines(f"{DAY}..{DAY}", section)
    assert _says_nothing_was_compared(line)
    window = f"experiment={experiment}/window={DAY}_{DAY}"
    compared = _one(_rows(spark, f"{root}/strings/out/experiment_window_checks/{window}"), check="compared")
    assert (compared["passed"], compared["detail"]) == (False, reason)


def test_srm_check_of_an_experiment_without_users_is_not_tested_rather_than_passed():
    for users, weights in (({}, {}), ({"control": 5}, {}), ({}, {"e/control": 1.0, "e/treatment": 1.0})):
        check = srm_check("e", users, weights, 0.001)
        assert (check.statistic, check.p_value, check.passed) == (None, None, False), users
        assert check.detail.startswith("not tested: ")
    # planned weights make a variant without users an arm of 0: tested, E = 2.5 each, chi2 = 2 * 2.5^2 / 2.5 = 5
    planned = srm_check("e", {"control": 5}, {"e/control": 1.0, "e/treatment": 1.0}, 0.001)
    assert planned.statistic == pytest.approx(5.0) and planned.p_value == pytest.approx(stats.chi2.sf(5.0, 1))


def test_a_line_of_an_uncompared_experiment_keeps_a_failed_srm_and_never_says_ok():
    # weights planned 50/50 and only the control has users: SRM 5 vs 0 ran and failed, nothing compared
    base = {"users": {"control": 5}, "excluded_multiple_variants": 0, "significant": [], "state": "not_compared"}
    reason = "no variant besides the control 'control' (5 users)"
    failed = {**base, "reason": reason, "srm_p_value": 2.5e-4, "srm_passed": False}
    (line,) = experiment_lines("d", {"status": "srm_failed", "experiments": {"e": failed}})
    assert line == f"d: experiment e: NOT COMPARED: {reason}; users control=5; SRM FAILED (p=0.00025)"
    passed = {**base, "reason": reason, "srm_p_value": 0.3, "srm_passed": True}
    (line,) = experiment_lines("d", {"status": "not_compared", "experiments": {"e": passed}})
    assert line == f"d: experiment e: NOT COMPARED: {reason}; users control=5"


# --- always-valid inference and decisions through the job ----------------------------------------------------------
def test_the_default_rows_are_the_sequence_around_the_fixed_estimates(spark, golden):
    """The window with the default config: the same Δ and se as the fixed-horizon golden, the confidence
    sequence at N = both arms' users around it, its p-value, ci_method = sequential."""
    from recsys_spark.kernels.sequential import sequential_half_width, sequential_p_value

    root, _ = golden
    cfg = load_config(None, SETTINGS[:2] + ['experiments.metrics=["exposure_ctr_global"]'])
    assert cfg.experiments.inference == "sequential"
    run_window(spark, cfg, "ctr", DAY, DAY, f"{root}/out")
    window = _rows(spark, f"{root}/out/experiment_window/experiment=ctr/window={DAY}_{DAY}")
    seq = _one(window, slice="all", metric="exposure_ctr")
    fixed = _one(_rows(spark, f"{root}/out/experiments/dt={DAY}"), experiment="ctr", metric="exposure_ctr", slice="all")
    assert (seq["ci_method"], fixed["ci_method"]) == ("sequential", "fixed")
    assert seq["delta"] == pytest.approx(fixed["delta"], rel=1e-12) and seq["se"] == pytest.approx(
        fixed["se"], rel=1e-12
    )
    width = sequential_half_width(seq["se"] ** 2, 12, 0.95, 5000)
    assert (seq["ci_low"], seq["ci_high"]) == pytest.approx((seq["delta"] - width, seq["delta"] + width), rel=1e-12)
    assert seq["p_value"] == pytest.approx(sequential_p_value(seq["delta"], seq["se"] ** 2, 12), rel=1e-12)
    assert seq["p_value"] > fixed["p_value"] and seq["ci_high"] - seq["ci_low"] > fixed["ci_high"] - fixed["ci_low"]
    # pv_failure_rate and ndcg@10 (the default guardrail and goal) were tested too, though not in metrics
    metrics = {r["metric"] for r in window}
    assert metrics == {"exposure_ctr", "ndcg", "pv_failure_rate"}
    (decision,) = _rows(spark, f"{root}/out/experiment_window_decisions/experiment=ctr/window={DAY}_{DAY}")
    assert decision["decision"] == "invalid" and decision["ci_method"] == "sequential"
    assert decision["reasons"] == [
        "too few users: control has 6 (experiments.min_users_per_arm = 100)",
        "too few users: variant has 6 (experiments.min_users_per_arm = 100)",
    ]


def test_the_day_writes_a_decision_per_experiment_and_variant_with_its_reasons(spark, golden):
    root, summaries = golden
    rows = {r["experiment"]: r for r in _rows(spark, f"{root}/out/experiment_decisions/dt={DAY}")}
    assert set(rows) == {"ctr", "cup", "cupw", "srm", "lay"}
    assert all(r["variant"] == "treatment" or r["experiment"] == "lay" for r in rows.values())
    # ctr: +0.076 [−0.016, +0.169] (fixed, normal): not yet
    assert rows["ctr"]["decision"] == "not_enough_evidence" and (
        rows["ctr"]["control_n"],
        rows["ctr"]["variant_n"],
    ) == (6, 6)
    assert rows["ctr"]["reasons"][0].startswith("goal exposure_ctr_global inconclusive: +0.07639 [")
    assert rows["cup"]["decision"] == "invalid"  # cup-both is in both arms
    assert rows["cup"]["reasons"] == ["multiple assignment: 1 user(s) with several variants"]
    assert rows["srm"]["decision"] == "invalid" and rows["srm"]["reasons"][0].startswith(
        "sample-ratio mismatch (p=2.54e-10)"
    )
    section = summaries[DAY]["experiments"]["experiments"]
    assert section["ctr"]["decisions"]["treatment"]["decision"] == "not_enough_evidence"
    lines = experiment_lines(str(DAY), summaries[DAY]["experiments"])
    assert (
        f"{DAY}: experiment ctr treatment: NOT ENOUGH EVIDENCE YET: goal exposure_ctr_global inconclusive: +0.07639"
        in "\n".join(lines)
    )


def test_the_day_decides_on_the_users_accumulated_since_the_first_day(spark, golden):
    """cupw, srm and lay ran both days: their ``experiment_cumulative`` rows count each user of the two days once
    (precision over both days' lists, as the window) and their decisions say ``basis = cumulative``; ctr and cup
    started on the day: the day's rows, ``basis = day``."""
    root, summaries = golden
    rows = _rows(spark, f"{root}/out/experiment_cumulative/dt={DAY}")
    decided = {r["experiment"]: r for r in _rows(spark, f"{root}/out/experiment_decisions/dt={DAY}")}
    assert {e: r["basis"] for e, r in decided.items()} == {
        "ctr": "day",
        "cup": "day",
        "cupw": "cumulative",
        "srm": "cumulative",
        "lay": "cumulative",
    }
    cupw = _one(rows, experiment="cupw", metric="precision", slice="all")
    assert (cupw["first_day"], cupw["days"], cupw["method"]) == (PREVIOUS.isoformat(), 2, "welch")
    (yc, xc), (yt, xt) = (np.array(v, float) for v in CUP["control"]), (np.array(v, float) for v in CUP["treatment"])
    ref = stats.ttest_ind((yt + xt) / 20, (yc + xc) / 20, equal_var=False)
    assert cupw["delta"] == pytest.approx(((yt + xt) / 20).mean() - ((yc + xc) / 20).mean())
    assert cupw["p_value"] == pytest.approx(ref.pvalue, rel=1e-9)
    ctr = _one(rows, experiment="ctr", metric="exposure_ctr", slice="all")
    day = _one(_rows(spark, f"{root}/out/experiments/dt={DAY}"), experiment="ctr", metric="exposure_ctr", slice="all")
    assert (ctr["first_day"], ctr["days"], ctr["delta"]) == (DAY.isoformat(), 1, day["delta"])
    section = summaries[DAY]["experiments"]["experiments"]
    assert (
        section["cupw"]["cumulative"]["days"] == 2 and section["cupw"]["cumulative"]["excluded_multiple_variants"] == 1
    )
    assert decided["cupw"]["decision"] == "invalid"  # cup-both has both arms
    lines = "\n".join(experiment_lines(str(DAY), summaries[DAY]["experiments"]))
    assert f"experiment cupw treatment: INVALID EXPERIMENT (on 2 days since {PREVIOUS}): multiple assignment" in lines
    first = {r["experiment"]: r["basis"] for r in _rows(spark, f"{root}/out/experiment_decisions/dt={PREVIOUS}")}
    assert set(first.values()) == {"day"}  # nothing before the first day
