"""The composite metric and the survey metrics through the daily job and the experiments (issue 43, items 3 and 9),
on two small hand-made days: the values by hand, and the intervals against scipy's t interval over the per-user
values (the user as the unit), computed here from the per-user table and the survey rows, not by the job's kernels.
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from helpers.days import CLICK_SCHEMA, EXPOSURE_SCHEMA, NOON, write
from scipy import stats

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 20)
BEFORE = DAY - dt.timedelta(days=1)
EXPOSURES = EXPOSURE_SCHEMA.append(pa.field("platform", pa.string()))
ASSIGNMENTS = pa.schema([("user_id", pa.string()), ("experiment", pa.string()), ("variant", pa.string())])
SURVEY = pa.schema([("user_id", pa.string()), ("question", pa.string()), ("score", pa.float64())])
LOG2_3 = math.log2(3)

# per user: platform, its requests (lists of items), the (request, item) it clicked
USERS = {
    "u1": ("ios", [["a", "b", "c"]], [(0, "a")]),  # ndcg@3 1, mrr 1
    "u2": ("ios", [["a", "b", "c"]], [(0, "b")]),  # ndcg@3 1/log2(3), mrr 1/2
    "u3": ("web", [["a", "b", "c"]], [(0, "c")]),  # ndcg@3 1/2, mrr 1/3
    "u4": ("web", [["a", "b"]], []),  # no ranked list: no ndcg, no mrr, no composite
    "u5": ("ios", [["a", "b", "c"], ["d", "e"]], [(0, "a"), (1, "e")]),  # ndcg@3 (1 + 1/log2(3))/2, mrr 3/4
    "u6": ("web", [["d", "e", "f"]], [(0, "f")]),  # as u3
}
#: 0.7 ndcg@3 + 0.3 mrr of each user with a ranked list, by hand
OVERALL = {
    "u1": 0.7 + 0.3,
    "u2": 0.7 / LOG2_3 + 0.3 / 2,
    "u3": 0.7 / 2 + 0.3 / 3,
    "u5": 0.7 * (1 + 1 / LOG2_3) / 2 + 0.3 * 3 / 4,
    "u6": 0.7 / 2 + 0.3 / 3,
}
PLATFORM = {u: p for u, (p, _, _) in USERS.items()}
ARMS = {"u1": "control", "u3": "control", "u5": "control", "u2": "treatment", "u4": "treatment", "u6": "treatment"}
SURVEY_ROWS = [
    ("u1", "Satisfaction", 5.0),
    ("u1", "Satisfaction", 3.0),  # u1's mean: 4
    ("u2", "satisfaction", 2.0),  # another spelling: the same question
    ("u3", "Satisfaction", 4.0),
    ("u5", "Satisfaction", 5.0),
    ("u6", "Satisfaction", 3.0),
    ("u9", "Satisfaction", 1.0),  # no exposure that day: counted, not used
    ("u1", "Would you recommend us?", 1.0),
    ("u3", "Would you recommend us?", 0.0),
    (None, "Satisfaction", 3.0),  # malformed: no user
    ("u2", None, 3.0),  # no question
    ("u2", "Satisfaction", float("nan")),  # a NaN score
    ("u2", "???", 4.0),  # nothing left of the question's name
    ("u4", "Satisfaction", None),  # no score
]
SATISFACTION = {"u1": 4.0, "u2": 2.0, "u3": 4.0, "u5": 5.0, "u6": 3.0}


def day_rows(day: dt.date) -> tuple[list[tuple], list[tuple]]:
    noon = NOON.replace(year=day.year, month=day.month, day=day.day)
    exposures, clicks = [], []
    for uid, (platform, requests, clicked) in USERS.items():
        for r, items in enumerate(requests):
            for p, item in enumerate(items, start=1):
                exposures.append((uid, f"s-{uid}", f"{uid}-r{r}", item, p, 1 - p / 10, noon, platform))
        for r, item in clicked:
            clicks.append((uid, f"s-{uid}", f"{uid}-r{r}", item, noon + dt.timedelta(minutes=1), "click"))
    return exposures, clicks


def t_reference(values, confidence: float = 0.95) -> tuple[float, float, float, float]:
    """(mean, se, low, high) of the t interval over per-user values, by scipy (zero width when every value is the
    same: scipy's is NaN there, the job's documented one is the value itself)."""
    x = np.asarray(list(values), dtype=float)
    se = stats.sem(x)
    if se == 0:
        return x.mean(), 0.0, x.mean(), x.mean()
    low, high = stats.t.interval(confidence, len(x) - 1, loc=x.mean(), scale=se)
    return x.mean(), se, low, high


SETTINGS = [
    "metrics.k=[1, 3]",
    'slices.names=["platform"]',
    'input.surveys="{input_root}/surveys/dt={date}"',
    "rules.fail_on_hard=false",
    'experiments.inference="fixed"',
    'experiments.metrics=["overall_user_avg", "survey_satisfaction_user_avg", "ndcg@3_user_avg"]',
    'experiments.goals=["overall_user_avg"]',
    "experiments.guardrails=[]",
]
COMPOSITES = """
[[metrics.composite]]
name = "overall"
components = [{ metric = "ndcg@3_user_avg", weight = 0.7 }, { metric = "mrr_user_avg", weight = 0.3 }]

[[metrics.composite]]
name = "overall_std"
standardise = true
components = [{ metric = "ndcg@3_user_avg", weight = 1 }, { metric = "hit_rate@1_user_avg", weight = 2 }]
"""


@pytest.fixture(scope="module")
def two_days(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("composite")
    for day in (BEFORE, DAY):
        exposures, clicks = day_rows(day)
        write(root / "in" / "exposures" / f"dt={day}", exposures, EXPOSURES)
        write(root / "in" / "clicks" / f"dt={day}", clicks, CLICK_SCHEMA)
        write(root / "in" / "assignments" / f"dt={day}", [(u, "exp", a) for u, a in ARMS.items()], ASSIGNMENTS)
    write(root / "in" / "surveys" / f"dt={DAY}", SURVEY_ROWS, SURVEY)  # none the day before: a note
    config = root / "composite.toml"
    config.write_text(COMPOSITES)
    cfg = load_config(config, SETTINGS)
    summaries = {d: evaluate_day(spark, cfg, d, str(root / "in"), str(root / "out")) for d in (BEFORE, DAY)}
    metrics = {d: pd.read_parquet(root / "out" / "metrics" / f"dt={d}") for d in (BEFORE, DAY)}
    users = {d: pd.read_parquet(root / "out" / "user_metrics" / f"dt={d}") for d in (BEFORE, DAY)}
    return root, summaries, metrics, users


def _row(metrics: pd.DataFrame, name: str, slice_key: str = "all") -> pd.Series:
    got = metrics[(metrics["metric"] == name) & (metrics["slice"] == slice_key)]
    assert len(got) == 1, (name, slice_key, got)
    return got.iloc[0]


@pytest.mark.parametrize("platform", [None, "ios", "web"])
def test_the_composite_is_the_mean_of_the_users_hand_computed_values_with_scipys_t_interval(two_days, platform):
    _, _, metrics, _ = two_days
    slice_key = "all" if platform is None else f"platform={platform}"
    values = [v for u, v in OVERALL.items() if platform is None or PLATFORM[u] == platform]  # u4 has none
    row = _row(metrics[DAY], "overall", slice_key)
    mean, se, low, high = t_reference(values)
    assert (row["aggregation"], row["n"], row["ci_method"]) == ("user_avg", len(values), "t") and pd.isna(row["k"])
    assert row["value"] == pytest.approx(mean, rel=1e-12)
    assert row["se"] == pytest.approx(se, rel=1e-9)
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))


def test_the_composite_by_hand(two_days):
    # (1 + 0.7/log2(3) + 0.15 + 0.45 + 0.7 (1 + 1/log2(3))/2 + 0.225 + 0.45) / 5 users with a ranked list
    _, _, metrics, _ = two_days
    by_hand = (1.0 + 0.7 / LOG2_3 + 0.15 + 0.45 + 0.35 * (1 + 1 / LOG2_3) + 0.225 + 0.45) / 5
    assert _row(metrics[DAY], "overall")["value"] == pytest.approx(by_hand, rel=1e-12)


def test_a_standardised_composite_divides_by_the_reference_days_per_user_spread(two_days):
    _, summaries, metrics, users = two_days
    # the first day has no earlier day to take the spread from: no row, and a note (no value on another scale)
    assert metrics[BEFORE][metrics[BEFORE]["metric"] == "overall_std"].empty
    assert any("composite overall_std not computed" in n for n in summaries[BEFORE]["notes"])
    before = users[BEFORE][users[BEFORE]["slice"] == "all"]
    sd_ndcg = before[before["k"] == 3]["ndcg"].dropna().std(ddof=1)
    sd_hit = before[before["k"] == 1]["hit_rate"].dropna().std(ddof=1)
    today = users[DAY][users[DAY]["slice"] == "all"]
    ndcg = today[today["k"] == 3].set_index("user_id")["ndcg"]
    hit = today[today["k"] == 1].set_index("user_id")["hit_rate"]
    values = (ndcg / sd_ndcg + 2 * hit / sd_hit).dropna()
    row = _row(metrics[DAY], "overall_std")
    mean, se, _, _ = t_reference(values)
    assert (row["value"], row["se"], row["n"]) == (pytest.approx(mean), pytest.approx(se), 5)


def test_the_composite_is_an_experiment_metric_and_a_goal(two_days):
    root, summaries, _, _ = two_days
    rows = pd.read_parquet(root / "out" / "experiments" / f"dt={DAY}")
    row = rows[(rows["metric"] == "overall") & (rows["slice"] == "all")].iloc[0]
    control = [OVERALL[u] for u in ("u1", "u3", "u5")]
    treatment = [OVERALL["u2"], OVERALL["u6"]]  # u4 has no composite
    assert row["aggregation"] == "user_avg"
    assert (row["value"], row["control_value"]) == (pytest.approx(np.mean(treatment)), pytest.approx(np.mean(control)))
    welch = stats.ttest_ind(treatment, control, equal_var=False)
    assert row["p_value"] == pytest.approx(welch.pvalue, rel=1e-6)
    decisions = pd.read_parquet(root / "out" / "experiment_decisions" / f"dt={DAY}")
    assert not decisions.empty


@pytest.mark.parametrize("platform", [None, "ios", "web"])
def test_a_survey_question_is_the_mean_of_the_respondents_means_with_scipys_interval(two_days, platform):
    _, _, metrics, _ = two_days
    slice_key = "all" if platform is None else f"platform={platform}"
    values = [v for u, v in SATISFACTION.items() if platform is None or PLATFORM[u] == platform]
    row = _row(metrics[DAY], "survey_satisfaction", slice_key)
    mean, se, low, high = t_reference(values)
    assert (row["aggregation"], row["n"], row["ci_method"]) == ("user_avg", len(values), "t")
    assert row["value"] == pytest.approx(mean, rel=1e-12)
    assert (row["se"], row["ci_low"], row["ci_high"]) == (pytest.approx(se), pytest.approx(low), pytest.approx(high))


def test_surveys_by_hand_and_their_counts(two_days):
    # satisfaction: u1 (5 + 3)/2 = 4, u2 2, u3 4, u5 5, u6 3 -> 18/5 = 3.6 (u9 has no exposure that day)
    # would you recommend us: u1 1, u3 0 -> 0.5
    _, summaries, metrics, _ = two_days
    assert _row(metrics[DAY], "survey_satisfaction")["value"] == pytest.approx(3.6)
    assert _row(metrics[DAY], "survey_would_you_recommend_us")["value"] == pytest.approx(0.5)
    quality = summaries[DAY]["data_quality"]
    assert quality["survey_rows"] == len(SURVEY_ROWS)
    assert quality["survey_malformed_rows"] == 5
    assert quality["survey_respondents_without_exposures"] == 1
    assert any("spelt several ways" in n for n in summaries[DAY]["notes"])
    # the day before had no survey partition: a note, no survey row, no failure
    assert any("no survey partition" in n for n in summaries[BEFORE]["notes"])
    assert not metrics[BEFORE]["metric"].str.startswith("survey_").any()


def test_a_survey_question_is_an_experiment_metric(two_days):
    root, _, _, _ = two_days
    rows = pd.read_parquet(root / "out" / "experiments" / f"dt={DAY}")
    row = rows[(rows["metric"] == "survey_satisfaction") & (rows["slice"] == "all")].iloc[0]
    assert (row["value"], row["control_value"]) == (pytest.approx((2.0 + 3.0) / 2), pytest.approx((4 + 4 + 5) / 3))


@pytest.mark.parametrize(
    ("schema", "row", "message"),
    [
        (pa.schema([("user_id", pa.string()), ("question", pa.string()), ("score", pa.string())]), ("u1", "q", "5"),
         "column 'score'"),
        (pa.schema([("user_id", pa.string()), ("score", pa.float64())]), ("u1", 5.0), "missing column 'question'"),
    ],
)  # fmt: skip
def test_a_survey_partition_of_the_wrong_shape_is_one_schema_error_before_the_day_is_computed(
    spark, tmp_path, schema, row, message
):
    from recsys_spark.daily.surveys import read_survey
    from recsys_spark.errors import SchemaError

    write(tmp_path / "surveys" / f"dt={DAY}", [row], schema)
    cfg = load_config(None, ['input.surveys="{input_root}/surveys/dt={date}"'])
    with pytest.raises(SchemaError, match=message):
        read_survey(spark, cfg, DAY, str(tmp_path))


def test_no_survey_setting_reads_nothing_and_a_missing_partition_is_a_note(spark, tmp_path):
    from recsys_spark.daily.surveys import read_survey

    assert read_survey(spark, load_config(), DAY, str(tmp_path)).rows is None
    missing = read_survey(spark, load_config(None, ['input.surveys="{input_root}/s/dt={date}"']), DAY, str(tmp_path))
    assert missing.rows is None and "no survey partition" in str(missing.note)


def test_past_fifty_questions_the_first_fifty_by_name_are_kept_and_the_rest_counted(spark, tmp_path):
    from recsys_spark.daily.surveys import MAX_QUESTIONS, read_survey, survey_stage

    rows = [("u1", f"q{i:02d}", 3.0) for i in range(MAX_QUESTIONS + 2)] + [("u2", "q00", 5.0)]
    write(tmp_path / "surveys" / f"dt={DAY}", rows, SURVEY)
    cfg = load_config(None, ['input.surveys="{input_root}/surveys/dt={date}"'])
    units = spark.createDataFrame([("all", "u1"), ("all", "u2")], "slice string, user_id string")
    got = survey_stage(cfg, read_survey(spark, cfg, DAY, str(tmp_path)), units, 0.95)
    names = sorted({r.metric for r in got.rows})
    assert names == [f"survey_q{i:02d}" for i in range(MAX_QUESTIONS)]
    assert got.counts["survey_rows_set_aside"] == 2 and got.counts["survey_questions"] == MAX_QUESTIONS
    assert any(f"more than {MAX_QUESTIONS} questions" in n for n in got.notes)
    (q00,) = [r for r in got.rows if r.metric == "survey_q00"]
    assert (q00.value, q00.n) == (pytest.approx(4.0), 2)


def test_the_users_set_aside_by_max_user_rows_get_the_same_composite_in_the_metrics_and_the_experiment(spark, tmp_path):
    # u5 has 5 exposures: past execution.max_user_rows = 4 it takes the bounded path (its composite from its
    # per-user rows in pandas, its day sums in Spark SQL); every number stays the hand-computed one
    exposures, clicks = day_rows(DAY)
    write(tmp_path / "in" / "exposures" / f"dt={DAY}", exposures, EXPOSURES)
    write(tmp_path / "in" / "clicks" / f"dt={DAY}", clicks, CLICK_SCHEMA)
    write(tmp_path / "in" / "assignments" / f"dt={DAY}", [(u, "exp", a) for u, a in ARMS.items()], ASSIGNMENTS)
    config = tmp_path / "composite.toml"
    config.write_text(COMPOSITES)
    cfg = load_config(config, [*SETTINGS, "execution.max_user_rows=4"])
    summary = evaluate_day(spark, cfg, DAY, str(tmp_path / "in"), str(tmp_path / "out"))
    assert summary["data_quality"]["users_over_row_bound"] == 1
    metrics = pd.read_parquet(tmp_path / "out" / "metrics" / f"dt={DAY}")
    mean, se, _, _ = t_reference(OVERALL.values())
    row = _row(metrics, "overall")
    assert (row["value"], row["se"], row["n"]) == (pytest.approx(mean, rel=1e-12), pytest.approx(se), 5)
    rows = pd.read_parquet(tmp_path / "out" / "experiments" / f"dt={DAY}")
    got = rows[(rows["metric"] == "overall") & (rows["slice"] == "all")].iloc[0]
    control = np.mean([OVERALL[u] for u in ("u1", "u3", "u5")])
    assert got["control_value"] == pytest.approx(control, rel=1e-12)
