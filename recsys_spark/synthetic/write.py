"""Writing the generated tables: part files swapped in whole, and the days ending at a date with the users,
items, assignments and the candidate's files (the layout the job reads)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from recsys_spark.synthetic.assignments import assignments_table, with_experiment_effects
from recsys_spark.synthetic.candidate import make_candidate, write_truth
from recsys_spark.synthetic.columns import threads
from recsys_spark.synthetic.day import generate_day
from recsys_spark.synthetic.model import CANDIDATE, DEFAULT_USERS, EXPOSURES_PER_USER, MAX_ROWS_PER_FILE, MIN_ITEMS
from recsys_spark.synthetic.population import items_table, make_population, users_table
from recsys_spark.synthetic.surveys import survey_table


def resolve_sizes(users: int | None, exposures: int | None, items: int | None) -> tuple[int, int, int]:
    """Fill in defaults: 20 exposures per user, items = max(200, users // 2)."""
    if users is None:
        users = DEFAULT_USERS if exposures is None else max(1, round(exposures / EXPOSURES_PER_USER))
    if exposures is None:
        exposures = users * EXPOSURES_PER_USER
    if items is None:
        items = max(MIN_ITEMS, users // 2)
    return users, exposures, items


def write_table(table: pa.Table, directory: Path, max_rows_per_file: int = MAX_ROWS_PER_FILE) -> int:
    """Replace ``directory`` by part-NNNNN.parquet files of at most max_rows_per_file rows each.

    Files are written to a hidden sibling directory first, then swapped in.
    """
    directory = Path(directory)
    staging = directory.parent / f".{directory.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    starts = range(0, max(table.num_rows, 1), max_rows_per_file)

    def write_part(part: int) -> None:
        pq.write_table(
            table.slice(starts[part], max_rows_per_file), staging / f"part-{part:05d}.parquet", compression="snappy"
        )

    with ThreadPoolExecutor(max_workers=threads()) as pool:
        list(pool.map(write_part, range(len(starts))))
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(staging, directory)
    return len(starts)


def write_days(
    output_root: str | Path,
    date: str | dt.date,
    days: int = 1,
    users: int | None = None,
    exposures: int | None = None,
    items: int | None = None,
    seed: int = 7,
    heavy_user_exposures: int = 0,
    max_rows_per_file: int = MAX_ROWS_PER_FILE,
    log: bool = False,
    experiments: bool = False,
    ope: bool = False,
    surveys: bool = False,
) -> dict:
    """Write ``days`` consecutive days ending at ``date`` plus the users and items tables.

    Returns the sizes and, per day, the counts of ``generate_day``.  With ``experiments``, also
    ``assignments/dt=D`` (:func:`assignments_table`), and the treatment effects act on the clicks.  With
    ``ope``: the exploring logger's propensities, and the candidate's ``candidates/reranker/target/``,
    ``simulation/reranker/dt=D/`` and ``candidates/reranker/truth.json`` (the module docstring).  With
    ``surveys``: ``surveys/dt=D`` (:func:`synthetic.surveys.survey_table`).
    """
    if days < 1 or heavy_user_exposures < 0:
        raise ValueError("days must be >= 1 and heavy_user_exposures >= 0")
    root = Path(output_root)
    end = date if isinstance(date, dt.date) else dt.date.fromisoformat(date)
    n_users, n_exposures, n_items = resolve_sizes(users, exposures, items)
    pop = make_population(n_users, n_items, seed, end)
    if experiments:
        pop = with_experiment_effects(pop, seed)
    catalog = items_table(pop)
    candidate = make_candidate(pop, seed) if ope else None
    truth: dict[str, float] = {}
    write_table(users_table(pop), root / "users")
    write_table(catalog, root / "items")
    summary: dict = {"users": n_users, "items": n_items, "catalog_items": catalog.num_rows, "days": []}
    for back in range(days - 1, -1, -1):
        started = time.perf_counter()
        day = end - dt.timedelta(days=back)
        logs = generate_day(pop, day, n_exposures, seed, heavy_user_exposures, max_rows_per_file, candidate)
        partition = f"dt={day.isoformat()}"
        if logs.target is not None and logs.simulated is not None and logs.truth is not None:
            target = root / "candidates" / CANDIDATE / "target"
            target.mkdir(parents=True, exist_ok=True)
            pq.write_table(logs.target, target / f"part-{day.isoformat()}.parquet", compression="snappy")
            write_table(logs.simulated, root / "simulation" / CANDIDATE / partition)
            truth = {k: truth.get(k, 0.0) + v for k, v in logs.truth.items()}
        files = write_table(logs.exposures, root / "exposures" / partition, max_rows_per_file)
        write_table(logs.clicks, root / "clicks" / partition, max_rows_per_file)
        if experiments:
            write_table(assignments_table(pop, day, seed), root / "assignments" / partition)
        if surveys:
            write_table(survey_table(logs.exposures, logs.clicks, day, seed), root / "surveys" / partition)
        counts = {
            "date": day.isoformat(),
            **logs.stats,
            "exposure_files": files,
            "seconds": round(time.perf_counter() - started, 2),
        }
        summary["days"].append(counts)
        if log:
            print(" ".join(f"{key}={value}" for key, value in counts.items()), flush=True)
    if truth:
        summary["truth"] = write_truth(root / "candidates" / CANDIDATE / "truth.json", truth)
    return summary
