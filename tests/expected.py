"""Expected results computed independently of the pipeline: pure Python over landing bytes.

Nothing here imports the pipeline (no Spark, no jobs.datasets, no jobs.samples.generator): the
record schemas, required fields and window rules are restated from the seed specs
(jobs/datasets/*.yaml, README "Dataset spec reference") and the landing line contract, and
tests/unit/jobs/samples/test_generator.py checks this restatement against the dataset modules.

A landing line is
- blank: empty or only ASCII whitespace (ignored);
- valid (JSON datasets): at most MAX_LINE_BYTES long, UTF-8, a strict JSON object (no NaN or
  Infinity; no escape of half a surrogate pair), every required field present and not null,
  every schema field present and not null of its JSON type (long: 64-bit integer; double: finite
  number; string: string; timestamp: ISO-8601 string in [EARLIEST, LATEST)), and so a non-null
  event time, within EARLIEST + the longest window .. LATEST - the longest window;
- valid (`lines`): not too long, UTF-8, not blank, and a folder date within those bounds;
- malformed otherwise.

Timestamps are aware UTC datetimes (`naive_utc` strips the zone for comparing with rows that
PySpark collects in a UTC session). Aggregates return lists of dicts with the silver column
names, sorted by their keys, computed without watermarks (every record counts);
`closed_windows` keeps the windows a watermark has closed.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
JSON_DATASETS = ("events", "sensors", "activity")
TEXT_DATASETS = ("lines",)

# Landing record fields and their JSON types, in RECORD_SCHEMA order.
FIELDS: dict[str, dict[str, str]] = {
    "events": {"time": "long", "action": "string"},
    "sensors": {
        "timestamp": "timestamp",
        "deviceId": "string",
        "deviceType": "string",
        "signalStrength": "double",
    },
    "activity": {
        "Arrival_Time": "long",
        "Creation_Time": "long",
        "Device": "string",
        "Index": "long",
        "Model": "string",
        "User": "string",
        "gt": "string",
        "x": "double",
        "y": "double",
        "z": "double",
    },
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "events": ("time", "action"),
    "sensors": ("timestamp", "deviceId", "deviceType", "signalStrength"),
    "activity": ("Creation_Time", "Device", "User", "gt", "x", "y", "z"),
    "lines": ("line",),
}
EVENT_TIME_FIELD: dict[str, str] = {
    "events": "time",
    "sensors": "timestamp",
    "activity": "Creation_Time",
}
BRONZE_RENAMES: dict[str, dict[str, str]] = {"activity": {"Index": "User_ID"}}
WATERMARK: dict[str, timedelta] = {
    "events": timedelta(hours=1),
    "sensors": timedelta(minutes=10),
    "activity": timedelta(minutes=10),
}
SILVER_TABLES: dict[str, tuple[str, ...]] = {
    "events": ("events_action_hourly", "events_action_sliding"),
    "sensors": ("sensors_device_counts", "sensors_type_signal", "sensors_lost_signal"),
    "activity": ("activity_user_minute",),
    "lines": ("lines_word_counts",),
}
LOST_SIGNAL_THRESHOLD = 5

_ISO_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")
_DATE_IN_PATH = re.compile(r"date=(\d{4}-\d{2}-\d{2})")
INT64 = range(-(2**63), 2**63)
MAX_LINE_BYTES = 1 << 20  # README: a longer line is "line too long"
# README: the times the tables hold; the event time keeps the dataset's longest silver window
# away from both ends.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, tzinfo=UTC)
LONGEST_WINDOW: dict[str, timedelta] = {
    "events": timedelta(hours=1),
    "sensors": timedelta(minutes=1),
    "activity": timedelta(minutes=1),
    "lines": timedelta(0),
}
ASCII_WHITESPACE = b" \t\n\x0b\x0c\r"  # what Java regex \s matches

Kind = Literal["valid", "malformed", "blank"]


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, counting every line of the file
    raw: bytes
    kind: Kind
    reason: str | None = None  # why a line is malformed
    record: dict[str, Any] | None = None  # bronze columns of a valid line


@dataclass(frozen=True)
class LandingFile:
    path: Path
    date: date | None  # from the `date=YYYY-MM-DD` folder
    lines: tuple[Line, ...]

    @property
    def records(self) -> list[dict[str, Any]]:
        return [line.record for line in self.lines if line.record is not None]

    @property
    def valid(self) -> int:
        return sum(line.kind == "valid" for line in self.lines)

    @property
    def malformed(self) -> int:
        return sum(line.kind == "malformed" for line in self.lines)

    @property
    def blank(self) -> int:
        return sum(line.kind == "blank" for line in self.lines)


# -- reading landing files ------------------------------------------------------------------
def landing_files(landing_dir: Path) -> list[Path]:
    """Visible files below a dataset's landing dir (no `.`/`_` names), sorted by path."""
    return sorted(
        path
        for path in landing_dir.rglob("*")
        if path.is_file()
        and not any(part.startswith((".", "_")) for part in path.relative_to(landing_dir).parts)
    )


def split_lines(content: bytes) -> list[bytes]:
    """Lines of a file: split on `\\n`; a final newline does not start another line."""
    lines = content.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def folder_date(path: Path) -> date | None:
    match = _DATE_IN_PATH.search(str(path))
    return date.fromisoformat(match.group(1)) if match else None


def read_file(dataset: str, path: Path) -> LandingFile:
    day = folder_date(path)
    lines = tuple(
        classify(dataset, raw, number, path, day)
        for number, raw in enumerate(split_lines(path.read_bytes()), start=1)
    )
    return LandingFile(path=path, date=day, lines=lines)


def read_landing(dataset: str, landing_dir: Path) -> list[LandingFile]:
    return [read_file(dataset, path) for path in landing_files(landing_dir)]


def classify(
    dataset: str, raw: bytes, number: int = 1, path: Path | None = None, day: date | None = None
) -> Line:
    """One landing line as valid (with its bronze record), malformed (with a reason) or blank."""
    if raw.strip(ASCII_WHITESPACE) == b"":
        return Line(number, raw, "blank")
    if len(raw) > MAX_LINE_BYTES:
        return Line(number, raw, "malformed", "line too long")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Line(number, raw, "malformed", "invalid UTF-8")
    source = str(path) if path is not None else None
    if dataset in TEXT_DATASETS:
        event_time = datetime(day.year, day.month, day.day, tzinfo=UTC) if day is not None else None
        if event_time is not None and not _in_bounds(dataset, event_time):
            return Line(number, raw, "malformed", "event time out of range")
        line = {"line": text, **_time_columns(event_time), "_source_file": source}
        return Line(number, raw, "valid", record=line)
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return Line(number, raw, "malformed", "not JSON")
    if not isinstance(value, dict):
        return Line(number, raw, "malformed", "not a JSON object")
    if not _encodable(value):
        return Line(number, raw, "malformed", "invalid unicode escape")
    record: dict[str, Any] = {}
    for name, json_type in FIELDS[dataset].items():
        field_value = value.get(name)
        if field_value is None:
            if name in REQUIRED[dataset]:
                return Line(number, raw, "malformed", f"missing {name}")
            record[name] = None
            continue
        converted = _convert(json_type, field_value)
        if converted is None:
            return Line(number, raw, "malformed", f"wrong type for {name}")
        record[name] = converted
    event_time = _event_time(dataset, record)
    if event_time is None or not _in_bounds(dataset, event_time):
        return Line(number, raw, "malformed", "event time out of range")
    renames = BRONZE_RENAMES.get(dataset, {})
    bronze = {renames.get(name, name): v for name, v in record.items()}
    bronze.update(_time_columns(event_time), _source_file=source)
    bronze["_rescued_data"] = rescued_data(value, FIELDS[dataset])
    return Line(number, raw, "valid", record=bronze)


def rescued_data(value: dict[str, Any], declared: Iterable[str]) -> str | None:
    """The fields a record has beyond the declared ones, as bronze's `_rescued_data`: a compact
    JSON object of their values as text (a string as is, any other value as its JSON), in the
    record's order; None when there are none."""
    known = set(declared)
    extra = {
        k: (v if isinstance(v, str) or v is None else json.dumps(v, separators=(",", ":")))
        for k, v in value.items()
        if k not in known
    }
    return json.dumps(extra, separators=(",", ":"), ensure_ascii=False) if extra else None


def _no_constant(name: str) -> Any:
    """`json.loads`' hook for NaN, Infinity and -Infinity: not JSON."""
    raise ValueError(f"{name} is not JSON")


def _encodable(value: Any) -> bool:
    """Every string of a parsed JSON value (keys too) is text UTF-8 can hold: `json` decodes an
    escape of half a surrogate pair (without its other half) into a lone surrogate."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_encodable(k) and _encodable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_encodable(v) for v in value)
    return True


def _in_bounds(dataset: str, event_time: datetime) -> bool:
    """The event time lies where every window holding it fits in [EARLIEST, LATEST]."""
    margin = LONGEST_WINDOW[dataset]
    return EARLIEST + margin <= event_time < LATEST - margin


def _convert(json_type: str, value: Any) -> Any:
    """The value as its schema type, or None when the JSON type is wrong (or the type cannot
    hold the value)."""
    if isinstance(value, bool):
        return None
    if json_type == "long":
        return value if isinstance(value, int) and value in INT64 else None
    if json_type == "double":
        if not isinstance(value, int | float):
            return None
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if math.isfinite(number) else None
    if json_type == "string":
        return value if isinstance(value, str) else None
    if json_type == "timestamp":
        if not isinstance(value, str) or not _ISO_TIMESTAMP.fullmatch(value):
            return None
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
        except (ValueError, OverflowError):
            return None
        return moment if EARLIEST <= moment < LATEST else None
    raise ValueError(f"unknown JSON type {json_type!r}")


def _event_time(dataset: str, record: dict[str, Any]) -> datetime | None:
    """The event time; None when even a datetime cannot hold it (out of range)."""
    try:
        return _computed_event_time(dataset, record)
    except OverflowError:
        return None


def _computed_event_time(dataset: str, record: dict[str, Any]) -> datetime:
    if dataset == "events":
        return EPOCH + timedelta(seconds=record["time"])
    if dataset == "sensors":
        moment: datetime = record["timestamp"]
        return moment
    if dataset == "activity":  # nanoseconds, truncated to microseconds
        return EPOCH + timedelta(microseconds=record["Creation_Time"] // 1000)
    raise ValueError(f"unknown dataset {dataset!r}")


def _time_columns(event_time: datetime | None) -> dict[str, Any]:
    return {
        "event_time": event_time,
        "event_date": event_time.date() if event_time is not None else None,
    }


# -- counts ---------------------------------------------------------------------------------
def counts(files: Iterable[LandingFile]) -> tuple[int, int, int]:
    """(valid records, malformed lines, blank lines) over files."""
    valid = malformed = blank = 0
    for landing in files:
        valid += landing.valid
        malformed += landing.malformed
        blank += landing.blank
    return valid, malformed, blank


def valid_records(files: Iterable[LandingFile]) -> list[dict[str, Any]]:
    return [record for landing in files for record in landing.records]


def malformed_lines(files: Iterable[LandingFile]) -> list[tuple[Path, int, bytes, str]]:
    """(file, line number, raw bytes, reason) of every malformed line."""
    return [
        (landing.path, line.number, line.raw, line.reason or "")
        for landing in files
        for line in landing.lines
        if line.kind == "malformed"
    ]


def late_counts(files: Sequence[LandingFile]) -> list[int]:
    """Per file (in the given delivery order): records older than the newest earlier record."""
    newest: datetime | None = None
    result: list[int] = []
    for landing in files:
        times = [r["event_time"] for r in landing.records]
        result.append(sum(newest is not None and t < newest for t in times))
        if times:
            newest = max([*times, newest] if newest is not None else times)
    return result


def max_lateness(files: Sequence[LandingFile]) -> timedelta:
    """The largest (newest earlier event time - event time) over late records."""
    newest: datetime | None = None
    worst = timedelta(0)
    for landing in files:
        times = [r["event_time"] for r in landing.records]
        if newest is not None:
            worst = max([worst, *(newest - t for t in times)])
        if times:
            newest = max([*times, newest] if newest is not None else times)
    return worst


def max_event_time(records: Iterable[dict[str, Any]]) -> datetime:
    return max(r["event_time"] for r in records)


# -- windows --------------------------------------------------------------------------------
def _us(moment: datetime) -> int:
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def windows(moment: datetime, size: timedelta, slide: timedelta | None = None) -> list[datetime]:
    """Starts of the windows of `size` (every `slide`, default tumbling) containing `moment`."""
    one_us = timedelta(microseconds=1)
    size_us, slide_us = size // one_us, (slide or size) // one_us
    t = _us(moment)
    last = t // slide_us * slide_us
    starts = []
    start = last
    while start > t - size_us:
        starts.append(EPOCH + timedelta(microseconds=start))
        start -= slide_us
    return sorted(starts)


def _grouped(
    records: Iterable[dict[str, Any]],
    keys: Sequence[str],
    size: timedelta,
    slide: timedelta | None = None,
) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        for start in windows(record["event_time"], size, slide):
            groups[(start, start + size, *(record[k] for k in keys))].append(record)
    return groups


def _rows(
    groups: dict[tuple[Any, ...], list[dict[str, Any]]], keys: Sequence[str], **aggregates: Any
) -> list[dict[str, Any]]:
    rows = []
    for group_key in sorted(groups):
        members = groups[group_key]
        row = dict(zip(("window_start", "window_end", *keys), group_key, strict=True))
        row["count"] = len(members)
        for name, function in aggregates.items():
            row[name] = function(members)
        rows.append(row)
    return rows


def _mean(column: str) -> Any:
    return lambda members: math.fsum(m[column] for m in members) / len(members)


def events_action_hourly(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per action per 1-hour window: window_start, window_end, action, count."""
    return _rows(_grouped(records, ("action",), timedelta(hours=1)), ("action",))


def events_action_sliding(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per action per 10-minute window sliding by 5 minutes."""
    groups = _grouped(records, ("action",), timedelta(minutes=10), timedelta(minutes=5))
    return _rows(groups, ("action",))


def sensors_device_counts(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per device per 5-second window: window_start, window_end, deviceId, count."""
    return _rows(_grouped(records, ("deviceId",), timedelta(seconds=5)), ("deviceId",))


def sensors_type_signal(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per device type per minute: count, min/max/avg signal."""
    groups = _grouped(records, ("deviceType",), timedelta(minutes=1))
    return _rows(
        groups,
        ("deviceType",),
        min_signal=lambda ms: min(m["signalStrength"] for m in ms),
        max_signal=lambda ms: max(m["signalStrength"] for m in ms),
        avg_signal=_mean("signalStrength"),
    )


def sensors_lost_signal(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Device minutes with at least one and fewer than 5 signals (every window, no watermark)."""
    groups = _grouped(records, ("deviceId", "deviceType"), timedelta(minutes=1))
    rows = _rows(groups, ("deviceId", "deviceType"))
    return [row for row in rows if row["count"] < LOST_SIGNAL_THRESHOLD]


def activity_user_minute(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per user, gt and minute: count and mean x, y, z."""
    groups = _grouped(records, ("User", "gt"), timedelta(minutes=1))
    return _rows(groups, ("User", "gt"), mean_x=_mean("x"), mean_y=_mean("y"), mean_z=_mean("z"))


def words(line: str) -> list[str]:
    """Spark's `split(lower(line), "[^\\p{L}']+")` without empty words: runs of Unicode letters
    and apostrophes of the lower-cased line."""
    found: list[str] = []
    current: list[str] = []
    for char in line.lower():
        if char.isalpha() or char == "'":
            current.append(char)
        elif current:
            found.append("".join(current))
            current = []
    if current:
        found.append("".join(current))
    return found


def lines_word_counts(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per word: word, count (running count over all lines)."""
    totals: dict[str, int] = defaultdict(int)
    for record in records:
        for word in words(record["line"]):
            totals[word] += 1
    return [{"word": word, "count": totals[word]} for word in sorted(totals)]


SILVER = {
    "events_action_hourly": events_action_hourly,
    "events_action_sliding": events_action_sliding,
    "sensors_device_counts": sensors_device_counts,
    "sensors_type_signal": sensors_type_signal,
    "sensors_lost_signal": sensors_lost_signal,
    "activity_user_minute": activity_user_minute,
    "lines_word_counts": lines_word_counts,
}


def silver(dataset: str, records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every silver table of `dataset`, watermark-free."""
    return {table: SILVER[table](records) for table in SILVER_TABLES[dataset]}


def closed_windows(
    rows: Iterable[dict[str, Any]], newest_event: datetime, delay: timedelta
) -> list[dict[str, Any]]:
    """The rows whose window a watermark of `delay` behind `newest_event` has closed."""
    watermark = newest_event - delay
    return [row for row in rows if row["window_end"] <= watermark]


def naive_utc(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with aware datetimes made naive UTC (as PySpark collects them in a UTC session)."""
    return [
        {
            k: v.astimezone(UTC).replace(tzinfo=None) if isinstance(v, datetime) else v
            for k, v in row.items()
        }
        for row in rows
    ]
