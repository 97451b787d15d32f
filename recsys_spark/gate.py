"""``recsys-spark gate``: a model gate on interval bounds, over the tables the other commands wrote.

:func:`run_gate` reads what ``[gate]`` names (docs/gate.md) -- an offline comparison (``offline-compare``'s
``offline/comparison/base=A/candidate=B`` for the changes, the candidate run's ``offline/metrics/run=B`` for
the values) or an experiment window (``experiment_window/experiment=E/window=S_E``, the variant against the
control, and its decision's validity from ``experiment_window_decisions``) -- into plain rows, checks every
threshold with :func:`recsys_spark.kernels.gate.evaluate`, and writes the verdict as one JSON file,
``{output_root}/gate/NAME/verdict.json`` (:data:`recsys_spark.tables.GATE`), through every wing's output
(:func:`recsys_spark.io.output.open_wing`: the gate's lock, staging, the journalled commit), so that a rerun
replaces it whole and a reader never sees half of one.  A config that names nothing checkable (no source, no
check, a run, comparison or window that is not there) is a :class:`~recsys_spark.errors.ConfigError` (exit 3);
the checks' outcome is the verdict's business: its ``state``, ``passed``, ``inconclusive`` or ``failed``
(:func:`recsys_spark.kernels.gate.gate_state`; the command exits 0, 13 or 12).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import SparkSession

from recsys_spark.config import Config, GateConfig
from recsys_spark.errors import ConfigError
from recsys_spark.io.output import commit_summary, open_wing, writing
from recsys_spark.kernels.decisions import normalise_code
from recsys_spark.kernels.gate import PASSED, GateCheck, Row, evaluate, gate_state, summary_line
from recsys_spark.registry import key
from recsys_spark.runtime import fs
from recsys_spark.tables import GATE, OFFLINE_COMPARISON, OFFLINE_RUN, WINDOW, window_span
from recsys_spark.tables import check_name as check_path_name

decision_code = normalise_code  # an earlier release's code read as today's (docs/operations.md, upgrades)


def verdict_path(output_root: str, name: str) -> str:
    return GATE.marker(output_root, name=check_name(name))


def check_name(name: str) -> str:
    """The gate's name: a directory of its own under ``gate/`` (:func:`config.check_name`; exit 3)."""
    return check_path_name(name, "gate name")


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def _rows(spark: SparkSession, path: str) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.read.parquet(path).collect()]


def _need(spark: SparkSession, path: str, what: str) -> None:
    if not fs.exists(spark, path):
        raise ConfigError(f"gate: {what} not found (no {path})")


def offline_rows(spark: SparkSession, output_root: str, gate: GateConfig) -> tuple[list[Row], dict[str, Any]]:
    """The candidate's values (its run's metrics) and its paired changes against the base (the comparison),
    as one :class:`Row` per (metric key, slice); and what was read."""
    for run, role in ((gate.base, "base"), (gate.candidate, "candidate")):
        _need(spark, OFFLINE_RUN.marker(output_root, run=run), f"offline run {run!r} (gate.{role})")
    pair = {"base": gate.base, "candidate": gate.candidate}
    what = f"the offline-compare output of {gate.candidate!r} against {gate.base!r}"
    _need(spark, OFFLINE_COMPARISON.marker(output_root, **pair), what)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in _rows(spark, OFFLINE_RUN.path(output_root, "metrics", run=gate.candidate)):
        at = (key(r["metric"], r["k"], r["aggregation"]), r["slice"])
        rows[at] = dict(value=r["value"], value_low=r["ci_low"], value_high=r["ci_high"], ci_method=r["ci_method"])
    changes = OFFLINE_COMPARISON.path(output_root, "comparison", **pair)
    for r in _rows(spark, changes):  # paired per-user values: user averages, all users
        at = (key(r["metric"], r["k"], "user_avg"), "all")
        rows.setdefault(at, {}).update(
            delta=r["delta"],
            delta_low=r["ci_low"],
            delta_high=r["ci_high"],
            rel=r["rel_delta"],
            rel_low=r["rel_ci_low"],
            rel_high=r["rel_ci_high"],
            baseline=r["base_mean"],
        )
        rows[at].setdefault("value", r["candidate_mean"])
        rows[at].setdefault("ci_method", r["method"])
    out = [Row(k, s, **{f: v if f == "ci_method" else _float(v) for f, v in d.items()}) for (k, s), d in rows.items()]  # type: ignore[arg-type]
    read = [OFFLINE_RUN.path(output_root, "metrics", run=gate.candidate), changes]
    return out, {"base": gate.base, "candidate": gate.candidate, "read": read}


def _date(text: str, role: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"config key gate.{role}: expected a date YYYY-MM-DD, got {text!r}") from None


def experiment_rows(
    spark: SparkSession, output_root: str, gate: GateConfig, control: str = "control"
) -> tuple[list[Row], dict[str, Any], list[str]]:
    """The variant's rows of the experiment window (value: the variant's; change: against the control), what
    was read, and why the window cannot pass for that variant: its decision's reasons when it is ``invalid``,
    and, when the window has no row of the variant (an experiment with one arm, or a variant without users),
    a line saying so with the window's own reasons (a failed verdict, not a config error: the window exists
    and says the variant was not compared).  Naming the control (``experiments.control``) as the variant is
    a :class:`ConfigError`."""
    start, end = _date(gate.start, "start"), _date(gate.end, "end")
    window = {"experiment": gate.experiment, "window": window_span(start, end)}
    results = WINDOW.path(output_root, "experiment_window", **window)
    _need(spark, results, f"the window {start}..{end} of experiment {gate.experiment!r} (recsys-spark experiment)")
    found = _rows(spark, results)
    variants = sorted({r["variant"] for r in found})
    if gate.variant == control:
        raise ConfigError(
            f"config key gate.variant: {gate.variant!r} is not a variant of the window {start}..{end} of "
            f"{gate.experiment!r}: it is the control (experiments.control), which the variants are compared with"
        )
    rows = [
        Row(
            key(r["metric"], r["k"], r["aggregation"]),
            r["slice"],
            value=_float(r["value"]),
            delta=_float(r["delta"]),
            delta_low=_float(r["ci_low"]),
            delta_high=_float(r["ci_high"]),
            rel=_float(r["rel_delta"]),
            rel_low=_float(r["rel_ci_low"]),
            rel_high=_float(r["rel_ci_high"]),
            baseline=_float(r["control_value"]),
            ci_method=r.get("ci_method"),
        )
        for r in found
        if r["variant"] == gate.variant
    ]
    decisions = WINDOW.path(output_root, "experiment_window_decisions", **window)
    invalid: list[str] = []
    read = [results]
    decision = None
    if fs.exists(spark, decisions):
        read.append(decisions)
        for d in _rows(spark, decisions):
            # the variant's own decision; with no variant compared, the window's one row (variant null)
            mine = d["variant"] == gate.variant or (d["variant"] is None and gate.variant not in variants)
            if mine:
                decision = decision_code(d["decision"])
            if mine and d["decision"] == "invalid":
                invalid += [f"experiment invalid: {reason}" for reason in d["reasons"]]
    if gate.variant not in variants:
        compared = ", ".join(variants) or "none"
        invalid.insert(
            0,
            f"variant {gate.variant} has no user in the window {start}..{end} of {gate.experiment} (variants "
            f"compared with the control: {compared})",
        )
    info = {
        "experiment": gate.experiment,
        "variant": gate.variant,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "decision": decision,  # the window's decision for the variant (None: no decision written)
        "read": read,
    }
    return rows, info, invalid


def validate(gate: GateConfig) -> list[GateCheck]:
    """What a gate needs before it reads anything (the checks themselves were checked as the config loaded):
    a source, what it names, and at least one check; a :class:`ConfigError` naming the key otherwise."""
    if not gate.source:
        raise ConfigError('config key gate.source: expected "offline" or "experiment" (what the gate compares)')
    if gate.source == "offline":
        for role in ("base", "candidate"):
            if not getattr(gate, role):
                raise ConfigError(f'config key gate.{role}: the offline run to compare (source = "offline")')
    else:
        if not gate.experiment:
            raise ConfigError('config key gate.experiment: the experiment whose window to gate (source = "experiment")')
        start, end = _date(gate.start, "start"), _date(gate.end, "end")
        if end < start:
            raise ConfigError(f"config keys gate.start and gate.end: {end} is before {start}")
    if not gate.checks:
        raise ConfigError("config key gate.checks: no check: add [[gate.checks]] tables (docs/gate.md)")
    return list(gate.checks)


def run_gate(spark: SparkSession, cfg: Config, name: str, output_root: str) -> dict[str, Any]:
    """Check ``cfg.gate`` and write ``{output_root}/gate/NAME/verdict.json``; return the verdict (``state``:
    passed, inconclusive or failed; ``passed``: true only when passed; ``summary``; ``checks``: one entry per
    threshold with its state, value, interval, bound, threshold, unit and why)."""
    check_name(name)
    gate = cfg.gate
    checks = validate(gate)
    if not fs.exists(spark, output_root):
        raise ConfigError(f"gate: output root {output_root} not found")
    extra: list[str] = []
    if gate.source == "offline":
        rows, info = offline_rows(spark, output_root, gate)
    else:
        rows, info, extra = experiment_rows(spark, output_root, gate, cfg.experiments.control)
    results = evaluate(checks, rows)
    state = gate_state(results, extra)
    verdict = {
        "name": name,
        "state": state,
        "passed": state == PASSED,
        "summary": summary_line(name, results, extra),
        "source": gate.source,
        **info,
        "invalid": extra,
        "checks": [r.as_dict() for r in results],
        "config": cfg.fingerprint(),
        "written_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    write_verdict(spark, cfg, output_root, name, verdict)
    verdict["path"] = verdict_path(output_root, name)
    return verdict


def write_verdict(spark: SparkSession, cfg: Config, output_root: str, name: str, verdict: dict[str, Any]) -> None:
    """The verdict as ``gate/NAME/verdict.json``, staged and committed (a rerun replaces it whole)."""
    with writing(open_wing(spark, GATE, output_root, cfg.output, name=name)) as out:
        commit_summary(out, GATE, verdict)
