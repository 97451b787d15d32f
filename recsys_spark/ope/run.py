"""``recsys-spark ope``: a candidate policy's reward estimated from the logged days (Spark wiring only).

The maths is :mod:`recsys_spark.kernels.ope` (formulas there and in docs/ope.md); here a short run over
three steps:

1. the logged days (:mod:`recsys_spark.ope.logged`): each day's exposures (with the optional
   ``propensity``, ``list_propensity`` and ``prefix_propensity`` columns) and clicks, validated by the daily
   job's checks against their own day (a day without feedback left out with a note), keyed by day and
   request, then labelled by the daily job's steps (:mod:`recsys_spark.steps.label`: the one shuffle by user, the
   same deduplication, attribution window and event weights), so that a reward here is a click there;
2. the candidate (:mod:`recsys_spark.ope.candidate`, ``ope.target``): hash-partitioned by request, one row per
   (request, item, position), summed per (request, position) -- its mass, its modelled reward Σ π q̂ --
   checked, and matched with the logged requests (none, or too few, is an error naming an id of each side);
3. the sums (:mod:`recsys_spark.ope.sums`), one query: the labelled rows, hash-partitioned by request too (their
   one shuffle here), joined with the candidate's row and position in place, each row's terms, sums per (user,
   request) in place -- the list-level terms, in position order -- then per user (the per-list rows move), then
   per run: Σ of every per-user sum and of the products the intervals need;

then the estimates and diagnostics from those sums (:func:`estimate`), the recommended estimate
(:func:`kernels.ope_answer.recommend`: one to read first, or none with the reason), their rows and the summary (with
the generator's ``truth`` when a ``truth.json`` lies beside the candidate).

One row reaches the driver (plus a few counts from the checks); nothing proportional to rows, users or
items.  Bad input is one line before anything is computed: a propensity outside (0, 1], a candidate whose
probabilities for one (request, position) sum above 1 (or that lists a row twice, or has a probability
outside [0, 1]), a request id logged on two days that the candidate cannot tell apart, copies of a logged
row that disagree on a propensity.  An estimator whose input is missing (no propensity, no q̂ for every row
the candidate shows, a candidate that is not deterministic for replay, ...) is skipped with a note; the
others run; when nothing has a propensity nothing is weighed, and the status is ``no_propensities`` (the
command exits 14).  An estimator whose sums overflow a double has no interval, and the run's status says
``overflow`` (a note names the weight).

Writes ``{output_root}/ope/{estimates,diagnostics}/run=NAME/`` and ``ope/summary/run=NAME/summary.json``
through :func:`recsys_spark.io.output.open_output` (on a classic session the run's lock, staging, the
journalled commit, ``_SUCCESS`` last, as the offline runs do; on Spark Connect plain overwrites).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from recsys_spark.config import Config
from recsys_spark.io.output import commit_summary, open_wing, writing
from recsys_spark.kernels import ope as K
from recsys_spark.kernels import ope_answer as A
from recsys_spark.ope.candidate import (
    Candidate,
    match_requests,
    read_candidate,
    read_truth,
    target_location,
    unsupported_mass,
)
from recsys_spark.ope.logged import Logged, check_feedback, keyed_by_day, label_days, logged_days
from recsys_spark.ope.sums import check_no_copies, ope_sums
from recsys_spark.per_user.table import bucket_count
from recsys_spark.runtime import log
from recsys_spark.runtime.engine import default_parallelism
from recsys_spark.runtime.session import CACHE_LEVEL, apply_time_zone
from recsys_spark.schema import ITEM, OPE_DIAGNOSTICS_DDL, OPE_ESTIMATES_DDL, POSITION, REQUEST
from recsys_spark.tables import OPE


def run_ope(
    spark: SparkSession,
    cfg: Config,
    run: str,
    start: dt.date,
    end: dt.date,
    input_root: str,
    output_root: str,
) -> dict[str, Any]:
    """``recsys-spark ope``: estimate the candidate of ``ope.target`` over the logged days [start, end];
    write ``ope/{estimates,diagnostics,summary}/run=NAME``; return the summary.

    On a classic session the output is the path output (lock, staging, commit, ``_SUCCESS``); on Spark
    Connect, which has no file-system API, the scratch output (plain overwrites, no ``_SUCCESS``:
    :func:`recsys_spark.io.output.open_output`), as the daily job's ``evaluate_day``."""
    apply_time_zone(spark, cfg.validation.time_zone)
    location = target_location(cfg, input_root, run)
    days = [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]
    settings = cfg.ope
    clip, tau = settings.clip, settings.switch_tau
    out = open_wing(spark, OPE, output_root, cfg.output, run=run)
    out.refuse_inputs_inside([location])
    timings: dict[str, float] = {}
    notes: list[str] = []
    kept = Persisted()
    try:
        with writing(out):  # one run of a name at a time; proves the output root writable before any work
            with log.stage("read", timings, run=run) as info:
                logged = logged_days(spark, cfg, input_root, days, notes)
                rows = logged.counts["exposures"]
                partitions = bucket_count(rows, cfg.execution.rows_per_bucket, default_parallelism(spark))
                candidate = read_candidate(
                    spark, location, cfg.input.columns, partitions, kept.persist, cfg.input.position_base
                )
                by_day = candidate.by_day
                exposures = keyed_by_day(logged.exposures, by_day)  # the logged rows, keyed as the candidate's
                share = settings.min_matched_share
                matched = match_requests(exposures, candidate.positions, location, share, by_day, notes)
                info.update(days=len(logged.days), exposures=rows, target_rows=candidate.counts["rows"])
            with log.stage("label", timings):
                labelled, labelled_counts = label_days(cfg, logged, exposures, by_day, kept.persist, notes)
            with log.stage("estimate", timings) as info:
                sums, heaviest = ope_sums(labelled, candidate, logged.counts, partitions, clip, tau)
                check_no_copies(sums, labelled_counts["rows"], location)
                check_feedback(sums.sum("reward"), logged.valid_clicks, start, end)
                unseen, mass = unsupported_mass(labelled, candidate.rows)
                info.update(users=int(sums.n), rows=int(sums.sum("rows")))
            result = estimate(sums, heaviest, candidate, unseen, mass, cfg, notes)
            with log.stage("write", timings):
                out.stage_rows("estimates", estimate_tuples(result.estimates, clip, tau, cfg), OPE_ESTIMATES_DDL)
                out.stage_rows("diagnostics", diagnostic_tuples(result.diagnostics), OPE_DIAGNOSTICS_DDL)
                counts = {**matched, "duplicate_logged_rows": labelled_counts["duplicate_logged_rows"]}
                summary = summary_of(run, start, end, cfg, logged, candidate, counts, result, notes, timings)
                commit_summary(out, OPE, summary)
    finally:
        kept.release()
    return summary


class Persisted:
    """The frames a run persists (at :data:`recsys_spark.runtime.session.CACHE_LEVEL`), released at its end
    whatever happens."""

    def __init__(self) -> None:
        self.frames: list[DataFrame] = []

    def persist(self, df: DataFrame) -> DataFrame:
        kept = df.persist(CACHE_LEVEL)
        self.frames.append(kept)
        return kept

    def release(self) -> None:
        for df in self.frames:
            df.unpersist()


# --------------------------------------------------------------------------- the estimates


@dataclass(frozen=True)
class Result:
    """What a run estimated: the estimators it was asked for (``wanted``, with the baselines), the
    ``estimates`` it could compute, the ``diagnostics``, whether a sum overflowed (``overflow``), whether any
    logged row or list has a propensity (``propensities``: without, nothing is weighed), and the
    ``recommended`` estimate (:func:`kernels.ope_answer.recommend`)."""

    wanted: list[str]
    estimates: list[K.Estimate]
    diagnostics: dict[str, float | None]
    overflow: bool
    propensities: bool = True
    recommended: dict[str, Any] | None = None

    @property
    def status(self) -> str:
        """``no_propensities`` when nothing could be weighed, else ``overflow`` when an estimator lost its
        interval to a sum that overflowed, else ``ok``."""
        if not self.propensities:
            return "no_propensities"
        return "overflow" if self.overflow else "ok"


def estimate(
    sums: K.RunSums,
    heaviest: dict[str, Any],
    candidate: Candidate,
    unseen: float,
    mass: float,
    cfg: Config,
    notes: list[str],
) -> Result:
    """The estimators of ``ope.estimators`` (and the logged baselines) whose inputs the run has
    (:func:`kernels.ope.estimate_all`; a note for each skipped), the diagnostics (``unseen``, ``mass``:
    :func:`recsys_spark.ope.candidate.unsupported_mass`), and the notes they call for: a q̂ missing on a
    row the candidate shows, an overflow (:func:`overflow_note`), the diagnostics' (:func:`diagnostic_notes`)."""
    counts = candidate.counts
    available = {
        "propensity": sums.sum("rows_p") > 0,
        "q_hat": bool(counts["has_q"]),
        "deterministic": counts["fractional"] == 0,
        "list_propensity": sums.sum("lists_sips") > 0,
        "prefix_propensity": sums.sum("lists_rips") > 0,
    }
    if candidate.has_q and not counts["has_q"]:
        notes.append(f"ope.target: {counts['q_missing']} rows with a probability above 0 have no q_hat")
    wanted = [name for name in K.ESTIMATORS if name in cfg.ope.estimators or name in K.BASELINE.values()]
    estimates, skipped = K.estimate_all(sums, available, cfg.stats.confidence, wanted)
    notes += skipped
    overflow = overflow_note(estimates, heaviest)
    if overflow:
        notes.append(overflow)
    diagnostics = K.diagnostics(sums, unseen, mass)
    notes += diagnostic_notes(diagnostics)
    weighed = available["propensity"] or available["list_propensity"] or available["prefix_propensity"]
    if not weighed:
        notes.append(
            "no logged row or list has a propensity (exposure columns propensity, list_propensity, "
            "prefix_propensity): no off-policy estimate; status no_propensities (docs/ope.md)"
        )
    recommended = A.recommend(estimates, diagnostics)
    return Result(wanted, estimates, diagnostics, overflow is not None, weighed, recommended)


def overflow_note(estimates: Sequence[K.Estimate], heaviest: dict[str, Any]) -> str | None:
    """One note for the estimates left without an interval because a sum overflowed a double
    (:attr:`kernels.ope.Estimate.note`), naming the weight that broke them: the heaviest importance weight
    (its request, item, position, e and propensity) and, for ``slate_ips``, the heaviest list weight."""
    broken = [e for e in estimates if e.note]
    if not broken:
        return None
    names = ", ".join(e.estimator for e in broken)
    parts = [f"no interval for {names}: a sum overflows a double ({broken[0].note})"]
    item, whole = heaviest.get("item"), heaviest.get("list")
    if item is not None and any(e.estimator != "slate_ips" for e in broken):
        parts.append(
            f"the largest importance weight is {item['w']:.3g} = e {item['e']:.3g} / propensity {item['p']:.3g} "
            f"(request {item[REQUEST]}, item {item[ITEM]}, position {item[POSITION]})"
        )
    if whole is not None and any(e.estimator == "slate_ips" for e in broken):
        parts.append(
            f"the largest list weight is {whole['w']:.3g} = Π e {whole['e_list']:.3g} / list_propensity "
            f"{whole['lp']:.3g} (request {whole[REQUEST]})"
        )
    return "; ".join(parts) + " (clip the weights with ope.clip, or check those propensities)"


def diagnostic_notes(diagnostics: dict[str, float | None]) -> list[str]:
    """The notes the diagnostics call for: positions the candidate leaves empty, rows without a propensity."""
    notes = []
    filled = diagnostics["mean_target_mass"]
    if filled is not None and filled < 1 - 1e-6:
        notes.append(
            f"the candidate's probabilities at a logged request and position sum to {filled:.3g} on average: it "
            "leaves positions empty; snips, sndr and replay estimate its reward per position it fills, "
            "ips, dm, dr and switch_dr per logged position"
        )
    if diagnostics["rows_without_propensity"]:
        notes.append(
            f"{int(diagnostics['rows_without_propensity'] or 0)} logged rows have no propensity: left out of "
            "the weighted estimators (dm, replay and logged read every row)"
        )
    return notes


def _number(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def estimate_tuples(estimates: Sequence[K.Estimate], clip: float, tau: float, cfg: Config) -> list[tuple]:
    """The estimates table's rows (:data:`schema.OPE_ESTIMATES_DDL`'s columns), with the parameters each used."""
    out = []
    for e in estimates:
        spec = K.ESTIMATORS[e.estimator]
        out.append(
            (
                e.estimator,
                e.level,
                e.value,
                e.se,
                e.ci_low,
                e.ci_high,
                e.ci_method,
                e.n,
                e.units,
                e.delta,
                e.delta_se,
                e.delta_ci_low,
                e.delta_ci_high,
                (clip if clip > 0 else None) if "clip" in spec.parameters else None,
                tau if "switch_tau" in spec.parameters else None,
                cfg.stats.confidence,
            )
        )
    return out


def diagnostic_tuples(diagnostics: dict[str, float | None]) -> list[tuple]:
    """The diagnostics table's rows (:data:`schema.OPE_DIAGNOSTICS_DDL`'s columns): a value that is not
    finite is null."""
    return [(k, _number(v)) for k, v in diagnostics.items()]


# --------------------------------------------------------------------------- the summary


def summary_of(
    run: str,
    start: dt.date,
    end: dt.date,
    cfg: Config,
    logged: Logged,
    candidate: Candidate,
    counts: dict[str, int],
    result: Result,
    notes: list[str],
    timings: dict[str, float],
) -> dict[str, Any]:
    """``summary.json``: the status (:attr:`Result.status`), the recommended estimate (``recommended``:
    :func:`kernels.ope_answer.recommend`), the window and the days read, the target and how it is keyed, the
    parameters, the counts (the logged rows', ``counts``: the requests matched and the copies folded, the
    target's), every estimate and diagnostic, the notes, the seconds per stage, and the true values of the
    candidate when a generator wrote them beside it (``truth``: :func:`recsys_spark.ope.candidate.read_truth`;
    absent otherwise)."""
    settings = cfg.ope
    truth = read_truth(candidate.location, notes)
    return {
        "run": run,
        "status": result.status,
        "recommended": {k: _number(v) if isinstance(v, float) else v for k, v in (result.recommended or {}).items()},
        "start": start.isoformat(),
        "end": end.isoformat(),
        "days_found": [d.isoformat() for d in logged.days],
        "days_without_feedback": logged.without_feedback,
        "target": candidate.location,
        "keyed_by": "day and request" if candidate.by_day else "request",
        "parameters": {
            "clip": settings.clip,
            "switch_tau": settings.switch_tau,
            "confidence": cfg.stats.confidence,
            "min_matched_share": settings.min_matched_share,
            "estimators": result.wanted,
        },
        "counts": {
            **logged.counts,
            **counts,
            **{f"target_{k}": v for k, v in candidate.counts.items() if k != "has_q"},
        },
        "estimates": {e.estimator: e.value for e in result.estimates},
        "diagnostics": {k: _number(v) for k, v in result.diagnostics.items()},
        "notes": notes,
        "seconds": dict(timings),
        "config_hash": cfg.fingerprint(),
    } | ({"truth": truth} if truth is not None else {})
