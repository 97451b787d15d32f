"""The composite metric's kernel (issue 43, item 3): a user's weighted sum of its own per-user values, by hand; the
same from the pass's arrays, from the per-user table's rows in any order, and in the day sums; its mean and interval
against scipy's t interval over the per-user values; and the config that names it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from recsys_spark import registry
from recsys_spark.config import load_config
from recsys_spark.errors import ConfigError
from recsys_spark.kernels.composite import Composite, Term, composite_values, day_columns, table_values
from recsys_spark.kernels.metric_specs import parse_metric
from recsys_spark.kernels.moments import user_table_moments
from recsys_spark.kernels.user_day import user_day_sums
from recsys_spark.kernels.users import user_table
from recsys_spark.per_user.aggregate import aggregate_users
from recsys_spark.registry import LIST_METRICS

KS = (1, 3)
#: 0.7 ndcg@3 + 0.3 mrr / 0.5 (mrr standardised by a spread of 0.5)
OVERALL = Composite("overall", (Term("ndcg", 3, 0.7), Term("mrr", None, 0.3, 0.5)))
# four users: ndcg@1, ndcg@3, mrr; u4 has no ranked list (NaN everywhere)
NDCG = np.array([[1.0, 1.0], [0.0, 0.6309], [0.0, 0.5], [np.nan, np.nan]])
MRR = np.array([1.0, 0.5, 1 / 3, np.nan])
BY_HAND = [0.7 * 1.0 + 0.6 * 1.0, 0.7 * 0.6309 + 0.6 * 0.5, 0.7 * 0.5 + 0.6 / 3]  # u4: none


def _per_user() -> tuple[dict, dict]:
    n = len(MRR)
    per_user = {
        "slice": np.array(["all"] * n, dtype=object),
        "user_id": np.array([f"u{i + 1}" for i in range(n)], dtype=object),
        "n_exposures": np.full(n, 3),
        "n_relevant": np.array([1, 1, 1, 0]),
        "n_lists": np.ones(n, dtype=np.int64),
        "n_lists_ranked": np.array([1, 1, 1, 0]),
        "auc": np.array([1.0, 0.5, 0.0, np.nan]),
        "mrr": MRR,
    }
    per_k = {m: NDCG.copy() for m in LIST_METRICS} | {"hits": np.array([[1, 1], [0, 1], [0, 1], [0, 0]])}
    return per_user, per_k


def test_a_users_composite_by_hand_and_no_value_for_a_user_missing_a_component():
    per_user, per_k = _per_user()
    got = composite_values(OVERALL, per_user, per_k, KS)
    assert got[:3] == pytest.approx(BY_HAND, rel=1e-12)
    assert math.isnan(got[3])
    assert Term("mrr", None, 0.3, 0.5).coefficient == pytest.approx(0.6)


def test_the_table_form_reads_the_same_values_from_rows_in_any_order():
    table = user_table(*_per_user(), KS)
    shuffled = table.sample(frac=1.0, random_state=3).reset_index(drop=True)
    values = table_values([OVERALL], shuffled, KS)["overall"]
    got = pd.Series(values, index=pd.unique(shuffled["user_id"]))
    assert got[["u1", "u2", "u3"]].to_numpy() == pytest.approx(BY_HAND, rel=1e-12)
    assert math.isnan(got["u4"])


def test_the_mean_and_interval_equal_scipys_t_interval_over_the_users_values():
    moments = user_table_moments(user_table(*_per_user(), KS), KS, [OVERALL])
    rows, _ = aggregate_users(moments, KS, {}, 0.9, composites=["overall"])
    (row,) = [r for r in rows if r.metric == "overall"]
    x = np.array(BY_HAND)
    low, high = stats.t.interval(0.9, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert (row.aggregation, row.k, row.slice, row.n, row.ci_method) == ("user_avg", None, "all", 3, "t")
    assert (row.value, row.se) == (pytest.approx(x.mean(), rel=1e-12), pytest.approx(stats.sem(x), rel=1e-9))
    assert (row.ci_low, row.ci_high) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))


def test_no_row_where_no_user_has_a_composite():
    per_user, per_k = _per_user()
    per_user["mrr"] = np.full(4, np.nan)
    moments = user_table_moments(user_table(per_user, per_k, KS), KS, [OVERALL])
    rows, _ = aggregate_users(moments, KS, {}, composites=["overall"])
    assert not [r for r in rows if r.metric == "overall"]  # no row rather than a zero


def test_the_day_sums_carry_the_users_composite_and_whether_it_has_one():
    per_user, per_k = _per_user()
    names = ["requests", *day_columns([OVERALL])]
    units = {"pv": np.ones(5), "empty": np.zeros(5), "exposures": np.array([3, 3, 3, 3, 0])}
    got = user_day_sums(
        np.zeros(5, np.int64), np.arange(5), units, np.zeros(4, np.int64), np.arange(4), per_user, per_k, KS, names,
        [OVERALL],
    )  # fmt: skip
    assert got[:3, 1] == pytest.approx(BY_HAND)
    assert got[:, 1][3:].tolist() == [0.0, 0.0]  # u4 (no ranked list) and u5 (no exposure): no composite
    assert got[:, 2].tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    spec = parse_metric_after_config()
    assert (spec.kind, spec.num, spec.den) == ("mean", "composite_overall_sum", "composite_overall_units")


def parse_metric_after_config():
    load_config(None, ['metrics.composite=[{name = "overall", components = [{metric = "mrr_user_avg"}]}]'])
    return parse_metric("overall_user_avg")


TABLE = 'metrics.composite=[{{name = "{name}", components = [{components}]{more}}}]'


def _load(name="mix", components='{metric = "ndcg@10_user_avg", weight = 0.7}', more="", *settings):
    return load_config(None, [TABLE.format(name=name, components=components, more=more), *settings])


def test_a_composite_is_a_metric_everywhere_once_configured():
    cfg = _load(
        "mix",
        '{metric = "ndcg@10_user_avg", weight = 0.7}, {metric = "auc_user_avg", weight = 0.3, standardise = true}',
        ', direction = "lower"',
        'experiments.metrics=["mix_user_avg"]',
        'experiments.goals=["mix_user_avg"]',
        'gate.checks=[{metric = "mix", aggregation = "user_avg", min_relative_change = 0.01}]',
    )
    (c,) = cfg.metrics.composite
    assert [c.standardised(x) for x in c.components] == [False, True]
    assert registry.parse_key("mix_user_avg") == ("mix", None, "user_avg")
    assert registry.direction("mix") == "lower"
    assert registry.needs_feedback("mix")


@pytest.mark.parametrize(
    ("name", "components", "more", "message"),
    [
        ("mix", '{metric = "ndcg@10_usr_avg"}', "", "not a metric key"),
        ("mix", '{metric = "zzz_user_avg"}', "", "unknown metric 'zzz'"),
        ("mix", '{metric = "gini_catalog"}', "", "gini_catalog has no per-user form"),
        ("mix", '{metric = "exposure_ctr_global"}', "", "exposure_ctr_global has no per-user form"),
        ("mix", '{metric = "ndcg@10_list_avg"}', "", "ndcg@10_list_avg has no per-user form"),
        ("mix", '{metric = "ndcg@7_user_avg"}', "", "needs k=7 in metrics.k"),
        ("ndcg", '{metric = "mrr_user_avg"}', "", "clashes with the registry's metric 'ndcg'"),
        ("purchase_user_rate", '{metric = "mrr_user_avg"}', "", "clashes"),
        ("survey_x", '{metric = "mrr_user_avg"}', "", "clashes"),
        ("Mix!", '{metric = "mrr_user_avg"}', "", "not a name of lower-case letters"),
        ("mix", "", "", "expected at least one"),
        ("mix", '{metric = "mrr_user_avg", weight = -1}', "", "expected a positive number"),
        ("mix", '{metric = "mrr_user_avg"}', ', direction = "up"', "expected higher or lower"),
        ("mix", '{metric = "mrr_user_avg"}', ', reference_date = "yesterday"', "expected a date YYYY-MM-DD"),
    ],
)
def test_a_bad_composite_is_one_config_error(name, components, more, message):
    with pytest.raises(ConfigError, match="metrics.composite") as raised:
        _load(name, components, more)
    assert message in str(raised.value)


def test_two_composites_of_one_name_are_refused():
    one = '{name = "mix", components = [{metric = "mrr_user_avg"}]}'
    with pytest.raises(ConfigError, match="used twice"):
        load_config(None, [f"metrics.composite=[{one}, {one}]"])


def test_survey_names_are_sanitised_and_are_metrics_without_registration():
    assert registry.survey_name("  How likely, 0-10, are you to recommend us? ") == (
        "survey_how_likely_0_10_are_you_to_recommend_us"
    )
    assert registry.survey_name("!!!") is None
    assert registry.parse_key("survey_nps_user_avg") == ("survey_nps", None, "user_avg")
    assert registry.direction("survey_nps") == "higher"
    spec = parse_metric("survey_nps_user_avg")
    assert (spec.kind, spec.num, spec.den) == ("mean", "survey_nps_sum", "survey_nps_responses")
    with pytest.raises(ValueError, match="no per-user form"):
        parse_metric("survey_nps_global")


def test_the_table_form_with_one_cut_off_and_a_user_without_a_row_at_a_terms_k():
    # ks = (3,): the term without k reads the rows at k = 3; u2 has no row at k = 1 (for a term at k = 1)
    frame = pd.DataFrame(
        {
            "user_id": ["u1", "u2", "u1"],
            "k": [3, 3, 1],
            "ndcg": [0.5, 0.25, 1.0],
            "mrr": [1.0, 0.5, 1.0],
        }
    )
    one_k = Composite("one_k", (Term("ndcg", 3, 0.7), Term("mrr", None, 0.3, 0.5)))
    got = table_values([one_k], frame[frame["k"] == 3], (3,))["one_k"]
    assert got.dtype == np.float64 and got.tolist() == pytest.approx([0.35 + 0.6, 0.175 + 0.3])
    at_one = Composite("at_one", (Term("ndcg", 1, 1.0),))
    got = table_values([at_one], frame, (1, 3))["at_one"]
    assert got.dtype == np.float64 and got[0] == 1.0 and math.isnan(got[1])
