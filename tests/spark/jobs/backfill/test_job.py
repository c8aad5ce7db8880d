"""`runoff backfill`: the bounded batch re-run of [start, end), against tests/expected.py.

The live pipeline (bronze, silver streams, through `jobs.cli.main.main`) ingests three days; then
landing changes for the first two days (an archived file delivered again with other content, a
new file, a file with records next to the interval's edges) and for the third (a new file
outside the interval). A backfill of the first two days must leave
- bronze: the interval's rows = the valid records of the interval's files (the landing copy of a
  file wins over its archived copy), the third day's rows untouched;
- quarantine: the interval's rows = the malformed lines of those files, the others untouched;
- silver: every window overlapping the interval = expected.py's aggregate of every bronze
  record, every other window untouched;
and a second run must change nothing (no new version, same rows, same checkpoint bytes).
Afterwards the live streams go on: bronze ingests only the third day's new file (the backfill's
new files are not ingested twice) and silver ends equal to expected.py over all records.

Hourly intervals: the 48 hours of two days backfilled one by one, in process, as an hourly
DAG's backfill runs them: each commits at most once per table (Delta history), rewrites only its
hour (every other row keeps every column), counts only its hour's quarantined lines (the rule
restated here: a line's event time, else its folder's midnight), and the tables end equal to
expected.py; a second pass commits nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from core.config import RunoffConfig
from delta_tables.arrow import read_arrow
from delta_tables.ledger import read_runs
from jobs.backfill.interval import Interval
from jobs.bronze.job import archive_dir
from jobs.checkpoints.files import real_path as uri_to_path
from jobs.cli.main import main
from jobs.samples import generate_dataset
from tests import expected

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAY1, DAY2, DAY3 = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)
SAMPLE = {"files": 2, "rows_per_file": 50, "malformed_rate": 0.1}


# -- helpers ------------------------------------------------------------------------------------
def cli(home: Path, *args: str) -> int:
    return main(["--home", str(home), *args])


def rows_of(path: Path) -> list[dict[str, Any]]:
    return read_arrow(str(path)).to_pylist()


def version_of(path: Path) -> int:
    return int(DeltaTable(str(path)).version())


def checkpoint_digest(config: RunoffConfig) -> dict[str, str]:
    """Every file under the checkpoint directories, with the hash of its bytes."""
    root = config.home / "checkpoints"
    digest = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and relative.parts[1:2] and not relative.name.endswith(".lock"):
            digest[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def effective_files(config: RunoffConfig, dataset: str, days: list[date]) -> dict[Path, Path]:
    """landing path -> the file holding its current content (landing copy, else archive)."""
    landing, archive = config.landing_dir(dataset), archive_dir(config, dataset)
    found: dict[Path, Path] = {}
    for root in (archive, landing):  # landing last: it wins
        for day in days:
            for path in sorted((root / f"date={day.isoformat()}").glob("*")):
                if path.is_file() and not path.name.startswith((".", "_")):
                    found[landing / path.relative_to(root)] = path
    return found


def expected_files(
    config: RunoffConfig, dataset: str, days: list[date]
) -> list[expected.LandingFile]:
    """expected.py's reading of the files, `_source_file` = the landing path."""
    result = []
    for landing_path, location in effective_files(config, dataset, days).items():
        parsed = expected.read_file(dataset, location)
        lines = tuple(
            line
            if line.record is None
            else type(line)(
                line.number,
                line.raw,
                line.kind,
                line.reason,
                {**line.record, "_source_file": os.path.realpath(landing_path)},
            )
            for line in parsed.lines
        )
        result.append(expected.LandingFile(landing_path, parsed.date, lines))
    return result


def bronze_records(path: Path, columns: list[str]) -> list[tuple[Any, ...]]:
    """Bronze rows projected on the record's columns, `_source_file` as a local path."""
    rows = []
    for row in rows_of(path):
        row["_source_file"] = uri_to_path(row["_source_file"])
        rows.append(tuple(row[c] for c in columns))
    return sorted(rows)


def record_tuples(records: list[dict[str, Any]], columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in records)


def quarantine_keys(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return sorted((uri_to_path(r["_source_file"]), r["_line_number"]) for r in rows)


def overlaps(row: dict[str, Any], interval: Interval) -> bool:
    return bool(row["window_end"] > interval.start and row["window_start"] < interval.end)


def silver_rows(path: Path) -> list[dict[str, Any]]:
    return sorted(rows_of(path), key=lambda r: (r["window_start"], r["window_end"], r["action"]))


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(b"".join(line + b"\n" for line in lines))
    os.replace(temp, path)


def event(moment: datetime, action: str) -> bytes:
    return json.dumps({"time": int(moment.timestamp()), "action": action}).encode()


def at(day: date, hour: int, minute: int) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)


# -- the test ---------------------------------------------------------------------------------
def test_backfill_replaces_exactly_the_interval_and_is_idempotent(
    spark: Any, config: RunoffConfig, home: Path
) -> None:
    dataset = "events"
    bronze, quarantine = config.bronze_path(dataset), config.quarantine_path(dataset)
    silver = {t: config.silver_path(t) for t in ("events_action_hourly", "events_action_sliding")}
    columns = ["time", "action", "event_time", "event_date", "_source_file"]

    # The live pipeline: days 1-2 in one bronze run, day 3 in a second (which archives 1-2).
    for seed, day in enumerate((DAY1, DAY2), start=1):
        generate_dataset(config, dataset, start=at(day, 10, 0), seed=seed, **SAMPLE)
    assert cli(home, "bronze", dataset) == 0
    generate_dataset(config, dataset, start=at(DAY3, 10, 0), seed=3, **SAMPLE)
    assert cli(home, "bronze", dataset) == 0
    assert cli(home, "silver", dataset) == 0
    archived = sorted(archive_dir(config, dataset).rglob("*.json"))
    assert len(archived) == 4  # days 1 and 2; day 3 waits for the next run

    # Landing changes: an archived day-1 file delivered again with other content (first lines
    # dropped, an Open 2 minutes after midnight, a malformed line), a new day-2 file (with an
    # event 2 minutes before the interval ends), and a new day-3 file outside the interval.
    redelivered = config.landing_dir(dataset) / archived[0].relative_to(
        archive_dir(config, dataset)
    )
    old_lines = archived[0].read_bytes().splitlines()
    write_lines(redelivered, [*old_lines[7:], event(at(DAY1, 0, 2), "Open"), b'{"time": 17040'])
    generate_dataset(config, dataset, start=at(DAY2, 15, 0), seed=4, files=1, rows_per_file=30)
    write_lines(
        config.landing_dir(dataset) / "date=2024-01-02" / "edge.json",
        [event(at(DAY2, 23, 58), "Close"), b"", b"[1, 2]"],
    )
    day3_new = generate_dataset(config, dataset, start=at(DAY3, 15, 0), seed=5, files=1)
    assert day3_new[0].path.is_file()

    interval = Interval(at(DAY1, 0, 0), at(DAY3, 0, 0))
    before_bronze = rows_of(bronze)
    before_quarantine = rows_of(quarantine)
    before_silver = {t: rows_of(p) for t, p in silver.items()}
    checkpoints = checkpoint_digest(config)
    assert checkpoints  # bronze and both silver checkpoints

    assert cli(home, "backfill", dataset, "--start", "2024-01-01", "--end", "2024-01-03") == 0

    # bronze: the interval = the interval's files; day 3 untouched (all columns).
    files = expected_files(config, dataset, [DAY1, DAY2])
    want = [r for r in expected.valid_records(files) if DAY1 <= r["event_date"] < DAY3]
    in_interval = [r for r in rows_of(bronze) if DAY1 <= r["event_date"] < DAY3]
    assert len(in_interval) == len(want)
    assert bronze_records(bronze, columns) == sorted(
        record_tuples(want, columns) + bronze_records_outside(before_bronze, columns, interval)
    )
    outside = [r for r in rows_of(bronze) if not DAY1 <= r["event_date"] < DAY3]
    assert sorted(outside, key=repr) == sorted(
        [r for r in before_bronze if not DAY1 <= r["event_date"] < DAY3], key=repr
    )

    # quarantine: the interval's files' malformed lines; other files' rows untouched.
    def from_interval(row: dict[str, Any]) -> bool:
        return (
            "/date=2024-01-01/" in row["_source_file"] or "/date=2024-01-02/" in row["_source_file"]
        )

    got_quarantine = rows_of(quarantine)
    malformed = expected.malformed_lines(files)
    assert quarantine_keys([r for r in got_quarantine if from_interval(r)]) == sorted(
        (os.path.realpath(path), number) for path, number, _, _ in malformed
    )
    assert sorted([r for r in got_quarantine if not from_interval(r)], key=repr) == sorted(
        [r for r in before_quarantine if not from_interval(r)], key=repr
    )

    # silver: windows overlapping the interval = expected over every bronze record.
    all_records = want + [
        dict(zip(columns, row, strict=True))
        for row in bronze_records_outside(before_bronze, columns, interval)
    ]
    for table, path in silver.items():
        got = silver_rows(path)
        want_rows = expected.SILVER[table](all_records)
        assert [r for r in got if overlaps(r, interval)] == [
            r for r in want_rows if overlaps(r, interval)
        ], table
        untouched = [r for r in before_silver[table] if not overlaps(r, interval)]
        assert sorted([r for r in got if not overlaps(r, interval)], key=repr) == sorted(
            untouched, key=repr
        )
    # the straddling sliding window [Dec 31 23:55, Jan 1 00:05) was written by the backfill
    sliding = silver_rows(silver["events_action_sliding"])
    assert {
        "window_start": at(date(2023, 12, 31), 23, 55),
        "window_end": at(DAY1, 0, 5),
        "action": "Open",
        "count": 1,
    } in sliding

    # the interval's new landing files went to the archive; the day-3 file is still pending.
    status = status_json(home, dataset)
    assert status["landing"]["pending_files"] == [
        str(day3_new[0].path.relative_to(config.landing_dir(dataset)))
    ]
    assert not (config.landing_dir(dataset) / "date=2024-01-02" / "edge.json").exists()

    # a second run changes nothing: no new version, same rows, checkpoints never written.
    versions = {p: version_of(p) for p in (bronze, quarantine, *silver.values())}
    contents = {p: sorted(rows_of(p), key=repr) for p in versions}
    assert cli(home, "backfill", dataset, "--start", "2024-01-01", "--end", "2024-01-03") == 0
    assert {p: version_of(p) for p in versions} == versions
    assert {p: sorted(rows_of(p), key=repr) for p in versions} == contents
    assert checkpoint_digest(config) == checkpoints
    backfills = [r for r in read_runs(config.runs_path, dataset) if r["layer"] == "backfill"]
    assert [(r["status"], r["files"]) for r in backfills] == [("success", len(files))] * 2
    assert json.loads(backfills[1]["versions_before"]) == json.loads(backfills[1]["versions_after"])

    # the live streams go on: only the day-3 file is new; silver = expected over everything.
    assert cli(home, "bronze", dataset) == 0
    assert cli(home, "silver", dataset) == 0
    everything = expected_files(config, dataset, [DAY1, DAY2, DAY3])
    records = expected.valid_records(everything)
    assert bronze_records(bronze, columns) == record_tuples(records, columns)
    for table, path in silver.items():
        assert silver_rows(path) == expected.SILVER[table](records), table
    status = status_json(home, dataset)
    assert status["landing"]["pending"] == 0
    # last batch ids: what the runs counted (the ledger), minus one (ids start at 0)
    runs = read_runs(config.runs_path, dataset)
    bronze_batches = sum(r["batches"] for r in runs if r["layer"] == "bronze")
    silver_batches = {
        t: sum(
            json.loads(r["details"])["tables"][t]["batches"] for r in runs if r["layer"] == "silver"
        )
        for t in silver
    }
    assert [t["last_batch_id"] for t in status["tables"]] == [
        bronze_batches - 1,
        bronze_batches - 1,
        *(silver_batches[t] - 1 for t in silver),
    ]
    assert [t["rows"] for t in status["tables"]] == [
        len(records),
        len(expected.malformed_lines(everything)),
        *(len(expected.SILVER[t](records)) for t in silver),
    ]


def bronze_records_outside(
    rows: list[dict[str, Any]], columns: list[str], interval: Interval
) -> list[tuple[Any, ...]]:
    picked = []
    for row in rows:
        if not interval.holds(row["event_time"]):
            picked.append(
                tuple(uri_to_path(row[c]) if c == "_source_file" else row[c] for c in columns)
            )
    return picked


def status_json(home: Path, dataset: str) -> dict[str, Any]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(home, "status", dataset, "--json") == 0
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def test_backfill_recomputes_word_counts_and_refuses_to_empty_days(
    spark: Any, config: RunoffConfig, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = "lines"
    sample = {"files": 1, "rows_per_file": 15, "malformed_rate": 0.1}
    day1_file = generate_dataset(config, dataset, start=at(DAY1, 0, 0), seed=1, **sample)[0]
    day2_file = generate_dataset(config, dataset, start=at(DAY2, 0, 0), seed=2, **sample)[0]
    assert cli(home, "bronze", dataset) == 0

    # day 1 delivered again: one line fewer, new words, an invalid UTF-8 line
    lines = day1_file.path.read_bytes().splitlines()
    write_lines(day1_file.path, [*lines[1:], b"River river RIVER's rain", b"\xff\xfe broken"])
    assert cli(home, "backfill", dataset, "--start", "2024-01-01", "--end", "2024-01-02") == 0

    files = expected_files(config, dataset, [DAY1, DAY2])
    records = expected.valid_records(files)
    counts = sorted(rows_of(config.silver_path("lines_word_counts")), key=lambda r: r["word"])
    assert counts == expected.lines_word_counts(records)
    assert {"word": "river's", "count": 1} in counts
    assert bronze_records(config.bronze_path(dataset), ["line", "_source_file"]) == record_tuples(
        records, ["line", "_source_file"]
    )
    assert quarantine_keys(rows_of(config.quarantine_path(dataset))) == sorted(
        (os.path.realpath(path), number) for path, number, _, _ in expected.malformed_lines(files)
    )

    # day 2's file is gone from landing and archive: the backfill refuses to empty the day
    bronze_version = version_of(config.bronze_path(dataset))
    day2_file.path.unlink()
    capsys.readouterr()
    assert cli(home, "backfill", dataset, "--start", "2024-01-02", "--end", "2024-01-03") == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"runoff: error: no landing files of lines [2024-01-02, 2024-01-03) in "
        f"{config.landing_dir(dataset)} or its archive, but bronze holds {day2_file.records} "
        "rows from them: "
        "refusing to delete them"
    )
    assert version_of(config.bronze_path(dataset)) == bronze_version
    (failed,) = [r for r in read_runs(config.runs_path, dataset) if r["status"] == "failed"]
    assert failed["layer"] == "backfill"

    # a day that never had data: nothing to replace, and the summary says why
    silver_version = version_of(config.silver_path("lines_word_counts"))
    assert cli(home, "backfill", dataset, "--start", "2024-01-05", "--end", "2024-01-06") == 0
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"backfill lines \[2024-01-05, 2024-01-06\): success in \d+\.\d s: the interval holds no "
        r"data \(no landing file, no bronze row\), no table changed",
        out[-1],
    ), out
    assert version_of(config.bronze_path(dataset)) == bronze_version
    assert version_of(config.silver_path("lines_word_counts")) == silver_version
    assert read_runs(config.runs_path, dataset)[-1]["status"] == "success"


# -- hourly intervals -------------------------------------------------------------------------
EVENTS_SILVER = ("events_action_hourly", "events_action_sliding")
RECORD_COLUMNS = ["time", "action", "event_time", "event_date", "_source_file"]


def missing_action(moment: datetime) -> bytes:
    """A malformed events line that still has an event time."""
    return json.dumps({"time": int(moment.timestamp())}).encode()


def hourly(days: list[date]) -> list[Interval]:
    return [
        Interval(at(d, h, 0), at(d, h, 0) + timedelta(hours=1)) for d in days for h in range(24)
    ]


def event_key(raw: bytes, source: Path | str) -> datetime | None:
    """The quarantine's interval rule restated for events: the line's `time` (epoch seconds)
    when it is a JSON object with an integer `time`, else midnight UTC of its `date=` folder."""
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if isinstance(value, dict) and type(value.get("time")) is int:
        return expected.EPOCH + timedelta(seconds=value["time"])
    day = expected.folder_date(Path(source))
    return at(day, 0, 0) if day is not None else None


def versions(config: RunoffConfig) -> dict[str, int]:
    paths = {
        "bronze_events": config.bronze_path("events"),
        "quarantine_events": config.quarantine_path("events"),
        **{t: config.silver_path(t) for t in EVENTS_SILVER},
    }
    return {t: version_of(p) for t, p in paths.items()}


def table_path(config: RunoffConfig, table: str) -> Path:
    if table == "bronze_events":
        return config.bronze_path("events")
    if table == "quarantine_events":
        return config.quarantine_path("events")
    return config.silver_path(table)


def in_hour(table: str, row: dict[str, Any], hour: Interval) -> bool:
    """Whether a row of `table` lies in the slice a backfill of `hour` may rewrite."""
    if table == "bronze_events":
        return hour.holds(row["event_time"])
    if table == "quarantine_events":
        key = event_key(row["_raw"].encode(), uri_to_path(row["_source_file"]))
        return key is not None and hour.holds(key)
    return overlaps(row, hour)


def test_hourly_backfills_replace_only_their_hour_and_count_each_quarantined_line_once(
    spark: Any, config: RunoffConfig, home: Path
) -> None:
    """Hourly intervals over two days, as an hourly DAG's backfill runs them, in process."""
    from jobs.backfill.job import run_backfill

    landing = config.landing_dir("events")
    day1, day2 = landing / "date=2024-01-01" / "a.json", landing / "date=2024-01-02" / "b.json"
    late = landing / "date=2024-01-03" / "late.json"
    day1_lines = [
        event(at(DAY1, 0, 2), "Open"),  # in the sliding window straddling midnight
        event(at(DAY1, 4, 58), "Close"),  # with 05:03: a window straddling 05:00
        b'{"time": 17',  # unparseable: belongs to the day's midnight hour
        event(at(DAY1, 5, 3), "Open"),
        missing_action(at(DAY1, 5, 30)),  # malformed with an event time: hour 5
        b"",
        event(at(DAY1, 13, 30), "Open"),  # redelivered below as 13:45 Close
        event(at(DAY1, 23, 58), "Close"),
        b"[1, 2]",  # not an object: midnight hour
    ]
    write_lines(day1, day1_lines)
    write_lines(
        day2,
        [
            event(at(DAY2, 0, 2), "Open"),
            event(at(DAY2, 5, 59), "Close"),
            missing_action(at(DAY2, 23, 59)),
            b"not json",
            event(at(DAY2, 10, 0), "Close"),
        ],
    )
    # delivered on day 3, of day 2: kept by day 2's backfills (they read day 2's folder only)
    write_lines(late, [event(at(DAY2, 10, 30), "Open"), missing_action(at(DAY2, 10, 40))])
    assert cli(home, "bronze", "events") == 0
    assert cli(home, "silver", "events") == 0

    # Day 1's file delivered again (hour 13 changes: an event and a new malformed line), and a
    # day-2 file the stream has not ingested yet (hourly backfills leave it to the stream).
    day1_lines[6] = event(at(DAY1, 13, 45), "Close")
    write_lines(day1, [*day1_lines, missing_action(at(DAY1, 13, 50))])
    pending = landing / "date=2024-01-02" / "pending.json"
    write_lines(pending, [event(at(DAY2, 8, 0), "Open"), b"{"])

    # The independent computation: every file the stream has seen, read by expected.py.
    files = [expected.read_file("events", p) for p in (day1, day2, late)]
    for f in files:
        for line in f.lines:
            if line.record is not None:
                line.record["_source_file"] = os.path.realpath(f.path)
    records = expected.valid_records(files)
    malformed = expected.malformed_lines(files)
    key_of = {(str(path), number): event_key(raw, path) for path, number, raw, _ in malformed}

    # An hourly DAG's backfill of the two days: every hour with a line of the files (an event,
    # or a malformed line's event key) and two hours without any, by default; all 48 hours with
    # RUNOFF_BACKFILL_EVERY_HOUR=1 (each run costs seconds of Spark jobs even when it changes
    # nothing: 96 runs would take most of the suite's time budget).
    every_hour = hourly([DAY1, DAY2])
    moments = [r["event_time"] for r in records] + [k for k in key_of.values() if k is not None]
    busy = {m.replace(minute=0, second=0, microsecond=0) for m in moments}
    quiet = {at(DAY1, 9, 0), at(DAY2, 15, 0)}
    assert not quiet & busy
    intervals = (
        every_hour
        if os.environ.get("RUNOFF_BACKFILL_EVERY_HOUR") == "1"
        else [h for h in every_hour if h.start in busy | quiet]
    )
    history_before = {
        t: len(DeltaTable(str(table_path(config, t))).history()) for t in versions(config)
    }
    snapshot = {t: rows_of(table_path(config, t)) for t in versions(config)}
    before = versions(config)
    commits: dict[str, list[Interval]] = {t: [] for t in before}
    quarantined: dict[Interval, int] = {}
    lines: list[str] = []
    for hour in intervals:
        result = run_backfill(spark, config, "events", hour, report=lines.append)
        assert result.record.status == "success", hour
        quarantined[hour] = result.record.quarantined
        after = versions(config)
        for table, version in after.items():
            assert version - before[table] in (0, 1), (table, hour)  # one commit at most
            if version == before[table]:
                continue
            commits[table].append(hour)
            # rows outside the hour's slice are untouched (every column, run columns too)
            rows = rows_of(table_path(config, table))
            assert sorted((r for r in rows if not in_hour(table, r, hour)), key=repr) == sorted(
                (r for r in snapshot[table] if not in_hour(table, r, hour)), key=repr
            ), (table, hour)
            snapshot[table] = rows
        before = after

    # Only day 1's hour 13 changed in bronze and quarantine; silver got the windows the live
    # stream's watermark had not closed or had dropped (the late day-3 delivery) besides.
    changed_hour = Interval(at(DAY1, 13, 0), at(DAY1, 14, 0))
    assert commits["bronze_events"] == [changed_hour]
    assert commits["quarantine_events"] == [changed_hour]
    history = {t: len(DeltaTable(str(table_path(config, t))).history()) for t in before}
    assert {t: history[t] - history_before[t] for t in history} == {
        t: len(hours) for t, hours in commits.items()
    }

    # Each quarantined line counted by exactly one hour: the one its event key falls in.
    read = [(str(p), n) for p, n, _, _ in malformed if Path(p) != late]
    for hour in intervals:
        want = sum(1 for k in read if key_of[k] is not None and hour.holds(key_of[k]))
        assert quarantined[hour] == want, hour
    for day, path in ((DAY1, day1), (DAY2, day2)):
        of_day = sum(quarantined[h] for h in intervals if h.start.date() == day)
        assert of_day == sum(1 for p, _ in read if p == str(path)) > 0, day
    assert quarantined[Interval(at(DAY1, 0, 0), at(DAY1, 1, 0))] == 2  # unparseable, [1, 2]

    # The tables equal the independent computation (the pending file is not in them).
    assert bronze_records(config.bronze_path("events"), RECORD_COLUMNS) == record_tuples(
        records, RECORD_COLUMNS
    )
    assert quarantine_keys(rows_of(config.quarantine_path("events"))) == sorted(
        (os.path.realpath(p), n) for p, n, _, _ in malformed
    )
    for table in EVENTS_SILVER:
        assert silver_rows(config.silver_path(table)) == expected.SILVER[table](records), table
    assert pending.is_file()  # left to the stream
    assert any("1 not ingested yet on days the interval covers partly" in line for line in lines)

    # A second identical pass changes nothing.
    for hour in intervals:
        result = run_backfill(spark, config, "events", hour, report=lines.append)
        assert [c.table for c in result.changes if c.changed] == [], hour
        assert result.record.quarantined == quarantined[hour], hour
    assert versions(config) == before
    assert {t: len(DeltaTable(str(table_path(config, t))).history()) for t in before} == history
