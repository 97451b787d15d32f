"""The recommended off-policy estimate: one to read first, or none with the reason (docs/ope.md, "The
recommended estimate"). Pure Python over the estimates and diagnostics of :mod:`recsys_spark.kernels.ope`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from recsys_spark.kernels.ope import Estimate

#: the rule's thresholds (docs/ope.md, "The recommended estimate"): the share of the candidate's mass the logs
#: show at least, the effective sample size at least, the largest weight's share of Σ w at most
MIN_SUPPORT = 0.95
MIN_EFFECTIVE_SAMPLE = 100.0
MAX_WEIGHT_SHARE = 0.05
#: SLOPE's constant (Su, Srinath & Krishnamurthy 2020; obp's ``tuning_method="slope"`` uses the same)
SLOPE_C = math.sqrt(6.0) - 1.0
#: the estimators the rule may recommend, the least assuming first; not dm nor switch_dr (their intervals leave
#: out the reward model's own error, on every row or on the rows above τ, and SLOPE trusts the narrowest
#: interval that agrees), nor replay (unbiased only under uniform logging), nor the list-level ones (per list)
RECOMMENDABLE = ("ips", "snips", "dr", "sndr")
#: estimators of the candidate's reward per position it fills (the others: per logged position)
PER_FILLED_POSITION = ("snips", "sndr")
RECOMMENDED_FIELDS = ("estimator", "value", "ci_low", "ci_high", "delta", "delta_ci_low", "delta_ci_high", "reason")


def recommend(estimates: Sequence[Estimate], diagnostics: Mapping[str, float | None]) -> dict[str, object]:
    """The one estimate to read first, by the rule of docs/ope.md, as ``{estimator, value, ci_low, ci_high,
    delta, delta_ci_low, delta_ci_high, reason}`` (every field but ``reason`` null when none can be recommended).

    1. none without a row-level propensity (nothing weighs the logs), when the logs show less than
       :data:`MIN_SUPPORT` of the candidate's mass, when the effective sample size is below
       :data:`MIN_EFFECTIVE_SAMPLE`, or when one row carries more than :data:`MAX_WEIGHT_SHARE` of Σ w;
    2. among :data:`RECOMMENDABLE` with an interval (``snips``/``sndr`` only when the candidate fills every
       logged position: else they answer per filled position), SLOPE: by decreasing half-width h, keep each next
       estimator while |θ_i − θ_j| ≤ h_i + C h_j for every one kept (C = √6 − 1); the last kept is recommended:
       the narrowest interval that agrees with every wider, less assuming one.

    >>> e = [Estimate("ips", "item", 0.10, 0.02, 0.06, 0.14, "delta", 9, 9, 0.01, 0.02, -0.03, 0.05),
    ...      Estimate("dr", "item", 0.11, 0.01, 0.09, 0.13, "delta", 9, 9, 0.02, 0.01, 0.0, 0.04)]
    >>> d = {"rows": 500.0, "rows_without_propensity": 0.0, "effective_sample_size": 400.0, "max_weight": 2.0,
    ...      "mean_weight": 1.0, "unsupported_target_share": 0.0, "mean_target_mass": 1.0}
    >>> r = recommend(e, d); r["estimator"], r["value"]
    ('dr', 0.11)
    """
    by = {e.estimator: e for e in estimates}
    refusal = _refusal(by, diagnostics)
    if refusal:
        return dict.fromkeys(RECOMMENDED_FIELDS) | {"reason": refusal}
    fills = (diagnostics.get("mean_target_mass") or 0.0) >= 1 - 1e-6
    eligible = [
        by[name]
        for name in RECOMMENDABLE
        if name in by and by[name].se is not None and (fills or name not in PER_FILLED_POSITION)
    ]
    if not eligible:
        reason = "no estimator of the candidate's reward per logged position has an interval (see the notes)"
        return dict.fromkeys(RECOMMENDED_FIELDS) | {"reason": reason}
    kept, rejected = slope(eligible)
    chosen = kept[-1]
    left_out = [] if fills else [name for name in PER_FILLED_POSITION if name in by]
    return {
        "estimator": chosen.estimator,
        "value": chosen.value,
        "ci_low": chosen.ci_low,
        "ci_high": chosen.ci_high,
        "delta": chosen.delta,
        "delta_ci_low": chosen.delta_ci_low,
        "delta_ci_high": chosen.delta_ci_high,
        "reason": _reason(chosen, kept, rejected, diagnostics, left_out),
    }


def _refusal(by: Mapping[str, Estimate], d: Mapping[str, float | None]) -> str | None:
    """Why no estimate can be recommended (step 1 of :func:`recommend`), or None."""
    rows = d.get("rows") or 0.0
    rows_p = rows - (d.get("rows_without_propensity") or 0.0)
    if rows_p <= 0:
        lists = [name for name in ("slate_ips", "rips") if name in by]
        if lists:
            return (
                f"no logged row has a propensity: only the list-level estimates ran ({', '.join(lists)}, per list, "
                "below); the rule recommends an estimate per logged position"
            )
        return (
            "no logged row has a propensity: nothing weighs the logs, so no off-policy estimate can be made "
            "(dm rests on the reward model alone, which nothing here checks)"
        )
    unsupported = d.get("unsupported_target_share")
    if unsupported is not None and 1 - unsupported < MIN_SUPPORT:
        return (
            f"the logs show only {1 - unsupported:.1%} of the candidate's choices (its mass on item-position pairs "
            f"no logged row shows: {unsupported:.1%}; at least {MIN_SUPPORT:.0%} needed): no weight sees the rest, "
            "so every estimate from these logs misses it by an unknown amount"
        )
    ess = d.get("effective_sample_size")
    if ess is None or ess < MIN_EFFECTIVE_SAMPLE:
        shown = "none" if ess is None else f"{ess:.3g}"
        return (
            f"the weighted estimates rest on an effective sample of {shown} rows (at least "
            f"{MIN_EFFECTIVE_SAMPLE:.0f} needed): the candidate is too far from the logging policy for these logs"
        )
    total = (d.get("mean_weight") or 0.0) * rows_p
    top = d.get("max_weight")
    if top is not None and total > 0 and top / total > MAX_WEIGHT_SHARE:
        return (
            f"one logged row carries {top / total:.1%} of the total importance weight (weight {top:.3g}; at most "
            f"{MAX_WEIGHT_SHARE:.0%}): one click there moves every weighted estimate (clip with ope.clip, or "
            "check that row's propensity)"
        )
    return None


def slope(candidates: Sequence[Estimate]) -> tuple[list[Estimate], Estimate | None]:
    """SLOPE over ``candidates`` (each with an interval): sorted by decreasing half-width h (the wider first,
    ties in the given order), each next one kept while |θ_i − θ_j| ≤ h_i + C h_j for every j kept
    (C = :data:`SLOPE_C`); returns (the kept, the first one that disagreed or None)."""
    order = sorted(candidates, key=lambda e: -_half(e))
    kept = [order[0]]
    for e in order[1:]:
        if all(abs(float(e.value or 0.0) - float(k.value or 0.0)) <= _half(e) + SLOPE_C * _half(k) for k in kept):
            kept.append(e)
        else:
            return kept, e
    return kept, None


def _half(e: Estimate) -> float:
    return (float(e.ci_high or 0.0) - float(e.ci_low or 0.0)) / 2.0


def _reason(
    chosen: Estimate,
    kept: Sequence[Estimate],
    rejected: Estimate | None,
    d: Mapping[str, float | None],
    left_out: Sequence[str],
) -> str:
    """The recommendation's reason in words: why this estimator, what disagreed, the diagnostics it rests on."""
    names = ", ".join(e.estimator for e in kept)
    parts = [
        f"{chosen.estimator}: the narrowest interval that agrees with every wider one ({names})"
        if len(kept) > 1
        else f"{chosen.estimator}: the widest, least assuming interval"
    ]
    if rejected is not None:
        parts.append(
            f"{rejected.estimator} ({rejected.value:.4g}) disagrees with {kept[-1].estimator} ({chosen.value:.4g}) "
            "beyond their intervals, so nothing narrower is trusted"
        )
    if left_out:
        parts.append(
            f"{' and '.join(left_out)} left out: the candidate leaves positions empty and they estimate its reward "
            "per position it fills, the others per logged position"
        )
    unsupported = d.get("unsupported_target_share")
    support = "" if unsupported is None else f"support {1 - unsupported:.1%}, "
    ess, top = d.get("effective_sample_size") or 0.0, d.get("max_weight") or 0.0
    parts.append(f"{support}effective sample {ess:,.0f} rows, largest weight {top:.3g}")
    return "; ".join(parts)
