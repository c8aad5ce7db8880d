"""`runoff bronze` end to end on generated landing files, against tests/expected.py.

Each test lands a few small files (with malformed and blank lines), runs the job through
`jobs.bronze.job.run_bronze` on the shared SparkSession (or the CLI where the test is about the
CLI), then reads the Delta tables with delta-rs and compares them with the landing files' own lines.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import pytest

from core.config import RunoffConfig
from core.errors import RunoffError
from core.specs import SEED_DIR
from delta_tables.arrow import read_arrow
from delta_tables.ledger import read_runs
from jobs.bronze.job import BronzeOptions, archive_dir, landing_dirs, run_bronze
from jobs.cli import main as cli
from jobs.samples import generate_dataset
from tests import expected
from tests.conftest import REPO_ROOT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

INGEST_COLUMNS = ("_ingested_at", "_batch_id")


# -- helpers ----------------------------------------------------------------------------------
def land(
    config: RunoffConfig, dataset: str, files: int, seed: int, start: str | None = None
) -> list[expected.LandingFile]:
    """Land files with malformed and blank lines; return them as tests/expected.py reads them."""
    written = generate_dataset(
        config, dataset, files=files, rows_per_file=120, seed=seed, start=start, malformed_rate=0.08
    )
    return [expected.read_file(dataset, f.path) for f in written]


def table_rows(path: Path) -> list[dict[str, Any]]:

    rows: list[dict[str, Any]] = read_arrow(str(path)).to_pylist()
    return rows


def local(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def canonical(rows: Iterable[dict[str, Any]], drop: Sequence[str] = INGEST_COLUMNS) -> list[str]:
    """Rows without the ingest columns (times as naive UTC), comparable as a sorted list."""
    return sorted(
        repr(sorted((k, v) for k, v in r.items() if k not in drop))
        for r in expected.naive_utc(rows)
    )


def expected_bronze(files: Sequence[expected.LandingFile]) -> list[dict[str, Any]]:
    return [{**r, "_source_file": str(f.path)} for f in files for r in f.records]


def expected_quarantine(files: Sequence[expected.LandingFile]) -> list[tuple[str, int, str]]:
    return sorted(
        (str(path), number, raw.decode("utf-8", "replace"))
        for path, number, raw, _reason in expected.malformed_lines(files)
    )


def assert_tables_hold_exactly(
    config: RunoffConfig, dataset: str, files: Sequence[expected.LandingFile]
) -> None:
    """Per file: bronze rows = its valid lines, quarantine rows = its malformed lines, exactly."""
    bronze = table_rows(config.bronze_path(dataset))
    quarantine = table_rows(config.quarantine_path(dataset))
    bronze_per_file = Counter(str(local(r["_source_file"])) for r in bronze)
    quarantine_per_file = Counter(str(local(r["_source_file"])) for r in quarantine)
    assert bronze_per_file == Counter({str(f.path): f.valid for f in files if f.valid})
    assert quarantine_per_file == Counter({str(f.path): f.malformed for f in files if f.malformed})
    for f in files:  # nothing silently dropped
        non_blank = len(f.lines) - f.blank
        assert bronze_per_file[str(f.path)] + quarantine_per_file[str(f.path)] == non_blank
    got = [{**r, "_source_file": str(local(r["_source_file"]))} for r in bronze]
    assert canonical(got) == canonical(expected_bronze(files))
    assert sorted(
        (str(local(r["_source_file"])), r["_line_number"], r["_raw"]) for r in quarantine
    ) == expected_quarantine(files)


def versions(config: RunoffConfig, dataset: str) -> dict[str, int]:
    from deltalake import DeltaTable

    return {
        name: DeltaTable(str(path)).version()
        for name, path in (
            ("bronze", config.bronze_path(dataset)),
            ("quarantine", config.quarantine_path(dataset)),
        )
    }


# -- ingestion --------------------------------------------------------------------------------
def test_each_file_lands_exactly_once_across_runs(
    spark: SparkSession, config: RunoffConfig
) -> None:
    first = land(config, "events", files=3, seed=11)
    record = run_bronze(spark, config, "events", BronzeOptions(max_files_per_trigger=2))

    assert_tables_hold_exactly(config, "events", first)
    valid, malformed, _ = expected.counts(first)
    assert (record.status, record.batches, record.files) == ("success", 2, 3)
    assert (record.rows, record.quarantined) == (valid, malformed)
    assert record.versions_before == {"bronze_events": -1, "quarantine_events": -1}
    assert record.versions_after == {
        "bronze_events": versions(config, "events")["bronze"],
        "quarantine_events": versions(config, "events")["quarantine"],
    }

    # Nothing new: nothing written, no new table version.
    before = versions(config, "events")
    again = run_bronze(spark, config, "events")
    assert (again.status, again.batches, again.files, again.rows) == ("success", 0, 0, 0)
    assert versions(config, "events") == before
    assert_tables_hold_exactly(config, "events", first)

    # New files between runs: ingested once, next to the earlier ones.
    second = land(config, "events", files=2, seed=12, start="2024-01-02T00:00:00Z")
    more = run_bronze(spark, config, "events", BronzeOptions(max_files_per_trigger=1))
    assert (more.batches, more.files) == (2, 2)
    assert (more.rows, more.quarantined) == expected.counts(second)[:2]
    assert_tables_hold_exactly(config, "events", [*first, *second])

    # The ledger has one row per run, as the records say.
    runs = read_runs(config.runs_path, "events")
    assert [(r["run_id"], r["status"], r["rows"]) for r in runs] == [
        (r.run_id, "success", r.rows) for r in (record, again, more)
    ]
    assert json.loads(runs[-1]["versions_before"]) == more.versions_before

    # Ingested files left the landing folder for the archive (except the last batch's, which
    # go with the next batch); every landed file is in exactly one of the two folders.
    landing, archived = landing_dirs(config, "events")
    for f in [*first, *second]:
        moved = archived / f.path.relative_to(landing)
        assert f.path.exists() != moved.exists(), f.path
    assert not any(f.path.exists() for f in first)


def test_a_file_deleted_after_listing_is_named_as_vanished(
    spark: SparkSession,
    config: RunoffConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Spark skips a file deleted between its listing and its read without a word: the batch,
    the summary and the ledger name it."""
    from jobs.bronze.job import BronzeBatch, batch_files

    files = land(config, "events", files=3, seed=21)
    deleted: list[expected.LandingFile] = []
    run_batch = BronzeBatch.__call__

    def delete_one_after_batch_0(self: BronzeBatch, batch: Any, batch_id: int) -> None:
        run_batch(self, batch, batch_id)
        if batch_id == 0:  # availableNow listed every file at the start
            read = batch_files(self.checkpoint, 0) or []
            deleted.append(next(f for f in files if str(f.path) not in read))
            deleted[0].path.unlink()

    monkeypatch.setattr(BronzeBatch, "__call__", delete_one_after_batch_0)
    capsys.readouterr()
    record = run_bronze(spark, config, "events", BronzeOptions(max_files_per_trigger=1))
    out = capsys.readouterr().out.splitlines()

    (gone,) = deleted
    kept = [f for f in files if f is not gone]
    assert_tables_hold_exactly(config, "events", kept)
    assert (record.status, record.batches, record.files) == ("success", 3, 3)
    assert (record.rows, record.quarantined) == expected.counts(kept)[:2]
    vanished = f"1 file vanished before it was read: {gone.path}"
    batch_lines = [line for line in out if line.startswith("bronze events batch ")]
    (empty,) = [line for line in batch_lines if ": 1 file, 0 rows in, " in line]
    assert [line for line in out if "vanished" in line] == [empty, f"bronze events: {vanished}"]
    assert empty.endswith(f"; {vanished}"), out
    details = json.loads(read_runs(config.runs_path, "events")[-1]["details"])
    assert details["vanished_files"] == [str(gone.path)]


def test_each_batch_records_its_files_as_it_reads_them(
    spark: SparkSession, config: RunoffConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch records the size and modification time of its files (the landing changes check
    compares them later) before Spark moves them to the archive, which on object storage is a
    copy with a new modification time: a run killed after the move still knows what it read."""
    from jobs.bronze.job import BronzeBatch, batch_files
    from jobs.checkpoints.landing_changes import FileState, read_states

    files = land(config, "events", files=2, seed=23)
    stats = {f.path.name: f.path.stat() for f in files}  # before the run moves them
    during: dict[int, tuple[list[str], dict[str, FileState]]] = {}
    run_batch = BronzeBatch.__call__

    def note_the_records(self: BronzeBatch, batch: Any, batch_id: int) -> None:
        run_batch(self, batch, batch_id)
        during[batch_id] = (
            batch_files(self.checkpoint, batch_id) or [],
            read_states(self.checkpoint),
        )

    monkeypatch.setattr(BronzeBatch, "__call__", note_the_records)
    run_bronze(spark, config, "events", BronzeOptions(max_files_per_trigger=1))

    assert sorted(during) == [0, 1]
    read_so_far: list[str] = []
    for batch_id in (0, 1):
        listed, states = during[batch_id]
        read_so_far += listed
        assert sorted(states) == sorted(read_so_far)
        for path in listed:
            stat = stats[Path(urlparse(path).path).name]
            assert states[path] == FileState(stat.st_size, stat.st_mtime_ns // 1_000_000)


@pytest.mark.parametrize("dataset", ["sensors", "lines"])
def test_bronze_and_quarantine_match_the_landing_lines(
    spark: SparkSession, config: RunoffConfig, dataset: str
) -> None:
    files = land(config, dataset, files=2, seed=5)
    record = run_bronze(spark, config, dataset)
    assert_tables_hold_exactly(config, dataset, files)
    assert (record.rows, record.quarantined) == expected.counts(files)[:2]
    # availableNow without limits: one batch for everything.
    assert (record.batches, record.files) == (1, 2)


def test_once_and_available_now_give_the_same_tables(spark: SparkSession, tmp_path: Path) -> None:
    homes = {}
    for trigger in ("once", "available-now"):
        config = RunoffConfig.from_sources(home=tmp_path / trigger, env={})
        files = land(config, "activity", files=3, seed=8)
        # A byte limit below one file still takes one file per batch; `once` ignores limits.
        options = BronzeOptions(trigger=trigger, max_bytes_per_trigger=1)
        record = run_bronze(spark, config, "activity", options)
        assert (record.batches, record.files) == (1 if trigger == "once" else 3, 3)
        assert_tables_hold_exactly(config, "activity", files)
        homes[trigger] = config

    def relative(config: RunoffConfig, table: Path) -> list[str]:
        landing = config.landing_dir("activity")
        rows = [
            {**r, "_source_file": str(local(r["_source_file"]).relative_to(landing))}
            for r in table_rows(table)
        ]
        return canonical(rows, drop=(*INGEST_COLUMNS, "ingest_date"))

    once, available_now = homes["once"], homes["available-now"]
    assert relative(once, once.bronze_path("activity")) == relative(
        available_now, available_now.bronze_path("activity")
    )
    assert relative(once, once.quarantine_path("activity")) == relative(
        available_now, available_now.quarantine_path("activity")
    )


# -- errors a user can meet ---------------------------------------------------------------------
def test_missing_landing_directory_fails_clearly_and_is_recorded(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    code = cli.main(["--home", str(config.home), "bronze", "events"])
    assert code == 2  # configuration: the spec's source.path names no folder
    landing = config.landing_dir("events")
    assert capsys.readouterr().err == (
        f"runoff: error: no landing directory for events: {landing} does not exist "
        "(land files there, or run `runoff generate events`)\n"
    )
    assert time.monotonic() - started < 10  # refused before any JVM starts
    (ledger_row,) = read_runs(config.runs_path, "events")
    assert ledger_row["status"] == "failed"
    assert ledger_row["error"].startswith("no landing directory for events")


def test_missing_landing_directory_of_a_declared_dataset_names_its_spec(
    config: RunoffConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`runoff generate` has samples for the built-in datasets only: a declared dataset is told
    where its files go."""
    specs = tmp_path / "specs"
    specs.mkdir()
    spec = specs / "clicks.yaml"
    seed = (SEED_DIR / "events.yaml").read_text()
    spec.write_text(
        seed.replace("name: events", "name: clicks")
        .replace("landing/events", "landing/clicks")
        .replace("events_action_", "clicks_action_")
    )
    code = cli.main(["--home", str(config.home), "--datasets", str(specs), "bronze", "clicks"])
    assert code == 2
    landing = config.landing_dir("clicks")
    assert capsys.readouterr().err == (
        f"runoff: error: no landing directory for clicks: {landing} does not exist "
        f"(land its files there, or set source.path in {spec} to their folder)\n"
    )


def test_empty_landing_directory_succeeds_with_zero_rows(
    spark: SparkSession, config: RunoffConfig
) -> None:
    config.landing_dir("lines").mkdir(parents=True)
    record = run_bronze(spark, config, "lines")
    assert (record.status, record.batches, record.files, record.rows) == ("success", 0, 0, 0)
    # The tables exist (empty) for the layers reading them.
    assert table_rows(config.bronze_path("lines")) == []
    assert table_rows(config.quarantine_path("lines")) == []
    assert [r["status"] for r in read_runs(config.runs_path, "lines")] == ["success"]


def test_a_second_run_is_refused_at_once_and_a_dead_holder_is_taken_over(
    spark: SparkSession, config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    files = land(config, "events", files=1, seed=21)
    checkpoint = config.checkpoint_dir("bronze", "events")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from core.locking import checkpoint_lock\n"
            f"with checkpoint_lock(Path({str(checkpoint)!r}), 'runoff bronze events'):\n"
            "    print('locked', flush=True)\n"
            "    time.sleep(600)\n",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        code = cli.main(["--home", str(config.home), "bronze", "events"])
        err = capsys.readouterr().err
        assert code == 3
        assert f"{checkpoint} is in use by pid {holder.pid} on " in err
        assert "(runoff bronze events, since " in err
        assert time.monotonic() - started < 10
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    record = run_bronze(spark, config, "events")  # the dead holder's lock is taken over
    assert record.status == "success"
    assert_tables_hold_exactly(config, "events", files)
    assert [r["status"] for r in read_runs(config.runs_path, "events")] == ["failed", "success"]


def test_checkpoint_of_another_table_or_deleted_checkpoint_is_refused(
    spark: SparkSession, config: RunoffConfig, tmp_path: Path
) -> None:
    files = land(config, "events", files=1, seed=31)
    run_bronze(spark, config, "events")
    before = versions(config, "events")
    events_checkpoint = config.checkpoint_dir("bronze", "events")

    # A checkpoint copied from another table.
    land(config, "sensors", files=1, seed=31)
    shutil.copytree(events_checkpoint, config.checkpoint_dir("bronze", "sensors"))
    with pytest.raises(
        RunoffError,
        match=r"belongs to dataset='events', table='delta/bronze/events', not "
        r"dataset='sensors', table='delta/bronze/sensors': run "
        r"`runoff reset sensors --layer bronze --yes`",
    ):
        run_bronze(spark, config, "sensors")

    # The bronze table deleted while the checkpoint remembers its batches.
    bronze_path = config.bronze_path("events")
    bronze_path.rename(tmp_path / "moved-away")
    with pytest.raises(
        RunoffError,
        match=rf"has committed batches but table {bronze_path} is gone: run "
        r"`runoff reset events --layer bronze --yes`",
    ):
        run_bronze(spark, config, "events")
    (tmp_path / "moved-away").rename(bronze_path)

    # The checkpoint deleted while the table keeps the stream's app transactions.
    shutil.rmtree(events_checkpoint)
    with pytest.raises(
        RunoffError,
        match=r"checkpoint .*events is missing or empty, but .* already holds batches 0\.\.0 of "
        r"stream [0-9a-f-]+: .* run `runoff reset events --layer bronze --yes`",
    ):
        run_bronze(spark, config, "events")
    assert versions(config, "events") == before
    assert_tables_hold_exactly(config, "events", files)
    statuses = [r["status"] for r in read_runs(config.runs_path, "events")]
    assert statuses == ["success", "failed", "failed"]


def test_archive_keeps_the_landing_layout(config: RunoffConfig) -> None:
    """Backfill finds archived files under the same `date=...` folders (see jobs/bronze/job.py)."""
    landing, archived = landing_dirs(config, "events")
    assert archived == archive_dir(config, "events")
    assert archived.parts[-2:] == landing.parts[-2:]
