"""Synthetic, reproducible days of recommender logs written as Parquet (pyarrow, no Spark).

    python -m recsys_spark.synthetic.generate --date 2026-11-20 --output-root build/demo/input --users 2000 --days 2

Part of the library because it is how a user makes a sample day in the job's input layout (as
scikit-learn's ``make_*`` functions are part of it), and the tests and the benchmark use it too. The job
never imports it, so it stays out of the ``--py-files`` zip (jobs/package.py).

What is drawn, and every knob of it: :mod:`recsys_spark.synthetic.model`, whose docstring names the module
that draws each part.  This module is the command line (``write.write_days`` does the work); the names the
demo, the benchmark and the tests use stay importable from here.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from recsys_spark.synthetic.assignments import (
    EXPERIMENTS,
    MULTIPLE_ASSIGNMENT_RATE,
    assignments_table,
    experiment_arms,
    with_experiment_effects,
)
from recsys_spark.synthetic.candidate import (
    Candidate,
    candidate_lists,
    expected_clicks,
    make_candidate,
    write_truth,
)
from recsys_spark.synthetic.columns import (
    ASSIGNMENT_SCHEMA,
    CLICK_SCHEMA,
    EXPOSURE_SCHEMA,
    ITEM_SCHEMA,
    OPE_EXPOSURE_SCHEMA,
    SIMULATED_SCHEMA,
    TARGET_SCHEMA,
    TIMESTAMP,
    USER_SCHEMA,
    format_ids,
)
from recsys_spark.synthetic.day import DayIds, DayLogs, generate_day
from recsys_spark.synthetic.feedback import Clicks, click_probability, draw_amounts, draw_clicks
from recsys_spark.synthetic.model import (
    CANDIDATE,
    CANDIDATE_LENGTH,
    DEFAULT_USERS,
    EXPOSURES_PER_USER,
    HEAVY_USER,
    MAX_ROWS_PER_FILE,
    MIN_ITEMS,
)
from recsys_spark.synthetic.population import Population, items_table, make_population, users_table
from recsys_spark.synthetic.ranker import Lists, draw_lists, logged_propensities
from recsys_spark.synthetic.requests import Requests, draw_requests
from recsys_spark.synthetic.write import resolve_sizes, write_days, write_table

__all__ = [
    "ASSIGNMENT_SCHEMA",
    "CANDIDATE",
    "CANDIDATE_LENGTH",
    "CLICK_SCHEMA",
    "DEFAULT_USERS",
    "EXPERIMENTS",
    "EXPOSURES_PER_USER",
    "EXPOSURE_SCHEMA",
    "HEAVY_USER",
    "ITEM_SCHEMA",
    "MAX_ROWS_PER_FILE",
    "MIN_ITEMS",
    "MULTIPLE_ASSIGNMENT_RATE",
    "OPE_EXPOSURE_SCHEMA",
    "SIMULATED_SCHEMA",
    "TARGET_SCHEMA",
    "TIMESTAMP",
    "USER_SCHEMA",
    "Candidate",
    "Clicks",
    "DayIds",
    "DayLogs",
    "Lists",
    "Population",
    "Requests",
    "assignments_table",
    "candidate_lists",
    "click_probability",
    "draw_amounts",
    "draw_clicks",
    "draw_lists",
    "draw_requests",
    "expected_clicks",
    "experiment_arms",
    "format_ids",
    "generate_day",
    "items_table",
    "logged_propensities",
    "main",
    "make_candidate",
    "make_population",
    "parse_args",
    "resolve_sizes",
    "users_table",
    "with_experiment_effects",
    "write_days",
    "write_table",
    "write_truth",
]


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}")
        return value

    return parse


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m recsys_spark.synthetic.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--date", required=True, type=dt.date.fromisoformat, help="last day, YYYY-MM-DD")
    parser.add_argument("--output-root", required=True, type=Path)
    parser.add_argument(
        "--users",
        type=_count(1),
        help=f"user population (default {DEFAULT_USERS}, or exposures / {EXPOSURES_PER_USER})",
    )
    parser.add_argument(
        "--exposures", type=_count(0), help=f"target exposures per day (default {EXPOSURES_PER_USER} x users)"
    )
    parser.add_argument("--days", type=_count(1), default=1, help="consecutive days ending at --date")
    parser.add_argument("--items", type=_count(100), help=f"catalog size (default max({MIN_ITEMS}, users / 2))")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--heavy-user-exposures",
        type=_count(0),
        default=0,
        help="give user u000000 exactly this many exposures per day",
    )
    parser.add_argument(
        "--max-rows-per-file",
        type=_count(1),
        default=MAX_ROWS_PER_FILE,
        help=f"rows per part file (default {MAX_ROWS_PER_FILE})",
    )
    parser.add_argument(
        "--ope",
        action="store_true",
        help="an exploring logger with propensities, and a candidate policy (docs/ope.md)",
    )
    parser.add_argument(
        "--surveys",
        action="store_true",
        help="a survey partition a day (user_id, question, score), scores rising with the user's clicks",
    )
    parser.add_argument(
        "--no-experiments",
        dest="experiments",
        action="store_false",
        help="no assignments table and no treatment effect",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    summary = write_days(
        args.output_root,
        args.date,
        args.days,
        args.users,
        args.exposures,
        args.items,
        args.seed,
        args.heavy_user_exposures,
        args.max_rows_per_file,
        log=True,
        experiments=args.experiments,
        ope=args.ope,
        surveys=args.surveys,
    )
    print(
        f"wrote {len(summary['days'])} day(s), {summary['users']} users, {summary['catalog_items']} "
        f"catalog items to {args.output_root} in {time.perf_counter() - started:.1f}s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
