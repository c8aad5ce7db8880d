"""quality.frames: derived columns and frames, checked against plain-Python computations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from quality.frames import (
    bronze_frame,
    cumulative_actions_frame,
    quarantine_share_frame,
    silver_frame,
)
from tests.quality_tables import TS, action_counts, at, bronze_events, hourly


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


def test_silver_frame_leaves_unwindowed_tables_alone() -> None:
    words = pa.table({"word": ["a", "b"], "count": pa.array([2, 1], pa.int64())})
    assert list(silver_frame(words, None, None).columns) == ["word", "count"]


def test_quarantine_share() -> None:
    frame = quarantine_share_frame(bronze_rows=90, quarantined_rows=10)
    assert frame.to_dict("records") == [
        {"bronze_rows": 90, "quarantined_rows": 10, "quarantine_share": 10 / 100}
    ]
    assert quarantine_share_frame(0, 0)["quarantine_share"].tolist() == [0.0]


def _cumulative_by_hand(
    rows: list[tuple[datetime, datetime, str, int]], window: int
) -> list[tuple[datetime, int, int]]:
    """Cumulative Opens/Closes per window whose start is a multiple of `window` seconds."""
    starts = sorted({r[0] for r in rows if r[0].timestamp() % window == 0})
    out, opens, closes = [], 0, 0
    for start in starts:
        opens += sum(r[3] for r in rows if r[0] == start and r[2] == "Open")
        closes += sum(r[3] for r in rows if r[0] == start and r[2] == "Close")
        out.append((start, opens, closes))
    return out


def test_cumulative_actions_over_tumbling_windows() -> None:
    rows = [
        hourly(0, "Open", 5),
        hourly(0, "Close", 2),
        hourly(1, "Close", 4),
        hourly(2, "Open", 1),
    ]
    frame = cumulative_actions_frame(action_counts(rows), 3600)
    got = list(
        zip(
            frame["window_start"],
            frame["cumulative_opens"],
            frame["cumulative_closes"],
            strict=True,
        )
    )
    assert [(s.to_pydatetime(), o, c) for s, o, c in got] == _cumulative_by_hand(rows, 3600)
    assert frame["window_end"].tolist() == [s + timedelta(hours=1) for s, _, _ in got]


def test_cumulative_actions_over_sliding_windows_use_a_tiling_and_start_at_since() -> None:
    ten = timedelta(minutes=10)
    rows = []
    for k in range(6):  # windows every 5 minutes from 00:00
        start = at(0, 5 * k)
        rows.append((start, start + ten, "Open", k + 1))
        rows.append((start, start + ten, "Close", k))
    since = at(0, 20)
    frame = cumulative_actions_frame(action_counts(rows), 600, since=since)
    expected = [r for r in _cumulative_by_hand(rows, 600) if r[0] >= since]
    got = [
        (s.to_pydatetime(), o, c)
        for s, o, c in zip(
            frame["window_start"],
            frame["cumulative_opens"],
            frame["cumulative_closes"],
            strict=True,
        )
    ]
    assert got == expected
    assert [r[0] for r in got] == [at(0, 20)]


def test_cumulative_actions_of_an_empty_table() -> None:
    empty = pa.table(
        {
            "window_start": pa.array([], TS),
            "window_end": pa.array([], TS),
            "action": pa.array([], pa.string()),
            "count": pa.array([], pa.int64()),
        }
    )
    frame = cumulative_actions_frame(empty, 3600)
    assert frame.empty
    assert "cumulative_opens" in frame.columns
