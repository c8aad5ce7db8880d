"""jobs/silver.py without Spark: the MERGE condition, exactly-once MERGEs, progress lines."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from delta_tables.arrow import read_arrow
from jobs.datasets import get_dataset
from jobs.errors import RunoffError
from jobs.silver import (
    BatchWriter,
    MergeOutcome,
    SilverOptions,
    TableRun,
    batch_window_range,
    ensure_table,
    late_rows_of,
    merge_batch,
    merge_predicate,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
EVENTS_SCHEMA = pa.schema(
    [
        pa.field("window_start", pa.timestamp("us", tz="UTC")),
        pa.field("window_end", pa.timestamp("us", tz="UTC")),
        pa.field("action", pa.string()),
        pa.field("count", pa.int64(), nullable=False),
    ]
)
HOURLY = get_dataset("events").aggregate("events_action_hourly")
LOST = get_dataset("sensors").aggregate("sensors_lost_signal")


def hourly(rows: list[tuple[int, str, int]]) -> pa.Table:
    """(hour, action, count) -> silver rows."""
    return pa.Table.from_pylist(
        [
            {
                "window_start": T0 + h * HOUR,
                "window_end": T0 + (h + 1) * HOUR,
                "action": action,
                "count": count,
            }
            for h, action, count in rows
        ],
        schema=EVENTS_SCHEMA,
    )


def table_rows(path: Path) -> list[tuple[Any, ...]]:
    rows = read_arrow(str(path)).to_pylist()
    return sorted((r["window_start"], r["action"], r["count"]) for r in rows)


# -- the MERGE condition ----------------------------------------------------------------------
def test_merge_predicate_quotes_keys_and_bounds_the_target_window() -> None:
    low, high = T0, T0 + 2 * HOUR
    assert merge_predicate(("window_start", "window_end", "deviceId"), (low, high)) == (
        't."window_start" = s."window_start" AND t."window_end" = s."window_end" AND '
        't."deviceId" = s."deviceId" AND '
        "t.\"window_start\" >= '2024-01-01T00:00:00+00:00' AND "
        "t.\"window_start\" <= '2024-01-01T02:00:00+00:00'"
    )


def test_merge_predicate_without_window_matches_on_keys_only() -> None:
    assert merge_predicate(("word",)) == 't."word" = s."word"'


def test_merge_predicate_needs_a_key() -> None:
    with pytest.raises(ValueError, match="a MERGE needs at least one key column"):
        merge_predicate(())


def test_batch_window_range_is_min_and_max_window_start() -> None:
    data = hourly([(3, "Open", 1), (1, "Close", 2), (2, "Open", 5)])
    assert batch_window_range(data) == (T0 + HOUR, T0 + 3 * HOUR)
    assert batch_window_range(data.slice(0, 0)) is None
    assert batch_window_range(pa.table({"word": ["a"], "count": [1]})) is None


# -- the exactly-once MERGE -------------------------------------------------------------------
def test_merge_updates_windows_inserts_new_ones_and_skips_a_replayed_batch(tmp_path: Path) -> None:
    path = tmp_path / "events_action_hourly"
    ensure_table(path, EVENTS_SCHEMA)

    first = merge_batch(path, hourly([(0, "Open", 2), (0, "Close", 1)]), HOURLY, "app", 0)
    second = merge_batch(path, hourly([(0, "Open", 3), (1, "Open", 1)]), HOURLY, "app", 1)

    assert (first.committed, first.inserted, first.updated) == (True, 2, 0)
    assert (second.committed, second.inserted, second.updated) == (True, 1, 1)
    expected = [(T0, "Close", 1), (T0, "Open", 3), (T0 + HOUR, "Open", 1)]
    assert table_rows(path) == expected
    version = DeltaTable(str(path)).version()
    assert DeltaTable(str(path)).transaction_version("app") == 1

    # batch 1 again (a restart replays it): nothing changes, not even the version
    replay = merge_batch(path, hourly([(0, "Open", 99)]), HOURLY, "app", 1)

    assert not replay.committed
    assert DeltaTable(str(path)).version() == version
    assert table_rows(path) == expected


def test_merge_refuses_a_table_with_other_columns(tmp_path: Path) -> None:
    path = tmp_path / "events_action_hourly"
    ensure_table(path, EVENTS_SCHEMA)
    data = hourly([(0, "Open", 1)]).append_column("window_date", pa.array([T0.date()]))

    with pytest.raises(
        RunoffError,
        match=r"silver table .*events_action_hourly has columns \[window_start, window_end, "
        r"action, count\] but events_action_hourly now produces \[window_start, window_end, "
        r"action, count, window_date\]: rebuild it with `runoff reset events --layer silver --yes`",
    ):
        merge_batch(path, data, HOURLY, "app", 0)


def test_merge_of_an_empty_batch_commits_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events_action_hourly"
    ensure_table(path, EVENTS_SCHEMA)

    outcome = merge_batch(path, hourly([]), HOURLY, "app", 0)

    assert outcome == MergeOutcome(0, 0, 0, outcome.seconds, False, 0)
    assert DeltaTable(str(path)).version() == 0


def test_append_mode_inserts_a_window_once(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            pa.field("window_start", pa.timestamp("us", tz="UTC")),
            pa.field("window_end", pa.timestamp("us", tz="UTC")),
            pa.field("deviceId", pa.string()),
            pa.field("deviceType", pa.string()),
            pa.field("count", pa.int64(), nullable=False),
        ]
    )
    path = tmp_path / "sensors_lost_signal"
    ensure_table(path, schema)
    minute = timedelta(minutes=1)
    row = {"window_start": T0, "window_end": T0 + minute, "deviceId": "cam-1", "deviceType": "cam"}
    alert = pa.Table.from_pylist([{**row, "count": 2}], schema=schema)

    merge_batch(path, alert, LOST, "app", 0)
    # the same window again under a new batch id must neither duplicate nor change it
    again = merge_batch(
        path, pa.Table.from_pylist([{**row, "count": 4}], schema=schema), LOST, "app", 1
    )

    rows = read_arrow(str(path)).to_pylist()
    assert [(r["deviceId"], r["count"]) for r in rows] == [("cam-1", 2)]
    assert (again.inserted, again.updated) == (0, 0)


def test_merge_prunes_files_of_older_windows(tmp_path: Path) -> None:
    """The window_start range lets delta-rs skip every file written by earlier batches."""
    path = tmp_path / "events_action_hourly"
    ensure_table(path, EVENTS_SCHEMA)
    for batch in range(5):
        merge_batch(path, hourly([(batch, "Open", 1)]), HOURLY, "app", batch)
    dt = DeltaTable(str(path))
    files_before = len(dt.file_uris())

    predicate = merge_predicate(HOURLY.keys, (T0 + 5 * HOUR, T0 + 5 * HOUR))
    metrics = (
        dt.merge(hourly([(5, "Open", 1)]), predicate, source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )

    assert metrics["num_target_files_scanned"] == 0
    assert metrics["num_target_files_skipped_during_scan"] == files_before


# -- progress ---------------------------------------------------------------------------------
def progress(batch_id: int, rows: int, dropped: list[int], millis: int = 1500) -> dict[str, Any]:
    return {
        "batchId": batch_id,
        "numInputRows": rows,
        "durationMs": {"triggerExecution": millis},
        "eventTime": {"watermark": "2024-01-01T02:00:00.000Z"},
        "stateOperators": [{"numRowsDroppedByWatermark": n} for n in dropped],
    }


def test_late_rows_of_sums_the_state_operators() -> None:
    assert late_rows_of(progress(0, 10, [2, 3])) == 5
    assert late_rows_of({"batchId": 0}) == 0


def test_table_run_reports_each_batch_once(tmp_path: Path) -> None:
    writer = BatchWriter(HOURLY, tmp_path / "t", tmp_path / "ckpt")
    writer.outcomes[0] = MergeOutcome(4, 3, 1, 0.25, True, 1)
    writer.outcomes[1] = MergeOutcome(4, 0, 0, 0.01, False, 1)
    run = TableRun(HOURLY, tmp_path / "t", tmp_path / "ckpt", writer)

    lines = [run.observe(progress(0, 120, [0])), run.observe(progress(0, 120, [0]))]
    lines += [run.observe(progress(1, 30, [2])), run.observe(progress(2, 0, []))]

    assert lines == [
        "silver events_action_hourly batch 0: 120 rows in, 4 rows merged (3 new, 1 updated) "
        "in 0.25 s, 1.5 s",
        None,
        "silver events_action_hourly batch 1: 30 rows in, 2 late, 4 rows already committed "
        "before a restart, skipped, 1.5 s",
        "silver events_action_hourly batch 2: 0 rows in, no window changed, 1.5 s",
    ]
    assert (run.batches, run.input_rows, run.late_rows) == (3, 150, 2)
    assert run.merged_rows == 4
    assert run.merge_seconds == [0.25]
    assert run.watermark == "2024-01-01T02:00:00.000Z"


def test_options_come_from_the_command_line() -> None:
    args = argparse.Namespace(dataset="events", watermark="2 hours", max_files_per_trigger=1)
    assert SilverOptions.from_args(args) == SilverOptions("2 hours", 1)


def test_merge_checkpoints_the_table_every_interval_commits(tmp_path: Path) -> None:
    path = tmp_path / "events_action_hourly"
    ensure_table(path, EVENTS_SCHEMA)
    outcomes = [
        merge_batch(path, hourly([(b, "Open", 1)]), HOURLY, "app", b, checkpoint_interval=3)
        for b in range(7)
    ]

    assert [o.version for o in outcomes] == [1, 2, 3, 4, 5, 6, 7]
    checkpoints = sorted(p.name for p in (path / "_delta_log").glob("*.checkpoint.parquet"))
    assert checkpoints == [f"{v:020d}.checkpoint.parquet" for v in (3, 6)]
