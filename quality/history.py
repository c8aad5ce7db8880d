"""The results history `<home>/quality/results`: one row per expectation per validated table,
and one per expectation per micro-batch the gate checked before its commit (`batch_id` set, with
the rows evaluated, failed and quarantined: `quality.gate.batch_rows`).

Appended through delta-spark (parked until the next Spark run when `validate` runs without a
SparkSession: `delta_tables.ops`), one append per `validate` run. Besides trends, it is where the
increments start: the last version of a table validated *successfully* (no critical failure) is
the exclusive start of its next increment, so a failed validation is repeated (and keeps failing)
until new data fixes the table, and a retried Airflow task cannot pass by finding "no new data".
A table recreated by `reset` has a new Delta table id and starts again from a full validation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from core.config import Location
from quality.anomalies import MetricHistory
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
        # Gate rows (`quality.gate`): the micro-batch and its counts; null for `validate` rows.
        pa.field("batch_id", pa.int64()),
        pa.field("evaluated", pa.int64()),
        pa.field("failed", pa.int64()),
        pa.field("quarantined", pa.int64()),
    ]
)

RESULT_KEY = ("run_id", "table", "suite", "expectation")


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
    batch_id: int | None = None
    evaluated: int | None = None
    failed: int | None = None
    quarantined: int | None = None


def append_results(path: Location, rows: Sequence[ResultRow]) -> None:
    """Append one validate run's rows (creating the table on first use)."""
    from delta_tables.ops import append_rows

    if not rows:
        return
    data = pa.Table.from_pylist([asdict(r) for r in rows], schema=RESULTS_SCHEMA)
    append_rows(path, data, RESULT_KEY)


def _read(path: Location, equal: dict[str, str | bool], columns: list[str] | None) -> pa.Table:
    from delta_tables.ops import read_rows

    return read_rows(path, RESULTS_SCHEMA, RESULT_KEY, columns, equal)


def read_results(
    path: Location, dataset: str | None = None, table: str | None = None
) -> list[dict[str, Any]]:
    """History rows (optionally of one dataset / table), oldest first."""
    wanted = {"dataset": dataset, "table": table}
    equal: dict[str, str | bool] = {k: v for k, v in wanted.items() if v is not None}
    rows: list[dict[str, Any]] = _read(path, equal, None).to_pylist()
    return sorted(rows, key=lambda r: (r["validated_at"], r["table"]))


def last_validated(path: Location, dataset: str) -> dict[str, Watermark]:
    """Per table of `dataset`: the version and table id of its last successful validation (the
    gate's batch rows are not validations of the table)."""
    data = _read(
        path,
        {"dataset": dataset, "table_passed": True},
        ["table", "table_id", "to_version", "validated_at", "batch_id"],
    )
    latest: dict[str, tuple[datetime, int, str]] = {}
    for row in data.to_pylist():
        if row["batch_id"] is not None:
            continue
        candidate = (row["validated_at"], row["to_version"], row["table_id"])
        if row["table"] not in latest or candidate[:2] > latest[row["table"]][:2]:
            latest[row["table"]] = candidate
    return {
        table: Watermark(version=version, table_id=table_id)
        for table, (_, version, table_id) in latest.items()
    }


# -- the metrics history `<data>/quality/metrics`: one row per metric per committed bronze batch
METRICS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("dataset", pa.string()),
        pa.field("table", pa.string()),
        pa.field("batch_id", pa.int64()),
        pa.field("metric", pa.string()),
        pa.field("value", pa.float64()),
        # The batch's time: its newest event time (its ingestion time when no row reached bronze).
        pa.field("batch_time", pa.timestamp("us", tz="UTC")),
        pa.field("recorded_at", pa.timestamp("us", tz="UTC")),
    ]
)
METRIC_KEY = ("run_id", "table", "batch_id", "metric")


@dataclass(frozen=True)
class MetricRow:
    run_id: str
    dataset: str
    table: str
    batch_id: int
    metric: str
    value: float
    batch_time: datetime
    recorded_at: datetime


def append_metrics(path: Location, rows: Sequence[MetricRow]) -> None:
    """Append one run's batch metrics (creating the table on first use)."""
    from delta_tables.ops import append_rows

    if not rows:
        return
    data = pa.Table.from_pylist([asdict(r) for r in rows], schema=METRICS_SCHEMA)
    append_rows(path, data, METRIC_KEY)


def metric_rows(
    run_id: str,
    dataset: str,
    table: str,
    measured: Sequence[tuple[int, datetime, Mapping[str, float]]],
) -> list[MetricRow]:
    """A run's measured batches of `table` ((batch id, batch time, metrics)) as rows."""
    recorded_at = datetime.now(UTC)
    return [
        MetricRow(run_id, dataset, table, batch_id, metric, float(value), at, recorded_at)
        for batch_id, at, metrics in measured
        for metric, value in metrics.items()
    ]


def read_metrics(path: Location, dataset: str, table: str | None = None) -> list[dict[str, Any]]:
    """The metrics of `dataset`'s batches (optionally of one table), by batch time."""
    from delta_tables.ops import read_rows

    equal = {"dataset": dataset, **({"table": table} if table is not None else {})}
    rows: list[dict[str, Any]] = read_rows(
        path, METRICS_SCHEMA, METRIC_KEY, None, equal
    ).to_pylist()
    return sorted(rows, key=lambda r: (r["batch_time"], r["batch_id"], r["metric"]))


def metric_history(path: Location, dataset: str, table: str) -> MetricHistory:
    """A table's metric values, oldest first, for `quality.anomalies`."""
    history = MetricHistory()
    for row in read_metrics(path, dataset, table):
        history.add(row["batch_time"], {row["metric"]: row["value"]})
    return history
