"""Every column name and table layout the job reads or writes, in one place.

Inputs (:data:`EXPOSURE_COLUMNS`, ...), outputs (``*_DDL`` and :data:`USER_METRICS_COLUMNS`) and the columns the
stages add on the way (``relevance``, ``_category``, ...); metric names are :mod:`recsys_spark.registry`'s.
Plain Python, no pyspark import: the kernels, the sample-data generator and the tests read it too. The
contracts in words are in docs/operations.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from recsys_spark.registry import LIST_METRICS

# --- input columns ------------------------------------------------------------------------------
USER = "user_id"
SESSION = "session_id"
REQUEST = "request_id"
ITEM = "item_id"
POSITION = "position"
SCORE = "score"
TS = "ts"
EVENT = "event"
CATEGORY = "category"
#: users table: the day a user was first seen (the user_type slice); items table (optional): the day an item was
#: first seen (the custom rules' item_age_days)
FIRST_SEEN = "first_seen"
VALUE = "value"  # clicks: the revenue of the event (a purchase), in the event's currency; optional
DWELL = "dwell_seconds"  # clicks: the seconds the user spent on the item after the event; optional


@dataclass(frozen=True)
class ColumnSpec:
    """One input column: its name, what it is read as, and whether the input must have it.

    ``kind``: ``id`` (string or integer, read as string), ``int``, ``double``, ``timestamp`` (timestamp,
    date or ISO string) or ``string``; :func:`recsys_spark.io.read.conform` casts to it.  ``blank_is_null``:
    an empty or white-space value means "none" and is read as null (a click's ``request_id``).
    """

    name: str
    kind: str
    required: bool = True
    blank_is_null: bool = False


EXPOSURE_COLUMNS = (
    ColumnSpec(USER, "id"),
    ColumnSpec(SESSION, "id"),
    ColumnSpec(REQUEST, "id"),
    ColumnSpec(ITEM, "id"),
    ColumnSpec(POSITION, "int"),
    ColumnSpec(SCORE, "double", required=False),
    ColumnSpec(TS, "timestamp"),
)
CLICK_COLUMNS = (
    ColumnSpec(USER, "id"),
    ColumnSpec(SESSION, "id"),
    ColumnSpec(REQUEST, "id", blank_is_null=True),  # a click without a request: attributed by session
    ColumnSpec(ITEM, "id"),
    ColumnSpec(TS, "timestamp"),
    ColumnSpec(EVENT, "string", required=False),
    ColumnSpec(VALUE, "double", required=False),  # value metrics (gmv_*), only when the clicks carry it
    ColumnSpec(DWELL, "double", required=False),  # dwell metrics, only when the clicks carry it
)
ITEM_COLUMNS = (ColumnSpec(ITEM, "id"), ColumnSpec(CATEGORY, "string"))

#: off-policy evaluation (docs/ope.md): what the logging policy knew when it showed the row, optional on
#: the exposures (the daily job does not read them): its probability of showing that item at that position
#: in that request, of the whole list, and of the list's items up to this row's position
PROPENSITY = "propensity"
LIST_PROPENSITY = "list_propensity"
PREFIX_PROPENSITY = "prefix_propensity"
OPE_EXPOSURE_COLUMNS = (
    *EXPOSURE_COLUMNS,
    ColumnSpec(PROPENSITY, "double", required=False),
    ColumnSpec(LIST_PROPENSITY, "double", required=False),
    ColumnSpec(PREFIX_PROPENSITY, "double", required=False),
)
#: the candidate of an OPE run (``ope.target``): one row per (request, item, position) it could show
PROBABILITY = "probability"
Q_HAT = "q_hat"
TARGET_COLUMNS = (
    ColumnSpec(REQUEST, "id"),
    ColumnSpec(ITEM, "id"),
    ColumnSpec(POSITION, "int"),
    ColumnSpec(PROBABILITY, "double"),
    ColumnSpec(Q_HAT, "double", required=False),
)
#: a simulation's lists (``simulation.lists``): the candidate's list for each logged request; the user, the
#: session and the time are the logged request's (an exposures file has these columns and more)
SIMULATED_LIST_COLUMNS = (
    ColumnSpec(REQUEST, "id"),
    ColumnSpec(ITEM, "id"),
    ColumnSpec(POSITION, "int"),
    ColumnSpec(SCORE, "double", required=False),
)

#: the Spark type each kind is read as
SPARK_TYPE = {"id": "string", "int": "int", "double": "double", "timestamp": "timestamp", "string": "string"}


def input_ddl(columns: tuple[ColumnSpec, ...], optional: bool = True) -> str:
    """Spark DDL of an input as the job reads it (``optional=False``: the required columns only).

    >>> input_ddl(ITEM_COLUMNS)
    'item_id string, category string'
    """
    return ", ".join(f"{c.name} {SPARK_TYPE[c.kind]}" for c in columns if optional or c.required)


# --- columns the stages add -----------------------------------------------------------------------
#: validation: the first check a set-aside row failed
REASON = "reject_reason"

#: labelling
RELEVANCE = "relevance"
CLICKED = "clicked"
N_EVENTS = "n_events"
N_CLICKS = "n_clicks"  # the attributed events named labels.click_event (an exposure clicked twice: 2)
#: ``value`` and ``dwell_seconds`` of an exposure: the sums over its attributed events that carry one (null: none)
EVENT_FLAG_PREFIX = "_ev_"  # _ev_<name>: the exposure has an attributed event <name> (labels.conversion_events)


def event_flag(name: str) -> str:
    """The labelled rows' column that flags an exposure with an attributed event ``name``: ``_ev_purchase``."""
    return f"{EVENT_FLAG_PREFIX}{name}"


COPIES = "copies"
EXPOSED = "exposed"  # on the joined rows: the row is an exposure (not an orphan event)

#: slices (:mod:`recsys_spark.steps.slices`)
SLICE = "slice"
ALL = "all"
UNKNOWN = "unknown"  # the value of a dimension that is null, or of an item or user missing from its table
ITEM_CATEGORY = "_category"  # the catalog category; "unknown" for items missing from it; null without item
IN_CATALOG = "_in_catalog"  # the item is in the items table (null without item or without items table)
ITEM_EXPOSURES = "_item_exposures"  # the item's exposures of the day (only with the popularity slice)
SLICE_PREFIX = "_s_"  # _s_<name>: the value of slice dimension <name>
SLICE_KEYS = "_slices"  # a row's slice keys as an array, for the Python passes that explode them in Arrow
ITEM_PREFIX = "_i_"  # _i_<column>: a column of the items table, joined for an item slice or a custom rule
USER_PREFIX = "_u_"  # _u_<column>: a column of the users table, joined for a user slice or a custom rule

#: ranking
LIST_ID = "list_id"


# --- output tables --------------------------------------------------------------------------------
#: metrics/dt=D: the long table of every aggregate (docs/metrics.md).  ``threshold``: the score cut-off of a
#: threshold classification metric (offline predictions' accuracy, precision, recall, F_alpha at k null), null on
#: every other row and in partitions written before it (read with this schema, the column is null there)
METRICS_DDL = (
    "metric string, k int, aggregation string, slice string, value double, n long, se double, "
    "ci_low double, ci_high double, ci_method string, threshold double"
)
#: offline/confusion/run=NAME: the confusion counts of the predictions at each ``offline.thresholds``
CONFUSION_DDL = "slice string, threshold double, tp long, fp long, tn long, fn long"
#: lorenz/dt=D: the Lorenz curve of exposures over catalog items, per slice
LORENZ_DDL = "slice string, x double, y double"
#: roc_curve/dt=D and offline/roc_curve/run=NAME: the pooled ROC per slice, in curve order (docs/metrics.md,
#: "Curves"); the first point's threshold is null (above every score)
ROC_CURVE_DDL = "slice string, threshold double, fpr double, tpr double"
#: pr_curve/dt=D and offline/pr_curve/run=NAME: the pooled precision-recall curve per slice, thresholds
#: ascending; the last point (recall 0, precision 1) has a null threshold
PR_CURVE_DDL = "slice string, threshold double, recall double, precision double"
#: rule_checks/dt=D: one row per business rule evaluated (docs/operations.md)
RULE_CHECKS_DDL = (
    "rule string, severity string, violations long, rate double, threshold double, "
    "passed boolean, examples array<string>"
)
#: rejected/dt=D (with validation.write_rejected): the set-aside rows
REJECTED_DDL = "source string, reason string, row string"

#: ope/estimates/run=NAME: one row per estimator (docs/ope.md)
OPE_ESTIMATES_DDL = (
    "estimator string, level string, value double, se double, ci_low double, ci_high double, ci_method string, "
    "n long, units long, delta double, delta_se double, delta_ci_low double, delta_ci_high double, "
    "clip double, switch_tau double, confidence double"
)
#: ope/diagnostics/run=NAME: one row per diagnostic
OPE_DIAGNOSTICS_DDL = "diagnostic string, value double"

#: experiment_interactions/dt=D: the 2x2 interaction contrast of two experiments in different layers, per variant
#: pair and metric (docs/experiments.md, "Interactions")
EXPERIMENT_INTERACTIONS_DDL = (
    "layer_a string, experiment_a string, variant_a string, layer_b string, experiment_b string, variant_b string, "
    "metric string, k int, aggregation string, contrast double, ci_low double, ci_high double, p_value double, "
    "p_adjusted double, users long"
)
#: plan/metric=KEY (``recsys-spark plan``): the users per arm and the days an experiment needs (docs/experiments.md,
#: "Plan"); no ``metric`` column, which the path carries (a column in both: the table unreadable at its root)
PLAN_DDL = (
    "mde double, relative boolean, absolute_mde double, power double, confidence double, "
    "baseline double, variance double, users_per_arm long, daily_users double, days int, "
    "sequential_users_per_arm long, sequential_days int, sequential_tuning double, first_day string, "
    "last_day string, days_read int"
)

#: where each table lives (root, partition, the tables each command owns): :mod:`recsys_spark.tables`


# --- the per-user table (user_metrics) ----------------------------------------------------------
#: one row per (slice, user, k), whatever ``metrics.k`` holds: changing k changes rows, never the schema.
#: ``n_*``, ``auc`` and ``mrr`` have no cut-off and repeat on every k row of a user; ``ndcg`` ... ``hit_rate``
#: are means over the user's lists with a relevant item, ``hits`` their sum (see docs/metrics.md).
USER_METRICS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("slice", "string"),
    ("user_id", "string"),
    ("k", "int"),
    ("n_exposures", "long"),
    ("n_relevant", "long"),
    ("n_lists", "long"),
    ("n_lists_ranked", "long"),
    ("auc", "double"),
    ("mrr", "double"),
    *((m, "double") for m in LIST_METRICS),
    ("hits", "long"),
)
#: the columns of a user that do not depend on k
USER_COLUMNS = ("n_exposures", "n_relevant", "n_lists", "n_lists_ranked", "auc", "mrr")
#: the columns that do: one value per k
USER_K_COLUMNS = (*LIST_METRICS, "hits")


def ddl(columns: tuple[tuple[str, str], ...]) -> str:
    """Spark DDL of (name, type) pairs: ``slice string, user_id string, ...``."""
    return ", ".join(f"`{name}` {kind}" for name, kind in columns)


USER_METRICS_DDL = ddl(USER_METRICS_COLUMNS)
