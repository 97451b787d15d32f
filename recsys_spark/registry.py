"""Every metric's name, in one place: what it is, which way is better, its range, and how its key is spelled.

The daily job, the experiments, the offline evaluation, the report and the summary read metric names
through this module only (a test checks it).  A row of a ``metrics`` table is named by three columns,
``metric``, ``k`` and ``aggregation``; wherever one string must name it (the summary's ``headline``,
``experiments.metrics``, ``report.regression_x``, a gate's check), the one spelling is its **key**::

    ndcg@10_user_avg      metric "ndcg", k 10, aggregation "user_avg"
    exposure_ctr_global   metric "exposure_ctr", no k, aggregation "global"

:func:`key` writes it and :func:`parse_key` reads it back.  A name means one formula in every command
(docs/metrics.md, docs/offline.md); a quantity that differs gets a name of its own.  Plain Python: the
kernels read it too.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

#: how a metric's value is pooled over units (docs/metrics.md, "Aggregations"; docs/offline.md)
AGGREGATIONS = (
    "user_avg",
    "list_avg",
    "impression_weighted",
    "global",
    "catalog",
    "exposed",
    "item_avg",
    "sampled_naive",
    "sampled_corrected",
)


@dataclass(frozen=True)
class Metric:
    """What a metric name means beyond its formula (docs/metrics.md has the formula).

    ``better``: ``"higher"``, ``"lower"`` or None (a count or a level with no better side, such as ``pv`` or
    PCOC, whose target is 1); ``low``/``high``: the range of its values (None: unbounded); ``at_k``: the
    metric takes a cut-off k; ``label``: the reader's name; ``percent``: the report shows it as a percentage.
    """

    name: str
    better: str | None
    low: float | None = 0.0
    high: float | None = 1.0
    at_k: bool = False
    label: str = ""
    percent: bool = False

    @property
    def higher_is_better(self) -> bool | None:
        return None if self.better is None else self.better == "higher"

    @property
    def reader_name(self) -> str:
        return self.label or self.name.replace("_", " ")


def _m(name: str, better: str | None, low: float | None = 0.0, high: float | None = 1.0, **kw: object) -> Metric:
    return Metric(name, better, low, high, **kw)  # type: ignore[arg-type]


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        # ranking: one value per list (at k) or per user, averaged (docs/metrics.md, "Ranking metrics")
        _m("ndcg", "higher", at_k=True, label="NDCG"),
        _m("map", "higher", at_k=True, label="MAP"),
        _m("precision", "higher", at_k=True, percent=True),
        _m("recall", "higher", at_k=True, percent=True),
        _m("hit_rate", "higher", at_k=True, label="hit rate", percent=True),
        _m("f1", "higher", at_k=True, label="F1"),
        _m("mrr", "higher", label="MRR"),
        _m("auc", "higher", label="AUC"),
        # health (docs/metrics.md, "Health and business metrics")
        _m("pv", None, high=None, label="PV"),
        _m("uv", None, high=None, label="UV"),
        _m("pv_coverage", "higher", label="PV coverage", percent=True),
        _m("uv_coverage", "higher", label="UV coverage", percent=True),
        _m("pv_failure_rate", "lower", label="PV failure rate", percent=True),
        _m("uv_failure_rate", "lower", label="UV failure rate", percent=True),
        _m("item_coverage", "higher", percent=True),
        _m("gini", "lower", label="Gini"),
        _m("category_diversity", "higher"),
        _m("intra_list_diversity", "higher"),
        _m("novelty", "higher", high=None),
        _m("personalization", "higher"),
        _m("update_rate", None),
        _m("serendipity", "higher"),
        # business
        _m("exposure_ctr", "higher", label="exposure CTR", percent=True),
        _m("pv_ctr", "higher", high=None, label="clicked exposures per request (PV CTR)"),
        _m("uv_ctr", "higher", high=None, label="clicked exposures per user (UV CTR)"),
        _m("uv_conversion", "higher", label="UV conversion", percent=True),
        _m("clicks_per_clicking_user", "higher", low=1.0, high=None),
        # robustness: how much the clicks lean on a few users (docs/metrics.md, "Robustness")
        _m("click_concentration", "lower", label="click share of the top 1 % of clicking users", percent=True),
        _m("clicks_gini", "lower", label="Gini of clicks over clicking users"),
        _m("capped_ctr", "higher", label="capped CTR", percent=True),
        # business: clicks counted as events, the seed's 点击量 (docs/metrics.md, "The seed's definitions")
        _m("clicks_per_exposure", "higher", high=None),
        _m("clicks_per_request", "higher", high=None),
        _m("clicks_per_user", "higher", high=None),
        # business: value and dwell time of the events (docs/metrics.md, "Value metrics")
        _m("gmv_per_exposure", "higher", high=None, label="GMV per exposure"),
        _m("gmv_per_request", "higher", high=None, label="GMV per request"),
        _m("gmv_per_user", "higher", high=None, label="GMV per user (ARPU)"),
        _m("value_per_converting_user", "higher", high=None),
        _m("dwell_per_click", "higher", high=None, label="dwell seconds per click"),
        _m("dwell_per_user", "higher", high=None, label="dwell seconds per user"),
        # health: the seed's variants (docs/metrics.md, "The seed's definitions")
        _m("update_rate_previous", None, high=None, label="update rate against the previous day's items"),
        _m("novel_item_share", "higher", percent=True),
        _m("novel_category_share", "higher", percent=True),
        # offline: predictions and ratings (docs/offline.md)
        _m("logloss", "lower", high=None, label="log loss"),
        _m("ece", "lower", label="ECE"),
        _m("pcoc", None, high=None, label="PCOC"),
        _m("mean_predicted", None, label="mean predicted"),
        _m("observed_rate", None, label="observed rate"),
        _m("accuracy", "higher", percent=True),  # at a threshold (docs/metrics.md, "Threshold metrics")
        _m("mae", "lower", high=None, label="MAE"),
        _m("rmse", "lower", high=None, label="RMSE"),
        _m("nmae", "lower", high=None, label="NMAE"),
        _m("nrmse", "lower", high=None, label="NRMSE"),
        _m("distortion", "lower", high=None),
    )
}

#: the threshold classification metrics of pointwise predictions, in the order they are written and shown (then
#: each F_alpha, :func:`f_score_name`): rows with ``k`` null, ``global``, and their ``threshold`` (docs/metrics.md)
THRESHOLD_METRICS = ("accuracy", "precision", "recall")

#: the metrics that need feedback (a click, a label, another event or its value and dwell time): a simulation has
#: none, and writes none of them (not a zero: no row).  Every name of :data:`METRICS` is either here or measured
#: from the lists alone (:data:`EXPOSURE_METRICS`); the conversion-event rates (``<event>_user_rate``,
#: ``<event>_exposure_rate``) need feedback too: :func:`needs_feedback` answers for every name.
FEEDBACK_METRICS = (
    # ranking: scored against the clicked (relevant) items
    "ndcg",
    "map",
    "precision",
    "recall",
    "hit_rate",
    "f1",
    "mrr",
    "auc",
    # business: clicked exposures, clicks, value and dwell of the events
    "exposure_ctr",
    "pv_ctr",
    "uv_ctr",
    "uv_conversion",
    "clicks_per_clicking_user",
    "click_concentration",
    "clicks_gini",
    "capped_ctr",
    "clicks_per_exposure",
    "clicks_per_request",
    "clicks_per_user",
    "gmv_per_exposure",
    "gmv_per_request",
    "gmv_per_user",
    "value_per_converting_user",
    "dwell_per_click",
    "dwell_per_user",
    # offline: held-out truth, labels and ratings
    "serendipity",
    "logloss",
    "ece",
    "pcoc",
    "observed_rate",
    "accuracy",
    "mae",
    "rmse",
    "nmae",
    "nrmse",
    "distortion",
)

#: the metrics measured without feedback (from the lists, the catalog, the days before, a model's predictions): what
#: a simulated day writes
EXPOSURE_METRICS = tuple(name for name in METRICS if name not in FEEDBACK_METRICS)


#: off-policy estimators (docs/ope.md): a policy's expected reward per logged row (``item``) or per list
#: (``list``); ``logged`` and ``logged_list`` are the logging policy's observed reward, the baseline
OPE_ESTIMATORS: dict[str, Metric] = {
    m.name: m
    for m in (
        _m("logged", None, high=None, label="logged policy (observed)"),
        _m("ips", "higher", high=None, label="IPS"),
        _m("snips", "higher", high=None, label="SNIPS"),
        _m("dm", "higher", high=None, label="DM"),
        _m("dr", "higher", high=None, label="DR"),
        _m("sndr", "higher", high=None, label="SNDR"),
        _m("switch_dr", "higher", high=None, label="Switch-DR"),
        _m("replay", "higher", high=None, label="replay"),
        _m("logged_list", None, high=None, label="logged policy, per list (observed)"),
        _m("slate_ips", "higher", high=None, label="slate IPS"),
        _m("iips", "higher", high=None, label="IIPS"),
        _m("rips", "higher", high=None, label="RIPS"),
    )
}
#: the diagnostics of an OPE run: which way is healthier (None: a count or a level)
OPE_DIAGNOSTICS: dict[str, Metric] = {
    m.name: m
    for m in (
        _m("users", None, high=None),
        _m("rows", None, high=None, label="logged rows"),
        _m("lists", None, high=None, label="logged lists"),
        _m("rows_without_propensity", "lower", high=None, label="rows without a propensity"),
        _m("effective_sample_size", "higher", high=None, label="effective sample size"),
        _m("effective_sample_share", "higher", label="effective sample share", percent=True),
        _m("max_weight", "lower", high=None, label="largest importance weight"),
        _m("mean_weight", None, high=None, label="mean importance weight"),
        _m("unseen_logged_share", None, label="logged rows the candidate never shows", percent=True),
        _m("unsupported_target_share", "lower", label="candidate mass the logs never show", percent=True),
        _m("matched_rows", "higher", high=None, label="rows where the candidate agrees for sure"),
        _m("mean_target_mass", None, label="candidate's mass at a logged position"),
    )
}

#: list metrics: one value per list and cut-off k, averaged per user (the daily per-user table's k columns)
LIST_METRICS = ("ndcg", "map", "precision", "recall", "hit_rate")
#: the offline per-user table's k columns: the same, and F1 (offline lists are scored against held-out truth)
OFFLINE_LIST_METRICS = ("precision", "recall", "f1", "ndcg", "map", "hit_rate")


#: the families of metrics named after a conversion event ``<event><suffix>`` (``labels.conversion_events``):
#: suffix -> (what the rate counts, the reader's words)
EVENT_RATES = {"_user_rate": "users", "_exposure_rate": "exposures"}
_EVENT = re.compile(r"[a-z0-9_]+")


def event_rate(name: str) -> Metric | None:
    """The conversion-rate metric ``name`` names (``purchase_user_rate``: users with a purchase attributed to an
    exposure / users with exposures), or None when it names none.  Conversions are wanted outcomes: higher is
    better.

    >>> event_rate("purchase_user_rate").reader_name, event_rate("ndcg") is None
    ('purchase user rate', True)
    """
    for suffix in EVENT_RATES:
        event = name[: -len(suffix)] if name.endswith(suffix) else ""
        if event and _EVENT.fullmatch(event):
            return Metric(
                name, "higher", label=f"{event.replace('_', ' ')} {suffix[1:].replace('_', ' ')}", percent=True
            )
    return None


_F_SCORE = re.compile(r"f(\d+(?:\.\d+)?)")


def f_score_name(alpha: float) -> str:
    """The metric name of F_alpha (docs/metrics.md, "F-scores and thresholds"): ``f`` and alpha as the shortest
    decimal that reads back to it.

    >>> f_score_name(1.0), f_score_name(0.5), f_score_name(2.0)
    ('f1', 'f0.5', 'f2')
    """
    text = repr(float(alpha))
    return f"f{text[:-2] if text.endswith('.0') else text}"


def f_score(name: str) -> Metric | None:
    """The F-score metric ``name`` names (``f0.5``: F_0.5 at a cut-off; ``f1`` is in :data:`METRICS`), or None.

    >>> f_score("f0.5").reader_name, f_score("f2").at_k, f_score("fx") is None, f_score("f0") is None
    ('F0.5', True, True, True)
    """
    found = _F_SCORE.fullmatch(name)
    if found is None or float(found.group(1)) <= 0 or f_score_name(float(found.group(1))) != name:
        return None
    return Metric(name, "higher", at_k=True, label=f"F{found.group(1)}")


#: a survey question's metric: ``survey_<question>``, the question's name sanitised (:func:`survey_name`)
SURVEY_PREFIX = "survey_"
_SURVEY_DROP = re.compile(r"[^a-z0-9]+")


def survey_name(question: str) -> str | None:
    """The metric a survey question is written under: ``survey_`` and the question lower-cased, every run of
    characters other than ``a-z0-9`` one ``_``, no ``_`` at either end; None when nothing is left
    (docs/metrics.md, "Surveys"; the Spark form: :func:`recsys_spark.daily.surveys.question_name`).

    >>> survey_name("Satisfaction"), survey_name("  Would you recommend us? "), survey_name("???")
    ('survey_satisfaction', 'survey_would_you_recommend_us', None)
    """
    body = _SURVEY_DROP.sub("_", question.lower()).strip("_")
    return f"{SURVEY_PREFIX}{body}" if body else None


def survey_metric(name: str) -> Metric | None:
    """The survey metric ``name`` names (``survey_satisfaction``: each responding user's mean score on the
    question, averaged over users), or None.  A score is higher-is-better (a question is asked so that a higher
    score is a happier user); its range is the survey's own (unbounded here).

    >>> survey_metric("survey_satisfaction").higher_is_better, survey_metric("survey_") is None
    (True, True)
    """
    body = name[len(SURVEY_PREFIX) :] if name.startswith(SURVEY_PREFIX) else ""
    if body and _EVENT.fullmatch(body) and not body.startswith("_") and not body.endswith("_"):
        return Metric(name, "higher", low=None, high=None, label=f"survey: {body.replace('_', ' ')}")
    return None


#: the composite metrics of the loaded config (``[[metrics.composite]]``), by name: registered as the config
#: loads (:func:`register_composite`), so that every reader of a metric name knows them
COMPOSITES: dict[str, Metric] = {}


def register_composite(name: str, better: str = "higher") -> Metric:
    """Register the composite metric ``name`` (docs/metrics.md, "Composite metric"); a ValueError when the name
    is already a metric of the registry (a built-in, a conversion-event rate, a survey question, an OPE name)
    or not a name of ``[a-z0-9_]`` (it becomes a metric key)."""
    if not _EVENT.fullmatch(name):
        raise ValueError(f"composite name {name!r} is not a name of lower-case letters, digits and _")
    if name in METRICS or event_rate(name) or survey_metric(name) or name in OPE_ESTIMATORS or name in AGGREGATIONS:
        raise ValueError(f"composite name {name!r} clashes with the registry's metric {name!r}")
    out = COMPOSITES[name] = Metric(name, better, low=None, high=None, label=f"{name.replace('_', ' ')} (composite)")
    return out


def is_composite(name: str) -> bool:
    """Whether ``name`` is a composite metric of the loaded config."""
    return name in COMPOSITES and name not in METRICS


def find(name: str) -> Metric | None:
    """The metric called ``name`` (a conversion-event rate, an F-score, a survey question or a configured composite
    included), or None when there is none."""
    return METRICS.get(name) or event_rate(name) or f_score(name) or survey_metric(name) or COMPOSITES.get(name)


def needs_feedback(name: str) -> bool:
    """Whether the metric ``name`` needs feedback: a name of :data:`FEEDBACK_METRICS`, a conversion-event rate or
    an F-score.

    >>> needs_feedback("gmv_per_user"), needs_feedback("purchase_user_rate"), needs_feedback("gini")
    (True, True, False)
    """
    if name in METRICS:
        return name in FEEDBACK_METRICS
    # a composite combines per-user ranking metrics (feedback); a survey is not in the logs, and a day without
    # feedback (a simulation) has no user to join it to: neither is written there
    return (
        event_rate(name) is not None
        or f_score(name) is not None
        or survey_metric(name) is not None
        or name in COMPOSITES
    )


def metric(name: str) -> Metric:
    """The metric called ``name``; a ValueError naming it (and the nearest names) when there is none.

    >>> metric("ndcg").higher_is_better, metric("gini").higher_is_better, metric("pv").higher_is_better
    (True, False, None)
    """
    try:
        return METRICS[name]
    except KeyError:
        family = event_rate(name) or f_score(name) or survey_metric(name) or COMPOSITES.get(name)
        if family is not None:
            return family
        near = difflib.get_close_matches(name, METRICS, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise ValueError(f"unknown metric {name!r}{hint}") from None


#: the prefixes an offline per-user column puts before a registry name (recsys_spark/offline/, kernels/sampled.py),
#: and what a row so named is: the comparison's ``rating_mae`` is the registry's ``mae``
OFFLINE_PREFIXES = {
    "rating_": "a rating error (offline ratings)",
    "sampled_": "naive sampled: ranked among m sampled negatives only, biased (docs/offline.md)",
    "corrected_": "corrected sampled: Krichene & Rendle's estimate of the full-catalog value (docs/offline.md)",
}


def lookup(name: str) -> Metric | None:
    """The metric ``name`` is, by any name a table writes it under: a registry name, a conversion-event rate,
    an off-policy estimator, or an offline per-user column's name (``rating_mae`` is ``mae``,
    ``sampled_ndcg`` and ``corrected_ndcg`` are ``ndcg``: :data:`OFFLINE_PREFIXES`); None when it names none.

    >>> lookup("rating_mae").name, lookup("corrected_ndcg").name, lookup("snips").name, lookup("x") is None
    ('mae', 'ndcg', 'snips', True)
    """
    found = find(name) or OPE_ESTIMATORS.get(name)
    if found is not None:
        return found
    for prefix in sorted(OFFLINE_PREFIXES, key=len, reverse=True):
        if name.startswith(prefix) and len(name) > len(prefix):
            return find(name[len(prefix) :])
    return None


def direction(name: str) -> str | None:
    """Which way is better for the metric ``name`` under any name a table writes it (:func:`lookup`):
    ``"higher"``, ``"lower"``, or None (no better side, or a name the registry does not know).  The one
    lookup every comparison's colour takes (the report's offline, OPE, experiment and gate rows).

    >>> direction("ndcg"), direction("rating_rmse"), direction("sampled_auc"), direction("pv"), direction("zz")
    ('higher', 'lower', 'higher', None, None)
    """
    found = lookup(name)
    return None if found is None else found.better


def higher_is_better(name: str) -> bool | None:
    """:func:`direction` as a boolean: True (higher), False (lower), None (no better side, or unknown).

    >>> higher_is_better("rating_mae"), higher_is_better("purchase_user_rate"), higher_is_better("pcoc")
    (False, True, None)
    """
    better = direction(name)
    return None if better is None else better == "higher"


def metric_name(name: str, k: int | None = None) -> str:
    """A metric at a cut-off as one word: ``ndcg@10``; ``mrr`` without k.

    >>> metric_name("ndcg", 10), metric_name("mrr")
    ('ndcg@10', 'mrr')
    """
    return name if k is None else f"{name}@{k}"


def key(name: str, k: int | None, aggregation: str) -> str:
    """The one spelling of a (metric, k, aggregation): ``ndcg@10_user_avg``, ``auc_global``.

    >>> key("ndcg", 10, "user_avg"), key("exposure_ctr", None, "global")
    ('ndcg@10_user_avg', 'exposure_ctr_global')
    """
    return f"{metric_name(name, k)}_{aggregation}"


def parse_key(text: str) -> tuple[str, int | None, str]:
    """``METRIC[@K]_AGGREGATION`` -> (metric, k, aggregation), checked against the registry.

    The aggregation is the longest known one the key ends with (metric names hold underscores too).
    Raises ValueError naming the key and why (an unknown metric or aggregation, a k where the metric
    takes none, a missing k).

    >>> parse_key("ndcg@10_user_avg"), parse_key("auc_impression_weighted")
    (('ndcg', 10, 'user_avg'), ('auc', None, 'impression_weighted'))
    """
    for aggregation in sorted(AGGREGATIONS, key=len, reverse=True):
        suffix = f"_{aggregation}"
        if text.endswith(suffix) and len(text) > len(suffix):
            name, _, k_text = text[: -len(suffix)].partition("@")
            break
    else:
        raise ValueError(
            f"not a metric key of the form METRIC[@K]_AGGREGATION: {text!r} (aggregations: {', '.join(AGGREGATIONS)})"
        )
    found = metric(name)
    if k_text and not k_text.isdigit():
        raise ValueError(f"metric key {text!r}: k must be a positive integer, got {k_text!r}")
    k = int(k_text) if k_text else None
    if found.at_k and not k:
        raise ValueError(f"metric key {text!r}: {name} needs @k (e.g. {key(name, 10, aggregation)})")
    if not found.at_k and k is not None:
        raise ValueError(f"metric key {text!r}: {name} takes no @k")
    return name, k, aggregation


#: the headline metrics: printed by the CLI, first in the summary, charted by the report: (metric, k, aggregation)
HEADLINE: tuple[tuple[str, int | None, str], ...] = (
    ("auc", None, "global"),
    ("auc", None, "user_avg"),
    ("auc", None, "impression_weighted"),
    ("ndcg", 10, "user_avg"),
    ("map", 10, "user_avg"),
    ("mrr", None, "user_avg"),
    ("precision", 10, "global"),
    ("recall", 10, "global"),
    ("hit_rate", 10, "user_avg"),
    ("exposure_ctr", None, "global"),
    ("pv_failure_rate", None, "global"),
    ("gini", None, "catalog"),
)

#: how much the clicks lean on a few users (docs/metrics.md, "Robustness"): charted by the report after the headline
ROBUSTNESS: tuple[tuple[str, int | None, str], ...] = (
    ("click_concentration", None, "global"),
    ("clicks_gini", None, "global"),
    ("capped_ctr", None, "global"),
)

#: the default of experiments.metrics: the headline metrics that have a per-user form (the exact pooled AUC and
#: Gini have none), by :func:`key`, plus pv_ctr
EXPERIMENT_METRICS: tuple[str, ...] = (
    "auc_user_avg",
    "auc_impression_weighted",
    "ndcg@10_user_avg",
    "map@10_user_avg",
    "mrr_user_avg",
    "precision@10_global",
    "recall@10_global",
    "hit_rate@10_user_avg",
    "exposure_ctr_global",
    "pv_ctr_global",
    "pv_failure_rate_global",
)

#: the defaults of experiments.goals: the metrics whose improvement ships a variant (direction: :attr:`Metric.better`)
EXPERIMENT_GOALS: tuple[str, ...] = ("ndcg@10_user_avg", "exposure_ctr_global")
#: the defaults of experiments.guardrails: (metric key, absolute margin, relative margin), the worsening a variant
#: may show on each and still ship (docs/experiments.md, "Decisions"): half a percentage point of requests answered
#: with an empty list
EXPERIMENT_GUARDRAILS: tuple[tuple[str, float | None, float | None], ...] = (("pv_failure_rate_global", 0.005, None),)
