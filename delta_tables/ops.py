"""Append-only operations tables (the run ledger, the quality results history), written by
delta-spark, recordable by any command.

Every command records itself, including those that never start Spark (a refused run, a
validate, a reset). `append_rows` therefore commits through the active SparkSession when there
is one and otherwise parks the rows as one Arrow IPC file in `<table>/_pending/` (Delta readers
ignore `_`-prefixed folders); the next append through Spark commits the parked rows together
with its own and then removes their files, one flush at a time (a lock in `_pending/`). A crash
between that commit and the removal cannot duplicate a row: parked rows whose key the table
already holds are left out of the next commit and of `read_rows`, which returns the table's
rows and the parked ones.

A command of several steps (`runoff run`: bronze, silver, validate) records them inside
`one_commit_per_table()`: each step parks its rows, and the block commits each table's rows in
one append as it ends, instead of one append per step and table.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from core.config import Location
from core.locking import blocking_lock, local_lock_file
from delta_tables.arrow import equals, read_arrow
from delta_tables.writes import is_delta_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

PENDING = "_pending"

# The tables whose rows this thread parks until its `one_commit_per_table` block ends.
_Table = tuple[Location, pa.Schema, tuple[str, ...]]
_held_back: ContextVar[dict[str, _Table] | None] = ContextVar("ops_held_back", default=None)


def _pending_files(path: Location) -> list[Location]:
    folder = path / PENDING
    return sorted(folder.glob("*.arrow"), key=str) if folder.is_dir() else []


def _read_pending(files: Sequence[Location], schema: pa.Schema) -> pa.Table:
    tables = []
    for file in files:
        with file.open("rb") as handle, ipc.open_file(handle) as reader:
            tables.append(reader.read_all().cast(schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def park(path: Location, rows: pa.Table) -> Location:
    """Write rows to `<table>/_pending/` atomically: locally a temp file, fsync, rename; on
    object storage one PUT (atomic by itself)."""
    folder = path / PENDING
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{uuid.uuid4().hex}.arrow"
    if not isinstance(target, Path):
        with target.open("wb") as sink, ipc.new_file(sink, rows.schema) as writer:
            writer.write_table(rows)
        return target
    temp = folder / f".{target.name}.tmp"
    with pa.OSFile(str(temp), "wb") as sink, ipc.new_file(sink, rows.schema) as writer:
        writer.write_table(rows)
    with open(temp, "rb") as handle:
        os.fsync(handle.fileno())
    temp.replace(target)
    return target


def _flush_lock(path: Location) -> AbstractContextManager[None]:
    """One flush of a table's parked rows at a time (two would both commit them)."""
    return blocking_lock(local_lock_file(path / PENDING, ".lock"))


def append_rows(path: Location, rows: pa.Table, key: Sequence[str]) -> None:
    """Append `rows` (unique by `key`) to the table at `path`: see the module doc."""
    from pyspark.sql import SparkSession

    held_back = _held_back.get()
    spark = SparkSession.getActiveSession()
    if spark is None or held_back is not None:
        park(path, rows)
        if held_back is not None:
            held_back.setdefault(str(path), (path, rows.schema, tuple(key)))
        return
    _commit(spark, path, rows, key)


@contextmanager
def one_commit_per_table() -> Iterator[None]:
    """Inside the block, `append_rows` of this thread parks its rows; as the block ends (an
    error too), each table's parked rows are committed in one append through the active
    session. If that fails, or the process dies first, they stay parked (readers see them) for
    the next append to commit."""
    tables: dict[str, _Table] = {}
    token = _held_back.set(tables)
    try:
        yield
    finally:
        _held_back.reset(token)
        _commit_parked(tables.values())


def _commit_parked(tables: Iterable[_Table]) -> None:
    """Commit the parked rows of each table through the active session, if there is one."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        return
    for path, schema, key in tables:
        try:
            _commit(spark, path, schema.empty_table(), key)
        except Exception as exc:  # noqa: BLE001 - the rows stay parked
            logger.warning("parked rows of %s stay parked: %s", path, exc)


def _commit(spark: SparkSession, path: Location, rows: pa.Table, key: Sequence[str]) -> None:
    """Commit the parked rows and `rows` in one append, then remove the parked files."""
    with _flush_lock(path):
        files = _pending_files(path)
        data = pa.concat_tables([_read_pending(files, rows.schema), rows])
        if files and is_delta_table(path):
            held = _read_committed(path, rows.schema, list(key), [])
            data = data.join(held, list(key), join_type="left anti").select(rows.schema.names)
        if data.num_rows:
            frame = spark.createDataFrame(data)
            # Columns added to the schema since the table was created are added to the table.
            writer = frame.write.format("delta").mode("append").option("mergeSchema", "true")
            writer.save(str(path))
        for file in files:
            file.unlink(missing_ok=True)


def read_rows(
    path: Location,
    schema: pa.Schema,
    key: Sequence[str],
    columns: Sequence[str] | None = None,
    equal: Mapping[str, str | bool] | None = None,
) -> pa.Table:
    """The table's rows and the parked ones not committed yet (optionally some columns, rows
    whose columns equal the given values)."""
    equal = dict(equal or {})
    names = list(columns or schema.names)
    # The key columns are read too: parked rows the table already holds are left out by them.
    read = [*names, *(k for k in key if k not in names)]
    where = [equals(column, value) for column, value in equal.items()]
    committed = (
        _read_committed(path, schema, read, where)
        if is_delta_table(path)
        else schema_of(schema, read).empty_table()
    )
    pending = _read_pending(_pending_files(path), schema)
    for column, value in equal.items():
        pending = pending.filter(pc.equal(pending[column], pa.scalar(value)))
    if pending.num_rows and committed.num_rows:
        # A crash between a flush's commit and the removal of its files leaves committed rows
        # parked until the next flush: they are not shown twice.
        pending = pending.join(committed.select(list(key)), list(key), join_type="left anti")
    return pa.concat_tables([committed.select(names), pending.select(names)])


def _read_committed(
    path: Location, schema: pa.Schema, names: Sequence[str], where: Sequence[str]
) -> pa.Table:
    """The table's `names` columns; those the table does not have yet (the schema gained them
    after it was created) are null."""
    from deltalake import DeltaTable

    snapshot = DeltaTable(str(path))
    present = {field.name for field in snapshot.schema().fields}
    have = [n for n in names if n in present]
    data = read_arrow(snapshot, have, where) if have else None
    rows = data.num_rows if data is not None else 0
    columns = [
        (
            data.column(n)
            if data is not None and n in present
            else pa.nulls(rows, schema.field(n).type)
        )
        for n in names
    ]
    return pa.table(dict(zip(names, columns, strict=True))).cast(schema_of(schema, names))


def schema_of(schema: pa.Schema, names: Sequence[str]) -> pa.Schema:
    return pa.schema([schema.field(name) for name in names])
