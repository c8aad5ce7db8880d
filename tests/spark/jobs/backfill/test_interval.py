"""The rules of `runoff backfill` (jobs/backfill/job.py): interval, predicates, windows, slices.

The interval, its days and the files it reads are pure Python. The predicates are evaluated by
Spark (`F.expr`, as `replaceWhere` hands them to delta-spark), on rows placed just inside and
just outside each edge, for whole days and for one hour; the windowed recomputation is compared
with tests/expected.py on a small batch DataFrame; the quarantine's event keys with the rule
restated here.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from core.config import RunoffConfig
from core.errors import ConfigError
from core.specs import parse_duration
from jobs.backfill.interval import (
    Interval,
    IntervalFile,
    bronze_predicate,
    files_to_read,
    folder_day_pattern,
    quarantine_predicate,
    strip_segments_pattern,
    window_input_range,
    window_predicate,
)
from jobs.cli.main import main
from tests import expected

JAN1, JAN2, JAN3 = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


INTERVAL = Interval(utc(2024, 1, 1), utc(2024, 1, 3))
HOUR = Interval(utc(2024, 1, 2, 5), utc(2024, 1, 2, 6))  # one hourly run's data interval


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
    assert INTERVAL.days == [JAN1, JAN2]
    assert (INTERVAL.start, INTERVAL.end) == (utc(2024, 1, 1), utc(2024, 1, 3))
    assert str(INTERVAL) == "[2024-01-01, 2024-01-03)"
    assert [INTERVAL.covers_day(d) for d in (date(2023, 12, 31), JAN1, JAN2, JAN3)] == [
        False,
        True,
        True,
        False,
    ]
    with pytest.raises(
        ConfigError,
        match=r"^--end 2024-01-01 must be after --start 2024-01-01 \(the interval \[start, end\) "
        r"would be empty\)$",
    ):
        Interval(utc(2024, 1, 1), utc(2024, 1, 1))


def test_interval_of_times() -> None:
    assert HOUR.days == [JAN2]
    assert not HOUR.covers_day(JAN2)
    assert str(HOUR) == "[2024-01-02T05:00:00Z, 2024-01-02T06:00:00Z)"
    assert [
        HOUR.holds(m) for m in (utc(2024, 1, 2, 4, 59, 59), utc(2024, 1, 2, 5), utc(2024, 1, 2, 6))
    ] == [
        False,
        True,
        False,
    ]
    # the last hour of a day reads that day's folder only (the end is exclusive) ...
    assert Interval(utc(2024, 1, 2, 23), utc(2024, 1, 3)).days == [JAN2]
    # ... an interval crossing midnight both days' folders
    crossing = Interval(utc(2024, 1, 2, 23, 30), utc(2024, 1, 3, 0, 30))
    assert crossing.days == [JAN2, JAN3]
    assert str(crossing) == "[2024-01-02T23:30:00Z, 2024-01-03T00:30:00Z)"
    # naive times are UTC, offsets are converted, dates are midnight UTC
    east = timezone(timedelta(hours=2))
    shifted = Interval(datetime(2024, 1, 3, 1, tzinfo=east), datetime(2024, 1, 3, 2))
    assert (shifted.start, shifted.end) == (utc(2024, 1, 2, 23), utc(2024, 1, 3, 2))
    assert shifted.start.tzinfo is UTC and shifted.days == [JAN2, JAN3]
    assert str(Interval(utc(2024, 1, 2), utc(2024, 1, 2, 0, 0, 1))) == (
        "[2024-01-02T00:00:00Z, 2024-01-02T00:00:01Z)"
    )
    micro = Interval(utc(2024, 1, 2), utc(2024, 1, 2) + timedelta(microseconds=5))
    assert str(micro) == "[2024-01-02T00:00:00Z, 2024-01-02T00:00:00.000005Z)"
    with pytest.raises(
        ConfigError,
        match=r"^--end 2024-01-02T05:00:00Z must be after --start 2024-01-02T06:00:00Z \(",
    ):
        Interval(utc(2024, 1, 2, 6), utc(2024, 1, 2, 5))


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


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        # 06:00+01:00 is 05:00Z: the interval is empty once both are in UTC
        (
            "2024-01-02T06:00:00+01:00",
            "2024-01-02T05:00:00Z",
            "runoff: error: --end 2024-01-02T05:00:00Z must be after --start "
            "2024-01-02T05:00:00Z (the interval [start, end) would be empty)\n",
        ),
        # naive = UTC, and a negative interval
        (
            "2024-01-02T06:00",
            "2024-01-02",
            "runoff: error: --end 2024-01-02T00:00:00Z must be after --start "
            "2024-01-02T06:00:00Z (the interval [start, end) would be empty)\n",
        ),
        (
            "2024-01-02T25:00",
            "2024-01-03",
            "runoff backfill: error: argument --start: '2024-01-02T25:00' is not an ISO-8601 "
            "date or time (e.g. 2024-01-01 or 2024-01-01T00:00:00Z)\n",
        ),
    ],
)
def test_bad_times_are_refused_by_the_cli(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str], start: str, end: str, message: str
) -> None:
    argv = ["--home", str(config.home), "backfill", "events", "--start", start, "--end", end]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = int(exit_.code or 0)
    assert code == 2
    assert capsys.readouterr().err == message
    assert not (config.home / "delta").exists()


def test_parse_duration() -> None:
    assert parse_duration("1 hour") == timedelta(hours=1)
    assert parse_duration("10 minutes") == timedelta(minutes=10)
    assert parse_duration(" 5 seconds ") == timedelta(seconds=5)
    assert parse_duration("2 days") == timedelta(days=2)
    with pytest.raises(ConfigError, match=r"^interval '1h' is not of the form"):
        parse_duration("1h")


@pytest.mark.spark
def test_bronze_predicate_selects_the_interval_event_times(spark: Any) -> None:
    tick = timedelta(microseconds=1)
    for interval in (INTERVAL, HOUR):
        moments = [
            interval.start - tick,
            interval.start,
            interval.end - tick,
            interval.end,
            interval.start - timedelta(days=1),  # same time of day, other days
            interval.end + timedelta(days=1) - tick,
        ]
        data = pa.table(
            {
                "event_date": pa.array([m.date() for m in moments], pa.date32()),
                "event_time": pa.array(moments, pa.timestamp("us", tz="UTC")),
            }
        )
        want = [False, True, True, False, False, False]
        assert [interval.holds(m) for m in moments] == want
        assert holds(bronze_predicate(interval), data) == want, interval
    assert bronze_predicate(HOUR) == (
        "event_date >= DATE '2024-01-02' AND event_date <= DATE '2024-01-02' AND "
        "event_time >= TIMESTAMP '2024-01-02 05:00:00.000000+00:00' AND "
        "event_time < TIMESTAMP '2024-01-02 06:00:00.000000+00:00'"
    )


@pytest.mark.spark
def test_predicates_do_not_depend_on_the_session_time_zone(spark: Any) -> None:
    moments = [utc(2024, 1, 2, 4, 59), utc(2024, 1, 2, 5), utc(2024, 1, 2, 6)]
    data = pa.table(
        {
            "event_date": pa.array([m.date() for m in moments], pa.date32()),
            "event_time": pa.array(moments, pa.timestamp("us", tz="UTC")),
        }
    )
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        assert holds(bronze_predicate(HOUR), data) == [False, True, False]
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


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
    hourly = [
        utc(2024, 1, 2, 4, 50),  # ends at the hour's start: outside
        utc(2024, 1, 2, 4, 55),  # straddles the start
        utc(2024, 1, 2, 5, 30),
        utc(2024, 1, 2, 5, 55),  # straddles the end
        utc(2024, 1, 2, 6),  # starts at the end: outside
    ]
    data = pa.table(
        {
            "window_start": pa.array(hourly, pa.timestamp("us", tz="UTC")),
            "window_end": pa.array([s + 10 * minute for s in hourly], pa.timestamp("us", tz="UTC")),
        }
    )
    assert holds(window_predicate(HOUR), data) == [False, True, True, True, False]


def test_window_input_range_covers_every_overlapping_window() -> None:
    size = timedelta(minutes=10)
    low, high = window_input_range(INTERVAL, size)
    assert (low, high) == (utc(2023, 12, 31, 23, 50), utc(2024, 1, 3, 0, 10))
    # the extreme overlapping windows (10 minutes, sliding by 5) lie inside [low, high)
    first, last = utc(2023, 12, 31, 23, 55), utc(2024, 1, 2, 23, 55)
    assert low <= first and last + size <= high
    assert window_input_range(HOUR, size) == (utc(2024, 1, 2, 4, 50), utc(2024, 1, 2, 6, 10))


def test_files_to_read_leaves_pending_files_of_partly_covered_days_to_the_stream(
    tmp_path: Path,
) -> None:
    def file(day: date, name: str, archived: bool) -> IntervalFile:
        relative = Path(f"date={day.isoformat()}") / name
        root = tmp_path / ("archive" if archived else "landing")
        return IntervalFile(relative, root / relative, archived, day)

    ingested_landing = file(JAN2, "seen.json", archived=False)  # re-delivered under its name
    files = [
        file(JAN2, "old.json", archived=True),
        ingested_landing,
        file(JAN2, "new.json", archived=False),  # pending
    ]
    ingested = {os.path.realpath(ingested_landing.location)}
    # an hour of the day: the pending file waits for the stream
    assert files_to_read(files, HOUR, ingested) == (files[:2], files[2:])
    # the whole day: the backfill reads (and then archives) it
    day = Interval(utc(2024, 1, 2), utc(2024, 1, 3))
    assert files_to_read(files, day, ingested) == (files, [])
    assert [f.pending(ingested) for f in files] == [False, False, True]


@pytest.mark.spark
def test_quarantine_predicate_quotes_file_names(spark: Any) -> None:
    files = ["file:///l/events/date=2024-01-01/it's.json", "file:///l/events/date=2024-01-02/b"]
    data = pa.table({"_source_file": [*files, "file:///l/events/date=2024-01-03/c", None]})
    assert holds(quarantine_predicate(files), data) == [True, True, False, False]
    assert holds(quarantine_predicate([]), data) == [False] * 4


@pytest.mark.spark
def test_event_key_places_every_quarantine_row_in_one_interval(spark: Any) -> None:
    """The key restated: the event time of a line that has one, else its folder's midnight."""
    from delta_tables.schemas import QUARANTINE_SCHEMA
    from jobs.backfill.interval import EVENT_KEY, with_event_key
    from tests.seeds import seed

    landing = Path("/h/landing/events")
    day2 = "file:///h/landing/events/date=2024-01-02/a.json"
    elsewhere = "file:///h/landing/events/loose.json"  # no date= folder: no interval
    at_0530 = int(utc(2024, 1, 2, 5, 30).timestamp())
    rows = [
        ('{"time": 17040', "unparseable JSON", day2, utc(2024, 1, 2)),
        ("[1, 2]", "not a JSON object", day2, utc(2024, 1, 2)),
        (f'{{"time": {at_0530}}}', "missing required field: action", day2, utc(2024, 1, 2, 5, 30)),
        (f'{{"time": {at_0530}}}', "missing required field: action", day2, utc(2024, 1, 2, 5, 30)),
        ('{"time": "noon", "action": "Open"}', "wrong type: time (bigint)", day2, utc(2024, 1, 2)),
        ('{"time": 17040', "unparseable JSON", elsewhere, None),
    ]
    frame = spark.createDataFrame(
        [
            (raw, error, source, n, utc(2024, 3, 1), 0, date(2024, 3, 1))
            for n, (raw, error, source, _) in enumerate(rows, start=1)
        ],
        QUARANTINE_SCHEMA,
    )
    keyed = with_event_key(frame, seed("events"), landing)
    assert keyed.columns == [*frame.columns, EVENT_KEY]
    got = sorted((r["_line_number"], r[EVENT_KEY]) for r in keyed.collect())
    want = [(n, None if k is None else k.replace(tzinfo=None)) for n, (*_, k) in enumerate(rows, 1)]
    assert got == want  # one row out per row in, duplicated lines included
    assert [HOUR.holds(k) for *_, k in rows if k is not None] == [False, False, True, True, False]


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
    # on object storage: the bucket stays, the archive root's key segments go
    stored = "s3a://lake/p/archive/bronze/p/landing/events/date=2024-01-01/a.json"
    assert re.sub(pattern, r"\1", stored) == "s3a://lake/p/landing/events/date=2024-01-01/a.json"


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
    from jobs.backfill.interval import recompute_windows
    from tests.seeds import seed

    moments = [
        utc(2023, 12, 31, 23, 49),  # only in windows that end before the interval
        utc(2023, 12, 31, 23, 57),  # in the window straddling the start
        utc(2024, 1, 1, 0, 1),
        utc(2024, 1, 1, 0, 7),
        utc(2024, 1, 2, 4, 52),  # only in windows that end before the hour
        utc(2024, 1, 2, 4, 57),  # in the window straddling the hour's start
        utc(2024, 1, 2, 5, 30),
        utc(2024, 1, 2, 6, 3),  # in the window straddling the hour's end
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
    for interval in (INTERVAL, HOUR):
        start, end = (m.replace(tzinfo=None) for m in (interval.start, interval.end))
        for aggregate in dataset.aggregates:
            got = recompute_windows(bronze, aggregate, dataset.watermark, interval)
            rows = sorted(
                (r.asDict() for r in got.collect()),
                key=lambda r: (r["window_start"], r["window_end"], r["action"]),
            )
            want = [
                r
                for r in expected.naive_utc(expected.SILVER[aggregate.table](records))
                if r["window_end"] > start and r["window_start"] < end
            ]
            assert rows == want, (aggregate.table, interval)
            assert want, (aggregate.table, interval)


@pytest.mark.spark
def test_bronze_slice_keeps_late_rows_from_other_days(spark: Any) -> None:
    from pyspark.sql import functions as F

    from jobs.backfill.interval import bronze_slice, diff_slices

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


@pytest.mark.spark
def test_bronze_slice_of_an_hour_replaces_only_that_hour(spark: Any) -> None:
    from jobs.backfill.interval import bronze_slice

    landing = Path("/h/landing/events")
    day2 = "file:///h/landing/events/date=2024-01-02/a.json"
    day3 = "file:///h/landing/events/date=2024-01-03/late.json"
    current = events_bronze(spark, [utc(2024, 1, 2, 5, 20), utc(2024, 1, 2, 7)], day2).unionByName(
        events_bronze(spark, [utc(2024, 1, 2, 5, 40)], day3)
    )
    fresh = events_bronze(
        spark, [utc(2024, 1, 2, 4, 59), utc(2024, 1, 2, 5, 10), utc(2024, 1, 2, 6)], day2
    )
    new = bronze_slice(fresh, current, HOUR, landing)
    assert sorted((r["event_time"], r["_source_file"]) for r in new.collect()) == [
        (datetime(2024, 1, 2, 5, 10), day2),  # the file's record of the hour
        (datetime(2024, 1, 2, 5, 40), day3),  # a late record of the hour from a later day: kept
    ]
