"""The registry of metric names: one spelling, one parser, and the readers that go through it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (make test-compat)
    import tomli as tomllib

from recsys_spark import registry
from recsys_spark.registry import HEADLINE, METRICS, key, metric, parse_key

REPO = Path(__file__).resolve().parents[1]
#: the modules that read metric names (the report, the summary, the lines a command prints, the window)
READERS = (
    "report/build.py",
    "report/__init__.py",
    "report/values.py",
    "report/colour_rule.py",
    "report/metric_rows.py",
    "report/sections/daily.py",
    "report/sections/experiments.py",
    "report/sections/decisions.py",
    "report/sections/gate.py",
    "report/sections/offline.py",
    "report/sections/ope.py",
    "report/sections/simulation.py",
    "daily/summary.py",
    "cli/lines.py",
    "experiments/window.py",
    "gate.py",
)


def _is_name(text: str) -> bool:
    if text in METRICS:
        return True
    try:
        parse_key(text)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("module", READERS)
def test_readers_spell_no_metric_name_of_their_own(module):
    # a metric name or key written in a reader must be handed to registry.parse_key (checked at import),
    # never compared or printed as a string of its own
    tree = ast.parse((REPO / "recsys_spark" / module).read_text())
    parsed = {
        id(arg)
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", "")) == "parse_key"
        for arg in call.args
    }
    loose = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _is_name(node.value)
        and id(node) not in parsed
    ]
    assert loose == [], f"{module} spells metric names outside the registry: {loose}"


def test_a_readers_literal_outside_parse_key_is_caught(tmp_path, monkeypatch):
    # the check above can fail: a reader that writes "gini" itself
    module = tmp_path / "recsys_spark" / "report"
    module.mkdir(parents=True)
    (module / "build.py").write_text('GINI = ("gini", None, "catalog")\nOK = parse_key("auc_global")\n')
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    with pytest.raises(AssertionError, match=r"\(1, 'gini'\)"):
        test_readers_spell_no_metric_name_of_their_own("report/build.py")


def test_the_summary_headline_and_the_experiments_follow_the_registry(monkeypatch):
    # a metric added to the registry's headline reaches the summary's keys; the experiments parse their metric
    # names with the registry's parser
    from recsys_spark.config import load_config
    from recsys_spark.kernels import metric_specs

    seen = []
    real = metric_specs.parse_key
    monkeypatch.setattr(metric_specs, "parse_key", lambda text: seen.append(text) or real(text))
    load_config(None, ['experiments.metrics=["ndcg@10_user_avg", "exposure_ctr_global"]'])
    # the metrics, then the decisions' goals and guardrails (the registry's defaults)
    guardrails = [g[0] for g in registry.EXPERIMENT_GUARDRAILS]
    assert seen == ["ndcg@10_user_avg", "exposure_ctr_global", *registry.EXPERIMENT_GOALS, *guardrails]
    with pytest.raises(Exception, match=r"unknown metric 'ndgc' \(did you mean ndcg\?\)"):
        load_config(None, ['experiments.metrics=["ndgc@10_user_avg"]'])
    assert [key(*h) for h in HEADLINE][:2] == ["auc_global", "auc_user_avg"]


@pytest.mark.parametrize("name", sorted(METRICS))
def test_every_metric_has_a_direction_and_a_range_that_holds_it(name):
    found = metric(name)
    assert found.better in ("higher", "lower", None)
    assert found.low is None or found.high is None or found.low < found.high
    assert key(name, 10 if found.at_k else None, "global") == (f"{name}@10_global" if found.at_k else f"{name}_global")


@pytest.mark.parametrize(
    "text, message",
    [
        ("ndcg@10", "not a metric key"),
        ("ndgc@10_user_avg", r"unknown metric 'ndgc' \(did you mean ndcg\?\)"),
        ("ndcg_user_avg", "ndcg needs @k"),
        ("auc@3_global", "auc takes no @k"),
        ("ndcg@x_user_avg", "k must be a positive integer"),
    ],
)
def test_a_bad_key_is_refused_naming_why(text, message):
    with pytest.raises(ValueError, match=message):
        parse_key(text)


def test_every_key_reads_back_as_written():
    for name, found in METRICS.items():
        for aggregation in registry.AGGREGATIONS:
            k = 5 if found.at_k else None
            assert parse_key(key(name, k, aggregation)) == (name, k, aggregation)


def test_every_module_of_the_library_sits_in_a_layer():
    # a new module must take its place in the house (pyproject's import-linter layers), or make lint cannot see it
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in config if c["type"] == "layers"]
    placed = {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}
    top = {
        f"recsys_spark.{p.stem if p.is_file() else p.name}"
        for p in (REPO / "recsys_spark").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert top - placed == set()


def test_a_conversion_event_names_two_metrics_of_its_own():
    # labels.conversion_events: <event>_user_rate and <event>_exposure_rate, higher is better, rates in [0, 1]
    for name in ("purchase_user_rate", "add_to_cart_exposure_rate"):
        found = metric(name)
        assert (found.better, found.low, found.high, found.percent) == ("higher", 0.0, 1.0, True)
        assert registry.find(name) == found and parse_key(f"{name}_global") == (name, None, "global")
    assert metric("purchase_user_rate").reader_name == "purchase user rate"
    assert registry.find("purchase_rate") is None
    with pytest.raises(ValueError, match="unknown metric 'Purchase_user_rate'"):
        metric("Purchase_user_rate")


#: what a simulated day can measure without feedback (docs/ope.md, "The simulation"): the lists, the catalog, the
#: days before and a model's predictions; every other metric of the registry needs feedback
MEASURED_WITHOUT_FEEDBACK = {
    *("pv", "uv", "pv_coverage", "uv_coverage", "pv_failure_rate", "uv_failure_rate", "item_coverage", "gini"),
    *("category_diversity", "intra_list_diversity", "novelty", "personalization", "update_rate"),
    *("update_rate_previous", "novel_item_share", "novel_category_share", "mean_predicted"),
}


def test_every_metric_either_needs_feedback_or_is_measured_without_it():
    # a new metric must take a side, or a simulated day would write it as a measured zero (issue 42)
    assert set(registry.FEEDBACK_METRICS) <= set(METRICS) and len(set(registry.FEEDBACK_METRICS)) == len(
        registry.FEEDBACK_METRICS
    )
    assert set(registry.EXPOSURE_METRICS) == MEASURED_WITHOUT_FEEDBACK
    assert set(registry.FEEDBACK_METRICS) == set(METRICS) - MEASURED_WITHOUT_FEEDBACK
    assert all(registry.needs_feedback(n) for n in registry.FEEDBACK_METRICS)
    assert not any(registry.needs_feedback(n) for n in MEASURED_WITHOUT_FEEDBACK)


def test_every_business_row_needs_feedback_conversion_events_included():
    from recsys_spark.kernels.business import Measured, business_values

    rows = business_values({}, Measured(clicks=True, value=True, dwell=True, events=("purchase", "add_to_cart")))
    names = [m for m, *_ in rows]
    assert {"clicks_per_exposure", "gmv_per_user", "dwell_per_click", "purchase_user_rate"} <= set(names)
    assert [n for n in names if not registry.needs_feedback(n)] == []


def test_one_direction_lookup_knows_the_offline_names():
    """ISSUE 42: the offline comparison's ``rating_mae`` is the registry's ``mae`` (lower is better), its
    ``sampled_``/``corrected_`` columns the ranking metrics (higher), the OPE estimators higher; a count has none."""
    assert registry.direction("rating_mae") == registry.direction("rating_rmse") == "lower"
    assert registry.direction("rating_distortion") == "lower"
    for name in ("sampled_ndcg", "corrected_ndcg", "sampled_auc", "corrected_mrr", "snips", "purchase_user_rate"):
        assert registry.direction(name) == "higher", name
    assert registry.direction("pv") is None and registry.direction("pcoc") is None
    assert registry.direction("not_a_metric") is None and registry.direction("sampled_") is None
    assert registry.higher_is_better("rating_mae") is False and registry.higher_is_better("gini") is False
    for name, m in METRICS.items():
        assert registry.direction(name) == m.better, name
