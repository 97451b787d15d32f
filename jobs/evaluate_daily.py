"""spark-submit entry point for every command: the same arguments as ``recsys-spark``.

    spark-submit --py-files dist/recsys_spark.zip jobs/evaluate_daily.py \
        evaluate --date 2026-11-20 --input-root ... --output-root ...
    spark-submit --py-files dist/recsys_spark.zip jobs/evaluate_daily.py \
        experiment --experiment ranker_v2 --start 2026-11-14 --end 2026-11-20 --output-root ...

Without a command word it runs ``evaluate`` (the nightly job's arguments alone).  The session is the one
spark-submit created (its master and settings win).
"""

import sys

from recsys_spark.cli import COMMANDS, run


def arguments(argv: list[str]) -> list[str]:
    """``argv`` with ``evaluate`` in front unless a command (or --help, --version) is already there."""
    if argv and (argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version")):
        return argv
    return ["evaluate", *argv]


if __name__ == "__main__":
    sys.exit(run(arguments(sys.argv[1:])))
