"""Helpers shared by the streaming jobs (bronze, silver): checkpoints, app ids, progress, ledger.

Every job run is a Structured Streaming query started with `trigger(availableNow=True)` (or
`once`) whose `foreachBatch` function writes Delta tables with app transactions
(`txnAppId` = the query id Spark keeps in `<checkpoint>/metadata`, `txnVersion` = batch id), so
that a batch replayed after a crash is a no-op. This module holds what such a job needs around
the query; it never starts Spark itself.

API (small on purpose):
- `trigger_kwargs(trigger)`: `DataStreamWriter.trigger(**...)` arguments of a CLI trigger name.
- `guard_checkpoint(...)`: refuse a checkpoint that belongs to other tables, or a missing
  checkpoint whose tables already hold another stream's batches, naming the remedy.
- `BatchProgress` + `batch_line()` and `summary_line()`: the progress line printed per
  micro-batch and the closing line of a run; `CurrentBatch`: the micro-batch under way, for the
  live status line on a terminal (`core.console.live_status`).
- `error_line(exc)`: what the ledger's `recorded_run` records as the error of a failed run
  (a known cause named, `jobs.streaming.failures`).
- `BatchFunction` + `run_query(...)`: wrap a `foreachBatch` function so that a failure inside a
  batch reaches the caller as the original exception (not pages of JVM text); `raise_failure`
  is that one failed-query handler, also used by silver's own query loop.
- `checkpoint_locks(config, checkpoints, what)`: every checkpoint's lock for a run's duration.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NoReturn

from core import caller, interrupts
from core.config import Location, RunoffConfig, remove_tree, write_whole
from core.console import say
from core.errors import ConfigError, RunoffError
from core.locking import checkpoint_lock
from delta_tables import ledger
from delta_tables.ledger import RunRecord, recorded_run
from delta_tables.writes import app_transactions, table_version
from jobs.checkpoints.files import read_query_id
from jobs.checkpoints.guard import corrupt_file, corrupt_message, progress_problem
from jobs.streaming.failures import explain

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

    from delta_tables.catalog import Table

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
def guard_checkpoint(
    checkpoint: Location,
    owner: Mapping[str, str],
    tables: Mapping[str, Location],
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
    - a checkpoint with committed batches whose table has disappeared;
    - a truncated or corrupt Spark log file the query would read
      (`jobs.checkpoints.guard.corrupt_file`; the message says when deleting that one file is
      safe);
    - a table behind the checkpoint (its app transaction older than the last batch the
      checkpoint committed into it: commits lost) or more than one batch ahead of it
      (`jobs.checkpoints.guard.progress_problem`).
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

    per_table: dict[str, dict[str, int]] = {}
    for name, path in tables.items():
        try:
            per_table[name] = app_transactions(path)
        except ValueError as exc:
            raise RunoffError(str(exc)) from exc
    held = {app: v for found in per_table.values() for app, v in found.items()}
    stream = {name: found.get(query_id or "") for name, found in per_table.items()}
    corrupt = corrupt_file(checkpoint)
    if corrupt is not None:
        newest = max((v for v in stream.values() if v is not None), default=None)
        raise RunoffError(corrupt_message(checkpoint, corrupt, reset_command, newest))
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
    if query_id is not None:
        problem = progress_problem(checkpoint, query_id, stream, tables, reset_command)
        if problem:
            raise RunoffError(problem)
    if not marker.is_file():
        checkpoint.mkdir(parents=True, exist_ok=True)
        claim = {**owner, "claimed_at": datetime.now(UTC).isoformat(timespec="seconds")}
        write_whole(marker, json.dumps(claim, sort_keys=True) + "\n")


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
    vanished: tuple[str, ...] = ()  # files listed for the batch but gone before it read them


def batch_line(job: str, progress: BatchProgress) -> str:
    """`bronze events batch 3: 2 files, 400 rows in, 396 written, 4 quarantined, 1.2 s`."""
    p = progress
    files = f"{p.files} file{'' if p.files == 1 else 's'}"
    if p.replayed:
        return (
            f"{job} batch {p.batch_id}: {files}, already committed before a restart: "
            f"nothing written again, {p.seconds:.1f} s"
        )
    line = (
        f"{job} batch {p.batch_id}: {files}, {p.rows_in} rows in, {p.rows_out} written, "
        f"{p.quarantined} quarantined, {p.seconds:.1f} s"
    )
    if p.vanished:
        line += f"; {vanished_text(p.vanished)}"
    return line


def vanished_text(paths: Sequence[str]) -> str:
    """`1 file vanished before it was read: /landing/a.json`."""
    one = len(paths) == 1
    return (
        f"{len(paths)} file{'' if one else 's'} vanished before {'it was' if one else 'they were'} "
        f"read: {', '.join(paths)}"
    )


@dataclass(frozen=True)
class _Running:
    """A snapshot of the micro-batch under way (replaced whole on every change)."""

    batch_id: int
    started: float
    files: int | None = None
    rows: int | None = None
    stage: str = ""


class CurrentBatch:
    """The micro-batch under way and its stage, for the live status line (`describe`).

    The foreachBatch function (a py4j callback thread) calls `start`, `update` and `finish`;
    the display's refresh thread calls `describe`. Every change replaces one immutable snapshot
    (a single attribute assignment), so a reader never sees half of an update.
    """

    def __init__(self, job: str, rows: str = "rows in") -> None:
        self.job = job  # silver: the table whose query runs
        self.rows_text = rows
        self.run_started = time.perf_counter()
        self.batches = 0
        self._running: _Running | None = None

    def restart(self, job: str) -> None:
        """The run's next query (silver: the next table's)."""
        self.job, self.batches, self._running = job, 0, None

    def start(self, batch_id: int, files: int | None = None, stage: str = "") -> None:
        self._running = _Running(batch_id, time.perf_counter(), files, stage=stage)

    def update(
        self, *, files: int | None = None, rows: int | None = None, stage: str | None = None
    ) -> None:
        running = self._running
        if running is None:
            return
        self._running = replace(
            running,
            files=running.files if files is None else files,
            rows=running.rows if rows is None else rows,
            stage=running.stage if stage is None else stage,
        )

    def finish(self) -> None:
        self.batches += 1
        self._running = None

    def describe(self) -> str:
        """`bronze events batch 3 running: 2 files, 400 rows in, writing bronze, 1.2 s (run
        9.8 s)`; between batches `bronze events: waiting for the next batch (run 9.8 s)`."""
        now = time.perf_counter()
        run = f"run {now - self.run_started:.1f} s"
        running = self._running
        if running is None:
            waiting = "waiting for the next batch" if self.batches else "starting the stream"
            return f"{self.job}: {waiting} ({run})"
        parts = []
        if running.files is not None:
            parts.append(f"{running.files} file{'' if running.files == 1 else 's'}")
        if running.rows is not None:
            parts.append(f"{running.rows} {self.rows_text}")
        if running.stage:
            parts.append(running.stage)
        parts.append(f"{now - running.started:.1f} s ({run})")
        return f"{self.job} batch {running.batch_id} running: {', '.join(parts)}"


@dataclass
class RunProgress:
    """Collects the batches of one run, prints their lines and fills the ledger record;
    `current` is the batch under way (for the live status line)."""

    job: str
    record: RunRecord
    report: Callable[[str], None] = say
    batches: list[BatchProgress] = field(default_factory=list)
    current: CurrentBatch = field(init=False)

    def __post_init__(self) -> None:
        self.current = CurrentBatch(self.job)

    def add(self, progress: BatchProgress) -> None:
        self.current.finish()
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
def error_line(exc: BaseException) -> str:
    """The line that says what went wrong: a known cause's message (`jobs.streaming.failures`),
    else the exception's first line (`delta_tables.ledger.first_line`)."""
    known = None if isinstance(exc, RunoffError) else explain(exc)
    return known or ledger.first_line(exc)


# -- running a foreachBatch query ---------------------------------------------------------
# Spark tells a stopped query from a failed one by matching the text of the error that came
# back from Python against `StreamExecution.PROXY_ERROR`, whose `(.|\r\n|\r|\n)*` recurses once
# per character: a traceback holding a JVM stack trace (the error of a Spark call the stop
# interrupted) overflows the stream thread's stack, and the JVM prints a StackOverflowError of a
# thousand `java.util.regex.Pattern` frames. The JVM is told a few short lines instead.
SUMMARY_LINE_CHARS = 96
SUMMARY_CAUSES = 3
_JVM_FRAME = re.compile(r"(?:at |\.\.\. \d+ more)")


class BatchFailed(Exception):
    """What the JVM is told of the error that failed a batch (`summary_for_jvm`)."""


def summary_for_jvm(exc: BaseException) -> str:
    """The error in at most six short lines: its type and first line, the next line (a Py4J
    error's JVM exception), and its last `Caused by:` lines, JVM stack frames left out."""
    kind = type(exc)
    lines = [line.strip() for line in str(exc).splitlines()]
    lines = [line for line in lines if line and not _JVM_FRAME.match(line)]
    head = f"{kind.__module__}.{kind.__qualname__}: {lines[0] if lines else ''}"
    causes = [line for line in lines[2:] if line.startswith("Caused by:")][-SUMMARY_CAUSES:]
    return "\n".join(line[:SUMMARY_LINE_CHARS] for line in [head, *lines[1:2], *causes])


class BatchFunction:
    """A `foreachBatch` function that remembers the Python error that failed a batch, and
    gives Spark only its summary (`summary_for_jvm`). It runs (in py4j's callback thread) with
    the caller of the command that made it (`core.caller`): its output, signals and runs are that
    command's."""

    def __init__(self, process: Callable[[DataFrame, int], None]) -> None:
        self.process = process
        self.caller = caller.current()
        self.error: BaseException | None = None
        self.failed_batch: int | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            with caller.bound(self.caller):
                interrupts.check()  # no new batch once `runoff serve`'s client sent a signal
                self.process(batch, batch_id)
        except BaseException as exc:
            # Spark re-raises it wrapped in pages of JVM text: keep the original for the user.
            self.error, self.failed_batch = exc, batch_id
            if isinstance(exc, Exception):
                raise BatchFailed(summary_for_jvm(exc)) from None
            raise  # an interrupt: its message is short


def run_query(
    writer: DataStreamWriter,
    function: BatchFunction,
    checkpoint: Location,
    trigger: str,
    name: str,
    *,
    tables: Mapping[str, Location] | None = None,
    reset_command: str | None = None,
) -> StreamingQuery:
    """Start `writer` with `function` as foreachBatch, wait for the run to end, return it.

    A failure inside a batch is re-raised as the original exception (RunoffErrors keep their
    message; others become a RunoffError naming the batch); a known cause
    (`jobs.streaming.failures`: a full disk, a checkpoint Spark cannot read) becomes its one line,
    naming `tables` (what the query writes) and `reset_command` where they help; an interrupt stops
    the query.
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
        raise_failure(exc, function, name, checkpoint, tables=tables, reset_command=reset_command)
    finally:
        if query.isActive:
            query.stop()
    return query


def raise_failure(
    exc: BaseException,
    function: BatchFunction,
    name: str,
    checkpoint: Location,
    *,
    tables: Mapping[str, Location] | None = None,
    reset_command: str | None = None,
    after_batch: int | None = None,
) -> NoReturn:
    """Raise the one error of a failed streaming query (`exc`, Spark's StreamingQueryException).

    The batch function's own RunoffError as it is; a known cause (`jobs.streaming.failures`)
    as its line; a batch's other error as `<name> failed in batch N: <type>: <line>`; a failure
    outside the batches as `<name> failed [after batch N]: <line>`.
    """
    cause = function.error
    if isinstance(cause, RunoffError):
        raise cause from exc
    known = explain(
        cause or exc,
        checkpoint=checkpoint,
        tables=tables,
        reset_command=reset_command,
        read_checkpoint=cause is None,  # Spark failed outside the batches: its own files
    )
    if known:
        raise RunoffError(known) from (cause or exc)
    if cause is not None:
        raise RunoffError(
            f"{name} failed in batch {function.failed_batch}: "
            f"{type(cause).__name__}: {error_line(cause)}"
        ) from cause
    where = f" after batch {after_batch}" if after_batch is not None else ""
    raise RunoffError(
        f"{name} failed{where}: {error_line(exc)}{root_cause(exc)}. Nothing of a batch after "
        "the checkpoint's last one was kept: running the command again is safe"
    ) from exc


def root_cause(exc: BaseException) -> str:
    """`: caused by <line>`, the innermost JVM cause of a Spark error (PySpark keeps the chain
    in `_cause`) when it says more than the error itself, such as what failed under Spark's
    `Exception thrown in awaitResult`; else empty."""
    first = ledger.first_line(exc)
    cause, depth = getattr(exc, "_cause", None), 0
    innermost = None
    while isinstance(cause, BaseException) and depth < 20:
        innermost, cause, depth = cause, getattr(cause, "_cause", None), depth + 1
    if innermost is None:
        return ""
    line = ledger.first_line(innermost)
    return "" if line in first else f": caused by {line}"


@contextmanager
def checkpoint_locks(
    config: RunoffConfig, checkpoints: Iterable[Location], what: str
) -> Iterator[None]:
    """Hold the lock of every checkpoint (each once, in the order given) for the block: all are
    taken before any work starts, or none is held (LockHeldError names the holder)."""
    with ExitStack() as stack:
        for checkpoint in dict.fromkeys(checkpoints):
            stack.enter_context(checkpoint_lock(checkpoint, what, config.lock_path(checkpoint)))
        yield


@contextmanager
def deleting(
    config: RunoffConfig,
    record: RunRecord,
    tables: Sequence[Table],
    checkpoints: Sequence[Location],
    holder: str,
) -> Iterator[list[str]]:
    """In `record`'s ledger row and under the checkpoints' locks (held for `holder`): delete the
    tables, then the checkpoints, saying each; the block gets the paths deleted and runs before
    the locks are let go."""
    deleted: list[str] = []
    with (
        recorded_run(config.runs_path, record, describe=error_line),
        checkpoint_locks(config, checkpoints, holder),
    ):
        for table in tables:
            record.versions_before[table.name] = table_version(table.path)
            if remove_tree(table.path):
                deleted.append(str(table.path))
                say(f"deleted table {table.name} ({table.path})")
            else:
                say(f"table {table.name} did not exist")
        for checkpoint in checkpoints:
            if remove_tree(checkpoint):
                deleted.append(str(checkpoint))
                say(f"deleted checkpoint {checkpoint}")
        yield deleted
        record.versions_after = {t.name: -1 for t in tables}


def elapsed(started: float) -> float:
    """Seconds since `started` (a `time.perf_counter()` reading)."""
    return time.perf_counter() - started
