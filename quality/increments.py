"""What a run changed in a Delta table, read with delta-rs (no Spark).

Input: a Delta table path and the last version validated successfully (with the table's id, so
that a table recreated by `reset` is recognised). Output: an `Increment` naming the version range
(last, current] and the data files of the current snapshot that were not in the snapshot of the
last validated version, plus readers for those rows and for rows of older files that share a key
with them.

Why files and not commits: data files are immutable, so a row that is in the table now and was not
at version `last` must live in a file the `last` snapshot did not have. Diffing the two snapshots'
file lists is therefore complete for appends, MERGE rewrites (copy-on-write: the rewritten file
holds the changed rows) and `replaceWhere` backfills, and it ignores files that were added and
removed again in the range. Compaction (OPTIMIZE) rewrites rows that did not change; a range made
only of maintenance commits is reported as "no data change", a mixed range re-validates the
compacted rows too (a superset: correct, only slower).

Files are read with pyarrow from the log's add actions (partition values filled in), so a small
increment costs little however many files the table has. Tables with deletion vectors or column
mapping are read whole through delta-rs' DataFusion `QueryBuilder` (which honours them), so they
are always validated in full. Only local tables are supported (the runoff home).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from core.config import Location, as_location
from delta_tables.arrow import read_arrow

logger = logging.getLogger(__name__)

# Commits that rearrange or describe data without adding rows (Delta operation names).
MAINTENANCE_OPERATIONS = frozenset(
    {
        "OPTIMIZE",
        "VACUUM START",
        "VACUUM END",
        "SET TBLPROPERTIES",
        "UNSET TBLPROPERTIES",
        "UPGRADE PROTOCOL",
        "ADD CONSTRAINT",
        "DROP CONSTRAINT",
        "ADD FEATURE",
        "FSCK",
        "CHECKPOINT",
    }
)
# Commits that create a table without data.
CREATE_OPERATIONS = frozenset({"CREATE TABLE", "CREATE OR REPLACE TABLE"})
# Reader features that need delta-rs' own reader (DataFusion) instead of file-by-file reads.
DATAFUSION_READER_FEATURES = frozenset({"deletionVectors", "columnMapping"})


@dataclass(frozen=True)
class Watermark:
    """The last version of a table that was validated successfully."""

    version: int
    table_id: str


@dataclass(frozen=True)
class Increment:
    """The part of a table one validation looks at.

    `start_version` is exclusive and None when the whole table is validated; `new_files` are the
    data files (relative paths, as the pyarrow dataset names them) holding the changed rows, None
    for the whole table. `data_changed` is False when every commit of the range was maintenance.
    """

    path: Location
    table_id: str
    start_version: int | None
    end_version: int
    reason: str
    new_files: frozenset[str] | None
    operations: tuple[str, ...] | None = None
    data_changed: bool = True

    @property
    def full(self) -> bool:
        return self.start_version is None

    @property
    def had_writes(self) -> bool:
        """A run wrote to the table in these versions (unknown history counts as written)."""
        if self.operations is None:
            return True
        return any(op not in MAINTENANCE_OPERATIONS | CREATE_OPERATIONS for op in self.operations)

    @property
    def version_range(self) -> str:
        """`(3, 7]` for an increment, `[0, 7]` for a whole table."""
        if self.start_version is None:
            return f"[0, {self.end_version}]"
        return f"({self.start_version}, {self.end_version}]"


def table_exists(path: Location) -> bool:
    return DeltaTable.is_deltatable(str(path))


def open_table(path: Location) -> DeltaTable:
    return DeltaTable(str(path))


def table_id(table: DeltaTable) -> str:
    return str(table.metadata().id)


def needs_datafusion(table: DeltaTable) -> str | None:
    """Why the table's files cannot be read one by one (deletion vectors, column mapping)."""
    features = set(table.protocol().reader_features or ()) & DATAFUSION_READER_FEATURES
    mapping = table.metadata().configuration.get("delta.columnMapping.mode") or "none"
    if features:
        return f"reader features {', '.join(sorted(features))}"
    if mapping != "none":
        return f"column mapping mode {mapping}"
    return None


def _files(table: DeltaTable) -> frozenset[str]:
    """The snapshot's data files, as the log names them (relative, URL-encoded)."""
    actions = pa.table(table.get_add_actions(flatten=False))
    return frozenset(actions.column("path").to_pylist())


def plan_increment(
    path: Location, table: DeltaTable, last: Watermark | None, full: bool = False
) -> Increment | None:
    """The rows to validate in `table`, or None when it has no version after `last`."""
    current = table.version()
    current_id = table_id(table)

    def whole(reason: str) -> Increment:
        return Increment(
            path, current_id, None, current, reason, None, _operations(_commits(table, -1, current))
        )

    if full:
        return whole("--full")
    if last is None:
        return whole("first validation")
    if last.table_id != current_id:
        return whole("table was recreated since the last validation")
    if last.version > current:
        return whole(f"table is at version {current}, behind the validated version {last.version}")
    if last.version == current:
        return None
    commits = _commits(table, last.version, current)
    operations = _operations(commits)
    if operations is not None and all(op in MAINTENANCE_OPERATIONS for op in operations):
        return Increment(
            path,
            current_id,
            last.version,
            current,
            "maintenance only",
            frozenset(),
            operations,
            data_changed=False,
        )
    reason = needs_datafusion(table)
    if reason is not None:
        return whole(f"{reason}: the whole table is read")
    try:
        then_files = _files(DeltaTable(str(path), version=last.version))
    except DeltaError as exc:
        logger.info("%s: version %s is not readable (%s)", path, last.version, exc)
        return whole(f"version {last.version} is no longer readable")
    return Increment(
        path,
        current_id,
        last.version,
        current,
        "new files since the last validation",
        _files(table) - _old_rows(path, commits or [], then_files),
        operations,
    )


def _only_removes_rows(commit: dict[str, Any]) -> bool:
    """A commit that can only have taken rows away: a DELETE, or a MERGE that inserted and
    updated none (`runoff quarantine replay`'s); a file it adds holds rows of files it removed."""
    operation = commit.get("operation")
    metrics = commit.get("operationMetrics") or {}
    if operation == "DELETE":
        return True
    if operation != "MERGE":
        return False
    changed = ("numTargetRowsInserted", "numTargetRowsUpdated")
    return all(key in metrics and int(metrics[key]) == 0 for key in changed)


def _old_rows(
    path: Location, commits: list[dict[str, Any]], then_files: frozenset[str]
) -> frozenset[str]:
    """The files of the current snapshot whose rows were all in the last validated snapshot:
    its files (`then_files`), and the files that the `commits` since (`_commits`) taking rows
    away wrote from them (a DELETE rewrites the other rows of each file it touches; they were
    validated already)."""
    old = set(then_files)
    for commit in sorted(commits, key=lambda c: int(c["version"])):
        if not _only_removes_rows(commit):
            continue
        version = int(commit["version"])
        before = _files(DeltaTable(str(path), version=version - 1))
        now = _files(DeltaTable(str(path), version=version))
        if before - now <= old:
            old |= now - before
    return frozenset(old)


def _commits(table: DeltaTable, after: int, upto: int) -> list[dict[str, Any]] | None:
    """The commit infos of versions (after, upto], newest first; None when the log no longer
    has them all."""
    try:
        commits = table.history(limit=upto - after)
    except DeltaError:
        return None
    versions = {int(c["version"]) for c in commits if "version" in c}
    if versions != set(range(after + 1, upto + 1)):
        return None
    return commits


def _operations(commits: list[dict[str, Any]] | None) -> tuple[str, ...] | None:
    """The operation names of `_commits`' commits (None when it had none)."""
    if commits is None:
        return None
    return tuple(str(c.get("operation", "")) for c in commits)


def _dataset(
    path: Location, table: DeltaTable, keep: Callable[[dict[str, Any]], bool] | None = None
) -> ds.FileSystemDataset:
    """A pyarrow dataset over the snapshot's files for which `keep(add action)` holds.

    Built from the log's add actions (path, partition values, statistics) so that only the
    kept files cost anything: `DeltaTable.to_pyarrow_dataset()` prepares every file of the table.
    Partition columns are filled from each file's partition values.
    """
    schema = pa.schema(table.schema().to_arrow())
    partition_columns = list(table.metadata().partition_columns)
    parquet = ds.ParquetFileFormat()
    if isinstance(path, Path):
        filesystem: pafs.FileSystem = pafs.LocalFileSystem()
        root = str(path)
    else:  # object storage: the same fsspec filesystem as the path's
        filesystem = pafs.PyFileSystem(pafs.FSSpecHandler(path.fs))
        root = path.path.rstrip("/")
    fragments = []
    for action in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        if keep is not None and not keep(action):
            continue
        expression = ds.scalar(True)
        for column in partition_columns:
            value = action.get(f"partition.{column}")
            expression &= (
                ds.field(column).is_null()
                if value is None
                else ds.field(column) == pa.scalar(value, schema.field(column).type)
            )
        fragments.append(
            parquet.make_fragment(
                f"{root}/{unquote(action['path'])}",
                filesystem=filesystem,
                partition_expression=expression,
            )
        )
    return ds.FileSystemDataset(fragments, schema, parquet, filesystem)


def read_rows(
    table: DeltaTable, increment: Increment, columns: Sequence[str] | None = None
) -> pa.Table:
    """The changed rows of `increment` (the whole table for a full increment)."""
    if increment.new_files is None:
        return read_table(table, columns, path=increment.path)
    new_files = increment.new_files
    dataset = _dataset(increment.path, table, lambda action: action["path"] in new_files)
    return dataset.to_table(columns=list(columns) if columns is not None else None)


def count_rows(table: DeltaTable, increment: Increment) -> int:
    """How many rows the increment's files hold, from the log's statistics (a file without a
    row count is counted from its Parquet footer); the whole table is counted exactly."""
    from delta_tables.arrow import count_rows as count_table

    if increment.new_files is None or needs_datafusion(table) is not None:
        return count_table(table)
    new_files = increment.new_files
    total, unknown = 0, set()
    for action in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        if action["path"] not in new_files:
            continue
        if action.get("num_records") is None:
            unknown.add(action["path"])
        else:
            total += int(action["num_records"])
    if unknown:
        total += _dataset(increment.path, table, lambda a: a["path"] in unknown).count_rows()
    return total


def read_table(
    table: DeltaTable, columns: Sequence[str] | None = None, path: Location | None = None
) -> pa.Table:
    """The current snapshot (optionally only some columns)."""
    cols = list(columns) if columns is not None else None
    if needs_datafusion(table) is not None:
        return read_arrow(table, cols)
    uri = urlparse(table.table_uri)
    root = path or as_location(unquote(uri.path) if uri.scheme == "file" else table.table_uri)
    return _dataset(root, table).to_table(columns=cols)


def _overlaps(action: dict[str, Any], bounds: dict[str, tuple[Any, Any]]) -> bool:
    """False only when the file's statistics prove no key column can match."""
    for column, (low, high) in bounds.items():
        file_min, file_max = action.get(f"min.{column}"), action.get(f"max.{column}")
        if file_min is None or file_max is None:
            continue  # no statistics (or a partition column): cannot rule the file out
        if file_max < low or file_min > high:
            return False
    return True


def _is_text(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_string_view(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_binary_view(kind)
    )


def rows_sharing_keys(
    table: DeltaTable, increment: Increment, changed: pa.Table, keys: Sequence[str]
) -> pa.Table:
    """Rows of the files outside the increment whose key appears among `changed` rows.

    A duplicate key may have one copy in an old file and one in a new file; with these rows beside
    the changed ones a uniqueness check sees every copy of every key the run touched. Old files
    are ruled out by the min/max statistics of the non-text key columns before the exact semi-join.
    """
    empty = changed.schema.empty_table()
    if increment.new_files is None or changed.num_rows == 0:
        return empty
    key_rows = changed.select(list(keys)).drop_null()
    if key_rows.num_rows == 0:
        return empty
    key_rows = key_rows.group_by(list(keys)).aggregate([])
    # String statistics may be truncated prefixes (Delta allows it): prune on the others only.
    bounds = {
        key: (pc.min(key_rows.column(key)).as_py(), pc.max(key_rows.column(key)).as_py())
        for key in keys
        if not _is_text(key_rows.schema.field(key).type)
    }
    new_files = increment.new_files
    dataset = _dataset(
        increment.path,
        table,
        lambda action: action["path"] not in new_files and _overlaps(action, bounds),
    )
    if not dataset.files:
        return empty
    candidates = dataset.to_table()
    if candidates.num_rows == 0:
        return empty
    matched = candidates.join(key_rows, keys=list(keys), join_type="left semi")
    return matched.select(changed.column_names).cast(changed.schema)
