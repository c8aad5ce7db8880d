"""Schemas of Delta tables as Spark and Arrow see them, write-schema enforcement, partition values.

- Delta's schema JSON *is* Spark's StructType JSON, so `table_struct()` is a direct conversion;
  the Arrow schema handed to Spark's Python data source API is `spark_arrow_schema()`.
- Column mapping (`delta.columnMapping.mode` name/id): Parquet files carry physical column names
  (`col-<uuid>`); `physical_struct()` renames a logical schema to them.
- `align_write_schema()` is the schema enforcement of every write: it names the first column at
  fault, and implements `mergeSchema` / `overwriteSchema` like delta-spark.
- Partition values follow the Delta protocol's serialization; directories use Hive escaping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from delta_tables.errors import DeltaSchemaMismatchError, DeltaUnsupportedError

if TYPE_CHECKING:
    from deltalake import DeltaTable

PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


# -- Delta <-> Spark <-> Arrow ---------------------------------------------------------------
def struct_from_delta_json(schema_json: str) -> StructType:
    """A Delta `schemaString` (Spark's StructType JSON) as a StructType, metadata kept."""
    return cast(StructType, StructType.fromJson(json.loads(schema_json)))


def table_struct(dt: DeltaTable) -> StructType:
    """The table's logical schema, column-mapping metadata included."""
    return struct_from_delta_json(dt.schema().to_json())


def strip_metadata(dtype: DataType) -> DataType:
    """The same type without field metadata (what readers of the table should see)."""
    if isinstance(dtype, StructType):
        return StructType(
            [StructField(f.name, strip_metadata(f.dataType), f.nullable) for f in dtype.fields]
        )
    if isinstance(dtype, ArrayType):
        return ArrayType(strip_metadata(dtype.elementType), dtype.containsNull)
    if isinstance(dtype, MapType):
        return MapType(
            strip_metadata(dtype.keyType), strip_metadata(dtype.valueType), dtype.valueContainsNull
        )
    return dtype


def as_nullable(dtype: DataType) -> DataType:
    """Every field nullable, as delta-spark does for the schema of a new table."""
    if isinstance(dtype, StructType):
        return StructType(
            [StructField(f.name, as_nullable(f.dataType), True, f.metadata) for f in dtype.fields]
        )
    if isinstance(dtype, ArrayType):
        return ArrayType(as_nullable(dtype.elementType), True)
    if isinstance(dtype, MapType):
        return MapType(dtype.keyType, as_nullable(dtype.valueType), True)
    return dtype


def spark_arrow_schema(struct: StructType) -> pa.Schema:
    """The Arrow schema Spark expects from (and hands to) Python data sources for `struct`."""
    return to_arrow_schema(struct, timezone="UTC")


def spark_arrow_type(dtype: DataType) -> pa.DataType:
    return spark_arrow_schema(StructType([StructField("x", dtype)])).field("x").type


def physical_name(field: StructField) -> str:
    return str((field.metadata or {}).get(PHYSICAL_NAME_KEY, field.name))


def physical_struct(dtype: DataType) -> DataType:
    """Rename every struct field to its column-mapping physical name (identity without mapping)."""
    if isinstance(dtype, StructType):
        return StructType(
            [
                StructField(physical_name(f), physical_struct(f.dataType), f.nullable)
                for f in dtype.fields
            ]
        )
    if isinstance(dtype, ArrayType):
        return ArrayType(physical_struct(dtype.elementType), dtype.containsNull)
    if isinstance(dtype, MapType):
        return MapType(
            physical_struct(dtype.keyType),
            physical_struct(dtype.valueType),
            dtype.valueContainsNull,
        )
    return dtype


def column_mapping_mode(configuration: Mapping[str, str]) -> str:
    return configuration.get("delta.columnMapping.mode", "none") or "none"


def type_shape(dtype: DataType) -> Any:
    """A comparable form of a type that ignores nullability and metadata."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: strip(v)
                for k, v in value.items()
                if k not in ("nullable", "containsNull", "valueContainsNull", "metadata")
            }
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(dtype.jsonValue())


def same_type(a: DataType, b: DataType) -> bool:
    return bool(type_shape(a) == type_shape(b))


# -- write-schema enforcement --------------------------------------------------------------
@dataclass(frozen=True)
class WriteLayout:
    """How the columns of written data map onto the table's columns.

    `target` is the table schema after the write; `sources[i]` names the data column feeding
    `target.fields[i]` (None: the column is absent from the data and written as nulls).
    """

    target: StructType
    sources: tuple[str | None, ...]
    new_fields: tuple[StructField, ...] = ()
    replaces_schema: bool = False


def _check_duplicates(data: StructType, table_name: str) -> None:
    seen: dict[str, str] = {}
    for name in data.fieldNames():
        key = name.lower()
        if key in seen:
            raise DeltaSchemaMismatchError(
                f"column `{name}` appears twice (as `{seen[key]}` and `{name}`) in the data "
                f"written to Delta table {table_name}"
            )
        seen[key] = name


def align_write_schema(
    table: StructType | None,
    data: StructType,
    *,
    table_name: str,
    merge_schema: bool = False,
    overwrite_schema: bool = False,
) -> WriteLayout:
    """Match written columns to table columns by name (case-insensitively), like delta-spark.

    Columns missing from the data are written as nulls; extra columns need `mergeSchema`; a
    column whose type differs fails, naming the column and both types.
    """
    _check_duplicates(data, table_name)
    for f in data.fields:
        _check_writable_type(f.name, f.dataType, table_name)
    if table is None or overwrite_schema:
        target = cast(StructType, as_nullable(strip_metadata(data)))
        return WriteLayout(
            target=target,
            sources=tuple(data.fieldNames()),
            replaces_schema=table is not None,
        )
    if any(PHYSICAL_NAME_KEY in (f.metadata or {}) for f in table.fields):
        raise DeltaUnsupportedError(
            f"Delta table {table_name} uses column mapping: writing to it is not supported by "
            "runoff's delta-rs engine (reading is)"
        )
    by_lower = {f.name.lower(): f for f in table.fields}
    matched: dict[str, str] = {}
    new_fields: list[StructField] = []
    for f in data.fields:
        existing = by_lower.get(f.name.lower())
        if existing is None:
            if not merge_schema:
                raise DeltaSchemaMismatchError(
                    f"schema mismatch writing to Delta table {table_name}: column `{f.name}` "
                    f"({f.dataType.simpleString()}) is not in the table schema "
                    f"[{', '.join(table.fieldNames())}]; write with option mergeSchema=true "
                    "to add it"
                )
            new_fields.append(StructField(f.name, as_nullable(f.dataType), True))
            continue
        if not same_type(existing.dataType, f.dataType):
            raise DeltaSchemaMismatchError(
                f"schema mismatch writing to Delta table {table_name}: column `{existing.name}` "
                f"is {f.dataType.simpleString()} in the data but "
                f"{existing.dataType.simpleString()} in the table; cast it, or replace the "
                "schema with mode overwrite and option overwriteSchema=true"
            )
        matched[existing.name] = f.name
    sources: list[str | None] = []
    for f in table.fields:
        source = matched.get(f.name)
        if source is None and not f.nullable:
            raise DeltaSchemaMismatchError(
                f"column `{f.name}` is NOT NULL in Delta table {table_name} but missing from "
                "the data written"
            )
        sources.append(source)
    target = StructType(list(table.fields) + new_fields)
    sources.extend(f.name for f in new_fields)
    return WriteLayout(target=target, sources=tuple(sources), new_fields=tuple(new_fields))


def _check_writable_type(name: str, dtype: DataType, table_name: str) -> None:
    type_name = type(dtype).__name__
    if type_name in ("NullType", "VariantType", "CalendarIntervalType", "CharType", "VarcharType"):
        raise DeltaSchemaMismatchError(
            f"column `{name}` has type {dtype.simpleString()}, which cannot be stored in Delta "
            f"table {table_name}; cast it to a concrete type"
        )


def check_partition_columns(
    struct: StructType, partition_by: Sequence[str], table_name: str
) -> None:
    """Partition columns must exist and be of a primitive type."""
    names = {f.name: f for f in struct.fields}
    for col in partition_by:
        field = names.get(col)
        if field is None:
            raise DeltaSchemaMismatchError(
                f"partition column `{col}` of Delta table {table_name} is not in the schema "
                f"[{', '.join(struct.fieldNames())}]"
            )
        if isinstance(field.dataType, StructType | ArrayType | MapType):
            raise DeltaSchemaMismatchError(
                f"partition column `{col}` of Delta table {table_name} has the nested type "
                f"{field.dataType.simpleString()}; partition by a primitive column"
            )
    if len(set(partition_by)) != len(partition_by):
        raise DeltaSchemaMismatchError(
            f"partition columns {list(partition_by)} of Delta table {table_name} repeat a column"
        )
    if partition_by and len(partition_by) == len(struct.fields):
        raise DeltaSchemaMismatchError(
            f"Delta table {table_name} cannot be partitioned by all of its columns "
            f"{list(partition_by)}"
        )


# -- partition values ------------------------------------------------------------------------
_ESCAPE = set("\"#%'*/:=?\\{[]^") | {chr(c) for c in range(0x01, 0x20)} | {chr(0x7F)}


def escape_path_name(text: str) -> str:
    """Hive/Spark escaping of a partition directory value (`a:b` -> `a%3Ab`)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in text)


def unescape_path_name(text: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def format_partition_value(value: Any, dtype: DataType) -> str | None:
    """Serialize a partition value as the Delta protocol stores it in `partitionValues`."""
    if value is None:
        return None
    if isinstance(dtype, BooleanType):
        return "true" if value else "false"
    if isinstance(dtype, TimestampType | TimestampNTZType):
        ts = value
        if isinstance(ts, datetime) and ts.tzinfo is not None:
            ts = ts.astimezone(UTC).replace(tzinfo=None)
        return cast(datetime, ts).strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(dtype, DateType):
        return cast(date, value).isoformat()
    if isinstance(dtype, BinaryType):
        return bytes(value).decode("latin-1")
    return str(value)


def parse_partition_value(text: str | None, dtype: DataType) -> Any:
    """The Python value of a serialized partition value (inverse of `format_partition_value`)."""
    if text is None:
        return None
    if text == "" and not isinstance(dtype, StringType | BinaryType):
        return None
    if isinstance(dtype, LongType | IntegerType | ShortType | ByteType):
        return int(text)
    if isinstance(dtype, FloatType | DoubleType):
        return float(text)
    if isinstance(dtype, DecimalType):
        return Decimal(text)
    if isinstance(dtype, BooleanType):
        return text.lower() == "true"
    if isinstance(dtype, DateType):
        return date.fromisoformat(text[:10])
    if isinstance(dtype, TimestampType):
        return parse_timestamp(text)
    if isinstance(dtype, TimestampNTZType):
        return parse_timestamp(text).replace(tzinfo=None)
    if isinstance(dtype, BinaryType):
        return text.encode("latin-1")
    return text


def parse_timestamp(text: str) -> datetime:
    """`2024-01-02 03:04:05[.ffffff]` (UTC) or ISO-8601 with `T`/`Z`/offset, as aware UTC."""
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def partition_dir(partition_by: Sequence[str], values: Mapping[str, str | None]) -> str:
    """`event_date=2024-01-01/...` for serialized partition values (no trailing slash)."""
    parts = []
    for col in partition_by:
        raw = values.get(col)
        text = HIVE_NULL if raw is None or raw == "" else escape_path_name(raw)
        parts.append(f"{escape_path_name(col)}={text}")
    return "/".join(parts)


def is_string_like(dtype: DataType) -> bool:
    return isinstance(dtype, StringType | BinaryType)


def resolve_partitioning(
    requested: Sequence[str] | None,
    existing: Sequence[str] | None,
    target: StructType,
    *,
    replaces_schema: bool,
    table_name: str,
) -> tuple[str, ...]:
    """The partition columns of a write: the table's, or the requested ones for a new table."""
    if existing is None or replaces_schema:
        chosen: Sequence[str] = requested if requested is not None else (existing or ())
    else:
        if requested is not None and tuple(requested) != tuple(existing):
            raise DeltaSchemaMismatchError(
                f"partitionBy {list(requested)} does not match the partition columns "
                f"{list(existing)} of Delta table {table_name}; to change them, overwrite with "
                "overwriteSchema=true"
            )
        chosen = existing
    # Spark resolves column names case-insensitively: use the data's spelling.
    names = {n.lower(): n for n in target.fieldNames()}
    resolved = []
    for col in chosen:
        if col.lower() not in names:
            raise DeltaSchemaMismatchError(
                f"partition column `{col}` is not a column of the data written to Delta table "
                f"{table_name} [{', '.join(target.fieldNames())}]"
            )
        resolved.append(names[col.lower()])
    check_partition_columns(target, resolved, table_name)
    return tuple(resolved)
