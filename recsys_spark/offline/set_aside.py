"""Rows of an offline input that cannot be evaluated: why (one reason per row, the first check it fails),
set aside in one pass with their counts, and the summary's note on them (docs/operations.md, "Hostile inputs").
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.offline.inputs import IS_TARGET, LABEL, PREDICTION, RANK, RATING
from recsys_spark.schema import ITEM, SCORE, USER
from recsys_spark.steps.validate import Check, count_rows, split_rows, tag_rows


def finite_checks(column: str, what: str, null: bool = True) -> list[Check]:
    """``null_<what>`` (unless ``null`` is False), ``nan_<what>``, ``infinite_<what>`` of a double column.

    Spark sorts NaN above every number and sums it into NaN: such a value is
    never ranked or averaged, it is set aside and counted (as the daily job's
    ``bad_score``).
    """
    c = F.col(column)
    checks: list[Check] = [(f"null_{what}", c.isNull())] if null else []
    return checks + [(f"nan_{what}", F.isnan(c)), (f"infinite_{what}", F.abs(c) == float("inf"))]


def input_checks(key: str, columns: Sequence[str]) -> list[Check]:
    """Why a row of offline input ``key`` cannot be evaluated, in order (the first failed check is its reason).

    A recommendation needs its user and item, and a finite score when it has
    one: a null score is set aside only when the score orders the list (no
    ``rank`` column); beside a rank it is only a missing tie-break and sorts
    last.
    """
    has_id = [("null_user_id", F.col(USER).isNull())]
    if key == "recommendations":
        checks = has_id + [("null_item_id", F.col(ITEM).isNull())]
        if SCORE in columns:
            checks += finite_checks(SCORE, "score", null=RANK not in columns)
        return checks
    if key == "predictions":
        return has_id + finite_checks(SCORE, "score") + finite_checks(LABEL, "label")[:2]
    if key == "ratings":
        return (
            has_id
            + [("null_item_id", F.col(ITEM).isNull())]
            + finite_checks(RATING, "rating")
            + finite_checks(PREDICTION, "prediction")
        )
    if key == "sampled":
        return has_id + [("null_is_target", F.col(IS_TARGET).isNull())] + finite_checks(SCORE, "score")
    raise ValueError(f"no row checks for offline input {key!r}")


def set_aside(
    df: DataFrame, key: str, path: str, flag: Column | None = None
) -> tuple[DataFrame, int, dict[str, int], dict[str, int]]:
    """Split offline input ``key`` into the rows that can be evaluated and the rows set aside, in one pass.

    Returns (kept rows, rows read, ``{"set_aside_<key>_<reason>": n}`` for every
    reason of :func:`input_checks` (zeros included), counts of the kept rows per
    non-null value of ``flag``).
    """
    checks = input_checks(key, df.columns)
    tagged = tag_rows(df, checks)
    counts, flagged = count_rows(tagged, f"offline.{key}", path, flag)
    kept, _ = split_rows(tagged)
    aside = {f"set_aside_{key}_{reason}": int(counts.get(reason, 0)) for reason, _ in checks}
    return kept, int(counts["rows"]), aside, flagged


def set_aside_note(key: str, counts: dict[str, int]) -> str | None:
    """The summary's note on the rows of ``key`` set aside, or None when none was.

    >>> set_aside_note("predictions", {"set_aside_predictions_nan_score": 2, "set_aside_predictions_null_label": 0})
    'predictions: 2 rows set aside, never ranked or averaged (nan_score 2)'
    """
    prefix = f"set_aside_{key}_"
    parts = {k[len(prefix) :]: v for k, v in counts.items() if k.startswith(prefix) and v}
    if not parts:
        return None
    detail = ", ".join(f"{reason} {n}" for reason, n in parts.items())
    return f"{key}: {sum(parts.values())} rows set aside, never ranked or averaged ({detail})"


def set_aside_notes(key: str, counts: dict[str, int]) -> list[str]:
    """:func:`set_aside_note` as a list: empty when no row of ``key`` was set aside."""
    note = set_aside_note(key, counts)
    return [note] if note else []
