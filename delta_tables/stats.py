"""Delta file statistics (`numRecords`, `minValues`, `maxValues`, `nullCount`) from Parquet footers.

Both writers use this: the Python sink's tasks after closing a file, and the fast path after
Spark's own Parquet writer has written a batch. Readers use the statistics to skip files.

Bounds are kept valid for data skipping: timestamps are widened to whole milliseconds (the
precision Delta readers assume), strings longer than 32 characters, binary, boolean and decimal
columns get only a null count, as do leaves inside arrays and maps.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql.types import (
    ByteType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

DEFAULT_NUM_INDEXED_COLS = 32
MAX_STRING_STAT_LENGTH = 32
_INTEGRAL = (LongType, IntegerType, ShortType, ByteType)


def _leaves(
    struct: StructType, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], DataType]]:
    """Leaf columns in schema order (structs are walked; arrays and maps are leaves)."""
    for field in struct.fields:
        path = (*prefix, field.name)
        if isinstance(field.dataType, StructType):
            yield from _leaves(field.dataType, path)
        else:
            yield path, field.dataType


def _format_timestamp(value: datetime, *, upper: bool, utc: bool) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    truncated = value.replace(microsecond=value.microsecond - value.microsecond % 1000)
    if upper and truncated != value:
        truncated += timedelta(milliseconds=1)
    text = truncated.strftime("%Y-%m-%dT%H:%M:%S.") + f"{truncated.microsecond // 1000:03d}"
    return text + ("Z" if utc else "")


def stat_value(value: Any, dtype: DataType, *, upper: bool) -> Any:
    """The JSON value of a min (upper=False) or max (upper=True) statistic; None to omit it."""
    if value is None:
        return None
    if isinstance(dtype, _INTEGRAL):
        return int(value)
    if isinstance(dtype, FloatType | DoubleType):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(dtype, StringType):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        return text if len(text) <= MAX_STRING_STAT_LENGTH else None
    if isinstance(dtype, DateType):
        return value.isoformat() if isinstance(value, date) else None
    if isinstance(dtype, TimestampType | TimestampNTZType):
        if not isinstance(value, datetime):
            return None
        return _format_timestamp(value, upper=upper, utc=isinstance(dtype, TimestampType))
    return None


def _set_nested(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value


def stats_from_metadata(
    metadata: pq.FileMetaData,
    struct: StructType,
    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
) -> str:
    """The Delta `stats` JSON of a Parquet file whose columns are `struct` (data columns only)."""
    leaves = list(_leaves(struct))
    if num_indexed_cols >= 0:
        leaves = leaves[:num_indexed_cols]
    wanted = {".".join(path): (path, dtype) for path, dtype in leaves}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    if metadata.num_row_groups and metadata.num_rows:
        first = metadata.row_group(0)
        for index in range(first.num_columns):
            dotted = first.column(index).path_in_schema
            if dotted not in wanted:
                continue
            path, dtype = wanted[dotted]
            _column_stats(metadata, index, path, dtype, mins, maxs, nulls)
    stats: dict[str, Any] = {"numRecords": metadata.num_rows}
    if metadata.num_rows:
        stats["minValues"] = mins
        stats["maxValues"] = maxs
        stats["nullCount"] = nulls
    return json.dumps(stats, separators=(",", ":"))


def _column_stats(
    metadata: pq.FileMetaData,
    index: int,
    path: tuple[str, ...],
    dtype: DataType,
    mins: dict[str, Any],
    maxs: dict[str, Any],
    nulls: dict[str, Any],
) -> None:
    low: Any = None
    high: Any = None
    null_count = 0
    null_count_known = True
    bounds_known = True
    for rg_index in range(metadata.num_row_groups):
        row_group = metadata.row_group(rg_index)
        if row_group.num_rows == 0:
            continue
        stats = row_group.column(index).statistics
        if stats is None:
            return
        if stats.has_null_count:
            null_count += stats.null_count
        else:
            null_count_known = False
        if stats.has_min_max:
            try:
                low = stats.min if low is None or stats.min < low else low
                high = stats.max if high is None or stats.max > high else high
            except TypeError:
                bounds_known = False
        elif not (stats.has_null_count and stats.null_count == row_group.num_rows):
            bounds_known = False
    if null_count_known:
        _set_nested(nulls, path, null_count)
    if bounds_known and low is not None and high is not None:
        low_value = stat_value(low, dtype, upper=False)
        high_value = stat_value(high, dtype, upper=True)
        if low_value is not None and high_value is not None:
            _set_nested(mins, path, low_value)
            _set_nested(maxs, path, high_value)


def num_indexed_cols(configuration: dict[str, str]) -> int:
    raw = configuration.get("delta.dataSkippingNumIndexedCols")
    try:
        return int(raw) if raw is not None else DEFAULT_NUM_INDEXED_COLS
    except ValueError:
        return DEFAULT_NUM_INDEXED_COLS
