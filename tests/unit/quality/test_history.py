"""quality.history: the results table and where the next increment starts."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from quality.history import ResultRow, append_results, last_validated, read_results
from quality.increments import Watermark

T0 = datetime(2024, 3, 1, tzinfo=UTC)


def _row(
    table: str, to_version: int, passed: bool, minutes: int, table_id: str = "id-1"
) -> ResultRow:
    return ResultRow(
        run_id=f"run-{minutes}",
        dataset="events",
        table=table,
        table_id=table_id,
        layer="bronze",
        suite=table,
        expectation="column_values_to_not_be_null(action)",
        severity="critical",
        success=passed,
        observed="0 of 4 unexpected",
        from_version=None,
        to_version=to_version,
        full=True,
        rows=4,
        table_passed=passed,
        validated_at=T0 + timedelta(minutes=minutes),
    )


def test_missing_history_has_no_watermarks(tmp_path: Path) -> None:
    assert last_validated(tmp_path / "results", "events") == {}
    assert read_results(tmp_path / "results") == []


def test_watermark_is_the_last_passing_validation(tmp_path: Path) -> None:
    path = tmp_path / "results"
    rows = [
        _row("bronze_events", 3, True, 1),
        _row("bronze_events", 5, False, 2),  # failed: the next run starts again after 3
        _row("events_action_hourly", 2, True, 1),
        _row("events_action_hourly", 4, True, 3),
        replace(_row("bronze_sensors", 9, True, 1), dataset="sensors"),
    ]
    append_results(path, rows[:2])
    append_results(path, rows[2:])

    assert last_validated(path, "events") == {
        "bronze_events": Watermark(3, "id-1"),
        "events_action_hourly": Watermark(4, "id-1"),
    }
    assert [r["to_version"] for r in read_results(path, table="bronze_events")] == [3, 5]
    assert len(read_results(path, dataset="events")) == 4


def test_a_recreated_table_takes_the_latest_id(tmp_path: Path) -> None:
    path = tmp_path / "results"
    append_results(
        path, [_row("bronze_events", 8, True, 1, "old"), _row("bronze_events", 0, True, 2, "new")]
    )
    assert last_validated(path, "events") == {"bronze_events": Watermark(0, "new")}


def test_nothing_to_append_writes_nothing(tmp_path: Path) -> None:
    append_results(tmp_path / "results", [])
    assert not (tmp_path / "results").exists()
