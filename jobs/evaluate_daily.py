"""spark-submit entry point: same arguments as ``recsys-spark``.

    spark-submit --py-files dist/recsys_spark.zip jobs/evaluate_daily.py \
        evaluate --date 2026-11-20 --input-root ... --output-root ...

The session is the one spark-submit created (its master and settings win).
"""

import sys

from recsys_spark.cli import run

if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
