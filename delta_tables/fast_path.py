"""The fast write path: Spark's native Parquet writer writes the files, delta-rs commits them.

`write_batch(df, path, ...)` is what jobs call inside `foreachBatch` (and for batch writes such
as backfills): Spark writes the batch's Parquet files with its JVM writer into a staging
directory of the table, the files are moved into their `col=value/` partition directories,
their Delta statistics are read from the Parquet footers, and `delta_tables.commit` commits them
in ONE transaction, guarded by `Transaction(app_id, version)` (a replayed batch commits nothing
and is not even computed). It avoids moving every row through Arrow into Python workers, which
is what the `format("delta")` sink must do.

`foreach_batch_writer()` builds the foreachBatch function (app id = the streaming query id read
from the checkpoint), and `write_stream()` starts a streaming write to Delta either way,
rejecting output mode "update" with a pointer to `merge_into` (MERGE).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

from pyspark.sql.types import StructType

from delta_tables.commit import (
    CommitResult,
    already_committed,
    commit_write,
    read_query_id,
    validate_replace_where,
)
from delta_tables.errors import DeltaOptionError
from delta_tables.files import AddFile, add_file_from_parquet
from delta_tables.maintenance import DEFAULT_CHECKPOINT_INTERVAL
from delta_tables.predicate import to_sql
from delta_tables.scan import is_delta_table, local_path, open_table
from delta_tables.schema import (
    HIVE_NULL,
    align_write_schema,
    resolve_partitioning,
    table_struct,
    unescape_path_name,
)
from delta_tables.stats import DEFAULT_NUM_INDEXED_COLS, num_indexed_cols

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

logger = logging.getLogger(__name__)

TIMESTAMP_TYPE_KEY = "spark.sql.parquet.outputTimestampType"


@contextmanager
def _micros_timestamps(spark: SparkSession) -> Iterator[None]:
    """Parquet timestamps as INT64 micros (with min/max statistics), not legacy INT96."""
    old = spark.conf.get(TIMESTAMP_TYPE_KEY, None)
    if old != "TIMESTAMP_MICROS":
        spark.conf.set(TIMESTAMP_TYPE_KEY, "TIMESTAMP_MICROS")
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(TIMESTAMP_TYPE_KEY)
        elif old != "TIMESTAMP_MICROS":
            spark.conf.set(TIMESTAMP_TYPE_KEY, old)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def write_batch(
    df: DataFrame,
    path: str | os.PathLike[str],
    *,
    mode: Literal["append", "overwrite"] = "append",
    partition_by: Sequence[str] | None = None,
    app_id: str | None = None,
    version: int | None = None,
    replace_where: str | None = None,
    merge_schema: bool = False,
    overwrite_schema: bool = False,
    user_metadata: str | None = None,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
) -> CommitResult:
    """Write `df` to the Delta table at `path` in one commit (creating the table if needed).

    `app_id`/`version` make the write idempotent: if the table already holds that app
    transaction, nothing is computed or committed (`CommitResult.skipped`). Inside
    `foreachBatch` pass the query id and the batch id (see `foreach_batch_writer`).
    `replace_where` (with mode overwrite) atomically replaces the rows matching the predicate
    and fails if a written row falls outside it.
    """
    from pyspark.sql import functions as F

    if mode not in ("append", "overwrite"):
        raise DeltaOptionError(f"mode={mode!r} is not supported: use 'append' or 'overwrite'")
    if (app_id is None) != (version is None):
        raise DeltaOptionError("app_id and version must be given together")
    if replace_where and mode != "overwrite":
        raise DeltaOptionError(f"replace_where={replace_where!r} needs mode='overwrite'")
    if overwrite_schema and mode != "overwrite":
        raise DeltaOptionError("overwrite_schema=True needs mode='overwrite'")
    if overwrite_schema and replace_where:
        raise DeltaOptionError("replace_where and overwrite_schema=True cannot be combined")
    root = local_path(str(path))
    dt = open_table(root) if is_delta_table(root) else None
    if dt is not None and already_committed(dt, app_id, version):
        logger.info("%s: batch %s of %s already committed, skipped", root, version, app_id)
        return CommitResult(root, None, skipped=True)
    current = table_struct(dt) if dt is not None else None
    replaces_schema = overwrite_schema and mode == "overwrite"
    layout = align_write_schema(
        current,
        df.schema,
        table_name=root,
        merge_schema=merge_schema,
        overwrite_schema=replaces_schema,
    )
    existing = list(dt.metadata().partition_columns) if dt is not None else None
    partitions = resolve_partitioning(
        partition_by, existing, layout.target, replaces_schema=replaces_schema, table_name=root
    )
    columns = [
        F.col(_quote(source)).alias(f.name)
        if source is not None
        else F.lit(None).cast(f.dataType).alias(f.name)
        for f, source in zip(layout.target.fields, layout.sources, strict=True)
    ]
    out = df.select(*columns)
    if replace_where:
        expr = validate_replace_where(replace_where, layout.target, root)
        message = f"data written to Delta table {root} does not match replaceWhere {to_sql(expr)}"
        out = out.where(
            F.when(F.coalesce(F.expr(to_sql(expr)), F.lit(False)), F.lit(True)).otherwise(
                F.raise_error(F.lit(message))
            )
        )
    configuration = dict(dt.metadata().configuration) if dt is not None else {}
    data_struct = StructType([f for f in layout.target.fields if f.name not in set(partitions)])
    files = _write_parquet(
        out, root, partitions, data_struct, num_indexed_cols(configuration) if dt else None
    )
    result = commit_write(
        root,
        files,
        schema=layout.target,
        partition_by=partitions,
        mode=mode,
        replace_where=replace_where,
        merge_schema=merge_schema,
        overwrite_schema=overwrite_schema,
        app_id=app_id,
        txn_version=version,
        user_metadata=user_metadata,
        checkpoint_interval=checkpoint_interval,
    )
    logger.info("write_batch: %s", result.line())
    return result


def _write_parquet(
    df: DataFrame,
    root: str,
    partitions: Sequence[str],
    data_struct: StructType,
    indexed_cols: int | None,
) -> list[AddFile]:
    """Spark writes the files into a staging directory; move them into the table, read stats."""
    staging_name = f"staging-{uuid.uuid4().hex}"
    staging = os.path.join(root, staging_name)
    os.makedirs(root, exist_ok=True)
    writer = df.write.mode("errorifexists").option(
        "mapreduce.fileoutputcommitter.marksuccessfuljobs", "false"
    )
    if partitions:
        writer = writer.partitionBy(*partitions)
    try:
        with _micros_timestamps(df.sparkSession):
            writer.parquet(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    moved: list[tuple[str, dict[str, str | None]]] = []
    try:
        for directory, dirnames, filenames in os.walk(staging):
            dirnames[:] = [d for d in dirnames if not d.startswith(("_", "."))]
            relative_dir = os.path.relpath(directory, staging)
            values = _partition_values(relative_dir, partitions)
            for name in filenames:
                if not name.endswith(".parquet") or name.startswith(("_", ".")):
                    continue
                relative = name if relative_dir == "." else f"{relative_dir}/{name}"
                target = os.path.join(root, relative)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.replace(os.path.join(staging, relative), target)
                moved.append((relative, values))
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    def describe(item: tuple[str, dict[str, str | None]]) -> AddFile:
        return add_file_from_parquet(
            root, item[0], item[1], data_struct, indexed_cols or DEFAULT_NUM_INDEXED_COLS
        )

    with ThreadPoolExecutor(max_workers=min(16, max(1, len(moved)))) as pool:
        files = list(pool.map(describe, moved))
    kept = [f for f in files if f.num_records > 0]
    for empty in (f for f in files if f.num_records == 0):
        os.remove(os.path.join(root, empty.path))
    return kept


def _partition_values(relative_dir: str, partitions: Sequence[str]) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    if relative_dir == ".":
        return values
    for part in relative_dir.split(os.sep):
        key, _, raw = part.partition("=")
        value = unescape_path_name(raw)
        values[unescape_path_name(key)] = None if value == HIVE_NULL else value
    missing = [p for p in partitions if p not in values]
    if missing:
        raise DeltaOptionError(f"Spark wrote {relative_dir!r} without partition columns {missing}")
    return values


def foreach_batch_writer(
    path: str | os.PathLike[str],
    checkpoint_location: str | os.PathLike[str],
    *,
    mode: Literal["append", "overwrite"] = "append",
    partition_by: Sequence[str] | None = None,
    merge_schema: bool = False,
    user_metadata: str | None = None,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
    on_commit: Callable[[int, CommitResult], None] | None = None,
) -> Callable[[DataFrame, int], None]:
    """A `foreachBatch` function writing each micro-batch exactly once with `write_batch`.

    The app id is the streaming query id Spark keeps in `<checkpoint_location>/metadata`, the
    version the batch id, so a batch replayed after a crash commits nothing.
    """

    def write(df: DataFrame, batch_id: int) -> None:
        app_id = read_query_id(str(checkpoint_location))
        result = write_batch(
            df,
            path,
            mode=mode,
            partition_by=partition_by,
            app_id=app_id,
            version=batch_id,
            merge_schema=merge_schema,
            user_metadata=user_metadata,
            checkpoint_interval=checkpoint_interval,
        )
        if on_commit is not None:
            on_commit(batch_id, result)

    return write


def write_stream(
    df: DataFrame,
    path: str | os.PathLike[str],
    *,
    checkpoint_location: str | os.PathLike[str],
    output_mode: str = "append",
    partition_by: Sequence[str] = (),
    trigger: str = "availableNow",
    query_name: str | None = None,
    fast_path: bool = True,
    merge_schema: bool = False,
    user_metadata: str | None = None,
    on_commit: Callable[[int, CommitResult], None] | None = None,
) -> StreamingQuery:
    """Start a streaming write of `df` into the Delta table at `path`.

    `output_mode`: "append" or "complete" ("update" is refused, as by delta-spark: upsert with
    foreachBatch + `merge_into`). `trigger`: "availableNow", "once" or a processing-time
    interval such as "10 seconds". `fast_path` writes through `foreach_batch_writer`, otherwise
    through `writeStream.format("delta")`.
    """
    from delta_tables.spark_source import unsupported_update_mode

    mode = output_mode.lower()
    if mode == "update":
        raise unsupported_update_mode(str(path))
    if mode not in ("append", "complete"):
        raise DeltaOptionError(f"output_mode={output_mode!r}: use 'append' or 'complete'")
    writer = df.writeStream.outputMode(mode).option("checkpointLocation", str(checkpoint_location))
    if query_name:
        writer = writer.queryName(query_name)
    if trigger == "availableNow":
        writer = writer.trigger(availableNow=True)
    elif trigger == "once":
        writer = writer.trigger(once=True)
    else:
        writer = writer.trigger(processingTime=trigger)
    if fast_path:
        return writer.foreachBatch(
            foreach_batch_writer(
                path,
                checkpoint_location,
                mode="overwrite" if mode == "complete" else "append",
                partition_by=list(partition_by) or None,
                merge_schema=merge_schema,
                user_metadata=user_metadata,
                on_commit=on_commit,
            )
        ).start()
    writer = writer.format("delta").option("mergeSchema", str(merge_schema).lower())
    if partition_by:
        writer = writer.option("partitionBy", ",".join(partition_by))
    if user_metadata:
        writer = writer.option("userMetadata", user_metadata)
    return writer.start(str(local_path(str(path))))
