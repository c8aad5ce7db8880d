"""`runoff status`: pending landing files and the status document.

Tables are written with delta-rs and checkpoints are laid out by hand in Spark's formats
(`commits/<batch>`, the file source's `sources/0/` log with `N.compact` files), so the expected
versions, row counts, batch ids and pending files are known independently of the code.
"""

from __future__ import annotations

import io
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from core.config import RunoffConfig
from delta_tables.catalog import Catalog
from delta_tables.ledger import RunRecord, append_run
from jobs.checkpoints.landing_changes import landing_files
from jobs.cli.main import main
from jobs.ops.status import RUN_DETAILS, RUN_KEYS, collect_status, pending_files
from quality.frames import column_max, max_from_stats
from tests.conftest import take_output
from tests.quality_tables import (
    HOUR,
    INGESTED_AT,
    TS,
    action_counts,
    append,
    append_bronze,
    at,
    bronze_events,
    hourly,
    quarantine_rows,
)

START = 1_709_251_200  # 2024-03-01T00:00:00Z


def write_log(path: Path, entries: list[tuple[str, int]]) -> None:
    """A file-source metadata log file as Spark writes it: `v1`, then one JSON per file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [
        json.dumps({"path": p, "timestamp": 1_700_000_000_000, "batchId": b}) for p, b in entries
    ]
    path.write_text("\n".join(lines))


def land(landing: Path, relative: str, text: str = '{"time": 1, "action": "Open"}\n') -> Path:
    path = landing / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- landing files (the checkpoint's own files: test_checkpoint_files.py) ---------------------
def test_landing_files_skip_hidden_and_underscore_names(tmp_path: Path) -> None:
    landing = tmp_path / "landing" / "events"
    visible = [land(landing, "date=2024-01-01/a.json"), land(landing, "date=2024-01-02/b.json")]
    land(landing, "date=2024-01-01/.a.json.123.tmp")
    land(landing, "date=2024-01-01/_SUCCESS")
    land(landing, "_spark_metadata/0")
    land(landing, ".hidden/c.json")
    assert landing_files(landing) == sorted(visible)
    assert landing_files(tmp_path / "nowhere") == []
    assert pending_files(visible, {os.path.realpath(visible[0])}) == [visible[1]]


# -- the status document ----------------------------------------------------------------------
def build_home(config: RunoffConfig) -> dict[str, object]:
    """Tables, checkpoint, landing files and runs of `events`; returns what status must say."""
    bronze = config.bronze_path("events")
    batches = [[{"time": i, "action": "Open"} for i in range(n)] for n in (3, 5, 7)]
    for rows in batches:
        write_deltalake(str(bronze), pa.Table.from_pylist(rows), mode="append")
    quarantine = config.quarantine_path("events")
    write_deltalake(str(quarantine), pa.table({"_raw": ["{", "[", "x"]}), mode="append")
    write_deltalake(
        str(quarantine), pa.table({"_raw": ["y"]}), mode="overwrite"
    )  # overwrite: 1 row left at version 1

    landing = config.landing_dir("events")
    files = [land(landing, f"date=2024-01-0{i}/part-{i}.json") for i in range(1, 5)]
    checkpoint = config.checkpoint_dir("bronze", "events")
    write_log(checkpoint / "sources" / "0" / "0", [(files[0].as_uri(), 0)])
    write_log(checkpoint / "sources" / "0" / "1", [(files[1].as_uri(), 1)])
    (checkpoint / "commits").mkdir(parents=True)
    for batch in (0, 1):
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    silver_ckpt = config.checkpoint_dir("silver", "events_action_hourly") / "commits"
    silver_ckpt.mkdir(parents=True)
    (silver_ckpt / "0").write_text("v1\n{}")

    start = datetime(2024, 1, 1, tzinfo=UTC)
    for i in range(7):
        record = RunRecord(dataset="events", layer="bronze", started_at=start + timedelta(hours=i))
        record.rows = i
        append_run(config.runs_path, record.finish())
    append_run(config.runs_path, RunRecord(dataset="lines", layer="bronze").finish())
    return {
        "versions": [2, 1, None, None],
        "rows": [sum(len(b) for b in batches), 1, None, None],
        "last_batch_ids": [1, 1, 0, None],
        "pending": [str(f.relative_to(landing)) for f in files[2:]],
        "run_rows": [6, 5, 4, 3, 2],
    }


def test_collect_status_reports_exact_facts(config: RunoffConfig) -> None:
    want = build_home(config)
    doc = collect_status(config, "events")
    assert [t["table"] for t in doc["tables"]] == [
        "bronze_events",
        "quarantine_events",
        "events_action_hourly",
        "events_action_sliding",
    ]
    assert [t["version"] for t in doc["tables"]] == want["versions"]
    assert [t["rows"] for t in doc["tables"]] == want["rows"]
    assert [t["last_batch_id"] for t in doc["tables"]] == want["last_batch_ids"]
    assert [t["exists"] for t in doc["tables"]] == [True, True, False, False]
    assert doc["tables"][0]["files"] == 3
    assert doc["landing"]["files"] == 4
    assert doc["landing"]["pending"] == 2
    assert doc["landing"]["pending_files"] == want["pending"]
    # The log says the ingested files had another modification time: changed since.
    assert [(c["file"], c["location"], c["backfill"]) for c in doc["landing"]["changed_files"]] == [
        (
            "date=2024-01-01/part-1.json",
            "landing",
            "runoff backfill events --start 2024-01-01 --end 2024-01-02",
        ),
        (
            "date=2024-01-02/part-2.json",
            "landing",
            "runoff backfill events --start 2024-01-02 --end 2024-01-03",
        ),
    ]
    assert doc["landing"]["changed_files"][0]["recorded_modified_at"] == (
        "2023-11-14T22:13:20.000+00:00"
    )
    assert [r["rows"] for r in doc["runs"]] == want["run_rows"]  # newest first, events only
    assert all(tuple(r) == (*RUN_KEYS, *RUN_DETAILS) for r in doc["runs"])
    assert [t.checkpoint for t in Catalog.load(config).tables("events")][:2] == [
        config.checkpoint_dir("bronze", "events")
    ] * 2


def test_status_json_through_the_cli(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    want = build_home(config)
    assert main(["--home", str(config.home), "status", "events", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["dataset", "home", "data", "tables", "landing", "runs"]
    assert doc["data"] == str(config.home)  # RUNOFF_DATA unset: the data lives in the home
    assert list(doc["tables"][0]) == [
        "table",
        "layer",
        "path",
        "exists",
        "version",
        "rows",
        "files",
        "checkpoint",
        "last_batch_id",
        "newest_event_column",
        "newest_event_time",
        "last_commit_at",
    ]
    assert list(doc["landing"]) == [
        "path",
        "files",
        "pending",
        "pending_files",
        "oldest_pending_file",
        "oldest_pending_modified_at",
        "changed_files",
    ]
    assert [t["version"] for t in doc["tables"]] == want["versions"]
    assert doc["runs"][0]["started_at"] == "2024-01-01T06:00:00+00:00"


def test_status_table_for_people(config: RunoffConfig, capsys: pytest.CaptureFixture[str]) -> None:
    build_home(config)
    assert main(["--home", str(config.home), "status", "events"]) == 0
    out = capsys.readouterr().out
    assert "bronze_events" in out and "events_action_sliding" in out
    assert "4 files, 2 pending" in out
    assert (
        "changed after ingestion: date=2024-01-01/part-1.json (landing, 30 bytes, modified " in out
    )
    assert "runoff backfill events --start 2024-01-01 --end 2024-01-02\n" in out
    assert "last runs (newest first)" in out


def test_status_of_an_empty_home(config: RunoffConfig) -> None:
    doc = collect_status(config, "lines")
    assert [(t["version"], t["rows"], t["last_batch_id"]) for t in doc["tables"]] == [
        (None, None, None)
    ] * 3
    assert doc["landing"] == {
        "path": str(config.landing_dir("lines")),
        "files": 0,
        "pending": 0,
        "pending_files": [],
        "oldest_pending_file": None,
        "oldest_pending_modified_at": None,
        "changed_files": [],
    }
    assert [
        (t["newest_event_column"], t["newest_event_time"], t["last_commit_at"])
        for t in doc["tables"]
    ] == [("event_time", None, None), ("_ingested_at", None, None), (None, None, None)]
    assert doc["runs"] == []


# -- freshness: newest event, last commit, oldest pending landing file ---------------------------
def commit_time(path: Path) -> str:
    """The commitInfo timestamp of the table's latest commit file, read from the log by hand."""
    log = sorted((path / "_delta_log").glob("*.json"))[-1]
    for line in log.read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            millis = action["commitInfo"]["timestamp"]
            return datetime.fromtimestamp(millis / 1000, UTC).isoformat()
    raise AssertionError(f"no commitInfo in {log}")


def set_mtime(path: Path, moment: datetime) -> None:
    os.utime(path, (moment.timestamp(), moment.timestamp()))


def build_fresh_home(config: RunoffConfig) -> dict[str, object]:
    """events tables with known event times, landing files with known modification times."""
    bronze = config.bronze_path("events")
    first = [START + 7200, START]  # the newest event of the table is in the first file
    append_bronze(bronze, bronze_events(first, ["Open", "Close"], batch_id=0))
    append_bronze(bronze, bronze_events([START + 3600], ["Open"], batch_id=1))
    append(config.quarantine_path("events"), quarantine_rows(2))
    hourly_path = config.silver_path("events_action_hourly")
    append(hourly_path, action_counts([hourly(0, "Open", 1), hourly(3, "Close", 1)]))
    append(hourly_path, action_counts([hourly(1, "Open", 2)]))

    landing = config.landing_dir("events")
    ingested = land(landing, "date=2024-01-01/a.json")
    late = land(landing, "date=2024-01-02/b.json")
    early = land(landing, "date=2024-01-03/c.json")
    set_mtime(ingested, datetime(2024, 1, 1, tzinfo=UTC))  # oldest, but already ingested
    set_mtime(late, datetime(2024, 3, 2, 8, 30, tzinfo=UTC))
    set_mtime(early, datetime(2024, 3, 1, 23, 15, 5, tzinfo=UTC))
    checkpoint = config.checkpoint_dir("bronze", "events")
    write_log(checkpoint / "sources" / "0" / "0", [(ingested.as_uri(), 0)])
    return {
        "newest": [
            datetime.fromtimestamp(max(first), UTC).isoformat(),  # 2024-03-01T02:00:00+00:00
            INGESTED_AT.isoformat(),
            (at(3) + HOUR).isoformat(),  # window_end of the 03:00 window
            None,
        ],
        "commits": [
            commit_time(bronze),
            commit_time(config.quarantine_path("events")),
            commit_time(hourly_path),
            None,
        ],
        "oldest": "date=2024-01-03/c.json",
        "oldest_at": "2024-03-01T23:15:05+00:00",
    }


def test_status_reports_newest_event_last_commit_and_oldest_pending_file(
    config: RunoffConfig,
) -> None:
    want = build_fresh_home(config)
    doc = collect_status(config, "events")
    assert want["newest"][:3] == [
        "2024-03-01T02:00:00+00:00",
        "2024-03-01T12:00:00+00:00",
        "2024-03-01T04:00:00+00:00",
    ]
    assert [t["newest_event_column"] for t in doc["tables"]] == [
        "event_time",
        "_ingested_at",
        "window_end",
        "window_end",
    ]
    assert [t["newest_event_time"] for t in doc["tables"]] == want["newest"]
    assert [t["last_commit_at"] for t in doc["tables"]] == want["commits"]
    assert doc["landing"]["pending_files"] == ["date=2024-01-02/b.json", "date=2024-01-03/c.json"]
    assert doc["landing"]["oldest_pending_file"] == want["oldest"]
    assert doc["landing"]["oldest_pending_modified_at"] == want["oldest_at"]


def test_status_freshness_in_the_json_and_the_table(
    config: RunoffConfig,
    capsys: pytest.CaptureFixture[str],
    console_output: io.StringIO,
) -> None:
    want = build_fresh_home(config)
    assert main(["--home", str(config.home), "status", "events", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [t["newest_event_time"] for t in doc["tables"]] == want["newest"]
    assert [t["last_commit_at"] for t in doc["tables"]] == want["commits"]
    assert doc["landing"]["oldest_pending_file"] == want["oldest"]

    assert main(["--home", str(config.home), "status", "events"]) == 0
    out = take_output(console_output)
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    bronze_commit = datetime.fromisoformat(str(want["commits"][0])).strftime("%Y-%m-%d %H:%M:%S")
    assert "newest event UTC" in out and "last commit UTC" in out
    assert "2024-03-01 02:00:00" in rows["bronze_events"]
    assert bronze_commit in rows["bronze_events"]
    assert "2024-03-01 12:00:00" in rows["quarantine_events"]
    assert "2024-03-01 04:00:00" in rows["events_action_hourly"]
    assert "oldest pending file date=2024-01-03/c.json (modified 2024-03-01 23:15:05 UTC)" in out


def test_status_piped_keeps_every_column_whole(
    config: RunoffConfig, console_output: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped (no terminal to fit), the tables are as wide as their cells, not 80 or 120
    columns with the last commit cut."""
    from core.console import console

    want = build_fresh_home(config)
    monkeypatch.setattr(console, "width", 80)
    assert main(["--home", str(config.home), "status", "events"]) == 0
    out = take_output(console_output)
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    for table, commit in zip(
        ("bronze_events", "quarantine_events", "events_action_hourly"),
        want["commits"],
        strict=False,
    ):
        when = datetime.fromisoformat(str(commit)).strftime("%Y-%m-%d %H:%M:%S")
        assert when in rows[table], (table, rows[table])
    assert "…" not in out


def test_running_totals_have_no_newest_event(config: RunoffConfig) -> None:
    path = config.silver_path("lines_word_counts")
    append(path, pa.table({"word": ["the", "cat"], "count": pa.array([2, 1], pa.int64())}))
    (_, _, totals) = collect_status(config, "lines")["tables"]
    assert (totals["newest_event_column"], totals["newest_event_time"]) == (None, None)
    assert totals["last_commit_at"] == commit_time(path)


def test_newest_event_from_statistics_or_from_the_column(
    config: RunoffConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Statistics hold milliseconds (Delta truncates them); without statistics the column is
    read (microseconds); with statistics it is not read at all."""
    moment = datetime(2024, 3, 1, 5, 6, 7, 891_234, tzinfo=UTC)
    rows = pa.table({"_raw": ["x", "y"], "_ingested_at": pa.array([moment, at(1)], TS)})
    with_stats = config.quarantine_path("events")
    write_deltalake(str(with_stats), rows)
    without = config.quarantine_path("lines")
    write_deltalake(str(without), rows, configuration={"delta.dataSkippingNumIndexedCols": "1"})
    actions = pa.table(DeltaTable(str(without)).get_add_actions(flatten=True))
    assert "max._ingested_at" not in actions.column_names  # really no statistics
    assert max_from_stats(actions, "_ingested_at") == (False, None)

    newest = {
        name: collect_status(config, name)["tables"][1]["newest_event_time"]
        for name in ("events", "lines")
    }
    assert newest == {
        "events": "2024-03-01T05:06:07.891000+00:00",
        "lines": "2024-03-01T05:06:07.891234+00:00",
    }

    import deltalake

    def no_scan() -> None:
        raise AssertionError("the column was read although statistics cover every file")

    monkeypatch.setattr(deltalake, "QueryBuilder", no_scan)
    assert column_max(DeltaTable(str(with_stats)), "_ingested_at") == datetime(
        2024, 3, 1, 5, 6, 7, 891_000, tzinfo=UTC
    )


def test_max_from_stats() -> None:
    actions = pa.table(
        {
            "path": ["a", "b", "c"],
            "num_records": [2, 3, 1],
            "null_count.x": [0, 3, 1],
            "max.x": [5, None, None],
        }
    )
    assert max_from_stats(actions, "x") == (True, 5)  # b and c hold only nulls
    assert max_from_stats(actions.slice(1), "x") == (True, None)
    partial = actions.set_column(2, "null_count.x", pa.array([0, 2, 1]))
    assert max_from_stats(partial, "x") == (False, None)  # b has values but no max
    assert max_from_stats(actions.slice(0, 0), "x") == (True, None)  # no files: no events
    assert max_from_stats(actions, "y") == (False, None)
