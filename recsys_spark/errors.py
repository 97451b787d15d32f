"""Errors the job reports as one line on stderr, each with its own exit code.

Each class below carries its code; what the codes mean to an operator is the table in
docs/operations.md ("Exit codes"), the only copy.
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
