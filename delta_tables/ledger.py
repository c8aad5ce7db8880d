"""The run ledger `delta/ops/runs`: one row per command run (bronze, silver, validate, backfill,
reset, maintain, rebuild, quarantine replay), failed and interrupted runs included.

Owns the row (`RunRecord`, `RUNS_SCHEMA`), how a run ends in it (`recorded_run`: success,
failed with one line, interrupted by a signal), writing (`append_run`: through delta-spark, or
parked until the next Spark run when the command has no SparkSession, `delta_tables.ops`) and
reading (`read_runs`). Every command records itself through `recorded_run`, which also tells
the run's listeners (`listening`: e.g. `jobs.lineage`'s OpenLineage events) when it starts and
when it has ended.
"""

from __future__ import annotations

import json
import logging
import signal
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa

from core import interrupts
from core.caller import Caller, current
from core.config import Location
from delta_tables.ops import append_rows, read_rows

logger = logging.getLogger(__name__)

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


class RunListener(Protocol):
    """Told of every run `recorded_run` records: once as it starts, once when it has ended
    (`record.status` set). A listener must not raise; if it does, the error is logged and the
    run goes on."""

    def run_started(self, record: RunRecord) -> None: ...

    def run_ended(self, record: RunRecord) -> None: ...


# Each with the caller of the command that listens (`core.caller`: None in a command's own
# process): a command of `runoff serve` hears its own runs, not those of its neighbours.
_listeners: list[tuple[RunListener, Caller | None]] = []


@contextmanager
def listening(listener: RunListener) -> Iterator[None]:
    """`listener` is told of the runs this command records while the block runs."""
    entry = (listener, current())
    _listeners.append(entry)
    try:
        yield
    finally:
        _listeners.remove(entry)


def _tell(event: str, record: RunRecord) -> None:
    caller = current()
    for listener in [listener for listener, of in list(_listeners) if of is caller]:
        try:
            getattr(listener, event)(record)
        except Exception as exc:  # a listener never fails the run
            logger.warning(
                "%s of run %s: %s",
                event,
                record.run_id,
                first_line(exc),
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )


def append_run(runs_path: Location, record: RunRecord) -> None:
    """Append one run to the ledger (creating the table on first use)."""
    append_rows(runs_path, pa.Table.from_pylist([record.to_row()], schema=RUNS_SCHEMA), RUN_KEY)


def read_runs(runs_path: Location, dataset: str | None = None) -> list[dict[str, Any]]:
    """All ledger rows (optionally of one dataset), oldest first."""
    equal = {"dataset": dataset} if dataset is not None else None
    rows: list[dict[str, Any]] = read_rows(runs_path, RUNS_SCHEMA, RUN_KEY, equal=equal).to_pylist()
    return sorted(rows, key=lambda r: r["started_at"])


def run_details(row: Mapping[str, Any]) -> dict[str, Any]:
    """A ledger row's `details` (`RunRecord.details`, kept as JSON); empty when it has none or
    they do not read as a JSON object."""
    try:
        details = json.loads(row.get("details") or "{}")
    except ValueError:
        return {}
    return details if isinstance(details, dict) else {}


def first_line(exc: BaseException) -> str:
    """An exception's first line (its Spark `desc` when it has one), else its type's name."""
    text = str(getattr(exc, "desc", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def recorded_run(
    runs_path: Location,
    record: RunRecord,
    describe: Callable[[BaseException], str] = first_line,
) -> Iterator[RunRecord]:
    """Append `record` to the run ledger when the block ends, as success or failure.

    The rules every command follows: a block that ends normally is `success`, or `failed` when
    it set `record.error`; a SIGTERM or Ctrl-C is `interrupted`; any other error is `failed`
    with `describe(exc)` (its first line by default) as `error`, then re-raised. A failure to
    write the ledger row of a failed run is logged, never hides the run's own error. The
    listeners (`listening`) are told of the start, and of the end once the row is written.
    """
    _tell("run_started", record)
    try:
        yield record
    except BaseException as exc:
        if interrupts.received():
            record.finish("interrupted", "terminated by SIGTERM")
        elif isinstance(exc, KeyboardInterrupt) or interrupts.received(signal.SIGINT):
            record.finish("interrupted", "interrupted (Ctrl-C)")
        else:
            record.finish("failed", describe(exc))
        try:
            append_run(runs_path, record)
        except Exception as ledger_error:  # the run's own error is the one to raise
            logger.warning(
                "could not record the failed run %s in %s: %s",
                record.run_id,
                runs_path,
                first_line(ledger_error),
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )
        _tell("run_ended", record)
        raise
    # A block that ends normally succeeded, unless it said why not (a run that completed but
    # failed its checks: a critical expectation).
    record.finish("failed" if record.error else "success", record.error)
    try:
        append_run(runs_path, record)
    finally:
        _tell("run_ended", record)
