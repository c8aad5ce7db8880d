"""Reading Delta tables: plan on the driver with delta-rs, read data files on executors.

The driver opens the snapshot with delta-rs (log replay, checkpoints, time travel), lists its
data files with their partition values and statistics, skips files a predicate excludes, and
asks delta-rs for the deletion-vector selection of files that have one. Executors then read
each file with pyarrow: physical column names are mapped back to logical ones (column mapping),
partition values are added as columns, deleted rows are dropped, and every column is cast to
exactly the Arrow type Spark expects for the table's Delta type.

Tables with reader features this reader does not know are read through delta-rs'
`QueryBuilder` (DataFusion) in a single partition instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.types import StructField, StructType

from delta_tables.errors import DeltaOptionError, DeltaTableNotFoundError
from delta_tables.predicate import Expr, FileFacts, classify
from delta_tables.schema import (
    parse_partition_value,
    parse_timestamp,
    physical_name,
    physical_struct,
    spark_arrow_schema,
    strip_metadata,
    struct_from_delta_json,
)

# Reader features whose effect this module implements itself (the rest go to QueryBuilder).
NATIVE_READER_FEATURES = frozenset(
    {
        "deletionVectors",
        "columnMapping",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
    }
)
READ_BATCH_ROWS = 131_072
MAX_PARTITION_BYTES = 128 * 1024 * 1024
OPEN_COST_BYTES = 4 * 1024 * 1024


def local_path(path_or_uri: str) -> str:
    """A filesystem path for a local path or `file:` URI (other schemes are not supported)."""
    text = str(path_or_uri)
    if text.startswith("file:"):
        parsed = urlparse(text)
        return unquote(parsed.path)
    if "://" in text:
        raise DeltaOptionError(
            f"path {text!r}: only local filesystem paths are supported by runoff's delta-rs engine"
        )
    return os.path.abspath(text)


def is_delta_table(path: str) -> bool:
    return Path(local_path(path), "_delta_log").is_dir() and any(
        p.name.endswith(".json")
        or p.name.endswith(".checkpoint.parquet")
        or p.name == "_last_checkpoint"
        for p in Path(local_path(path), "_delta_log").iterdir()
    )


def open_table(path: str, version: int | None = None, timestamp: str | None = None) -> Any:
    """The delta-rs table at `path` (latest, `version`, or as of `timestamp`)."""
    from deltalake import DeltaTable

    root = local_path(path)
    if not is_delta_table(root):
        raise DeltaTableNotFoundError(f"{root} is not a Delta table (no _delta_log)")
    if version is not None:
        try:
            return DeltaTable(root, version=version)
        except Exception as exc:  # delta-rs raises several types for a missing version
            latest = DeltaTable(root).version()
            raise DeltaOptionError(
                f"option versionAsOf={version} is not available for Delta table {root} "
                f"(versions 0..{latest}): {exc}"
            ) from exc
    dt = DeltaTable(root)
    if timestamp is not None:
        try:
            when = parse_timestamp(timestamp)
        except ValueError:
            raise DeltaOptionError(
                f"option timestampAsOf={timestamp!r} is not a timestamp (use e.g. "
                "'2024-01-31 12:00:00' or ISO-8601)"
            ) from None
        first = _first_commit_time(dt)
        if first is not None and when < first:
            raise DeltaOptionError(
                f"option timestampAsOf={timestamp!r} is before the first commit of Delta table "
                f"{root} ({first.isoformat()})"
            )
        dt.load_as_version(when)
    return dt


def latest_version(path: str) -> int:
    """The table's latest version from the names of its commit files (no log replay)."""
    log = Path(local_path(path), "_delta_log")
    versions = [
        int(name[:20])
        for name in os.listdir(log)
        if len(name) == 25 and name.endswith(".json") and name[:20].isdigit()
    ]
    if versions:
        return max(versions)
    return int(open_table(path).version())


def _first_commit_time(dt: Any) -> datetime | None:
    from datetime import UTC

    history = dt.history()
    stamps = [h.get("timestamp") for h in history if h.get("timestamp") is not None]
    if not stamps:
        return None
    return datetime.fromtimestamp(min(stamps) / 1000, tz=UTC)


# -- plans ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileTask:
    """One data file to read: absolute path, partition values (typed), deletion-vector keep mask."""

    path: str
    size: int
    partition_values: dict[str, Any]
    keep: pa.BooleanArray | None = None
    num_records: int | None = None
    modification_time: int = 0


@dataclass(frozen=True)
class TableLayout:
    """What executors need to turn a table's files into Spark's Arrow batches (picklable)."""

    table_path: str
    version: int
    schema_json: str
    partition_columns: tuple[str, ...]

    @property
    def struct(self) -> StructType:
        return struct_from_delta_json(self.schema_json)

    @property
    def read_struct(self) -> StructType:
        return strip_metadata(self.struct)  # type: ignore[return-value]


@dataclass(frozen=True)
class ScanPartition:
    """A group of files one Spark task reads (or the whole table through QueryBuilder)."""

    layout: TableLayout
    files: tuple[FileTask, ...] = ()
    query_builder: bool = False


def unsupported_reader_features(dt: Any) -> list[str]:
    features = dt.protocol().reader_features or []
    return sorted(set(features) - NATIVE_READER_FEATURES)


def layout_of(dt: Any) -> TableLayout:
    return TableLayout(
        table_path=local_path(dt.table_uri),
        version=dt.version(),
        schema_json=dt.schema().to_json(),
        partition_columns=tuple(dt.metadata().partition_columns),
    )


def _deletion_selections(dt: Any) -> dict[str, pa.BooleanArray]:
    features = dt.protocol().reader_features or []
    if "deletionVectors" not in features:
        return {}
    table = pa.table(dt.deletion_vectors())
    out: dict[str, pa.BooleanArray] = {}
    for path, selection in zip(
        table.column("filepath").to_pylist(),
        table.column("selection_vector").to_pylist(),
        strict=True,
    ):
        out[local_path(path)] = pa.array(selection, pa.bool_())
    return out


def snapshot_entries(dt: Any) -> list[tuple[FileTask, FileFacts]]:
    """Every data file of the loaded snapshot with what the log says about it."""
    layout = layout_of(dt)
    struct = layout.struct
    logical_by_physical = {physical_name(f): f for f in struct.fields}
    adds = pa.table(dt.get_add_actions(flatten=False))
    selections = _deletion_selections(dt)
    read_schema = spark_arrow_schema(layout.read_struct)
    arrow_types = {f.name: f.type for f in read_schema}
    root = layout.table_path
    entries: list[tuple[FileTask, FileFacts]] = []
    for row in adds.to_pylist():
        partition = {
            logical_by_physical[k].name if k in logical_by_physical else k: v
            for k, v in (row.get("partition") or {}).items()
        }
        facts = FileFacts(
            num_records=row.get("num_records"),
            partition_values=partition,
            min_values=_logical_stats(row.get("min"), logical_by_physical),
            max_values=_logical_stats(row.get("max"), logical_by_physical),
            null_counts=_logical_stats(row.get("null_count"), logical_by_physical),
            column_types=arrow_types,
        )
        path = _absolute(root, row["path"])
        task = FileTask(
            path=path,
            size=int(row["size_bytes"]),
            partition_values=partition,
            keep=selections.get(path),
            num_records=row.get("num_records"),
            modification_time=int(row.get("modification_time") or 0),
        )
        entries.append((task, facts))
    return entries


def snapshot_files(dt: Any, predicate: Expr | None = None) -> list[FileTask]:
    """The data files of the loaded snapshot, minus those `predicate` proves irrelevant."""
    return [
        task
        for task, facts in snapshot_entries(dt)
        if predicate is None or classify(predicate, facts) != "none"
    ]


def _logical_stats(
    stats: dict[str, Any] | None, logical_by_physical: dict[str, StructField]
) -> dict[str, Any]:
    if not stats:
        return {}
    return {
        logical_by_physical[k].name if k in logical_by_physical else k: v for k, v in stats.items()
    }


def _absolute(root: str, path: str) -> str:
    if "://" in path or path.startswith("file:"):
        return local_path(path)
    if path.startswith("/"):
        return path
    return os.path.join(root, unquote(path))


def pack_files(
    files: Sequence[FileTask],
    parallelism: int | None = None,
    max_partition_bytes: int = MAX_PARTITION_BYTES,
    open_cost: int = OPEN_COST_BYTES,
) -> list[tuple[FileTask, ...]]:
    """Group files into read tasks the way Spark sizes file splits (bytes + an open cost)."""
    if not files:
        return []
    parallelism = max(1, parallelism or os.cpu_count() or 1)
    total = sum(f.size + open_cost for f in files)
    split = min(max_partition_bytes, max(open_cost, total // parallelism))
    groups: list[list[FileTask]] = []
    current: list[FileTask] = []
    current_bytes = 0
    for task in sorted(files, key=lambda f: (-f.size, f.path)):
        if current and current_bytes + task.size > split:
            groups.append(current)
            current, current_bytes = [], 0
        current.append(task)
        current_bytes += task.size + open_cost
    if current:
        groups.append(current)
    return [tuple(g) for g in groups]


# -- executors -----------------------------------------------------------------------------
def read_partition(partition: ScanPartition) -> Iterator[pa.RecordBatch]:
    """Spark-typed Arrow batches of one scan partition (runs in a Python worker)."""
    if partition.query_builder:
        yield from _read_query_builder(partition)
        return
    reader = FileReader(partition.layout)
    for task in partition.files:
        yield from reader.read(task)


class FileReader:
    """Turns one table's Parquet data files into record batches of the table's logical schema."""

    def __init__(self, layout: TableLayout) -> None:
        self.layout = layout
        struct = layout.struct
        self.read_struct: StructType = strip_metadata(struct)  # type: ignore[assignment]
        self.target = spark_arrow_schema(self.read_struct)
        physical: StructType = physical_struct(struct)  # type: ignore[assignment]
        self.physical_target = spark_arrow_schema(physical)
        self.partition_columns = set(layout.partition_columns)
        self.physical_names = [physical_name(f) for f in struct.fields]

    def read(self, task: FileTask) -> Iterator[pa.RecordBatch]:
        parquet = pq.ParquetFile(task.path, coerce_int96_timestamp_unit="us")
        present = set(parquet.schema_arrow.names)
        wanted = [
            p
            for f, p in zip(self.read_struct.fields, self.physical_names, strict=True)
            if f.name not in self.partition_columns and p in present
        ]
        offset = 0
        if parquet.metadata.num_rows == 0:
            return
        for batch in parquet.iter_batches(
            batch_size=READ_BATCH_ROWS, columns=wanted, use_threads=False
        ):
            n = batch.num_rows
            out = self._conform(batch, task, n)
            if task.keep is not None:
                out = out.filter(task.keep.slice(offset, n))
            offset += n
            if out.num_rows:
                yield out

    def _conform(self, batch: pa.RecordBatch, task: FileTask, n: int) -> pa.RecordBatch:
        arrays: list[pa.Array] = []
        names = batch.schema.names
        for index, spark_field in enumerate(self.read_struct.fields):
            target_type = self.target.field(index).type
            if spark_field.name in self.partition_columns:
                value = _partition_value(task.partition_values, spark_field)
                arrays.append(pa.repeat(pa.scalar(value, target_type), n))
                continue
            phys = self.physical_names[index]
            if phys not in names:
                arrays.append(pa.nulls(n, target_type))
                continue
            arrays.append(
                conform_array(
                    batch.column(phys), self.physical_target.field(index).type, target_type
                )
            )
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)


def _partition_value(values: dict[str, Any], spark_field: StructField) -> Any:
    value = values.get(spark_field.name)
    if isinstance(value, str) or value is None:
        return (
            parse_partition_value(value, spark_field.dataType) if isinstance(value, str) else None
        )
    return value


def conform_array(
    array: pa.Array, physical_type: pa.DataType, target_type: pa.DataType
) -> pa.Array:
    """Cast a file column to the Spark type; rename nested physical fields to logical names."""
    if array.type.equals(target_type):
        return array
    if physical_type.equals(target_type):
        return _cast(array, target_type)
    return _cast(array, physical_type).view(target_type)


def _cast(array: pa.Array, target_type: pa.DataType) -> pa.Array:
    try:
        return pc.cast(array, target_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pc.cast(array, target_type, safe=False)


def _read_query_builder(partition: ScanPartition) -> Iterator[pa.RecordBatch]:
    from deltalake import DeltaTable, QueryBuilder

    layout = partition.layout
    dt = DeltaTable(layout.table_path, version=layout.version)
    target = spark_arrow_schema(layout.read_struct)
    reader = QueryBuilder().register("t", dt).execute("select * from t")
    for raw in reader:
        batch = pa.record_batch(raw)
        arrays = [
            _cast(batch.column(f.name), f.type)
            if f.name in batch.schema.names
            else pa.nulls(batch.num_rows, f.type)
            for f in target
        ]
        if batch.num_rows:
            yield pa.RecordBatch.from_arrays(arrays, schema=target)


# -- the commit log (streaming) ----------------------------------------------------------------
def commit_actions(table_path: str, version: int) -> list[dict[str, Any]]:
    """The actions of one commit (`_delta_log/<version>.json`), in file order."""
    log_file = Path(local_path(table_path), "_delta_log", f"{version:020d}.json")
    try:
        text = log_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DeltaTableNotFoundError(
            f"commit {version} of Delta table {local_path(table_path)} is missing from _delta_log "
            "(log cleaned up?); restart the stream from a newer startingVersion"
        ) from None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def file_task_from_add(table_path: str, add: dict[str, Any], struct: StructType) -> FileTask:
    """A FileTask for an `add` action read from a commit file (partition values serialized)."""
    fields = {physical_name(f): f for f in struct.fields}
    values: dict[str, Any] = {}
    for key, raw in (add.get("partitionValues") or {}).items():
        spark_field = fields.get(key)
        if spark_field is None:
            continue
        values[spark_field.name] = parse_partition_value(raw, spark_field.dataType)
    stats = add.get("stats")
    num_records = None
    if stats:
        try:
            num_records = json.loads(stats).get("numRecords")
        except ValueError:
            num_records = None
    return FileTask(
        path=_absolute(local_path(table_path), add["path"]),
        size=int(add.get("size") or 0),
        partition_values=values,
        num_records=num_records,
        modification_time=int(add.get("modificationTime") or 0),
    )
