"""The colour rule (docs/report.md): a colour or a word that says "significant" follows the *adjusted* p-value
and, for an always-valid interval, that interval; a significant result is a gain or a loss by the metric's
better side (the registry), a change when the metric has none."""

from __future__ import annotations

import math
from typing import Any

from scipy import stats

from recsys_spark import registry
from recsys_spark.kernels.decisions import decision_words, normalise_code
from recsys_spark.report import svg

GAIN, LOSS, CHANGE, NOT_SIGNIFICANT = "gain", "loss", "change", "none"

#: the words beside a result, and its colour in the charts (the tables use the CSS classes)
VERDICT_WORDS = {
    GAIN: "significant gain",
    LOSS: "significant loss",
    CHANGE: "significant change",
    NOT_SIGNIFICANT: "not significant",
}

VERDICT_COLORS = {GAIN: svg.GREEN, LOSS: svg.RED, CHANGE: svg.PALETTE[0], NOT_SIGNIFICANT: svg.GREY}

VERDICT_CLASSES = {GAIN: "ok", LOSS: "bad", CHANGE: "changed", NOT_SIGNIFICANT: ""}


def is_sequential(ci_method: Any) -> bool:
    """Whether a row's interval is always valid (``ci_method`` starting with ``sequential`` or ``always``): then
    that interval is the one to read, at any time.

    >>> is_sequential("sequential_msprt"), is_sequential("Always-valid"), is_sequential("t"), is_sequential(None)
    (True, True, False, False)
    """
    return isinstance(ci_method, str) and ci_method.strip().lower().startswith(("sequential", "always"))


def verdict(
    metric: str,
    delta: float | None,
    p_adjusted: float | None,
    alpha: float,
    low: float | None = None,
    high: float | None = None,
    ci_method: Any = None,
) -> str:
    """What a comparison's colour and words say: :data:`GAIN`, :data:`LOSS`, :data:`CHANGE` or :data:`NOT_SIGNIFICANT`.

    Significant only when the **adjusted** p-value is below ``alpha`` (an unadjusted p or an unadjusted
    interval never colours a result); when the row's ``ci_method`` says its interval is sequential (always
    valid), that interval [low, high] must exclude 0 as well (with no adjusted p, the interval alone decides).
    A significant result is a gain or a loss by the metric's better side (the registry: a lower failure rate is
    a gain), a change when the metric has none.

    >>> verdict("ndcg", 0.1, 0.002, 0.05), verdict("ndcg", 0.1, 0.495, 0.05, 0.01, 0.2)
    ('gain', 'none')
    >>> verdict("pv_failure_rate", -0.01, 0.01, 0.05), verdict("pv", 5.0, 0.01, 0.05)
    ('gain', 'change')
    >>> verdict("ndcg", 0.1, 0.01, 0.05, -0.02, 0.2, "sequential_msprt")
    'none'
    >>> verdict("rating_mae", -0.1, 0.01, 0.05), verdict("corrected_ndcg", -0.1, 0.01, 0.05)
    ('gain', 'loss')
    """
    if is_sequential(ci_method):
        significant = (
            low is not None
            and high is not None
            and (low > 0 or high < 0)
            and (p_adjusted is None or p_adjusted < alpha)
        )
    else:
        significant = p_adjusted is not None and p_adjusted < alpha
    if not significant or delta is None or delta == 0:
        return NOT_SIGNIFICANT
    better = registry.higher_is_better(metric)  # the one lookup: rating_mae is mae, sampled_ndcg is ndcg
    if better is None:
        return CHANGE
    return GAIN if (delta > 0) == better else LOSS


#: a decision's banner class per code (its words: the decisions kernel's DECISION_WORDS; ISSUE 42's contract: never
#: red for not enough evidence, an invalid experiment red-bordered grey)
DECISION_CLASSES = {"ship": "ok", "do_not_ship": "bad", "not_enough_evidence": "warn", "invalid": "invalid"}
#: a gate's (and a check's) state: its words and class (recsys_spark/kernels/gate.py STATE_WORDS)
GATE_STATES = {
    "passed": ("PASSED", "ok"),
    "inconclusive": ("NOT ENOUGH EVIDENCE YET", "warn"),
    "failed": ("FAILED", "bad"),
}


def decision_state(code: Any) -> dict[str, str]:
    """A stored decision's ``code`` as this release names it (:func:`recsys_spark.kernels.decisions.normalise_code`:
    an old ``keep_running`` is ``not_enough_evidence``), its words (``decision_words``) and its banner's class;
    an unknown code is shown as it is, amber (never red).

    >>> decision_state("keep_running")
    {'code': 'not_enough_evidence', 'words': 'NOT ENOUGH EVIDENCE YET', 'class': 'warn'}
    >>> decision_state("do_not_ship")["class"], decision_state("invalid")["words"]
    ('bad', 'INVALID EXPERIMENT')
    """
    text = normalise_code(str(code) if code is not None else None) or "unknown"
    return {"code": text, "words": decision_words(text), "class": DECISION_CLASSES.get(text, "warn")}


def gate_state(verdict: dict[str, Any]) -> str:
    """A verdict's (or a check's) state: its ``state`` when it has a known one, else (a verdict written before
    the three states) ``passed`` or ``failed`` by its ``passed``.

    >>> gate_state({"state": "inconclusive", "passed": False}), gate_state({"passed": True}), gate_state({})
    ('inconclusive', 'passed', 'failed')
    """
    state = verdict.get("state")
    if state in GATE_STATES:
        return str(state)
    return "passed" if verdict.get("passed") is True else "failed"


def adjusted_interval(
    point: float | None,
    low: float | None,
    high: float | None,
    p: float | None,
    p_adjusted: float | None,
    alpha: float,
    df: float | None = None,
) -> tuple[float | None, float | None]:
    """The interval adjusted as its row's p-value is: at the level the adjustment spends on this row,
    α' = α · p / p_adjusted (Bonferroni's α/m exactly; Holm's and Benjamini-Hochberg's step's share), each side's
    distance from the point scaled by q(1 − α'/2) / q(1 − α/2) (q: Student's t with ``df``, else the normal).
    Then the adjusted interval excludes 0 exactly when the adjusted p is below α (for an interval and a p from
    the same test), so an interval never says "significant" beside an adjusted p that does not.  The interval
    as it is when nothing was adjusted (p_adjusted ≤ p); (None, None) when there is no p or no adjusted p.

    >>> lo, hi = adjusted_interval(0.015, 0.001, 0.029, 0.03, 0.2, 0.05)  # an A/A row: p 0.03, Holm-adjusted 0.2
    >>> round(lo, 3), round(hi, 3)
    (-0.004, 0.034)
    >>> adjusted_interval(0.02, 0.01, 0.03, 0.001, 0.001, 0.05), adjusted_interval(0.02, 0.01, 0.03, None, 0.1, 0.05)
    ((0.01, 0.03), (None, None))
    """
    if point is None or low is None or high is None or p is None or p_adjusted is None:
        return None, None
    if p_adjusted <= p or p <= 0:
        return low, high
    spent = alpha * p / min(p_adjusted, 1.0)
    law = stats.t(df) if df is not None and math.isfinite(df) and df > 0 else stats.norm
    scale = float(law.ppf(1 - spent / 2) / law.ppf(1 - alpha / 2))
    return point - (point - low) * scale, point + (high - point) * scale


def shown_intervals(row: dict[str, Any], alpha: float, df: float | None = None) -> dict[str, Any]:
    """The intervals a result row shows beside its adjusted p (``adj_ci_low`` .. ``adj_rel_ci_high``) and what
    they are (``interval_basis``): ``adjusted`` as the p is (:func:`adjusted_interval`), ``always valid`` for a
    sequential interval (read as it is: the colour rule needs it to exclude 0 as well), ``unadjusted`` when the
    row has no p to adjust it by (and then no adjusted p either)."""
    if row["sequential"]:
        basis, absolute, relative = (
            "always valid",
            (row["ci_low"], row["ci_high"]),
            (row["rel_ci_low"], row["rel_ci_high"]),
        )
    else:
        p, p_adj = row["p_value"], row["p_adjusted"]
        absolute = adjusted_interval(row["delta"], row["ci_low"], row["ci_high"], p, p_adj, alpha, df)
        relative = adjusted_interval(row["rel_delta"], row["rel_ci_low"], row["rel_ci_high"], p, p_adj, alpha, df)
        basis = "adjusted" if absolute[0] is not None or relative[0] is not None else "unadjusted"
        if basis == "unadjusted":
            absolute, relative = (row["ci_low"], row["ci_high"]), (row["rel_ci_low"], row["rel_ci_high"])
    return {
        "interval_basis": basis,
        "adj_ci_low": absolute[0],
        "adj_ci_high": absolute[1],
        "adj_rel_ci_low": relative[0],
        "adj_rel_ci_high": relative[1],
    }


def correction_words(value: Any) -> str:
    """How a correction adjusted a p-value, as a header says it: ``Holm-adjusted``, ``not adjusted``
    (``none``), ``adjusted`` when the run did not write which.

    >>> correction_words("holm"), correction_words("none"), correction_words(None)
    ('Holm-adjusted', 'not adjusted', 'adjusted')
    """
    names = {"holm": "Holm", "bonferroni": "Bonferroni", "bh": "Benjamini-Hochberg", "fdr_bh": "Benjamini-Hochberg"}
    if not isinstance(value, str):
        return "adjusted"
    return "not adjusted" if value.lower() == "none" else f"{names.get(value.lower(), value)}-adjusted"


def verdict_fields(found: str, ci_method: Any) -> dict[str, Any]:
    """What a result row carries of its verdict ``found``: the verdict, its words and CSS class, whether its
    interval is sequential and whether it is significant."""
    return {
        "verdict": found,
        "verdict_words": VERDICT_WORDS[found],
        "verdict_class": VERDICT_CLASSES[found],
        "sequential": is_sequential(ci_method),
        "significant": found != NOT_SIGNIFICANT,
    }
