"""Bronze's pure transforms on tiny batch DataFrames, checked against tests/expected.py.

The expected side classifies each line in pure Python (json, UTF-8 decoding) from the landing
line contract; the lines are hand-written edge cases plus what the generator spoils. The seed
datasets come from their YAML specs (tests/seeds.py); row rules and bronze projections are
checked on specs changed with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from core.config import RunoffConfig
from core.errors import ConfigError
from core.specs import Rule
from delta_tables.catalog import Catalog
from delta_tables.schemas import BRONZE_METADATA, QUARANTINE_SCHEMA
from jobs.bronze import job as bronze
from jobs.bronze.job import BronzeOptions, archive_dir
from jobs.bronze.parse import (
    EARLIEST,
    ERR_EVENT_TIME,
    ERR_JSON,
    ERR_MISSING,
    ERR_NOT_OBJECT,
    ERR_RULE,
    ERR_TIME_RANGE,
    ERR_TOO_LONG,
    ERR_TYPE,
    ERR_UNICODE,
    ERR_UTF8,
    LATEST,
    MAX_LINE_BYTES,
    count_lines,
    event_time_bounds,
    good_rows,
    kept,
    parse_lines,
    quarantine_rows,
    unrepresentable,
)
from jobs.samples import spec_for
from jobs.streaming.dataset import Dataset, compile_dataset
from tests import expected
from tests.seeds import seed, seed_spec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

INGESTED_AT = datetime(2024, 3, 1, 12, 30, tzinfo=UTC)
BATCH_ID = 7

# Hand-written lines: every class of the contract, plus Spark's lenient corners.
EVENTS_EDGE_CASES: tuple[bytes, ...] = (
    b'{"time":1704067200,"action":"Open"}',
    b'  {"time": 1704067201, "action": "Close"}  ',
    b'{"time":1704067202,"action":"Open","extra":{"action":5}}',
    b'{"time":1704067203,"action":"Close","note":"late","n":3,"flag":true,"gone":null}',
    b'{"time":1704067204,"action":"Open","Time":3,"tags":["a","b"]}',
    b"",
    b"   \t ",
    b"not json",
    b"[1,2]",
    b"42",
    b"null",
    b'{"time":1704067200,"action":"Open"',
    b'{"time":1704067200,"action":"Open"} trailing',
    b'{"time":"abc","action":"Open"}',
    b'{"time":1.5,"action":"Open"}',
    b'{"time":true,"action":"Open"}',
    b'{"time":99999999999999999999,"action":"Open"}',
    b'{"time":1704067200,"action":5}',
    b'{"time":1704067200,"action":{"a":1}}',
    b'{"time":1704067200,"action":null}',
    b'{"action":"Open"}',
    b"{}",
    b'{"time":1704067200,"action":"Op\xff\xfeen"}',
    b'\xff\xfe{"time":1704067200,"action":"Open"}',
)
# Lines an attacker writes (events: the longest silver window is 1 hour, so event times must lie
# in [0001-01-02T01:00Z, 9999-12-30T23:00Z)), each with the `_error` it must get (None: valid).
HOSTILE_EVENTS: tuple[tuple[bytes, str | None], ...] = (
    (b'{"time":253402300800,"action":"Open"}', ERR_TIME_RANGE),  # 10000-01-01
    (b'{"time":253402210800,"action":"Open"}', ERR_TIME_RANGE),  # 9999-12-30T23:00Z
    (b'{"time":253402210799,"action":"Open"}', None),  # 9999-12-30T22:59:59Z: the last second
    (b'{"time":-62135506800,"action":"Close"}', None),  # 0001-01-02T01:00Z: the first second
    (b'{"time":-62135506801,"action":"Close"}', ERR_TIME_RANGE),
    (b'{"time":-62135596801,"action":"Open"}', ERR_TIME_RANGE),  # year 0
    (b'{"time":9223372036854775807,"action":"Open"}', ERR_TIME_RANGE),
    (b'{"time":-9223372036854775808,"action":"Open"}', ERR_TIME_RANGE),
    (b'{"time":1704067200,"action":NaN}', ERR_JSON),
    (b'{"time":1704067200,"action":-Infinity}', ERR_JSON),
    (b'{"time":1704067200,"action":Infinity}', ERR_JSON),
    (b'{"time":1704067200,"action":"Open","x":[NaN]}', ERR_JSON),
    (b"{'time': 1704067200, 'action': 'Open'}", ERR_JSON),
    (b'{"time":1704067200,/* note */"action":"Open"}', ERR_JSON),
    (b'{"time":1704067200,"action":"Open"} // }', ERR_JSON),
    (b'{"time":1704067200,"action":"Open"} # }', ERR_JSON),
    (b'{"time":1704067200,"action":"Open"}{"time":1704067201,"action":"Close"}', ERR_JSON),
    (b'{"time":1704067200,"action":"Open"}, {"x":"}"}', ERR_JSON),
    (b'{"time":1704067200,"action":"Open"}] [{}', ERR_JSON),
    (b'{"time":1704067200,"action":"Open"} "}"}', ERR_JSON),
    (b'{time:1704067200,"action":"Open"}', ERR_JSON),
    (b'{"time":01704067200,"action":"Open"}', ERR_JSON),
    (b'{"time":1704067200,"action":"Op\\\\en"}', None),  # an escaped backslash
    (b'{"time":1704067200,"action":"Open\\\\"}', None),
    (b'{"time":1704067200,"action":"\\ud800"}', ERR_UNICODE),
    (b'{"time":1704067200,"action":"x\\udc00"}', ERR_UNICODE),
    (b'{"time":1704067200,"action":"\\udc00\\ud800"}', ERR_UNICODE),  # the halves reversed
    (b'{"time":1704067200,"action":"\\ud800\\ud83d\\ude00"}', ERR_UNICODE),
    (b'{"time":1704067200,"action":"\\\\\\ud800"}', ERR_UNICODE),  # `\\` then `\ud800`
    (b'{"time":1704067200,"action":"Open","\\uDBFF":1}', ERR_UNICODE),  # in a name
    (b'{"time":1704067200,"action":"Open \\ud83d\\ude00"}', None),  # a pair: one character
    (b'{"time":1704067200,"action":"\\uD83D\\uDE00!"}', None),
    (b'{"time":1704067200,"action":"a\\\\ud800"}', None),  # `\\` then the text `ud800`
    (b'{"time":1704067200,"action":"{[\\"}]"}', None),  # brackets and quotes in a string
)
SENSORS_EDGE_CASES: tuple[bytes, ...] = (
    b'{"timestamp":"2024-01-01T00:00:02.317Z","deviceId":"d-1","deviceType":"x",'
    b'"signalStrength":3}',
    b'{"timestamp":1704067200,"deviceId":"d-1","deviceType":"x","signalStrength":3.5}',
    b'{"timestamp":"yesterday","deviceId":"d-1","deviceType":"x","signalStrength":3.5}',
    b'{"timestamp":"2024-01-01T00:00:02.317Z","deviceId":"d-1","deviceType":"x",'
    b'"signalStrength":"strong"}',
    b'{"timestamp":"2024-01-01T00:00:02.317Z","deviceId":12,"deviceType":"x","signalStrength":1.0}',
    b'{"timestamp":"2024-01-01T00:00:03Z","deviceId":"d-2","deviceType":"y","signalStrength":-70,'
    b'"firmware":"1.2","battery":87}',
)


def source(dataset: str, name: str = "part-0") -> str:
    suffix = ".txt" if dataset == "lines" else ".json"
    return f"file:/landing/{dataset}/date=2024-01-01/{name}{suffix}"


def raw_frame(spark: SparkSession, rows: Sequence[tuple[bytes, str, int]]) -> DataFrame:
    """`RAW_SCHEMA` rows from (line bytes, source file, block start); bytes kept as they are."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(
        list(rows), "line binary, _source_file string, _block_start long"
    ).coalesce(1)
    return frame.select(F.col("line").cast("string").alias("value"), "_source_file", "_block_start")


def generated_lines(dataset: str) -> list[bytes]:
    """The lines the generator writes for a small sample with malformed lines (no I/O)."""
    planned = spec_for(dataset).plan(files=2, rows_per_file=40, seed=3, malformed_rate=0.25)
    return [line for plan in planned for line in expected.split_lines(plan.content)]


def lines_for(dataset: str) -> list[bytes]:
    extra = {
        "events": (*EVENTS_EDGE_CASES, *(line for line, _ in HOSTILE_EVENTS)),
        "sensors": SENSORS_EDGE_CASES,
    }.get(dataset, ())
    return [*extra, *generated_lines(dataset)]


def parsed_rows(spark: SparkSession, dataset: str, lines: Sequence[bytes]) -> list[Any]:
    raw = raw_frame(spark, [(line, source(dataset), 0) for line in lines])
    rows = parse_lines(raw, seed(dataset)).collect()
    return sorted(rows, key=lambda r: r["_row_id"])


def rescued(line: expected.Line) -> str | None:
    """`_rescued_data` of a valid line as tests/expected.py computes it (text datasets: none)."""
    assert line.record is not None
    value: str | None = line.record.get("_rescued_data")
    return value


def reason_matches(ours: str, theirs: str) -> bool:
    """Our `_error` and tests/expected.py's reason name the same fault."""
    if theirs in (ERR_UTF8, ERR_TOO_LONG, ERR_UNICODE, ERR_TIME_RANGE):
        return ours == theirs
    if theirs in ("not JSON", "not a JSON object"):
        return ours in (ERR_JSON, ERR_NOT_OBJECT)
    if theirs.startswith("wrong type for "):
        return ours.startswith(f"{ERR_TYPE}: {theirs.removeprefix('wrong type for ')} (")
    if theirs.startswith("missing "):
        field = theirs.removeprefix("missing ")
        return ours.startswith(f"{ERR_MISSING}: ") and field in ours.split(": ", 1)[1].split(", ")
    return False


@pytest.mark.parametrize("dataset", ["events", "sensors", "activity", "lines"])
def test_parse_lines_classifies_every_line_as_the_contract_does(
    spark: SparkSession, dataset: str
) -> None:
    lines = lines_for(dataset)
    rows = parsed_rows(spark, dataset, lines)
    assert len(rows) == len(lines)
    day = expected.folder_date(Path(source(dataset)))
    kinds = {"valid": 0, "malformed": 0, "blank": 0}
    for line, row in zip(lines, rows, strict=True):
        want = expected.classify(dataset, line, day=day)
        kinds[want.kind] += 1
        got = "blank" if row["_blank"] else ("valid" if row["_error"] is None else "malformed")
        assert got == want.kind, (line, row["_error"], want.reason)
        if want.kind == "malformed":
            assert want.reason is not None
            assert reason_matches(row["_error"], want.reason), (line, row["_error"], want.reason)
    # The sample exercises every class.
    assert kinds["valid"] and kinds["malformed"] and kinds["blank"]


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"not json", ERR_NOT_OBJECT),
        (b"[1,2]", ERR_NOT_OBJECT),
        (b'{"time":1704067200,"action":"Open"', ERR_JSON),
        (b'{"time":1704067200,"action":"Open"} trailing', ERR_JSON),
        (b'{"time":"abc","action":"Open"}', f"{ERR_TYPE}: time (bigint)"),
        (b'{"time":"abc","action":5}', f"{ERR_TYPE}: time (bigint), action (string)"),
        (b'{"action":"Open"}', f"{ERR_MISSING}: time"),
        (b"{}", f"{ERR_MISSING}: time, action"),
        (b'{"time":1704067200,"action":"Op\xffen"}', ERR_UTF8),
    ],
)
def test_error_names_the_fault_and_the_columns(
    spark: SparkSession, line: bytes, error: str
) -> None:
    (row,) = parsed_rows(spark, "events", [line])
    assert row["_error"] == error


def test_hostile_lines_are_quarantined_with_their_reason(spark: SparkSession) -> None:
    """Non-JSON (NaN, quotes, comments, bare names, a second value), lone surrogate escapes and
    event times beyond the calendar get their own `_error`; the lines next to them that are
    valid (the edges of the range, escaped backslashes, a surrogate pair) are records."""
    lines = [line for line, _ in HOSTILE_EVENTS]
    rows = parsed_rows(spark, "events", lines)
    assert [(line, row["_error"]) for line, row in zip(lines, rows, strict=True)] == list(
        HOSTILE_EVENTS
    )
    for line, error in HOSTILE_EVENTS:  # the independent classification agrees
        want = expected.classify("events", line)
        assert want.kind == ("valid" if error is None else "malformed"), line
        assert error is None or reason_matches(error, want.reason or ""), (line, want.reason)
    # A surrogate pair is one character, kept as it is.
    good = {row["action"] for row in rows if row["_error"] is None}
    assert {"Open \U0001f600", "\U0001f600!", "a\\ud800", "Op\\en", '{["}]'} <= good


SENSORS_HOSTILE: tuple[tuple[bytes, str | None], ...] = (
    # A timestamp field must hold a time of [EARLIEST, LATEST), a double a finite number.
    (
        b'{"timestamp":"9999-12-31T23:59:59-10:00","deviceId":"d","deviceType":"x",'
        b'"signalStrength":1}',
        f"{ERR_TYPE}: timestamp (timestamp)",
    ),
    (
        b'{"timestamp":"+10000-01-01T00:00:00Z","deviceId":"d","deviceType":"x",'
        b'"signalStrength":1}',
        f"{ERR_TYPE}: timestamp (timestamp)",
    ),
    (
        b'{"timestamp":"2024-01-01T00:00:00Z","deviceId":"d","deviceType":"x",'
        b'"signalStrength":1e999}',
        f"{ERR_TYPE}: signalStrength (double)",
    ),
    (
        b'{"timestamp":"2024-01-01T00:00:00Z","deviceId":"d","deviceType":"x",'
        b'"signalStrength":-1' + b"0" * 400 + b"}",
        f"{ERR_TYPE}: signalStrength (double)",
    ),
    (
        b'{"timestamp":"2024-01-01T00:00:00Z","deviceId":"d","deviceType":"x",'
        b'"signalStrength":"NaN"}',
        f"{ERR_TYPE}: signalStrength (double)",
    ),
    # The event time (the timestamp) keeps a minute (the longest window) from LATEST.
    (
        b'{"timestamp":"9999-12-30T23:59:00Z","deviceId":"d","deviceType":"x","signalStrength":1}',
        ERR_TIME_RANGE,
    ),
    (
        b'{"timestamp":"9999-12-30T23:58:59.999999Z","deviceId":"d","deviceType":"x",'
        b'"signalStrength":1}',
        None,
    ),
)


def test_times_and_numbers_no_reader_can_hold_are_wrong_types(spark: SparkSession) -> None:
    lines = [line for line, _ in SENSORS_HOSTILE]
    rows = parsed_rows(spark, "sensors", lines)
    assert [row["_error"] for row in rows] == [error for _, error in SENSORS_HOSTILE]
    for line, error in SENSORS_HOSTILE:
        want = expected.classify("sensors", line)
        assert error is None or reason_matches(error, want.reason or ""), (line, want.reason)
        assert want.kind == ("valid" if error is None else "malformed"), line


def test_a_line_over_the_limit_is_quarantined_unparsed_with_its_start(
    spark: SparkSession,
) -> None:
    head = b'{"time":1704067200,"action":"Open","pad":"'

    def padded(size: int) -> bytes:
        return head + b"x" * (size - len(head) - 2) + b'"}'

    at_limit, over = padded(MAX_LINE_BYTES), padded(MAX_LINE_BYTES + 1)
    # Characters of three bytes: over the limit in bytes, far below it in characters.
    wide = head + "\u20ac".encode() * (MAX_LINE_BYTES // 3) + b'"}'
    assert (len(at_limit), len(over)) == (MAX_LINE_BYTES, MAX_LINE_BYTES + 1)
    assert len(wide) > MAX_LINE_BYTES > len(wide.decode())
    blank = b" " * (MAX_LINE_BYTES + 10)
    parsed = parse_lines(
        raw_frame(spark, [(line, source("events"), 0) for line in (at_limit, over, wide, blank)]),
        seed("events"),
    )
    rows = sorted(parsed.collect(), key=lambda r: r["_row_id"])
    assert [r["_error"] for r in rows] == [None, ERR_TOO_LONG, ERR_TOO_LONG, None]
    assert rows[3]["_blank"]
    assert [expected.classify("events", line).reason for line in (at_limit, over, wide, blank)] == [
        None,
        ERR_TOO_LONG,
        ERR_TOO_LONG,
        None,
    ]
    bad = sorted(
        quarantine_rows(parsed, BATCH_ID, INGESTED_AT).collect(), key=lambda r: r["_line_number"]
    )
    # `_raw` keeps MAX_LINE_BYTES + 1 characters: still too long when parsed again.
    assert [r["_raw"] for r in bad] == [
        line.decode()[: MAX_LINE_BYTES + 1] for line in (over, wide)
    ]
    again = parse_lines(
        raw_frame(spark, [(r["_raw"].encode(), source("events"), 0) for r in bad]), seed("events")
    )
    assert [r["_error"] for r in again.collect()] == [ERR_TOO_LONG, ERR_TOO_LONG]


def test_event_time_bounds_keep_every_window_in_the_calendar() -> None:
    """[EARLIEST + the longest window, LATEST - it), as tests/expected.py restates it."""
    for name in ("events", "sensors", "activity", "lines"):
        low, high = event_time_bounds(seed(name))
        margin = expected.LONGEST_WINDOW[name]
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        assert (expected.EARLIEST, expected.LATEST) == (EARLIEST, LATEST)
        assert epoch + timedelta(microseconds=low) == EARLIEST + margin, name
        assert epoch + timedelta(microseconds=high) == LATEST - margin, name


def test_a_folder_date_beyond_the_range_is_out_of_range(spark: SparkSession) -> None:
    files = [
        "file:/landing/lines/date=9999-12-31/a.txt",
        "file:/landing/lines/date=9999-12-30/a.txt",
    ]
    raw = raw_frame(spark, [(b"hello world", f, 0) for f in files])
    rows = parse_lines(raw, seed("lines")).collect()
    assert sorted((r["_source_file"], r["_error"]) for r in rows) == [
        (files[1], None),
        (files[0], ERR_TIME_RANGE),
    ]


def test_a_time_python_cannot_hold_names_its_file_and_line(spark: SparkSession) -> None:
    """`bronze.select` can compute a time beyond the calendar: collecting it fails in Python,
    and `unrepresentable` turns that into one line naming the dataset, file and line."""
    dataset = with_spec("events", select=("time", "action", "timestamp_seconds(time * 100) AS far"))
    lines = [
        b'{"time":1704067200,"action":"Open"}',  # far: year 7370
        b"",
        b'{"time":3000000000,"action":"Open"}',  # far: year 11476
        b"oops",
    ]
    parsed = parse_lines(raw_frame(spark, [(line, source("events"), 0) for line in lines]), dataset)
    with pytest.raises((ValueError, OverflowError)) as failure:
        good_rows(parsed, dataset, BATCH_ID, INGESTED_AT).collect()
    error = unrepresentable(parsed, dataset, BATCH_ID, failure.value)
    assert error is not None
    message = str(error)
    assert "\n" not in message
    assert message.startswith(
        f"events: {source('events')} line 3: far outside 0001-01-02 .. 9999-12-31 (UTC), "
        "which Python cannot represent ("
    )
    assert f"nothing of batch {BATCH_ID} was committed" in message
    # Without such a value the failure is not explained away.
    assert unrepresentable(parsed, seed("events"), BATCH_ID, ValueError("x")) is None


def test_lines_without_a_date_folder_have_no_event_time(spark: SparkSession) -> None:
    raw = raw_frame(spark, [(b"hello world", "file:/landing/lines/loose.txt", 0)])
    (row,) = parse_lines(raw, seed("lines")).collect()
    assert row["_error"] == ERR_EVENT_TIME


@pytest.mark.parametrize("dataset", ["events", "sensors", "activity", "lines"])
def test_parse_lines_rescues_the_undeclared_fields_of_valid_records(
    spark: SparkSession, dataset: str
) -> None:
    lines = lines_for(dataset)
    rows = parsed_rows(spark, dataset, lines)
    day = expected.folder_date(Path(source(dataset)))
    seen = 0
    for line, row in zip(lines, rows, strict=True):
        classified = expected.classify(dataset, line, day=day)
        if classified.kind != "valid":
            continue
        want = rescued(classified)
        assert row["_rescued_data"] == want, line
        seen += want is not None
    # The hand-written lines carry undeclared fields; the generator writes none.
    assert seen == {"events": 3, "sensors": 1}.get(dataset, 0)


# Keys a cheap look at the line might take for declared ones, or miss (`_rescued_data` is parsed
# only for lines that seem to carry an undeclared key).
TRICKY_KEYS = [
    b'{"time": 1704067200, "action": "Open"}',
    b'{"time": 1704067200, "action": "Open", "\\u0063oupon": "x"}',  # an escaped name
    b'{"time": 1704067200, "action": "a\\": \\"time\\":", "times": 2}',  # ": in a string
    b'{"time": 1704067200, "action": "Close", "meta": {"time": 1, "action": [true]}}',
    b'{"action":"Open","time":1704067200,"x":null, "time ": false}',
    b'{"time": 1704067200, "action": "Open", "": 1}',  # an empty name
]


def test_undeclared_fields_are_rescued_whatever_their_names_look_like(
    spark: SparkSession,
) -> None:
    rows = parsed_rows(spark, "events", TRICKY_KEYS)
    assert [row["_error"] for row in rows] == [None] * len(TRICKY_KEYS)
    assert [row["_rescued_data"] for row in rows] == [
        expected.rescued_data(json.loads(line), ("time", "action")) for line in TRICKY_KEYS
    ]
    assert sum(row["_rescued_data"] is not None for row in rows) == len(TRICKY_KEYS) - 1


def without_ingest_columns(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ("_ingested_at", "_batch_id")}


@pytest.mark.parametrize("dataset", ["events", "sensors", "activity", "lines"])
def test_good_rows_are_the_valid_records_with_metadata(spark: SparkSession, dataset: str) -> None:
    lines = lines_for(dataset)
    raw = raw_frame(spark, [(line, source(dataset), 0) for line in lines])
    ds = seed(dataset)
    rows = good_rows(parse_lines(raw, ds), ds, BATCH_ID, INGESTED_AT).collect()

    day = expected.folder_date(Path(source(dataset)))
    records = []
    for line in lines:
        classified = expected.classify(dataset, line, day=day)
        if classified.record is not None:
            records.append({**classified.record, "_source_file": source(dataset)})
    assert [f.name for f in ds.full_bronze_schema.fields] == list(rows[0].asDict())
    assert {r["_batch_id"] for r in rows} == {BATCH_ID}
    assert {r["_ingested_at"] for r in rows} == {INGESTED_AT.replace(tzinfo=None)}

    def key(row: dict[str, Any]) -> str:
        return repr(sorted(row.items()))

    got = sorted((without_ingest_columns(r.asDict()) for r in rows), key=key)
    assert got == sorted(expected.naive_utc(records), key=key)


@pytest.mark.parametrize("dataset", ["events", "sensors", "activity", "lines"])
def test_full_bronze_schema_is_the_record_then_metadata_then_rescued_data(
    spark: SparkSession, dataset: str
) -> None:
    """The record's fields under their bronze names, bronze's metadata columns, and
    `_rescued_data` for JSON datasets (rescue mode, the default); the line for text."""
    renames = expected.BRONZE_RENAMES.get(dataset, {})
    record = [renames.get(n, n) for n in expected.FIELDS.get(dataset, {"line": "string"})]
    rescue = ["_rescued_data"] if dataset in expected.JSON_DATASETS else []
    assert seed_spec(dataset).schema_evolution == "rescue"
    names = [f.name for f in seed(dataset).full_bronze_schema.fields]
    assert names == [*record, *BRONZE_METADATA.fieldNames(), *rescue]


@pytest.mark.parametrize("dataset", ["events", "sensors", "activity"])
def test_expected_restates_the_record_schema(spark: SparkSession, dataset: str) -> None:
    """tests/expected.py's field types are Spark's parse of the spec's `schema:` (the rest of
    its restatement is checked without Spark in tests/unit/jobs/samples/test_generator.py)."""
    from pyspark.sql.types import DoubleType, LongType, StringType, TimestampType

    json_types = {LongType(): "long", DoubleType(): "double", StringType(): "string"}
    json_types[TimestampType()] = "timestamp"
    record_schema = seed(dataset).record_schema
    assert record_schema is not None
    types = {f.name: json_types[f.dataType] for f in record_schema.fields}
    assert types == expected.FIELDS[dataset]
    assert record_schema.fieldNames() == list(expected.FIELDS[dataset])
    renames = expected.BRONZE_RENAMES.get(dataset, {})
    bronze_schema = seed(dataset).bronze_schema
    assert bronze_schema.fieldNames() == [renames.get(n, n) for n in expected.FIELDS[dataset]]
    assert [f.dataType for f in bronze_schema.fields] == [f.dataType for f in record_schema.fields]


def with_spec(dataset: str, **changes: Any) -> Dataset:
    """The seed dataset with its spec changed (rules, bronze projection, ...)."""
    return compile_dataset(dataclasses.replace(seed_spec(dataset), **changes))


EVENT_RULES = (
    Rule(name="known_action", expr="action IN ('Open', 'Close')"),
    Rule(name="after_2020", expr="time >= 1577836800"),
)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b'{"time":1704067200,"action":"Open"}', None),
        (b'{"time":1704067200,"action":"Shut"}', f"{ERR_RULE}: known_action"),
        (b'{"time":1000,"action":"Open"}', f"{ERR_RULE}: after_2020"),
        (b'{"time":1000,"action":"Shut"}', f"{ERR_RULE}: known_action, after_2020"),
        # The record's own faults come first: rules see only well-formed records.
        (b'{"action":"Shut"}', f"{ERR_MISSING}: time"),
        (b'{"time":"x","action":"Shut"}', f"{ERR_TYPE}: time (bigint)"),
        (b"   ", None),
    ],
)
def test_row_rules_quarantine_the_records_that_break_them(
    spark: SparkSession, line: bytes, error: str | None
) -> None:
    dataset = with_spec("events", rules=EVENT_RULES)
    raw = raw_frame(spark, [(line, source("events"), 0)])
    parsed = parse_lines(raw, dataset)
    (row,) = parsed.collect()
    assert row["_error"] == error
    good = good_rows(parsed, dataset, BATCH_ID, INGESTED_AT).collect()
    bad = quarantine_rows(parsed, BATCH_ID, INGESTED_AT).collect()
    blank = not line.strip()
    assert (len(good), len(bad)) == ((0, 0) if blank else (int(error is None), int(bool(error))))
    if bad:
        assert (bad[0]["_raw"], bad[0]["_error"]) == (line.decode(), error)


def test_row_rules_see_bronze_names_and_a_null_result_breaks_them(spark: SparkSession) -> None:
    """activity renames Index to User_ID: a rule names the bronze column. A rule that is NULL
    (here: over an absent optional field) does not hold."""
    dataset = with_spec(
        "activity",
        rules=(
            Rule(name="user_id_known", expr="User_ID >= 0"),
            Rule(name="arrived", expr="Arrival_Time > 0"),
        ),
    )
    base = {
        "Creation_Time": 1424686735090000000,
        "Device": "nexus4_1",
        "Model": "nexus4",
        "User": "a",
        "gt": "stand",
        "x": 0.1,
        "y": 0.2,
        "z": 0.3,
    }
    cases = [
        ({**base, "Index": 5, "Arrival_Time": 1424686735175}, None),
        ({**base, "Index": -1, "Arrival_Time": 1424686735175}, f"{ERR_RULE}: user_id_known"),
        ({**base, "Arrival_Time": 1424686735175}, f"{ERR_RULE}: user_id_known"),
        ({**base, "Index": 5}, f"{ERR_RULE}: arrived"),
        (base, f"{ERR_RULE}: user_id_known, arrived"),
    ]
    lines = [json.dumps(record).encode() for record, _ in cases]
    rows = parsed_rows_of(spark, dataset, "activity", lines)
    assert [row["_error"] for row in rows] == [error for _, error in cases]
    # The rename is bronze's alone: the parsed record keeps the landing name, bronze the new.
    assert "Index" in rows[0].asDict() and "User_ID" not in rows[0].asDict()
    raw = raw_frame(spark, [(line, source("activity"), 0) for line in lines])
    (good,) = good_rows(parse_lines(raw, dataset), dataset, BATCH_ID, INGESTED_AT).collect()
    assert (good["User_ID"], good["Arrival_Time"]) == (5, 1424686735175)


def parsed_rows_of(
    spark: SparkSession, dataset: Dataset, name: str, lines: Sequence[bytes]
) -> list[Any]:
    raw = raw_frame(spark, [(line, source(name), 0) for line in lines])
    return sorted(parse_lines(raw, dataset).collect(), key=lambda r: r["_row_id"])


def test_bronze_select_projects_the_record(spark: SparkSession) -> None:
    """`bronze.select` replaces the record's columns in bronze with the select list."""
    dataset = with_spec(
        "events", select=("time", "lower(action) AS action_lower", "time * 1000 AS time_ms")
    )
    lines = [b'{"time":1704067200,"action":"Open"}', b'{"time":1704067260,"action":"Close"}']
    raw = raw_frame(spark, [(line, source("events"), 0) for line in lines])
    rows = good_rows(parse_lines(raw, dataset), dataset, BATCH_ID, INGESTED_AT).collect()
    names = ["time", "action_lower", "time_ms", *BRONZE_METADATA.fieldNames(), "_rescued_data"]
    assert [f.name for f in dataset.full_bronze_schema.fields] == names
    assert [list(r.asDict()) for r in rows] == [names, names]
    assert sorted((r["time"], r["action_lower"], r["time_ms"], r["event_time"]) for r in rows) == [
        (1704067200, "open", 1704067200000, datetime(2024, 1, 1, 0, 0)),
        (1704067260, "close", 1704067260000, datetime(2024, 1, 1, 0, 1)),
    ]


def test_quarantine_rows_number_every_line_of_each_file(spark: SparkSession) -> None:
    """Two files interleaved, one of them read in two splits: line numbers follow the file."""
    first = [b'{"time":1,"action":"Open"}', b"", b"oops", b'{"time":"x","action":"Open"}']
    second = [b"  ", b'{"action":"Close"}', b'{"time":2,"action":"Close"}', b"\xff bad"]
    # The second file's lines 3-4 come from a later split (block start 100) but arrive first.
    rows = [
        (second[2], source("events", "b"), 100),
        (second[3], source("events", "b"), 100),
        (first[0], source("events", "a"), 0),
        (second[0], source("events", "b"), 0),
        (first[1], source("events", "a"), 0),
        (second[1], source("events", "b"), 0),
        (first[2], source("events", "a"), 0),
        (first[3], source("events", "a"), 0),
    ]
    parsed = parse_lines(raw_frame(spark, rows), seed("events"))
    got = sorted(
        (r["_source_file"], r["_line_number"], r["_raw"], r["_error"] is not None)
        for r in quarantine_rows(parsed, BATCH_ID, INGESTED_AT).collect()
    )
    want = sorted(
        (source("events", name), number, raw.decode("utf-8", "replace"), True)
        for name, lines in (("a", first), ("b", second))
        for number, raw in enumerate(lines, start=1)
        if expected.classify("events", raw).kind == "malformed"
    )
    assert got == want


def test_kept_lines_give_the_same_rows_and_hold_only_malformed_lines(
    spark: SparkSession,
) -> None:
    """What a batch caches (`kept`): the same good and quarantine rows as the parse itself, and
    a line kept only where it is malformed."""
    lines = [b'{"time":1,"action":"Open"}', b"", b"oops", b'{"time":"x"}', b'{"time":2}']
    rows = [(line, source("events"), 0) for line in lines]
    dataset = seed("events")
    parsed = parse_lines(raw_frame(spark, rows), dataset)
    cached = kept(parsed)
    try:
        assert cached.is_cached
        for made in (
            lambda frame: good_rows(frame, dataset, BATCH_ID, INGESTED_AT),
            lambda frame: quarantine_rows(frame, BATCH_ID, INGESTED_AT),
        ):
            assert sorted(made(cached).collect(), key=repr) == sorted(
                made(parsed).collect(), key=repr
            )
        held = sorted((r["_raw"] or "", r["_error"] is not None) for r in cached.collect())
        malformed = [
            line.decode() for line in lines if expected.classify("events", line).kind == "malformed"
        ]
        assert held == sorted(
            [("", False)] * (len(lines) - len(malformed)) + [(line, True) for line in malformed]
        )
    finally:
        cached.unpersist()


def test_quarantine_rows_carry_the_batch_and_ingest_date(spark: SparkSession) -> None:
    parsed = parse_lines(raw_frame(spark, [(b"oops", source("events"), 0)]), seed("events"))
    (row,) = quarantine_rows(parsed, BATCH_ID, INGESTED_AT).collect()
    assert list(row.asDict()) == [f.name for f in QUARANTINE_SCHEMA.fields]
    assert (row["_batch_id"], row["_ingested_at"], row["ingest_date"]) == (
        BATCH_ID,
        INGESTED_AT.replace(tzinfo=None),
        INGESTED_AT.date(),
    )


@pytest.mark.parametrize("dataset", ["events", "sensors", "lines"])
def test_count_lines_counts_non_blank_valid_and_malformed(
    spark: SparkSession, dataset: str
) -> None:
    lines = lines_for(dataset)
    raw = raw_frame(spark, [(line, source(dataset), 0) for line in lines])
    counts = count_lines(parse_lines(raw, seed(dataset)))
    day = expected.folder_date(Path(source(dataset)))
    classified = [expected.classify(dataset, line, day=day) for line in lines]
    kinds = [c.kind for c in classified]
    with_extra = sum(c.kind == "valid" and rescued(c) is not None for c in classified)
    assert (counts.rows_in, counts.good, counts.bad, counts.rescued) == (
        len(kinds) - kinds.count("blank"),
        kinds.count("valid"),
        kinds.count("malformed"),
        with_extra,
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"trigger": "sometimes"}, r"trigger 'sometimes' is not one of available-now, once"),
        ({"max_files_per_trigger": 0}, r"max_files_per_trigger=0 must be a whole number"),
        ({"max_bytes_per_trigger": -5}, r"max_bytes_per_trigger=-5 must be a whole number"),
    ],
)
def test_bronze_options_name_the_bad_value(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BronzeOptions(**options)


def test_archive_is_under_the_home_and_outside_the_landing_folder(config: RunoffConfig) -> None:
    archived = archive_dir(config, "events")
    landing = Catalog.load(config).landing_dir("events")
    assert landing == config.home / seed_spec("events").source_path
    assert archived.is_relative_to(config.home)
    assert not archived.is_relative_to(landing)
    assert str(archived).endswith(str(landing))


def write_offsets(checkpoint: Path, batch_id: int, log_offset: int) -> None:
    offsets = checkpoint / "offsets"
    offsets.mkdir(parents=True, exist_ok=True)
    (offsets / str(batch_id)).write_text(
        f'v1\n{{"batchWatermarkMs":0}}\n{{"logOffset":{log_offset}}}'
    )


def write_source_log(checkpoint: Path, name: str, entries: Sequence[tuple[str, int]]) -> None:
    log = checkpoint / "sources" / "0"
    log.mkdir(parents=True, exist_ok=True)
    lines = [
        f'{{"path":"file:///l/{path}","timestamp":1,"batchId":{batch}}}' for path, batch in entries
    ]
    (log / name).write_text("\n".join(["v1", *lines]) + "\n")


def test_batch_files_follow_the_offsets_across_log_batches(tmp_path: Path) -> None:
    """After a crash one micro-batch can cover several of the file source's log batches."""
    checkpoint = tmp_path / "checkpoint"
    # Log batches 0-9 compacted into 9.compact (two files each), then 10 and 11 plain.
    compacted = [(f"f{b}-{i}.json", b) for b in range(10) for i in range(2)]
    write_source_log(checkpoint, "9.compact", compacted)
    write_source_log(checkpoint, "10", [("g.json", 10)])
    write_source_log(checkpoint, "11", [("h1.json", 11), ("h2.json", 11), ("h3.json", 11)])
    # Micro-batch 0 read log batches 0-4, batch 1 read 5-9, batch 2 read 10 and 11.
    for batch_id, log_offset in enumerate((4, 9, 11)):
        write_offsets(checkpoint, batch_id, log_offset)
    listed = [bronze.batch_files(checkpoint, b) for b in range(3)]
    assert listed == [
        [f"/l/f{b}-{i}.json" for b in range(5) for i in range(2)],
        [f"/l/f{b}-{i}.json" for b in range(5, 10) for i in range(2)],
        ["/l/g.json", "/l/h1.json", "/l/h2.json", "/l/h3.json"],
    ]
    assert bronze.batch_files(checkpoint, 3) is None  # no offsets: unknown, not zero


def test_restore_archive_moves_files_back_to_their_landing_paths(config: RunoffConfig) -> None:
    landing, archived = bronze.landing_dirs(config, "events")
    names = ["date=2024-01-01/a.json", "date=2024-01-01/b.json", "date=2024-01-02/c.json"]
    for name in names:
        (archived / name).parent.mkdir(parents=True, exist_ok=True)
        (archived / name).write_text(f"archived {name}\n")
    # c.json was delivered again under the same name: the new delivery stays, the old one too.
    (landing / names[2]).parent.mkdir(parents=True)
    (landing / names[2]).write_text("new delivery\n")

    assert bronze.restore_archive(config, "events") == 2
    assert {str(p.relative_to(landing)): p.read_text() for p in landing.rglob("*.json")} == {
        names[0]: f"archived {names[0]}\n",
        names[1]: f"archived {names[1]}\n",
        names[2]: "new delivery\n",
    }
    assert [str(p.relative_to(archived)) for p in archived.rglob("*.json")] == [names[2]]
