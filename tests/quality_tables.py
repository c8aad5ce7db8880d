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


def _bronze_metadata(event_times: Sequence[datetime], batch_id: int = 0) -> dict[str, pa.Array]:
    return {
        "event_time": pa.array(event_times, TS),
        "event_date": pa.array([t.date() for t in event_times], pa.date32()),
        "_source_file": pa.array(["landing/part-0.json"] * len(event_times), pa.string()),
        "_ingested_at": pa.array([INGESTED_AT] * len(event_times), TS),
        "_batch_id": pa.array([batch_id] * len(event_times), pa.int64()),
    }


def clean_bronze(dataset: str) -> pa.Table:
    """A few valid bronze rows of `dataset`."""
    if dataset == "events":
        return open_close_events(1_709_251_200, 2)
    times = [at(0, minute) for minute in range(3)]
    if dataset == "sensors":
        columns: dict[str, pa.Array] = {
            "timestamp": pa.array(times, TS),
            "deviceId": pa.array(["dev-1", "dev-2", "dev-1"]),
            "deviceType": pa.array(["thermostat", "meter", "thermostat"]),
            "signalStrength": pa.array([0.5, 0.7, 0.9]),
        }
    elif dataset == "activity":
        nanos = [int(t.timestamp()) * 1_000_000_000 for t in times]
        columns = {
            "Arrival_Time": pa.array([n // 1_000_000 for n in nanos], pa.int64()),
            "Creation_Time": pa.array(nanos, pa.int64()),
            "Device": pa.array(["nexus4_1"] * 3),
            "User_ID": pa.array([0, 1, 2], pa.int64()),
            "Model": pa.array(["nexus4"] * 3),
            "User": pa.array(["a", "b", "a"]),
            "gt": pa.array(["walk", "sit", "stand"]),
            "x": pa.array([0.1, -0.2, 9.8]),
            "y": pa.array([0.0, 0.3, -1.5]),
            "z": pa.array([9.7, 0.2, 0.1]),
        }
    elif dataset == "lines":
        times = [at(0)] * 3
        columns = {"line": pa.array(["the cat", "the dog", "a bird"])}
    else:
        raise ValueError(f"no clean bronze rows for {dataset!r}")
    return pa.table({**columns, **_bronze_metadata(times)})


def clean_silver(table: str) -> pa.Table:
    """A few valid rows of silver table `table`."""
    minute = timedelta(minutes=1)
    if table == "events_action_hourly":
        return action_counts([hourly(0, "Open", 2), hourly(0, "Close", 1)])
    if table == "events_action_sliding":
        ten = timedelta(minutes=10)
        return action_counts(
            [(at(0, m), at(0, m) + ten, "Open", 1) for m in (0, 5)]
            + [(at(0, 5), at(0, 5) + ten, "Close", 1)]
        )
    windows = {
        "window_start": pa.array([at(0, 0), at(0, 1)], TS),
        "window_end": pa.array([at(0, 0) + minute, at(0, 1) + minute], TS),
    }
    if table == "sensors_device_counts":
        five = timedelta(seconds=5)
        return pa.table(
            {
                "window_start": pa.array([at(0, 0), at(0, 0) + five], TS),
                "window_end": pa.array([at(0, 0) + five, at(0, 0) + 2 * five], TS),
                "deviceId": pa.array(["dev-1", "dev-1"]),
                "count": pa.array([3, 1], pa.int64()),
            }
        )
    if table == "sensors_type_signal":
        return pa.table(
            {
                **windows,
                "deviceType": pa.array(["meter", "meter"]),
                "count": pa.array([2, 1], pa.int64()),
                "min_signal": pa.array([0.1, 0.5]),
                "max_signal": pa.array([0.9, 0.5]),
                "avg_signal": pa.array([0.5, 0.5]),
            }
        )
    if table == "sensors_lost_signal":
        return pa.table(
            {
                **windows,
                "deviceId": pa.array(["dev-1", "dev-2"]),
                "deviceType": pa.array(["meter", "meter"]),
                "count": pa.array([4, 1], pa.int64()),
            }
        )
    if table == "activity_user_minute":
        return pa.table(
            {
                **windows,
                "User": pa.array(["a", "a"]),
                "gt": pa.array(["walk", "walk"]),
                "count": pa.array([2, 1], pa.int64()),
                "mean_x": pa.array([0.1, 0.2]),
                "mean_y": pa.array([0.1, 0.2]),
                "mean_z": pa.array([9.8, 9.7]),
            }
        )
    if table == "lines_word_counts":
        return pa.table({"word": pa.array(["the", "cat"]), "count": pa.array([2, 1], pa.int64())})
    raise ValueError(f"no clean rows for silver table {table!r}")
