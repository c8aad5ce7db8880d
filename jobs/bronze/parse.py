"""Bronze parsing: landing lines -> bronze rows and quarantine rows (pure, no paths, no I/O).

Input: a DataFrame of raw lines (`RAW_SCHEMA`: the line, its file, its line number) and a
`Dataset`. Output: `parse_lines` classifies every line; `good_rows` and `quarantine_rows` shape
the two outputs; `count_lines` and `unknown_fields` summarize a batch. Shared by the streaming
job (`jobs.bronze.job`) and backfill (`jobs.backfill.job`).

A line is a valid record (the landing line contract of `jobs/samples/generator.py`) when it is at
most `MAX_LINE_BYTES` long, valid UTF-8, one strict JSON object (RFC 8259: no NaN/Infinity, single
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
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from core.errors import ConfigError, RunoffError
from core.specs import interval_seconds
from delta_tables.schemas import QUARANTINE_SCHEMA
from jobs.streaming.dataset import Dataset

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
# record is a few KiB; a line of MiBs would be one Spark row the executors parse again and
# again; one of 16 MiB or more is not even read as a row: jobs.bronze.long_lines); its `_raw`
# keeps the first MAX_LINE_BYTES + 1 characters, which are still too long, so that `_raw`
# parsed again (as a backfill does) is classified as the line was.
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
# The bytes of its file a line stands for: its own and its `\n` (jobs.bronze.long_lines).
SOURCE_BYTES = "_bytes"
# Files Spark's text reader decompresses (Hadoop's codecs, by extension).
COMPRESSED = r"(?i)\.(gz|bz2|deflate|lz4|snappy|zst)$"
# An array's index or a map's key within the path of an undeclared field (`items[0].color`,
# `prices["EUR"].note`), which `unknown_fields` leaves out of the names it reports.
INDEX = r'(?<=[A-Za-z0-9_\]])\[(\d+|"(?:[^"\\]|\\.)*")\]'
# A line's number when it is known without counting (a long line jobs.bronze.long_lines found).
KNOWN_LINE = "_known_line"
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
    SOURCE_BYTES,
    KNOWN_LINE,
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
# Types of a field that holds others.
_NESTED = (StructType, ArrayType, MapType)
# The type of `_unknown_entries`.
_ENTRIES = "ARRAY<STRUCT<key: STRING, value: STRING>>"


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


def kept(parsed: DataFrame) -> DataFrame:
    """`parse_lines` output persisted (the caller unpersists) for the jobs that read it again,
    with `_raw` only where a quarantine row needs it (a malformed line): a valid record's line
    would be most of what the cache holds. The cache is compressed (Spark's default): without,
    a batch of 10,000,000 `events` lines in one file ran a 1 GB driver out of memory."""
    return parsed.withColumn("_raw", F.when(F.col("_error").isNotNull(), F.col("_raw"))).persist()


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
    known = F.col(KNOWN_LINE) if KNOWN_LINE in raw.columns else F.lit(None).cast("long")
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
        # (none for a compressed file: its size is not its lines' bytes)
        F.when(~F.col("_source_file").rlike(COMPRESSED), F.octet_length(line) + 1)
        .otherwise(0)
        .alias(SOURCE_BYTES),
        known.alias(KNOWN_LINE),
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
    # A value beyond its type is a wrong type (below), and none in the record.
    records = parsed.select(
        "*", *[_holdable(_typed((f.name,)), f.dataType).alias(f.name) for f in schema.fields]
    )
    with_time = records.withColumn("event_time", dataset.event_time())

    value = F.col("value")
    corrupt = _typed((_CORRUPT,)).isNotNull()
    # Only lines that failed the typed parse pay for the second (all-string) parse.
    as_text = F.from_json(value, text_schema, _JSON_OPTIONS)
    unparseable = (
        ~F.col("_closes")
        | (corrupt & as_text.getField(_CORRUPT).isNotNull())
        | _more_after_the_object(value)
    )

    leaves = list(_struct_leaves(schema))
    string_like = {path for path, kind in leaves if isinstance(kind, _STRING_LIKE)}
    # One pattern for all string fields gates the exact (Variant) check of each of them.
    suspect = _non_string_pattern(value, [p[-1] for p in string_like])
    wrong = []
    for path, kind in leaves:
        checks: list[Column] = []
        if len(path) == 1 and isinstance(kind, _NESTED):
            # Spark keeps the rest of a struct, array or map whose part has the wrong type.
            checks.append(corrupt & _fails_alone(value, schema[path[0]]))
        elif len(path) == 1:
            (name,) = path
            checks.append(corrupt & F.col(name).isNull() & as_text.getField(name).isNotNull())
        if path in string_like:
            checks.append(suspect & _not_a_json_string(value, path))
        beyond = _beyond_its_type(_typed(path), kind)
        if beyond is not None:  # parsed, but no reader could hold the value
            checks.append(_typed(path).isNotNull() & beyond)
        if checks:
            text = F.lit(f"{'.'.join(path)} ({kind.simpleString()})")
            wrong.append(F.when(reduce(operator.or_, checks), text))
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
    if any(_holds_struct(f.dataType) for f in schema.fields):
        unknown = _undeclared(value, schema)
        rescued = F.when(F.size(unknown) > 0, F.to_json(F.map_from_entries(unknown)))
    else:  # the top level alone
        known = F.array(*[F.lit(n) for n in names])
        fields = F.from_json(value, FIELDS_AS_TEXT, _STRICT_JSON)
        top = F.map_filter(fields, lambda k, _: ~F.array_contains(known, k))
        # Most lines have only declared fields: a line whose every key, at any depth, is a
        # declared name has none to rescue (a declared field holding an object is a wrong
        # type), so only the others pay for a second parse. Escaped or odd keys count as
        # undeclared here: they are parsed.
        declared = "|".join(re.escape(n) for n in names)
        maybe = value.rlike(rf'"(?!(?:{declared})"\s*:)(?:[^"\\]|\\.)*+"\s*:')
        # (nested: Spark would compute `top` for every line if the outer test used it)
        rescued = F.when(maybe, F.when(F.size(top) > 0, F.to_json(top)))
    with_rescued = with_time.withColumn(RESCUED, rescued)
    return _finish(_with_rules(with_rescued, dataset, error), names, dataset, rescued=True)


def _typed(path: tuple[str, ...]) -> Column:
    """A field of the typed parse (`path`: its name, then the names of the structs within)."""
    column = F.col("_typed")
    for name in path:
        column = column.getField(name)
    return column


def _struct_leaves(
    schema: StructType, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], DataType]]:
    """The record's fields by path (`("user", "country")`) with their types: each top-level
    field, and below it the fields reached through structs alone (those inside arrays and maps
    are Spark's reader's: see `_parse_json`)."""
    for f in schema.fields:
        here = (*path, f.name)
        if not path or not isinstance(f.dataType, StructType):
            yield here, f.dataType
        if isinstance(f.dataType, StructType):
            yield from _struct_leaves(f.dataType, here)


def _holds_struct(kind: DataType) -> bool:
    if isinstance(kind, ArrayType):
        return _holds_struct(kind.elementType)
    if isinstance(kind, MapType):
        return _holds_struct(kind.valueType)
    return isinstance(kind, StructType)


def _no_entries() -> Column:
    return F.array().cast(_ENTRIES)


def _child(path: Column, name: Column) -> Column:
    """`path.name`, or `name` at the top level (`path` empty)."""
    return F.when(path == "", name).otherwise(F.concat(path, F.lit("."), name))


def _field(path: Column, name: Column) -> Column:
    """The path of an undeclared field `name` below `path` (`_undeclared`)."""
    quoted = F.concat(path, F.to_json(F.array(name)))
    return F.when(name.rlike(r'[.\[\]"]'), quoted).otherwise(_child(path, name))


def _fails_alone(value: Column, f: StructField) -> Column:
    """The line's field `f` (a struct, array or map) does not parse as its type: parsed alone,
    the record is corrupt."""
    alone = StructType([f, StructField(_CORRUPT, StringType(), True)])
    return F.from_json(value, alone, _JSON_OPTIONS).getField(_CORRUPT).isNotNull()


def _undeclared(value: Column, schema: StructType) -> Column:
    """The line's fields the schema does not declare, at every depth: an array of (path, JSON
    text) entries. A top-level field is named as it is (`plan`), one within a struct by its
    path (`user.plan`), one within an element of an array or a value of a map with the index
    or key (`items[0].color`, `prices["EUR"].note`). A field whose own name holds `.`, `[`, `]`
    or `"` is named in brackets (`["user.plan"]`, `user["a.b"]`), so that no two paths are one."""
    return _unknown_entries(value, schema, F.lit(""))


def _unknown_entries(text: Column, kind: DataType, path: Column) -> Column:
    """`_undeclared` below `path` for the JSON `text` of a value of type `kind`, a type that
    holds a struct (`_holds_struct`: elsewhere nothing can be undeclared)."""
    if isinstance(kind, StructType):
        fields = F.from_json(text, FIELDS_AS_TEXT, _STRICT_JSON)
        known = F.array(*[F.lit(n) for n in kind.fieldNames()])
        own = F.coalesce(
            F.transform(
                F.map_entries(F.map_filter(fields, lambda k, _: ~F.array_contains(known, k))),
                lambda e: F.struct(_field(path, e["key"]).alias("key"), e["value"].alias("value")),
            ),
            _no_entries(),
        )
        below = [
            _unknown_entries(fields.getItem(f.name), f.dataType, _child(path, F.lit(f.name)))
            for f in kind.fields
            if _holds_struct(f.dataType)
        ]
        return F.concat(own, *below) if below else own
    if isinstance(kind, ArrayType):
        element = kind.elementType

        def in_item(item: Column, i: Column) -> Column:
            index = F.concat(path, F.lit("["), i.cast("string"), F.lit("]"))
            return _unknown_entries(item, element, index)

        found = F.transform(F.from_json(text, "ARRAY<STRING>", _STRICT_JSON), in_item)
        return F.coalesce(F.flatten(found), _no_entries())
    assert isinstance(kind, MapType)
    value = kind.valueType

    def in_value(e: Column) -> Column:
        return _unknown_entries(e["value"], value, F.concat(path, F.to_json(F.array(e["key"]))))

    values = F.map_entries(F.from_json(text, FIELDS_AS_TEXT, _STRICT_JSON))
    return F.coalesce(F.flatten(F.transform(values, in_value)), _no_entries())


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
    if not names:
        return F.lit(False)
    keys = "|".join(re.escape(n) for n in sorted(set(names)))
    return value.rlike(rf'"(?:{keys})"\s*:\s*(?!null\b)[^"\s]')


def _not_a_json_string(value: Column, path: tuple[str, ...]) -> Column:
    """The line gives the field at `path` (a top-level name, then the names of the structs
    within) a non-string JSON value (number, boolean, object, array).

    Spark's JSON reader silently turns such values into strings (or numbers into timestamps);
    the Variant parse tells them apart (a key of the same name elsewhere does not count).
    """
    steps = "".join(f"[{json.dumps(name)}]" for name in path)
    kind = F.expr(f"schema_of_variant(variant_get(try_parse_json(value), '${steps}'))")
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
        SOURCE_BYTES,
        KNOWN_LINE,
        (F.col(RESCUED) if rescued else F.lit(None).cast("string")).alias(RESCUED),
    )


def good_rows(
    parsed: DataFrame,
    dataset: Dataset,
    batch_id: int,
    ingested_at: datetime,
    added_columns: Sequence[str] = (),
    keep: Sequence[str] = (),
) -> DataFrame:
    """The valid records of `parse_lines` output as bronze rows (`Dataset.full_bronze_schema`,
    then `added_columns`: fields taken out of `_rescued_data` as strings, for `add_columns`),
    then the columns of `parsed` named in `keep`."""
    with ansi_off(parsed.sparkSession):  # the spec's select SQL, as in `parse_lines`
        return _good_rows(parsed, dataset, batch_id, ingested_at, added_columns, keep)


def _good_rows(
    parsed: DataFrame,
    dataset: Dataset,
    batch_id: int,
    ingested_at: datetime,
    added_columns: Sequence[str],
    keep: Sequence[str],
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
        *keep,
    )
    return conform(mapped, schema, keep)


def quarantine_rows(
    parsed: DataFrame,
    batch_id: int,
    ingested_at: datetime,
    skipped: Mapping[str, Sequence[int]] | None = None,
) -> DataFrame:
    """The malformed lines of `parse_lines` output as quarantine rows (`QUARANTINE_SCHEMA`).

    `_line_number` counts every line of the file (blank ones too), 1-based; it needs all the
    lines of the file in `parsed`, as a micro-batch of the file source always has, but those of
    `skipped` (file -> the numbers of its lines the reader skipped, which `parsed` holds as rows
    with their `_known_line`: jobs.bronze.long_lines).
    """
    numbered = _with_line_numbers(parsed, skipped)
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


def _with_line_numbers(
    parsed: DataFrame, skipped: Mapping[str, Sequence[int]] | None = None
) -> DataFrame:
    """`parsed` with `_line_number` (see `quarantine_rows`): a line's rank among the lines read
    of its file, plus the skipped lines before it; a skipped line's own number is known."""
    known = F.col(KNOWN_LINE)
    order = Window.partitionBy("_source_file", known.isNull()).orderBy("_block_start", "_row_id")
    rank = F.row_number().over(order)
    # The i-th skipped line (from 0) at number s comes after s - 1 - i lines read.
    before = [
        F.when((F.col("_source_file") == name) & (rank > number - 1 - i), 1).otherwise(0)
        for name, numbers in (skipped or {}).items()
        for i, number in enumerate(sorted(numbers))
    ]
    counted = rank + sum(before, F.lit(0)) if before else rank
    return parsed.withColumn("_line_number", F.coalesce(known, counted))


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
            _with_line_numbers(parsed)
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


def conform(df: DataFrame, schema: StructType, keep: Sequence[str] = ()) -> DataFrame:
    """Columns of `schema`, in its order, cast to its types; then the columns named in `keep`."""
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields], *keep)


@dataclass(frozen=True)
class LineCounts:
    """Lines of a batch: non-blank lines in, valid records, malformed lines; the records the row
    rules looked at (they parsed) and how many each rule sent to quarantine."""

    rows_in: int
    good: int
    bad: int
    rescued: int = 0  # valid records with fields the schema does not declare
    bytes: int = 0  # the bytes of their files the lines stand for (SOURCE_BYTES)
    ruled: int = 0
    broken: dict[str, int] = field(default_factory=dict)
    # lines per built-in rule (the parse errors of ERRORS), by its `_error` text
    malformed: dict[str, int] = field(default_factory=dict)
    nulls: dict[str, int] = field(default_factory=dict)  # valid records per column: null
    newest: datetime | None = None  # the valid records' newest event time


def count_lines(
    parsed: DataFrame, rules: Sequence[str] = (), columns: Mapping[str, Column] | None = None
) -> LineCounts:
    """One aggregation over `parse_lines` output (`rules`: the row rules' names; `columns`: the
    bronze columns, by name, whose nulls among the valid records are counted)."""
    with ansi_off(parsed.sparkSession):  # the spec's select SQL, as in `good_rows`
        return _count_lines(parsed, rules, columns or {})


def _count_lines(
    parsed: DataFrame, rules: Sequence[str], columns: Mapping[str, Column]
) -> LineCounts:
    non_blank = ~F.col("_blank")
    error = F.col("_error")
    bad = non_blank & error.isNotNull()
    valid = non_blank & error.isNull()
    rescued = valid & F.col(RESCUED).isNotNull()
    prefix = f"{ERR_RULE}: "
    ruled = non_blank & (error.isNull() | error.startswith(prefix))
    broken = F.split(F.substring(error, len(prefix) + 1, 1 << 20), ", ")
    row = parsed.agg(
        F.count(F.when(non_blank, 1)).alias("rows_in"),
        F.coalesce(F.sum(SOURCE_BYTES), F.lit(0)).alias("bytes"),
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
        *[
            F.count(F.when(valid & column.isNull(), 1)).alias(f"null_{i}")
            for i, column in enumerate(columns.values())
        ],
        F.unix_micros(F.max(F.when(valid, F.col("event_time")))).alias("newest"),
    ).first()
    assert row is not None
    rows_in, bad_rows = int(row["rows_in"]), int(row["bad"])
    return LineCounts(
        rows_in=rows_in,
        bytes=int(row["bytes"]),
        good=rows_in - bad_rows,
        bad=bad_rows,
        rescued=int(row["rescued"]),
        ruled=int(row["ruled"]),
        broken={name: int(row[f"rule_{i}"]) for i, name in enumerate(rules)},
        malformed={e: int(row[f"error_{i}"]) for i, e in BUILT_IN},
        nulls={name: int(row[f"null_{i}"]) for i, name in enumerate(columns)},
        newest=None if row["newest"] is None else _EPOCH + timedelta(microseconds=row["newest"]),
    )


def unknown_fields(parsed: DataFrame) -> dict[str, int]:
    """The fields outside the declared schema among the valid records, sorted by name: how
    many records carry each. A field within an array or map is named without its index or key
    (`items[].color`)."""
    valid = parsed.where(~F.col("_blank") & F.col("_error").isNull() & F.col(RESCUED).isNotNull())
    keys = F.map_keys(F.from_json(RESCUED, FIELDS_AS_TEXT))
    unindexed = F.array_distinct(F.transform(keys, lambda k: F.regexp_replace(k, INDEX, "[]")))
    names = valid.select(F.explode(unindexed).alias("name"))
    rows = names.groupBy("name").count().collect()
    return {row["name"]: int(row["count"]) for row in sorted(rows, key=lambda r: r["name"])}


def is_nested(name: str) -> bool:
    """A field name of `unknown_fields` below the top level."""
    return "." in name or "[" in name
