"""One user's day as additive sums, the experiments' input: pure numpy, computed in the day's one pass.

The experiments (:mod:`recsys_spark.experiments.stage`) compare arms on per-user sums that add up over users
and over days (the unit is the user).  Each (slice, user) with a labelled row that day gets one row of
them (the ``experiment_users`` table):

* from its labelled rows (the health pass's units, :func:`kernels.health_pass.unit_sums`; exposed rows
  only where it says "exposures"): ``exposures`` (its exposed items), ``clicked`` (those clicked),
  ``requests``, ``empty_requests`` (requests without an item), ``exposed`` (1 when ``exposures`` > 0),
  and with the labelled rows' business columns ``click_events`` (its clicks on exposed items),
  ``value``, ``dwell`` (their sums), ``valued`` (1 when an exposed row carried a value), and per
  conversion event e ``ev_<e>_user`` (1 when an exposed row has one), ``ev_<e>_exposures`` (how many);
* from its per-user metrics (:data:`schema.USER_METRICS_COLUMNS`, 0 for a unit without a ranked list):
  ``lists_ranked`` (n_lists_ranked), ``relevant`` (n_relevant), ``auc_sum`` = auc x n_exposures and
  ``auc_exposures`` = n_exposures (both 0 when the user has no AUC), ``mrr_sum`` = mrr x lists_ranked,
  and per k ``hits_at_<k>`` and ``<metric>_at_<k>_sum`` = value x lists_ranked (0 when the value is
  missing or NaN): a list metric's per-user value is a mean over its ranked lists, so its sum over lists
  is what adds up.

:func:`user_day_sums` computes the rows in the pass (no JVM aggregation over exposure rows, no second read
of the per-user table); :mod:`recsys_spark.experiments.stage` keeps the same sums as Spark expressions for the
users set aside by the pass (``execution.max_user_rows``), and a test holds the two to each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from recsys_spark.kernels.composite import Composite, composite_values, day_columns, sum_column, units_column
from recsys_spark.registry import LIST_METRICS
from recsys_spark.schema import DWELL, EVENT_FLAG_PREFIX, N_CLICKS, VALUE


def user_sum_column(metric: str, k: int | None = None) -> str:
    """Per-user sum over ranked lists of a list metric: ``ndcg_at_10_sum``, ``mrr_sum``."""
    return f"{metric}_sum" if k is None else f"{metric}_at_{k}_sum"


def survey_columns(metric: str) -> tuple[str, str]:
    """The per-user sums of a survey metric (``survey_<question>``): (the user's scores summed, its responses):
    ``survey_satisfaction_sum``, ``survey_satisfaction_responses`` (docs/metrics.md, "Surveys")."""
    return f"{metric}_sum", f"{metric}_responses"


def event_columns(event: str) -> tuple[str, str]:
    """The per-user sums of a conversion event: (1 when the user has one, exposures with one):
    ``ev_purchase_user``, ``ev_purchase_exposures``."""
    return f"ev_{event}_user", f"ev_{event}_exposures"


#: the sums every day has, from the labelled rows
BASE_SUMS = ("exposures", "clicked", "requests", "empty_requests", "exposed")
#: (labelled rows' column, the sum it gives) for the optional amounts, in the table's order
AMOUNTS = ((N_CLICKS, "click_events"), (VALUE, "value"), (DWELL, "dwell"))


def user_value_sums(ks: Sequence[int]) -> list[str]:
    """The sums from the per-user metrics, for cut-offs ``ks`` (module docstring)."""
    out = ["lists_ranked", "relevant", "auc_sum", "auc_exposures", user_sum_column("mrr")]
    for k in ks:
        out += [f"hits_at_{k}"] + [user_sum_column(m, k) for m in LIST_METRICS]
    return out


def business_sums(columns: Sequence[str]) -> list[str]:
    """The sums from the labelled rows, for a day whose labelled rows have ``columns``, in the table's order."""
    out = list(BASE_SUMS) + [name for column, name in AMOUNTS if column in columns]
    if VALUE in columns:
        out.append("valued")
    for column in columns:
        if column.startswith(EVENT_FLAG_PREFIX):
            out += event_columns(column[len(EVENT_FLAG_PREFIX) :])
    return out


def user_day_columns(columns: Sequence[str], ks: Sequence[int], composites: Sequence[Composite] = ()) -> list[str]:
    """Every sum of a user's day, in the ``experiment_users`` table's order: the labelled rows' then the
    per-user metrics', then the composites' (:func:`kernels.composite.day_columns`: the user's composite, 0
    without one, and 1 when it has one)."""
    return business_sums(columns) + user_value_sums(ks) + day_columns(composites)


def _measure(name: str) -> tuple[str, bool]:
    """(the health pass's measure a business sum reads, whether the sum is its indicator > 0)."""
    if name == "valued":
        return "valued", True
    if name.startswith("ev_") and name.endswith("_user"):
        return name[: -len("_user")], True
    if name.startswith("ev_") and name.endswith("_exposures"):
        return name[: -len("_exposures")], False
    return name, False


def _over_lists(value: np.ndarray, lists: np.ndarray) -> np.ndarray:
    value = np.asarray(value, dtype=np.float64)
    return np.where((lists > 0) & ~np.isnan(value), value * lists, 0.0)


def user_day_sums(
    unit_slice: np.ndarray,
    unit_user: np.ndarray,
    unit_values: Mapping[str, np.ndarray],
    metric_slice: np.ndarray,
    metric_user: np.ndarray,
    per_user: Mapping[str, np.ndarray],
    per_k: Mapping[str, np.ndarray],
    ks: Sequence[int],
    names: Sequence[str],
    composites: Sequence[Composite] = (),
) -> np.ndarray:
    """One row per unit, one column per name of ``names`` (:func:`user_day_columns`): the unit's sums.

    ``unit_slice``, ``unit_user``, ``unit_values``: the units of the labelled rows (codes and the health
    pass's per-unit sums: ``pv``, ``empty``, ``exposures``, ``clicked`` and the measures); ``metric_slice``,
    ``metric_user``, ``per_user``, ``per_k``: the per-user metrics of the units with a ranked list (every one
    of them is a unit; ``per_k``'s arrays have one column per k of ``ks``).  A unit without metrics has 0
    for their sums.
    """
    n = len(unit_slice)
    width = int(max(np.max(unit_user, initial=-1), np.max(metric_user, initial=-1))) + 1
    unit_key = np.asarray(unit_slice, dtype=np.int64) * width + np.asarray(unit_user, dtype=np.int64)
    metric_key = np.asarray(metric_slice, dtype=np.int64) * width + np.asarray(metric_user, dtype=np.int64)
    order = np.argsort(unit_key, kind="stable")
    found = np.minimum(np.searchsorted(unit_key[order], metric_key), max(n - 1, 0))
    at = order[found] if n else np.array([], dtype=np.int64)
    if len(metric_key) and (len(at) != len(metric_key) or not (unit_key[at] == metric_key).all()):
        raise ValueError("a unit with per-user metrics has no labelled rows")
    metric_values: dict[str, np.ndarray] = {}
    if len(at):
        lists = np.asarray(per_user["n_lists_ranked"], dtype=np.float64)
        exposures = np.asarray(per_user["n_exposures"], dtype=np.float64)
        auc = np.asarray(per_user["auc"], dtype=np.float64)
        has_auc = ~np.isnan(auc)
        metric_values = {
            "lists_ranked": lists,
            "relevant": np.asarray(per_user["n_relevant"], dtype=np.float64),
            "auc_sum": np.where(has_auc, auc * exposures, 0.0),
            "auc_exposures": np.where(has_auc, exposures, 0.0),
            user_sum_column("mrr"): _over_lists(per_user["mrr"], lists),
        }
        for j, k in enumerate(ks):
            metric_values[f"hits_at_{k}"] = np.asarray(per_k["hits"], dtype=np.float64)[:, j]
            for m in LIST_METRICS:
                metric_values[user_sum_column(m, k)] = _over_lists(np.asarray(per_k[m])[:, j], lists)
        for composite in composites:
            value = composite_values(composite, per_user, per_k, ks)
            metric_values[sum_column(composite.name)] = np.nan_to_num(value, nan=0.0)
            metric_values[units_column(composite.name)] = (~np.isnan(value)).astype(np.float64)
    rows = {
        "requests": unit_values["pv"],
        "empty_requests": unit_values["empty"],
        "exposed": (np.asarray(unit_values["exposures"]) > 0).astype(np.float64),
    }
    from_metrics = set(user_value_sums(ks)) | set(day_columns(composites))
    out = np.zeros((n, len(names)), dtype=np.float64)
    for j, name in enumerate(names):
        if name in metric_values:
            out[at, j] = metric_values[name]
        elif name in rows:
            out[:, j] = rows[name]
        elif name not in from_metrics:
            measure, indicator = _measure(name)
            values = np.asarray(unit_values[measure], dtype=np.float64)
            out[:, j] = (values > 0).astype(np.float64) if indicator else values
    return out
