"""recsys-spark: nightly evaluation of recommender exposure and click logs with PySpark (README.md)."""

from recsys_spark._version import __version__

__all__ = ["__version__"]
