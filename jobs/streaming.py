"""Helpers shared by the streaming jobs (bronze, silver): checkpoints, app ids, progress, ledger.

Every job run is a Structured Streaming query started with `trigger(availableNow=True)` (or
`once`) whose `foreachBatch` function writes Delta tables with app transactions
(`txnAppId` = the query id Spark keeps in `<checkpoint>/metadata`, `txnVersion` = batch id), so
that a batch replayed after a crash is a no-op. This module holds what such a job needs around
the query; it never starts Spark itself.

API (small on purpose):
- `trigger_kwargs(trigger)`: `DataStreamWriter.trigger(**...)` arguments of a CLI trigger name.
- `read_query_id(checkpoint)`: the query id of a checkpoint, None before its first start.
- `guard_checkpoint(...)`: refuse a checkpoint that belongs to other tables, or a missing
  checkpoint whose tables already hold another stream's batches, naming the remedy.
- `BatchProgress` + `batch_line()` and `summary_line()`: the progress line printed per
  micro-batch and the closing line of a run.
- `recorded_run(runs_path, record)`: a context manager that appends the run (failed ones too) to
  the run ledger `delta/ops/runs`.
- `BatchFunction` + `run_query(...)`: wrap a `foreachBatch` function so that a failure inside a
  batch reaches the caller as the original exception (not pages of JVM text).
"""

from __future__ import annotations

import json
import logging
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from core.console import say
from core.errors import ConfigError, RunoffError
from core.ledger import RunRecord
from delta_tables.ops import append_run
from delta_tables.writes import app_transactions
from jobs import interrupts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

logger = logging.getLogger(__name__)

TRIGGERS: dict[str, dict[str, bool]] = {
    "available-now": {"availableNow": True},
    "once": {"once": True},
}
OWNER_FILE = "runoff.json"


def trigger_kwargs(trigger: str) -> dict[str, bool]:
    """`available-now` -> {"availableNow": True}; `once` -> {"once": True}."""
    try:
        return dict(TRIGGERS[trigger])
    except KeyError:
        raise ConfigError(f"trigger {trigger!r} is not one of {', '.join(TRIGGERS)}") from None


# -- checkpoints and tables ---------------------------------------------------------------
def read_query_id(checkpoint: Path) -> str | None:
    """The query id Spark keeps in `<checkpoint>/metadata`; None if the query never started."""
    path = checkpoint / "metadata"
    if not path.is_file():
        return None
    try:
        query_id = json.loads(path.read_text() or "{}").get("id")
    except (OSError, ValueError, AttributeError) as exc:
        raise RunoffError(f"cannot read the query id from {path}: {exc}") from exc
    return query_id if isinstance(query_id, str) and query_id else None


def guard_checkpoint(
    checkpoint: Path,
    owner: Mapping[str, str],
    tables: Mapping[str, Path],
    reset_command: str,
) -> None:
    """Refuse to run a checkpoint against tables it does not belong to; claim a new one.

    `owner` (e.g. {"dataset": "events", "layer": "bronze", "table": "delta/bronze/events"}) is
    recorded in `<checkpoint>/runoff.json` on first use and compared on every later run.
    Refused, each with `reset_command` as the remedy:
    - a checkpoint recorded for another owner, or one Spark wrote that runoff never claimed;
    - a missing or empty checkpoint while a table already holds app transactions: a new query
      id would ingest everything again next to the old stream's rows;
    - a checkpoint whose query id is not among the app ids that the tables hold;
    - a checkpoint with committed batches whose table has disappeared.
    """
    marker = checkpoint / OWNER_FILE
    query_id = read_query_id(checkpoint)
    if marker.is_file():
        try:
            recorded = json.loads(marker.read_text())
        except (OSError, ValueError) as exc:
            raise RunoffError(f"cannot read {marker}: {exc}") from exc
        mismatched = sorted(k for k, v in owner.items() if recorded.get(k) != v)
        if mismatched:
            theirs = ", ".join(f"{k}={recorded.get(k)!r}" for k in mismatched)
            ours = ", ".join(f"{k}={owner[k]!r}" for k in mismatched)
            raise RunoffError(
                f"checkpoint {checkpoint} belongs to {theirs}, not {ours}: "
                f"run `{reset_command}` to start this table over"
            )
    elif query_id is not None:
        raise RunoffError(
            f"checkpoint {checkpoint} was not created by runoff for {owner_text(owner)}: "
            f"run `{reset_command}` to start over"
        )

    held: dict[str, int] = {}
    for path in tables.values():
        try:
            held.update(app_transactions(path))
        except ValueError as exc:
            raise RunoffError(str(exc)) from exc
    if held and query_id not in held:
        app_id, batch = max(held.items(), key=lambda item: item[1])
        table = ", ".join(str(p) for p in tables.values())
        if query_id is None:
            raise RunoffError(
                f"checkpoint {checkpoint} is missing or empty, but {table} already holds "
                f"batches 0..{batch} of stream {app_id}: starting a new stream would ingest "
                f"every file again; run `{reset_command}` to rebuild the table from scratch"
            )
        raise RunoffError(
            f"checkpoint {checkpoint} (stream {query_id}) does not belong to {table}, which "
            f"holds stream {app_id}: run `{reset_command}` to start over"
        )
    if query_id is not None and (checkpoint / "commits").is_dir():
        committed = any(p.name.isdigit() for p in (checkpoint / "commits").iterdir())
        missing = [str(p) for p in tables.values() if not (p / "_delta_log").is_dir()]
        if committed and missing:
            raise RunoffError(
                f"checkpoint {checkpoint} has committed batches but table "
                f"{', '.join(missing)} is gone: run `{reset_command}` to start over"
            )
    if not marker.is_file():
        checkpoint.mkdir(parents=True, exist_ok=True)
        claim = {**owner, "claimed_at": datetime.now(UTC).isoformat(timespec="seconds")}
        temp = marker.with_name(f".{OWNER_FILE}.tmp")
        temp.write_text(json.dumps(claim, sort_keys=True) + "\n")
        temp.replace(marker)


def owner_text(owner: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in owner.items())


# -- progress -----------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchProgress:
    """What one micro-batch did: the facts of its progress line and of the run's totals."""

    batch_id: int
    files: int
    rows_in: int
    rows_out: int
    quarantined: int = 0
    seconds: float = 0.0
    replayed: bool = False  # already committed before a crash: nothing written again


def batch_line(job: str, progress: BatchProgress) -> str:
    """`bronze events batch 3: 2 files, 400 rows in, 396 written, 4 quarantined, 1.2 s`."""
    p = progress
    files = f"{p.files} file{'' if p.files == 1 else 's'}"
    if p.replayed:
        return (
            f"{job} batch {p.batch_id}: {files}, already committed before a restart: "
            f"nothing written again, {p.seconds:.1f} s"
        )
    return (
        f"{job} batch {p.batch_id}: {files}, {p.rows_in} rows in, {p.rows_out} written, "
        f"{p.quarantined} quarantined, {p.seconds:.1f} s"
    )


@dataclass
class RunProgress:
    """Collects the batches of one run, prints their lines and fills the ledger record."""

    job: str
    record: RunRecord
    report: Callable[[str], None] = say
    batches: list[BatchProgress] = field(default_factory=list)

    def add(self, progress: BatchProgress) -> None:
        self.batches.append(progress)
        self.record.batches += 1
        self.record.files += progress.files
        self.record.rows += progress.rows_out
        self.record.quarantined += progress.quarantined
        self.report(batch_line(self.job, progress))


def summary_line(job: str, record: RunRecord) -> str:
    """The closing line of a run: status, batches, files, rows, quarantined, versions, time."""
    versions = ", ".join(
        f"{table} {_version(record.versions_before.get(table, -1))} -> {_version(version)}"
        for table, version in sorted(record.versions_after.items())
    )
    text = (
        f"{job}: {record.status} in {record.seconds:.1f} s: {record.batches} batches, "
        f"{record.files} files, {record.rows} rows written, {record.quarantined} quarantined"
    )
    return f"{text} ({versions})" if versions else text


def _version(version: int) -> str:
    return f"v{version}" if version >= 0 else "none"


# -- the ledger ---------------------------------------------------------------------------
def first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "desc", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def recorded_run(runs_path: Path, record: RunRecord) -> Iterator[RunRecord]:
    """Append `record` to the run ledger when the block ends, as success or failure.

    A failure is recorded with its first line as `error` and then re-raised; a failure to
    write the ledger row of a failed run is logged, never hides the run's own error.
    """
    try:
        yield record
    except BaseException as exc:
        if interrupts.received():
            record.finish("interrupted", "terminated by SIGTERM")
        elif isinstance(exc, KeyboardInterrupt) or interrupts.received(signal.SIGINT):
            record.finish("interrupted", "interrupted (Ctrl-C)")
        else:
            record.finish("failed", first_line(exc))
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
        raise
    record.finish("success")
    append_run(runs_path, record)


# -- running a foreachBatch query ---------------------------------------------------------
class BatchFunction:
    """A `foreachBatch` function that remembers the Python error that failed a batch."""

    def __init__(self, process: Callable[[DataFrame, int], None]) -> None:
        self.process = process
        self.error: BaseException | None = None
        self.failed_batch: int | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            interrupts.check()  # no new batch once `runoff serve`'s client sent a signal
            self.process(batch, batch_id)
        except BaseException as exc:
            # Spark re-raises it wrapped in pages of JVM text: keep the original for the user.
            self.error, self.failed_batch = exc, batch_id
            raise


def run_query(
    writer: DataStreamWriter, function: BatchFunction, checkpoint: Path, trigger: str, name: str
) -> StreamingQuery:
    """Start `writer` with `function` as foreachBatch, wait for the run to end, return it.

    A failure inside a batch is re-raised as the original exception (RunoffErrors keep their
    message; others become a RunoffError naming the batch); an interrupt stops the query.
    """
    from pyspark.errors import StreamingQueryException

    interrupts.check()
    query = (
        writer.queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(function)
        .trigger(**trigger_kwargs(trigger))
        .start()
    )
    try:
        query.awaitTermination()
        interrupts.check()  # stopped by `runoff serve` for its client's signal
    except StreamingQueryException as exc:
        cause = function.error
        if isinstance(cause, RunoffError):
            raise cause from exc
        if cause is not None:
            raise RunoffError(
                f"{name} failed in batch {function.failed_batch}: "
                f"{type(cause).__name__}: {first_line(cause)}"
            ) from cause
        raise RunoffError(f"{name} failed: {first_line(exc)}") from exc
    finally:
        if query.isActive:
            query.stop()
    return query


def elapsed(started: float) -> float:
    """Seconds since `started` (a `time.perf_counter()` reading)."""
    return time.perf_counter() - started
