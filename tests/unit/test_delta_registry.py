"""The table registry and maintenance (compaction, checkpoints, vacuum, history)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from delta_tables import maintenance
from delta_tables.arrow import read_arrow
from delta_tables.registry import ensure_tables, table_spec, table_specs
from delta_tables.schema import strip_metadata, table_struct
from jobs.config import RunoffConfig
from jobs.datasets import DATASETS
from jobs.datasets.base import QUARANTINE_SCHEMA


def test_ensure_tables_creates_bronze_quarantine_and_runs_once(config: RunoffConfig) -> None:
    events = DATASETS["events"]
    created = ensure_tables(config, "events")
    assert [s.name for s in created] == ["bronze_events", "quarantine_events", "runs"]
    assert ensure_tables(config, "events") == []
    bronze = DeltaTable(str(config.bronze_path("events")))
    assert strip_metadata(table_struct(bronze)) == events.full_bronze_schema
    assert bronze.metadata().partition_columns == ["event_date"]
    assert bronze.metadata().name == "bronze_events"
    quarantine = DeltaTable(str(config.quarantine_path("events")))
    assert strip_metadata(table_struct(quarantine)) == QUARANTINE_SCHEMA
    assert quarantine.metadata().partition_columns == ["ingest_date"]
    assert DeltaTable(str(config.runs_path)).version() == 0
    # Silver tables are created by their first MERGE.
    silver = [s for s in table_specs(config, "events") if s.layer == "silver"]
    assert [s.name for s in silver] == [a.table for a in events.aggregates]
    assert all(s.schema is None and not s.exists for s in silver)
    assert table_spec(config, "events", "events_action_hourly").keys == (
        "window_start",
        "window_end",
        "action",
    )


def test_every_dataset_has_a_valid_registry(config: RunoffConfig) -> None:
    for name in DATASETS:
        specs = table_specs(config, name)
        assert specs[0].path == config.bronze_path(name)
        assert specs[1].path == config.quarantine_path(name)
        assert all(s.path.is_relative_to(config.home) for s in specs)


def _append(path: Path, n: int) -> None:
    write_deltalake(str(path), pa.table({"id": pa.array([n], pa.int64())}), mode="append")


def test_compaction_checkpoint_vacuum_and_history(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for n in range(6):
        _append(table, n)
    assert maintenance.checkpoint_if_due(str(table), interval=10).created is False
    compacted = maintenance.compact(str(table))
    assert (compacted.files_removed, compacted.files_added) == (6, 1)
    assert sorted(read_arrow(str(table)).column("id").to_pylist()) == list(range(6))
    due = maintenance.checkpoint_if_due(str(table), interval=5)
    assert due.created and due.version == 6
    assert json.loads((table / "_delta_log" / "_last_checkpoint").read_text())["version"] == 6
    dry = maintenance.vacuum(str(table), retention_hours=0, dry_run=True)
    assert len(dry.files) == 6 and "would delete 6" in dry.line()
    done = maintenance.vacuum(str(table), retention_hours=0)
    assert sorted(done.files) == sorted(dry.files)
    assert len(list(table.glob("*.parquet"))) == 1
    history = maintenance.history(str(table), limit=3)
    assert [h["version"] for h in history.entries] == [8, 7, 6][: len(history.entries)]
    assert "history" in history.line() and "\n" not in maintenance.maintain(str(table)).line()
