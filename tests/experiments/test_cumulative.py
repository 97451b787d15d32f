"""The nightly decision on the users accumulated since an experiment's first day (experiments/cumulative.py).

Three days of one experiment whose users come back (``tests/helpers/cumulative_days.py``): the first two written
as complete daily partitions, the third the day's own table.  Each user counted once over the days, the arms' sums
give gbstats' sequential intervals exactly (``tests/golden/gbstats_cumulative.py``, ``make golden-gbstats``); the
day's users alone leave the goal inconclusive where the accumulated ones ship it.
"""

from __future__ import annotations

import datetime as dt

import pytest
from helpers.cumulative_days import DAYS, DDL, EXPERIMENT, accumulated, days

from recsys_spark.config import load_config
from recsys_spark.experiments.analysis import analyse, metric_specs, specs_with_columns
from recsys_spark.experiments.assignments import Assigned, assigned_experiments, explode_variants
from recsys_spark.experiments.cumulative import accumulate, cumulative_rows, decide
from recsys_spark.experiments.decisions import decisions
from recsys_spark.tables import DAILY

pytestmark = pytest.mark.spark

GBSTATS_VERSION = "0.8.0"
GBSTATS_CUMULATIVE = {
    "days_0_1": {
        "exposure_ctr_global": {
            "n": [425, 430],
            "absolute": {
                "estimate": 0.05025997405332347,
                "ci_low": 0.014888505985325748,
                "ci_high": 0.08563144212132119,
                "p": 0.0015257432347286501,
            },
            "relative": {
                "estimate": 0.32424178092054606,
                "ci_low": 0.057760390172679865,
                "ci_high": 0.5907231716684123,
                "p": 0.00964680517892489,
            },
        },
        "precision@10_user_avg": {
            "n": [425, 430],
            "absolute": {
                "estimate": 0.11036403197400224,
                "ci_low": 0.08143167215719363,
                "ci_high": 0.13929639179081085,
                "p": 3.5152667872020453e-22,
            },
            "relative": {
                "estimate": 0.36813331783410863,
                "ci_low": 0.25179246669478444,
                "ci_high": 0.4844741689734328,
                "p": 1.9738402878180262e-15,
            },
        },
    },
    "days_0_2": {
        "exposure_ctr_global": {
            "n": [475, 475],
            "absolute": {
                "estimate": 0.04291806178071533,
                "ci_low": 0.011836102620293078,
                "ci_high": 0.07400002094113758,
                "p": 0.002179846862134667,
            },
            "relative": {
                "estimate": 0.2717956415785275,
                "ci_low": 0.04752753573219812,
                "ci_high": 0.4960637474248568,
                "p": 0.009897251713845947,
            },
        },
        "precision@10_user_avg": {
            "n": [475, 475],
            "absolute": {
                "estimate": 0.1101048530967898,
                "ci_low": 0.08333364456263209,
                "ci_high": 0.1368760616309475,
                "p": 6.536096279942706e-26,
            },
            "relative": {
                "estimate": 0.36708184126100724,
                "ci_low": 0.26000394502192836,
                "ci_high": 0.4741597375000861,
                "p": 3.656361562793454e-18,
            },
        },
    },
}
SETTINGS = [
    "metrics.k=[10]",
    'experiments.metrics=["exposure_ctr_global", "precision@10_user_avg"]',
    'experiments.goals=["exposure_ctr_global"]',
    "experiments.guardrails=[]",
]


def _write_earlier(spark, root, upto: int) -> None:
    """The days before ``DAYS[upto]`` as complete daily partitions (``experiment_users`` and ``_SUCCESS``)."""
    for day, rows in zip(DAYS[:upto], days()[:upto], strict=True):
        spark.createDataFrame(rows, DDL).write.mode("overwrite").parquet(
            DAILY.path(str(root), "experiment_users", dt=day.isoformat())
        )
        marker = root / "summary" / f"dt={day}"
        marker.mkdir(parents=True, exist_ok=True)
        (marker / "_SUCCESS").write_text("")


def _run(spark, root, settings=(), upto: int = 2, assigned=None):
    """(config, specs, the day's analysis, the accumulated one) on ``DAYS[upto]``."""
    cfg = load_config(None, [*SETTINGS, *settings])
    today = spark.createDataFrame(days()[upto], DDL)
    specs, _ = metric_specs(cfg, [10])
    specs, _ = specs_with_columns(specs, today.columns)
    day = analyse(explode_variants(today), cfg, specs, False)
    cumulative = accumulate(spark, cfg, DAYS[upto], str(root), today, [EXPERIMENT], assigned or {}, specs)
    return cfg, day, cumulative


@pytest.fixture(scope="module")
def root(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("cumulative")
    _write_earlier(spark, root, 2)
    return root


@pytest.fixture(scope="module")
def three_days(spark, root):
    return _run(spark, root)


def _row(analysis, metric: str):
    name = {"exposure_ctr_global": "exposure_ctr", "precision@10_user_avg": "precision"}[metric]
    (row,) = [r for r in analysis.results if r.metric == name and r.slice == "all" and r.experiment == EXPERIMENT]
    return row


def _assert_gbstats(analysis, look: str) -> None:
    for metric, golden in GBSTATS_CUMULATIVE[look].items():
        row = _row(analysis, metric)
        assert (row.control_n, row.n) == tuple(golden["n"]), metric
        absolute, relative = golden["absolute"], golden["relative"]
        assert row.ci_method == "sequential"
        assert (row.delta, row.ci_low, row.ci_high) == pytest.approx(
            (absolute["estimate"], absolute["ci_low"], absolute["ci_high"]), rel=1e-9
        ), metric
        assert row.p_value == pytest.approx(absolute["p"], rel=1e-9), metric
        assert (row.rel_delta, row.rel_ci_low, row.rel_ci_high) == pytest.approx(
            (relative["estimate"], relative["ci_low"], relative["ci_high"]), rel=1e-9
        ), metric


def test_the_accumulated_users_give_gbstats_sequential_intervals(three_days):
    """Every user since the first day once (its sums added over the days it came back): the rows are
    gbstats' SequentialTwoSidedTTest on those users' sums, absolute and relative, to 1e-9."""
    _, _, cumulative = three_days
    assert cumulative.analysis is not None
    _assert_gbstats(cumulative.analysis, "days_0_2")
    users = accumulated()
    section = cumulative.analysis.section[EXPERIMENT]
    assert section["users"] == {"control": len(users["control"]), "treatment": len(users["treatment"])}
    assert section["excluded_multiple_variants"] == 0
    span = cumulative.spans[EXPERIMENT]
    assert (span.first_day, span.source, span.days, span.basis) == (DAYS[0], "experiment_users", 3, "cumulative")


def test_the_band_narrows_as_the_users_accumulate(spark, root, three_days):
    """The look of the second night (days 1 and 2) is gbstats' too, and the third night's band is narrower."""
    _, _, two = _run(spark, root, upto=1)
    assert two.analysis is not None and two.spans[EXPERIMENT].days == 2
    _assert_gbstats(two.analysis, "days_0_1")
    three = three_days[2].analysis
    for metric in GBSTATS_CUMULATIVE["days_0_1"]:
        second, third = (_row(a, metric).ci_high - _row(a, metric).ci_low for a in (two.analysis, three))
        assert third < second, metric


def test_each_state_of_the_nightly_decision(spark, root, three_days):
    """The day's users alone: not enough evidence (exposure CTR +0.028 [-0.029, +0.084]); the accumulated users:
    ship (+0.043 [+0.012, +0.074]); the arms swapped: do not ship; too few users for the threshold: invalid."""
    cfg, day, cumulative = three_days
    (on_the_day,) = decisions(day, cfg)
    assert on_the_day.decision == "not_enough_evidence" and on_the_day.basis == "day"
    (nightly,) = decide([on_the_day], day, cumulative, cfg)
    assert (nightly.decision, nightly.basis) == ("ship", "cumulative")
    assert nightly.reasons[0].startswith("goal exposure_ctr_global improved: +0.04292 [+0.01184, +0.074]")
    assert day.section[EXPERIMENT]["decisions"]["treatment"] == {
        "decision": "ship",
        "reasons": nightly.reasons,
        "basis": "cumulative",
        "first_day": DAYS[0].isoformat(),
        "days": 3,
    }
    assert day.section[EXPERIMENT]["cumulative"]["users"] == cumulative.analysis.section[EXPERIMENT]["users"]
    strict = load_config(None, [*SETTINGS, "experiments.min_users_per_arm=1000"])
    (invalid,) = decisions(cumulative.analysis, strict)
    assert invalid.decision == "invalid" and invalid.reasons[0].startswith("too few users: control has 475")
    swapped_cfg, swapped_day, swapped = _run(spark, root, ['experiments.control="treatment"'])
    (worse,) = decide(decisions(swapped_day, swapped_cfg), swapped_day, swapped, swapped_cfg)
    assert (worse.variant, worse.decision, worse.basis) == ("control", "do_not_ship", "cumulative")


def test_the_cumulative_rows_carry_the_first_day_and_the_days(three_days):
    _, day, cumulative = three_days
    rows = cumulative_rows(day, cumulative)
    assert rows and all(r[0] == EXPERIMENT and r[-2:] == (DAYS[0].isoformat(), 3) for r in rows)
    assert {r[2] for r in rows} == {"exposure_ctr", "precision"}


def test_a_configured_start_or_the_earliest_assignment_is_the_first_day(spark, root):
    """``per_experiment.NAME.start`` (or the assignments' earliest ``assigned_at``): the users from that day on."""
    later = DAYS[1]
    _, _, configured = _run(spark, root, [f'experiments.per_experiment={{{EXPERIMENT}={{start="{later}"}}}}'])
    span = configured.spans[EXPERIMENT]
    assert (span.first_day, span.source, span.days) == (later, "config", 2)
    from_day_1 = {}
    for rows in days()[1:]:
        for _, uid, variants, *_ in rows:
            from_day_1.setdefault(uid, set()).add(variants[EXPERIMENT])
    counted = sum(1 for arms in from_day_1.values() if arms == {"control"})
    assert configured.analysis.section[EXPERIMENT]["users"]["control"] == counted
    _, _, assigned = _run(spark, root, assigned={EXPERIMENT: Assigned(10, "u", later)})
    assert (assigned.spans[EXPERIMENT].source, assigned.spans[EXPERIMENT].days) == ("assigned_at", 2)
    assert assigned.analysis.section[EXPERIMENT]["users"] == configured.analysis.section[EXPERIMENT]["users"]


def test_an_experiment_that_starts_on_the_day_is_decided_on_the_day(spark, root):
    """Started on the day (its configured start), or no earlier partition: the day's analysis, basis ``day``."""
    cfg, day, cumulative = _run(spark, root, [f'experiments.per_experiment={{{EXPERIMENT}={{start="{DAYS[2]}"}}}}'])
    assert cumulative.analysis is None and cumulative.spans[EXPERIMENT].basis == "day"
    (decision,) = decide(decisions(day, cfg), day, cumulative, cfg)
    assert (decision.decision, decision.basis) == ("not_enough_evidence", "day")
    assert {r[-1] for r in cumulative_rows(day, cumulative)} == {1}
    _, _, nothing_earlier = _run(spark, root, upto=0)
    assert nothing_earlier.analysis is None and nothing_earlier.spans[EXPERIMENT].days == 1


def test_the_earliest_assignment_is_read_in_the_session_time_zone(spark):
    rows = [
        ("u1", "e", "control", dt.datetime(2026, 11, 14, 23, 30)),
        ("u2", "e", "treatment", dt.datetime(2026, 11, 16, 8, 0)),
        ("u3", "f", "control", None),
    ]
    frame = spark.createDataFrame(rows, "user_id string, experiment string, variant string, assigned_at timestamp")
    assigned, _ = assigned_experiments(frame)
    assert assigned["e"].first_day == dt.date(2026, 11, 14) and assigned["f"].first_day is None
    without, _ = assigned_experiments(frame.drop("assigned_at"))
    assert without["e"].first_day is None
