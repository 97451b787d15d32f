"""The lines the commands print: a day's headline and counts, one line per experiment (stdout)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recsys_spark.kernels.decisions import decision_words
from recsys_spark.registry import HEADLINE, key


def headline_lines(label: str, summary: Mapping[str, Any]) -> list[str]:
    """The day's status and headline metrics, the provisional and failed-rule lines, the data-quality counts."""
    values = summary["headline"]
    keys = [key(m, k, a) for m, k, a in HEADLINE]
    parts = [f"{key}={values[key]:.4f}" for key in keys if values.get(key) is not None]
    quality = summary["data_quality"]
    failed = [r["rule"] for r in summary.get("rules", []) if not r["passed"]]
    lines = [f"{label}: {summary['status']}  " + "  ".join(parts)]
    if summary.get("provisional"):
        lines.append(
            f"{label}: provisional: the next day's clicks are not there yet (late feedback); rerun to complete it"
        )
    if failed:
        lines.append(f"{label}: rules failed: {', '.join(failed)} (see rule_checks/dt={label})")
    lines.append(
        f"{label}: rows exposures={summary['input_rows']['exposures']} clicks={summary['input_rows']['clicks']} "
        f"duplicates={quality['duplicate_exposures']} orphan_events={quality['orphan_events']} "
        f"lists_without_relevant={quality.get('lists_without_relevant')} "
        f"users_without_auc={quality.get('users_without_auc')}"
    )
    return lines


def experiment_lines(label: str, section: Mapping[str, Any] | None) -> list[str]:
    """CLI lines: one per experiment, SRM first (a failed SRM says the results are not to be trusted); an
    experiment where nothing was compared says ``NOT COMPARED`` and why (and a failed SRM, never an "ok")."""
    if not section:
        return []
    if section.get("status") == "skipped":
        return [f"{label}: experiments: skipped ({section.get('note')})"]
    lines = []
    for name, e in sorted(section.get("experiments", {}).items()):
        users = " ".join(f"{v}={n}" for v, n in sorted(e["users"].items()))
        excluded = f" excluded={e['excluded_multiple_variants']}" if e["excluded_multiple_variants"] else ""
        if e.get("state") == "not_compared":  # never "SRM ok" nor "no significant difference": nothing was compared
            mismatch = e["srm_p_value"] is not None and not e["srm_passed"]  # e.g. a planned arm left empty
            srm = f"; SRM FAILED (p={e['srm_p_value']:.3g})" if mismatch else ""
            lines.append(
                f"{label}: experiment {name}: NOT COMPARED: {e['reason']}; users {users or 'none'}{excluded}{srm}"
            )
            continue  # its decision is "invalid" for the same reason: said once
        srm = (
            f"SRM ok (p={e['srm_p_value']:.3g})"
            if e["srm_passed"]
            else f"SRM FAILED (p={e['srm_p_value']:.3g}): results not to be trusted"
        )
        sig = ", ".join(
            f"{s['variant']} {s['metric']} {s['rel_delta']:+.1%} "
            f"[{s['rel_ci_low']:+.1%}, {s['rel_ci_high']:+.1%}] p_adj={s['p_adjusted']:.2g}"
            for s in e["significant"]
            if s["rel_delta"] is not None and s["rel_ci_low"] is not None
        )
        lines.append(
            f"{label}: experiment {name}: {srm}; users {users}{excluded}; {sig or 'no significant difference'}"
        )
        lines += decision_lines(label, name, e)
    return lines


def decision_lines(label: str, name: str, e: Mapping[str, Any]) -> list[str]:
    """One line per variant: its decision's words (:data:`~recsys_spark.kernels.decisions.DECISION_WORDS`), the
    sample it was made on when that is the accumulated one (``on 7 days since 2026-11-14``), and the reasons
    (docs/experiments.md, "Decisions")."""
    return [
        f"{label}: experiment {name}{' ' + variant if variant else ''}: {decision_words(d['decision'])}"
        + _basis(d)
        + ": "
        + "; ".join(d["reasons"])
        for variant, d in sorted(e.get("decisions", {}).items())
    ]


def _basis(d: Mapping[str, Any]) -> str:
    """`` (on 7 days since 2026-11-14)`` for a decision on the accumulated users, else ""."""
    if d.get("basis") != "cumulative":
        return ""
    return f" (on {d.get('days')} days since {d.get('first_day')})"
