"""Table maintenance through delta-spark: OPTIMIZE (compaction), VACUUM and a Delta checkpoint.

`maintain(spark, path, retention_hours)` compacts small files (a `dataChange=false` commit that
streaming readers skip; none when there is nothing to compact), vacuums files that no version
within the retention references (and orphans of writes that crashed before committing), and
writes a checkpoint at the final version unless one is there, so opening the table replays no
JSON commit. VACUUM is run without its START/END log commits, so a second `maintain` right after
the first adds no version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config import Location, as_location
from delta_tables.writes import is_delta_table, table_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# VACUUM refuses retentions under 7 days unless this check is off: runoff takes the retention
# from its configuration (`RUNOFF_VACUUM_RETENTION_HOURS`) and holds the writers' locks.
SESSION_CONF = {
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    "spark.databricks.delta.vacuum.logging.enabled": "false",
}


@dataclass(frozen=True)
class Maintained:
    """What maintenance did to one table."""

    files_before: int
    files_after: int
    version_before: int
    version: int
    checkpoint: bool  # a checkpoint was written at `version`
    files_removed: int
    bytes_removed: int


def last_checkpoint_version(path: str | Location) -> int | None:
    """The version of the table's last checkpoint (`_delta_log/_last_checkpoint`), if any."""
    marker = as_location(path) / "_delta_log" / "_last_checkpoint"
    try:
        return int(json.loads(marker.read_text())["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _quoted(path: str | Location) -> str:
    return "delta.`" + str(path).replace("`", "``") + "`"


def _num_files(spark: SparkSession, path: str | Location) -> int:
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, str(path)).detail().select("numFiles").first()
    return int(row[0]) if row is not None else 0


def _local(uri: str) -> Location:
    return as_location(uri.removeprefix("file:"))


def maintain(spark: SparkSession, path: str | Location, retention_hours: float) -> Maintained:
    """Compact, vacuum and checkpoint the Delta table at `path` (which must exist)."""
    from delta.tables import DeltaTable

    if not is_delta_table(path):
        raise FileNotFoundError(f"no Delta table at {path}")
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)
    files_before = _num_files(spark, path)
    version_before = table_version(path)
    table = DeltaTable.forPath(spark, str(path))
    table.optimize().executeCompaction()
    hours = f"{float(retention_hours):g}"
    listed = spark.sql(f"VACUUM {_quoted(path)} RETAIN {hours} HOURS DRY RUN").collect()
    # Sizes are taken before the files go: VACUUM only names them.
    sizes = {}
    for row in listed:
        local = _local(str(row[0]))
        if local.is_file():
            sizes[local] = local.stat().st_size
    if sizes:
        table.vacuum(float(retention_hours))
    removed = [f for f in sizes if not f.exists()]
    version = table_version(path)
    wrote_checkpoint = last_checkpoint_version(path) != version
    if wrote_checkpoint:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            spark._jsparkSession, str(path)
        )
        delta_log.checkpoint()
    return Maintained(
        files_before=files_before,
        files_after=_num_files(spark, path),
        version_before=version_before,
        version=version,
        checkpoint=wrote_checkpoint,
        files_removed=len(removed),
        bytes_removed=sum(sizes[f] for f in removed),
    )
