"""The experiments wing's tables: their names and columns, the rows of ``experiment_checks`` (:class:`Check`), and
every row as the tuple its schema orders.

The daily tables are ``experiment_users`` (one row per slice and user: the sums of :mod:`.user_sums`),
``experiments`` (:data:`RESULTS_SCHEMA`, :class:`~recsys_spark.kernels.experiments.ResultRow`),
``experiment_checks`` (:data:`CHECKS_SCHEMA`), ``experiment_cumulative`` (the ``experiments`` columns of the
experiment's accumulated users, with ``first_day`` and ``days``: :data:`CUMULATIVE_SCHEMA`) and
``experiment_decisions`` (:data:`DECISIONS_SCHEMA`, with the ``basis`` the decision was made on); the window writes
the same columns but ``experiment``, which its path carries, and no ``basis`` (:data:`WINDOW_RESULTS_SCHEMA`, ...).
Where they live is :mod:`recsys_spark.tables`' (``DAILY``, ``WINDOW``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recsys_spark.kernels.decisions import DECISION_COLUMNS, Decision
from recsys_spark.kernels.experiments import RESULT_COLUMNS, ResultRow

#: the columns the wing adds to the per-user rows: an experiment, its variant, a layer, a user's variants by
#: experiment (a map; null for a user with several variants of one)
EXPERIMENT, VARIANT, LAYER, VARIANTS = "experiment", "variant", "layer", "variants"
#: the assignments' optional timestamp of a user's assignment: its earliest is the experiment's first day
ASSIGNED_AT = "assigned_at"
USERS_TABLE, RESULTS_TABLE, CHECKS_TABLE = "experiment_users", "experiments", "experiment_checks"
DECISIONS_TABLE, CUMULATIVE_TABLE = "experiment_decisions", "experiment_cumulative"
#: a per-user row's pre-period sum of ``<sum>`` for CUPED is ``f"{COVARIATE_PREFIX}{sum}"`` (:mod:`.covariates`)
COVARIATE_PREFIX = "_cov_"
CHECKS_SCHEMA = "experiment string, check string, statistic double, p_value double, passed boolean, detail string"


def ddl(columns: Sequence[tuple[str, str]], leave_out: str | None = None) -> str:
    """A schema in Spark's DDL from (name, type) pairs, ``leave_out`` left out.

    >>> ddl((("experiment", "string"), ("n", "long")), leave_out="experiment")
    'n long'
    """
    return ", ".join(f"{name} {kind}" for name, kind in columns if name != leave_out)


RESULTS_SCHEMA = ddl(RESULT_COLUMNS)
#: the accumulated sample's rows: the ``experiments`` columns, the experiment's first day (ISO) and the days read
CUMULATIVE_COLUMNS = (*RESULT_COLUMNS, ("first_day", "string"), ("days", "int"))
CUMULATIVE_SCHEMA = ddl(CUMULATIVE_COLUMNS)
#: ``basis``: the sample the daily decision was made on, ``cumulative`` or ``day`` (:mod:`.cumulative`); last, so
#: that the columns of the partitions written before it keep their places
DECISIONS_SCHEMA = ddl((*DECISION_COLUMNS, ("basis", "string")))
#: the tables the window writes, one partition ``experiment=NAME/window=S_E`` each; their files hold the
#: ``experiments`` / ``experiment_checks`` columns but ``experiment``, which the path carries (a column in both
#: would make the table unreadable at its root: pandas, pyarrow and DuckDB refuse a duplicate field)
WINDOW_RESULTS_SCHEMA = ddl(RESULT_COLUMNS, leave_out=EXPERIMENT)
WINDOW_CHECKS_SCHEMA = CHECKS_SCHEMA.split(", ", 1)[1]
WINDOW_DECISIONS_SCHEMA = ddl(DECISION_COLUMNS, leave_out=EXPERIMENT)


@dataclass(frozen=True)
class Check:
    """One ``experiment_checks`` row: a check of an experiment (``experiment`` None for a check across
    experiments, such as the layers' independence), its statistic and p-value when it has them, whether it
    passed, and a line saying what it saw."""

    experiment: str | None
    check: str
    statistic: float | None
    p_value: float | None
    passed: bool
    detail: str


def sql_name(name: str) -> str:
    """A column name quoted for a SQL expression.

    >>> sql_name("ndcg@10`x")
    '`ndcg@10``x`'
    """
    return "`" + name.replace("`", "``") + "`"


def result_tuples(results: Sequence[ResultRow]) -> list[tuple]:
    """The ``experiments`` (and window) rows, in :data:`RESULTS_SCHEMA`'s column order."""
    return [r.as_tuple() for r in results]


def check_tuples(checks: Sequence[Check]) -> list[tuple]:
    """The ``experiment_checks`` rows, in :data:`CHECKS_SCHEMA`'s column order."""
    return [(c.experiment, c.check, c.statistic, c.p_value, c.passed, c.detail) for c in checks]


def decision_tuples(rows: Sequence[Decision], basis: bool = True) -> list[tuple]:
    """The ``experiment_decisions`` rows, in :data:`DECISIONS_SCHEMA`'s column order (``basis`` False: the
    window's, without it)."""
    return [(*d.as_tuple(), d.basis) if basis else d.as_tuple() for d in rows]
