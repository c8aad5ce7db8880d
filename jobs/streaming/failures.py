"""Known causes of a failed run, each as one line that names the cause and the remedy.

Spark reports them as pages of JVM text whose first line says nothing useful (`An error occurred
while calling o977.parquet`, `Unexpected end-of-input in field name`); `explain(exc, ...)` walks
the exception chain (Python `__cause__`/`__context__`, PySpark's captured JVM exceptions and
their causes, py4j's Java stack trace) and recognizes:

- a full disk ("No space left on device" anywhere in the chain; an `OSError` with errno
  ENOSPC): `no space left on device writing <path>: free space and rerun; the checkpoint stays
  before the batch`, with the path the JVM names (`Task failed while writing rows to <path>`),
  else the run's tables and checkpoint;
- a Delta table whose newest commit file was deleted but not its checksum file (delta-rs
  refuses to open it): what to put back or delete;
- a checkpoint Spark cannot read: a truncated or corrupt log file (found by
  `jobs.checkpoints.guard.corrupt_file`, or named by a checksum error) with what to do about it,
  else, when Spark's message is one of its log-reading errors, the checkpoint and the reset.

The CLI (`jobs.cli.main._report`), the streaming jobs (`jobs.streaming.query.run_query`, silver's
`await_query`) and the ledger's error column (`jobs.streaming.query.error_line`) use it.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator, Mapping
from urllib.parse import unquote, urlparse

from core.config import Location, as_location

NO_SPACE = "No space left on device"
# Spark's errors when a checkpoint log file cannot be parsed (Jackson's for cut-off JSON).
LOG_ERRORS = re.compile(
    r"Incomplete log file|Log file was malformed|failed to read correct log version|"
    r"Unexpected end-of-input|JsonParseException|JsonEOFException|MismatchedInputException"
)
_CHECKSUM = re.compile(r"Checksum error: (\S+?) at \d+")
# delta-rs opening a table whose newest commit file was deleted but not its checksum file.
_ORPHAN_CRC = re.compile(r"CRC file version (\d+) is newer than log segment version (\d+)")
_WRITING_ROWS = re.compile(r"writing rows to (\S+?)\.?(?:\s|$)")
_TEXT_ATTRIBUTES = ("desc", "_desc", "errmsg", "_stackTrace")
_CAUSE_ATTRIBUTES = ("__cause__", "__context__", "_cause", "cause")


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception behind it (Python causes and contexts, PySpark's `_cause`)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for attribute in _CAUSE_ATTRIBUTES:
            nested = getattr(current, attribute, None)
            if isinstance(nested, BaseException):
                todo.append(nested)


def exception_text(exc: BaseException) -> str:
    """What an exception says: its message, PySpark's description and JVM stack trace, py4j's
    Java exception (asked of the JVM; skipped if that fails)."""
    parts = [v for a in _TEXT_ATTRIBUTES if isinstance(v := getattr(exc, a, None), str)]
    try:
        parts.append(str(exc))
    except Exception:  # noqa: BLE001 - py4j asks a JVM that may be gone
        parts.append(type(exc).__name__)
    return "\n".join(parts)


def explain(
    exc: BaseException,
    *,
    checkpoint: Location | None = None,
    tables: Mapping[str, Location] | None = None,
    reset_command: str | None = None,
    read_checkpoint: bool = False,
) -> str | None:
    """The one-line message of a known cause of `exc`, None for others.

    `checkpoint`, `tables` and `reset_command`: what the run writes, for the messages;
    `read_checkpoint`: the query failed outside its batches, so look for a checkpoint file
    Spark could not read.
    """
    from core.errors import RunoffError

    chain = list(exception_chain(exc))
    for e in chain:  # a line already made for this cause (a later failure on the way out)
        if isinstance(e, RunoffError) and str(e).startswith("no space left on device"):
            return str(e)
    texts = [exception_text(e) for e in chain]
    full = next((e for e in chain if isinstance(e, OSError) and e.errno == errno.ENOSPC), None)
    if full is not None or any(NO_SPACE in t for t in texts):
        return no_space_line(full, "\n".join(texts), checkpoint, tables)
    if orphan := next((m for t in texts if (m := _ORPHAN_CRC.search(t))), None):
        lost, kept = int(orphan.group(1)), int(orphan.group(2))
        return (
            f"a Delta table lost its newest commit: its _delta_log holds {lost:020d}.crc but not "
            f"{lost:020d}.json (delta-rs: {orphan.group(0)}): put the commit file back, or, if "
            f"it is lost, delete that .crc (the table then ends at version {kept}) and run "
            "again: the run names the table and what it lacks"
        )
    if checkpoint is not None and read_checkpoint:
        return checkpoint_line("\n".join(texts), checkpoint, tables or {}, reset_command)
    return None


def _local(path: str) -> str:
    return unquote(urlparse(path).path) if path.startswith("file:") else path


def no_space_line(
    error: OSError | None,
    text: str,
    checkpoint: Location | None,
    tables: Mapping[str, Location] | None,
) -> str:
    if error is not None and error.filename:
        where = str(error.filename)
    elif match := _WRITING_ROWS.search(text):
        where = _local(match.group(1))
    else:
        paths = [str(p) for p in (tables or {}).values()]
        paths += [f"checkpoint {checkpoint}"] if checkpoint is not None else []
        if not paths:
            return (
                "no space left on device (the error names no file; --verbose shows where): "
                "free space and rerun; the checkpoint stays before the batch"
            )
        where = ", ".join(paths[:-1]) + " or " + paths[-1] if len(paths) > 1 else paths[0]
    return (
        f"no space left on device writing {where}: free space and rerun; "
        "the checkpoint stays before the batch"
    )


def checkpoint_line(
    text: str, checkpoint: Location, tables: Mapping[str, Location], reset_command: str | None
) -> str | None:
    """A corrupt file of `checkpoint` (found, or named by a checksum error), else Spark's
    log-reading error with the reset; None if `text` shows neither."""
    from jobs.checkpoints.guard import CorruptFile, corrupt_file, corrupt_message

    reset = reset_command or "runoff reset <dataset> --layer <layer> --yes"
    corrupt = corrupt_file(checkpoint)
    if corrupt is None and (match := _CHECKSUM.search(text)):
        named = as_location(_local(match.group(1)))
        if str(named).startswith(f"{str(checkpoint).rstrip('/')}/"):
            corrupt = CorruptFile(named, f"it does not match its checksum file .{named.name}.crc")
    if corrupt is not None:
        return corrupt_message(checkpoint, corrupt, reset, held_batch(checkpoint, tables))
    match = LOG_ERRORS.search(text)
    if match is None:
        return None
    return (
        f"checkpoint {checkpoint} cannot be read (Spark: {match.group(0)}): run `{reset}` to "
        "rebuild the tables and the checkpoint from the landing and archived files"
    )


def held_batch(checkpoint: Location, tables: Mapping[str, Location] | None) -> int | None:
    """The newest batch of the checkpoint's query that any of `tables` holds; None if none;
    `UNKNOWN_BATCH` (as if the tables held every batch) without tables or when the query id or
    a table's log cannot be read."""
    from delta_tables.writes import app_transactions
    from jobs.checkpoints.files import read_query_id
    from jobs.checkpoints.guard import UNKNOWN_BATCH

    if not tables:
        return UNKNOWN_BATCH
    try:
        query_id = read_query_id(checkpoint)
        versions = [app_transactions(p).get(query_id or "") for p in tables.values()]
    except Exception:  # noqa: BLE001 - unknown: assume the worst
        return UNKNOWN_BATCH
    held = [v for v in versions if v is not None]
    return max(held) if held else None
