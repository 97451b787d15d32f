"""The threshold metrics' rows against scikit-learn, shared by the offline and the daily tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, fbeta_score, precision_recall_fscore_support


def assert_rows_match_scikit_learn(
    rows: Mapping[str, pd.Series], y: np.ndarray, pred: np.ndarray, alphas: Sequence[float] = ()
) -> None:
    """``rows`` (metric name -> its row at one threshold) equal scikit-learn's accuracy, precision, recall, F1 and
    F_alpha for each of ``alphas`` on labels ``y`` and predictions ``pred``, to 1e-12."""
    p, r, f1, _ = precision_recall_fscore_support(y, pred, average="binary")
    assert rows["accuracy"]["value"] == pytest.approx(accuracy_score(y, pred), abs=1e-12)
    assert rows["precision"]["value"] == pytest.approx(p, abs=1e-12)
    assert rows["recall"]["value"] == pytest.approx(r, abs=1e-12)
    assert rows["f1"]["value"] == pytest.approx(f1, abs=1e-12)
    for alpha in alphas:
        assert rows[f"f{alpha:g}"]["value"] == pytest.approx(fbeta_score(y, pred, beta=alpha), abs=1e-12)
