"""`runoff bronze` against damaged state: lost table commits, cut checkpoint files, landing files
changed after ingestion. Real runs on the shared SparkSession, real checkpoints and tables; the
damage is done by hand as an operator or a broken disk would (a deleted `_delta_log` commit, a
file cut in half, an append to an ingested file, a new file renamed onto an ingested name).
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from core.config import RunoffConfig
from core.errors import RunoffError
from delta_tables.ledger import read_runs
from jobs.bronze.job import BronzeOptions, landing_dirs, run_bronze
from jobs.checkpoints.files import read_query_id
from jobs.cli import main as cli
from jobs.samples import generate_dataset
from tests import expected
from tests.conftest import take_output
from tests.spark.jobs.bronze.test_job import assert_tables_hold_exactly, land, versions

if TYPE_CHECKING:
    import io

    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

RESET = "runoff reset events --layer bronze --yes"
REBUILD = (
    f"run `{RESET}` to rebuild the tables and the checkpoint from the landing and archived files"
)


def cut_in_half(path: Path) -> bytes:
    """Truncate `path` to half its bytes (its `.crc` left as it was); returns the old bytes."""
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])
    return content


def refusal(config: RunoffConfig, capsys: pytest.CaptureFixture[str]) -> str:
    """`runoff bronze events` through the CLI: exit 1 and exactly one line on stderr."""
    capsys.readouterr()
    assert cli.main(["--home", str(config.home), "bronze", "events"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.removeprefix("runoff: error: ").rstrip("\n")


def delete_newest_commit(table: Path) -> dict[Path, bytes]:
    """Delete the table's newest commit (its JSON and its checksum file); returns them."""
    commit = sorted((table / "_delta_log").glob("*.json"))[-1]
    files = {p: p.read_bytes() for p in (commit, commit.with_suffix(".crc")) if p.exists()}
    for path in files:
        path.unlink()
    return files


def put_back(files: dict[Path, bytes]) -> None:
    for path, content in files.items():
        path.write_bytes(content)


def events_line(moment: int, action: str = "Open") -> str:
    return json.dumps({"time": moment, "action": action}) + "\n"


def test_lost_commits_and_cut_checkpoint_files_are_refused_changed_files_reported(
    spark: SparkSession,
    config: RunoffConfig,
    tmp_path: Path,
    console_output: io.StringIO,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One home through every kind of damage (a scenario: each bronze run costs seconds).

    Batch 0 ingests two files; batch 1 a file of malformed lines only, so it commits to
    quarantine alone (bronze's last batch stays 0, a legitimate state)."""
    first, second = land(config, "events", files=2, seed=41)
    only_bad = first.path.with_name("zz-malformed.json")  # landed last
    only_bad.write_text('{"time": 1704067300, "action":\nnot json\n')
    os.utime(only_bad, ns=(max(f.path.stat().st_mtime_ns for f in (first, second)) + 10**9,) * 2)
    files = [first, second, expected.read_file("events", only_bad)]
    initial = run_bronze(spark, config, "events", BronzeOptions(max_files_per_trigger=2))
    assert (initial.batches, initial.files) == (2, 3)
    checkpoint = config.checkpoint_dir("bronze", "events")
    stream = read_query_id(checkpoint)
    bronze, quarantine = config.bronze_path("events"), config.quarantine_path("events")
    before = versions(config, "events")
    landing, archive = landing_dirs(config, "events")
    archived = {f.path: archive / f.path.relative_to(landing) for f in (first, second)}
    assert all(p.is_file() for p in archived.values()) and only_bad.is_file()

    # The newest commit file cut in half: deleting it is safe (the batch is replayed).
    commit = checkpoint / "commits" / "1"
    content = cut_in_half(commit)
    assert refusal(config, capsys) == (
        f"checkpoint file {commit} is truncated or corrupt (line 2 is not complete JSON): "
        f"delete {commit} and {commit.with_name('.1.crc')} and run again (batch 1 is replayed "
        f"and writes nothing twice), or {REBUILD}"
    )
    commit.write_bytes(content)

    # The newest offsets file cut in half: its batch is committed, only a reset is safe.
    offsets = checkpoint / "offsets" / "1"
    content = cut_in_half(offsets)
    assert refusal(config, capsys) == (
        f"checkpoint file {offsets} is truncated or corrupt (line 2 is not complete JSON): "
        f"{REBUILD}"
    )
    offsets.write_bytes(content)

    # The newest quarantine commit deleted: batch 1's malformed lines are gone from the table.
    # Its JSON alone first: delta-rs then refuses to open the table (its checksum file is left).
    lost = delete_newest_commit(quarantine)
    newest, crc = sorted(lost, key=lambda p: p.suffix != ".json")
    crc.write_bytes(lost[crc])
    version = before["quarantine"]
    assert (newest.name, crc.name) == (f"{version:020d}.json", f"{version:020d}.crc")
    assert refusal(config, capsys) == (
        f"a Delta table lost its newest commit: its _delta_log holds {crc.name} but not "
        f"{newest.name} (delta-rs: CRC file version {version} is newer than log segment version "
        f"{version - 1}): put the commit file back, or, if it is lost, delete that .crc (the "
        f"table then ends at version {version - 1}) and run again: the run names the table and "
        "what it lacks"
    )
    crc.unlink()
    assert refusal(config, capsys) == (
        f"table quarantine_events ({quarantine}) is behind checkpoint {checkpoint}: the table "
        f"holds batch 0 of stream {stream}, but the checkpoint committed batch 1, whose last "
        "commit to this table is batch 1: the table's newest commits are gone (a deleted "
        "_delta_log file, or an older copy restored) and running on would lose their rows: "
        f"restore the table's missing versions, or run `{RESET}` to rebuild it from the landing "
        "and archived files"
    )
    put_back(lost)

    # The newest bronze commit deleted: refused before anything is written.
    lost = delete_newest_commit(bronze)
    damaged = versions(config, "events")
    assert damaged["bronze"] == before["bronze"] - 1
    with pytest.raises(RunoffError) as refused:
        run_bronze(spark, config, "events")
    assert str(refused.value).startswith(
        f"table bronze_events ({bronze}) is behind checkpoint {checkpoint}: the table holds no "
        f"batch of stream {stream}, but the checkpoint committed batch 1, whose last commit to "
        "this table is batch 0: "
    )
    assert versions(config, "events") == damaged  # nothing written
    put_back(lost)
    runs = read_runs(config.runs_path, "events")
    assert [r["status"] for r in runs] == ["success", *["failed"] * 5]
    assert runs[-1]["error"] == str(refused.value)

    # Landing files change after ingestion: (a) an archived file appended to, (b) a new file
    # renamed onto an ingested (and archived) name in landing.
    with archived[first.path].open("a") as handle:
        handle.write(events_line(1704067500) + events_line(1704067600, "Close") + "{oops\n")
    other = RunoffConfig.from_sources(home=tmp_path / "elsewhere", env={})
    (new,) = generate_dataset(
        other, "events", files=1, rows_per_file=40, seed=44, start="2024-01-01T05:00:00Z"
    )
    os.replace(new.path, second.path)

    # The first remedy followed: batch 1 looks interrupted after its quarantine commit (one
    # batch ahead, a legitimate state); its replay writes nothing twice. The run reports the
    # changed files (Spark reads neither again).
    commit.unlink()
    commit.with_name(".1.crc").unlink()
    take_output(console_output)
    replay = run_bronze(spark, config, "events")
    out = take_output(console_output)
    assert (replay.status, replay.batches, replay.rows, replay.quarantined) == (
        "success",
        1,
        0,
        0,
    )
    assert versions(config, "events") == before
    assert (checkpoint / "commits" / "1").is_file()
    assert_tables_hold_exactly(config, "events", files)  # what was ingested, nothing more
    command = "runoff backfill events --start 2024-01-01 --end 2024-01-02"
    changed = replay.details["changed_files"]
    relative = [str(f.path.relative_to(landing)) for f in (first, second)]
    assert [(c["file"], c["location"], c["backfill"]) for c in changed] == [
        (relative[0], "archive", command),
        (relative[1], "landing", command),
    ]
    # (b) says what the backfill does with the archived original: a replacement replaces it.
    replaces = (
        " (it reads this file in place of the archived one of the same name, whose rows leave "
        "bronze; deliver new data under new names)"
    )
    assert [c["replaces_archived"] for c in changed] == [False, True]
    for name, end in zip(relative, ("", replaces), strict=True):
        line = next(line for line in out.splitlines() if f"landing file {name} changed" in line)
        assert line.startswith("bronze events: ")
        assert line.endswith(f"bronze lacks its new content; re-read it: {command}{end}")
    ledger = json.loads(read_runs(config.runs_path, "events")[-1]["details"])
    assert ledger["changed_files"] == changed

    # (a) again, in landing: appended, its modification time set back (only its size tells).
    stat = only_bad.stat()
    with only_bad.open("a") as handle:
        handle.write(events_line(1704070000))
    os.utime(only_bad, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    relative.append(str(only_bad.relative_to(landing)))

    # runoff status: the changed files and the command, as text and as JSON.
    assert cli.main(["--home", str(config.home), "status", "events"]) == 0
    text = take_output(console_output) + capsys.readouterr().out
    for name in relative:
        assert any(
            line.startswith(f"changed after ingestion: {name} (") and line.endswith(command)
            for line in text.splitlines()
        ), text
    assert cli.main(["--home", str(config.home), "status", "events", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["landing"]["changed_files"]
    assert listed[:2] == changed
    assert (listed[2]["file"], listed[2]["location"], listed[2]["backfill"]) == (
        relative[2],
        "landing",
        command,
    )
    assert listed[2]["modified_at"] == listed[2]["recorded_modified_at"]
    assert listed[2]["size"] > listed[2]["recorded_size"]

    # The command, as printed: bronze and quarantine then hold exactly the files' lines (of
    # the second file, its replacement's only: the archived original's rows are gone).
    assert cli.main(["--home", str(config.home), *shlex.split(command)[1:]]) == 0
    now = [
        replace(expected.read_file("events", archived[first.path]), path=first.path),
        expected.read_file("events", second.path),
        expected.read_file("events", only_bad),
    ]
    assert_tables_hold_exactly(config, "events", now)
    assert cli.main(["--home", str(config.home), "status", "events", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["landing"]["changed_files"] == []


def test_a_full_disk_ends_with_one_line_naming_it(
    spark: SparkSession,
    config: RunoffConfig,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A real `java.io.IOException: No space left on device` from the JVM, raised inside a
    micro-batch of a real query and through the CLI. Simulated: the JVM writes to /dev/full (a
    device that is always full), not to a full runoff home."""
    import jobs.bronze.job
    from jobs.streaming.query import BatchFunction, run_query

    def write_to_a_full_device() -> None:
        spark._jvm.java.io.FileOutputStream("/dev/full").write(65)

    source = tmp_path / "source"
    source.mkdir()
    (source / "a.txt").write_text("a line\n")
    checkpoint = tmp_path / "checkpoint"
    table = tmp_path / "table"
    function = BatchFunction(lambda _batch, _batch_id: write_to_a_full_device())
    with pytest.raises(RunoffError) as failed:
        run_query(
            spark.readStream.format("text").load(str(source)).writeStream,
            function,
            checkpoint,
            "available-now",
            "full_disk_test",
            tables={"table": table},
        )
    assert str(failed.value) == (
        f"no space left on device writing {table} or checkpoint {checkpoint}: free space and "
        "rerun; the checkpoint stays before the batch"
    )
    assert not (checkpoint / "commits" / "0").exists()
    # What py4j's callback thread logged about the failed batch (and, when a handler left by an
    # earlier test writes to a closed stream, logging's own complaint) belongs to the query above.
    capsys.readouterr()

    def bronze_on_a_full_disk(_config: RunoffConfig, _args: object) -> int:
        write_to_a_full_device()
        return 0

    monkeypatch.setattr(jobs.bronze.job, "cmd_bronze", bronze_on_a_full_disk)
    assert cli.main(["--home", str(config.home), "bronze", "events"]) == 1
    assert capsys.readouterr().err == (
        "runoff: error: no space left on device (the error names no file; --verbose shows "
        "where): free space and rerun; the checkpoint stays before the batch\n"
    )
