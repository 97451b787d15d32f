"""Errors the job reports as one line on stderr, each with its own exit code.

Each class below carries its code; what the codes mean to an operator is the table in
docs/operations.md ("Exit codes"), the only copy.

Spark reports a failure as the first line of a Java exception ("An error
occurred while calling o891.parquet."), which says nothing;
:func:`root_cause` walks the Python and Java exception chains down to the
innermost message ("Mkdirs failed", "is not a Parquet file", a checksum
error) and the file's path, for the one line the job prints.
"""

from __future__ import annotations

import re


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


class OutputError(JobError):
    exit_code = 10


class ConcurrentRunError(JobError):
    exit_code = 11


class GateFailed(JobError):
    """``recsys-spark gate``: a check failed (the verdict is written; the command prints its summary)."""

    exit_code = 12


class GateInconclusive(JobError):
    """``recsys-spark gate``: no check failed but one is inconclusive, its interval straddling the threshold: not
    enough evidence yet (the verdict is written; not a failure, not an error)."""

    exit_code = 13


BACKFILL_FAILED = 9
#: ``recsys-spark ope`` over logs without any propensity: the tables and the summary (status
#: ``no_propensities``) are written, but there is no off-policy estimate (not a success; a rerun gives the same)
OPE_NO_PROPENSITIES = 14

_PATH = re.compile(r"((?:file|hdfs|s3a?|gs|abfss?|wasbs?):/[^\s,;'\"\]\)]+|/[^\s,;'\"\]\)]*\.(?:parquet|crc|json))")
#: words that mark an exception as "the input cannot be read" (corrupt, truncated, not Parquet)
_UNREADABLE = (
    "not a parquet file",
    "parquetdecodingexception",
    "org.apache.parquet.io",
    "checksum",
    "eofexception",
    "could not read footer",
    "cannot_read_file_footer",
    "failed_read_file",
    "corrupt",
    "filenotfoundexception",
    "decompress",
    "truncated",
)
#: ... unless the chain says it is a computation that failed (a bug or bad values, not bad files)
_COMPUTATION = (
    "arithmeticexception",
    "arithmetic_overflow",
    "cast_overflow",
    "nullpointerexception",
    "pythonexception",
    "outofmemoryerror",
    "cast_invalid_input",
)


def exception_chain(exc: BaseException) -> list[str]:
    """Messages of ``exc`` and its causes, outermost first: Python ``__cause__``/``__context__`` and,
    for a Py4J or captured Spark exception, the Java ``getCause()`` chain."""
    messages: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        java = getattr(current, "java_exception", None) or getattr(current, "_origin", None)
        text = str(current).strip()
        if text:
            messages.append(text)
        if java is not None:
            messages.extend(_java_chain(java))
        current = current.__cause__ or current.__context__
    return messages


def _java_chain(java: object) -> list[str]:
    out: list[str] = []
    try:
        depth = 0
        while java is not None and depth < 20:
            out.append(str(java.toString()).strip())  # type: ignore[attr-defined]
            java = java.getCause()  # type: ignore[attr-defined]
            depth += 1
    except Exception:  # noqa: BLE001 - a dead gateway must not hide the original error
        pass
    return out


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("at ") and not line.startswith("JVM stacktrace"):
            return line
    return text.strip()[:300]


def root_cause(exc: BaseException, limit: int = 400) -> str:
    """One line: the innermost message of the exception chain, plus the first file path the chain
    names when that message has none.

    >>> inner = OSError("Mkdirs failed to create file:/ro/out/_staging")
    >>> try:
    ...     try:
    ...         raise inner
    ...     except OSError as e:
    ...         raise RuntimeError("An error occurred while calling o891.parquet.") from e
    ... except RuntimeError as outer:
    ...     root_cause(outer)
    'Mkdirs failed to create file:/ro/out/_staging'
    """
    chain = [m for m in exception_chain(exc) if m]
    if not chain:
        return type(exc).__name__
    deepest = _first_line(chain[-1])
    if deepest.startswith("An error occurred while calling") and len(chain) > 1:
        deepest = _first_line(chain[-2])
    if not _PATH.search(deepest):
        for message in chain:
            found = _PATH.search(message)
            if found:
                deepest = f"{deepest} (file {found.group(1)})"
                break
    return deepest[:limit]


def is_unreadable_input(exc: BaseException) -> bool:
    """Whether an exception from reading input rows says the files cannot be read (corrupt, truncated,
    not Parquet, checksum), as opposed to a bug or a resource failure that must not be relabelled."""
    text = " ".join(exception_chain(exc)).lower()
    return any(word in text for word in _UNREADABLE) and not any(word in text for word in _COMPUTATION)
