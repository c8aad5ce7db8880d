"""Table maintenance: compaction, checkpoints every N commits, vacuum, history.

delta-rs writes a checkpoint only every 100 commits by default, and opening a table replays
every JSON commit since the last one, so runoff checkpoints every `interval` commits (10 by
default, `RunoffConfig.checkpoint_interval`): writers call `checkpoint_if_due()` after each
commit. `vacuum()` also deletes files no commit ever referenced (writes that crashed before
committing). Each function returns a small frozen dataclass whose `line()` is one CLI line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from delta_tables.scan import local_path, open_table

DEFAULT_CHECKPOINT_INTERVAL = 10
DEFAULT_RETENTION_HOURS = 168


@dataclass(frozen=True)
class CompactResult:
    table: str
    files_removed: int
    files_added: int
    version: int

    def line(self) -> str:
        return (
            f"compact {self.table}: {self.files_removed} small files rewritten into "
            f"{self.files_added} (version {self.version})"
        )


@dataclass(frozen=True)
class CheckpointResult:
    table: str
    version: int
    created: bool
    last_checkpoint: int | None

    def line(self) -> str:
        if self.created:
            return f"checkpoint {self.table}: written at version {self.version}"
        return (
            f"checkpoint {self.table}: not due at version {self.version} "
            f"(last checkpoint: {'none' if self.last_checkpoint is None else self.last_checkpoint})"
        )


@dataclass(frozen=True)
class VacuumResult:
    table: str
    files: tuple[str, ...]
    retention_hours: float
    dry_run: bool

    def line(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (
            f"vacuum {self.table}: {verb} {len(self.files)} unreferenced files older than "
            f"{self.retention_hours:g} h"
        )


@dataclass(frozen=True)
class HistoryResult:
    table: str
    entries: tuple[dict[str, Any], ...]

    def line(self) -> str:
        if not self.entries:
            return f"history {self.table}: no commits"
        latest = self.entries[0]
        when = datetime.fromtimestamp(latest.get("timestamp", 0) / 1000, tz=UTC)
        return (
            f"history {self.table}: {len(self.entries)} commits shown, latest version "
            f"{latest.get('version')} {latest.get('operation')} at {when:%Y-%m-%d %H:%M:%S}Z"
        )


@dataclass(frozen=True)
class MaintenanceResult:
    compact: CompactResult
    checkpoint: CheckpointResult
    vacuum: VacuumResult

    def line(self) -> str:
        return "; ".join((self.compact.line(), self.checkpoint.line(), self.vacuum.line()))


def last_checkpoint_version(path: str) -> int | None:
    """The version of the latest checkpoint (`_delta_log/_last_checkpoint`), None if none."""
    marker = Path(local_path(path), "_delta_log", "_last_checkpoint")
    try:
        return int(json.loads(marker.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return None


def compact(path: str, target_size: int | None = None) -> CompactResult:
    """Rewrite small files into larger ones (`optimize.compact`, a dataChange=false commit)."""
    dt = open_table(path)
    metrics = dt.optimize.compact(target_size=target_size)
    dt.update_incremental()
    return CompactResult(
        table=local_path(path),
        files_removed=int(metrics.get("numFilesRemoved", 0)),
        files_added=int(metrics.get("numFilesAdded", 0)),
        version=dt.version(),
    )


def checkpoint(path: str) -> CheckpointResult:
    """Write a checkpoint at the current version now."""
    dt = open_table(path)
    dt.create_checkpoint()
    return CheckpointResult(local_path(path), dt.version(), True, dt.version())


def checkpoint_if_due(
    path_or_table: Any, interval: int = DEFAULT_CHECKPOINT_INTERVAL
) -> CheckpointResult:
    """Checkpoint when `interval` commits or more were made since the last checkpoint."""
    is_path = isinstance(path_or_table, str | Path)
    dt = open_table(str(path_or_table)) if is_path else path_or_table
    path = local_path(dt.table_uri)
    last = last_checkpoint_version(path)
    version = dt.version()
    if interval > 0 and version - (last or 0) >= interval:
        dt.create_checkpoint()
        return CheckpointResult(path, version, True, version)
    return CheckpointResult(path, version, False, last)


def vacuum(
    path: str,
    retention_hours: float = DEFAULT_RETENTION_HOURS,
    dry_run: bool = False,
) -> VacuumResult:
    """Delete files older than the retention that no snapshot within it references.

    Includes orphans of crashed writes (`full=True`). A retention below the table's
    `delta.deletedFileRetentionDuration` (7 days by default) is allowed: tests vacuum with 0.
    """
    dt = open_table(path)
    files = dt.vacuum(
        retention_hours=int(retention_hours),
        dry_run=dry_run,
        enforce_retention_duration=False,
        full=True,
    )
    return VacuumResult(local_path(path), tuple(sorted(files)), retention_hours, dry_run)


def history(path: str, limit: int | None = 20) -> HistoryResult:
    """The latest commits, newest first (commitInfo as delta-rs reports it)."""
    dt = open_table(path)
    return HistoryResult(local_path(path), tuple(dt.history(limit)))


def maintain(
    path: str,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
    retention_hours: float = DEFAULT_RETENTION_HOURS,
) -> MaintenanceResult:
    """`runoff maintain`: compact, then checkpoint if due, then vacuum."""
    compacted = compact(path)
    checkpointed = checkpoint_if_due(path, checkpoint_interval)
    vacuumed = vacuum(path, retention_hours)
    return MaintenanceResult(compacted, checkpointed, vacuumed)
