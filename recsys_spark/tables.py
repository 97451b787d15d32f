"""The table of tables: where every output table lives, declared once.

Each family of tables one command writes together is a :class:`Layout`: its root under the output root, how
its partition is spelt, the tables it owns (the only ones a rerun replaces or removes), and the file that
says it is complete.  Every writer (:func:`recsys_spark.io.output.open_wing`) and every reader (the report,
the gate, the experiment window, catalog publishing) takes its paths from here, so a table is named in one
place.  The column layouts are in :mod:`recsys_spark.schema`.

=====================  ==================  ===================================  ===============================
layout                 root                partition                            tables
=====================  ==================  ===================================  ===============================
:data:`DAILY`          ``{out}``           ``dt=D``                             user_metrics ... summary
:data:`SIMULATION`     ``{out}/simulation``  ``run=NAME/dt=D``                  metrics, lorenz, ... summary
:data:`WINDOW`         ``{out}``           ``experiment=NAME/window=S_E``       experiment_window, _checks, ...
:data:`OFFLINE_RUN`    ``{out}/offline``   ``run=NAME``                         metrics, user_metrics, ...
:data:`OFFLINE_COMPARISON`  ``{out}/offline``  ``base=A/candidate=B``           comparison, summary
:data:`OPE`            ``{out}/ope``       ``run=NAME``                         estimates, diagnostics, summary
:data:`GATE`           ``{out}``           ``NAME``                             gate (``verdict.json``)
:data:`PLAN`           ``{out}``           ``metric=KEY``                       plan
=====================  ==================  ===================================  ===============================

A layout with a summary is complete when ``{root}/summary/{partition}/_SUCCESS`` exists (the reading
contract, docs/operations.md); the gate's verdict is one JSON file, complete when it is there.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass

from recsys_spark.errors import ConfigError, JobError

SUMMARY = "summary"
SUCCESS = "_SUCCESS"

#: what a name that becomes one segment of a path may be (an offline run, an OPE run, a gate, an experiment, an
#: experiment's window): letters, digits, ``_``, ``.`` and ``-``, a letter or digit first (so never ``.``,
#: ``..`` or a name the readers skip as hidden, ``_x`` or ``.x``), at most 128 characters
PATH_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
#: a metric key as a partition value (``plan/metric=ndcg@10_user_avg``): a name that may hold ``@``
METRIC_PATH_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}")


def check_name(value: str, key: str, error: type[JobError] = ConfigError) -> str:
    """``value`` when it can be one segment of a path under the output root (:data:`PATH_NAME`); else ``error``
    naming ``key``: a config key or a library argument is a :class:`ConfigError` (exit 3), a command-line flag
    a :class:`~recsys_spark.errors.UsageError` (exit 2).  Every name that becomes a path goes through here, so
    ``../../x``, ``a/b`` or ``dt=2026-11-20`` is refused before anything is read or written.

    >>> check_name("ranker_v2.1", "gate.experiment")
    'ranker_v2.1'
    >>> check_name("../../x", "gate.experiment")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_spark.errors.ConfigError: gate.experiment '../../x': expected a name of letters, digits, '_', '.' and ...
    """
    if not isinstance(value, str) or not PATH_NAME.fullmatch(value):
        raise error(
            f"{key} {value!r}: expected a name of letters, digits, '_', '.' and '-' (a letter or digit first, at "
            "most 128): it becomes a directory under the output root"
        )
    return value


@dataclass(frozen=True)
class Layout:
    """One family of tables written together: ``{output_root}/{root}/{table}/{partition}``.

    ``partition`` is a template whose fields are the partition's values (``run={run}/dt={dt}``); every value but
    a ``dt`` (an ISO date) and a ``window`` (``S_E``) must be a name (:func:`check_name`, naming ``what``).
    ``summary_file`` is the file of the ``summary`` table (or, without one, of the only table) that says the
    partition is complete; ``labels`` names a partition value in messages (``run`` -> ``offline run``).
    """

    what: str
    root: str
    partition: str
    tables: tuple[str, ...]
    summary_file: str = "summary.json"
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(f for _, f, _, _ in string.Formatter().parse(self.partition) if f)

    @property
    def marker_table(self) -> str:
        """The table whose partition says the whole partition is complete: ``summary``, else the only table."""
        return SUMMARY if SUMMARY in self.tables else self.tables[-1]

    def root_of(self, output_root: str) -> str:
        """``{output_root}/{root}`` (the output root itself for the daily tables)."""
        base = output_root.rstrip("/")
        return f"{base}/{self.root}" if self.root else base

    def spell(self, **values: str) -> str:
        """The partition of ``values``: ``run=ranker_v2/dt=2026-11-20`` (names checked, exit 3 for a bad one).

        >>> OPE.spell(run="ranker_v2")
        'run=ranker_v2'
        >>> WINDOW.spell(experiment="e1", window="2026-11-14_2026-11-20")
        'experiment=e1/window=2026-11-14_2026-11-20'
        """
        if set(values) != set(self.keys):
            raise TypeError(f"{self.what}: partition values {sorted(values)}, expected {list(self.keys)}")
        labels = dict(self.labels)
        checked = {
            k: v if k in ("dt", "window") else check_name(v, labels.get(k, f"{self.what} {k}"))
            for k, v in values.items()
            if k != "metric"
        }
        if "metric" in values:  # a metric key: a name with @ (ndcg@10_user_avg)
            if not isinstance(values["metric"], str) or not METRIC_PATH_NAME.fullmatch(values["metric"]):
                raise ConfigError(f"{labels.get('metric', 'metric')} {values['metric']!r}: expected a metric key")
            checked["metric"] = values["metric"]
        return self.partition.format(**checked)

    def path(self, output_root: str, table: str, **values: str) -> str:
        """``{output_root}/{root}/{table}/{partition}`` of an owned ``table``."""
        if table not in self.tables:
            raise KeyError(f"{self.what} owns no table {table!r} (it owns {', '.join(self.tables)})")
        return f"{self.root_of(output_root)}/{table}/{self.spell(**values)}"

    def relative(self, table: str, **values: str) -> str:
        """The same path relative to the output root: ``offline/metrics/run=base``."""
        return self.path("", table, **values).lstrip("/")

    def marker(self, output_root: str, **values: str) -> str:
        """What says the partition is complete: ``.../summary/{partition}/_SUCCESS``, the gate's
        ``verdict.json``, or (the window, which has neither) its last table's partition, moved into place last."""
        partition = self.path(output_root, self.marker_table, **values)
        if self.marker_table == SUMMARY:
            return f"{partition}/{SUCCESS}"
        return f"{partition}/{self.summary_file}" if self.summary_file else partition


#: the tables the daily job writes, one ``dt=D`` partition each: the only ones a run replaces or removes (other
#: folders under the output root, inputs included, are never touched)
DAILY = Layout(
    "",
    "",
    "dt={dt}",
    (
        "user_metrics",
        "experiment_users",
        "metrics",
        "confusion",
        "lorenz",
        "rule_checks",
        "experiments",
        "experiment_checks",
        "experiment_cumulative",
        "experiment_decisions",
        "experiment_interactions",
        "rejected",
        "roc_curve",
        "pr_curve",
        SUMMARY,
    ),
)
#: the tables a simulated day writes (``recsys-spark simulate``): no ``user_metrics`` nor ``experiments``, which
#: need feedback
SIMULATION = Layout(
    "simulated day",
    "simulation",
    "run={run}/dt={dt}",
    ("metrics", "lorenz", "rule_checks", "rejected", SUMMARY),
    labels=(("run", "simulation run"),),
)
#: the experiment window's tables (``recsys-spark experiment``); their files hold the daily tables' columns but
#: ``experiment``, which the path carries.  No summary: the decisions table, moved into place last, says it is
#: complete
WINDOW = Layout(
    "experiment window",
    "",
    "experiment={experiment}/window={window}",
    ("experiment_window", "experiment_window_checks", "experiment_window_decisions"),
    summary_file="",
    labels=(("experiment", "experiment"),),
)
#: an offline run's tables (``recsys-spark offline``) and a comparison's (``recsys-spark offline-compare``)
OFFLINE_RUN = Layout(
    "offline run",
    "offline",
    "run={run}",
    ("metrics", "user_metrics", "lorenz", "calibration", "roc_curve", "pr_curve", "confusion", SUMMARY),
    labels=(("run", "offline run"),),
)
OFFLINE_COMPARISON = Layout(
    "offline comparison",
    "offline",
    "base={base}/candidate={candidate}",
    ("comparison", SUMMARY),
    labels=(("base", "offline base run"), ("candidate", "offline candidate run")),
)
#: an off-policy run's tables (``recsys-spark ope``)
OPE = Layout("ope run", "ope", "run={run}", ("estimates", "diagnostics", SUMMARY), labels=(("run", "ope run"),))
#: a gate's verdict (``recsys-spark gate``): one JSON file, ``gate/NAME/verdict.json``
GATE = Layout("gate", "", "{name}", ("gate",), summary_file="verdict.json", labels=(("name", "gate name"),))

#: an experiment's plan (``recsys-spark plan``): one table, ``plan/metric=KEY``, complete when its partition is there
PLAN = Layout("plan", "", "metric={metric}", ("plan",), summary_file="", labels=(("metric", "plan metric"),))

LAYOUTS: tuple[Layout, ...] = (DAILY, SIMULATION, WINDOW, OFFLINE_RUN, OFFLINE_COMPARISON, OPE, GATE, PLAN)


def window_span(start: object, end: object) -> str:
    """The window partition's value: ``2026-11-14_2026-11-20``."""
    return f"{start}_{end}"


def owned(layouts: Sequence[Layout] = LAYOUTS) -> list[str]:
    """Every table folder the project writes under an output root (relative), for checks and docs."""
    return sorted({f"{layout.root}/{t}".lstrip("/") for layout in layouts for t in layout.tables})
