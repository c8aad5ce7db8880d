"""Spark SQL text built from Python values: identifiers, literals, UTC timestamps.

Pure strings (no pyspark import): used where a predicate must be SQL text, such as a MERGE
condition or a `replaceWhere`, and by row rules built from declared expectations.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from core.errors import ConfigError


def quote(column: str) -> str:
    """A Spark SQL identifier."""
    return "`" + column.replace("`", "``") + "`"


def sql_literal(value: Any) -> str:
    """A YAML scalar as a Spark SQL literal (strings quoted and escaped)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise ConfigError(f"{value!r} cannot be used in a row rule")


def sql_timestamp(moment: datetime) -> str:
    """A Spark SQL timestamp literal of the instant, whatever the session's time zone (a naive
    `moment` is UTC, as Spark's collected timestamps are in runoff's UTC sessions)."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return f"TIMESTAMP '{utc:%Y-%m-%d %H:%M:%S.%f}+00:00'"
