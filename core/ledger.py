"""The run ledger `delta/ops/runs`: one row per job run (bronze, silver, validate, backfill...).

A run's record and the table's schema; `delta_tables.ops.append_run` appends it (through
delta-spark; a command without a SparkSession parks its row until the next Spark run commits it),
so every command, failed ones included, records itself. Read it with `delta_tables.ops.read_runs`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

RUNS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("dataset", pa.string()),
        pa.field("layer", pa.string()),
        pa.field("trigger", pa.string()),
        pa.field("started_at", pa.timestamp("us", tz="UTC")),
        pa.field("ended_at", pa.timestamp("us", tz="UTC")),
        pa.field("seconds", pa.float64()),
        pa.field("batches", pa.int64()),
        pa.field("files", pa.int64()),
        pa.field("rows", pa.int64()),
        pa.field("quarantined", pa.int64()),
        pa.field("late_rows", pa.int64()),
        # JSON objects {table: version}; -1 for a table that did not exist yet.
        pa.field("versions_before", pa.string()),
        pa.field("versions_after", pa.string()),
        pa.field("status", pa.string()),
        pa.field("error", pa.string()),
        pa.field("details", pa.string()),
    ]
)

RUN_KEY = ("run_id",)


def new_run_id() -> str:
    return uuid.uuid4().hex


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class RunRecord:
    """A run in progress; `finish()` stamps the end and the status."""

    dataset: str
    layer: str
    trigger: str = ""
    run_id: str = field(default_factory=new_run_id)
    started_at: datetime = field(default_factory=utcnow)
    ended_at: datetime | None = None
    batches: int = 0
    files: int = 0
    rows: int = 0
    quarantined: int = 0
    late_rows: int = 0
    versions_before: dict[str, int] = field(default_factory=dict)
    versions_after: dict[str, int] = field(default_factory=dict)
    status: str = "running"
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        end = self.ended_at or utcnow()
        return (end - self.started_at).total_seconds()

    def finish(self, status: str = "success", error: str | None = None) -> RunRecord:
        self.ended_at = utcnow()
        self.status = status
        self.error = error
        return self

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row["seconds"] = self.seconds
        row["versions_before"] = json.dumps(self.versions_before, sort_keys=True)
        row["versions_after"] = json.dumps(self.versions_after, sort_keys=True)
        row["details"] = json.dumps(self.details, sort_keys=True, default=str)
        return row
