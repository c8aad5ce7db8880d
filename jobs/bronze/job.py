"""`runoff bronze <dataset>`: landing files -> Delta bronze table and quarantine, exactly once.

Input: every file under `landing/<dataset>/` (recursive; hidden `.`/`_` files, such as files
still being placed, are skipped), read as lines of text (`\\n`-separated) by Structured
Streaming's file source, so that every line is accounted for.
Output:
- `delta/bronze/<dataset>`: one row per valid record: the dataset's bronze columns (the
  spec's record fields, renamed or selected: `Dataset.bronze_columns()`) plus `event_time`,
  `event_date`, `_source_file` (the landing file's URI), `_ingested_at`, `_batch_id`, and
  `_rescued_data` (the fields the schema does not declare, as a JSON object; `schema_evolution:
  rescue`); partitioned by `event_date`. With `add_columns` unknown fields become STRING
  columns (Delta schema evolution); with `fail` a batch holding one fails the run, naming it.
- `delta/quarantine/<dataset>`: one row per malformed line (`QUARANTINE_SCHEMA`): `_raw` (the
  line; invalid UTF-8 bytes replaced by U+FFFD), `_error` (why), `_source_file`, `_line_number`
  (1-based, counting every line of the file), `_ingested_at`, `_batch_id`; partitioned by
  `ingest_date`.
Blank lines (empty or whitespace only) are neither. For every landing file:
bronze rows + quarantined rows = its non-blank lines.

A line is a valid record (the landing line contract of `jobs/samples/generator.py`) when it is at most
`MAX_LINE_BYTES` long, valid UTF-8, one strict JSON object (RFC 8259: no NaN/Infinity, single
quotes, comments or unquoted names; nothing but whitespace after it; no `\\u` escape of half a
surrogate pair), every field of the spec's schema present has its JSON type (integer for long, a
finite number for double, string for string, a timestamp string between `EARLIEST` and `LATEST`
for timestamp: no silent coercion of a number to a string or a timestamp), every required field is
present and not null, the event time is known and within `event_time_bounds` and every row rule
of the spec holds. Text datasets (`lines`): the line itself is the record; it needs the length,
valid UTF-8 and an event time within the bounds. `_error` is one of `ERRORS`, followed for types
and missing fields by the columns at fault. Where Spark's JSON reader is more lenient than
Python's `json` module this job follows Spark: a timestamp string is anything Spark parses as one
(ISO-8601 forms; no zone means UTC); a number of more than 1000 characters or arrays and objects
nested more than 1000 deep are beyond the reader's limits (`unparseable JSON`).

Trigger: `availableNow` by default (everything that has landed, in micro-batches of at most
`--max-files-per-trigger` files / `--max-bytes-per-trigger` bytes) or `once` (one batch, rate
limits ignored). The checkpoint `checkpoints/bronze/<dataset>` remembers the files already
ingested; a run with nothing new adds nothing. One run per checkpoint at a time (a lock).

Exactly once: each micro-batch writes bronze, then quarantine, each commit carrying the app
transaction (query id, batch id). A batch replayed after a crash finds its commits and writes
nothing again; a table it had not reached yet is written. Empty outputs are not committed.

Archive: files of committed batches are moved out of the landing folder by Spark
(`cleanSource=archive`) so that listing the landing folder and the source's metadata stay small
however long the history grows. An archived file keeps its absolute path below
`archive_dir(config, dataset)` = `<data>/archive/bronze<absolute landing path>` (`<data>`: the home,
or `RUNOFF_DATA`; on object storage the landing key), so the landing
files of a date interval are under the same `date=YYYY-MM-DD/` folders of the two
`landing_dirs(config, dataset)` (what a backfill reads); bronze's `_source_file` keeps the landing
URI. Spark archives a batch's files when it starts the next batch, so the last batch's files
wait in landing for the next run that finds new files (they are never ingested twice: the
checkpoint lists them). `restore_archive()` moves everything back for a full refresh
(`runoff reset --layer bronze`). A landing path is ingested once: re-deliveries need new names; a
file changed after ingestion (appended to, or replaced under its name) is reported by every run
with the `runoff backfill` that re-reads it (`jobs.checkpoints.landing_changes`), never silently skipped.
Files are never too old to be picked up (`maxFileAge` is set to 100 years: Spark's default
would silently skip a file landed with a modification time a week older than the newest).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DateType,
    DoubleType,
    FloatType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from core.config import Location, RunoffConfig
from core.console import live_status, say
from core.errors import ConfigError, RunoffError
from core.ledger import RunRecord
from core.locking import checkpoint_lock
from core.specs import interval_seconds
from delta_tables.catalog import Catalog, ensure_table
from delta_tables.schemas import QUARANTINE_SCHEMA
from delta_tables.writes import already_committed, append, table_version
from jobs.ops.check import ensure_resolves
from jobs.checkpoints.guard import record_batch
from jobs.streaming.dataset import Dataset, load_dataset
from jobs.checkpoints.landing_changes import check_landing, record_states, report_lines
from jobs.streaming.query import (
    BatchFunction,
    BatchProgress,
    RunProgress,
    elapsed,
    guard_checkpoint,
    read_query_id,
    recorded_run,
    run_query,
    summary_line,
)
from quality.gate import record_run as record_checks
from quality.gate import rule_checks, say_problems
from quality.runner import QualityCheckFailed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

LAYER = "bronze"
Trigger = Literal["available-now", "once"]

# `_error` values (types and missing fields are followed by `: <column> (<type>), ...`).
ERR_TOO_LONG = "line too long"
ERR_UTF8 = "invalid UTF-8"
ERR_NOT_OBJECT = "not a JSON object"
ERR_JSON = "unparseable JSON"
ERR_UNICODE = "invalid unicode escape"
ERR_TYPE = "wrong type"
ERR_MISSING = "missing required field"
ERR_EVENT_TIME = "missing event time"
ERR_TIME_RANGE = "event time out of range"
ERR_RULE = "rule failed"
ERRORS = (
    ERR_TOO_LONG,
    ERR_UTF8,
    ERR_NOT_OBJECT,
    ERR_JSON,
    ERR_UNICODE,
    ERR_TYPE,
    ERR_MISSING,
    ERR_EVENT_TIME,
    ERR_TIME_RANGE,
    ERR_RULE,
)
# The longest line parsed, in bytes (without its `\n`). A longer line is quarantined unparsed (a
# record is a few KiB; a line of hundreds of MiB would be one Spark row the executors parse
# again and again); its `_raw` keeps the first MAX_LINE_BYTES + 1 characters, which are still
# too long, so that `_raw` parsed again (as a backfill does) is classified as the line was.
MAX_LINE_BYTES = 1 << 20
# The times every reader of the tables can hold: Python's `datetime` has the years 1-9999, and
# PySpark turns a timestamp into the driver's local time, so the first and the last day of that
# calendar are left out (no time zone is a day away from UTC). A timestamp or date field of a
# record must lie in [EARLIEST, LATEST) (else `wrong type`); the event time must also leave room
# for the dataset's longest silver window (`event_time_bounds`).
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, tzinfo=UTC)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
# The built-in row rules: every line is checked by them before the spec's rules.
BUILT_IN = tuple(enumerate(e for e in ERRORS if e != ERR_RULE))
RESCUED = "_rescued_data"
# Every field of a JSON object as text (Spark's reader keeps a non-string value's JSON text).
FIELDS_AS_TEXT = "MAP<STRING, STRING>"

# Columns of the raw line DataFrame `parse_lines` takes (see `read_landing`).
RAW_SCHEMA = StructType(
    [
        StructField("value", StringType(), True),
        StructField("_source_file", StringType(), True),
        StructField("_block_start", LongType(), True),
    ]
)
# Helper columns `parse_lines` adds next to the record's own columns.
PARSED_COLUMNS = (
    "event_time",
    RESCUED,
    "_source_file",
    "_raw",
    "_error",
    "_blank",
    "_block_start",
    "_row_id",
)
_CORRUPT = "_corrupt_record"
WHITESPACE = " \t\r\n\f\v"  # what `bytes.strip()` removes: a line of only these is blank
# Strict JSON (RFC 8259): Spark's reader takes these extensions unless told not to
# (NaN/Infinity would reach a string column as the text "NaN", 'single quotes' would parse).
_STRICT_JSON = {
    "allowNonNumericNumbers": "false",
    "allowSingleQuotes": "false",
    "allowComments": "false",
    "allowUnquotedFieldNames": "false",
    "allowNumericLeadingZeros": "false",
    "allowBackslashEscapingAnyCharacter": "false",
    "allowUnquotedControlChars": "false",
}
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT, **_STRICT_JSON}
# A `\u` escape of half a UTF-16 surrogate pair without its other half (after escaped
# backslashes are taken out): Java decodes it into an unpaired char and writes it as `?`.
_HIGH = r"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW = r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_LONE_SURROGATE = f"{_HIGH}(?!{_LOW})|(?<!{_HIGH}){_LOW}"
# JSON types that are strings in the landing file (a number there is a wrong type).
_STRING_LIKE = (StringType, TimestampType, TimestampNTZType, DateType)


# -- pure transforms ----------------------------------------------------------------------
def record_columns(dataset: Dataset) -> list[str]:
    """The record's fields (text datasets: the line)."""
    return dataset.record_columns


def parse_lines(raw: DataFrame, dataset: Dataset) -> DataFrame:
    """Classify every landing line: one output row per input row, nothing dropped.

    `raw` has `value` (the line), `_source_file` and optionally `_block_start` (the offset of
    the file split the line came from; 0 if absent): `RAW_SCHEMA`. The result has the record's
    columns (typed; null where invalid), `event_time`, `_source_file`, `_raw`, `_error` (null
    for a valid record), `_blank` (a blank line: neither record nor malformed), `_block_start`
    and `_row_id` (the line's position within its split, for line numbers).

    The spec's SQL (event time, rules) is analyzed with ANSI mode off: an expression that cannot
    be computed for a record (`to_timestamp('yesterday')`) gives null, so the record goes to
    quarantine instead of failing every run that reads its file.
    """
    with ansi_off(raw.sparkSession):
        return _parse_lines(raw, dataset)


@contextmanager
def ansi_off(spark: SparkSession) -> Iterator[None]:
    """`spark.sql.ansi.enabled=false` while DataFrames are built (Spark analyzes them at once
    and fixes each expression's error mode then); the previous value afterwards."""
    previous = spark.conf.get("spark.sql.ansi.enabled") or "true"
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)


def event_time_bounds(dataset: Dataset) -> tuple[int, int]:
    """The event times a record may have, [low, high) in microseconds since the epoch: from
    `EARLIEST` to `LATEST`, less the dataset's longest silver window at both ends, so that
    every window holding an event starts and ends within [EARLIEST, LATEST] (a window of a
    `transform:` table is not known here)."""
    windows = [interval_seconds(s.window) for s in dataset.spec.silver if s.window]
    margin = max(windows, default=0) * 1_000_000
    return (EARLIEST - _EPOCH) // _US + margin, (LATEST - _EPOCH) // _US - margin


def _outside(moment: Column, low: int, high: int) -> Column:
    """A timestamp (or timestamp_ntz, read as UTC) outside [low, high) microseconds."""
    micros = F.unix_micros(moment.cast("timestamp"))
    return (micros < F.lit(low)) | (micros >= F.lit(high))


def _time_out_of_range(dataset: Dataset) -> Column:
    low, high = event_time_bounds(dataset)
    return _outside(F.col("event_time"), low, high)


def _parse_lines(raw: DataFrame, dataset: Dataset) -> DataFrame:
    reserved = set(PARSED_COLUMNS) & set(record_columns(dataset))
    if reserved:
        raise ConfigError(f"dataset {dataset.name!r} uses reserved column names {sorted(reserved)}")
    block = F.col("_block_start") if "_block_start" in raw.columns else F.lit(0).cast("long")
    line = F.col("value")
    too_long = F.octet_length(line) > MAX_LINE_BYTES
    trimmed = F.trim(line, F.lit(WHITESPACE))
    base = raw.select(
        # What is parsed: nothing of a line that is too long.
        F.when(~too_long, line).alias("value"),
        line.alias("_line"),
        too_long.alias("_too_long"),
        F.col("_source_file"),
        block.alias("_block_start"),
        # Taken before any shuffle: rows of a split keep the file's line order.
        F.monotonically_increasing_id().alias("_row_id"),
        (trimmed == "").alias("_blank"),
        F.is_valid_utf8(line).alias("_utf8"),
        trimmed.startswith("{").alias("_opens"),
        trimmed.endswith("}").alias("_closes"),
    )
    if dataset.record_schema is None:
        return _parse_text(base, dataset)
    return _parse_json(base, dataset, dataset.record_schema)


def _parse_text(base: DataFrame, dataset: Dataset) -> DataFrame:
    (name,) = record_columns(dataset)
    lines = base.withColumn(name, F.col("value"))
    with_time = lines.withColumn("event_time", dataset.event_time())
    error = (
        F.when(F.col("_blank"), F.lit(None))
        .when(F.col("_too_long"), F.lit(ERR_TOO_LONG))
        .when(~F.col("_utf8"), F.lit(ERR_UTF8))
        .when(F.col("event_time").isNull(), F.lit(ERR_EVENT_TIME))
        .when(_time_out_of_range(dataset), F.lit(ERR_TIME_RANGE))
    )
    return _finish(_with_rules(with_time, dataset, error), [name], dataset, rescued=False)


def _parse_json(base: DataFrame, dataset: Dataset, schema: StructType) -> DataFrame:
    names = schema.fieldNames()
    typed_schema = StructType([*schema.fields, StructField(_CORRUPT, StringType(), True)])
    text_schema = StructType(
        [StructField(n, StringType(), True) for n in names]
        + [StructField(_CORRUPT, StringType(), True)]
    )
    parsed = base.withColumn("_typed", F.from_json("value", typed_schema, _JSON_OPTIONS))
    typed = F.col("_typed").getField
    # A value beyond its type is a wrong type (below), and none in the record.
    records = parsed.select(
        "*", *[_holdable(typed(f.name), f.dataType).alias(f.name) for f in schema.fields]
    )
    with_time = records.withColumn("event_time", dataset.event_time())

    value = F.col("value")
    corrupt = F.col("_typed").getField(_CORRUPT).isNotNull()
    # Only lines that failed the typed parse pay for the second (all-string) parse.
    as_text = F.from_json(value, text_schema, _JSON_OPTIONS)
    unparseable = (
        ~F.col("_closes")
        | (corrupt & as_text.getField(_CORRUPT).isNotNull())
        | _more_after_the_object(value)
    )

    string_like = [f.name for f in schema.fields if isinstance(f.dataType, _STRING_LIKE)]
    # One pattern for all string fields gates the exact (Variant) check of each of them.
    suspect = _non_string_pattern(value, string_like) if string_like else F.lit(False)
    wrong = []
    for f in schema.fields:
        failed = corrupt & F.col(f.name).isNull() & as_text.getField(f.name).isNotNull()
        if f.name in string_like:
            failed = failed | (suspect & _not_a_json_string(value, f.name))
        beyond = _beyond_its_type(typed(f.name), f.dataType)
        if beyond is not None:  # parsed, but no reader could hold the value
            failed = failed | (typed(f.name).isNotNull() & beyond)
        wrong.append(F.when(failed, F.lit(f"{f.name} ({f.dataType.simpleString()})")))
    wrong_types = F.concat_ws(", ", *wrong)
    missing = F.concat_ws(", ", *[F.when(F.col(n).isNull(), F.lit(n)) for n in dataset.required])
    error = (
        F.when(F.col("_blank"), F.lit(None))
        .when(F.col("_too_long"), F.lit(ERR_TOO_LONG))
        .when(~F.col("_utf8"), F.lit(ERR_UTF8))
        .when(~F.col("_opens"), F.lit(ERR_NOT_OBJECT))
        .when(unparseable, F.lit(ERR_JSON))
        .when(_lone_surrogate(value), F.lit(ERR_UNICODE))
        .when(wrong_types != "", F.concat(F.lit(f"{ERR_TYPE}: "), wrong_types))
        .when(missing != "", F.concat(F.lit(f"{ERR_MISSING}: "), missing))
        .when(F.col("event_time").isNull(), F.lit(ERR_EVENT_TIME))
        .when(_time_out_of_range(dataset), F.lit(ERR_TIME_RANGE))
    )
    known = F.array(*[F.lit(n) for n in names])
    unknown = F.map_filter(
        F.from_json(value, FIELDS_AS_TEXT, _STRICT_JSON), lambda k, _: ~F.array_contains(known, k)
    )
    rescued = F.when(F.size(unknown) > 0, F.to_json(unknown))
    with_rescued = with_time.withColumn(RESCUED, rescued)
    return _finish(_with_rules(with_rescued, dataset, error), names, dataset, rescued=True)


def _with_rules(df: DataFrame, dataset: Dataset, error: Column) -> DataFrame:
    """`_error` := `error`, else the names of the row rules the record breaks (a rule holds
    only when its SQL is true). Rules see the record's columns under their bronze names."""
    if not dataset.rules:
        return df.withColumn("_error", error)
    renamed = {new: F.col(old) for old, new in dataset.spec.rename if new not in df.columns}
    scope = df.withColumns(renamed)
    broken = F.concat_ws(
        ", ",
        *[
            F.when(~F.coalesce(F.expr(rule.expr), F.lit(False)), F.lit(rule.name))
            for rule in dataset.rules
        ],
    )
    error = error.when(broken != "", F.concat(F.lit(f"{ERR_RULE}: "), broken))
    return scope.withColumn("_error", error).drop(*renamed)


def _more_after_the_object(value: Column) -> Column:
    """Something follows the line's JSON object (`{...}{...}`, `{...} // }`): Spark's reader
    stops after one value and ignores the rest.

    Only a line with two `}` can hide something (it ends with `}`, else it is refused anyway).
    For those, escapes and then strings are cut out, and the brackets left must close the
    object once, at their end. (Plain patterns and one pass over the brackets: a regex with a
    repeated group would recurse once per repetition in Java and overflow the stack on a long
    line.)
    """
    no_strings = F.regexp_replace(F.regexp_replace(value, r"(?s)\\.", ""), r'"[^"]*+"', "")
    brackets = F.split(F.regexp_replace(no_strings, r"[^\[\]{}]", ""), "")

    def step(state: Column, char: Column) -> Column:
        depth = state["depth"] + F.when(char.isin("{", "["), 1).otherwise(-1)
        closed = state["closed"] + F.when(depth <= 0, 1).otherwise(0)
        return F.struct(depth.alias("depth"), closed.alias("closed"))

    start = F.struct(F.lit(0).alias("depth"), F.lit(0).alias("closed"))
    end = F.aggregate(brackets, start, step)
    once = (end["depth"] == 0) & (end["closed"] == 1)
    return value.rlike(r"\}[^}]*+\}") & ~once


def _lone_surrogate(value: Column) -> Column:
    """The line has a `\\u` escape of half a surrogate pair without the other half (a string
    no UTF-8 can hold; Spark would store `?`). Escaped backslashes go first, so that each
    backslash left starts an escape."""
    escapes = F.regexp_replace(value, r"\\\\", "")
    return value.contains("\\u") & escapes.rlike(_LONE_SURROGATE)


def _beyond_its_type(column: Column, data_type: Any) -> Column | None:
    """A parsed value no reader can hold: a timestamp outside [EARLIEST, LATEST), a date
    outside the years 1-9999, a number too large for a double or float (infinite)."""
    if isinstance(data_type, TimestampType | TimestampNTZType):
        return _outside(column, (EARLIEST - _EPOCH) // _US, (LATEST - _EPOCH) // _US)
    if isinstance(data_type, DateType):
        return ~F.year(column).between(1, 9999)
    if isinstance(data_type, DoubleType | FloatType):
        return F.isnan(column) | (F.abs(column) == F.lit(float("inf")))
    return None


def _non_string_pattern(value: Column, names: list[str]) -> Column:
    """Cheap gate: one of `names` seems to get a non-string, non-null JSON value."""
    keys = "|".join(re.escape(n) for n in names)
    return value.rlike(rf'"(?:{keys})"\s*:\s*(?!null\b)[^"\s]')


def _not_a_json_string(value: Column, name: str) -> Column:
    """The line gives field `name` a non-string JSON value (number, boolean, object, array).

    Spark's JSON reader silently turns such values into strings (or numbers into timestamps);
    the Variant parse tells them apart (a nested key of the same name does not count).
    """
    path = json.dumps(name)
    kind = F.expr(f"schema_of_variant(variant_get(try_parse_json(value), '$[{path}]'))")
    return kind.isNotNull() & ~kind.isin("STRING", "VOID")


def _holdable(column: Column, data_type: Any) -> Column:
    """`column`, null where `_beyond_its_type`."""
    beyond = _beyond_its_type(column, data_type)
    return column if beyond is None else F.when(~beyond, column)


def _finish(df: DataFrame, names: list[str], dataset: Dataset, rescued: bool) -> DataFrame:
    blank = F.col("_blank")
    event_time = F.col("event_time").cast("timestamp")
    # A blank line is never an error, whatever the expressions above say.
    error = F.when(blank, F.lit(None).cast("string")).otherwise(F.col("_error"))
    line = F.col("_line")
    raw = F.when(F.col("_utf8"), line).otherwise(F.make_valid_utf8(line))
    # A line too long keeps its start (see MAX_LINE_BYTES).
    raw = F.when(F.col("_too_long"), F.substring(raw, 1, MAX_LINE_BYTES + 1)).otherwise(raw)
    return df.select(
        *names,
        # An event time out of range (ERR_TIME_RANGE) is none.
        F.when(~_time_out_of_range(dataset), event_time).alias("event_time"),
        "_source_file",
        raw.alias("_raw"),
        error.alias("_error"),
        blank.alias("_blank"),
        "_block_start",
        "_row_id",
        (F.col(RESCUED) if rescued else F.lit(None).cast("string")).alias(RESCUED),
    )


def good_rows(
    parsed: DataFrame,
    dataset: Dataset,
    batch_id: int,
    ingested_at: datetime,
    added_columns: Sequence[str] = (),
) -> DataFrame:
    """The valid records of `parse_lines` output as bronze rows (`Dataset.full_bronze_schema`,
    then `added_columns`: fields taken out of `_rescued_data` as strings, for `add_columns`)."""
    with ansi_off(parsed.sparkSession):  # the spec's select SQL, as in `parse_lines`
        return _good_rows(parsed, dataset, batch_id, ingested_at, added_columns)


def _good_rows(
    parsed: DataFrame,
    dataset: Dataset,
    batch_id: int,
    ingested_at: datetime,
    added_columns: Sequence[str],
) -> DataFrame:
    valid = parsed.where(~F.col("_blank") & F.col("_error").isNull())
    fields = F.from_json(F.col(RESCUED), FIELDS_AS_TEXT)
    schema = StructType(
        [*dataset.full_bronze_schema.fields, *[StructField(c, StringType()) for c in added_columns]]
    )
    mapped = valid.select(
        *dataset.bronze_columns(),
        F.col("event_time"),
        F.to_date("event_time").alias("event_date"),
        F.col("_source_file"),
        F.lit(ingested_at).alias("_ingested_at"),
        F.lit(batch_id).alias("_batch_id"),
        F.col(RESCUED),
        *[fields.getItem(c).alias(c) for c in added_columns],
    )
    return conform(mapped, schema)


def quarantine_rows(parsed: DataFrame, batch_id: int, ingested_at: datetime) -> DataFrame:
    """The malformed lines of `parse_lines` output as quarantine rows (`QUARANTINE_SCHEMA`).

    `_line_number` counts every line of the file (blank ones too), 1-based; it needs all the
    lines of the file in `parsed`, as a micro-batch of the file source always has.
    """
    numbered = _numbered(parsed)
    ingested = F.lit(ingested_at)
    bad = numbered.where(~F.col("_blank") & F.col("_error").isNotNull())
    return conform(
        bad.select(
            "_raw",
            "_error",
            "_source_file",
            "_line_number",
            ingested.alias("_ingested_at"),
            F.lit(batch_id).alias("_batch_id"),
            F.to_date(ingested).alias("ingest_date"),
        ),
        QUARANTINE_SCHEMA,
    )


def _numbered(parsed: DataFrame) -> DataFrame:
    """`parsed` with `_line_number` (see `quarantine_rows`)."""
    order = Window.partitionBy("_source_file").orderBy("_block_start", "_row_id")
    return parsed.withColumn("_line_number", F.row_number().over(order))


def unrepresentable(
    parsed: DataFrame, dataset: Dataset, batch_id: int, error: Exception
) -> RunoffError | None:
    """The one-line error for a batch whose check failed converting a value to Python
    (`OverflowError`, `ValueError`: a date or time beyond `datetime`; or a quality check that
    failed on it), naming the first landing line (file, line number) whose bronze row holds a
    date or time outside [EARLIEST, LATEST), and its columns; None when no row holds one (the
    failure has another cause).

    Parsing keeps such values out of the record's own fields and the event time; what is left
    is the spec's `bronze.select` SQL, which can compute any time.
    """
    with ansi_off(parsed.sparkSession):
        rows = (
            _numbered(parsed)
            .where(~F.col("_blank") & F.col("_error").isNull())
            .select(*dataset.bronze_columns(), "event_time", "_source_file", "_line_number")
        )
    low, high = (EARLIEST - _EPOCH) // _US, (LATEST - _EPOCH) // _US
    beyond = []
    for f in rows.schema.fields:
        if isinstance(f.dataType, TimestampType | TimestampNTZType):
            beyond.append(F.when(_outside(rows[f.name], low, high), F.lit(f.name)))
        elif isinstance(f.dataType, DateType):
            beyond.append(F.when(~F.year(rows[f.name]).between(1, 9999), F.lit(f.name)))
    if not beyond:
        return None
    columns = F.concat_ws(", ", *beyond)
    first = (
        rows.select("_source_file", "_line_number", columns.alias("columns"))
        .where(F.col("columns") != "")
        .orderBy("_source_file", "_line_number")
        .first()
    )
    if first is None:
        return None
    cause = (str(error).splitlines() or [""])[0].split(". ")[0]  # its first sentence
    return RunoffError(
        f"{dataset.name}: {first['_source_file']} line {first['_line_number']}: "
        f"{first['columns']} outside {EARLIEST.date()} .. {LATEST.date()} (UTC), which "
        f"Python cannot represent ({type(error).__name__}: {cause}); nothing of batch "
        f"{batch_id} was committed: fix that line (or the spec's bronze SQL in "
        f"{dataset.spec.file}) and run `runoff bronze {dataset.name}` again"
    )


def conform(df: DataFrame, schema: StructType) -> DataFrame:
    """Columns of `schema`, in its order, cast to its types."""
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


@dataclass(frozen=True)
class LineCounts:
    """Lines of a batch: non-blank lines in, valid records, malformed lines; the records the row
    rules looked at (they parsed) and how many each rule sent to quarantine."""

    rows_in: int
    good: int
    bad: int
    rescued: int = 0  # valid records with fields the schema does not declare
    ruled: int = 0
    broken: dict[str, int] = field(default_factory=dict)
    # lines per built-in rule (the parse errors of ERRORS), by its `_error` text
    malformed: dict[str, int] = field(default_factory=dict)


def count_lines(parsed: DataFrame, rules: Sequence[str] = ()) -> LineCounts:
    """One aggregation over `parse_lines` output (`rules`: the row rules' names)."""
    non_blank = ~F.col("_blank")
    error = F.col("_error")
    bad = non_blank & error.isNotNull()
    rescued = non_blank & error.isNull() & F.col(RESCUED).isNotNull()
    prefix = f"{ERR_RULE}: "
    ruled = non_blank & (error.isNull() | error.startswith(prefix))
    broken = F.split(F.substring(error, len(prefix) + 1, 1 << 20), ", ")
    row = parsed.agg(
        F.count(F.when(non_blank, 1)).alias("rows_in"),
        F.count(F.when(bad, 1)).alias("bad"),
        F.count(F.when(rescued, 1)).alias("rescued"),
        F.count(F.when(ruled, 1)).alias("ruled"),
        *[
            F.count(
                F.when(bad & error.startswith(prefix) & F.array_contains(broken, name), 1)
            ).alias(f"rule_{i}")
            for i, name in enumerate(rules)
        ],
        *[F.count(F.when(bad & error.startswith(e), 1)).alias(f"error_{i}") for i, e in BUILT_IN],
    ).first()
    assert row is not None
    rows_in, bad_rows = int(row["rows_in"]), int(row["bad"])
    return LineCounts(
        rows_in=rows_in,
        good=rows_in - bad_rows,
        bad=bad_rows,
        rescued=int(row["rescued"]),
        ruled=int(row["ruled"]),
        broken={name: int(row[f"rule_{i}"]) for i, name in enumerate(rules)},
        malformed={e: int(row[f"error_{i}"]) for i, e in BUILT_IN},
    )


def unknown_fields(parsed: DataFrame) -> list[str]:
    """The field names outside the declared schema among the valid records, sorted."""
    valid = parsed.where(~F.col("_blank") & F.col("_error").isNull() & F.col(RESCUED).isNotNull())
    names = valid.select(F.explode(F.map_keys(F.from_json(RESCUED, FIELDS_AS_TEXT))).alias("k"))
    return sorted(row["k"] for row in names.distinct().collect())


# -- options and paths --------------------------------------------------------------------
@dataclass(frozen=True)
class BronzeOptions:
    """How a run reads the landing folder (CLI flags; defaults: availableNow, no limits)."""

    trigger: Trigger = "available-now"
    max_files_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    archive: bool = True  # move files of committed batches to `archive_dir()`

    def __post_init__(self) -> None:
        if self.trigger not in ("available-now", "once"):
            raise ConfigError(f"trigger {self.trigger!r} is not one of available-now, once")
        for key in ("max_files_per_trigger", "max_bytes_per_trigger"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ConfigError(f"{key}={value!r} must be a whole number of at least 1")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BronzeOptions:
        return cls(
            trigger=args.trigger,
            max_files_per_trigger=args.max_files_per_trigger,
            max_bytes_per_trigger=args.max_bytes_per_trigger,
        )


def landing_dir(config: RunoffConfig, dataset: str) -> Location:
    """The dataset's landing folder (its spec's `source.path`)."""
    return Catalog.load(config).landing_dir(dataset)


def archive_dir(config: RunoffConfig, dataset: str) -> Location:
    """Where Spark moves ingested landing files: the archive root plus their absolute path (on
    object storage, their key: the archive must be in the landing folder's bucket)."""
    return config.archived(landing_dir(config, dataset).absolute())


def landing_dirs(config: RunoffConfig, dataset: str) -> tuple[Location, Location]:
    """The folders holding a dataset's landing files: not yet ingested, and archived."""
    return landing_dir(config, dataset), archive_dir(config, dataset)


def restore_archive(config: RunoffConfig, dataset: str) -> int:
    """Move archived files back to their landing paths (a full refresh re-ingests them all).

    For `runoff reset --layer bronze`, with the bronze lock held. A file whose landing path is
    taken again (delivered anew) stays in the archive. Returns the number of files moved;
    their modification times are kept, so the new stream reads them in delivery order.
    """
    landing, archived = landing_dirs(config, dataset)
    if not archived.is_dir():
        return 0
    moved = 0
    for path in sorted(archived.rglob("*"), key=str):
        target = landing / path.relative_to(archived)
        if not path.is_file() or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)
        moved += 1
    return moved


# -- I/O ------------------------------------------------------------------------------------
def read_landing(
    spark: SparkSession, config: RunoffConfig, landing: Location, options: BronzeOptions
) -> DataFrame:
    """The landing folder as a stream of lines (`RAW_SCHEMA`)."""
    reader = (
        spark.readStream.format("text")
        # Recursive lookup also turns off partition discovery of `date=...` folders.
        .option("recursiveFileLookup", "true")
        .option("lineSep", "\n")
        # Never too old to ingest (see the module docstring).
        .option("maxFileAge", "36500d")
    )
    if options.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(options.max_files_per_trigger))
    if options.max_bytes_per_trigger:
        reader = reader.option("maxBytesPerTrigger", str(options.max_bytes_per_trigger))
    if options.archive:
        reader = reader.option("cleanSource", "archive").option(
            "sourceArchiveDir", str(config.archive_root / LAYER)
        )
    return reader.load(str(landing)).select(
        F.col("value"),
        F.col("_metadata.file_path").alias("_source_file"),
        F.col("_metadata.file_block_start").alias("_block_start"),
    )


def batch_files(checkpoint: Location, batch_id: int) -> int | None:
    """How many files a micro-batch read, from the checkpoint's logs; None if unreadable.

    The batch's offsets (`offsets/<batch>` and the batch before) give the range of the file
    source's own log batches it covers (`sources/0/<n>`, or a `<m>.compact` holding them): the
    two numberings differ after a crash, when one micro-batch can span several log batches.
    """
    try:
        end = _source_log_offset(checkpoint / "offsets" / str(batch_id))
        start = _source_log_offset(checkpoint / "offsets" / str(batch_id - 1)) if batch_id else -1
        log = checkpoint / "sources" / "0"
        compacts = sorted(
            int(p.name.split(".")[0]) for p in log.glob("*.compact") if p.name[0].isdigit()
        )
        files = 0
        for n in range(start + 1, end + 1):
            plain = log / str(n)
            if plain.is_file():
                files += len(_log_entries(plain))
                continue
            holder = next(c for c in compacts if c >= n)
            files += sum(e.get("batchId") == n for e in _log_entries(log / f"{holder}.compact"))
        return files
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
        logger.warning("cannot count the files of batch %s in %s: %s", batch_id, checkpoint, exc)
        return None


def _source_log_offset(offsets_file: Location) -> int:
    """`{"logOffset": n}`: the file source's offset in a batch's offsets file (line 3)."""
    lines = offsets_file.read_text().splitlines()
    return int(json.loads(lines[2])["logOffset"])


def _log_entries(path: Location) -> list[dict[str, Any]]:
    """The JSON entries of a metadata log file (after its `v1` header line)."""
    return [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]


class BronzeBatch:
    """The `foreachBatch` function: parse, check both tables' rows (the quality gate), write
    bronze, write quarantine, report."""

    def __init__(
        self, catalog: Catalog, dataset: Dataset, checkpoint: Location, progress: RunProgress
    ) -> None:
        from quality.gate import Gate
        from quality.suites import bronze_table, quarantine_table  # GX: a heavy import

        tables = catalog.tables(dataset.name)
        self.dataset = dataset
        self.bronze = tables.bronze.path
        self.quarantine = tables.quarantine.path
        self.table_names = (tables.bronze.name, tables.quarantine.name)  # for record_batch
        remedy = (
            f"fix those landing files (or the expectation in {dataset.spec.file}) and run "
            f"`runoff bronze {dataset.name}` again: it reads the same files"
        )
        self.gates = (
            Gate(bronze_table(catalog, dataset.spec), remedy),
            Gate(quarantine_table(catalog, dataset.spec), remedy),
        )
        self.checkpoint = checkpoint
        self.progress = progress
        self.added_columns: list[str] = []  # schema_evolution add_columns: added by this run
        self.widen: list[str] = []  # declared columns the table lacks (the spec gained fields)
        self.table_columns: list[str] = []  # the bronze table's columns when the run started
        self._app_id: str | None = None

    @property
    def app_id(self) -> str:
        if self._app_id is None:
            self._app_id = read_query_id(self.checkpoint)
            if self._app_id is None:
                raise RunoffError(f"checkpoint {self.checkpoint} holds no query id")
        return self._app_id

    def _done(self, path: Location, batch_id: int) -> bool:
        return already_committed(path, self.app_id, batch_id)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        current = self.progress.current  # the live status line (on a terminal)
        current.start(batch_id, stage="reading the checkpoint")
        files = batch_files(self.checkpoint, batch_id)
        current.update(files=files, stage="parsing")
        bronze_done = self._done(self.bronze, batch_id)
        quarantine_done = self._done(self.quarantine, batch_id)
        if bronze_done and quarantine_done:
            record_batch(self.checkpoint, batch_id, dict.fromkeys(self.table_names, True))
            self.progress.add(
                BatchProgress(batch_id, files or 0, 0, 0, 0, elapsed(started), replayed=True)
            )
            return
        ingested_at = datetime.now(UTC)
        parsed = parse_lines(batch, self.dataset).persist()
        try:
            counts = count_lines(parsed, [rule.name for rule in self.dataset.rules])
            logger.debug("batch %s: parsed and counted in %.2f s", batch_id, elapsed(started))
            current.update(rows=counts.rows_in, stage="checking")
            extra = self._extra_columns(parsed, counts) if counts.good and not bronze_done else []
            good = good_rows(parsed, self.dataset, batch_id, ingested_at, extra)
            bad = quarantine_rows(parsed, batch_id, ingested_at)
            # The gate: both tables' rows are checked before anything of the batch is written.
            gate, quarantine_gate = self.gates
            if not bronze_done:
                table = gate.table.name
                gate.record(rule_checks(table, batch_id, counts.rows_in, counts.malformed))
                gate.record(rule_checks(table, batch_id, counts.ruled, counts.broken))
                gate.check(good, batch_id, counts.good)
            if not quarantine_done:
                quarantine_gate.check(bad, batch_id, counts.bad)
            logger.debug("batch %s: checked at %.2f s", batch_id, elapsed(started))
            if counts.good and not bronze_done:
                current.update(stage="writing bronze")
                append(
                    good,
                    self.bronze,
                    partition_by=["event_date"],
                    app_id=self.app_id,
                    version=batch_id,
                    merge_schema=bool(extra or self.widen),
                )
                logger.debug("batch %s: bronze written at %.2f s", batch_id, elapsed(started))
            if counts.bad and not quarantine_done:
                current.update(stage="writing quarantine")
                append(
                    bad,
                    self.quarantine,
                    partition_by=["ingest_date"],
                    app_id=self.app_id,
                    version=batch_id,
                )
                logger.debug("batch %s: quarantine written at %.2f s", batch_id, elapsed(started))
        except (OverflowError, ValueError, QualityCheckFailed) as exc:
            # A value Python cannot hold (Great Expectations may report it as a failed check
            # without a cause): name its line.
            named = unrepresentable(parsed, self.dataset, batch_id, exc)
            if named is None:
                raise
            raise named from exc
        finally:
            parsed.unpersist()
        # Which tables hold the batch (empty outputs make no commit), before Spark's commit log.
        held = (bronze_done or counts.good > 0, quarantine_done or counts.bad > 0)
        record_batch(self.checkpoint, batch_id, dict(zip(self.table_names, held, strict=True)))
        if files is None:  # the logs could not tell: count the files the lines came from
            files = batch.select("_source_file").distinct().count()
        self.progress.add(
            BatchProgress(
                batch_id=batch_id,
                files=files,
                rows_in=counts.rows_in,
                rows_out=0 if bronze_done else counts.good,
                quarantined=0 if quarantine_done else counts.bad,
                seconds=elapsed(started),
            )
        )

    def _extra_columns(self, parsed: DataFrame, counts: LineCounts) -> list[str]:
        """Bronze columns beyond the declared ones (`schema_evolution`): none for `rescue`
        (unknown fields stay in `_rescued_data`); for `add_columns` every field bronze has
        gained so far plus this batch's new ones; `fail` refuses a batch with unknown fields
        (before anything is written: the checkpoint stays where it was)."""
        mode = self.dataset.spec.schema_evolution
        if mode == "rescue" or self.dataset.record_format != "json":
            return []
        declared = set(self.dataset.full_bronze_schema.fieldNames())
        # the table's columns when the run started, plus those this run added (it holds the lock)
        known = [c for c in (*self.table_columns, *self.added_columns) if c not in declared]
        new = [f for f in unknown_fields(parsed) if f not in known] if counts.rescued else []
        if new and mode == "fail":
            raise RunoffError(
                f"{self.dataset.name}: records carry fields the schema does not declare: "
                f"{', '.join(new)} (schema_evolution: fail): declare them in "
                f"{self.dataset.spec.file} or choose rescue or add_columns"
            )
        self.added_columns.extend(new)
        return known + new


# -- the job --------------------------------------------------------------------------------
def run(
    spark: SparkSession | None,
    config: RunoffConfig,
    dataset_name: str,
    options: BronzeOptions | None = None,
) -> RunRecord:
    """Ingest what has landed since the last run; returns the run's ledger record.

    Takes the checkpoint lock first (a second run fails at once, naming the holder), then
    checks the landing folder and the checkpoint; `spark=None` builds the session only then
    (`jobs.spark.get_spark`), so a refused run costs no JVM start. Every run, failed or not,
    appends one row to the run ledger.
    """
    options = options or BronzeOptions()
    catalog = Catalog.load(config)
    spec = catalog.spec(dataset_name)
    name = spec.name
    job = f"bronze {name}"
    bronze, quarantine = catalog.tables(name).bronze, catalog.tables(name).quarantine
    assert bronze.checkpoint is not None
    checkpoint = bronze.checkpoint
    tables = {bronze.name: bronze.path, quarantine.name: quarantine.path}
    record = RunRecord(dataset=name, layer=LAYER, trigger=options.trigger)
    record.details = {
        "max_files_per_trigger": options.max_files_per_trigger,
        "max_bytes_per_trigger": options.max_bytes_per_trigger,
        "archive": options.archive,
    }
    progress = RunProgress(job, record)
    with (
        recorded_run(config.runs_path, record),
        checkpoint_lock(checkpoint, f"runoff {job}", config.lock_path(checkpoint)),
    ):
        record.versions_before = {t: table_version(p) for t, p in tables.items()}
        record.versions_after = dict(record.versions_before)
        landing = catalog.landing_dir(name)
        if not landing.is_dir():  # the spec's source.path, or nothing landed yet: exit 2
            raise ConfigError(
                f"no landing directory for {name}: {landing} does not exist "
                f"(land files there, or run `runoff generate {name}`)"
            )
        guard_checkpoint(
            checkpoint,
            owner={
                "dataset": name,
                "layer": LAYER,
                "table": str(bronze.path.relative_to(config.data)),
            },
            tables=tables,
            reset_command=f"runoff reset {name} --layer bronze --yes",
        )
        # Ingested landing files changed since (Spark will not read them again): reported.
        landing_check = check_landing(config, name)
        record_states(checkpoint, landing_check.new_states)
        record.details["changed_files"] = [c.to_json() for c in landing_check.changed]
        if options.trigger == "once" and (
            options.max_files_per_trigger or options.max_bytes_per_trigger
        ):
            say(f"{job}: --trigger once reads everything in one batch: rate limits ignored")
        if spark is None:
            from jobs.spark import get_spark

            spark = get_spark(app_name=f"runoff-bronze-{name}", config=config)
        ensure_resolves(spark, catalog, name)
        dataset = load_dataset(catalog, name)
        ensure_table(spark, bronze, dataset.full_bronze_schema)
        ensure_table(spark, quarantine)
        batches = BronzeBatch(catalog, dataset, checkpoint, progress)
        # Fields declared since the table was created: the next append adds them.
        batches.table_columns = spark.read.format("delta").load(str(bronze.path)).columns
        batches.widen = [
            c for c in dataset.full_bronze_schema.fieldNames() if c not in batches.table_columns
        ]
        if batches.widen:
            record.details["declared_columns"] = batches.widen
            say(
                f"{job}: the spec declares new columns {', '.join(batches.widen)}: "
                "bronze gains them"
            )
        function = BatchFunction(batches)
        try:
            with live_status(progress.current.describe):  # a terminal's transient line
                run_query(
                    read_landing(spark, config, landing, options).writeStream,
                    function,
                    checkpoint,
                    options.trigger,
                    f"bronze_{name}",
                    tables=tables,
                    reset_command=f"runoff reset {name} --layer bronze --yes",
                )
        finally:
            record.versions_after = {t: table_version(p) for t, p in tables.items()}
            record_checks(catalog.quality_results.path, record, batches.gates)
            record.details["rows_in"] = sum(b.rows_in for b in progress.batches)
            record.details["replayed_batches"] = sum(b.replayed for b in progress.batches)
            if batches.added_columns:
                record.details["added_columns"] = batches.added_columns
        # The size and modification time of the files this run ingested, to compare next time.
        record_states(checkpoint, check_landing(config, name, only_new=True).new_states)
    say_problems(record, batches.gates)
    for line in report_lines(name, landing_check.changed, job):
        say(line)
    if batches.added_columns:
        say(
            f"{job}: bronze gained columns {', '.join(batches.added_columns)} "
            "(schema_evolution: add_columns; Delta schema evolution)"
        )
    say(summary_line(job, record))
    return record


def cmd_bronze(config: RunoffConfig, args: argparse.Namespace) -> int:
    """`runoff bronze <dataset> [--trigger ...] [--max-files-per-trigger N] [...]`."""
    run(None, config, args.dataset, BronzeOptions.from_args(args))
    return 0


__all__ = [
    "ERRORS",
    "RAW_SCHEMA",
    "BronzeBatch",
    "BronzeOptions",
    "LineCounts",
    "archive_dir",
    "cmd_bronze",
    "count_lines",
    "event_time_bounds",
    "good_rows",
    "landing_dirs",
    "parse_lines",
    "quarantine_rows",
    "read_landing",
    "restore_archive",
    "run",
    "unrepresentable",
]
