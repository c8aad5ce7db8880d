"""Errors raised by the Delta engine; every message names the table, column or option at fault.

They derive from `jobs.errors.RunoffError`, so the `runoff` CLI prints them as one line. Raised
inside Spark's Python workers they reach the driver wrapped in a Spark exception whose text
still contains the message.
"""

from __future__ import annotations

from jobs.errors import ConfigError, RunoffError


class DeltaEngineError(RunoffError):
    """Base class of the Delta engine's errors."""


class DeltaTableNotFoundError(DeltaEngineError):
    """The path holds no Delta table (no `_delta_log`)."""


class DeltaOptionError(DeltaEngineError, ConfigError):
    """A reader/writer option has a bad value: the message names the option and the value."""


class DeltaSchemaMismatchError(DeltaEngineError):
    """Data written does not match the table schema: the message names the column."""


class DeltaReplaceWhereError(DeltaEngineError):
    """Rows written with `replaceWhere` fall outside the predicate, or it cannot be evaluated."""


class DeltaChangeCommitError(DeltaEngineError):
    """A streaming read met a commit that removes or rewrites data (no `skipChangeCommits`)."""


class DeltaUnsupportedError(DeltaEngineError):
    """A Delta feature, mode or operation this engine does not implement."""
