"""The daily wing: one day of exposure and click logs evaluated and written (``recsys-spark evaluate``).

``run`` is the orchestrator (:func:`evaluate_day`); ``day`` holds the types every stage passes along,
``inputs`` reads the day and the other days it needs, ``stages`` computes, ``summary`` writes the one
file a scheduler reads.  docs/design.md draws the house.
"""

from recsys_spark.daily.run import evaluate_day

__all__ = ["evaluate_day"]
