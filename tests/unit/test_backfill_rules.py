"""The rules of `runoff backfill` (jobs/backfill.py): interval, predicates, windows, slices.

The predicates are evaluated by Spark (`F.expr`, as `replaceWhere` hands them to delta-spark), on
rows placed just inside and just outside each edge; the windowed recomputation is compared with
tests/expected.py on a small batch DataFrame.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from core.config import RunoffConfig
from core.errors import ConfigError
from jobs.backfill import (
    Interval,
    bronze_predicate,
    folder_day_pattern,
    parse_duration,
    quarantine_predicate,
    strip_segments_pattern,
    window_input_range,
    window_predicate,
)
from jobs.cli import main
from tests import expected

JAN1, JAN3 = date(2024, 1, 1), date(2024, 1, 3)
INTERVAL = Interval(JAN1, JAN3)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def holds(predicate: str, data: pa.Table) -> list[bool]:
    """Whether each row of `data` satisfies the SQL `predicate`, evaluated by the active (shared)
    SparkSession; NULL counts as False, as for `replaceWhere`. Tests calling it take `spark`."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.getActiveSession()
    assert spark is not None, "holds() needs the `spark` fixture"
    indexed = data.append_column("__row", pa.array(range(data.num_rows), pa.int64()))
    frame = spark.createDataFrame(indexed).select("__row", F.expr(predicate).alias("holds"))
    return [bool(row["holds"]) for row in sorted(frame.collect(), key=lambda row: row["__row"])]


def test_interval_days_and_bounds() -> None:
    assert INTERVAL.days == [JAN1, date(2024, 1, 2)]
    assert (INTERVAL.start_time, INTERVAL.end_time) == (utc(2024, 1, 1), utc(2024, 1, 3))
    assert str(INTERVAL) == "[2024-01-01, 2024-01-03)"
    with pytest.raises(
        ConfigError,
        match=r"^--end 2024-01-01 must be after --start 2024-01-01 \(the interval \[start, end\) "
        r"would be empty\)$",
    ):
        Interval(JAN1, JAN1)


def test_empty_interval_is_refused_by_the_cli(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--home", str(config.home), "backfill", "events", "--start", "2024-01-03"]
    assert main([*args, "--end", "2024-01-01"]) == 2
    assert capsys.readouterr().err == (
        "runoff: error: --end 2024-01-01 must be after --start 2024-01-03 "
        "(the interval [start, end) would be empty)\n"
    )
    assert not (config.home / "delta").exists()


def test_parse_duration() -> None:
    assert parse_duration("1 hour") == timedelta(hours=1)
    assert parse_duration("10 minutes") == timedelta(minutes=10)
    assert parse_duration(" 5 seconds ") == timedelta(seconds=5)
    assert parse_duration("2 days") == timedelta(days=2)
    with pytest.raises(ConfigError, match=r"^window '1h' is not a duration like"):
        parse_duration("1h")


@pytest.mark.spark
def test_bronze_predicate_selects_the_interval_days(spark: Any) -> None:
    days = [date(2023, 12, 31), JAN1, date(2024, 1, 2), JAN3]
    data = pa.table({"event_date": pa.array(days, pa.date32())})
    assert holds(bronze_predicate(INTERVAL), data) == [False, True, True, False]


@pytest.mark.spark
def test_window_predicate_selects_every_window_overlapping_the_interval(spark: Any) -> None:
    minute = timedelta(minutes=1)
    starts = [
        utc(2023, 12, 31, 23, 50),  # [23:50, 00:00): ends at the start: outside
        utc(2023, 12, 31, 23, 55),  # straddles the start: inside
        utc(2024, 1, 1),
        utc(2024, 1, 2, 23, 55),  # straddles the end: inside
        utc(2024, 1, 3),  # starts at the end: outside
    ]
    data = pa.table(
        {
            "window_start": pa.array(starts, pa.timestamp("us", tz="UTC")),
            "window_end": pa.array([s + 10 * minute for s in starts], pa.timestamp("us", tz="UTC")),
        }
    )
    assert holds(window_predicate(INTERVAL), data) == [False, True, True, True, False]


def test_window_input_range_covers_every_overlapping_window() -> None:
    size = timedelta(minutes=10)
    low, high = window_input_range(INTERVAL, size)
    assert (low, high) == (utc(2023, 12, 31, 23, 50), utc(2024, 1, 3, 0, 10))
    # the extreme overlapping windows (10 minutes, sliding by 5) lie inside [low, high)
    first, last = utc(2023, 12, 31, 23, 55), utc(2024, 1, 2, 23, 55)
    assert low <= first and last + size <= high


@pytest.mark.spark
def test_quarantine_predicate_quotes_file_names(spark: Any) -> None:
    files = ["file:///l/events/date=2024-01-01/it's.json", "file:///l/events/date=2024-01-02/b"]
    data = pa.table({"_source_file": [*files, "file:///l/events/date=2024-01-03/c", None]})
    assert holds(quarantine_predicate(files), data) == [True, True, False, False]
    assert holds(quarantine_predicate([]), data) == [False] * 4


def test_folder_day_pattern_reads_the_landing_folder_only() -> None:
    pattern = folder_day_pattern(Path("/home/r/landing/events"))

    def day(source: str) -> str | None:
        match = re.search(pattern, source)  # the same in Java's regex dialect (Spark)
        return match.group(1) if match else None

    assert day("file:///home/r/landing/events/date=2024-01-02/a.json") == "2024-01-02"
    assert day("/home/r/landing/events/date=2024-01-02/x/a.json") == "2024-01-02"
    assert day("file:///home/r/landing/lines/date=2024-01-02/a.txt") is None
    assert day("file:///home/r/landing/events/a.json") is None


def test_strip_segments_pattern_maps_an_archived_uri_to_its_landing_uri() -> None:
    # archive root /h/archive/bronze (3 segments) + landing path /h/landing/events/...
    archived = "file:///h/archive/bronze/h/landing/events/date=2024-01-01/a.json"
    pattern = strip_segments_pattern(3)
    assert re.sub(pattern, r"\1", archived) == "file:///h/landing/events/date=2024-01-01/a.json"
    assert re.sub(pattern, r"\1", "file:/h/archive/bronze/h/landing/x") == "file:/h/landing/x"


# -- Spark transforms on tiny batch frames ------------------------------------------------------
def events_bronze(spark: Any, moments: list[datetime], source: str) -> Any:
    from tests.seeds import seed

    rows = [
        (
            int(m.timestamp()),
            "Open" if i % 3 else "Close",
            m,
            m.date(),
            source,
            utc(2024, 2, 1),
            0,
            None,  # _rescued_data: no undeclared fields
        )
        for i, m in enumerate(moments)
    ]
    return spark.createDataFrame(rows, seed("events").full_bronze_schema)


@pytest.mark.spark
def test_recompute_windows_equals_expected_for_every_overlapping_window(spark: Any) -> None:
    from jobs.backfill import recompute_windows
    from tests.seeds import seed

    moments = [
        utc(2023, 12, 31, 23, 49),  # only in windows that end before the interval
        utc(2023, 12, 31, 23, 57),  # in the window straddling the start
        utc(2024, 1, 1, 0, 1),
        utc(2024, 1, 1, 0, 7),
        utc(2024, 1, 2, 13, 30),
        utc(2024, 1, 2, 23, 59),
        utc(2024, 1, 3, 0, 4),  # in the window straddling the end
        utc(2024, 1, 3, 0, 30),  # only in windows after the interval
    ]
    bronze = events_bronze(spark, moments, "file:///l/events/date=2024-01-01/a.json")
    records = [r.asDict() for r in bronze.collect()]
    for record in records:
        record["event_time"] = record["event_time"].replace(tzinfo=UTC)
    dataset = seed("events")
    for aggregate in dataset.aggregates:
        got = recompute_windows(bronze, aggregate, dataset.watermark, INTERVAL)
        rows = sorted(
            (r.asDict() for r in got.collect()),
            key=lambda r: (r["window_start"], r["window_end"], r["action"]),
        )
        want = [
            r
            for r in expected.naive_utc(expected.SILVER[aggregate.table](records))
            if r["window_end"] > datetime(2024, 1, 1) and r["window_start"] < datetime(2024, 1, 3)
        ]
        assert rows == want, aggregate.table


@pytest.mark.spark
def test_bronze_slice_keeps_late_rows_from_other_days(spark: Any) -> None:
    from pyspark.sql import functions as F

    from jobs.backfill import bronze_slice, diff_slices

    landing = Path("/h/landing/events")
    in_folder = "file:///h/landing/events/date=2024-01-01/a.json"
    later_folder = "file:///h/landing/events/date=2024-01-03/late.json"
    current = events_bronze(spark, [utc(2024, 1, 1, 1)], in_folder).unionByName(
        events_bronze(spark, [utc(2024, 1, 2, 23, 50)], later_folder)
    )
    fresh = events_bronze(spark, [utc(2024, 1, 1, 2), utc(2024, 1, 3, 0, 1)], in_folder)
    new = bronze_slice(fresh, current, INTERVAL, landing)
    got = sorted((r["event_time"], r["_source_file"]) for r in new.collect())
    assert got == [
        (datetime(2024, 1, 1, 2), in_folder),  # the file's new content, dated in the interval
        (datetime(2024, 1, 2, 23, 50), later_folder),  # a late record of another day: kept
    ]
    assert diff_slices(new, new.select(*reversed(new.columns))).same
    changed = diff_slices(new, current, ("_ingested_at", "_batch_id"))
    assert (changed.new_rows, changed.differing) == (2, 2)
    relabelled = new.withColumn("_batch_id", F.lit(9))
    assert diff_slices(new, relabelled, ("_ingested_at", "_batch_id")).same
    assert not diff_slices(new, relabelled).same
