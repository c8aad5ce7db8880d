"""Operations commands: `runoff reset`, `runoff maintain` and `runoff run`.

reset needs no Spark: its tables are written with delta-rs and checkpoints are directories with
a few files, so what must be deleted or kept is known exactly. maintain runs OPTIMIZE and VACUUM
through delta-spark on tables delta-spark wrote. `run` goes end
to end on a small generated dataset with the shared SparkSession, compared with
tests/expected.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from core.config import RunoffConfig
from core.locking import checkpoint_lock, lock_path
from delta_tables.arrow import read_arrow
from delta_tables.ledger import RunRecord, append_run, read_runs
from delta_tables.writes import table_version
from jobs.bronze.job import archive_dir
from jobs.cli.main import main
from jobs.ops.maintain import format_bytes
from jobs.samples import generate_dataset
from tests import expected

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SILVER = ("events_action_hourly", "events_action_sliding")


def cli(home: Path, *args: str) -> int:
    return main(["--home", str(home), *args])


def make_table(path: Path, appends: int = 1, rows: int = 3) -> None:
    for i in range(appends):
        data = pa.table({"k": list(range(i * rows, (i + 1) * rows)), "v": [f"r{i}"] * rows})
        write_deltalake(str(path), data, mode="append")


def make_checkpoint(path: Path) -> None:
    (path / "commits").mkdir(parents=True)
    (path / "commits" / "0").write_text("v1\n{}")
    (path / "metadata").write_text('{"id": "3f0e"}')


def build_events_home(config: RunoffConfig) -> dict[str, Path]:
    """Every table and checkpoint of `events`, a landing file and a ledger row."""
    paths = {
        "bronze": config.bronze_path("events"),
        "quarantine": config.quarantine_path("events"),
        "bronze_ckpt": config.checkpoint_dir("bronze", "events"),
        "landing": config.landing_dir("events") / "date=2024-01-01" / "a.json",
    }
    for table in SILVER:
        paths[table] = config.silver_path(table)
        paths[f"{table}_ckpt"] = config.checkpoint_dir("silver", table)
    for key, path in paths.items():
        if key.endswith("_ckpt"):
            make_checkpoint(path)
        elif key == "landing":
            path.parent.mkdir(parents=True)
            path.write_text('{"time": 1, "action": "Open"}\n')
        else:
            make_table(path)
    make_table(config.bronze_path("lines"))  # another dataset: never touched
    return paths


# -- reset ----------------------------------------------------------------------------------------
def test_reset_refuses_without_yes(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = build_events_home(config)
    assert cli(config.home, "reset", "events", "--layer", "silver") == 1
    err = capsys.readouterr().err
    assert err == (
        "runoff: error: reset events --layer silver deletes tables events_action_hourly, "
        "events_action_sliding and their checkpoints: add --yes to confirm\n"
    )
    assert all(p.exists() for p in paths.values())


def test_reset_silver_deletes_exactly_the_silver_tables_and_checkpoints(
    config: RunoffConfig,
) -> None:
    paths = build_events_home(config)
    assert cli(config.home, "reset", "events", "--layer", "silver", "--yes") == 0
    gone = {k for k, p in paths.items() if not p.exists()}
    assert gone == {*SILVER, *(f"{t}_ckpt" for t in SILVER)}
    assert DeltaTable(str(config.bronze_path("lines"))).version() == 0
    (run,) = read_runs(config.runs_path, "events")
    assert (run["layer"], run["trigger"], run["status"]) == ("reset", "silver", "success")
    assert json.loads(run["versions_before"]) == dict.fromkeys(SILVER, 0)
    assert sorted(json.loads(run["details"])["deleted"]) == sorted(str(paths[k]) for k in gone)


def test_reset_bronze_resets_silver_too(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = build_events_home(config)
    archive = archive_dir(config, "events")
    for name in ("a.json", "b.json"):  # a.json was delivered again: its landing copy wins
        (archive / "date=2024-01-01").mkdir(parents=True, exist_ok=True)
        (archive / "date=2024-01-01" / name).write_text(f'{{"time": 2, "action": "{name}"}}\n')
    assert cli(config.home, "reset", "events", "--layer", "bronze", "--yes") == 0
    out = capsys.readouterr().out
    assert "resetting bronze resets silver too" in out
    assert {k for k, p in paths.items() if p.exists()} == {"landing"}
    day = config.landing_dir("events") / "date=2024-01-01"
    assert sorted(p.name for p in day.iterdir()) == ["a.json", "b.json"]
    assert (day / "a.json").read_text() == '{"time": 1, "action": "Open"}\n'
    assert [p.name for p in (archive / "date=2024-01-01").iterdir()] == ["a.json"]
    (run,) = read_runs(config.runs_path, "events")
    assert run["files"] == 1
    # the locks stay beside the (deleted) checkpoints, for the next run to take
    assert lock_path(config.checkpoint_dir("bronze", "events")).exists()
    assert config.bronze_path("lines").exists()


def test_reset_waits_for_no_one(config: RunoffConfig, capsys: pytest.CaptureFixture[str]) -> None:
    paths = build_events_home(config)
    with checkpoint_lock(config.checkpoint_dir("silver", SILVER[1]), "runoff silver events"):
        assert cli(config.home, "reset", "events", "--layer", "all", "--yes") == 3
    err = capsys.readouterr().err
    assert err.startswith(
        f"runoff: error: {config.checkpoint_dir('silver', SILVER[1])} is in use by pid "
    )
    assert "(runoff silver events, since " in err
    assert all(p.exists() for p in paths.values())


# -- maintain -------------------------------------------------------------------------------------
@pytest.mark.spark
def test_maintain_compacts_checkpoints_and_vacuums(
    spark: SparkSession,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RUNOFF_VACUUM_RETENTION_HOURS", "0")  # the CLI reads the environment
    config = RunoffConfig.from_sources(home=home)
    bronze = config.bronze_path("events")
    for day in ("2024-01-01", "2024-01-02"):
        for i in range(3):
            rows = [(day, n) for n in range(i * 4, i * 4 + 4)]
            spark.createDataFrame(rows, "event_date string, n long").coalesce(1).write.format(
                "delta"
            ).mode("append").partitionBy("event_date").save(str(bronze))
    for i in range(4):
        rows = [(k, f"r{i}") for k in range(i * 3, i * 3 + 3)]
        spark.createDataFrame(rows, "k long, v string").coalesce(1).write.format("delta").mode(
            "append"
        ).save(str(config.silver_path("events_action_hourly")))
    before = DeltaTable(str(bronze))
    small = pa.table(before.get_add_actions())
    small_bytes = sum(small.column("size_bytes").to_pylist())
    rows = sorted(read_arrow(before).to_pylist(), key=repr)
    assert (len(before.file_uris()), before.version()) == (6, 5)

    assert cli(config.home, "maintain", "events") == 0
    after = DeltaTable(str(bronze))
    assert len(after.file_uris()) == 2  # one file per partition
    assert after.version() == 6  # the compaction; VACUUM adds no version
    assert sorted(read_arrow(after).to_pylist(), key=repr) == rows
    last = json.loads((bronze / "_delta_log" / "_last_checkpoint").read_text())
    assert last["version"] == 6
    out = capsys.readouterr().out
    assert (
        f"maintain bronze_events: files 6 -> 2, version 5 -> 6 (checkpoint written), vacuum "
        f"removed 6 files, {format_bytes(small_bytes)}"
    ) in out
    assert "maintain quarantine_events: no table yet, nothing to do" in out
    assert "maintain events_action_hourly: files 4 -> 1, version 3 -> 4" in out
    (run,) = [r for r in read_runs(config.runs_path, "events") if r["layer"] == "maintain"]
    details = json.loads(run["details"])["tables"]
    assert details["bronze_events"]["bytes_removed"] == small_bytes
    assert details["bronze_events"]["files_removed"] == 6

    # a second run finds nothing to do
    assert cli(config.home, "maintain", "events") == 0
    again = DeltaTable(str(bronze))
    assert (len(again.file_uris()), again.version()) == (2, 6)
    assert (
        "maintain bronze_events: files 2 -> 2, version 6 -> 6 (checkpoint already there), "
        "vacuum removed 0 files, 0 B" in capsys.readouterr().out
    )


@pytest.mark.spark
def test_maintain_leaves_the_ledger_to_a_concurrent_maintain(
    spark: SparkSession, config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        append_run(config.runs_path, RunRecord(dataset="lines", layer="bronze").finish())
    with checkpoint_lock(config.runs_path, "runoff maintain sensors (ledger)"):
        assert cli(config.home, "maintain", "events") == 0
    assert "maintain ops_runs: another maintain is at it right now, skipped" in (
        capsys.readouterr().out
    )
    ledger = DeltaTable(str(config.runs_path))
    assert (ledger.version(), len(ledger.file_uris())) == (2, 3)  # only our own row added
    assert cli(config.home, "maintain", "events") == 0
    assert "maintain ops_runs: files 3 -> 1, version 2 -> 3 (checkpoint written)" in (
        capsys.readouterr().out
    )


@pytest.mark.spark
def test_maintain_compacts_the_quality_results_history(
    spark: SparkSession, config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import UTC, datetime

    from quality.history import ResultRow, append_results, read_results

    path = config.quality_dir / "results"
    rows = [
        ResultRow(
            f"run{i}",
            "lines",
            "bronze_lines",
            "id",
            "bronze",
            "s",
            "e",
            "critical",
            True,
            "0 of 1 unexpected",
            None,
            i,
            False,
            1,
            True,
            datetime(2024, 1, 1, tzinfo=UTC),
        )
        for i in range(3)
    ]
    for row in rows:
        append_results(path, [row])
    assert (DeltaTable(str(path)).version(), len(DeltaTable(str(path)).file_uris())) == (2, 3)

    assert cli(config.home, "maintain", "events") == 0

    assert "maintain quality_history: files 3 -> 1, version 2 -> 3 (checkpoint written)" in (
        capsys.readouterr().out
    )
    assert sorted(r["run_id"] for r in read_results(path)) == ["run0", "run1", "run2"]
    with checkpoint_lock(path, "runoff maintain sensors (quality_history)"):
        assert cli(config.home, "maintain", "events") == 0
    assert "maintain quality_history: another maintain is at it right now, skipped" in (
        capsys.readouterr().out
    )


@pytest.mark.spark
def test_maintain_compacts_the_batch_metrics_and_keeps_their_rows(
    spark: SparkSession, config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import UTC, datetime

    from quality.history import MetricRow, append_metrics, read_metrics

    path = config.quality_metrics_path
    at = datetime(2024, 1, 1, tzinfo=UTC)
    for i in range(3):
        append_metrics(
            path, [MetricRow(f"run{i}", "lines", "bronze_lines", i, "rows_in", i, at, at)]
        )
    assert (DeltaTable(str(path)).version(), len(DeltaTable(str(path)).file_uris())) == (2, 3)

    assert cli(config.home, "maintain", "events") == 0

    assert "maintain quality_metrics: files 3 -> 1, version 2 -> 3 (checkpoint written)" in (
        capsys.readouterr().out
    )
    rows = read_metrics(path, "lines")
    assert [(r["run_id"], r["batch_id"], r["value"]) for r in rows] == [
        (f"run{i}", i, float(i)) for i in range(3)
    ]


def test_format_bytes() -> None:
    assert [format_bytes(n) for n in (0, 1023, 1024, 1536, 5 * 1024**2, 3 * 1024**3)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.5 KiB",
        "5.0 MiB",
        "3.0 GiB",
    ]


# -- run ----------------------------------------------------------------------------------------
@pytest.mark.spark
@pytest.mark.slow
def test_run_end_to_end(
    spark: Any, config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    generate_dataset(config, "events", files=2, rows_per_file=60, seed=7, malformed_rate=0.05)
    files = expected.read_landing("events", config.landing_dir("events"))
    records = expected.valid_records(files)

    assert cli(config.home, "run", "events") == 0

    bronze = read_arrow(str(config.bronze_path("events")))
    assert sorted(zip(bronze["time"].to_pylist(), bronze["action"].to_pylist(), strict=True)) == (
        sorted((r["time"], r["action"]) for r in records)
    )
    quarantine = read_arrow(str(config.quarantine_path("events")))
    assert quarantine.num_rows == len(expected.malformed_lines(files))
    for table in SILVER:
        got = read_arrow(str(config.silver_path(table))).to_pylist()
        key = ("window_start", "window_end", "action")
        assert sorted(got, key=lambda r: tuple(r[k] for k in key)) == expected.SILVER[table](
            records
        )
    runs = read_runs(config.runs_path, "events")
    assert [(r["layer"], r["status"]) for r in runs] == [
        ("bronze", "success"),
        ("silver", "success"),
        ("validate", "success"),
    ]

    # an action that is neither Open nor Close is a valid record but fails a critical check:
    # the gate holds the batch back before bronze commits, so silver and validate do not run
    bronze_version = table_version(config.bronze_path("events"))
    odd = config.landing_dir("events") / "date=2024-01-01" / "part-odd.json"
    odd.write_text('{"time": 1704067300, "action": "Jump"}\n')
    capsys.readouterr()
    assert cli(config.home, "run", "events") == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "runoff: error: critical expectation failed on bronze_events in batch 1: "
        "column_values_to_be_in_set(action, value_set=[Open, Close]): observed 1 of 1 "
        "unexpected: Jump. Nothing of the batch was committed"
    )
    assert err.count("\n") == 1
    assert table_version(config.bronze_path("events")) == bronze_version
    assert [(r["layer"], r["status"]) for r in read_runs(config.runs_path, "events")[3:]] == [
        ("bronze", "failed"),
    ]
