"""Committing written files to a Delta table: one delta-rs transaction per batch, exactly once.

`commit_write()` is the single commit path of every writer (the Spark sink, the fast path,
replaceWhere rewrites). It
- creates the table on first write (schema, partition columns, properties);
- skips a batch the table already holds: when `app_id`/`txn_version` are given and
  `DeltaTable.transaction_version(app_id) >= txn_version`, nothing is committed and the
  batch's files are deleted again (a replayed micro-batch after a crash is a no-op);
- otherwise commits all AddActions (plus RemoveActions for overwrite / replaceWhere) in ONE
  transaction carrying `Transaction(app_id, txn_version)` and `userMetadata`, letting delta-rs
  retry on conflicting concurrent commits (blind appends of different writers both land);
- checkpoints the table when `checkpoint_interval` commits have passed since the last one.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow.compute as pc
from pyspark.sql.types import StructField, StructType

from delta_tables.errors import DeltaOptionError, DeltaSchemaMismatchError
from delta_tables.files import AddFile, FileWriter, WriteSpec, remove_files
from delta_tables.maintenance import DEFAULT_CHECKPOINT_INTERVAL, checkpoint_if_due
from delta_tables.predicate import Expr, classify, columns_of, parse_predicate, true_mask
from delta_tables.scan import (
    FileReader,
    is_delta_table,
    layout_of,
    local_path,
    snapshot_entries,
)
from delta_tables.schema import format_partition_value, same_type, table_struct
from delta_tables.stats import num_indexed_cols

logger = logging.getLogger(__name__)

MAX_COMMIT_RETRIES = 25
WriteMode = Literal["append", "overwrite"]


@dataclass(frozen=True)
class CommitResult:
    """What one write did to a table."""

    table: str
    version: int | None  # the table version after the commit; None when nothing was committed
    skipped: bool = False  # the app transaction (app_id, txn_version) was already committed
    files_added: int = 0
    files_removed: int = 0
    rows_added: int = 0

    def line(self) -> str:
        if self.skipped:
            return f"{self.table}: batch already committed, skipped"
        return (
            f"{self.table}: version {self.version}, +{self.files_added} files "
            f"({self.rows_added} rows), -{self.files_removed} files"
        )


def read_query_id(checkpoint_location: str) -> str:
    """The streaming query id Spark persisted in `<checkpointLocation>/metadata`."""
    metadata = Path(local_path(checkpoint_location), "metadata")
    try:
        return str(json.loads(metadata.read_text(encoding="utf-8"))["id"])
    except FileNotFoundError:
        raise DeltaOptionError(
            f"option checkpointLocation={checkpoint_location!r}: no {metadata} yet; "
            "Spark writes it "
            "when the streaming query starts"
        ) from None
    except (ValueError, KeyError):
        raise DeltaOptionError(
            f"option checkpointLocation={checkpoint_location!r}: {metadata} holds no query id"
        ) from None


def commit_properties(
    app_id: str | None, txn_version: int | None, user_metadata: str | None
) -> Any:
    from deltalake import CommitProperties, Transaction

    transactions = (
        [Transaction(app_id=app_id, version=int(txn_version))]
        if app_id is not None and txn_version is not None
        else None
    )
    custom = {"userMetadata": user_metadata} if user_metadata else None
    return CommitProperties(
        custom_metadata=custom,
        max_commit_retries=MAX_COMMIT_RETRIES,
        app_transactions=transactions,
    )


def already_committed(dt: Any, app_id: str | None, txn_version: int | None) -> bool:
    if app_id is None or txn_version is None:
        return False
    done = dt.transaction_version(app_id)
    return done is not None and int(done) >= int(txn_version)


def validate_replace_where(text: str, struct: StructType, table_name: str) -> Expr:
    expr = parse_predicate(text, "replaceWhere")
    names = {n.lower() for n in struct.fieldNames()}
    for column in sorted(columns_of(expr)):
        if column.lower() not in names:
            raise DeltaOptionError(
                f"option replaceWhere={text!r} references column `{column}`, which is not in "
                f"Delta table {table_name} [{', '.join(struct.fieldNames())}]"
            )
    return expr


def commit_write(
    table_path: str,
    files: Sequence[AddFile],
    *,
    schema: StructType,
    partition_by: Sequence[str] = (),
    mode: WriteMode = "append",
    replace_where: str | None = None,
    merge_schema: bool = False,
    overwrite_schema: bool = False,
    app_id: str | None = None,
    txn_version: int | None = None,
    user_metadata: str | None = None,
    configuration: Mapping[str, str] | None = None,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
) -> CommitResult:
    """Commit `files` (already written under the table) in one transaction; see the module doc."""
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema
    from deltalake.transaction import create_table_with_add_actions

    root = local_path(table_path)
    props = commit_properties(app_id, txn_version, user_metadata)
    rows = sum(f.num_records for f in files)
    actions = [f.to_action() for f in files]
    if not is_delta_table(root):
        try:
            os.makedirs(root, exist_ok=True)
            create_table_with_add_actions(
                root,
                DeltaSchema.from_json(schema.json()),
                actions,
                mode="append",
                partition_by=list(partition_by) or None,
                configuration=dict(configuration or {}) or None,
                commit_properties=props,
            )
            dt = DeltaTable(root)
            logger.info("created Delta table %s at version %s", root, dt.version())
            checkpoint_if_due(dt, checkpoint_interval)
            return CommitResult(root, dt.version(), False, len(files), 0, rows)
        except Exception:
            if not is_delta_table(root):
                raise
            logger.info("Delta table %s was created concurrently; appending instead", root)
    dt = DeltaTable(root)
    if already_committed(dt, app_id, txn_version):
        logger.info("batch %s of %s already in %s: skipped", txn_version, app_id, root)
        remove_files(root, [f.path for f in files])
        return CommitResult(root, None, skipped=True)
    current = table_struct(dt)
    current_partitions = list(dt.metadata().partition_columns)
    replaces_schema = overwrite_schema and mode == "overwrite" and replace_where is None
    if not replaces_schema:
        if partition_by and list(partition_by) != current_partitions:
            raise DeltaSchemaMismatchError(
                f"partitionBy {list(partition_by)} does not match the partition columns "
                f"{current_partitions} of Delta table {root}; to change them, overwrite with "
                "option overwriteSchema=true"
            )
        dt = _evolve_schema(dt, current, schema, merge_schema, root)
    removed = 0
    if mode == "append":
        if not actions and props.app_transactions is None:
            return CommitResult(root, dt.version(), False, 0, 0, 0)
        dt.create_write_transaction(
            actions,
            mode="append",
            schema=dt.schema(),
            partition_by=current_partitions,
            commit_properties=props,
        )
    elif replace_where is not None:
        expr = validate_replace_where(replace_where, table_struct(dt), root)
        removes, rewritten = _replace_where_actions(dt, expr)
        removed = len(removes)
        dt.create_write_transaction(
            actions + [f.to_action() for f in rewritten] + removes,
            mode="append",
            schema=dt.schema(),
            partition_by=current_partitions,
            commit_properties=props,
        )
        rows += sum(f.num_records for f in rewritten)
        files = [*files, *rewritten]
    elif replaces_schema:
        removed = len(dt.file_uris())
        if list(partition_by) != current_partitions and partition_by is not None:
            create_table_with_add_actions(
                root,
                DeltaSchema.from_json(schema.json()),
                actions,
                mode="overwrite",
                partition_by=list(partition_by) or None,
                commit_properties=props,
            )
        else:
            dt.create_write_transaction(
                actions,
                mode="overwrite",
                schema=DeltaSchema.from_json(schema.json()),
                partition_by=current_partitions,
                commit_properties=props,
            )
    else:
        removed = len(dt.file_uris())
        dt.create_write_transaction(
            actions,
            mode="overwrite",
            schema=dt.schema(),
            partition_by=current_partitions,
            commit_properties=props,
        )
    dt = DeltaTable(root)
    checkpoint_if_due(dt, checkpoint_interval)
    return CommitResult(root, dt.version(), False, len(files), removed, rows)


def _evolve_schema(
    dt: Any, current: StructType, target: StructType, merge_schema: bool, root: str
) -> Any:
    """Add the target's new columns to the table (mergeSchema); fail on anything else."""
    from deltalake import DeltaTable, Field

    by_lower = {f.name.lower(): f for f in current.fields}
    new_fields: list[StructField] = []
    for f in target.fields:
        existing = by_lower.get(f.name.lower())
        if existing is None:
            new_fields.append(f)
        elif not same_type(existing.dataType, f.dataType):
            raise DeltaSchemaMismatchError(
                f"schema mismatch writing to Delta table {root}: column `{existing.name}` is "
                f"{f.dataType.simpleString()} in the data but {existing.dataType.simpleString()} "
                "in the table"
            )
    if not new_fields:
        return dt
    if not merge_schema:
        names = ", ".join(f"`{f.name}`" for f in new_fields)
        raise DeltaSchemaMismatchError(
            f"schema mismatch writing to Delta table {root}: column {names} is not in the table "
            "schema; write with option mergeSchema=true to add it"
        )
    dt.alter.add_columns(
        [Field.from_json(json.dumps(f.jsonValue() | {"nullable": True})) for f in new_fields]
    )
    return DeltaTable(root)


def _replace_where_actions(dt: Any, expr: Expr) -> tuple[list[Any], list[AddFile]]:
    """Remove files wholly inside the predicate; rewrite files partly inside it."""
    from deltalake.transaction import RemoveAction

    layout = layout_of(dt)
    struct = layout.struct
    root = layout.table_path
    now = int(time.time() * 1000)
    removes: list[Any] = []
    rewritten: list[AddFile] = []
    reader: FileReader | None = None
    writer: FileWriter | None = None
    for task, facts in snapshot_entries(dt):
        verdict = classify(expr, facts)
        if verdict == "none":
            continue
        if verdict == "some":
            reader = reader or FileReader(layout)
            if writer is None:
                writer = FileWriter(
                    WriteSpec(
                        table_path=root,
                        schema_json=struct.json(),
                        sources=tuple(struct.fieldNames()),
                        partition_by=layout.partition_columns,
                        num_indexed_cols=num_indexed_cols(dt.metadata().configuration),
                        table_name=root,
                    )
                )
            for batch in reader.read(task):
                keep = pc.invert(true_mask(expr, batch))
                kept = batch.filter(keep)
                if kept.num_rows:
                    writer.write(kept)
        # `root` may end with a separator (delta-rs table URIs do): a remove must name the
        # file exactly as its add did (relative), or the file stays in the snapshot.
        prefix = root.rstrip(os.sep) + os.sep
        relative = os.path.relpath(task.path, root) if task.path.startswith(prefix) else task.path
        removes.append(
            RemoveAction(
                path=relative,
                data_change=True,
                deletion_timestamp=now,
                size=task.size,
                partition_values={
                    col: format_partition_value(
                        task.partition_values.get(col), struct[col].dataType
                    )
                    for col in layout.partition_columns
                },
            )
        )
    if writer is not None:
        rewritten = writer.close()
    return removes, rewritten
