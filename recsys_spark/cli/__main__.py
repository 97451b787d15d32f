"""``python -m recsys_spark.cli ...``: the same as the ``recsys-spark`` command."""

from recsys_spark.cli import main

main()
