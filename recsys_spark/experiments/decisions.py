"""The ship decision of every variant of every analysed experiment, from the ``all`` slice's result rows and the
checks (:func:`recsys_spark.kernels.decisions.decide`: goals, guardrails and their margins, the validity the
checks give): the ``experiment_decisions`` rows, the day's and the window's.  docs/experiments.md, "Decisions".
"""

from __future__ import annotations

from recsys_spark.config import Config
from recsys_spark.experiments.analysis import Analysis
from recsys_spark.kernels.decisions import Decision, Margin, Roles, Validity, decide, effects_of


def decisions(analysis: Analysis, cfg: Config) -> list[Decision]:
    """The ship decision of every variant of every analysed experiment (:func:`kernels.decisions.decide`), from
    the ``all`` slice's rows and the checks; each experiment's summary section gets its ``decisions``
    (variant -> decision and reasons) and the ``decision_metrics`` they read (goals, guardrails, secondary).
    An experiment with no variant besides the control has one row with a null variant (invalid: not
    compared)."""
    results, checks, section = analysis
    ex = cfg.experiments
    out: list[Decision] = []
    for name, e in sorted(section.items()):
        goals, guardrails, secondary = ex.roles(name)
        roles = Roles(
            goals, tuple(Margin(g.metric, g.absolute_margin, g.relative_margin) for g in guardrails), secondary
        )
        srm = next((c for c in checks if c.experiment == name and c.check == "srm"), None)
        variants = sorted(v for v in e["users"] if v != ex.control) or [None]
        e["decision_metrics"] = {
            "goals": list(goals),
            "guardrails": [
                {"metric": g.metric, "absolute_margin": g.absolute_margin, "relative_margin": g.relative_margin}
                for g in guardrails
            ],
            "secondary": list(secondary),
        }
        e["decisions"] = {}
        for variant in variants:
            validity = Validity(
                compared=e["state"] != "not_compared",
                not_compared_reason=e["reason"],
                srm_passed=srm is None or srm.passed or srm.p_value is None,  # not tested: no mismatch
                srm_p_value=srm.p_value if srm is not None else None,
                multiple_assignment=int(e["excluded_multiple_variants"]),
                control_users=int(e["users"].get(ex.control, 0)),
                variant_users=int(e["users"].get(variant, 0)) if variant is not None else 0,
            )
            effects = effects_of(results, name, variant) if variant is not None else {}
            d = decide(name, variant, effects, roles, validity, ex.min_users_per_arm, ex.inference)
            out.append(d)
            e["decisions"][variant or ""] = {"decision": d.decision, "reasons": d.reasons}
    return out
