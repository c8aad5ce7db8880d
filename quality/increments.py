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

Tables with reader features the pyarrow dataset reader refuses (deletion vectors, column mapping)
are read whole through delta-rs' DataFusion `QueryBuilder`, so they are always validated in full.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import DeltaError, DeltaProtocolError

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

    path: Path
    table_id: str
    start_version: int | None
    end_version: int
    reason: str
    new_files: frozenset[str] | None
    operations: tuple[str, ...] = ()
    data_changed: bool = True

    @property
    def full(self) -> bool:
        return self.start_version is None

    @property
    def version_range(self) -> str:
        """`(3, 7]` for an increment, `[0, 7]` for a whole table."""
        if self.start_version is None:
            return f"[0, {self.end_version}]"
        return f"({self.start_version}, {self.end_version}]"


def table_exists(path: Path) -> bool:
    return DeltaTable.is_deltatable(str(path))


def open_table(path: Path) -> DeltaTable:
    return DeltaTable(str(path))


def table_id(table: DeltaTable) -> str:
    return str(table.metadata().id)


def _snapshot_files(table: DeltaTable) -> frozenset[str] | None:
    """Paths of the snapshot's data files; None when pyarrow cannot read the table."""
    dataset = _pyarrow_dataset(table)
    if dataset is None:
        return None
    return frozenset(fragment.path for fragment in dataset.get_fragments())


def _pyarrow_dataset(table: DeltaTable) -> ds.FileSystemDataset | None:
    try:
        dataset = table.to_pyarrow_dataset()
    except DeltaProtocolError as exc:
        logger.info("%s: %s; reading it through DataFusion", table.table_uri, exc)
        return None
    assert isinstance(dataset, ds.FileSystemDataset)
    return dataset


def plan_increment(
    path: Path, table: DeltaTable, last: Watermark | None, full: bool = False
) -> Increment | None:
    """The rows to validate in `table`, or None when it has no version after `last`."""
    current = table.version()
    current_id = table_id(table)

    def whole(reason: str) -> Increment:
        return Increment(path, current_id, None, current, reason, None)

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
    operations = _operations(table, last.version, current)
    if operations is not None and all(op in MAINTENANCE_OPERATIONS for op in operations):
        return Increment(
            path, current_id, last.version, current, "maintenance only", frozenset(), operations,
            data_changed=False,
        )
    now_files = _snapshot_files(table)
    if now_files is None:
        return whole("the table's reader features need a full read")
    try:
        then_files = _snapshot_files(DeltaTable(str(path), version=last.version))
    except DeltaError as exc:
        logger.info("%s: version %s is not readable (%s)", path, last.version, exc)
        return whole(f"version {last.version} is no longer readable")
    if then_files is None:
        return whole("the table's reader features need a full read")
    return Increment(
        path,
        current_id,
        last.version,
        current,
        "new files since the last validation",
        now_files - then_files,
        operations or (),
    )


def _operations(table: DeltaTable, after: int, upto: int) -> tuple[str, ...] | None:
    """Operation names of the commits (after, upto]; None when the log no longer has them all."""
    try:
        commits = table.history(limit=upto - after)
    except DeltaError:
        return None
    versions = {int(c["version"]) for c in commits if "version" in c}
    if versions != set(range(after + 1, upto + 1)):
        return None
    return tuple(str(c.get("operation", "")) for c in commits)


def _plain_types(data: pa.Table) -> pa.Table:
    """DataFusion returns string_view/binary_view; pandas and GX want plain string/binary."""
    fields = []
    for field in data.schema:
        if pa.types.is_string_view(field.type):
            field = field.with_type(pa.string())
        elif pa.types.is_binary_view(field.type):
            field = field.with_type(pa.binary())
        fields.append(field)
    return data.cast(pa.schema(fields))


def _read_all(table: DeltaTable, columns: Sequence[str] | None) -> pa.Table:
    """The whole snapshot through DataFusion (honours deletion vectors and column mapping)."""
    select = ", ".join(f'"{c}"' for c in columns) if columns else "*"
    reader = QueryBuilder().register("t", table).execute(f"select {select} from t")
    return _plain_types(pa.table(reader.read_all()))


def _subset(dataset: ds.FileSystemDataset, keep: frozenset[str]) -> ds.FileSystemDataset:
    fragments = [f for f in dataset.get_fragments() if f.path in keep]
    return ds.FileSystemDataset(
        fragments, dataset.schema, dataset.format, filesystem=dataset.filesystem
    )


def read_rows(
    table: DeltaTable, increment: Increment, columns: Sequence[str] | None = None
) -> pa.Table:
    """The changed rows of `increment` (the whole table for a full increment)."""
    cols = list(columns) if columns is not None else None
    dataset = _pyarrow_dataset(table)
    if dataset is None:
        return _read_all(table, cols)
    if increment.new_files is not None:
        dataset = _subset(dataset, increment.new_files)
    return dataset.to_table(columns=cols)


def read_table(table: DeltaTable, columns: Sequence[str] | None = None) -> pa.Table:
    """The current snapshot (optionally only some columns)."""
    cols = list(columns) if columns is not None else None
    dataset = _pyarrow_dataset(table)
    if dataset is None:
        return _read_all(table, cols)
    return dataset.to_table(columns=cols)


def rows_sharing_keys(
    table: DeltaTable, increment: Increment, changed: pa.Table, keys: Sequence[str]
) -> pa.Table:
    """Rows of the files outside the increment whose key appears among `changed` rows.

    A duplicate key may have one copy in an old file and one in a new file; with these rows beside
    the changed ones a uniqueness check sees every copy of every key the run touched. Files are
    pruned by each key column's min/max statistics before the exact semi-join.
    """
    if increment.new_files is None or changed.num_rows == 0:
        return changed.schema.empty_table()
    dataset = _pyarrow_dataset(table)
    if dataset is None:  # never happens for an increment: those need a pyarrow-readable table
        return changed.schema.empty_table()
    old_files = frozenset(f.path for f in dataset.get_fragments()) - increment.new_files
    if not old_files:
        return changed.schema.empty_table()
    key_rows = changed.select(list(keys)).drop_null()
    if key_rows.num_rows == 0:
        return changed.schema.empty_table()
    key_rows = key_rows.group_by(list(keys)).aggregate([])
    bounds = None
    for key in keys:
        column = key_rows.column(key)
        low, high = pc.min(column), pc.max(column)
        term = (ds.field(key) >= low) & (ds.field(key) <= high)
        bounds = term if bounds is None else bounds & term
    candidates = _subset(dataset, old_files).to_table(filter=bounds)
    if candidates.num_rows == 0:
        return changed.schema.empty_table()
    matched = candidates.join(key_rows, keys=list(keys), join_type="left semi")
    return matched.select(changed.column_names).cast(changed.schema)
