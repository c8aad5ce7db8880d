"""quality.frames: derived columns and frames, checked against plain-Python computations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from quality.frames import bronze_frame, quarantine_share_frame, silver_frame
from tests.quality_tables import action_counts, at, bronze_events, hourly


def test_bronze_frame_adds_the_utc_date_of_event_time() -> None:
    times = [1_709_251_199, 1_709_251_200, 1_709_337_599]  # 23:59:59, midnight, 23:59:59 UTC
    frame = bronze_frame(bronze_events(times, ["Open", "Close", "Open"]))
    expected = [datetime.fromtimestamp(t, UTC).date() for t in times]
    assert list(frame["event_time_date"]) == expected
    assert list(frame["event_date"]) == expected


def test_silver_frame_measures_windows_and_their_alignment() -> None:
    start = datetime(2024, 3, 1, 10, 5, tzinfo=UTC)
    rows = [
        (start, start + timedelta(minutes=10), "Open", 1),
        (start + timedelta(seconds=7), start + timedelta(minutes=10), "Open", 1),
        (None, start, "Close", 1),
    ]
    frame = silver_frame(action_counts(rows), window_seconds=600, slide_seconds=300)

    def seconds(row: tuple[datetime | None, datetime, str, int]) -> float | None:
        return None if row[0] is None else (row[1] - row[0]).total_seconds()

    def offset(row: tuple[datetime | None, datetime, str, int]) -> float | None:
        return None if row[0] is None else row[0].timestamp() % 300

    got_seconds = [None if v != v else v for v in frame["window_seconds"]]
    got_offsets = [None if v != v else v for v in frame["window_start_offset_seconds"]]
    assert got_seconds == [seconds(r) for r in rows]
    assert got_offsets == [offset(r) for r in rows]


def test_silver_frame_offsets_of_tumbling_windows_follow_the_window_size() -> None:
    rows = [hourly(0, "Open", 1), (at(0, 30), at(1, 30), "Close", 1), hourly(5, "Open", 2)]
    frame = silver_frame(action_counts(rows), window_seconds=3600, slide_seconds=None)
    assert list(frame["window_seconds"]) == [3600.0, 3600.0, 3600.0]
    assert list(frame["window_start_offset_seconds"]) == [0.0, 1800.0, 0.0]


def test_silver_frame_leaves_unwindowed_tables_alone() -> None:
    words = pa.table({"word": ["a", "b"], "count": pa.array([2, 1], pa.int64())})
    assert list(silver_frame(words, None, None).columns) == ["word", "count"]


def test_quarantine_share() -> None:
    frame = quarantine_share_frame(bronze_rows=90, quarantined_rows=10)
    assert frame.to_dict("records") == [
        {"bronze_rows": 90, "quarantined_rows": 10, "quarantine_share": 10 / 100}
    ]
    assert quarantine_share_frame(0, 0)["quarantine_share"].tolist() == [0.0]
