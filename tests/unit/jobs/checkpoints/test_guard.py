"""Checkpoint checks, failure lines and changed landing files, on hand-made files (no Spark).

Checkpoint files are written in Spark's formats (`offsets/<n>`, `commits/<n>`, the file source
log `sources/0/<n>`); exceptions are plain Python stand-ins for py4j's and PySpark's, carrying
the JVM text those carry (the real JVM exceptions are in
tests/spark/jobs/bronze/test_hardening.py).
"""

from __future__ import annotations

import errno
import json
import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from core.config import RunoffConfig
from core.errors import RunoffError
from jobs.checkpoints.guard import (
    CorruptFile,
    batch_record,
    corrupt_file,
    corrupt_message,
    log_file_problem,
    progress_problem,
    record_batch,
)
from jobs.checkpoints.landing_changes import (
    FileState,
    check_landing,
    covers,
    folder_day,
    read_states,
    record_states,
    same_content,
)
from jobs.cli import main as cli
from jobs.streaming.failures import explain

RESET = "runoff reset events --layer bronze --yes"
OFFSETS = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"logOffset":0}'
COMMIT = 'v1\n{"nextBatchWatermarkMs":0}'


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def committed(checkpoint: Path, *batches: int) -> None:
    for batch in batches:
        write(checkpoint / "offsets" / str(batch), OFFSETS)
        write(checkpoint / "commits" / str(batch), COMMIT)


# -- Spark's log files ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "text", "problem"),
    [
        ("commits", COMMIT, None),
        ("commits", COMMIT[:12], "line 2 is not complete JSON"),
        ("commits", "v1\n", "1 line, at least 2 expected"),
        ("commits", "", "empty"),
        (
            "commits",
            '{"nextBatchWatermarkMs":0}',
            "its first line '{\"nextBatchWatermark' is not a log version such as 'v1'",
        ),
        ("offsets", OFFSETS, None),
        ("offsets", OFFSETS.replace('{"logOffset":0}', "-"), None),
        ("offsets", OFFSETS[:40], "line 2 is not complete JSON"),
        ("offsets", OFFSETS.rsplit("\n", 1)[0], "2 lines, at least 3 expected"),
        ("offsets", OFFSETS.replace("v1", "v2").replace('{"logOffset"', '0:{"logOffset"'), None),
        ("offsets", OFFSETS.replace("v1", "v2").replace('{"logOffset":0}', "0:-"), None),
        (
            "offsets",
            OFFSETS.replace("v1", "v2").replace('{"logOffset":0}', '0:{"logOff'),
            "line 3 is not complete JSON",
        ),
        ("source", 'v1\n{"path":"file:///a","timestamp":1,"batchId":0}\n', None),
        ("source", 'v1\n{"path":"file:///a","timest', "line 2 is not complete JSON"),
    ],
)
def test_log_file_problem(tmp_path: Path, kind: str, text: str, problem: str | None) -> None:
    assert log_file_problem(write(tmp_path / "0", text), kind) == problem


def test_corrupt_file_looks_at_what_a_restart_reads(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    committed(checkpoint, 0, 1, 2)
    write(checkpoint / "offsets" / "0", "v1\n{")  # old: Spark no longer reads it
    write(checkpoint / "sources" / "0" / "1.compact", 'v1\n{"path":"file:///a","timestamp":1}')
    write(checkpoint / "sources" / "0" / "0", "garbage")  # before the compaction
    assert corrupt_file(checkpoint) is None
    write(checkpoint / "sources" / "0" / "2", 'v1\n{"path":"file:///b","time')
    assert corrupt_file(checkpoint) == CorruptFile(
        checkpoint / "sources" / "0" / "2", "line 2 is not complete JSON"
    )
    write(checkpoint / "commits" / "2", "v1")
    assert corrupt_file(checkpoint) == CorruptFile(
        checkpoint / "commits" / "2", "1 line, at least 2 expected"
    )


def test_corrupt_message_offers_deleting_only_what_loses_nothing(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    committed(checkpoint, 0, 1)
    rebuild = (
        f"run `{RESET}` to rebuild the tables and the checkpoint from the landing and archived "
        "files"
    )
    commit = checkpoint / "commits" / "1"
    write(commit.with_name(".1.crc"), "crc")
    assert corrupt_message(checkpoint, CorruptFile(commit, "empty"), RESET, 1) == (
        f"checkpoint file {commit} is truncated or corrupt (empty): delete {commit} and "
        f"{commit.with_name('.1.crc')} and run again (batch 1 is replayed and writes nothing "
        f"twice), or {rebuild}"
    )
    old = checkpoint / "commits" / "0"  # not the newest: Spark would not read it
    assert corrupt_message(checkpoint, CorruptFile(old, "empty"), RESET, 1).endswith(
        f"(empty): {rebuild}"
    )
    # The newest offsets file: safe to delete only when no table holds its (uncommitted) batch.
    write(checkpoint / "offsets" / "2", "v1\n{")
    offsets = checkpoint / "offsets" / "2"
    assert corrupt_message(checkpoint, CorruptFile(offsets, "x"), RESET, 1) == (
        f"checkpoint file {offsets} is truncated or corrupt (x): it is the newest offsets file "
        f"and batch 2 was never committed: delete {offsets} and run again (Spark plans batch 2 "
        f"anew), or {rebuild}"
    )
    assert corrupt_message(checkpoint, CorruptFile(offsets, "x"), RESET, 2).endswith(
        f"(x): {rebuild}"
    )
    committed_offsets = checkpoint / "offsets" / "1"
    assert corrupt_message(checkpoint, CorruptFile(committed_offsets, "x"), RESET, None).endswith(
        f"(x): {rebuild}"
    )


# -- tables against the checkpoint --------------------------------------------------------------
PATHS = {"bronze_events": Path("/h/bronze"), "quarantine_events": Path("/h/quarantine")}


def test_batch_records_follow_the_last_batch_of_each_table(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    record_batch(checkpoint, 0, {"bronze_events": True, "quarantine_events": True})
    record_batch(checkpoint, 1, {"bronze_events": False, "quarantine_events": True})
    record_batch(checkpoint, 2, {"bronze_events": True, "quarantine_events": False})
    assert batch_record(checkpoint, 2) == {
        "batch": 2,
        "tables": ["bronze_events"],
        "last": {"bronze_events": 2, "quarantine_events": 1},
    }
    record_batch(checkpoint, 102, {"bronze_events": True})  # old records are dropped
    assert batch_record(checkpoint, 2) is None
    assert batch_record(checkpoint, 102) == {
        "batch": 102,
        "tables": ["bronze_events"],
        "last": {"bronze_events": 102},
    }


def test_progress_problem_refuses_a_table_behind_or_far_ahead(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    committed(checkpoint, 0, 1)
    record_batch(checkpoint, 0, {"bronze_events": True, "quarantine_events": True})
    record_batch(checkpoint, 1, {"bronze_events": False, "quarantine_events": True})

    def problem(bronze: int | None, quarantine: int | None) -> str | None:
        held = {"bronze_events": bronze, "quarantine_events": quarantine}
        return progress_problem(checkpoint, "q", held, PATHS, RESET)

    assert problem(0, 1) is None  # batch 1 had no valid row: no bronze commit
    assert problem(2, 2) is None  # batch 2 interrupted after its commits: one ahead
    assert problem(0, 0) == (
        f"table quarantine_events (/h/quarantine) is behind checkpoint {checkpoint}: the table "
        "holds batch 0 of stream q, but the checkpoint committed batch 1, whose last commit to "
        "this table is batch 1: the table's newest commits are gone (a deleted _delta_log file, "
        "or an older copy restored) and running on would lose their rows: restore the table's "
        f"missing versions, or run `{RESET}` to rebuild it from the landing and archived files"
    )
    assert (problem(None, 1) or "").startswith(
        "table bronze_events (/h/bronze) is behind checkpoint "
    )
    assert problem(3, 1) == (
        f"table bronze_events (/h/bronze) is ahead of checkpoint {checkpoint}: the table holds "
        "batch 3 of stream q, the checkpoint has committed batch 1 (one batch ahead is an "
        "interrupted batch, more is not): the checkpoint is older than the table (a restored "
        f"copy?); run `{RESET}` to rebuild the tables and the checkpoint from the landing and "
        "archived files"
    )
    # A checkpoint without records (written before them): only a table ahead is refused.
    (checkpoint / "runoff_batches" / "1").unlink()
    assert problem(None, None) is None
    assert problem(3, None) is not None


# -- failure lines ------------------------------------------------------------------------------
class FakeJavaError(Exception):
    """Stands in for py4j's Py4JJavaError: `errmsg`, and a str() with the Java stack trace."""

    def __init__(self, errmsg: str, trace: str) -> None:
        super().__init__(errmsg)
        self.errmsg = errmsg
        self.trace = trace

    def __str__(self) -> str:
        return f"{self.errmsg}\n: {self.trace}"


class FakeCaptured(Exception):
    """Stands in for PySpark's captured exceptions: `_desc`, `_stackTrace`, `_cause`."""

    def __init__(self, desc: str, trace: str, cause: BaseException | None = None) -> None:
        super().__init__(desc)
        self._desc, self._stackTrace, self._cause = desc, trace, cause


JAVA_ENOSPC = (
    "java.io.IOException: No space left on device\n\tat java.base/java.io.FileOutputStream"
    ".writeBytes(Native Method)"
)
DONE = "free space and rerun; the checkpoint stays before the batch"


def test_a_full_disk_is_named_wherever_it_hides() -> None:
    parquet = FakeJavaError("An error occurred while calling o977.parquet.", JAVA_ENOSPC)
    assert explain(parquet) == (
        f"no space left on device (the error names no file; --verbose shows where): {DONE}"
    )
    tables = {"bronze_events": Path("/h/b"), "quarantine_events": Path("/h/q")}
    assert explain(parquet, tables=tables, checkpoint=Path("/h/c")) == (
        f"no space left on device writing /h/b, /h/q or checkpoint /h/c: {DONE}"
    )
    # PySpark's wrapper whose cause holds the Spark task failure naming the table.
    task = FakeCaptured(
        "[TASK_WRITE_FAILED] Task failed while writing rows to file:/h/delta/bronze/events. "
        "SQLSTATE: 58030",
        f"org.apache.spark.SparkException: ...\nCaused by: {JAVA_ENOSPC}",
    )
    wrapped = FakeCaptured("[STREAM_FAILED] Query terminated with exception", "", cause=task)
    assert explain(wrapped, tables=tables) == (
        f"no space left on device writing /h/delta/bronze/events: {DONE}"
    )
    # A Python write.
    full = OSError(errno.ENOSPC, "No space left on device", "/h/checkpoints/x/runoff.json")
    assert explain(full) == f"no space left on device writing /h/checkpoints/x/runoff.json: {DONE}"
    # A later failure on the way out (the ledger, the quality results) keeps the first line.
    first = RunoffError(f"no space left on device writing /h/b: {DONE}")
    try:
        try:
            raise first
        finally:
            raise FakeJavaError("An error occurred while calling o12.save.", "java.io.IOException")
    except FakeJavaError as later:
        assert explain(later) == str(first)
    assert explain(ValueError("something else")) is None


def test_the_cli_prints_the_full_disk_line(
    monkeypatch: pytest.MonkeyPatch, config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    import jobs.ops.status

    def full(_config: RunoffConfig, _args: object) -> int:
        raise FakeJavaError("An error occurred while calling o977.parquet.", JAVA_ENOSPC)

    monkeypatch.setattr(jobs.ops.status, "cmd_status", full)
    config.home.mkdir(exist_ok=True)
    assert cli.main(["--home", str(config.home), "status", "events"]) == 1
    assert capsys.readouterr().err == (
        "runoff: error: no space left on device (the error names no file; --verbose shows "
        f"where): {DONE}\n"
    )


def test_a_delta_log_without_its_newest_commit_file_is_named() -> None:
    delta_rs = OSError(
        "Kernel error: Internal error CRC file version 2 is newer than log segment version 1. "
        "This is a kernel bug, please report.\n   0: <unknown>"
    )
    assert explain(delta_rs) == (
        "a Delta table lost its newest commit: its _delta_log holds 00000000000000000002.crc but "
        "not 00000000000000000002.json (delta-rs: CRC file version 2 is newer than log segment "
        "version 1): put the commit file back, or, if it is lost, delete that .crc (the table "
        "then ends at version 1) and run again: the run names the table and what it lacks"
    )


def test_a_checkpoint_spark_cannot_read_is_named(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    committed(checkpoint, 0)
    spark = FakeCaptured("[STREAM_FAILED] ... Unexpected end-of-input in field name", "")
    assert explain(spark, checkpoint=checkpoint) is None  # not asked to look at the checkpoint
    assert explain(spark, checkpoint=checkpoint, reset_command=RESET, read_checkpoint=True) == (
        f"checkpoint {checkpoint} cannot be read (Spark: Unexpected end-of-input): run `{RESET}` "
        "to rebuild the tables and the checkpoint from the landing and archived files"
    )
    commit = checkpoint / "commits" / "0"
    checksum = FakeCaptured(f"Checksum error: file:{commit} at 0 exp: 1 got: 2", "")
    line = explain(checksum, checkpoint=checkpoint, reset_command=RESET, read_checkpoint=True)
    assert line == (
        f"checkpoint file {commit} is truncated or corrupt (it does not match its checksum file "
        f".0.crc): delete {commit} and run again (batch 0 is replayed and writes nothing "
        f"twice), or run `{RESET}` to rebuild the tables and the checkpoint from the landing "
        "and archived files"
    )
    assert explain(ValueError("x"), checkpoint=checkpoint, read_checkpoint=True) is None


# -- landing files changed after ingestion ------------------------------------------------------
def test_folder_day_and_covers() -> None:
    assert folder_day("date=2024-01-02/x.json") == date(2024, 1, 2)
    assert folder_day("x/date=2024-01-02/x.json") is None  # a backfill looks at the top level
    assert folder_day("date=2024-02-30/x.json") is None
    day = date(2024, 1, 2)

    def at(hour: int) -> datetime:
        return datetime(2024, 1, 2, tzinfo=UTC) + timedelta(hours=hour)

    assert covers([(at(0), at(24))], day)
    assert covers([(at(12), at(24)), (at(0), at(12))], day)
    assert not covers([(at(0), at(11)), (at(12), at(24))], day)
    assert not covers([], day)


def test_same_content_by_etag_where_the_store_gives_one(tmp_path: Path) -> None:
    local = FileState(4, 1000)
    assert same_content(local, FileState(4, 1000), archived=True)
    assert not same_content(local, FileState(4, 2000), archived=True)  # locally: the time
    assert not same_content(local, FileState(5, 1000), archived=False)
    tagged = FileState(4, 1000, "9a0364b9e99bb480dd25e1f0284c8555")
    moved = FileState(4, 2000, "9a0364b9e99bb480dd25e1f0284c8555")  # a copy: a new time
    assert same_content(tagged, moved, archived=True)
    assert not same_content(tagged, FileState(4, 1000, "0cc175b9c0f1b6a831c399e269772661"), False)
    # Tags of uploads or copies in parts depend on the part size, not only on the content.
    parts = FileState(4, 2000, "0cc175b9c0f1b6a831c399e269772661-3")
    assert same_content(tagged, parts, archived=True)  # the move: size only
    assert not same_content(tagged, parts, archived=False)  # in landing: the time too
    assert not same_content(tagged, FileState(5, 2000, parts.etag), archived=True)
    # A state recorded before ETags were kept, of an object the archive moved.
    assert same_content(FileState(4, 1000), moved, archived=True)
    record_states(tmp_path, {"s3a://b/x.json": tagged})
    assert read_states(tmp_path) == {"s3a://b/x.json": tagged}  # the tag is kept


def ingest(config: RunoffConfig, relative: str, text: str, batch: int = 0) -> Path:
    """A landing file and its file source log entry, as the bronze stream leaves them."""
    path = write(config.landing_dir("events") / relative, text)
    checkpoint = config.checkpoint_dir("bronze", "events")
    entry = {"path": path.as_uri(), "timestamp": path.stat().st_mtime_ns // 10**6, "batchId": 0}
    write(checkpoint / "sources" / "0" / str(batch), "v1\n" + json.dumps(entry))
    return path


def test_check_landing_finds_changes_by_time_or_size(config: RunoffConfig) -> None:
    checkpoint = config.checkpoint_dir("bronze", "events")
    path = ingest(config, "date=2024-01-02/a.json", "one\n")
    first = check_landing(config, "events", runs=[])
    assert first.changed == [] and list(first.new_states) == [str(path)]
    record_states(checkpoint, first.new_states)
    assert read_states(checkpoint) == first.new_states
    assert check_landing(config, "events", runs=[]).changed == []

    stat = path.stat()
    path.write_text("one\ntwo\n")  # appended, then its modification time set back
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (changed,) = check_landing(config, "events", runs=[]).changed
    assert changed.to_json() == {
        "file": "date=2024-01-02/a.json",
        "location": "landing",
        "path": str(path),
        "recorded_size": 4,
        "size": 8,
        "recorded_modified_at": changed.to_json()["modified_at"],
        "modified_at": changed.to_json()["modified_at"],
        "backfill": "runoff backfill events --start 2024-01-02 --end 2024-01-03",
        "replaces_archived": False,  # no archived file of that name
    }
    assert changed.describe("events").endswith(
        "(size 4 -> 8 bytes, modified "
        f"{datetime.fromtimestamp(stat.st_mtime_ns / 1e9, UTC):%Y-%m-%d %H:%M:%S} -> "
        f"{datetime.fromtimestamp(stat.st_mtime_ns / 1e9, UTC):%Y-%m-%d %H:%M:%S} UTC): bronze "
        "lacks its new content; re-read it: runoff backfill events --start 2024-01-02 --end "
        "2024-01-03"
    )

    # A backfill of that day that started after the change: read again, recorded, not reported.
    started = datetime.now(UTC)
    backfill = {
        "layer": "backfill",
        "status": "success",
        "started_at": started,
        "details": json.dumps({"start": "2024-01-02T00:00:00+00:00", "end": "2024-01-03"}),
    }
    before = {**backfill, "started_at": datetime(2020, 1, 1, tzinfo=UTC)}
    assert len(check_landing(config, "events", runs=[before]).changed) == 1
    failed = {**backfill, "status": "failed"}
    assert len(check_landing(config, "events", runs=[failed]).changed) == 1
    accepted = check_landing(config, "events", runs=[backfill])
    assert accepted.changed == [] and [c.path for c in accepted.accepted] == [str(path)]
    record_states(checkpoint, accepted.new_states)
    assert check_landing(config, "events", runs=[]).changed == []


def test_check_landing_looks_in_the_archive_and_outside_date_folders(
    config: RunoffConfig,
) -> None:
    dated = ingest(config, "date=2024-01-02/a.json", "one\n", batch=0)
    loose = ingest(config, "loose.json", "x\n", batch=1)
    archived = config.home / "archive" / "bronze" / str(dated).lstrip("/")
    archived.parent.mkdir(parents=True)
    os.replace(dated, archived)  # Spark's cleanSource keeps the modification time
    assert check_landing(config, "events", runs=[]).changed == []
    ingested_ns = archived.stat().st_mtime_ns
    with archived.open("a") as handle:
        handle.write("two\n")
    # A later append has a later modification time; the file system's clock moves in ticks of
    # milliseconds, so an append this close to the write can keep the same time: set it later.
    os.utime(archived, ns=(ingested_ns, ingested_ns + 10**9))
    os.utime(loose, (1, 1))
    archived_change, loose_change = check_landing(config, "events", runs=[]).changed
    assert (archived_change.location, archived_change.archived) == (archived, True)
    assert archived_change.recorded.size is None  # only Spark's time was known
    assert loose_change.backfill is None
    assert loose_change.describe("events").endswith(
        "it is not in a date=YYYY-MM-DD/ folder, so no backfill reads it: "
        "`runoff reset events --layer bronze --yes` re-ingests every file"
    )
    os.remove(loose)  # gone from landing and archive: not what Spark skipped
    assert [c.path for c in check_landing(config, "events", runs=[]).changed] == [str(dated)]
