"""``recsys-spark demo``: the whole tour on generated sample data, in one Spark session, in a few minutes.

What ``make demo`` runs: sample logs of a week (from an exploring ranker that logs its propensities), the
daily job on each day, the tour's three A/B experiments over the week (one ships, one must not: a guardrail
crossed, one needs more time; docs/experiments.md "The tour's experiments"), two offline runs of a model and their
comparison, a candidate ranker judged before it ships (off-policy estimates over the week, and its lists for the
last day's requests simulated without feedback), the gates on the offline candidate and on each experiment, and
the HTML report of all of it; it says up front what it will do and ends with what was decided and where to look.
``make demo-full`` runs the same tour on a larger week, one command at a time, as a production schedule
would.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recsys_spark.cli.common import Command, load, start_logging
from recsys_spark.cli.gate import exit_code
from recsys_spark.cli.lines import experiment_lines, headline_lines
from recsys_spark.kernels.decisions import decision_words
from recsys_spark.registry import EXPERIMENT_METRICS, key

if TYPE_CHECKING:  # pyspark is imported only once a command runs
    from pyspark.sql import SparkSession

    from recsys_spark.config import Config

HELP = "the whole tour on generated sample data, in one Spark session (a few minutes)"
DESCRIPTION = (
    "Generate a week of sample logs (with A/B experiments, logged propensities and a candidate ranker) and an "
    "offline data set, then run the daily job on each day, the window of each of the tour's experiments (one "
    "ships, one must not, one needs more time), two offline runs and their comparison, the candidate's off-policy "
    "estimates and its simulated last day, gate the offline candidate and each experiment on their interval "
    "bounds, and write the HTML report: "
    "everything the other commands do, on small data, in one Spark session."
)
EXAMPLE = "recsys-spark demo --root build/demo"
END = dt.date(2026, 11, 20)
DAYS = 7  # evaluated by default; one more day is generated before them (update rate, novelty, CUPED)
#: the experiments the tour decides, gates and sums up (:data:`recsys_spark.synthetic.assignments.EXPERIMENTS`
#: plans what their treatments do): a ranker that ships, a retrieval that lifts clicks but leaves requests
#: without a list (a guardrail crossed), a change too small to read in a week (not enough evidence yet); the
#: generator's fourth, ``ui_aa``, is an A/A with an assignment bug (invalid every day)
TOUR = ("ranker_v2", "fast_retrieval", "hd_images")
EXPERIMENT = TOUR[0]  # the one that ships
USERS = 6000  # enough users for the tour's experiments to decide in a week (docs/experiments.md)
#: a day's exposures per user (the generator's default is 20): what decides is the number of users, while Spark's
#: time follows the rows
EXPOSURES_PER_USER = 7
SEED = 7
OFFLINE_USERS = 400  # the offline data set's users (at most --users)
SLICES = 'slices.names=["platform", "user_type", "popularity"]'
#: the demo's gates (docs/gate.md): the offline candidate must gain NDCG@10 on the bound of its paired interval
#: and may lose at most 2 % of its MRR; each experiment's treatment must raise exposure CTR and may raise the
#: failure rate by at most half a point.  Written beside the data, as an operator would write them.
OFFLINE_GATE = """[gate]
source = "offline"
base = "base"
candidate = "candidate"

[[gate.checks]]
metric = "ndcg"
k = 10
aggregation = "user_avg"
min_absolute_change = 0.0

[[gate.checks]]
metric = "mrr"
aggregation = "user_avg"
min_relative_change = 0.02
guardrail = true
"""
EXPERIMENT_GATE = """[gate]
source = "experiment"
experiment = "{experiment}"
variant = "treatment"
start = "{start}"
end = "{end}"

[[gate.checks]]
metric = "exposure_ctr"
aggregation = "global"
min_relative_change = 0.0

[[gate.checks]]
metric = "pv_failure_rate"
aggregation = "global"
min_absolute_change = 0.005
guardrail = true
"""
#: the experiment's metrics: the default ones and what a business reads first, GMV per user and purchases per user
DEMO_METRICS = "experiments.metrics=" + str(
    [*EXPERIMENT_METRICS, key("gmv_per_user", None, "global"), key("purchase_user_rate", None, "global")]
).replace("'", '"')
#: one overall metric (docs/metrics.md, "Composite metric") and the generator's surveys (docs/metrics.md, "Surveys")
COMPOSITE = 'metrics.composite=[{name = "overall", components = [{metric = "ndcg@10_user_avg", weight = 0.6}, ' + (
    '{metric = "mrr_user_avg", weight = 0.4}]}]'
)
SURVEYS = 'input.surveys="{input_root}/surveys/dt={date}"'
CANDIDATE = "reranker"  # generate --ope's candidate policy
OPE_TARGET = 'ope.target="{input_root}/candidates/{run}/target"'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", default="build/demo", help="where the sample data and the outputs go")
    parser.add_argument(
        "--users", type=int, default=USERS, help=f"users of the sample logs (default {USERS}: the experiments decide)"
    )
    parser.add_argument("--seed", type=int, default=SEED, help=f"the sample logs' random seed (default {SEED})")
    parser.add_argument("--days", type=int, default=DAYS, help=f"days evaluated (default {DAYS})")
    parser.add_argument("--record-classes", action="store_true", help=argparse.SUPPRESS)  # warm-up: record anyway


def _say(text: str) -> None:
    print(text, flush=True)


def run(args: argparse.Namespace) -> int:
    """The tour; its JVM also records the Java classes it loads when this runtime has no class-data archive
    yet, or with ``--record-classes`` (:func:`recsys_spark.runtime.jvm.recorded`; what ``recsys-spark warm-up``
    runs)."""
    from recsys_spark.runtime import jvm

    with jvm.recorded(force=args.record_classes) as archive:
        code = _tour(args)
    if archive is not None:
        _say(f"(the Java classes it loaded are recorded, so that later local runs start faster: {archive})")
    return code


def _tour(args: argparse.Namespace) -> int:
    from recsys_spark.report import write_report
    from recsys_spark.runtime.session import job_session  # pyspark: only once a command runs

    root = Path(args.root)
    inputs, offline_inputs, out = root / "input", root / "offline-input", root / "output"
    days = max(1, args.days)
    start = END - dt.timedelta(days=days - 1)
    _say(
        f"recsys-spark demo: {days} days of sample logs ({args.users} users) evaluated {start}..{END}, the experiments "
        f"{', '.join(TOUR)} over the week, two offline runs and their comparison, a candidate ranker judged "
        f"off-policy and in a simulated day, the gates, the HTML report; a few minutes on a 2-core laptop "
        f"(outputs under {out})"
    )
    began = time.monotonic()
    args.set = [*args.set, DEMO_METRICS, OPE_TARGET, COMPOSITE, SURVEYS, SLICES]  # SLICES last: not offline
    cfg = load(args)
    start_logging(args)
    _generate(args, inputs, offline_inputs, days)
    spark = job_session(cfg, args.master, args.verbose, app_name="recsys-spark-demo")
    try:
        windows = _days_and_windows(spark, cfg, inputs, out, start, days)
        states = _offline_and_gates(spark, args, root, offline_inputs, out, start, windows)
        _candidate(spark, cfg, inputs, out, start)
        report = write_report(str(out), start, END, cfg, spark=spark)
    finally:
        spark.stop()
    _say(f"done in {(time.monotonic() - began) / 60:.1f} min")
    for line in tour_lines(windows, states):
        _say(line)
    _say(f"report: {report}  (open it in a browser)")
    _say(
        f"tables: {out}/{{metrics,user_metrics,lorenz,rule_checks,experiments,experiment_cumulative,"
        f"experiment_decisions,summary}}/dt=..., "
        f"{out}/offline/{{metrics,...}}/run=..., {out}/ope/{{estimates,diagnostics,summary}}/run={CANDIDATE}, "
        f"{out}/simulation/{{metrics,...}}/run={CANDIDATE}/dt={END}, verdicts: {out}/gate/NAME/verdict.json"
    )
    _say(
        'look at them: .venv/bin/python -c "import pandas as pd; '
        f"print(pd.read_parquet('{out}/metrics/dt={END}').query('slice == \\\"all\\\"').to_string())\""
    )
    return 0


def _generate(args: argparse.Namespace, inputs: Path, offline_inputs: Path, days: int) -> None:
    """The week of sample logs (one day more than evaluated: update rate, novelty, CUPED) and the offline data."""
    from recsys_spark.synthetic import generate, generate_offline

    with contextlib.redirect_stdout(io.StringIO()):  # the generators list what they wrote: not the tour's news
        generate.main(
            ["--date", END.isoformat(), "--output-root", str(inputs), "--users", str(args.users)]
            + ["--exposures", str(args.users * EXPOSURES_PER_USER), "--days", str(days + 1)]
            + ["--seed", str(args.seed), "--ope", "--surveys"]
        )
        generate_offline.main(
            ["--output-root", str(offline_inputs), "--users", str(min(args.users, OFFLINE_USERS)), "--items", "600"]
        )
    _say(
        f"sample data: {inputs} (logs with propensities, items, users, assignments, the candidate {CANDIDATE}), "
        f"{offline_inputs} (a model's offline data)"
    )


def _days_and_windows(
    spark: SparkSession, cfg: Config, inputs: Path, out: Path, start: dt.date, days: int
) -> dict[str, dict[str, Any]]:
    """The daily job on each day (its decisions on one line), then each experiment of :data:`TOUR` over the week;
    returns the windows' summary sections by experiment (one a tour of a few users left without a user: none)."""
    from recsys_spark import daily
    from recsys_spark.errors import MissingInputError
    from recsys_spark.experiments.window import run_window

    for i in range(days):
        day = start + dt.timedelta(days=i)
        _say(f"day {i + 1} of {days}: {day}")
        summary = daily.evaluate_day(spark, cfg, day, str(inputs), str(out))
        for line in [*headline_lines(str(day), summary)[:1], *day_decisions(str(day), summary["experiments"])]:
            _say(f"  {line}")
    windows = {}
    for name in TOUR:
        _say(f"experiment {name} over {start}..{END}")
        try:
            windows[name] = run_window(spark, cfg, name, start, END, str(out))
        except MissingInputError as exc:  # a tour of a few users may leave an experiment without any
            _say(f"  {exc} (not gated)")
            continue
        for line in experiment_lines(f"{start}..{END}", windows[name]):
            _say(f"  {line}")
    return windows


def _offline_and_gates(
    spark: SparkSession,
    args: argparse.Namespace,
    root: Path,
    offline_inputs: Path,
    out: Path,
    start: dt.date,
    windows: Mapping[str, object],
) -> dict[str, str]:
    """Two offline runs and their comparison, then the gates on the offline candidate and on each experiment with
    a window; returns each gate's state, and prints each verdict's line with the exit ``recsys-spark gate`` gives."""
    from recsys_spark.config import load_config
    from recsys_spark.gate import run_gate
    from recsys_spark.offline.compare import compare_runs
    from recsys_spark.offline.run import run_offline

    offline_cfg = load_config(offline_inputs / "offline.toml", args.set[:-1])
    for run_name in ("base", "candidate"):
        _say(f"offline run {run_name}")
        headline = run_offline(spark, offline_cfg, run_name, str(out))["headline"]
        _say("  " + "  ".join(f"{k}={v:.4f}" for k, v in list(headline.items())[:4] if v is not None))
    compared = compare_runs(spark, offline_cfg, str(out), "base", "candidate")
    _say(f"offline-compare: {compared['users_in_both']} users in both, {compared['metrics']} metrics")
    gates = {
        "candidate": OFFLINE_GATE,
        **{name: EXPERIMENT_GATE.format(experiment=name, start=start, end=END) for name in windows},
    }
    states = {}
    for name, text in gates.items():
        (root / f"gate-{name}.toml").write_text(text)
        verdict = run_gate(spark, load_config(root / f"gate-{name}.toml"), name, str(out))
        states[name] = verdict["state"]
        _say(f"{verdict['summary']} -> {verdict['path']} (recsys-spark gate exits {exit_code(verdict['state'])})")
    return states


def _candidate(spark: SparkSession, cfg: Config, inputs: Path, out: Path, start: dt.date) -> None:
    """The candidate ranker judged off-policy over the week, then its lists of the last day simulated."""
    from recsys_spark import daily
    from recsys_spark.cli.ope import answer
    from recsys_spark.ope.run import run_ope

    _say(f"ope: the candidate {CANDIDATE} estimated from the logs of {start}..{END}")
    estimated = run_ope(spark, cfg, CANDIDATE, start, END, str(inputs), str(out))
    recommended, truth = estimated["recommended"], estimated.get("truth")
    _say(f"  {answer(recommended)}")
    _say(f"  why: {recommended['reason']}")
    if truth:
        _say(
            f"  true (known because the data are made up): candidate {truth['value']:.4f}, logged "
            f"{truth['logged']:.4f}, difference {truth['delta']:+.4f}"
        )
    _say(f"simulate: the candidate's lists for the requests of {END}, without feedback")
    simulated = daily.evaluate_day(spark, cfg, END, str(inputs), str(out), simulation_run=CANDIDATE)
    _say(
        f"  {simulated['status']}  "
        + "  ".join(f"{k}={v:.4f}" for k, v in simulated["headline"].items() if v is not None)
    )


def day_decisions(label: str, section: Mapping[str, Any] | None) -> list[str]:
    """One line for a day's experiments: each one's decision in words (its reasons are in ``experiment_decisions``
    and, for the tour's experiments, in the window's lines); a skipped stage says why."""
    if not section or section.get("status") == "skipped":
        return experiment_lines(label, section)
    parts = [
        f"{name}{' ' + variant if variant else ''} {decision_words(d['decision'])}"
        for name, e in sorted(section.get("experiments", {}).items())
        for variant, d in sorted(e.get("decisions", {}).items())
    ]
    return [f"{label}: decisions: " + ", ".join(parts)] if parts else []


#: the reasons that make each decision, by what their line says (kernels/decisions.py writes them)
DECIDING = {"ship": ("improved",), "do_not_ship": ("beyond its margin", " worse")}


def deciding_reasons(decision: Mapping[str, Any]) -> list[str]:
    """The reasons that made ``decision``: the improved goal of a ship, the guardrail beyond its margin or the
    worse goal of a do-not-ship, the goals still inconclusive of the rest, every reason of an invalid one."""
    reasons = list(decision.get("reasons") or [])
    if decision["decision"] == "invalid":
        return reasons
    words = DECIDING.get(decision["decision"])
    if words is None:  # not enough evidence yet: the goals say what is missing
        return [r for r in reasons if r.startswith("goal ")] or reasons
    return [r for r in reasons if any(w in r for w in words)] or reasons


def tour_lines(windows: Mapping[str, Mapping[str, Any]], states: Mapping[str, str]) -> list[str]:
    """The tour's closing lines: per experiment of :data:`TOUR`, the window's decision in words, its gate's state
    and exit code, and the reasons that decided."""
    lines = ["what the week decided (each experiment's window, and its gate):"]
    for name in TOUR:
        decisions = windows.get(name, {}).get("experiments", {}).get(name, {}).get("decisions", {})
        gate = states.get(name)
        gated = f" (gate {gate}, exit {exit_code(gate)})" if gate else ""
        for variant, d in sorted(decisions.items()):
            lines.append(
                f"  {name}{' ' + variant if variant else ''}: {decision_words(d['decision'])}{gated}: "
                + "; ".join(deciding_reasons(d))
            )
    return lines


COMMAND = Command("demo", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
