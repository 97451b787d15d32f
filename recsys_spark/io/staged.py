"""The path output: stage every table of a partition, then move them into place together.

Each run writes its tables under ``{output_root}/_staging/{run_id}/``.  Only
when all of them are written does :meth:`DailyOutput.commit` replace, table
by table, ``{output_root}/{table}/dt={date}`` (the old partition is moved aside
first and deleted at the end); the ``summary`` table goes last and ends with a
``_SUCCESS`` file.  A failure before the commit leaves the previous output
untouched; other dates are never touched.

**Reading contract: a date's tables are complete and from one run if and only
if ``summary/dt=D/_SUCCESS`` exists; read a date only then** (it is removed
first when a rerun starts to commit, and written last).

Concurrency and faults:

* one run per (output root, date): :meth:`DailyOutput.acquire` creates
  ``_locks/dt=D.lock`` atomically (run id, host, pid, start time) before any
  computation -- which also proves the output root is writable -- and a second
  run of the date fails with :class:`~recsys_spark.errors.ConcurrentRunError`;
  a lock older than ``output.stale_minutes``, or held by a dead process on
  this host, is taken over;
* the rename into place refuses an existing target (Hadoop would nest it);
* staging directories of dead runs (older than ``output.stale_minutes``, and
  not a live lock's run) are swept by the next run of the output root; the
  staging directory of the run whose lock this run took over is swept at once,
  whatever its age (its run is dead: a killed run leaves no litter behind the
  rerun);
* a rerun replaces every table *this job owns* (:data:`recsys_spark.tables.DAILY`'s tables)
  that the date has, including tables it no longer writes (e.g. an old
  ``rejected/dt=D`` after ``write_rejected`` is turned off); any other folder
  under the output root (inputs, other jobs' tables) is never touched;
* the commit is journalled: before the first move, ``_commit.json`` in the
  run's staging directory lists the moves.  A failure inside the commit undoes
  the moves made (the old partitions come back, with their ``_SUCCESS``); a
  run killed inside it leaves the journal, and the next run of the date rolls
  that commit forward (its tables were all staged) before it starts.  The
  sweep never deletes a staging directory that holds a journal;
* the shared ``_staging`` and ``_locks`` directories are removed only when
  empty, by one non-recursive delete (a concurrent run's entry is never lost);
* SIGTERM (:mod:`recsys_spark.runtime.signals`) is held while the lock is taken, during
  the commit's moves and during :meth:`DailyOutput.abort`, and a run that went
  on past an error the signal caused never commits.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from recsys_spark.errors import ConcurrentRunError, OutputError, root_cause
from recsys_spark.io.small_files import write_small_table
from recsys_spark.runtime import fs, signals
from recsys_spark.tables import DAILY, SUMMARY

STAGING = "_staging"
LOCKS = "_locks"
JOURNAL = "_commit.json"
REPLACED = "_replaced"


class DailyOutput:
    """The path output: one partition of each owned table, staged, then committed together (module docstring).

    ``date`` names the partition in messages; the partition is ``dt=<date>`` unless ``partition`` says
    otherwise (the experiment window writes ``experiment=NAME/window=S_E``), and the lock and the staging
    directories are named after it.  The one way the project writes a partition of a table.
    """

    def __init__(
        self,
        spark: SparkSession,
        output_root: str,
        date: str,
        stale_minutes: float = 240.0,
        owned: Sequence[str] = DAILY.tables,
        heartbeat_seconds: float = 30.0,
        partition: str | None = None,
    ) -> None:
        self.spark = spark
        self.owned = tuple(owned)
        self.root = output_root.rstrip("/")
        self.date = date
        self.partition = partition or f"dt={date}"
        slug = date if partition is None else self.partition.replace("/", "_").replace("=", "-")
        self.run_id = f"{slug}-{uuid.uuid4().hex[:8]}"
        self.run_dir = f"{self.root}/{STAGING}/{self.run_id}"
        self.lock = f"{self.root}/{LOCKS}/{self.partition.replace('/', '_')}.lock"
        self.stale_seconds = stale_minutes * 60.0
        self.heartbeat_seconds = heartbeat_seconds
        self._heartbeat: _Heartbeat | None = None
        self.tables: list[str] = []
        self.locked = False
        self.created_root = False
        self.swept: list[str] = []
        self.recovered: list[str] = []
        self.run_dir_kept = False  # a commit that failed and could not be undone keeps its journal
        self.taken_over: set[str] = set()  # run ids of the dead runs whose lock this run took over

    def final_path(self, table: str) -> str:
        return f"{self.root}/{table}/{self.partition}"

    def staged_path(self, table: str) -> str:
        return self.staged_in(self.run_dir, table)

    def staged_in(self, run_dir: str, table: str) -> str:
        """Where the run whose staging directory is ``run_dir`` staged ``table``."""
        return f"{run_dir}/{table}/{self.partition}"

    def refuse_inputs_inside(self, inputs: Iterable[str]) -> None:
        """Raise :class:`~recsys_spark.errors.UsageError` when an input location lies inside a table this
        output owns (or its staging and lock directories): the commit would replace or remove it.  The
        output root may otherwise be an input root too (the commit touches only its own tables)."""
        from recsys_spark.errors import UsageError

        owned = [(t, normal_location(f"{self.root}/{t}")) for t in (*self.owned, STAGING, LOCKS)]
        for location in inputs:
            if location.startswith("table:"):
                continue
            path = normal_location(location)
            for table, folder in owned:
                if path == folder or path.startswith(folder + "/"):
                    raise UsageError(
                        f"input {location} lies inside the output table {table!r} under {self.root}: a run "
                        "would replace it; point the input or --output-root elsewhere"
                    )

    # --- one run per date ----------------------------------------------------------------------
    def acquire(self) -> None:
        """Take the date's lock (proving the output root is writable), then finish the commits dead runs left
        midway and sweep their staging.  SIGTERM is held meanwhile (a lock taken is always known, a recovered
        commit never cut); a failure or a SIGTERM once the lock is taken releases it before it propagates."""
        try:
            with signals.critical():
                self._take_lock()
                self._heartbeat = _Heartbeat(self.spark, self.lock, self.heartbeat_seconds)
                self._heartbeat.start()
                self.recovered = self.recover_commits()
                self.swept = self.sweep_staging()
        except BaseException:
            if self.locked:
                self.abort()
            raise

    def _take_lock(self) -> None:
        try:
            self.created_root = not fs.exists(self.spark, self.root)
            fs.mkdirs(self.spark, f"{self.root}/{LOCKS}")
            for _ in range(2):
                if fs.create_new(self.spark, self.lock, self._lock_text()):
                    self.locked = True
                    signals.left(self.lock)  # until abort() releases it
                    break
                holder = self._holder()
                if holder is not None and not self._stale(holder, self.lock):
                    raise ConcurrentRunError(
                        f"{self.date}: another run ({holder.get('run_id')}, pid {holder.get('pid')} on "
                        f"{holder.get('host')}, started {holder.get('started')}) is writing this date to "
                        f"{self.root}; wait for it, or delete {self.lock} if that run is dead"
                    )
                if holder and holder.get("run_id"):
                    self.taken_over.add(str(holder["run_id"]))
                fs.delete(self.spark, self.lock)  # a dead run's lock (or unreadable): take it over
            else:
                raise ConcurrentRunError(
                    f"{self.date}: could not take the lock {self.lock} (another run took it at the same moment)"
                )
        except ConcurrentRunError:
            self._tidy_root()
            raise
        except Exception as exc:  # noqa: BLE001 - permissions, Mkdirs failed, read-only file system
            self._tidy_root()
            raise OutputError(f"output root {self.root} is not writable: {root_cause(exc)}") from None

    def _lock_text(self) -> str:
        now = time.time()
        return json.dumps(
            {
                "run_id": self.run_id,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started": dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat(),
                "epoch": now,
                "heartbeat": self.heartbeat_seconds,
            }
        )

    def _holder(self) -> dict | None:
        try:
            return json.loads(fs.read_small(self.spark, self.lock))
        except Exception:  # noqa: BLE001 - vanished or half-written: treated as stale after its age
            try:
                return None if fs.age_seconds(self.spark, self.lock) > self.stale_seconds else {}
            except Exception:  # noqa: BLE001
                return None

    def _stale(self, holder: dict, lock: str) -> bool:
        """A lock is stale when its run stopped refreshing it for four heartbeats (a lock written without
        one: when older than output.stale_minutes), or its process is gone (same host)."""
        if not holder:
            return False
        beat = holder.get("heartbeat")
        try:
            if beat and fs.age_seconds(self.spark, lock) > 4 * float(beat):
                return True
        except Exception:  # noqa: BLE001 - vanished meanwhile: its run ended
            return True
        if not beat and time.time() - float(holder.get("epoch", 0)) > self.stale_seconds:
            return True
        if holder.get("host") == socket.gethostname():
            try:
                os.kill(int(holder["pid"]), 0)
            except ProcessLookupError:
                return True
            except (PermissionError, KeyError, ValueError, TypeError):
                return False
        return False

    def _live_runs(self) -> set[str]:
        locks = f"{self.root}/{LOCKS}"
        live: set[str] = set()
        if not fs.exists(self.spark, locks):
            return live
        for name in fs.children(self.spark, locks):
            try:
                holder = json.loads(fs.read_small(self.spark, f"{locks}/{name}"))
            except Exception:  # noqa: BLE001
                continue
            if not self._stale(holder, f"{locks}/{name}"):
                live.add(str(holder.get("run_id")))
        return live

    def sweep_staging(self) -> list[str]:
        """Delete staging directories left by dead runs: older than output.stale_minutes and not the run
        of a live lock, or the run whose lock this run took over (any age).  Returns their names."""
        staging = f"{self.root}/{STAGING}"
        if not fs.exists(self.spark, staging):
            return []
        live = self._live_runs() | {self.run_id}
        swept = []
        for name in fs.children(self.spark, staging):
            path = f"{staging}/{name}"
            dead = name in self.taken_over and name not in live
            if name in live or (not dead and fs.age_seconds(self.spark, path) <= self.stale_seconds):
                continue
            if fs.exists(self.spark, f"{path}/{JOURNAL}"):  # a commit killed midway: its date's next run ends it
                continue
            fs.delete(self.spark, path)
            swept.append(name)
        return swept

    # --- staging and commit --------------------------------------------------------------------
    def _owned(self, table: str) -> None:
        if table not in self.owned:
            raise ValueError(f"{table!r} is not one of the tables this output owns: {', '.join(self.owned)}")

    def stage(self, table: str, df: DataFrame) -> str:
        """Write ``df`` as Parquet into the staging area; return the staged path."""
        self._owned(table)
        path = self.staged_path(table)
        df.write.mode("overwrite").parquet(path)
        self.tables.append(table)
        return path

    def stage_rows(self, table: str, rows: Iterable[Sequence[Any]], ddl: str) -> str:
        """Stage a small table the driver holds (tuples in the columns of the Spark DDL ``ddl``) as one
        Parquet file, written here rather than by a Spark job (:func:`small_parquet`); return the path."""
        self._owned(table)
        path = self.staged_path(table)
        write_small_table(self.spark, path, rows, ddl)
        self.tables.append(table)
        return path

    def stage_text(self, table: str, filename: str, text: str) -> str:
        self._owned(table)
        path = self.staged_path(table)
        fs.write_text(self.spark, f"{path}/{filename}", text)
        self.tables.append(table)
        return path

    def existing_tables(self) -> list[str]:
        """Tables this output owns that hold this date (a partition ``dt=D``)."""
        return [name for name in self.owned if fs.exists(self.spark, self.final_path(name))]

    def commit(self) -> None:
        """Replace this date's partition of every owned table the date has: the staged ones, and any other
        owned table that still holds the date from an earlier run (removed); summary last, then _SUCCESS.

        Journalled (module docstring): a failure inside undoes the moves made and raises
        :class:`~recsys_spark.errors.OutputError`; a kill leaves the journal for the next run of the date.
        """
        signals.checkpoint()  # a run that went on past an error a SIGTERM caused never commits
        staged = [t for t in self.tables if t != SUMMARY] + [t for t in self.tables if t == SUMMARY]
        plan = {
            "partition": self.partition,
            "tables": list(dict.fromkeys(staged)),
            "leftover": [t for t in self.existing_tables() if t not in self.tables],
            "had_success": fs.exists(self.spark, self._marker()),
        }
        fs.write_text(self.spark, f"{self.run_dir}/{JOURNAL}", json.dumps(plan))
        with signals.critical():  # a SIGTERM waits for the moves to end (and is raised after them)
            self._commit(plan)

    def _commit(self, plan: dict) -> None:
        try:
            self._roll_forward(self.run_dir, plan)
        except BaseException as exc:
            try:
                self._roll_back(self.run_dir, plan)
            except BaseException as undo:
                self.run_dir_kept = True  # the journal stays: the next run of the date ends the commit
                if not isinstance(undo, Exception):
                    raise
                raise OutputError(
                    f"{self.date}: the commit failed ({root_cause(exc)}) and could not be undone "
                    f"({root_cause(undo)}); the next run of this date completes it from {self.run_dir}/{JOURNAL}"
                ) from None
            if isinstance(exc, Exception):
                raise OutputError(f"{self.date}: the commit failed and was undone: {root_cause(exc)}") from None
            raise
        self.abort()

    def _marker(self) -> str:
        return f"{self.final_path(SUMMARY)}/_SUCCESS"

    def _roll_forward(self, run_dir: str, plan: dict) -> None:
        """Apply the commit ``plan`` of the run whose staging is ``run_dir``; every step is skipped when
        already done, so that a commit cut short by a kill can be finished by the next run."""
        trash = f"{run_dir}/{REPLACED}"
        fs.delete(self.spark, self._marker())  # first, so that no reader trusts the day while it changes
        for table in plan["leftover"]:
            if fs.exists(self.spark, self.final_path(table)) and not fs.exists(self.spark, f"{trash}/{table}"):
                fs.rename(self.spark, self.final_path(table), f"{trash}/{table}")
        for table in plan["tables"]:
            source, final = self.staged_in(run_dir, table), self.final_path(table)
            if not fs.exists(self.spark, source):
                continue  # moved into place already
            if fs.exists(self.spark, final):
                fs.rename(self.spark, final, f"{trash}/{table}")
            fs.rename(self.spark, source, final)
        if SUMMARY in plan["tables"]:
            fs.write_text(self.spark, self._marker(), "")

    def _roll_back(self, run_dir: str, plan: dict) -> None:
        """Undo what :meth:`_roll_forward` did: staged tables back to staging, the old partitions (and
        their marker) back into place."""
        trash = f"{run_dir}/{REPLACED}"
        fs.delete(self.spark, self._marker())
        for table in reversed(plan["tables"]):
            source, final = self.staged_in(run_dir, table), self.final_path(table)
            if not fs.exists(self.spark, source) and fs.exists(self.spark, final):
                fs.rename(self.spark, final, source)
            if fs.exists(self.spark, f"{trash}/{table}"):
                fs.rename(self.spark, f"{trash}/{table}", final)
        for table in plan["leftover"]:
            if fs.exists(self.spark, f"{trash}/{table}"):
                fs.rename(self.spark, f"{trash}/{table}", self.final_path(table))
        if plan["had_success"]:
            fs.write_text(self.spark, self._marker(), "")

    def recover_commits(self) -> list[str]:
        """Finish the commits of this date that dead runs left midway (their journal is in their staging
        directory); called with the date's lock held.  Returns their run ids."""
        staging = f"{self.root}/{STAGING}"
        if not fs.exists(self.spark, staging):
            return []
        done = []
        for name in fs.children(self.spark, staging):
            journal = f"{staging}/{name}/{JOURNAL}"
            if name == self.run_id or not fs.exists(self.spark, journal):
                continue
            try:
                plan = json.loads(fs.read_small(self.spark, journal))
            except Exception:  # noqa: BLE001 - half-written: the commit had not started moving anything
                plan = None
            if plan is not None and plan.get("partition") != self.partition:
                continue  # another date's: its own next run finishes it
            if plan is not None:
                self._roll_forward(f"{staging}/{name}", plan)
            fs.delete(self.spark, f"{staging}/{name}")
            done.append(name)
        return done

    def abort(self) -> None:
        """Forget everything staged by this run and release the date's lock (a staging directory that
        holds a commit that could not be undone stays, for the next run).  SIGTERM is held meanwhile: a
        clean-up is never cut in two (it is raised after).  Idempotent."""
        with signals.critical():
            if self.run_dir_kept:
                signals.left(self.run_dir)
            else:
                fs.delete(self.spark, self.run_dir)
                fs.delete_if_empty(self.spark, f"{self.root}/{STAGING}")
            if self._heartbeat is not None:
                self._heartbeat.stop()
                self._heartbeat = None
            if self.locked:
                fs.delete(self.spark, self.lock)
                self.locked = False
                signals.released(self.lock)
            self._tidy_root()

    def _tidy_root(self) -> None:
        """Remove the empty lock directory, and the output root when this run created it and left it empty."""
        fs.delete_if_empty(self.spark, f"{self.root}/{LOCKS}")
        if self.created_root:
            fs.delete_if_empty(self.spark, self.root)


class _Heartbeat(threading.Thread):
    """Refreshes the lock's modification time every ``seconds`` while the run holds it."""

    def __init__(self, spark: SparkSession, lock: str, seconds: float) -> None:
        super().__init__(name="recsys-spark-lock-heartbeat", daemon=True)
        self.spark, self.lock, self.seconds = spark, lock, seconds
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.seconds):
            try:
                fs.touch(self.spark, self.lock)
            except Exception:  # noqa: BLE001 - a missed beat; four in a row make the lock stale
                pass

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)


def normal_location(location: str) -> str:
    """A location compared as a path: a local one made absolute, ``file:`` dropped, no trailing slash."""
    local = fs.local_path(location)
    return os.path.abspath(local) if local is not None else location.rstrip("/")
