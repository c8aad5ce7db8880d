"""Landing files that changed after bronze ingested them: found, reported, never ignored.

Spark's file source reads a landing path once: a file appended to after it was ingested, or a
new file renamed onto an ingested name, is skipped as already seen, so bronze silently lacks
its new content. `check_landing(config, dataset)` finds such files with `stat` calls only (on
object storage, one HEAD request each; no file content is read): for every file the bronze
checkpoint's file source log lists (`sources/0/`: path and modification time, in milliseconds,
of each ingested file), the file now at that landing path, else its archived copy
(`<data>/archive/bronze<landing path>`, where Spark's `cleanSource=archive` moves it), is
compared (`same_content`) with
- the size, modification time and, on object storage, ETag that the bronze batch that read it
  recorded (`<checkpoint>/runoff_files.jsonl`, one JSON line per file; later lines win), before
  Spark moved it: locally the move keeps the modification time, on object storage it is a copy
  with a new one and the same ETag; or, for a file not recorded yet, the modification time
  Spark recorded (then its state is recorded now).
A file that differs is reported with the `runoff backfill` command that re-reads it: its
`date=YYYY-MM-DD/` folder's day, `--start D --end D+1`. Once a successful backfill run of the
ledger that started after the file's last change covers that whole day, the file's new state
is recorded as read and it is no longer reported (the change time is the file's status change
time, ctime, which an `rsync -t` or `touch -d` cannot set back). A file gone from both places is not
reported (it is not what Spark skipped). `runoff bronze` reports changed files in its output
and its ledger row (`details.changed_files`); `runoff status` lists them (`landing.changed_files`).

Spark-free (status uses it). Cost per run: one `stat` per ingested file plus reading the file
source log (its newest compaction and the files after it, `jobs.checkpoints.files`) and the
recorded states.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from core.config import Location, RunoffConfig, append_text, as_location, real_name
from jobs.checkpoints.files import source_log

STATES_FILE = "runoff_files.jsonl"
_DAY_FOLDER = re.compile(r"date=(\d{4}-\d{2}-\d{2})")
SHOWN = 20  # changed files printed by a run (all of them are in the ledger and status)


def is_data_file(relative: Location) -> bool:
    """Spark's file sources skip names starting with `.` or `_` (temp files, markers)."""
    return not any(part.startswith((".", "_")) for part in relative.parts)


def landing_files(landing_dir: Location) -> list[Location]:
    """Every data file under `landing_dir` (recursively), sorted."""
    if not landing_dir.is_dir():
        return []
    return sorted(
        p
        for p in landing_dir.rglob("*")
        if p.is_file() and is_data_file(p.relative_to(landing_dir))
    )


@dataclass(frozen=True)
class FileState:
    size: int | None  # None: unknown (only Spark's modification time was recorded)
    mtime_ms: int
    etag: str | None = None  # object storage: the store's tag of the content

    def to_json(self, path: str) -> dict[str, Any]:
        doc: dict[str, Any] = {"path": path, "size": self.size, "mtime_ms": self.mtime_ms}
        if self.etag is not None:
            doc["etag"] = self.etag
        return doc


@dataclass(frozen=True)
class ChangedFile:
    """An ingested landing file whose content changed since (by its size or modification time)."""

    path: str  # the landing path Spark ingested
    relative: str  # below the landing folder (the path itself if outside it)
    location: Location  # where it is now: the landing path, or its archived copy
    archived: bool
    recorded: FileState
    now: FileState
    day: date | None  # of its `date=` folder
    backfill: str | None  # the command that re-reads it; None outside a `date=` folder
    changed_ms: int = 0  # when it last changed: its inode change time (ctime), or mtime if later
    # In landing while the archive holds the ingested file of the same name: a replacement.
    replaces_archived: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.relative,
            "location": "archive" if self.archived else "landing",
            "path": str(self.location),
            "recorded_size": self.recorded.size,
            "size": self.now.size,
            "recorded_modified_at": _iso(self.recorded.mtime_ms),
            "modified_at": _iso(self.now.mtime_ms),
            "backfill": self.backfill,
            "replaces_archived": self.replaces_archived,
        }

    def describe(self, dataset: str) -> str:
        """`date=.../x.json changed after it was ingested (...): run `runoff backfill ...``."""
        size = (
            f"size {self.recorded.size} -> {self.now.size} bytes, "
            if self.recorded.size is not None and self.recorded.size != self.now.size
            else f"size {self.now.size} bytes, "
        )
        facts = (
            f"{size}modified {_text(self.recorded.mtime_ms)} -> {_text(self.now.mtime_ms)} UTC"
            f"{', archived' if self.archived else ''}"
        )
        if self.backfill is not None:
            remedy = f"re-read it: {self.backfill}"
            if self.replaces_archived:
                # The backfill reads one file per name, landing's first (interval_files).
                remedy += (
                    " (it reads this file in place of the archived one of the same name, whose "
                    "rows leave bronze; deliver new data under new names)"
                )
        else:
            remedy = (
                "it is not in a date=YYYY-MM-DD/ folder, so no backfill reads it: "
                f"`runoff reset {dataset} --layer bronze --yes` re-ingests every file"
            )
        return (
            f"landing file {self.relative} changed after it was ingested ({facts}): bronze "
            f"lacks its new content; {remedy}"
        )


@dataclass
class LandingCheck:
    changed: list[ChangedFile] = field(default_factory=list)
    accepted: list[ChangedFile] = field(default_factory=list)  # read again by a backfill
    new_states: dict[str, FileState] = field(default_factory=dict)  # to record


# -- runoff's record of ingested files ----------------------------------------------------------
def read_states(checkpoint: Location) -> dict[str, FileState]:
    path = checkpoint / STATES_FILE
    states: dict[str, FileState] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return states
    for line in lines:
        try:
            doc = json.loads(line)
            size, etag = doc.get("size"), doc.get("etag")
            states[str(doc["path"])] = FileState(
                None if size is None else int(size),
                int(doc["mtime_ms"]),
                None if etag is None else str(etag),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a line cut off by a crash
    return states


def record_states(checkpoint: Location, states: Mapping[str, FileState]) -> None:
    """Append `states` to the recorded ones (one JSON line each, flushed to disk)."""
    if not states:
        return
    lines = "".join(
        json.dumps(s.to_json(p), sort_keys=True) + "\n" for p, s in sorted(states.items())
    )
    checkpoint.mkdir(parents=True, exist_ok=True)
    append_text(checkpoint / STATES_FILE, lines)


# -- comparing ----------------------------------------------------------------------------------
def same_time(recorded_ms: int, now_ms: int) -> bool:
    """Spark records milliseconds (some file systems give whole seconds)."""
    return recorded_ms == now_ms or recorded_ms == now_ms // 1000 * 1000


def current_state(path: Location) -> tuple[FileState, int] | None:
    """The file's size and modification time, and when it last changed (ms): locally its status
    change time, which a writer cannot set back as it can the modification time, or the
    modification time if later; on object storage the object's LastModified, with its ETag.
    None when there is no such file."""
    if not isinstance(path, Path):
        try:
            info = path.fs.info(path.path)
        except FileNotFoundError:
            return None
        if info.get("type") != "file":
            return None
        mtime = int(info["LastModified"].timestamp() * 1000)
        etag = str(info.get("ETag") or "").strip('"') or None
        return FileState(int(info["size"]), mtime, etag), mtime
    try:
        stat = path.stat()
    except OSError:
        return None
    mtime = stat.st_mtime_ns // 1_000_000
    return FileState(stat.st_size, mtime), max(mtime, stat.st_ctime_ns // 1_000_000)


def same_content(recorded: FileState, now: FileState, archived: bool) -> bool:
    """Whether the file still holds what was recorded.

    - Both ETags known, neither from a multipart upload or copy: size and ETag (the content's
      MD5). An object store's move to the archive is a copy: a new modification time, the same
      ETag.
    - Locally, and in the landing folder of an object store: size and modification time.
    - An object moved to the archive whose ETag depends on how it was uploaded or copied in
      parts (a `-N` suffix; S3A copies objects above `fs.s3a.multipart.threshold` in parts):
      size only, as the move gave it a new modification time and tag.
    """
    if recorded.size != now.size:
        return False
    if recorded.etag and now.etag and "-" not in recorded.etag + now.etag:
        return recorded.etag == now.etag
    if archived and now.etag is not None:
        return True
    return recorded.mtime_ms == now.mtime_ms


def folder_day(relative: str) -> date | None:
    """The day of the `date=YYYY-MM-DD` folder a file lies in directly below the landing folder
    (where a backfill looks for it)."""
    match = _DAY_FOLDER.fullmatch(Path(relative).parts[0]) if relative else None
    if match is None:
        return None
    try:
        return date.fromisoformat(match.group(1))
    except ValueError:
        return None


def backfill_command(dataset: str, day: date) -> str:
    return f"runoff backfill {dataset} --start {day} --end {day + timedelta(days=1)}"


def check_landing(
    config: RunoffConfig,
    dataset: str,
    runs: Sequence[Mapping[str, Any]] | None = None,
    only_new: bool = False,
) -> LandingCheck:
    """Compare every ingested file with its recorded state (see the module doc).

    `runs`: the dataset's ledger rows (read when needed and not given); `only_new`: look only at
    files without a recorded state (after a run: record what it ingested). The caller records
    `new_states` (`record_states`) when it holds the bronze lock.
    """
    from delta_tables.catalog import Catalog

    catalog = Catalog.load(config)
    checkpoint = catalog.tables(dataset).bronze.checkpoint
    assert checkpoint is not None
    landing = catalog.landing_dir(dataset).absolute()
    states = read_states(checkpoint)
    check = LandingCheck()
    # Spark's name of each ingested file (its archive path derives from it) and the time it saw.
    spark_times = {f.path: f.timestamp for f in source_log(checkpoint) if f.timestamp is not None}
    for path, spark_ms in sorted(spark_times.items()):
        known = states.get(path)
        if only_new and known is not None:
            continue
        location = as_location(path)
        found = current_state(location)
        archived = found is None
        if archived:
            location = config.archived(path)
            found = current_state(location)
        if found is None:
            continue  # gone from landing and archive: nothing Spark skipped
        now, changed_ms = found
        if known is None:
            if same_time(spark_ms, now.mtime_ms):
                check.new_states[path] = now
                continue
            known = FileState(None, spark_ms)
        elif same_content(known, now, archived):
            if known.etag is None and now.etag is not None and not archived:
                check.new_states[path] = now  # recorded before runoff kept ETags
            continue
        relative = _relative(path, landing)
        day = folder_day(relative)
        check.changed.append(
            ChangedFile(
                path=path,
                relative=relative,
                location=location,
                archived=archived,
                recorded=known,
                now=now,
                day=day,
                backfill=backfill_command(dataset, day) if day is not None else None,
                changed_ms=changed_ms,
                replaces_archived=not archived and config.archived(path).exists(),
            )
        )
    if check.changed:
        _accept_backfilled(check, config, dataset, runs)
    return check


def _relative(path: str, landing: Location) -> str:
    for base in (str(landing), real_name(landing)):
        if path.startswith(f"{base.rstrip('/')}/"):
            return path[len(base.rstrip("/")) + 1 :]
    return path


def _accept_backfilled(
    check: LandingCheck,
    config: RunoffConfig,
    dataset: str,
    runs: Sequence[Mapping[str, Any]] | None,
) -> None:
    """Files a successful backfill re-read after their last change: their state is recorded."""
    if runs is None:
        from delta_tables.ledger import read_runs

        runs = read_runs(config.runs_path, dataset)
    backfills = list(_backfill_intervals(runs))
    if not backfills:
        return
    still: list[ChangedFile] = []
    for changed in check.changed:
        changed_at = datetime.fromtimestamp(changed.changed_ms / 1000, UTC)
        after = [(s, e) for started, s, e in backfills if started > changed_at]
        if changed.day is not None and covers(after, changed.day):
            check.accepted.append(changed)
            check.new_states[changed.path] = changed.now
        else:
            still.append(changed)
    check.changed = still


def _backfill_intervals(
    runs: Iterable[Mapping[str, Any]],
) -> Iterable[tuple[datetime, datetime, datetime]]:
    """(started_at, start, end) of every successful backfill run."""
    from delta_tables.ledger import run_details

    for run in runs:
        if run.get("layer") != "backfill" or run.get("status") != "success":
            continue
        try:
            details = run_details(run)
            start = _utc(datetime.fromisoformat(details["start"]))
            end = _utc(datetime.fromisoformat(details["end"]))
            started = _utc(run["started_at"])
        except (ValueError, KeyError, TypeError):
            continue
        yield started, start, end


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def covers(intervals: Iterable[tuple[datetime, datetime]], day: date) -> bool:
    """Whether the union of `intervals` covers the whole UTC day."""
    at = datetime(day.year, day.month, day.day, tzinfo=UTC)
    end = at + timedelta(days=1)
    for start, stop in sorted(intervals):
        if start > at:
            break
        at = max(at, stop)
        if at >= end:
            return True
    return at >= end


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _text(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def report_lines(dataset: str, changed: Sequence[ChangedFile], job: str) -> list[str]:
    """The lines a run prints: one per changed file (at most `SHOWN`), then the rest's count."""
    lines = [f"{job}: {c.describe(dataset)}" for c in changed[:SHOWN]]
    if len(changed) > SHOWN:
        lines.append(
            f"{job}: and {len(changed) - SHOWN} more changed landing files: "
            f"`runoff status {dataset}` lists them all with their backfill commands"
        )
    return lines
