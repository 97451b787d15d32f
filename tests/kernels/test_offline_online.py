"""What an offline win is worth (kernels/offline_online.py): the prediction against statsmodels' OLS interval of a
new observation, the days with a value on one side only, and the note that says why a number is missing."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm

from recsys_spark.kernels.offline_online import RunDay, run_day, worth


def test_worth_is_statsmodels_prediction_of_a_new_observation_at_the_level_asked():
    xs, ys = [1.0, 2.0, None, 3.0, 4.0, 5.0], [2.0, 4.0, 9.0, 5.0, None, 7.5]  # None on either side: left out
    got = worth(xs, ys, 6.0, 0.8, 3, "cand")
    x, y = np.array([1.0, 2.0, 3.0, 5.0]), np.array([2.0, 4.0, 5.0, 7.5])
    frame = sm.OLS(y, sm.add_constant(x)).fit().get_prediction(np.array([[1.0, 6.0]])).summary_frame(alpha=0.2)
    assert got["y"] == pytest.approx(frame["mean"][0])
    assert (got["low"], got["high"]) == (
        pytest.approx(frame["obs_ci_lower"][0]),
        pytest.approx(frame["obs_ci_upper"][0]),
    )
    assert (got["candidate"], got["x"], got["level"], got["n"], got["note"]) == ("cand", 6.0, 0.8, 4, "")


def test_worth_notes_why_a_number_is_missing():
    none = worth([1.0, 2.0, 3.0], [1.0, 2.0, 4.0], None, 0.95, 3, "ranker_v2")
    assert none == {
        "candidate": "ranker_v2",
        "x": None,
        "y": None,
        "low": None,
        "high": None,
        "level": 0.95,
        "n": 3,
        "note": "the candidate run ranker_v2 has no value of the offline metric",
    }
    flat = worth([2.0, 2.0, 2.0], [1.0, 2.0, 4.0], 3.0, 0.95, 3, "c")
    assert (flat["y"], flat["low"], flat["high"]) == (None, None, None)
    assert flat["note"] == "no line: the offline metric did not vary over the days"
    two = worth([1.0, 2.0], [1.0, 3.0], 3.0, 0.95, 2, "c")
    assert (two["y"], two["low"], two["high"]) == (pytest.approx(5.0), None, None)
    assert two["note"] == "no interval from fewer than 3 days"


def test_run_day_spellings():
    assert run_day("m.test.2026-01-31") == RunDay("m", "test", "2026-01-31")
    assert run_day("a.b.train.2026-01-31") == RunDay("a.b", "train", "2026-01-31")
    assert run_day("m.2026-13-01") is None and run_day("m.2026-01-31.x") is None and run_day("2026-01-31") is None
