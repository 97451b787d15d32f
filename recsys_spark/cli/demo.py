"""``recsys-spark demo``: the whole tour on generated sample data, in one Spark session, in a few minutes.

What ``make demo`` runs: sample logs of a week (from an exploring ranker that logs its propensities), the
daily job on each day, an A/B experiment over the week, two offline runs of a model and their comparison,
a candidate ranker judged before it ships (off-policy estimates over the week, and its lists for the last
day's requests simulated without feedback), the gates on the offline candidate and on the experiment, and
the HTML report of all of it; it says up front what it will do and ends with where to look.
``make demo-full`` runs the same tour on a larger week, one command at a time, as a production schedule
would.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import time
from pathlib import Path
from typing import TYPE_CHECKING

from recsys_spark.cli.common import Command, load, start_logging
from recsys_spark.cli.lines import experiment_lines, headline_lines
from recsys_spark.registry import EXPERIMENT_METRICS, key

if TYPE_CHECKING:  # pyspark is imported only once a command runs
    from pyspark.sql import SparkSession

    from recsys_spark.config import Config

HELP = "the whole tour on generated sample data, in one Spark session (a few minutes)"
DESCRIPTION = (
    "Generate a week of sample logs (with an A/B experiment, logged propensities and a candidate ranker) and an "
    "offline data set, then run the daily job on each day, the experiment window, two offline runs and their "
    "comparison, the candidate's off-policy estimates and its simulated last day, gate the offline candidate and "
    "the experiment on their interval bounds, and write the HTML report: "
    "everything the other commands do, on small data, in one Spark session."
)
EXAMPLE = "recsys-spark demo --root build/demo"
END = dt.date(2026, 11, 20)
DAYS = 7  # evaluated by default; one more day is generated before them (update rate, novelty, CUPED)
EXPERIMENT = "ranker_v2"
SLICES = 'slices.names=["platform", "user_type", "popularity"]'
#: the demo's gates (docs/gate.md): the offline candidate must gain NDCG@10 on the bound of its paired interval
#: and may lose at most 2 % of its MRR; the experiment's treatment must raise exposure CTR and may raise the
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
CANDIDATE = "reranker"  # generate --ope's candidate policy
OPE_TARGET = 'ope.target="{input_root}/candidates/{run}/target"'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", default="build/demo", help="where the sample data and the outputs go")
    parser.add_argument("--users", type=int, default=400, help="users of the sample logs (default 400)")
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
        f"recsys-spark demo: {days} days of sample logs ({args.users} users) evaluated {start}..{END}, the experiment "
        f"{EXPERIMENT} over the week, two offline runs and their comparison, a candidate ranker judged off-policy and "
        f"in a simulated day, the gates, the HTML report; about 3-4 minutes on a 2-core laptop (outputs under {out})"
    )
    began = time.monotonic()
    args.set = [*args.set, DEMO_METRICS, OPE_TARGET, SLICES]
    cfg = load(args)
    start_logging(args)
    _generate(args, inputs, offline_inputs, days)
    spark = job_session(cfg, args.master, args.verbose, app_name="recsys-spark-demo")
    try:
        _days_and_window(spark, cfg, inputs, out, start, days)
        _offline_and_gates(spark, args, root, offline_inputs, out, start)
        _candidate(spark, cfg, inputs, out, start)
        report = write_report(str(out), start, END, cfg, spark=spark)
    finally:
        spark.stop()
    _say(f"done in {(time.monotonic() - began) / 60:.1f} min")
    _say(f"report: {report}  (open it in a browser)")
    _say(
        f"tables: {out}/{{metrics,user_metrics,lorenz,rule_checks,experiments,experiment_decisions,summary}}/dt=..., "
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
            + ["--days", str(days + 1), "--seed", "7", "--ope"]
        )
        generate_offline.main(["--output-root", str(offline_inputs), "--users", str(args.users), "--items", "600"])
    _say(
        f"sample data: {inputs} (logs with propensities, items, users, assignments, the candidate {CANDIDATE}), "
        f"{offline_inputs} (a model's offline data)"
    )


def _days_and_window(spark: SparkSession, cfg: Config, inputs: Path, out: Path, start: dt.date, days: int) -> None:
    """The daily job on each day, then the experiment over the week."""
    from recsys_spark import daily
    from recsys_spark.experiments.window import run_window

    for i in range(days):
        day = start + dt.timedelta(days=i)
        _say(f"day {i + 1} of {days}: {day}")
        summary = daily.evaluate_day(spark, cfg, day, str(inputs), str(out))
        for line in [*headline_lines(str(day), summary)[:1], *experiment_lines(str(day), summary["experiments"])]:
            _say(f"  {line}")
    _say(f"experiment {EXPERIMENT} over {start}..{END}")
    section = run_window(spark, cfg, EXPERIMENT, start, END, str(out))
    for line in experiment_lines(f"{start}..{END}", section):
        _say(f"  {line}")


def _offline_and_gates(
    spark: SparkSession, args: argparse.Namespace, root: Path, offline_inputs: Path, out: Path, start: dt.date
) -> None:
    """Two offline runs and their comparison, then the gates on the offline candidate and on the experiment."""
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
        EXPERIMENT: EXPERIMENT_GATE.format(experiment=EXPERIMENT, start=start, end=END),
    }
    for name, text in gates.items():
        (root / f"gate-{name}.toml").write_text(text)
        verdict = run_gate(spark, load_config(root / f"gate-{name}.toml"), name, str(out))
        _say(f"{verdict['summary']} -> {verdict['path']}")


def _candidate(spark: SparkSession, cfg: Config, inputs: Path, out: Path, start: dt.date) -> None:
    """The candidate ranker judged off-policy over the week, then its lists of the last day simulated."""
    import json

    from recsys_spark import daily
    from recsys_spark.ope.run import run_ope

    _say(f"ope: the candidate {CANDIDATE} estimated from the logs of {start}..{END}")
    estimates = run_ope(spark, cfg, CANDIDATE, start, END, str(inputs), str(out))["estimates"]
    truth = json.loads((inputs / "candidates" / CANDIDATE / "truth.json").read_text())
    _say(
        "  per logged position: "
        + "  ".join(f"{k}={estimates[k]:.4f}" for k in ("logged", "ips", "dm", "dr") if estimates.get(k) is not None)
        + f"  (true: logged {truth['logged_per_row']:.4f}, candidate {truth['candidate_per_row']:.4f}, known "
        "because the data are made up)"
    )
    _say(f"simulate: the candidate's lists for the requests of {END}, without feedback")
    simulated = daily.evaluate_day(spark, cfg, END, str(inputs), str(out), simulation_run=CANDIDATE)
    _say(
        f"  {simulated['status']}  "
        + "  ".join(f"{k}={v:.4f}" for k, v in simulated["headline"].items() if v is not None)
    )


COMMAND = Command("demo", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
