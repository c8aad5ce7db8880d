"""Sample landing data: the machinery of the seed datasets' deterministic generators.

Input: a dataset name and options. Output: landing files, written atomically, under
`<landing dir>/date=YYYY-MM-DD/part-<first event time>-<seq>-s<seed>-<hash>.json` (`.txt` for
`lines`), one line per record. The same options give the same bytes (`random.Random` seeded
from the seed, no clock); another seed or start writes new names, never over earlier files.

Calling it:

    runoff generate <dataset> [--files N] [--rows-per-file N] [--start ISO8601] [--seed N]
                              [--malformed-rate F] [--late-rate F]

    jobs.samples.generate("events", landing_dir, files=None, rows_per_file=None, start=None,
                          seed=0, malformed_rate=0.0, late_rate=0.0)
    jobs.samples.generate_dataset(config, "events", ...)   # into the dataset's landing folder

`landing_dir` is the dataset's own landing directory (`config.landing_dir(dataset)`); `start` is
a datetime (naive means UTC) or an ISO-8601 string; None takes the dataset's defaults
(`GeneratorSpec`). All return one `GeneratedFile(path, date, records, malformed, late, blank)`
per file, in delivery order. `GeneratorSpec.plan(...)` computes the same files without writing.

Landing line contract (bronze and tests/expected.py rely on it). Lines end with `\\n`; no line
contains `\\r`. Every line is exactly one of:
- blank: empty or only ASCII whitespace (regex `^\\s*$`). Not a record, not malformed: ignored.
- valid record (JSON datasets): valid UTF-8; parses as a JSON object; every required field of the
  dataset (`Dataset.required`) is present and not null; every field of `RECORD_SCHEMA` that is
  present and not null has its JSON type: long = JSON integer (no fraction or exponent, 64-bit),
  double = JSON number, string = JSON string, timestamp = JSON string in ISO-8601
  (`2024-01-01T00:00:02.317Z`). Other keys are ignored. The event-time field is required.
  Bronze also refuses what no valid record needs (README "Limits of a landing line": lines over
  1 MiB, non-strict JSON such as NaN, escapes of half a surrogate pair, times beyond
  0001-01-02 .. 9999-12-30); the generator writes none of them.
- valid record (`lines`): valid UTF-8 and not blank; the record is the whole line.
- malformed: any other non-blank line. The generator writes exactly
  `round(malformed_rate * records)` of them, extra to the requested records, mixing:
  truncated JSON; a wrong type in a required field (a JSON string where a number is expected, or
  a string that is not a timestamp); a valid object without its event-time field; invalid UTF-8
  bytes (inside a string of otherwise valid JSON, or leading garbage). For `lines`: invalid
  UTF-8 only. Spark's text source keeps the raw bytes, so `is_valid_utf8(value)` finds them
  (`from_json` alone would accept the U+FFFD it decodes them to); wrong types show up in
  `from_json`'s corrupt-record column. The generator never writes values that Spark coerces
  silently (a number for a string field, a number for a timestamp).
  When malformed_rate > 0, a few blank lines are added too (1 per 20 malformed lines, rounded up).

Event time and files (what bronze, silver and backfill may rely on):
- Every record in `date=D/` has its event time on day D (UTC): files never span midnight (a file
  that would is compressed in time to end before it) and late records never cross a day.
- Within one call, files are time-ordered: the newest event of a file is at most the oldest
  on-time event of the next; names sort in delivery order within a day; file modification times
  increase by at least 1 ms per file (the order Spark's file source lists them in).
- `late_rate`: exactly `round(late_rate * records)` records are delivered in the file after the
  one their event time belongs to. A late record's event time is older than the newest event of
  the earlier files, by at most `GeneratorSpec.max_lateness` (events 30 minutes, sensors and
  activity 4 minutes: well inside the 1 hour / 10 minutes watermarks), so no watermark drops it
  when files are read in order. `lines` records carry no event time: `late_rate` must be 0.
  With late records, a file holds a few more or fewer than `rows_per_file` records; the total
  is exact.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from core.config import Location, as_location
from core.errors import ConfigError, RunoffError

if TYPE_CHECKING:
    pass

DEFAULT_START = datetime(2024, 1, 1, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
US_PER_SECOND = 1_000_000
US_PER_DAY = 86_400 * US_PER_SECOND
BLANK_PER_MALFORMED = 20
# Bytes that make a line invalid UTF-8 (none of them is a line break).
BAD_UTF8 = (b"\xff", b"\xe9", b"\xc3\x28", b"\x80", b"\xfe\xfe")
JSON_MALFORMED_KINDS = ("truncated", "wrong_type", "missing_time", "bad_utf8")
TEXT_MALFORMED_KINDS = ("bad_utf8",)
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)  # compact, ASCII only
_BAD_MARK = "\u0001"  # placeholder in a string value, swapped for invalid bytes after encoding


@dataclass(frozen=True)
class Record:
    """One valid landing record before encoding.

    `time_us` is its event time (bronze `event_time`) in microseconds since the epoch, UTC;
    `value` the JSON object (or, for text datasets, the line); `movable` whether it may be
    delivered one file late (events: no Open may arrive after its Close).
    """

    time_us: int
    value: Mapping[str, Any] | str
    movable: bool = True


@dataclass(frozen=True)
class GeneratedFile:
    """One landing file: valid records, malformed lines, late records, blank lines in it."""

    path: Location
    date: date
    records: int
    malformed: int
    late: int
    blank: int = 0
    new: bool = True  # False: the same file (same name, so the same bytes) was already there


@dataclass(frozen=True)
class PlannedFile:
    """A landing file before it is written: its path below the landing dir and its bytes."""

    relative_path: Path
    date: date
    content: bytes
    records: int
    malformed: int
    late: int
    blank: int


# (rng, start, files, rows_per_file) -> the records of each file, time-ordered, one day per file
RecordBuilder = Callable[[random.Random, datetime, int, int], list[list[Record]]]


@dataclass(frozen=True)
class GeneratorSpec:
    """How one dataset's sample data is made: defaults, a record builder, how to spoil lines."""

    dataset: str
    record_format: Literal["json", "text"]
    build: RecordBuilder
    default_files: int = 20
    default_rows_per_file: int = 1000
    default_start: datetime = DEFAULT_START
    event_time_field: str | None = None
    # (field, bad value): a JSON string where the schema wants a number or a timestamp
    wrong_types: tuple[tuple[str, str], ...] = ()
    # string fields that receive invalid UTF-8 bytes
    text_fields: tuple[str, ...] = ()
    max_lateness: timedelta | None = None
    malformed_kinds: tuple[str, ...] = field(default=JSON_MALFORMED_KINDS)
    # `runoff demo`'s sample: small enough for a 2-core laptop, big enough for charts
    demo: Mapping[str, Any] = field(default_factory=dict)

    @property
    def suffix(self) -> str:
        return ".json" if self.record_format == "json" else ".txt"

    def generate(
        self,
        landing_dir: str | os.PathLike[str] | Location,
        files: int | None = None,
        rows_per_file: int | None = None,
        start: datetime | str | None = None,
        seed: int = 0,
        malformed_rate: float = 0.0,
        late_rate: float = 0.0,
    ) -> list[GeneratedFile]:
        """Write the files of `plan(...)` atomically under `landing_dir`."""
        planned = self.plan(
            files=files,
            rows_per_file=rows_per_file,
            start=start,
            seed=seed,
            malformed_rate=malformed_rate,
            late_rate=late_rate,
        )
        return write_files(as_location(landing_dir), planned)

    def plan(
        self,
        files: int | None = None,
        rows_per_file: int | None = None,
        start: datetime | str | None = None,
        seed: int = 0,
        malformed_rate: float = 0.0,
        late_rate: float = 0.0,
    ) -> list[PlannedFile]:
        """The files `generate` writes: pure and deterministic (no I/O, no clock)."""
        n_files = self.default_files if files is None else files
        n_rows = self.default_rows_per_file if rows_per_file is None else rows_per_file
        begin = self.default_start if start is None else parse_start(start)
        _check_count("files", n_files)
        _check_count("rows_per_file", n_rows)
        _check_rate("malformed_rate", malformed_rate)
        _check_rate("late_rate", late_rate)

        total = n_files * n_rows
        n_late = round(late_rate * total)
        if n_late and self.max_lateness is None:
            raise ConfigError(
                f"dataset {self.dataset!r} has no event time in its records: "
                "late records do not apply (use a late rate of 0)"
            )

        # Separate random streams: adding malformed or late lines never changes the records.
        def rng(purpose: str) -> random.Random:
            return random.Random(f"runoff/{self.dataset}/{seed}/{purpose}")

        per_file = self.build(rng("records"), begin, n_files, n_rows)
        _check_built(self.dataset, per_file, n_files, n_rows)
        on_time_start = [min(r.time_us for r in records) for records in per_file]
        late_counts = [0] * n_files
        if n_late and self.max_lateness is not None:
            per_file, late_counts = deliver_late(
                per_file, n_late, _us(self.max_lateness), rng("late"), late_rate
            )

        lines = [[self._encode(r.value) for r in records] for records in per_file]
        bad_rng = rng("malformed")
        n_bad = round(malformed_rate * total)
        bad: list[list[bytes]] = [[] for _ in range(n_files)]
        for k in range(n_bad):
            i = bad_rng.randrange(n_files)
            template = bad_rng.choice(per_file[i]).value
            kind = self.malformed_kinds[k % len(self.malformed_kinds)]
            bad[i].append(self._malformed(kind, template, bad_rng))
        blank: list[int] = [0] * n_files
        for _ in range(math.ceil(n_bad / BLANK_PER_MALFORMED)):
            blank[bad_rng.randrange(n_files)] += 1

        planned: list[PlannedFile] = []
        for i in range(n_files):
            body = lines[i]
            for extra in [*bad[i], *([b""] * blank[i])]:
                body.insert(bad_rng.randrange(len(body) + 1), extra)
            content = b"".join(line + b"\n" for line in body)
            first = EPOCH + timedelta(microseconds=on_time_start[i])
            digest = hashlib.sha256(content).hexdigest()[:10]
            name = f"part-{first:%Y%m%dT%H%M%SZ}-{i:05d}-s{seed}-{digest}{self.suffix}"
            planned.append(
                PlannedFile(
                    relative_path=Path(f"date={first.date().isoformat()}") / name,
                    date=first.date(),
                    content=content,
                    records=len(per_file[i]),
                    malformed=len(bad[i]),
                    late=late_counts[i],
                    blank=blank[i],
                )
            )
        return planned

    # -- lines ------------------------------------------------------------------------------
    def _encode(self, value: Mapping[str, Any] | str) -> bytes:
        if isinstance(value, str):
            return value.encode("utf-8")
        return _JSON.encode(value).encode("ascii")

    def _malformed(self, kind: str, template: Mapping[str, Any] | str, rng: random.Random) -> bytes:
        """One malformed line of `kind`, made from a valid record."""
        if isinstance(template, str):  # text: a word in a legacy 8-bit encoding, or stray bytes
            raw = template.encode("utf-8")
            cuts = [i for i, byte in enumerate(raw) if byte == ord(" ")] or [len(raw)]
            at = rng.choice(cuts)
            bad = rng.choice((b" caf\xe9", b" na\xefve", b" \xff\xfe", b" \x80"))
            return raw[:at] + bad + raw[at:]
        record = dict(template)
        if kind == "truncated":
            raw = self._encode(record)
            return raw[: rng.randrange(1, len(raw))]  # always loses the closing brace
        if kind == "wrong_type":
            name, value = rng.choice(self.wrong_types)
            record[name] = value
            return self._encode(record)
        if kind == "missing_time":
            assert self.event_time_field is not None
            del record[self.event_time_field]
            return self._encode(record)
        if kind == "bad_utf8":
            bad = rng.choice(BAD_UTF8)
            if rng.random() < 0.25:  # leading garbage, e.g. a UTF-16 byte-order mark
                return b"\xff\xfe" + self._encode(record)
            name = rng.choice(self.text_fields)
            text = str(record[name])
            at = rng.randrange(len(text) + 1)
            record[name] = text[:at] + _BAD_MARK + text[at:]
            return self._encode(record).replace(b"\\u0001", bad, 1)
        raise ValueError(f"unknown malformed kind {kind!r}")


# -- building blocks for the dataset generators ---------------------------------------------
def parse_start(value: datetime | str) -> datetime:
    """A start time as an aware UTC datetime (naive values and strings are taken as UTC)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(
                f"start {value!r} is not an ISO-8601 date or time (e.g. 2024-01-01T00:00:00Z)"
            ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def epoch_us(moment: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (exact, no float rounding)."""
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * US_PER_SECOND + delta.microseconds


def from_epoch_us(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


def iso_ms(millis: int) -> str:
    """`2024-01-01T00:00:02.317Z` for milliseconds since the epoch."""
    moment = EPOCH + timedelta(milliseconds=millis)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{millis % 1000:03d}Z"


def next_midnight(ticks: int, ticks_per_day: int) -> int:
    return (ticks // ticks_per_day + 1) * ticks_per_day


def chunk_by_day(
    ticks: Sequence[int], files: int, rows_per_file: int, ticks_per_day: int
) -> list[list[int]]:
    """Cut a time-ordered stream into `files` chunks of `rows_per_file`, none spanning midnight.

    `ticks` are event times in any unit (`ticks_per_day` of them per day), at least
    `files * rows_per_file` of them. A chunk that would cross midnight is compressed in time to
    end just before it and every later tick moves earlier by the same amount, so the stream
    stays continuous (no gap) and keeps its order. Returns the adjusted ticks of each chunk.
    """
    chunks: list[list[int]] = []
    offset = 0
    for c in range(files):
        nominal = ticks[c * rows_per_file : (c + 1) * rows_per_file]
        first, last = nominal[0] - offset, nominal[-1] - offset
        day_end = next_midnight(first, ticks_per_day)
        if last < day_end:
            chunks.append([t - offset for t in nominal])
            continue
        span, room = nominal[-1] - nominal[0], day_end - 1 - first
        chunks.append([first + (t - nominal[0]) * room // span for t in nominal])
        offset = nominal[-1] - day_end  # the next record lands at or after midnight
    return chunks


def deliver_late(
    per_file: list[list[Record]],
    n_late: int,
    max_lateness_us: int,
    rng: random.Random,
    late_rate: float = 0.0,
) -> tuple[list[list[Record]], list[int]]:
    """Move `n_late` records into the next file; returns the files and late records per file.

    A record may move from file i to i+1 when it is `movable`, both files are on the same day,
    it is not among the newest of file i (so it stays older than what file i delivers) and it is
    at most `max_lateness_us` older than the oldest record of file i+1. It is inserted at a
    random place of file i+1.
    """
    eligible: list[tuple[int, int]] = []
    for i in range(len(per_file) - 1):
        current, following = per_file[i], per_file[i + 1]
        newest = max(r.time_us for r in current)
        oldest_next = min(r.time_us for r in following)
        if newest // US_PER_DAY != oldest_next // US_PER_DAY:
            continue
        eligible.extend(
            (i, j)
            for j, r in enumerate(current)
            if r.movable and r.time_us < newest and oldest_next - r.time_us <= max_lateness_us
        )
    if n_late > len(eligible):
        raise ConfigError(
            f"late rate {late_rate:g} asks for {n_late} late records but only {len(eligible)} "
            f"records are close enough to a later file on the same day: lower the late rate "
            "or add files"
        )
    chosen = set(rng.sample(eligible, n_late))
    delivered: list[list[Record]] = []
    late_counts: list[int] = []
    incoming: list[Record] = []
    for i, records in enumerate(per_file):
        kept = [r for j, r in enumerate(records) if (i, j) not in chosen]
        for record in incoming:
            kept.insert(rng.randrange(len(kept) + 1), record)
        delivered.append(kept)
        late_counts.append(len(incoming))
        incoming = [r for j, r in enumerate(records) if (i, j) in chosen]
    return delivered, late_counts


def _us(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * US_PER_SECOND + delta.microseconds


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}={value!r} must be a whole number of at least 1")


def _check_rate(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name}={value!r} must be a number between 0 and 1")


def _check_built(dataset: str, per_file: list[list[Record]], files: int, rows: int) -> None:
    """The builder's promises: the file count, rows per file and one day per file."""
    if len(per_file) != files or any(len(records) != rows for records in per_file):
        raise RuntimeError(f"the {dataset} generator did not build {files} files of {rows} rows")
    for i, records in enumerate(per_file):
        days = {r.time_us // US_PER_DAY for r in records}
        if len(days) != 1:
            raise RuntimeError(f"the {dataset} generator built file {i} spanning {len(days)} days")


# -- writing -------------------------------------------------------------------------------
def write_files(landing_dir: Location, planned: Iterable[PlannedFile]) -> list[GeneratedFile]:
    """Place each planned file atomically: hidden temp file, fsync, rename, fsync the folder
    (on object storage, one PUT: atomic by itself).

    A file whose name already exists is left alone: names carry a hash of the content, so it
    holds the same bytes. Modification times increase by at least 1 ms per file, the order in
    which Spark's file source lists new files.
    """
    written: list[GeneratedFile] = []
    last_mtime_ms = 0
    for plan in planned:
        target = landing_dir / plan.relative_path
        new = not target.exists()
        try:
            if new:
                last_mtime_ms = _place(target, plan.content, last_mtime_ms)
        except OSError as exc:
            where = exc.filename or target
            raise RunoffError(
                f"cannot write landing file under {where}: {exc.strerror or exc}"
            ) from exc
        written.append(
            GeneratedFile(
                path=target,
                date=plan.date,
                records=plan.records,
                malformed=plan.malformed,
                late=plan.late,
                blank=plan.blank,
                new=new,
            )
        )
    return written


def _place(target: Location, content: bytes, last_mtime_ms: int) -> int:
    if not isinstance(target, Path):
        target.write_bytes(content)  # the store sets the modification time
        return max(int(target.stat().st_mtime * 1000), last_mtime_ms)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A leading dot hides the file from Spark's file source until it is complete.
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        mtime_ms = max(time.time_ns() // 1_000_000, last_mtime_ms + 1)
        os.utime(temp, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return mtime_ms


__all__ = [
    "DEFAULT_START",
    "GeneratedFile",
    "GeneratorSpec",
    "PlannedFile",
    "Record",
    "chunk_by_day",
    "deliver_late",
    "epoch_us",
    "from_epoch_us",
    "iso_ms",
    "next_midnight",
    "parse_start",
    "write_files",
]
