"""spark-submit entry point: same arguments as ``recsys-spark``; the ``evaluate`` word may be left out.

    spark-submit --py-files dist/recsys_spark.zip jobs/evaluate_daily.py \
        --date 2026-11-20 --input-root ... --output-root ...

The session is the one spark-submit created (its master and settings win).
"""

import sys

from recsys_spark.cli import run

COMMANDS = ("evaluate",)


def arguments(argv: list[str]) -> list[str]:
    """``argv`` with ``evaluate`` in front unless a command (or --help) is already there."""
    if argv and (argv[0] in COMMANDS or argv[0] in ("-h", "--help")):
        return argv
    return ["evaluate", *argv]


if __name__ == "__main__":
    sys.exit(run(arguments(sys.argv[1:])))
