"""Builders of small Delta tables shaped like runoff's bronze, quarantine and silver tables.

The quality tests write them directly with delta-rs (`write_deltalake`), one call per simulated
run, so that each call adds one table version.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

TS = pa.timestamp("us", tz="UTC")
INGESTED_AT = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def at(hour: int, minute: int = 0, day: int = 1) -> datetime:
    """A UTC time on 2024-03-<day>."""
    return datetime(2024, 3, day, hour, minute, tzinfo=UTC)


def bronze_events(
    times: Sequence[int],
    actions: Sequence[str | None],
    batch_id: int = 0,
    source: str = "landing/events/part-0.json",
) -> pa.Table:
    """Bronze rows of `events`: the record columns plus runoff's metadata columns."""
    event_times = [datetime.fromtimestamp(t, UTC) for t in times]
    return pa.table(
        {
            "time": pa.array(times, pa.int64()),
            "action": pa.array(actions, pa.string()),
            "event_time": pa.array(event_times, TS),
            "event_date": pa.array([t.date() for t in event_times], pa.date32()),
            "_source_file": pa.array([source] * len(times), pa.string()),
            "_ingested_at": pa.array([INGESTED_AT] * len(times), TS),
            "_batch_id": pa.array([batch_id] * len(times), pa.int64()),
        }
    )


def open_close_events(start: int, pairs: int, batch_id: int = 0) -> pa.Table:
    """`pairs` Open/Close pairs one second apart, starting at epoch second `start`."""
    times = [start + i for i in range(2 * pairs)]
    actions = ["Open" if i % 2 == 0 else "Close" for i in range(2 * pairs)]
    return bronze_events(times, actions, batch_id)


def quarantine_rows(count: int, batch_id: int = 0, day: date = date(2024, 3, 1)) -> pa.Table:
    """Quarantined malformed lines."""
    return pa.table(
        {
            "_raw": pa.array([f"{{not json {i}" for i in range(count)], pa.string()),
            "_error": pa.array(["malformed JSON"] * count, pa.string()),
            "_source_file": pa.array(["landing/events/part-0.json"] * count, pa.string()),
            "_line_number": pa.array(range(1, count + 1), pa.int64()),
            "_ingested_at": pa.array([INGESTED_AT] * count, TS),
            "_batch_id": pa.array([batch_id] * count, pa.int64()),
            "ingest_date": pa.array([day] * count, pa.date32()),
        }
    )


def action_counts(rows: Sequence[tuple[datetime, datetime, str | None, int | None]]) -> pa.Table:
    """Rows of `events_action_hourly` / `events_action_sliding`."""
    return pa.table(
        {
            "window_start": pa.array([r[0] for r in rows], TS),
            "window_end": pa.array([r[1] for r in rows], TS),
            "action": pa.array([r[2] for r in rows], pa.string()),
            "count": pa.array([r[3] for r in rows], pa.int64()),
        }
    )


def hourly(hour: int, action: str, count: int | None) -> tuple[datetime, datetime, str, int | None]:
    return (at(hour), at(hour) + HOUR, action, count)


def append(path: Path, data: pa.Table, partition_by: Sequence[str] | None = None) -> int:
    """Append `data` as one new version; returns that version."""
    from deltalake import DeltaTable

    path.parent.mkdir(parents=True, exist_ok=True)
    write_deltalake(
        str(path), data, mode="append", partition_by=list(partition_by) if partition_by else None
    )
    return DeltaTable(str(path)).version()


def append_bronze(path: Path, data: pa.Table) -> int:
    return append(path, data, partition_by=["event_date"])
