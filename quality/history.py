"""The results history `<home>/quality/results`: one row per expectation per validated table.

Written with delta-rs (no Spark), one append per `validate` run. Besides trends, it is where the
increments start: the last version of a table validated *successfully* (no critical failure) is
the exclusive start of its next increment, so a failed validation is repeated (and keeps failing)
until new data fixes the table, and a retried Airflow task cannot pass by finding "no new data".
A table recreated by `reset` has a new Delta table id and starts again from a full validation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from delta_tables.arrow import equals, read_arrow
from quality.increments import Watermark

RESULTS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("dataset", pa.string()),
        pa.field("table", pa.string()),
        pa.field("table_id", pa.string()),
        pa.field("layer", pa.string()),
        pa.field("suite", pa.string()),
        pa.field("expectation", pa.string()),
        pa.field("severity", pa.string()),
        pa.field("success", pa.bool_()),
        pa.field("observed", pa.string()),
        # The validated versions: (from_version, to_version]; from_version null = whole table.
        pa.field("from_version", pa.int64()),
        pa.field("to_version", pa.int64()),
        pa.field("full", pa.bool_()),
        pa.field("rows", pa.int64()),
        # No critical expectation of this table failed in this run.
        pa.field("table_passed", pa.bool_()),
        pa.field("validated_at", pa.timestamp("us", tz="UTC")),
    ]
)
# Compact the history and checkpoint its log every this many commits (one commit per run).
MAINTAIN_EVERY = 50


@dataclass(frozen=True)
class ResultRow:
    run_id: str
    dataset: str
    table: str
    table_id: str
    layer: str
    suite: str
    expectation: str
    severity: str
    success: bool
    observed: str
    from_version: int | None
    to_version: int
    full: bool
    rows: int
    table_passed: bool
    validated_at: datetime


def append_results(path: Path, rows: Sequence[ResultRow]) -> None:
    """Append one validate run's rows (creating the table on first use)."""
    from deltalake import DeltaTable, write_deltalake

    if not rows:
        return
    data = pa.Table.from_pylist([asdict(r) for r in rows], schema=RESULTS_SCHEMA)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_deltalake(str(path), data, mode="append")
    table = DeltaTable(str(path))
    if table.version() > 0 and table.version() % MAINTAIN_EVERY == 0:
        table.optimize.compact()
        table.create_checkpoint()


def _read(path: Path, where: list[str], columns: list[str] | None) -> pa.Table:
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(str(path)):
        return RESULTS_SCHEMA.empty_table().select(columns or RESULTS_SCHEMA.names)
    return read_arrow(str(path), columns, where)


def read_results(
    path: Path, dataset: str | None = None, table: str | None = None
) -> list[dict[str, Any]]:
    """History rows (optionally of one dataset / table), oldest first."""
    wanted = {"dataset": dataset, "table": table}
    where = [equals(column, value) for column, value in wanted.items() if value is not None]
    rows: list[dict[str, Any]] = _read(path, where, None).to_pylist()
    return sorted(rows, key=lambda r: (r["validated_at"], r["table"]))


def last_validated(path: Path, dataset: str) -> dict[str, Watermark]:
    """Per table of `dataset`: the version and table id of its last successful validation."""
    data = _read(
        path,
        [equals("dataset", dataset), equals("table_passed", True)],
        ["table", "table_id", "to_version", "validated_at"],
    )
    latest: dict[str, tuple[datetime, int, str]] = {}
    for row in data.to_pylist():
        candidate = (row["validated_at"], row["to_version"], row["table_id"])
        if row["table"] not in latest or candidate[:2] > latest[row["table"]][:2]:
            latest[row["table"]] = candidate
    return {
        table: Watermark(version=version, table_id=table_id)
        for table, (_, version, table_id) in latest.items()
    }
