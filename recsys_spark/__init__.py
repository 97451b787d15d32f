"""recsys-spark: nightly evaluation of recommender exposure and click logs with PySpark (README.md).

From a notebook: ``recsys_spark.evaluate(exposures, clicks)`` runs the daily job on two DataFrames and
gives its tables back as DataFrames; ``recsys_spark.RankingEvaluator`` is an MLlib ``Evaluator``
(docs/notebook.md).  Both are imported on first use, so that ``import recsys_spark.kernels`` stays free of
Spark.
"""

from typing import Any

from recsys_spark._version import __version__

__all__ = ["RankingEvaluator", "__version__", "evaluate"]


def __getattr__(name: str) -> Any:
    if name in ("evaluate", "RankingEvaluator", "Evaluation"):
        from recsys_spark import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module 'recsys_spark' has no attribute {name!r}")
