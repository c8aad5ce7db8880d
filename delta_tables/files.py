"""Writing data files: Arrow batches -> Parquet files with Delta statistics, not yet committed.

`FileWriter` runs in Spark's Python workers (the `format("delta")` sink) and on the driver
(rewrites for `replaceWhere`). It reorders/casts incoming columns to the table schema, splits
rows by partition values into `col=value/` directories, writes one Parquet file per partition
value (row groups buffered to a useful size) and returns an `AddFile` per file, statistics read
back from the Parquet footer. Nothing is visible in the table until the driver commits them.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.types import StructType

from delta_tables.errors import DeltaReplaceWhereError, DeltaSchemaMismatchError
from delta_tables.predicate import Expr, parse_predicate, to_sql, true_mask
from delta_tables.schema import (
    format_partition_value,
    partition_dir,
    spark_arrow_schema,
    struct_from_delta_json,
)
from delta_tables.stats import DEFAULT_NUM_INDEXED_COLS, stats_from_metadata

FLUSH_ROWS = 1_048_576
FLUSH_BYTES = 96 * 1024 * 1024


@dataclass(frozen=True)
class AddFile:
    """A written data file, as its `add` action will describe it.

    `path` is relative to the table root and *not* URI-encoded: delta-rs encodes it in the log.
    """

    path: str
    size: int
    partition_values: dict[str, str | None]
    modification_time: int
    stats: str
    num_records: int

    def to_action(self) -> Any:
        from deltalake.transaction import AddAction

        return AddAction(
            path=self.path,
            size=self.size,
            partition_values=self.partition_values,
            modification_time=self.modification_time,
            data_change=True,
            stats=self.stats,
        )


@dataclass(frozen=True)
class WriteSpec:
    """Everything a write task needs (picklable): where, which schema, how to lay out files."""

    table_path: str
    schema_json: str  # the table schema after this write (data + partition columns)
    sources: tuple[str | None, ...]  # per target column: the incoming column feeding it
    partition_by: tuple[str, ...] = ()
    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS
    replace_where: str | None = None
    table_name: str = ""
    file_prefix: str = "part"
    compression: str = "snappy"

    @property
    def struct(self) -> StructType:
        return struct_from_delta_json(self.schema_json)


@dataclass
class _OpenFile:
    relative: str
    values: dict[str, str | None]
    writer: pq.ParquetWriter
    pending: list[pa.RecordBatch] = field(default_factory=list)
    pending_rows: int = 0
    pending_bytes: int = 0
    rows: int = 0


class FileWriter:
    """Writes batches of one task into Parquet files of the table; `close()` returns AddFiles."""

    def __init__(self, spec: WriteSpec, task_label: str | None = None) -> None:
        self.spec = spec
        struct = spec.struct
        self.struct = struct
        self.arrow_schema = spark_arrow_schema(struct)
        self.partition_by = spec.partition_by
        partition_set = set(spec.partition_by)
        self.data_indexes = [i for i, f in enumerate(struct.fields) if f.name not in partition_set]
        self.data_struct = StructType([struct.fields[i] for i in self.data_indexes])
        self.data_schema = pa.schema([self.arrow_schema.field(i) for i in self.data_indexes])
        self.partition_indexes = [struct.fieldNames().index(c) for c in spec.partition_by]
        self.not_null = [f.name for f in struct.fields if not f.nullable]
        self.replace_where: Expr | None = (
            parse_predicate(spec.replace_where) if spec.replace_where else None
        )
        self.task_label = task_label or uuid.uuid4().hex[:8]
        self.open_files: dict[tuple[Any, ...], _OpenFile] = {}
        self.done: list[AddFile] = []

    # -- incoming data ----------------------------------------------------------------------
    def conform(self, batch: pa.RecordBatch | pa.Table) -> pa.Table:
        """Reorder, rename and cast incoming columns to the table schema (nulls for missing)."""
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        names = table.schema.names
        lowered = {n.lower(): n for n in names}
        columns = []
        for index, source in enumerate(self.spec.sources):
            target_field = self.arrow_schema.field(index)
            if source is None:
                columns.append(pa.nulls(table.num_rows, target_field.type))
                continue
            name = source if source in names else lowered.get(source.lower())
            if name is None:
                raise DeltaSchemaMismatchError(
                    f"column `{source}` expected by the write to Delta table "
                    f"{self.spec.table_name or self.spec.table_path} is missing from the data"
                )
            column = table.column(name)
            if not column.type.equals(target_field.type):
                column = column.cast(target_field.type)
            columns.append(column)
        conformed = pa.Table.from_arrays(columns, schema=self.arrow_schema)
        for name in self.not_null:
            if conformed.column(name).null_count:
                raise DeltaSchemaMismatchError(
                    f"NOT NULL constraint violated for column `{name}` of Delta table "
                    f"{self.spec.table_name or self.spec.table_path}"
                )
        if self.replace_where is not None and conformed.num_rows:
            matches = true_mask(self.replace_where, conformed)
            if not pc.all(matches).as_py():
                raise DeltaReplaceWhereError(
                    f"data written to Delta table {self.spec.table_name or self.spec.table_path} "
                    f"does not match replaceWhere {to_sql(self.replace_where)!s}: "
                    f"{conformed.num_rows - pc.sum(matches).as_py()} row(s) fall outside it"
                )
        return conformed

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        table = self.conform(batch)
        if table.num_rows == 0:
            return
        if not self.partition_by:
            self._append((), table)
            return
        for key, part in self._split(table):
            self._append(key, part)

    def write_all(self, batches: Iterable[pa.RecordBatch | pa.Table]) -> list[AddFile]:
        for batch in batches:
            self.write(batch)
        return self.close()

    def _split(self, table: pa.Table) -> Iterable[tuple[tuple[Any, ...], pa.Table]]:
        keys = [table.column(i) for i in self.partition_indexes]
        if len(keys) == 1:
            uniques = pc.unique(keys[0]).to_pylist()
            if len(uniques) == 1:
                yield (uniques[0],), table
                return
            for value in uniques:
                mask = (
                    pc.is_null(keys[0])
                    if value is None
                    else pc.fill_null(pc.equal(keys[0], value), False)
                )
                yield (value,), table.filter(mask)
            return
        distinct = (
            table.select(list(self.partition_by)).group_by(list(self.partition_by)).aggregate([])
        )
        for row in distinct.to_pylist():
            mask = None
            for col in self.partition_by:
                value = row[col]
                column = table.column(col)
                part = (
                    pc.is_null(column)
                    if value is None
                    else pc.fill_null(pc.equal(column, value), False)
                )
                mask = part if mask is None else pc.and_(mask, part)
            yield tuple(row[c] for c in self.partition_by), table.filter(mask)

    def _append(self, key: tuple[Any, ...], table: pa.Table) -> None:
        handle = self.open_files.get(key)
        data = table.select([self.arrow_schema.field(i).name for i in self.data_indexes])
        if handle is None:
            handle = self._open(key)
        for batch in data.to_batches():
            handle.pending.append(batch)
            handle.pending_rows += batch.num_rows
            handle.pending_bytes += batch.nbytes
        if handle.pending_rows >= FLUSH_ROWS or handle.pending_bytes >= FLUSH_BYTES:
            self._flush(handle)

    def _open(self, key: tuple[Any, ...]) -> _OpenFile:
        values = {
            col: format_partition_value(value, self.struct[col].dataType)
            for col, value in zip(self.partition_by, key, strict=True)
        }
        directory = partition_dir(self.partition_by, values)
        suffix = f"c000.{self.spec.compression}.parquet"
        name = f"{self.spec.file_prefix}-{self.task_label}-{uuid.uuid4()}.{suffix}"
        relative = f"{directory}/{name}" if directory else name
        absolute = os.path.join(self.spec.table_path, relative)
        os.makedirs(os.path.dirname(absolute), exist_ok=True)
        writer = pq.ParquetWriter(
            absolute,
            self.data_schema,
            compression=self.spec.compression,
            write_statistics=True,
        )
        handle = _OpenFile(relative=relative, values=values, writer=writer)
        self.open_files[key] = handle
        return handle

    def _flush(self, handle: _OpenFile) -> None:
        if not handle.pending:
            return
        table = pa.Table.from_batches(handle.pending, schema=self.data_schema)
        handle.writer.write_table(table, row_group_size=max(1, table.num_rows))
        handle.rows += table.num_rows
        handle.pending, handle.pending_rows, handle.pending_bytes = [], 0, 0

    def close(self) -> list[AddFile]:
        for handle in self.open_files.values():
            self._flush(handle)
            handle.writer.close()
            absolute = os.path.join(self.spec.table_path, handle.relative)
            try:
                metadata = handle.writer.writer.metadata
            except AttributeError:
                metadata = pq.read_metadata(absolute)
            stat = os.stat(absolute)
            self.done.append(
                AddFile(
                    path=handle.relative,
                    size=stat.st_size,
                    partition_values=handle.values,
                    modification_time=int(stat.st_mtime * 1000),
                    stats=stats_from_metadata(
                        metadata, self.data_struct, self.spec.num_indexed_cols
                    ),
                    num_records=handle.rows,
                )
            )
        self.open_files = {}
        return self.done

    def abort(self) -> None:
        for handle in self.open_files.values():
            try:
                handle.writer.close()
            finally:
                remove_files(self.spec.table_path, [handle.relative])
        self.open_files = {}


def remove_files(table_path: str, relative_paths: Sequence[str]) -> None:
    """Best-effort removal of uncommitted files (the next vacuum catches what is left)."""
    for relative in relative_paths:
        try:
            os.remove(os.path.join(table_path, relative))
        except OSError:
            continue


def add_file_from_parquet(
    table_path: str,
    relative: str,
    partition_values: Mapping[str, str | None],
    data_struct: StructType,
    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
) -> AddFile:
    """An AddFile for a Parquet file already under the table (e.g. written by Spark).

    Statistics come from the file's footer.
    """
    absolute = os.path.join(table_path, relative)
    metadata = pq.read_metadata(absolute)
    stat = os.stat(absolute)
    return AddFile(
        path=relative,
        size=stat.st_size,
        partition_values=dict(partition_values),
        modification_time=int(stat.st_mtime * 1000) or int(time.time() * 1000),
        stats=stats_from_metadata(metadata, data_struct, num_indexed_cols),
        num_records=metadata.num_rows,
    )
