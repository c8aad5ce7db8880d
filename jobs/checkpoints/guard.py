"""Checks of a streaming checkpoint against its own files and against the tables it writes.

Used by `jobs.streaming.query.guard_checkpoint` before a bronze or silver run starts Spark, and
by the failure mapping of `jobs.streaming.failures` after a query failed. Spark-free, reads small
files only; Spark's own files through `jobs.checkpoints.files`, which knows their formats.

- `record_batch(checkpoint, batch_id, held)`: called inside `foreachBatch` once a micro-batch's
  writes are done (before Spark's commit log records the batch): which tables hold the batch's
  commit, and for every table the last batch that committed to it, in
  `<checkpoint>/runoff_batches/<batch id>` (the last `KEEP_RECORDS` are kept). A batch that
  writes nothing to a table (no valid rows for bronze, no malformed ones for quarantine, an
  empty silver output) makes no Delta commit there, so the table's app transaction alone does
  not say which batch it should hold: this record does.
- `progress_problem(...)`: a table whose app transaction (`txnVersion` of the checkpoint's query
  id) is behind the last batch the checkpoint committed into it (its newest commits are gone:
  running on would write new versions over the lost rows), or more than one batch ahead of the
  checkpoint's last committed batch (one ahead is a batch interrupted between its table commit
  and Spark's commit log; the replay skips it as already committed).
- `corrupt_file(checkpoint)`: the first truncated or corrupt Spark log file among those a query
  reads when it starts (the two newest `offsets/` files, the newest `commits/` file, the file
  source's log from its newest compaction on); `corrupt_message(...)` names it and the remedy.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from core.config import Location, write_whole
from jobs.checkpoints.files import (
    CheckpointFileError,
    LogKind,
    batch_ids,
    files_read_at_start,
    last_committed,
    log_lines,
)

RECORDS_DIR = "runoff_batches"
KEEP_RECORDS = 100  # as Spark's spark.sql.streaming.minBatchesToRetain default
UNKNOWN_BATCH = sys.maxsize  # "which batches the tables hold is unknown": assume all of them


# -- which tables each batch committed to -------------------------------------------------------
def batch_record(checkpoint: Location, batch_id: int) -> dict[str, Any] | None:
    """The record of `batch_id` (`{"batch", "tables", "last"}`), None if absent or unreadable."""
    path = checkpoint / RECORDS_DIR / str(batch_id)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("last"), dict) else None


def record_batch(checkpoint: Location, batch_id: int, held: Mapping[str, bool]) -> None:
    """Record which tables hold batch `batch_id`'s commit (`held`: table name -> holds it)."""
    previous = batch_record(checkpoint, batch_id - 1) if batch_id > 0 else None
    last = {str(k): int(v) for k, v in (previous or {}).get("last", {}).items()}
    last.update({table: batch_id for table, holds in held.items() if holds})
    doc = {"batch": batch_id, "tables": sorted(t for t, h in held.items() if h), "last": last}
    directory = checkpoint / RECORDS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    write_whole(directory / str(batch_id), json.dumps(doc, sort_keys=True) + "\n")
    (directory / str(batch_id - KEEP_RECORDS)).unlink(missing_ok=True)


# -- tables against the checkpoint ---------------------------------------------------------------
def progress_problem(
    checkpoint: Location,
    query_id: str,
    held: Mapping[str, int | None],
    paths: Mapping[str, Location],
    reset_command: str,
) -> str | None:
    """The refusal line when a table does not match the checkpoint's committed batches.

    `held`: per table name, the `txnVersion` it holds for `query_id` (None: none). Without a
    record of the last committed batch (a checkpoint written before records existed) only a
    table ahead is refused.
    """
    last = last_committed(checkpoint)
    record = batch_record(checkpoint, last) if last is not None else None
    expected_of = record["last"] if record is not None else {}
    committed = "no batch" if last is None else f"batch {last}"
    for table, version in held.items():
        where = f"table {table} ({paths[table]})"
        holds = "no batch" if version is None else f"batch {version}"
        if version is not None and version > (-1 if last is None else last) + 1:
            return (
                f"{where} is ahead of checkpoint {checkpoint}: the table holds {holds} of "
                f"stream {query_id}, the checkpoint has committed {committed} (one batch ahead "
                "is an interrupted batch, more is not): the checkpoint is older than the table "
                f"(a restored copy?); run `{reset_command}` to rebuild the tables and the "
                "checkpoint from the landing and archived files"
            )
        expected = expected_of.get(table)
        if expected is not None and (version is None or version < int(expected)):
            return (
                f"{where} is behind checkpoint {checkpoint}: the table holds {holds} of stream "
                f"{query_id}, but the checkpoint committed batch {last}, whose last commit to "
                f"this table is batch {expected}: the table's newest commits are gone (a deleted "
                "_delta_log file, or an older copy restored) and running on would lose their "
                "rows: restore the table's missing versions, or run "
                f"`{reset_command}` to rebuild it from the landing and archived files"
            )
    return None


# -- Spark's log files -------------------------------------------------------------------------
@dataclass(frozen=True)
class CorruptFile:
    path: Location
    problem: str


def log_file_problem(path: Location, kind: str) -> str | None:
    """Why a Spark log file (`kind`: offsets, commits, source) cannot be read; None if it can
    (the formats: `jobs.checkpoints.files`)."""
    try:
        log_lines(path, cast(LogKind, kind))
    except CheckpointFileError as exc:
        return exc.problem
    return None


def corrupt_file(checkpoint: Location) -> CorruptFile | None:
    """The first truncated or corrupt file of `files_read_at_start`, if any."""
    for path, kind in files_read_at_start(checkpoint):
        problem = log_file_problem(path, kind)
        if problem:
            return CorruptFile(path, problem)
    return None


def corrupt_message(
    checkpoint: Location, corrupt: CorruptFile, reset_command: str, held: int | None
) -> str:
    """One line: the file, why, and what to do (`held`: the newest batch any of the tables
    holds for the checkpoint's query id, None if none).

    Deleting it is offered only where it loses nothing: the newest commit file when its batch's
    offsets file is intact (the batch is replayed and its tables' app transactions make the
    replay write nothing twice), or the newest offsets file of a batch never committed that no
    table holds (Spark plans the batch again). Anything else: reset the layer.
    """
    path = corrupt.path
    crc = path.with_name(f".{path.name}.crc")
    delete = f"delete {path}" + (f" and {crc}" if crc.exists() else "")
    kind = path.parent.name
    batch = int(path.name) if path.name.isdigit() else None
    rebuild = f"run `{reset_command}` to rebuild the tables and the checkpoint"
    remedy = f"{rebuild} from the landing and archived files"
    if batch is not None and kind == "commits" and batch == last_committed(checkpoint):
        offsets = checkpoint / "offsets" / str(batch)
        if offsets.is_file() and log_file_problem(offsets, "offsets") is None:
            remedy = (
                f"{delete} and run again (batch {batch} is replayed and writes nothing twice), "
                f"or {remedy}"
            )
    elif batch is not None and kind == "offsets":
        newest = batch_ids(checkpoint / "offsets")[-1]
        uncommitted = not (checkpoint / "commits" / str(batch)).exists()
        if batch == newest and uncommitted and (held is None or held < batch):
            remedy = (
                f"it is the newest offsets file and batch {batch} was never committed: {delete} "
                f"and run again (Spark plans batch {batch} anew), or {remedy}"
            )
    return f"checkpoint file {path} is truncated or corrupt ({corrupt.problem}): {remedy}"
