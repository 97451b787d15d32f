"""The ship decision (kernels/decisions.py): goals, guardrails with margins, secondary metrics, validity."""

from __future__ import annotations

import pytest

from recsys_spark.config import load_config
from recsys_spark.errors import ConfigError
from recsys_spark.kernels.decisions import (
    Effect,
    Margin,
    Roles,
    Validity,
    decide,
    effects_of,
    goal_state,
    guardrail_state,
)
from recsys_spark.kernels.experiments import ResultRow

ROLES = Roles(
    goals=("ndcg@10_user_avg", "exposure_ctr_global"),
    guardrails=(Margin("pv_failure_rate_global", absolute=0.005),),
    secondary=("mrr_user_avg",),
)
VALID = Validity(control_users=1000, variant_users=1010)
FLAT = Effect(0.0, -0.01, 0.01, 0.0, -0.05, 0.05)
UP = Effect(0.02, 0.01, 0.03, 0.1, 0.05, 0.15)
DOWN = Effect(-0.02, -0.03, -0.01, -0.1, -0.15, -0.05)
SAFE = Effect(0.001, -0.002, 0.004)  # failure rate: worse end +0.004, within +0.005


def _decide(effects, validity=VALID, roles=ROLES):
    return decide("e", "treatment", effects, roles, validity)


def test_a_goal_up_and_guardrails_within_their_margin_ship():
    d = _decide({"ndcg@10_user_avg": UP, "exposure_ctr_global": FLAT, "pv_failure_rate_global": SAFE})
    assert d.decision == "ship"
    assert d.reasons == [
        "goal ndcg@10_user_avg improved: +0.02 [+0.01, +0.03] (+10.00%)",
        "goal exposure_ctr_global inconclusive: +0 [-0.01, +0.01] (+0.00%)",
        "guardrail pv_failure_rate_global within its margin (+0.005): +0.001 [-0.002, +0.004]",
    ]
    assert d.states == {
        "ndcg@10_user_avg": "goal:improved",
        "exposure_ctr_global": "goal:inconclusive",
        "pv_failure_rate_global": "guardrail:within",
        "mrr_user_avg": "secondary:not measured",
    }


@pytest.mark.parametrize(
    "effects, decision",
    [
        ({"ndcg@10_user_avg": UP, "exposure_ctr_global": DOWN, "pv_failure_rate_global": SAFE}, "do_not_ship"),
        # the failure rate up by +0.008 [+0.006, +0.010]: beyond its +0.005 margin
        ({"ndcg@10_user_avg": UP, "pv_failure_rate_global": Effect(0.008, 0.006, 0.010)}, "do_not_ship"),
        # up by +0.004 [0, +0.009]: it may or may not be within the margin yet
        ({"ndcg@10_user_avg": UP, "pv_failure_rate_global": Effect(0.004, 0.0, 0.009)}, "not_enough_evidence"),
        (
            {"ndcg@10_user_avg": FLAT, "exposure_ctr_global": FLAT, "pv_failure_rate_global": SAFE},
            "not_enough_evidence",
        ),
        # a guardrail not measured never lets a variant ship
        ({"ndcg@10_user_avg": UP}, "not_enough_evidence"),
    ],
)
def test_worse_goals_or_guardrails_beyond_their_margin_do_not_ship_and_the_rest_is_not_enough_evidence(
    effects, decision
):
    assert _decide(effects).decision == decision


def test_directions_come_from_the_registry():
    # exposure_ctr: higher is better; pv_failure_rate: lower is better
    assert goal_state(UP, higher=True) == "improved" and goal_state(UP, higher=False) == "worse"
    lower = Roles(goals=("pv_failure_rate_global",))
    assert _decide({"pv_failure_rate_global": DOWN}, roles=lower).decision == "ship"
    assert _decide({"pv_failure_rate_global": UP}, roles=lower).decision == "do_not_ship"
    with pytest.raises(ValueError, match="no better direction"):
        _decide({}, roles=Roles(goals=("pv_global",)))


def test_relative_margins_read_the_relative_interval():
    margin = Margin("exposure_ctr_global", relative=0.05)  # may lose 5 % of the control's CTR
    assert guardrail_state(Effect(-0.001, -0.004, 0.002, -0.01, -0.04, 0.02), True, margin) == "within"
    assert guardrail_state(Effect(-0.01, -0.012, -0.008, -0.1, -0.12, -0.08), True, margin) == "beyond"
    assert guardrail_state(Effect(-0.005, -0.009, -0.001, -0.05, -0.09, -0.01), True, margin) == "inconclusive"
    assert guardrail_state(Effect(-0.001, -0.004, 0.002), True, margin) == "not measured"  # no relative interval
    d = _decide({"ndcg@10_user_avg": UP}, roles=Roles(("ndcg@10_user_avg",), (margin,)))
    assert d.reasons[-1] == "guardrail exposure_ctr_global not measured (-5.00%)"


@pytest.mark.parametrize(
    "validity, reason",
    [
        (Validity(False, "no control arm named 'control'", control_users=0, variant_users=300), "not compared: no"),
        (
            Validity(srm_passed=False, srm_p_value=2.5e-10, control_users=600, variant_users=400),
            "sample-ratio mismatch (p=2.5e-10)",
        ),
        (Validity(multiple_assignment=4, control_users=500, variant_users=500), "multiple assignment: 4 user(s)"),
        (
            Validity(control_users=99, variant_users=500),
            "too few users: control has 99 (experiments.min_users_per_arm = 100)",
        ),
    ],
)
def test_srm_multiple_assignment_and_too_few_users_are_invalid_and_say_why(validity, reason):
    d = _decide({"ndcg@10_user_avg": UP, "pv_failure_rate_global": SAFE}, validity)
    assert d.decision == "invalid" and any(r.startswith(reason) for r in d.reasons), d.reasons
    assert not any(r.startswith("goal") for r in d.reasons)  # an invalid comparison's effects are not read


def test_secondary_metrics_are_reported_never_deciding():
    d = _decide({"ndcg@10_user_avg": FLAT, "pv_failure_rate_global": SAFE, "mrr_user_avg": DOWN})
    assert (
        d.decision == "not_enough_evidence" and d.reasons[-1] == "secondary mrr_user_avg changed: -0.02 [-0.03, -0.01]"
    )
    assert _decide({}, roles=Roles()).reasons[0] == "no goal metric (experiments.goals): nothing can ship"


def test_effects_are_read_from_result_rows_by_key():
    fields = dict(value=0.1, n=10, control_value=0.1, control_n=10, rel_delta=0.1, rel_ci_low=0.0, rel_ci_high=0.2)
    fields.update(p_value=0.01, p_adjusted=0.02, method="welch", se=0.01, mde=0.03, covariate_n=None)
    rows = [
        ResultRow("e", "treatment", "ndcg", 10, "user_avg", "all", delta=0.01, ci_low=0.0, ci_high=0.02, **fields),
        ResultRow("e", "treatment", "ndcg", 10, "user_avg", "platform=ios", delta=9, ci_low=9, ci_high=9, **fields),
        ResultRow("e", "b", "mrr", None, "user_avg", "all", delta=1, ci_low=1, ci_high=1, **fields),
    ]
    effects = effects_of(rows, "e", "treatment")
    assert list(effects) == ["ndcg@10_user_avg"] and effects["ndcg@10_user_avg"].ci_high == 0.02
    as_dicts = effects_of([{**r.__dict__, "k": float("nan") if r.k is None else r.k} for r in rows], "e", "b")
    assert list(as_dicts) == ["mrr_user_avg"]


def test_the_config_names_goals_guardrails_and_per_experiment_roles():
    cfg = load_config(
        None,
        [
            'experiments.per_experiment={ranker_v2={goals=["exposure_ctr_global"], secondary=["mrr_user_avg"]}}',
            'experiments.guardrails=[{metric="pv_failure_rate_global", relative_margin=0.1}]',
        ],
    )
    goals, guardrails, secondary = cfg.experiments.roles("ranker_v2")
    assert goals == ("exposure_ctr_global",) and secondary == ("mrr_user_avg",)
    assert guardrails[0].relative_margin == 0.1  # the default list, not overridden for ranker_v2
    assert cfg.experiments.roles("other")[0] == ("ndcg@10_user_avg", "exposure_ctr_global")
    assert set(cfg.experiments.decision_metrics()) == {
        "ndcg@10_user_avg",
        "exposure_ctr_global",
        "pv_failure_rate_global",
        "mrr_user_avg",
    }
    for bad, needle in (
        ('experiments.goals=["item_coverage_global"]', "has no per-user form"),
        ('experiments.guardrails=[{metric="pv_failure_rate_global"}]', "expected one margin"),
        ('experiments.guardrails=[{metric="pv_failure_rate_global", absolute_margin=1, relative_margin=1}]', "got 2"),
        ('experiments.per_experiment={x={goals=["pv_ctr_globl"]}}', "experiments.per_experiment.x.goals"),
        ("experiments.inference=bayesian", "expected one of sequential, fixed"),
        ("experiments.sequential_tuning=0", "experiments.sequential_tuning"),
    ):
        with pytest.raises(ConfigError, match=needle):
            load_config(None, [bad])


def test_secondary_states_each_side_of_zero_and_the_decisions_own_fields():
    roles = Roles(goals=(), guardrails=(Margin("pv_failure_rate_global", absolute=0.005),), secondary=("a", "b", "c"))
    effects = {
        "a": UP,  # interval above 0: changed
        "b": Effect(0.01, 0.0, 0.02),  # touches 0: no change
        "c": Effect(-0.01, -0.02, 0.0),  # touches 0 from below: no change
        "pv_failure_rate_global": Effect(0.008, 0.006, 0.010),
    }
    d = decide("exp", "v1", effects, roles, Validity(control_users=300, variant_users=310), ci_method="fixed")
    assert d.states == {
        "pv_failure_rate_global": "guardrail:beyond",
        "a": "secondary:changed",
        "b": "secondary:no change",
        "c": "secondary:no change",
    }
    assert d.reasons == [
        "guardrail pv_failure_rate_global beyond its margin (+0.005): +0.008 [+0.006, +0.01]",
        "secondary a changed: +0.02 [+0.01, +0.03]",
    ]
    assert d.decision == "do_not_ship"
    assert (d.experiment, d.variant, d.ci_method, d.control_n, d.variant_n) == ("exp", "v1", "fixed", 300, 310)
    assert d.as_tuple()[:3] == ("exp", "v1", "do_not_ship")
    # no goal: the reason comes first, before what the other metrics say
    d = decide("exp", "v1", {"a": UP}, Roles(secondary=("a",)), VALID)
    assert d.reasons == [
        "no goal metric (experiments.goals): nothing can ship",
        "secondary a changed: +0.02 [+0.01, +0.03]",
    ]
    # an invalid comparison keeps its own fields too
    d = decide("exp", "v1", {}, ROLES, Validity(srm_passed=False, control_users=300, variant_users=310), ci_method="x")
    assert (d.decision, d.experiment, d.variant, d.ci_method, d.control_n, d.variant_n) == (
        "invalid",
        "exp",
        "v1",
        "x",
        300,
        310,
    )


def test_an_effect_reads_every_interval_field_from_a_row_or_a_dict():
    row = dict(delta=1.0, ci_low=2.0, ci_high=3.0, rel_delta=4.0, rel_ci_low=5.0, rel_ci_high=6.0)
    assert Effect.of(row) == Effect(1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    assert Effect.of(type("Row", (), row)()) == Effect(1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    assert Effect.of({"delta": 1.0}) == Effect(1.0, None, None) == Effect.of(type("Row", (), {"delta": 1.0})())


def test_each_state_has_its_words_and_an_old_keep_running_reads_as_not_enough_evidence():
    """Three states and invalid, one word each (the contract of issue 42); a partition written before it says
    ``keep_running``, which every reader takes as ``not_enough_evidence``."""
    from recsys_spark.kernels.decisions import DECISION_WORDS, DECISIONS, decision_words, normalise_code

    assert set(DECISION_WORDS) == set(DECISIONS) == {"ship", "do_not_ship", "not_enough_evidence", "invalid"}
    assert [decision_words(c) for c in DECISIONS] == [
        "SHIP",
        "DO NOT SHIP",
        "NOT ENOUGH EVIDENCE YET",
        "INVALID EXPERIMENT",
    ]
    assert normalise_code("keep_running") == "not_enough_evidence" and decision_words("keep_running") == (
        "NOT ENOUGH EVIDENCE YET"
    )
    assert [normalise_code(c) for c in (*DECISIONS, None)] == [*DECISIONS, None]
    states = {
        "ship": {"ndcg@10_user_avg": UP, "pv_failure_rate_global": SAFE},
        "do_not_ship": {"ndcg@10_user_avg": DOWN, "pv_failure_rate_global": SAFE},
        "not_enough_evidence": {"ndcg@10_user_avg": FLAT, "pv_failure_rate_global": SAFE},
    }
    for state, effects in states.items():
        assert _decide(effects).decision == state
    assert _decide(states["ship"], Validity(control_users=10, variant_users=10)).decision == "invalid"


def test_an_experiments_start_is_a_date_and_the_lookback_a_positive_number_of_days():
    """``experiments.per_experiment.NAME.start`` (the nightly decision's first day) and
    ``experiments.max_cumulative_days`` (90): a bad value is one line naming its key, as the config loads."""
    import datetime as dt

    cfg = load_config(None, ['experiments.per_experiment={ranker_v2={start="2026-11-14"}}'])
    assert cfg.experiments.start_of("ranker_v2") == dt.date(2026, 11, 14) and cfg.experiments.start_of("x") is None
    assert cfg.experiments.roles("ranker_v2") == cfg.experiments.roles("x")  # a start alone keeps the roles
    assert cfg.experiments.max_cumulative_days == 90
    with pytest.raises(ConfigError, match=r"experiments\.per_experiment\.ranker_v2\.start: expected a date"):
        load_config(None, ['experiments.per_experiment={ranker_v2={start="14/11/2026"}}'])
    with pytest.raises(ConfigError, match="experiments.max_cumulative_days"):
        load_config(None, ["experiments.max_cumulative_days=0"])
