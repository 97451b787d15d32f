"""Column names shared by every step (one place, so a rename is one edit); no pyspark import: the kernels use it."""

from __future__ import annotations

USER = "user_id"
SESSION = "session_id"
REQUEST = "request_id"
ITEM = "item_id"
POSITION = "position"
SCORE = "score"
TS = "ts"
EVENT = "event"
CATEGORY = "category"

#: added by labelling
RELEVANCE = "relevance"
CLICKED = "clicked"
N_EVENTS = "n_events"
COPIES = "copies"

#: added for ranking
LIST_ID = "list_id"
SLICE = "slice"
ALL = "all"

#: added by validation
REASON = "reject_reason"


# --- metric names -------------------------------------------------------------------------------
#: list metrics: one value per list and cut-off k, averaged per user
LIST_METRICS = ("ndcg", "map", "precision", "recall", "hit_rate")


def metric_name(metric: str, k: int | None = None) -> str:
    """The one name of a metric at a cut-off, wherever a single key is needed: ``ndcg@10``; ``mrr`` without k.

    Tables never use it: they carry ``metric`` and ``k`` (and ``aggregation``) as separate columns. The
    summary's keys are ``metric_name(...) + "_" + aggregation`` (:func:`summary_key`).

    >>> metric_name("ndcg", 10), metric_name("mrr"), summary_key("ndcg", 10, "user_avg")
    ('ndcg@10', 'mrr', 'ndcg@10_user_avg')
    """
    return metric if k is None else f"{metric}@{k}"


def summary_key(metric: str, k: int | None, aggregation: str) -> str:
    """Key of an aggregate in the summary's ``headline`` and the CLI's line: ``auc_global``, ``ndcg@10_user_avg``."""
    return f"{metric_name(metric, k)}_{aggregation}"


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
