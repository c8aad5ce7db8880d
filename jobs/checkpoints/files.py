"""Spark's Structured Streaming checkpoint files, read without Spark: the one module that knows
their layout. The guard, the landing-change check, `runoff status`, bronze's per-batch file
count and the backfill read checkpoints through it, so that they agree on what Spark does.

A checkpoint folder, as Spark 4 writes it:
- `metadata`: one JSON object; its `id` is the query id, fixed for the checkpoint's life (the
  Delta app transaction id of the tables the query writes): `read_query_id`.
- `offsets/<N>`: written when micro-batch N is planned, before it runs: a version line (`v1`),
  the batch's metadata (JSON), then one line per source, in the query's source order, with the
  source's end offset for the batch (JSON; `-` for none). With
  `spark.sql.streaming.offsetLog.formatVersion=2` the version line is `v2` and each source line
  is `<source id>:<offset>`. A file source's offset is `{"logOffset": L}`: the newest batch of
  its own log (below) that micro-batch N covers, so micro-batch N reads the log batches after
  the previous micro-batch's L up to its own. The two numberings differ: a micro-batch planned
  again after a crash can span several log batches (`files_of_batch`).
- `commits/<N>`: written once micro-batch N is done (a version line, one JSON line); the highest
  N is the newest committed batch (`last_committed`).
- `sources/<i>/`: source i's own log. For a file source it is a `FileStreamSourceLog`, a
  `CompactibleFileStreamLog`: one file `<L>` per log batch, a version line (`v1`) followed by
  one JSON line per file the batch took, `{"path": <URI>, "timestamp": <modification time, ms>,
  "batchId": L}`. Every `spark.sql.streaming.fileSource.log.compactInterval` (10) log batches,
  the batch is written as `<L>.compact` instead, holding every entry of every earlier batch plus
  its own: a file source's compaction drops nothing (`compactLogs` keeps all). So the newest
  `.compact` plus the files after it is the whole log; it is what Spark reads on a restart
  (`allFiles`, `restore`) and all `source_log` reads. Older files are redundant copies that
  Spark deletes (`spark.sql.streaming.fileSource.log.deletion`) once they lie
  `minBatchesToRetain` batches back and are `fileSource.log.cleanupDelay` old, possibly while
  another process lists the folder: reading them would only cost (each compaction repeats the
  whole history) and race with the deletion.
- Only names that are a batch number (`<N>`, `<N>.compact`) are batch files: Spark writes each
  file to a hidden temp file (`.<N>.<uuid>.tmp`) renamed into place, so a batch file is complete
  or absent, and local checksums are hidden too (`.<N>.crc`).

A restarted query reads `metadata`, the two newest offsets files, the newest commit file and
each source log from its newest compaction on (`files_read_at_start` lists the log files).

A file source logs each file as the URL-encoded URI of the path it listed below the folder it
was given (`file:///data/landing/a%20b.json`, `s3a://bucket/landing/k.json`; symlinks are not
resolved): `spark_path` decodes it into the path Spark means, which is also the name its
`cleanSource=archive` moves the file under; `real_path` further resolves a local path's
symlinks, to compare with `core.config.real_name` of a listed landing file.

A file that cannot be parsed raises `CheckpointFileError` naming it (Spark refuses it too).
Spark-free, imports nothing else of `jobs`; paths are `core.config.Location`s (local or s3a://).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote, urlparse

from core.config import Location
from core.errors import RunoffError

COMPACT = ".compact"
VOID_OFFSET = "-"  # an offsets file's line for a source without an offset
LogKind = Literal["offsets", "commits", "source"]
_MIN_LINES: dict[LogKind, int] = {"commits": 2, "offsets": 3, "source": 1}


class CheckpointFileError(RunoffError, ValueError):
    """A checkpoint file that is unreadable, truncated or not in Spark's format."""

    def __init__(self, path: Location, problem: str) -> None:
        super().__init__(f"cannot read checkpoint file {path}: {problem}")
        self.path = path
        self.problem = problem


# -- names ----------------------------------------------------------------------------------
def _listing(directory: Location) -> Iterator[str]:
    return (entry.name for entry in directory.iterdir()) if directory.is_dir() else iter(())


def _batch_number(name: str, suffix: str = "") -> int | None:
    """The batch of a file named `<n><suffix>`; None for any other name."""
    if suffix:
        if not name.endswith(suffix):
            return None
        name = name[: -len(suffix)]
    return int(name) if name.isdigit() else None


def batch_ids(directory: Location, suffix: str = "") -> list[int]:
    """The batches of the files `<n><suffix>` of `directory`, ascending ([] if it is missing)."""
    found = (_batch_number(name, suffix) for name in _listing(directory))
    return sorted(n for n in found if n is not None)


def last_committed(checkpoint: Location | None) -> int | None:
    """The newest committed micro-batch of `checkpoint`, None before the first commit."""
    if checkpoint is None:
        return None
    ids = batch_ids(checkpoint / "commits")
    return ids[-1] if ids else None


def read_query_id(checkpoint: Location) -> str | None:
    """The query id Spark keeps in `<checkpoint>/metadata`; None if the query never started."""
    path = checkpoint / "metadata"
    if not path.is_file():
        return None
    try:
        query_id = json.loads(path.read_text() or "{}").get("id")
    except (OSError, ValueError, AttributeError) as exc:
        raise RunoffError(f"cannot read the query id from {path}: {exc}") from exc
    return query_id if isinstance(query_id, str) and query_id else None


# -- one log file ---------------------------------------------------------------------------
def _version(first_line: str) -> int | None:
    return int(first_line[1:]) if first_line[:1] == "v" and first_line[1:].isdigit() else None


def _offset_text(line: str, version: int) -> str:
    """The offset of an offsets file's source line (`v2`: without its `<source id>:`)."""
    return line.partition(":")[2] if version >= 2 else line


def _read_log(path: Location, kind: LogKind) -> tuple[int, list[str]]:
    """The version and the lines after the version line of a Spark log file, checked."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointFileError(path, "not UTF-8 text") from exc
    except OSError as exc:
        raise CheckpointFileError(path, f"unreadable: {exc.strerror or exc}") from exc
    if not text.strip():
        raise CheckpointFileError(path, "empty")
    lines = text.splitlines()
    version = _version(lines[0])
    if version is None:
        raise CheckpointFileError(
            path, f"its first line {lines[0][:20]!r} is not a log version such as 'v1'"
        )
    for number, line in enumerate(lines[1:], start=2):
        if kind == "offsets" and number > 2:
            line = _offset_text(line, version)
            if line == VOID_OFFSET:
                continue
        if kind == "source" and not line.strip():
            continue
        try:
            json.loads(line)
        except ValueError:
            raise CheckpointFileError(path, f"line {number} is not complete JSON") from None
    needed = _MIN_LINES[kind]
    if len(lines) < needed:
        count = f"{len(lines)} line{'s' if len(lines) > 1 else ''}"
        raise CheckpointFileError(path, f"{count}, at least {needed} expected")
    return version, lines[1:]


def log_lines(path: Location, kind: LogKind) -> list[str]:
    """The lines after the version line of a Spark log file (`kind`: offsets, commits, source),
    each checked to be complete JSON (or `-`, an offsets file's source without an offset; a
    source log's blank lines are kept), at least as many as Spark writes; raises
    `CheckpointFileError` (its `problem` says what is wrong) otherwise."""
    return _read_log(path, kind)[1]


# -- offsets --------------------------------------------------------------------------------
def source_offset(checkpoint: Location, batch_id: int, source: int = 0) -> int:
    """The log batch (`logOffset`) up to which micro-batch `batch_id` read file source `source`,
    from `offsets/<batch_id>`; -1 when the source had no offset yet."""
    path = checkpoint / "offsets" / str(batch_id)
    version, lines = _read_log(path, "offsets")
    offsets = lines[1:]
    if version >= 2:
        named = {line.partition(":")[0]: _offset_text(line, version) for line in offsets}
        text = named.get(str(source))
    else:
        text = offsets[source] if source < len(offsets) else None
    if text is None:
        raise CheckpointFileError(path, f"no offset line for source {source}")
    if text == VOID_OFFSET:
        return -1
    offset = json.loads(text)
    if isinstance(offset, dict) and isinstance(offset.get("logOffset"), int):
        return int(offset["logOffset"])
    if isinstance(offset, int):  # a bare number: an older form Spark still reads
        return offset
    raise CheckpointFileError(
        path, f"source {source}'s offset {text[:40]!r} is not a file source's"
    )


# -- the file source log --------------------------------------------------------------------
@dataclass(frozen=True)
class SourceFile:
    """One entry of a file source log: a file the source took into a batch."""

    uri: str  # as Spark logged it: URL-encoded
    timestamp: int | None  # its modification time (ms) when Spark listed it
    batch_id: int | None  # the log batch that took it

    @property
    def path(self) -> str:
        return spark_path(self.uri)

    @property
    def real_path(self) -> str:
        return real_path(self.uri)


def spark_path(uri: str) -> str:
    """The path a logged URI names, decoded: `file:/a/b%20c.json` -> `/a/b c.json`,
    `s3a://bucket/k%20l` -> `s3a://bucket/k l` (symlinks not resolved: Spark's own name)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("file", ""):
        return unquote(parsed.path)
    return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"


def real_path(uri: str) -> str:
    """`spark_path` with a local path's symlinks resolved (as `core.config.real_name`)."""
    path = spark_path(uri)
    return os.path.realpath(path) if urlparse(uri).scheme in ("file", "") else path


def _entries(path: Location) -> list[SourceFile]:
    """The entries of one file source log file (a delta or a compaction)."""
    entries = []
    for number, line in enumerate(log_lines(path, "source"), start=2):
        if not line.strip():
            continue
        doc: Any = json.loads(line)
        if not isinstance(doc, dict) or not isinstance(doc.get("path"), str):
            raise CheckpointFileError(path, f"line {number} is not a file entry (no path)")
        timestamp, batch = doc.get("timestamp"), doc.get("batchId")
        entries.append(
            SourceFile(
                doc["path"],
                timestamp if isinstance(timestamp, int) else None,
                batch if isinstance(batch, int) else None,
            )
        )
    return entries


def _log_batches(log: Location) -> tuple[list[int], list[int]]:
    """The log batches of a file source log folder with a file `<L>`, and with `<L>.compact`."""
    names = list(_listing(log))
    plain = (_batch_number(name) for name in names)
    compacted = (_batch_number(name, COMPACT) for name in names)
    return sorted(n for n in plain if n is not None), sorted(n for n in compacted if n is not None)


def _whole_log(log: Location) -> list[Location]:
    """The files that make up a file source log: its newest compaction and the files after it,
    oldest first (what Spark reads on a restart)."""
    plain, compacted = _log_batches(log)
    start = compacted[-1] if compacted else -1
    files = [log / f"{start}{COMPACT}"] if compacted else []
    return files + [log / str(n) for n in plain if n > start]


def source_log(checkpoint: Location | None, source: int = 0) -> list[SourceFile]:
    """Every file file source `source` of `checkpoint` has taken into a batch, in log order."""
    if checkpoint is None:
        return []
    log = checkpoint / "sources" / str(source)
    return [entry for path in _whole_log(log) for entry in _entries(path)]


def ingested_files(checkpoint: Location | None, source: int = 0) -> set[str]:
    """The real names (`core.config.real_name`) of every file the file source has taken."""
    return {entry.real_path for entry in source_log(checkpoint, source)}


def files_of_batch(checkpoint: Location, batch_id: int, source: int = 0) -> list[SourceFile]:
    """The files micro-batch `batch_id` read from file source `source`: the log batches between
    its offsets and the previous batch's, each from its own file `<L>`, else from the first
    compaction after it (as `FileStreamSourceLog.get`)."""
    end = source_offset(checkpoint, batch_id, source)
    start = source_offset(checkpoint, batch_id - 1, source) if batch_id else -1
    log = checkpoint / "sources" / str(source)
    plain, compacted = _log_batches(log)
    deltas = set(plain)
    files: list[SourceFile] = []
    for n in range(start + 1, end + 1):
        if n in deltas:
            files += _entries(log / str(n))
            continue
        holder = next((c for c in compacted if c >= n), None)
        if holder is None:
            raise CheckpointFileError(log, f"log batch {n} is in none of its files")
        files += [e for e in _entries(log / f"{holder}{COMPACT}") if e.batch_id == n]
    return files


# -- what a restart reads -------------------------------------------------------------------
def files_read_at_start(checkpoint: Location) -> list[tuple[Location, LogKind]]:
    """The Spark log files a restarted query reads, with their kind: the two newest offsets
    files (newest first), the newest commit file, then every source log's newest compaction
    and the files after it (newest first)."""
    offsets = batch_ids(checkpoint / "offsets")
    files: list[tuple[Location, LogKind]] = [
        (checkpoint / "offsets" / str(b), "offsets") for b in reversed(offsets[-2:])
    ]
    commits = batch_ids(checkpoint / "commits")
    files += [(checkpoint / "commits" / str(b), "commits") for b in commits[-1:]]
    sources = checkpoint / "sources"
    for log in sorted(sources.iterdir()) if sources.is_dir() else ():
        if not log.is_dir():
            continue
        whole = _whole_log(log)
        compaction = whole[:1] if whole and whole[0].name.endswith(COMPACT) else []
        files += [(path, "source") for path in compaction + whole[len(compaction) :][::-1]]
    return files
