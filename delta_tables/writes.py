"""Writing runoff's Delta tables with delta-spark, each micro-batch exactly once.

- `append(df, path, ...)`: one commit carrying the app transaction (`txnAppId`/`txnVersion`):
  delta-spark skips a write whose version the table already holds for that app id, so a batch
  replayed after a crash commits nothing. Partition columns go through
  `DataFrameWriter.partitionBy` (delta-spark takes them from nowhere else).
- `merge(source, path, ...)`: `DeltaTable.merge` inside `foreachBatch`, distributed, guarded the
  same way through the `spark.databricks.delta.write.txnAppId/txnVersion` session confs.
- `table_version`, `committed_version`, `already_committed`: what a table holds, read through
  delta-rs (no Spark), so callers can decide before computing anything; `app_transactions`:
  every app id a table holds (read from the log: delta-rs answers per app id only).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config import Location, as_location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def is_delta_table(path: str | Location) -> bool:
    return (as_location(path) / "_delta_log").is_dir()


def table_version(path: str | Location) -> int:
    """The table's current version; -1 when there is no table."""
    from deltalake import DeltaTable

    if not is_delta_table(path):
        return -1
    return int(DeltaTable(str(path)).version())


def committed_version(path: str | Location, app_id: str) -> int | None:
    """The last `txnVersion` that `app_id` committed to the table; None if none (or no table)."""
    from deltalake import DeltaTable

    if not is_delta_table(path):
        return None
    version = DeltaTable(str(path)).transaction_version(app_id)
    return None if version is None else int(version)


def app_transactions(path: str | Location) -> dict[str, int]:
    """Every app id with its last committed `txnVersion`, read from the table's log.

    delta-rs answers only for a known app id, so the log is scanned: the last checkpoint's
    `txn` column, then the JSON commits after it (later commits win).
    """
    log = as_location(path) / "_delta_log"
    if not log.is_dir():
        return {}
    found: dict[str, int] = {}
    after = -1
    last = log / "_last_checkpoint"
    if last.is_file():
        import pyarrow.parquet as pq

        try:
            after = int(json.loads(last.read_text())["version"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"cannot read {last}: {exc}") from exc
        for part in sorted(log.glob(f"{after:020d}.checkpoint*.parquet")):
            with part.open("rb") as handle:
                txns = pq.read_table(handle, columns=["txn"]).column("txn").to_pylist()
            for txn in txns:
                if txn and txn.get("appId") is not None:
                    found[txn["appId"]] = int(txn["version"])
    commits = sorted((int(p.name[:20]), p) for p in log.glob("*.json") if p.name[:20].isdigit())
    for version, commit in commits:
        if version <= after:
            continue
        for line in commit.read_text().splitlines():
            if '"txn"' not in line:
                continue
            txn = json.loads(line).get("txn")
            if txn and txn.get("appId") is not None:
                found[txn["appId"]] = int(txn["version"])
    return found


def already_committed(path: str | Location, app_id: str, version: int) -> bool:
    """Whether the table holds (app_id, version) or a later version of that app id: a replayed
    batch that needs no work."""
    committed = committed_version(path, app_id)
    return committed is not None and committed >= version


def append(
    df: DataFrame,
    path: str | Location,
    *,
    partition_by: Sequence[str] = (),
    app_id: str,
    version: int,
    merge_schema: bool = False,
) -> None:
    """Append `df` in one commit, at most once per (app_id, version); `merge_schema` lets the
    commit add `df`'s new columns to the table (Delta schema evolution)."""
    writer = (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", str(version))
    )
    if merge_schema:
        writer = writer.option("mergeSchema", "true")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(str(path))


@dataclass(frozen=True)
class MergeMetrics:
    inserted: int
    updated: int


@contextmanager
def app_transaction(spark: SparkSession, app_id: str, version: int) -> Iterator[None]:
    """Every Delta write inside the block carries (app_id, version) and is skipped if the table
    already holds it; the session confs are unset afterwards."""
    spark.conf.set(TXN_APP_ID, app_id)
    spark.conf.set(TXN_VERSION, str(version))
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP_ID)
        spark.conf.unset(TXN_VERSION)


def merge(
    source: DataFrame,
    path: str | Location,
    *,
    condition: str,
    update: bool,
    app_id: str,
    version: int,
) -> MergeMetrics:
    """MERGE `source` (alias `s`) into the table (alias `t`) on `condition`: matched rows are
    updated (when `update`), the others inserted; at most once per (app_id, version)."""
    from delta.tables import DeltaTable

    spark = source.sparkSession
    target = DeltaTable.forPath(spark, str(path)).alias("t")
    builder = target.merge(source.alias("s"), condition)
    if update:
        builder = builder.whenMatchedUpdateAll()
    builder = builder.whenNotMatchedInsertAll()
    with app_transaction(spark, app_id, version):
        result = builder.execute()
    row = result.first() if result is not None else None
    values = row.asDict() if row is not None else {}
    return MergeMetrics(
        inserted=int(values.get("num_inserted_rows") or 0),
        updated=int(values.get("num_updated_rows") or 0),
    )
