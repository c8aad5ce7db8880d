"""Writing runoff's Delta tables with delta-spark, each micro-batch exactly once.

- `append(df, path, ...)`: one commit carrying the app transaction (`txnAppId`/`txnVersion`):
  delta-spark skips a write whose version the table already holds for that app id, so a batch
  replayed after a crash commits nothing. Partition columns go through
  `DataFrameWriter.partitionBy` (delta-spark takes them from nowhere else).
- `merge(source, path, ...)`: `DeltaTable.merge` inside `foreachBatch`, distributed, guarded the
  same way through the `spark.databricks.delta.write.txnAppId/txnVersion` session confs.
- `table_version`, `committed_version`, `already_committed`, `app_transactions`: what a table
  holds, read through delta-rs (no Spark), so callers can decide before computing anything.
  delta-rs gives an app id's version but cannot list app ids, so `app_transactions` takes the
  names from the `txn` actions of the log files that can hold them and asks delta-rs for each
  version; no Spark-free maintained API lists them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config import Location, as_location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
# Spark's adaptive execution splits each of the MERGE's joins into stages run as separate jobs:
# on a micro-batch's few rows, twice the jobs (12 instead of 6) for nothing to adapt.
MERGE_CONF = {"spark.sql.adaptive.enabled": "false"}


def is_delta_table(path: str | Location) -> bool:
    """A Delta table is at `path`: its log holds a commit or a checkpoint. A `_delta_log` folder
    without either (a creation stopped before its first commit) is no table: every reader
    refuses it, and delta-spark creates the table there again."""
    log = as_location(path) / "_delta_log"
    if not log.is_dir():
        return False
    return any(
        _COMMIT.fullmatch(entry.name) or _CHECKPOINT.fullmatch(entry.name)
        for entry in log.iterdir()
    )


def table_version(path: str | Location) -> int:
    """The table's current version; -1 when there is no table."""
    from deltalake import DeltaTable

    if not is_delta_table(path):
        return -1
    return int(DeltaTable(str(path)).version())


def table_columns(path: str | Location) -> list[str]:
    """The column names of the table's current schema, in order."""
    from deltalake import DeltaTable

    return [field.name for field in DeltaTable(str(path)).schema().fields]


def committed_version(path: str | Location, app_id: str) -> int | None:
    """The last `txnVersion` that `app_id` committed to the table; None if none (or no table)."""
    from deltalake import DeltaTable

    if not is_delta_table(path):
        return None
    version = DeltaTable(str(path)).transaction_version(app_id)
    return None if version is None else int(version)


def app_transactions(path: str | Location) -> dict[str, int]:
    """Every app id the table holds, with its last committed `txnVersion`; {} without a table.

    Each version is delta-rs's `transaction_version`, which replays whatever the log holds
    (classic or V2 checkpoints and their sidecars, log compactions, commits). delta-rs answers
    only for an app id it is given, so the app ids are the ones `_logged_app_ids` finds named
    in the log; one that delta-rs does not hold (an expired transaction) is left out.
    Raises ValueError when the log cannot be read.
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    log = as_location(path) / "_delta_log"
    if not log.is_dir():
        return {}
    try:
        names = _logged_app_ids(log)
        if not names:
            return {}
        table = DeltaTable(str(path))
        versions = {app: table.transaction_version(app) for app in sorted(names)}
    except (OSError, ValueError, DeltaError) as exc:
        reason = next(iter(str(exc).splitlines()), type(exc).__name__)  # not delta-rs's backtrace
        raise ValueError(f"cannot read the Delta log {log}: {reason}") from exc
    return {app: int(v) for app, v in versions.items() if v is not None}


# The log files that can hold `txn` actions: commits, log compactions (`<x>.<y>.compacted.json`)
# and checkpoints (classic, multi-part `<v>.checkpoint.<part>.<parts>.parquet`, or V2
# `<v>.checkpoint.<uuid>.json|parquet`). V2 sidecars, under `_sidecars/`, hold file actions only.
_COMMIT = re.compile(r"(\d{20})\.json")
_COMPACTION = re.compile(r"\d{20}\.(\d{20})\.compacted\.json")
_CHECKPOINT = re.compile(
    r"(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10})|\.[0-9a-fA-F-]{36})?\.(?:json|parquet)"
)


def _logged_app_ids(log: Location) -> set[str]:
    """The app ids named by a `txn` action of the newest complete checkpoint, or of a commit or
    log compaction that ends after it.

    A superset of the app ids the table holds, whichever of these files a reader replays: which
    ones it replays, in what order, and what each app id's version is, is left to delta-rs.
    """
    whole: set[int] = set()  # versions with a single-file checkpoint
    parts: dict[tuple[int, int], set[int]] = {}  # (version, parts) -> parts present
    checkpoints: dict[int, list[Location]] = {}
    later: list[tuple[int, Location]] = []  # (last version covered, commit or compaction)
    for entry in log.iterdir():
        if match := _COMMIT.fullmatch(entry.name) or _COMPACTION.fullmatch(entry.name):
            later.append((int(match[1]), entry))
        elif match := _CHECKPOINT.fullmatch(entry.name):
            version = int(match[1])
            checkpoints.setdefault(version, []).append(entry)
            if match[2] is None:
                whole.add(version)
            else:
                parts.setdefault((version, int(match[3])), set()).add(int(match[2]))
    complete = whole | {v for (v, n), have in parts.items() if have == set(range(1, n + 1))}
    base = max(complete, default=-1)
    found: set[str] = set()
    for entry in checkpoints.get(base, []):
        read = _parquet_app_ids if entry.name.endswith(".parquet") else _json_app_ids
        found.update(read(entry))
    for last, entry in later:
        if last > base:
            found.update(_json_app_ids(entry))
    return found


def _json_app_ids(file: Location) -> set[str]:
    found: set[str] = set()
    for line in file.read_text().splitlines():
        if '"txn"' in line:
            txn = json.loads(line).get("txn")
            if txn and txn.get("appId") is not None:
                found.add(str(txn["appId"]))
    return found


def _parquet_app_ids(file: Location) -> set[str]:
    import pyarrow.parquet as pq

    with file.open("rb") as handle:
        parquet = pq.ParquetFile(handle)
        if "txn" not in parquet.schema_arrow.names:
            return set()
        txns = parquet.read(columns=["txn"]).column("txn").to_pylist()
    return {str(t["appId"]) for t in txns if t and t.get("appId") is not None}


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
def session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """The session's SQL `conf` set inside the block, as it was (or unset) afterwards."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)


def app_transaction(spark: SparkSession, app_id: str, version: int) -> AbstractContextManager[None]:
    """Every Delta write inside the block carries (app_id, version) and is skipped if the table
    already holds it; the session confs are unset afterwards."""
    return session_conf(spark, {TXN_APP_ID: app_id, TXN_VERSION: str(version)})


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
    with app_transaction(spark, app_id, version), session_conf(spark, MERGE_CONF):
        result = builder.execute()
    row = result.first() if result is not None else None
    values = row.asDict() if row is not None else {}
    return MergeMetrics(
        inserted=int(values.get("num_inserted_rows") or 0),
        updated=int(values.get("num_updated_rows") or 0),
    )
