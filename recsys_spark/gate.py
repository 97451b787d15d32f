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

Beside the checks, an offline gate with ``report.regression_model`` set shows what the candidate's offline win
is worth (:func:`offline_worth`): its predicted ``report.regression_y`` with a prediction interval, from the
regression of the days' online ``regression_y`` on ``regression_model``'s offline runs of those days
(:mod:`recsys_spark.kernels.offline_online`).  It is information, ``worth`` in the verdict and a second printed
line: it never changes the state.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config, GateConfig
from recsys_spark.errors import ConfigError
from recsys_spark.io.output import commit_summary, open_wing, writing
from recsys_spark.io.read import unthresholded
from recsys_spark.kernels.decisions import normalise_code
from recsys_spark.kernels.gate import PASSED, GateCheck, Row, evaluate, gate_state, summary_line
from recsys_spark.kernels.offline_online import TEST, run_day, worth
from recsys_spark.registry import key, parse_key
from recsys_spark.runtime import fs
from recsys_spark.tables import DAILY, GATE, OFFLINE_COMPARISON, OFFLINE_RUN, WINDOW, window_span
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
        if r.get("threshold") is not None:  # a threshold metric: one row per threshold, no key names one alone
            continue
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


def _values(spark: SparkSession, paths: dict[str, str], metric_key: str) -> dict[str, float]:
    """{label: the value of ``metric_key`` (slice ``all``)} of the metrics tables at ``paths`` ({label: path}),
    in one job; a table without that row gives no entry."""
    name, k, aggregation = parse_key(metric_key)
    frames: list[DataFrame] = []
    for label, path in paths.items():
        rows = unthresholded(spark.read.parquet(path)).where((F.col("slice") == "all") & (F.col("metric") == name))
        rows = rows.where(F.col("aggregation") == aggregation)
        rows = rows.where(F.col("k").isNull() if k is None else F.col("k") == k)
        frames.append(rows.select(F.lit(label).alias("label"), F.col("value").cast("double").alias("value")))
    if not frames:
        return {}
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return {r["label"]: float(r["value"]) for r in union.collect() if r["value"] is not None}


def offline_worth(spark: SparkSession, cfg: Config, output_root: str) -> dict[str, Any] | None:
    """What the offline candidate's win is worth (module docstring), or None when the gate is not an offline
    one or ``report.regression_model`` is not set.  The points: the newest ``report.window_days`` days that
    have both a complete run ``MODEL.YYYY-MM-DD`` (or ``MODEL.test.YYYY-MM-DD``) and a complete daily output."""
    report, gate = cfg.report, cfg.gate
    model = report.regression_model
    if gate.source != "offline" or not model:
        return None
    runs_root = f"{OFFLINE_RUN.root_of(output_root)}/metrics"
    names = [n.split("=", 1)[1] for n in fs.children(spark, runs_root) if n.startswith("run=")]
    runs = {}
    for name in names:
        found = run_day(name)
        if found is not None and found.model == model and found.split == TEST:
            if fs.exists(spark, OFFLINE_RUN.marker(output_root, run=name)) and fs.exists(
                spark, DAILY.marker(output_root, dt=found.dt)
            ):
                runs[found.dt] = name
    days = sorted(runs)[-report.window_days :]
    xs = _values(spark, {d: OFFLINE_RUN.path(output_root, "metrics", run=runs[d]) for d in days}, report.regression_x)
    ys = _values(spark, {d: DAILY.path(output_root, "metrics", dt=d) for d in days}, report.regression_y)
    x0 = _values(spark, {"x0": OFFLINE_RUN.path(output_root, "metrics", run=gate.candidate)}, report.regression_x)
    found_worth = worth(
        [xs.get(d) for d in days],
        [ys.get(d) for d in days],
        x0.get("x0"),
        report.regression_level,
        report.min_regression_days,
        gate.candidate,
    )
    found_worth |= {"model": model, "x_key": report.regression_x, "y_key": report.regression_y, "days": days}
    found_worth["line"] = worth_line(found_worth)
    return found_worth


def worth_line(w: dict[str, Any]) -> str:
    """The printed line of :func:`offline_worth` (information beside the verdict).

    >>> w = {"candidate": "c", "x": 0.74, "y": 0.05, "low": 0.04, "high": 0.06, "level": 0.95, "n": 9, "note": "",
    ...      "model": "m", "x_key": "auc_global", "y_key": "uv_ctr_global"}
    >>> head, tail = worth_line(w).split(" (95 % prediction interval) ")
    >>> head
    'worth (information, decides nothing): uv_ctr_global of c predicted 0.05 [0.04, 0.06]'
    >>> tail
    'from its auc_global 0.74 on the line of 9 days of m'
    """
    head = f"worth (information, decides nothing): {w['y_key']} of {w['candidate']}"
    if w["y"] is None:
        return f"{head}: no prediction ({w['note']})"
    interval = (
        f" [{w['low']:.4g}, {w['high']:.4g}] ({w['level'] * 100:g} % prediction interval)"
        if w["low"] is not None
        else ""
    )
    tail = f" from its {w['x_key']} {w['x']:.4g} on the line of {w['n']} days of {w['model']}"
    return f"{head} predicted {w['y']:.4g}{interval}{tail}" + (f" ({w['note']})" if w["note"] else "")


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
        "worth": offline_worth(spark, cfg, output_root),  # information: never part of the state
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
