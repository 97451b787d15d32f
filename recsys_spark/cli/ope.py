"""``recsys-spark ope``: a candidate policy's reward estimated from the logged days (off-policy evaluation)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from recsys_spark.cli.common import Command, date_arg, load, start_logging
from recsys_spark.errors import OPE_NO_PROPENSITIES, UsageError
from recsys_spark.tables import check_name

HELP = "estimate a candidate policy's reward from the logged days (off-policy evaluation)"
DESCRIPTION = (
    "Label the logged days as the daily job does, weigh each logged row by the candidate's probability of "
    "showing it (ope.target) over the logging policy's propensity, and write the estimates (IPS, SNIPS, DM, DR, "
    "SNDR, Switch-DR, replay; slate IPS, IIPS, RIPS) with intervals and the diagnostics to "
    "ope/{estimates,diagnostics,summary}/run=NAME/; the first line is the recommended estimate and why (none "
    "when the logs cannot answer); logs without any propensity exit 14 (docs/ope.md)."
)
EXAMPLE = (
    "recsys-spark ope --run ranker_v3 --start 2026-11-14 --end 2026-11-20 --input-root /data/logs "
    "--output-root /data/eval --set 'ope.target=\"/data/candidates/ranker_v3\"'"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="name of this OPE run (letters, digits, . _ -)")
    parser.add_argument("--start", type=date_arg, required=True, help="first logged day")
    parser.add_argument("--end", type=date_arg, required=True, help="last logged day, inclusive")
    parser.add_argument("--input-root", required=True, help="root of the input tables (the logged days)")
    parser.add_argument("--output-root", required=True, help="root of the output tables")


def check_arguments(args: argparse.Namespace) -> None:
    check_name(args.run, "--run", UsageError)
    if args.end < args.start:
        raise UsageError(f"--end {args.end} is before --start {args.start}")


def lines(summary: Mapping[str, Any]) -> list[str]:
    """What the command prints: the run's line, led by the recommended estimate (:func:`answer`), its reason,
    the counts, one line per estimate, the true value when the summary has it, one per note."""
    diagnostics = summary["diagnostics"]
    recommended = summary.get("recommended") or {}
    out = [
        f"ope run={summary['run']} {summary['start']}..{summary['end']}: {summary['status']}  {answer(recommended)}",
        f"  why: {recommended.get('reason') or 'no recommendation'}",
        f"  users={int(diagnostics['users'] or 0)} rows={int(diagnostics['rows'] or 0)} "
        f"ess={_f(diagnostics['effective_sample_size'])}",
    ]
    truth = summary.get("truth")
    if truth:
        out.append(
            f"  true value (the generator's): {_f(truth['value'])}, {_signed(truth['delta'])} against the logged policy"
        )
    for name, value in summary["estimates"].items():
        out.append(f"  {name:<12} {_f(value)}")
    out += [f"  note: {note}" for note in summary["notes"]]
    return out


def answer(recommended: Mapping[str, Any]) -> str:
    """``recommended dr 0.0623 [0.0581, 0.0665], +0.0123 [+0.0081, +0.0165] against the logged policy``, or
    ``no recommended estimate`` (the reason is the next line)."""
    if not recommended.get("estimator"):
        return "no recommended estimate"
    text = f"recommended {recommended['estimator']} {_f(recommended['value'])}"
    if recommended.get("ci_low") is not None:
        text += f" [{_f(recommended['ci_low'])}, {_f(recommended['ci_high'])}]"
    if recommended.get("delta") is not None:
        text += f", {_signed(recommended['delta'])}"
        if recommended.get("delta_ci_low") is not None:
            text += f" [{_signed(recommended['delta_ci_low'])}, {_signed(recommended['delta_ci_high'])}]"
        text += " against the logged policy"
    return text


def _f(value: float | None) -> str:
    return "null" if value is None else f"{value:.6g}"


def _signed(value: float | None) -> str:
    return "null" if value is None else f"{value:+.6g}"


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    cfg = load(args)
    from recsys_spark.ope.candidate import target_location

    target_location(cfg, args.input_root, args.run)  # an empty ope.target fails before Spark starts
    start_logging(args)
    from recsys_spark.runtime.session import job_session  # pyspark: only once a command runs

    spark = job_session(cfg, args.master, args.verbose)
    try:
        from recsys_spark.ope.run import run_ope

        summary = run_ope(spark, cfg, args.run, args.start, args.end, args.input_root, args.output_root)
    finally:
        spark.stop()
    for line in lines(summary):
        print(line)
    return OPE_NO_PROPENSITIES if summary["status"] == "no_propensities" else 0


COMMAND = Command("ope", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
