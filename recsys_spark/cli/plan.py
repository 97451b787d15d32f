"""``recsys-spark plan``: how many users an experiment on a metric needs, and how many days, from what the daily job
wrote (docs/experiments.md, "Plan").

It reads a few numbers, never a row of logs: the metric's row of the ``all`` slice in ``metrics/dt=D`` for the
last ``--days`` complete days (its value, its users n and its standard error se), and

* the per-user variance σ² = Σ_d n_d (n_d se_d²) / Σ_d n_d (the se of a per-user mean or of a delta-method ratio is
  σ/√n, so n se² is one user's variance; days weighted by their users), the baseline = Σ n_d value_d / Σ n_d;
* the effect δ = ``--mde`` (``--relative``: ``--mde`` × the baseline);
* the users per arm n = (z_{1−α/2} + z_power)² 2σ² / δ² (:func:`kernels.power.sample_size_per_arm`, the same
  variance in both arms), and with the confidence sequence (``experiments.inference = "sequential"``) the n at
  which the sequence has that power at a fixed horizon (:func:`kernels.power.sequential_sample_size_per_arm`);
* the days: ⌈2n / (the mean users a day × ``--traffic``)⌉, counting each day's users as new ones (a lower bound
  when users come back on several days).

It prints ``N users per arm`` and the days, and writes ``plan/metric=KEY`` (one row, :data:`schema.PLAN_DDL`).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from recsys_spark.cli.common import Command, load, start_logging
from recsys_spark.errors import MissingInputError, UsageError
from recsys_spark.registry import parse_key

HELP = "the users per arm and the days an experiment on a metric needs"
DESCRIPTION = (
    "From the metric's per-user variance on the last days the daily job wrote (metrics/dt=D), the users per arm "
    "to detect a minimum effect at the given power, the days that takes, and what the always-valid intervals "
    "cost; writes plan/metric=KEY (docs/experiments.md, Plan)."
)
EXAMPLE = "recsys-spark plan --metric exposure_ctr_global --mde 0.05 --relative --output-root /data/eval"


def _share(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _days(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of days, got {text!r}")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metric", required=True, help="a metric key as the metrics table spells it: ndcg@10_user_avg")
    parser.add_argument("--mde", type=_positive, required=True, help="the minimum effect to detect (absolute)")
    parser.add_argument("--relative", action="store_true", help="--mde is a share of the metric's value (0.05: 5 %%)")
    parser.add_argument("--power", type=_share, default=None, help="the power (default experiments.power, 0.8)")
    parser.add_argument("--days", type=_days, default=7, help="the last complete days to read (default 7)")
    parser.add_argument(
        "--traffic", type=_share_or_one, default=1.0, help="the share of the day's users the experiment gets (1)"
    )
    parser.add_argument("--output-root", required=True, help="the daily job's output root (read; plan/ written)")


def _share_or_one(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1], got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    """Read the metric's recent days, compute the plan, print it and write ``plan/metric=KEY``."""
    try:
        parse_key(args.metric)
    except ValueError as exc:
        raise UsageError(f"--metric: {exc}") from None
    cfg = load(args)
    start_logging(args)
    from recsys_spark.runtime.session import job_session  # pyspark: only once a command runs

    spark = job_session(cfg, args.master, args.verbose)
    try:
        row = make_plan(spark, cfg, args.output_root, args)
    finally:
        spark.stop()
    for line in plan_lines(args.metric, row):
        print(line)
    return 0


def make_plan(spark: Any, cfg: Any, output_root: str, args: argparse.Namespace) -> dict[str, Any]:
    """The plan of ``args`` (``metric``, ``mde``, ``relative``, ``power``, ``days``, ``traffic``) from
    ``output_root``'s recent days, written to ``plan/metric=KEY``; :class:`MissingInputError` when no day has the
    metric's row with a standard error.  The command's and the demo's."""
    days = read_days(spark, output_root, parse_key(args.metric), args.days)
    if not days:
        raise MissingInputError(
            f"no per-user variance for {args.metric}: none of the last complete days under {output_root} "
            "has its row with a standard error in metrics/dt=D (slice all)"
        )
    row = plan_row(args, cfg, days)
    write_plan(spark, cfg, output_root, args.metric, row)
    return row


def read_days(
    spark: Any, output_root: str, metric: tuple[str, int | None, str], last: int
) -> list[tuple[str, float, int, float]]:
    """(day, value, n, se) of ``metric``'s ``all`` row on the last ``last`` complete days that have one (a day
    is complete with its ``summary/dt=D/_SUCCESS``); a row without n or se is left out."""
    from pyspark.sql import functions as F

    from recsys_spark.runtime import fs
    from recsys_spark.schema import METRICS_DDL
    from recsys_spark.tables import DAILY

    base = DAILY.root_of(output_root) + "/metrics"
    if not fs.exists(spark, base):
        return []
    dates = sorted((n[3:] for n in fs.children(spark, base) if n.startswith("dt=")), reverse=True)
    complete = [d for d in dates if fs.exists(spark, DAILY.marker(output_root, dt=d))][:last]
    if not complete:
        return []
    name, k, aggregation = metric
    rows = (
        spark.read.schema(METRICS_DDL + ", dt string")
        .option("basePath", base)
        .parquet(*[DAILY.path(output_root, "metrics", dt=d) for d in complete])
        .where((F.col("metric") == name) & (F.col("aggregation") == aggregation) & (F.col("slice") == "all"))
        .where(F.col("threshold").isNull())  # a threshold metric's rows: one per threshold, no key names one
        .where(F.col("k").isNull() if k is None else F.col("k") == k)
        .where(F.col("se").isNotNull() & F.col("n").isNotNull() & (F.col("n") > 1) & ~F.isnan("se"))
        .select("dt", "value", "n", "se")
        .collect()
    )
    return sorted((str(r["dt"]), float(r["value"]), int(r["n"]), float(r["se"])) for r in rows)


def plan_row(args: argparse.Namespace, cfg: Any, days: list[tuple[str, float, int, float]]) -> dict[str, Any]:
    """The plan's one row (:data:`schema.PLAN_DDL`'s columns) from the days' (day, value, n, se)."""
    from recsys_spark.kernels.power import sample_size_per_arm, sequential_sample_size_per_arm

    users = sum(n for _, _, n, _ in days)
    variance = sum(n * (n * se * se) for _, _, n, se in days) / users
    baseline = sum(n * value for _, value, n, _ in days) / users
    delta = args.mde * abs(baseline) if args.relative else args.mde
    if not (delta > 0 and variance > 0):
        raise MissingInputError(
            f"{args.metric}: no plan: the effect ({delta:g}) and the per-user variance ({variance:g}) must be positive"
        )
    ex, confidence = cfg.experiments, float(cfg.stats.confidence)
    power = args.power if args.power is not None else ex.power
    fixed = math.ceil(sample_size_per_arm(variance, variance, delta, confidence, power))
    seq = math.ceil(sequential_sample_size_per_arm(variance, variance, delta, confidence, power, ex.sequential_tuning))
    daily = users / len(days) * args.traffic
    return {
        "metric": args.metric,
        "mde": args.mde,
        "relative": bool(args.relative),
        "absolute_mde": delta,
        "power": power,
        "confidence": confidence,
        "baseline": baseline,
        "variance": variance,
        "users_per_arm": fixed,
        "daily_users": daily,
        "days": math.ceil(2 * fixed / daily),
        "sequential_users_per_arm": seq,
        "sequential_days": math.ceil(2 * seq / daily),
        "sequential_tuning": float(ex.sequential_tuning),
        "first_day": days[0][0],
        "last_day": days[-1][0],
        "days_read": len(days),
    }


def plan_lines(key: str, row: dict[str, Any]) -> list[str]:
    """What the terminal shows: the users per arm and the days, fixed-horizon and with the confidence sequence."""
    effect = (
        f"{row['mde']:g} of {row['baseline']:.4g} (= {row['absolute_mde']:.4g})"
        if row["relative"]
        else (f"{row['absolute_mde']:g}")
    )
    return [
        f"plan {key}: detect {effect} at power {row['power']:g}, confidence {row['confidence']:g}; per-user variance "
        f"{row['variance']:.4g} over {row['days_read']} day(s) {row['first_day']}..{row['last_day']}, "
        f"{row['daily_users']:.0f} users a day",
        f"{row['users_per_arm']} users per arm (fixed horizon): {row['days']} day(s)",
        f"{row['sequential_users_per_arm']} users per arm with the always-valid intervals (experiments.inference = "
        f"sequential, tuned at {row['sequential_tuning']:g}): {row['sequential_days']} day(s), "
        f"{row['sequential_users_per_arm'] / row['users_per_arm']:.2f}x the users",
    ]


def write_plan(spark: Any, cfg: Any, output_root: str, key: str, row: dict[str, Any]) -> None:
    """``plan/metric=KEY``: the row, through the staged commit every table takes."""
    from recsys_spark.io.output import open_wing, writing
    from recsys_spark.schema import PLAN_DDL
    from recsys_spark.tables import PLAN

    columns = [c.split()[0] for c in PLAN_DDL.split(", ")]
    with writing(open_wing(spark, PLAN, output_root, cfg.output, metric=key)) as out:
        out.stage_rows("plan", [tuple(row[c] for c in columns)], PLAN_DDL)
        out.commit()


COMMAND = Command("plan", HELP, DESCRIPTION, EXAMPLE, add_arguments, run)
