"""What an offline win is worth (seed 002 §3): which offline run belongs to which day, and a candidate's
predicted business metric from the regression of the days' business metric on their offline metric.

**A run's day.**  An offline run (``recsys-spark offline --run NAME``) carries no date; the day it measures is
spelt in its name: ``MODEL.YYYY-MM-DD`` (the model's test run of that day) or ``MODEL.train.YYYY-MM-DD`` /
``MODEL.test.YYYY-MM-DD`` (its train or test split).  A name without a date (``ranker_v2``) belongs to no day:
it is never a point of the regression nor of the train/test/online AUC table, but it can be the candidate.

**The prediction.**  With one point per day (x = the production model's offline metric on that day's run,
y = the day's online business metric), :func:`worth` fits the line (:func:`regression.fit_line`) and predicts
the candidate's y at its offline x0 with the interval of a new observation (:func:`regression.predict`).
Fewer than ``min_days`` points: no prediction (the report says "too few days"); the prediction is information,
it decides nothing (the gate shows it beside its checks, docs/gate.md).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recsys_spark.kernels.regression import fit_line, predict

RUN_DAY = re.compile(r"(?P<model>.+?)(?:\.(?P<split>train|test))?\.(?P<dt>\d{4}-\d{2}-\d{2})")
TRAIN, TEST = "train", "test"


@dataclass(frozen=True)
class RunDay:
    """The model, split and day an offline run's name spells."""

    model: str
    split: str
    dt: str


def run_day(name: str) -> RunDay | None:
    """The day of the offline run ``name`` (module docstring), None when it spells none.

    >>> run_day("ranker.2026-11-20"), run_day("ranker.v2.train.2026-11-20").split
    (RunDay(model='ranker', split='test', dt='2026-11-20'), 'train')
    >>> run_day("ranker_v2") is None, run_day("ranker.2026-02-30") is None
    (True, True)
    """
    found = RUN_DAY.fullmatch(name)
    if found is None:
        return None
    try:
        dt.date.fromisoformat(found["dt"])
    except ValueError:
        return None
    return RunDay(found["model"], found["split"] or TEST, found["dt"])


def worth(
    xs: Sequence[float | None],
    ys: Sequence[float | None],
    x0: float | None,
    level: float,
    min_days: int,
    candidate: str,
) -> dict[str, Any]:
    """The candidate's predicted y at ``x0`` from the points (xs[i], ys[i]) (a None on either side is left out),
    as a plain dict: ``candidate``, ``x``, ``y``, ``low``, ``high``, ``level``, ``n`` and a ``note`` that says
    why a number is missing (no x0, fewer than ``min_days`` points, no interval from 2 points).

    >>> w = worth([1, 2, 3, 4], [2, 4, 5, 7], 5, 0.95, 3, "c")
    >>> w["y"], round(w["low"], 4), round(w["high"], 4), w["note"]
    (8.5, 6.3487, 10.6513, '')
    >>> worth([1, 2], [2, 4], 5, 0.95, 3, "c")["note"]
    'too few days: 2 with both values, at least 3 needed (report.min_regression_days)'
    """
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if x is not None and y is not None]
    fit = fit_line([p[0] for p in pairs], [p[1] for p in pairs], level=level)
    out: dict[str, Any] = {"candidate": candidate, "x": x0, "y": None, "low": None, "high": None}
    out |= {"level": level, "n": fit.n, "note": ""}
    if x0 is None:
        out["note"] = f"the candidate run {candidate} has no value of the offline metric"
        return out
    if fit.n < min_days:
        out["note"] = f"too few days: {fit.n} with both values, at least {min_days} needed (report.min_regression_days)"
        return out
    found = predict(fit, x0)
    out |= {"y": found.y, "low": found.low, "high": found.high}
    if found.y is None:
        out["note"] = "no line: the offline metric did not vary over the days"
    elif found.low is None:
        out["note"] = "no interval from fewer than 3 days"
    return out
