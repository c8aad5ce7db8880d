"""Frame builders for `runoff validate`'s one-row suites (row-level columns are derived on Spark
by `quality.gate.with_derived`).

No I/O here, but for `column_max` (a Delta table's file statistics, the column only when they
are missing). pandas is imported when a frame is built: `runoff status` uses `column_max` and
stays quick.
- `quarantine_share_frame`: one row per run: bronze rows, quarantined rows, quarantined share;
- `freshness_frame`: one row: a table's newest event time and its age when validated.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd
    from deltalake import DeltaTable


def quarantine_share_frame(bronze_rows: int, quarantined_rows: int) -> pd.DataFrame:
    """One row: the run's bronze rows, quarantined rows and the quarantined share of both."""
    import pandas as pd

    total = bronze_rows + quarantined_rows
    share = quarantined_rows / total if total else 0.0
    return pd.DataFrame(
        {
            "bronze_rows": [bronze_rows],
            "quarantined_rows": [quarantined_rows],
            "quarantine_share": [share],
        }
    )


def freshness_frame(newest: datetime | None, now: datetime) -> pd.DataFrame:
    """One row: the newest event time (ISO-8601 UTC), the validation time and the age in seconds
    (NaN when the table has no event time yet: the freshness expectation then fails)."""
    import pandas as pd

    age = (now - newest).total_seconds() if newest is not None else float("nan")
    return pd.DataFrame(
        {
            "newest_event_time": [newest.astimezone(UTC).isoformat() if newest else None],
            "validated_at": [now.astimezone(UTC).isoformat()],
            "newest_event_age_seconds": [age],
        }
    )


def max_from_stats(actions: pa.Table, column: str) -> tuple[bool, Any]:
    """`(known, max of column)` from a snapshot's add actions (`get_add_actions(flatten=True)`).

    Known when every file has a `max.<column>` statistic, or is all nulls in it (no max); the max
    is None when no file has a value. Delta truncates timestamp statistics to milliseconds.
    """
    if actions.num_rows == 0:
        return True, None
    if f"max.{column}" not in actions.column_names:
        return False, None
    maxes = actions.column(f"max.{column}").to_pylist()
    nulls = (
        actions.column(f"null_count.{column}").to_pylist()
        if f"null_count.{column}" in actions.column_names
        else [None] * actions.num_rows
    )
    records = actions.column("num_records").to_pylist()
    values = []
    for value, null_count, count in zip(maxes, nulls, records, strict=True):
        if value is not None:
            values.append(value)
        elif null_count is None or count is None or null_count != count:
            return False, None
    return True, max(values) if values else None


def column_max(table: DeltaTable, column: str) -> Any:
    """The max of `column` in the snapshot: from the file statistics when every file has them
    (deletion vectors and column mapping aside), else one `MAX()` over the column."""
    from deltalake import QueryBuilder

    from delta_tables.arrow import quote_name
    from quality.increments import needs_datafusion

    if needs_datafusion(table) is None:
        known, value = max_from_stats(pa.table(table.get_add_actions(flatten=True)), column)
        if known:
            return value
    reader = (
        QueryBuilder().register("t", table).execute(f"SELECT MAX({quote_name(column)}) AS m FROM t")
    )
    return reader.read_all().column("m")[0].as_py()


def utc(value: Any) -> datetime | None:
    """A timestamp as an aware UTC datetime (naive ones are taken as UTC); None stays None."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise TypeError(f"not a timestamp: {value!r}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
