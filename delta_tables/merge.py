"""MERGE (upsert) of a micro-batch into a Delta table by key columns, exactly once.

Silver jobs aggregate each micro-batch into one row per window and key, then call
`merge_into(batch, path, keys=..., app_id=<query id>, version=<batch id>)` from `foreachBatch`:
rows whose keys exist are updated (all columns), the others inserted. Keys match null-safely
(`IS NOT DISTINCT FROM`), so a null key updates its row instead of duplicating it.

The commit carries `Transaction(app_id, version)`; a replayed batch (the table already holds
that version for the app id) changes nothing. A missing table is created by the first call
(schema from the batch, optional `partition_by`). Runs on the driver with delta-rs'
`DeltaTable.merge` on the batch's Arrow data: micro-batches of aggregates are small.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from delta_tables.commit import already_committed, commit_properties
from delta_tables.errors import DeltaOptionError, DeltaSchemaMismatchError
from delta_tables.maintenance import DEFAULT_CHECKPOINT_INTERVAL, checkpoint_if_due
from delta_tables.scan import is_delta_table, local_path
from delta_tables.schema import same_type, table_struct

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MergeResult:
    """What one MERGE did."""

    table: str
    version: int | None
    skipped: bool = False
    created: bool = False
    source_rows: int = 0
    rows_inserted: int = 0
    rows_updated: int = 0

    def line(self) -> str:
        if self.skipped:
            return f"{self.table}: batch already merged, skipped"
        verb = "created with" if self.created else "merged"
        return (
            f"{self.table}: {verb} {self.source_rows} rows (version {self.version}): "
            f"{self.rows_inserted} inserted, {self.rows_updated} updated"
        )


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def to_arrow(source: DataFrame | pa.Table | pa.RecordBatch) -> pa.Table:
    """The batch as an Arrow table with time zones delta-rs accepts (`UTC`, not `Etc/UTC`)."""
    if isinstance(source, pa.Table):
        table = source
    elif isinstance(source, pa.RecordBatch):
        table = pa.Table.from_batches([source])
    else:
        table = source.toArrow()
    fields = []
    changed = False
    for f in table.schema:
        arrow_type = f.type
        if pa.types.is_timestamp(arrow_type) and arrow_type.tz not in (None, "UTC"):
            arrow_type = pa.timestamp("us", tz="UTC")
            changed = True
        elif pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
            arrow_type = pa.string()
            changed = True
        fields.append(pa.field(f.name, arrow_type, f.nullable))
    return table.cast(pa.schema(fields)) if changed else table


def _check_schema(
    table: pa.Table, current: Any, keys: Sequence[str], path: str, merge_schema: bool
) -> None:
    from pyspark.sql.pandas.types import from_arrow_type

    by_lower = {f.name.lower(): f for f in current.fields}
    for f in table.schema:
        existing = by_lower.get(f.name.lower())
        if existing is None:
            if merge_schema:
                continue
            raise DeltaSchemaMismatchError(
                f"MERGE into Delta table {path}: column `{f.name}` of the batch is not in the "
                f"table schema [{', '.join(current.fieldNames())}]; pass merge_schema=True "
                "to add it"
            )
        batch_type = from_arrow_type(f.type)
        if not same_type(batch_type, existing.dataType):
            raise DeltaSchemaMismatchError(
                f"MERGE into Delta table {path}: column `{existing.name}` is "
                f"{batch_type.simpleString()} in the batch but "
                f"{existing.dataType.simpleString()} in the table"
            )
    missing = [k for k in keys if k.lower() not in by_lower]
    if missing:
        raise DeltaOptionError(
            f"MERGE into Delta table {path}: key column(s) {missing} are not in the table "
            f"[{', '.join(current.fieldNames())}]"
        )


def merge_into(
    source: DataFrame | pa.Table | pa.RecordBatch,
    path: str | os.PathLike[str],
    keys: Sequence[str],
    *,
    app_id: str | None = None,
    version: int | None = None,
    partition_by: Sequence[str] | None = None,
    merge_schema: bool = False,
    user_metadata: str | None = None,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
) -> MergeResult:
    """Upsert `source` into the Delta table at `path` on `keys` (update all / insert all)."""
    from deltalake import DeltaTable, write_deltalake

    if not keys:
        raise DeltaOptionError("merge_into needs at least one key column")
    if (app_id is None) != (version is None):
        raise DeltaOptionError("app_id and version must be given together")
    root = local_path(str(path))
    table = to_arrow(source)
    names = {n.lower() for n in table.column_names}
    missing = [k for k in keys if k.lower() not in names]
    if missing:
        raise DeltaOptionError(
            f"MERGE into Delta table {root}: key column(s) {missing} are not in the batch "
            f"[{', '.join(table.column_names)}]"
        )
    props = commit_properties(app_id, version, user_metadata)
    if not is_delta_table(root):
        try:
            os.makedirs(root, exist_ok=True)
            write_deltalake(
                root,
                table,
                mode="append",
                partition_by=list(partition_by) if partition_by else None,
                commit_properties=props,
            )
            dt = DeltaTable(root)
            logger.info("created Delta table %s by MERGE of %s rows", root, table.num_rows)
            return MergeResult(root, dt.version(), False, True, table.num_rows, table.num_rows, 0)
        except Exception:
            if not is_delta_table(root):
                raise
    dt = DeltaTable(root)
    if already_committed(dt, app_id, version):
        logger.info("%s: batch %s of %s already merged, skipped", root, version, app_id)
        return MergeResult(root, None, skipped=True)
    current = table_struct(dt)
    _check_schema(table, current, keys, root, merge_schema)
    if table.num_rows == 0 and props.app_transactions is None:
        return MergeResult(root, dt.version())
    predicate = " AND ".join(f"(t.{_quote(k)} IS NOT DISTINCT FROM s.{_quote(k)})" for k in keys)
    metrics = (
        dt.merge(
            table,
            predicate,
            source_alias="s",
            target_alias="t",
            merge_schema=merge_schema,
            commit_properties=props,
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    dt = DeltaTable(root)
    checkpoint_if_due(dt, checkpoint_interval)
    return MergeResult(
        root,
        dt.version(),
        False,
        False,
        int(metrics.get("num_source_rows", table.num_rows)),
        int(metrics.get("num_target_rows_inserted", 0)),
        int(metrics.get("num_target_rows_updated", 0)),
    )
