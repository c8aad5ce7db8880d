"""`runoff maintain <dataset>`: compact, checkpoint and vacuum every table of a dataset, and prune
its old Great Expectations validation results.

Input: the dataset's Delta tables (bronze, quarantine, every silver table), the run ledger
`delta/ops/runs` and the quality results history `quality/results` (both shared by all
datasets; one commit per run makes many small files) and the validation results of the
dataset's suites in the GX project `<home>/quality/gx`. Output, per
table, through delta-spark (`delta_tables.maintenance`):
1. compaction (`OPTIMIZE`): small files rewritten into larger ones, a `dataChange=false`
   commit that streaming readers skip, so the contents are unchanged;
2. vacuum: files no version within the retention references, and orphans of crashed writes, are
   deleted (`RUNOFF_VACUUM_RETENTION_HOURS`, 168 by default; readers of older versions need
   them until then); it adds no version. The two shared tables are vacuumed with at least
   one hour of retention because any command may be appending to them at any moment, and
   maintained by one `maintain` at a time (a lock beside each; the maintenance DAG runs the
   datasets in parallel): a second one skips them;
3. a Delta checkpoint at the final version (unless one is already there), so opening the table
   replays no JSON commit.
Then the dataset's validation results (`quality.retention`): every validate run stores one GX
result per suite and renders one Data Docs page for it; results older than the same retention
(`RUNOFF_VACUUM_RETENTION_HOURS`) are removed with their pages, except the newest result of each
suite, and the Data Docs index is rebuilt so that it links no removed page. Other datasets'
results are not touched; the trends stay in the results history table `quality/results`.
A second run right after the first changes nothing (no new version, no file of the GX project).
One line per table (data files before and after, version, checkpoint, files and bytes removed),
one for the validation results (removed, kept) and one ledger row (layer "maintain").

Concurrency: holds the dataset's bronze and silver checkpoint locks, so no run of the dataset
writes while files are compacted or deleted (with a short retention a vacuum could otherwise
remove a running batch's files before they are committed); the validation results are pruned
under the quality project's lock, so no validate run builds Data Docs meanwhile.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.config import Location, RunoffConfig
from core.console import say
from core.locking import checkpoint_lock
from delta_tables.catalog import Catalog
from delta_tables.ledger import RunRecord
from quality.retention import prune_validation_results

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LEDGER_MIN_RETENTION_HOURS = 1


@dataclass(frozen=True)
class TableMaintenance:
    """What maintenance did to one table."""

    table: str
    exists: bool
    files_before: int = 0
    files_after: int = 0
    version_before: int = -1
    version: int = -1
    checkpoint: bool = False
    files_removed: int = 0
    bytes_removed: int = 0

    def line(self) -> str:
        if not self.exists:
            return f"maintain {self.table}: no table yet, nothing to do"
        checkpoint = "checkpoint written" if self.checkpoint else "checkpoint already there"
        return (
            f"maintain {self.table}: files {self.files_before} -> {self.files_after}, "
            f"version {self.version_before} -> {self.version} ({checkpoint}), vacuum removed "
            f"{self.files_removed} files, {format_bytes(self.bytes_removed)}"
        )


def format_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def maintain_table(
    spark: SparkSession, name: str, path: Location, retention_hours: float
) -> TableMaintenance:
    """Compact, vacuum and checkpoint one table (see the module doc)."""
    from delta_tables.maintenance import maintain
    from delta_tables.writes import is_delta_table

    if not is_delta_table(path):
        return TableMaintenance(name, exists=False)
    done = maintain(spark, path, retention_hours)
    return TableMaintenance(table=name, exists=True, **asdict(done))


def maintain_shared(
    spark: SparkSession, name: str, path: Location, retention_hours: float, dataset: str, lock: Path
) -> TableMaintenance | None:
    """Maintain a table every dataset appends to (the run ledger, the quality results history,
    the batch metrics), unless another `maintain` (of any dataset) is at it right now."""
    from core.errors import LockHeldError
    from delta_tables.writes import is_delta_table

    if not is_delta_table(path):  # nothing to do, and no lock file to leave behind
        return TableMaintenance(name, exists=False)
    try:
        with checkpoint_lock(path, f"runoff maintain {dataset} ({name})", lock):
            return maintain_table(spark, name, path, retention_hours)
    except LockHeldError:
        return None


def run_maintain(
    spark: SparkSession | None,
    config: RunoffConfig,
    dataset: str,
    report: Callable[[str], None] = say,
) -> list[TableMaintenance]:
    """Maintain every table of `dataset` and the run ledger; one ledger row."""
    from delta_tables.ledger import recorded_run
    from jobs.streaming.query import checkpoint_locks, error_line

    catalog = Catalog.load(config)
    tables = list(catalog.tables(dataset))
    retention = float(config.vacuum_retention_hours)
    record = RunRecord(dataset=dataset, layer="maintain", trigger="manual")
    results: list[TableMaintenance] = []
    with (
        recorded_run(config.runs_path, record, describe=error_line),
        checkpoint_locks(
            config,
            [t.checkpoint for t in tables if t.checkpoint is not None],
            f"runoff maintain {dataset}",
        ),
    ):
        if spark is None:
            from jobs.spark import get_spark

            spark = get_spark(app_name=f"runoff-maintain-{dataset}", config=config)
        for table in tables:
            results.append(maintain_table(spark, table.name, table.path, retention))
            report(results[-1].line())
        names = [t.name for t in tables]
        quality = prune_validation_results(config.quality_dir, dataset, names, retention)
        report(quality.line())
        # Any command may be appending to these at any moment: at least an hour of retention.
        shared_retention = max(retention, LEDGER_MIN_RETENTION_HOURS)
        for name, path in (
            ("ops_runs", catalog.runs.path),
            ("quality_history", catalog.quality_results.path),
            ("quality_metrics", catalog.quality_metrics.path),
        ):
            shared = maintain_shared(
                spark, name, path, shared_retention, dataset, config.lock_path(path)
            )
            if shared is None:
                report(f"maintain {name}: another maintain is at it right now, skipped")
            else:
                results.append(shared)
                report(shared.line())
        record.versions_before = {r.table: r.version_before for r in results if r.exists}
        record.versions_after = {r.table: r.version for r in results if r.exists}
        record.files = sum(r.files_removed for r in results)
        record.details = {
            "retention_hours": retention,
            "tables": {r.table: asdict(r) for r in results},
            "quality_results": asdict(quality),
        }
    done = [r for r in results if r.exists]
    report(
        f"maintain {dataset}: {len(done)} tables, files "
        f"{sum(r.files_before for r in done)} -> {sum(r.files_after for r in done)}, "
        f"{format_bytes(sum(r.bytes_removed for r in done))} removed"
    )
    return results


def cmd_maintain(config: RunoffConfig, args: argparse.Namespace) -> int:
    run_maintain(None, config, args.dataset)
    return 0
