"""Errors the job reports as one line on stderr, each with its own exit code.

| code | meaning |
|------|---------|
| 0 | success |
| 1 | unexpected error (a bug, or Spark failed: run with --verbose) |
| 2 | bad command-line arguments (including a bad --date) |
| 3 | bad configuration (unknown key, value of the wrong type) |
| 4 | missing input (partition or path does not exist) |
| 5 | bad schema (missing column, or a type that cannot be cast) |
| 6 | unreadable input (corrupt or truncated Parquet) |
| 7 | empty input partition |
| 8 | a hard business rule was violated (outputs were written) |
| 9 | some dates of a backfill failed |
"""

from __future__ import annotations


class JobError(Exception):
    """An expected failure: reported as one line, exits with :attr:`exit_code`."""

    exit_code = 1


class UsageError(JobError):
    exit_code = 2


class ConfigError(JobError):
    exit_code = 3


class MissingInputError(JobError):
    exit_code = 4


class SchemaError(JobError):
    exit_code = 5


class UnreadableInputError(JobError):
    exit_code = 6


class EmptyInputError(JobError):
    exit_code = 7


class HardRuleViolation(JobError):
    exit_code = 8


BACKFILL_FAILED = 9
