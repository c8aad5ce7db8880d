"""`runoff silver <dataset>`: windowed aggregates of a bronze table, upserted into Delta.

Input: `delta/bronze/<dataset>`, read as a stream through the delta engine's source
(`spark.readStream.format("delta")`; `--max-files-per-trigger N` passes `maxFilesPerTrigger`).
Output: one Delta table per aggregate of the dataset (`delta/silver/<dataset>_<aggregate>`),
with one row per window and key (`SilverAggregate.keys`): `window_start`, `window_end`, the keys
and the measures (`lines_word_counts` has no window: one row per word).

Definitions: a table built by another definition than its spec's stops the run before anything
is written, except when the spec only added measures: then the run deletes that table and its
checkpoint first and builds it from all of bronze (`apply_compatible`, `delta_tables.definitions`).

Trigger: `availableNow`. A run processes what bronze committed since the previous run (the
checkpoint `checkpoints/silver/<table>` remembers where that was), in as many micro-batches as the
rate limit asks, plus the no-data batches Spark runs to advance the watermark, then stops. The
dataset's tables are queries of one SparkSession, run one after the other; the run holds every
table's checkpoint lock from start to end.

Writes: the transforms (pure, `jobs.streaming.dataset.SilverAggregate.transform`) hold the watermark
and the window. Tables in "update" mode receive, after every micro-batch, the current aggregate of
each window the batch touched; a MERGE keyed by window and keys updates or inserts them. "append"
tables (`sensors_lost_signal`) receive a window once, when the watermark finalizes it: an
insert-only MERGE. Every MERGE commit carries the app transaction (app id = the query id Spark keeps
in `<checkpoint>/metadata`, version = batch id); a batch the table has already recorded is skipped,
so a micro-batch replayed after a crash changes nothing. The MERGE condition also bounds the
target's `window_start` to the batch's range so that delta-spark skips files by their statistics and
the cost of a batch does not grow with the table. The MERGE runs on the executors
(`DeltaTable.merge` inside `foreachBatch`); nothing is collected to the driver.

Late rows: a row whose window ended at or before the watermark (max event time seen in earlier
micro-batches minus the delay; Spark drops against the previous batch's watermark) is left out
and counted in the query progress (`stateOperators[].numRowsDroppedByWatermark`). Spark counts
after the batch's partial aggregation, so the figure is the number of late (window, key) groups:
a lower bound on late records, never zero when a record was dropped. The ledger's `late_rows` is
the largest count among the dataset's tables (they all read the same bronze rows; per-table
counts are in `details`), and the closing summary tells the user to backfill.

Partitioning: a MERGE copies on write: every file holding a matched row is rewritten
whole, new rows included, so the file with the newest windows would absorb every batch and each
MERGE would rewrite more of the history. Tables that gain thousands of rows a day
(`sensors_device_counts`, `sensors_type_signal`, `activity_user_minute`) are partitioned by
`window_date` (UTC day of `window_start`, a derived column): a MERGE rewrites at most the days of
its batch, never older ones, and `runoff maintain` compacts within a day. Small tables stay
unpartitioned, as day partitions would hold a few dozen rows each: the events tables (48 and 576
rows a day), `sensors_lost_signal` (alerts; insert-only MERGEs only add files) and
`lines_word_counts` (one row per word, no time). The window_start range in the MERGE condition
keeps the other files of a table out of each batch, partitioned or not.

Shuffle partitions: stateful queries keep their state in `spark.sql.shuffle.partitions` buckets
and Spark records the number in the checkpoint; the session uses `RunoffConfig.shuffle_partitions`
(4) for new checkpoints, and Spark reuses the recorded number for existing ones.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from core import interrupts
from core.config import Location, RunoffConfig
from core.console import live_status, say
from core.errors import RunoffError
from core.specs import DatasetSpec
from delta_tables import definitions
from delta_tables.catalog import Catalog, Table, ensure_table
from delta_tables.ledger import RunRecord, recorded_run
from delta_tables.writes import (
    already_committed,
    is_delta_table,
    merge,
    session_conf,
    table_columns,
    table_version,
)
from jobs.checkpoints.files import read_query_id
from jobs.checkpoints.guard import record_batch
from jobs.spark import INTERPRETED_PROJECTIONS
from jobs.streaming.dataset import SilverAggregate, load_dataset
from jobs.streaming.query import (
    BatchFunction,
    CurrentBatch,
    checkpoint_locks,
    deleting,
    error_line,
    guard_checkpoint,
    raise_failure,
)
from jobs.streaming.resolve import ensure_resolves
from jobs.streaming.sql import quote, sql_timestamp
from quality.history import append_metrics, metric_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from quality.gate import Gate

logger = logging.getLogger(__name__)

TRIGGER = "available-now"
# Column the MERGE condition bounds so that delta-spark prunes target files by statistics.
RANGE_COLUMN = "window_start"
POLL_SECONDS = 0.5


# -- pure helpers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SilverOptions:
    """What a silver run may change from the dataset's defaults."""

    watermark: str | None = None
    max_files_per_trigger: int | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SilverOptions:
        return cls(
            watermark=getattr(args, "watermark", None),
            max_files_per_trigger=getattr(args, "max_files_per_trigger", None),
        )


def merge_predicate(
    keys: Sequence[str],
    window_range: tuple[datetime, datetime] | None = None,
    source: str = "s",
    target: str = "t",
) -> str:
    """The MERGE condition: keys equal, and the target's window_start within the batch's range.

    The range conjunct references the target only, so delta-spark skips the files whose
    window_start statistics lie outside it and never opens files of older windows.
    """
    if not keys:
        raise ValueError("a MERGE needs at least one key column")
    parts = [f"{target}.{quote(k)} = {source}.{quote(k)}" for k in keys]
    if window_range is not None:
        low, high = window_range
        column = f"{target}.{quote(RANGE_COLUMN)}"
        parts.append(f"{column} >= {sql_timestamp(low)}")
        parts.append(f"{column} <= {sql_timestamp(high)}")
    return " AND ".join(parts)


def batch_profile(data: DataFrame) -> tuple[int, tuple[datetime, datetime] | None]:
    """The batch's row count and (min, max) of its window_start as naive UTC datetimes (None for
    tables without windows, or no rows), in one Spark job. Spark formats the times in the
    session time zone (UTC), so the driver's own time zone plays no part."""
    from pyspark.sql import functions as F

    if RANGE_COLUMN not in data.columns:
        return data.count(), None
    pattern = "yyyy-MM-dd HH:mm:ss.SSSSSS"
    row = data.agg(
        F.count(F.lit(1)),
        F.date_format(F.min(RANGE_COLUMN), pattern),
        F.date_format(F.max(RANGE_COLUMN), pattern),
    ).first()
    assert row is not None
    if row[1] is None or row[2] is None:
        return int(row[0]), None
    return int(row[0]), (datetime.fromisoformat(row[1]), datetime.fromisoformat(row[2]))


def late_rows_of(progress: Mapping[str, Any]) -> int:
    """Rows a micro-batch's stateful operators dropped for being behind the watermark."""
    return sum(
        int(op.get("numRowsDroppedByWatermark") or 0) for op in progress.get("stateOperators") or ()
    )


# -- Delta I/O --------------------------------------------------------------------------------
@dataclass(frozen=True)
class MergeOutcome:
    """What one micro-batch did to its silver table."""

    rows: int  # rows in the batch's output
    inserted: int
    updated: int
    seconds: float
    committed: bool  # False: empty batch, or a replay the table had already committed
    version: int
    replayed: bool = False  # the table had already committed the batch
    newest: datetime | None = None  # the batch's last window start (UTC), if it has windows


def merge_batch(
    path: Location,
    batch: DataFrame,
    aggregate: SilverAggregate,
    app_id: str,
    batch_id: int,
    gate: Gate | None = None,
    current: CurrentBatch | None = None,
) -> MergeOutcome:
    """MERGE one micro-batch's output into the silver table, at most once per (app_id, batch_id),
    once `gate` (the table's batch expectations) passed it; `current` follows its stages.

    The batch is cached while it is used more than once (its window range, the gate, the MERGE):
    evaluating a stateful micro-batch twice would run its aggregation twice.
    """
    started = time.perf_counter()
    if already_committed(path, app_id, batch_id):
        seconds = time.perf_counter() - started
        return MergeOutcome(0, 0, 0, seconds, False, table_version(path), replayed=True)
    columns = table_columns(path)
    if sorted(columns) != sorted(batch.columns):
        raise RunoffError(
            f"silver table {path} has columns [{', '.join(columns)}] but "
            f"{aggregate.table} now produces [{', '.join(batch.columns)}]: rebuild it with "
            f"`runoff reset {aggregate.dataset} --layer silver --yes`"
        )
    data = batch.persist()
    current = current or CurrentBatch(aggregate.table)  # nobody watching: a throwaway one
    try:
        current.update(stage="aggregating")
        rows, window_range = batch_profile(data)
        if rows == 0:
            return MergeOutcome(0, 0, 0, time.perf_counter() - started, False, table_version(path))
        current.update(rows=rows, stage="checking")
        if gate is not None:
            gate.check(data, batch_id, rows)  # a critical failure raises: nothing is merged
        current.update(stage="merging")
        metrics = merge(
            data,
            path,
            # partition columns (window_date, a function of window_start) match too: same rows
            condition=merge_predicate((*aggregate.keys, *aggregate.partition_by), window_range),
            update=aggregate.output_mode == "update",
            app_id=app_id,
            version=batch_id,
        )
    finally:
        data.unpersist()
    return MergeOutcome(
        rows=rows,
        inserted=metrics.inserted,
        updated=metrics.updated,
        seconds=time.perf_counter() - started,
        committed=True,
        version=table_version(path),
        newest=window_range[1].replace(tzinfo=UTC) if window_range else None,
    )


class BatchWriter:
    """What one silver table's `foreachBatch` does: check the batch's output (the quality gate),
    then MERGE it, exactly once."""

    def __init__(
        self,
        aggregate: SilverAggregate,
        path: Location,
        checkpoint: Location,
        gate: Gate | None = None,
    ) -> None:
        self.aggregate = aggregate
        self.path = path
        self.checkpoint = checkpoint
        self.gate = gate
        self.outcomes: dict[int, MergeOutcome] = {}
        self.current: CurrentBatch | None = None  # the batch under way, for the live line
        self._app_id: str | None = None
        # Keeps the Python error of a failed batch (Spark wraps it in pages of JVM text).
        self.function = BatchFunction(self.process)

    @property
    def app_id(self) -> str:
        if self._app_id is None:
            query_id = read_query_id(self.checkpoint)
            if query_id is None:
                raise RunoffError(f"{self.checkpoint}/metadata holds no streaming query id")
            self._app_id = query_id
        return self._app_id

    def process(self, batch: DataFrame, batch_id: int) -> None:
        current = self.current
        if current is not None:
            current.start(batch_id, stage="reading the table's commits")
        outcome = merge_batch(
            self.path, batch, self.aggregate, self.app_id, batch_id, self.gate, current
        )
        self.outcomes[batch_id] = outcome
        # Whether the table holds the batch (an empty output makes no commit): for the guard.
        held = outcome.committed or outcome.replayed
        record_batch(self.checkpoint, batch_id, {self.aggregate.table: held})
        if current is not None:
            current.finish()


# -- progress ---------------------------------------------------------------------------------
@dataclass
class TableRun:
    """Progress of one silver table's query during a run."""

    aggregate: SilverAggregate
    path: Location
    checkpoint: Location
    writer: BatchWriter
    version_before: int = -1
    version_after: int = -1
    batches: int = 0
    input_rows: int = 0
    late_rows: int = 0
    seconds: float = 0.0
    watermark: str | None = None
    last_batch: int = -1
    query: StreamingQuery | None = None
    observed: dict[int, tuple[int, int]] = field(default_factory=dict)  # batch: rows in, late

    @property
    def table(self) -> str:
        return self.aggregate.table

    @property
    def merged_rows(self) -> int:
        return sum(o.rows for o in self.writer.outcomes.values() if o.committed)

    def batch_metrics(self, recorded_at: datetime) -> list[tuple[int, datetime, dict[str, float]]]:
        """Each committed batch's metrics (`quality.anomalies.SILVER_METRICS`) at its last
        window start (`recorded_at` for a table without windows)."""
        measured = []
        for batch_id, outcome in sorted(self.writer.outcomes.items()):
            if not outcome.committed:
                continue
            metrics: dict[str, float] = {
                "rows_written": outcome.rows,
                "rows_inserted": outcome.inserted,
                "rows_updated": outcome.updated,
            }
            if batch_id in self.observed:  # its progress report (Spark keeps the last 100)
                metrics["rows_in"], metrics["late_rows"] = self.observed[batch_id]
            measured.append((batch_id, outcome.newest or recorded_at, metrics))
        return measured

    @property
    def merge_seconds(self) -> list[float]:
        """Seconds of each committed MERGE, in batch order."""
        return [o.seconds for _, o in sorted(self.writer.outcomes.items()) if o.committed]

    def observe(self, progress: Mapping[str, Any]) -> str | None:
        """Account for one progress report; the progress line to print, once per batch."""
        batch_id = int(progress["batchId"])
        if batch_id <= self.last_batch:
            return None
        self.last_batch = batch_id
        rows = int(progress.get("numInputRows") or 0)
        late = late_rows_of(progress)
        seconds = float((progress.get("durationMs") or {}).get("triggerExecution", 0)) / 1000
        self.batches += 1
        self.input_rows += rows
        self.late_rows += late
        self.seconds += seconds
        self.watermark = (progress.get("eventTime") or {}).get("watermark", self.watermark)
        self.observed[batch_id] = (rows, late)
        outcome = self.writer.outcomes.get(batch_id)
        if outcome is None or outcome.rows == 0:
            written = "no window changed"
        elif not outcome.committed:
            written = f"{outcome.rows} rows already committed before a restart, skipped"
        else:
            written = (
                f"{outcome.rows} rows merged ({outcome.inserted} new, {outcome.updated} updated)"
                f" in {outcome.seconds:.2f} s"
            )
        late_text = f", {late} late" if late else ""
        return (
            f"silver {self.table} batch {batch_id}: {rows} rows in{late_text}, {written}, "
            f"{seconds:.1f} s"
        )


def watch(run: TableRun, report: Callable[[str], None]) -> None:
    """Report each new micro-batch of the run's query (call repeatedly, then once at the end)."""
    if run.query is None:
        return
    for progress in sorted(run.query.recentProgress, key=lambda p: int(p["batchId"])):
        line = run.observe(progress)
        if line:
            report(line)


# -- the job ----------------------------------------------------------------------------------
def bronze_stream(spark: SparkSession, bronze: Location, options: SilverOptions) -> DataFrame:
    # `runoff backfill` replaces bronze slices (remove + add) and recomputes the silver windows
    # itself: the stream skips those commits instead of failing (or counting rows twice).
    reader = spark.readStream.format("delta").option("skipChangeCommits", "true")
    if options.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(options.max_files_per_trigger))
    return reader.load(str(bronze))


def start_query(
    spark: SparkSession,
    catalog: Catalog,
    run: TableRun,
    watermark: str,
    options: SilverOptions,
) -> StreamingQuery:
    bronze = catalog.tables(run.aggregate.dataset).bronze.path
    aggregated = run.aggregate.transform(bronze_stream(spark, bronze, options), watermark)
    # The empty table exists (for readers) before any window closes.
    ensure_table(spark, catalog.silver_table(run.table), schema=aggregated.schema)
    return (
        aggregated.writeStream.queryName(f"silver_{run.table}")
        .outputMode(run.aggregate.output_mode)
        .option("checkpointLocation", str(run.checkpoint))
        .foreachBatch(run.writer.function)
        .trigger(availableNow=True)
        .start()
    )


def await_query(run: TableRun, report: Callable[[str], None]) -> None:
    """Wait for the run's query to finish, printing its batches as they complete."""
    from pyspark.errors import StreamingQueryException

    query = run.query
    assert query is not None
    try:
        # Each wait returns as the query ends (or raises its failure), not at the next poll.
        # (PySpark waits int(seconds * 1000) ms; its annotation says int.)
        while not query.awaitTermination(POLL_SECONDS):  # type: ignore[arg-type]
            watch(run, report)
            interrupts.check()  # a signal `runoff serve` delivered for its client
    except StreamingQueryException as exc:
        watch(run, report)
        raise_failure(
            exc,
            run.writer.function,
            f"silver table {run.table}",
            run.checkpoint,
            tables={run.table: run.path},
            reset_command=f"runoff reset {run.aggregate.dataset} --layer silver --yes",
            after_batch=run.last_batch,
        )
    finally:
        if query.isActive:
            query.stop()
    watch(run, report)


def summarize(record: RunRecord, runs: Sequence[TableRun], report: Callable[[str], None]) -> None:
    for run in runs:
        merge = (
            f", MERGE {sum(run.merge_seconds):.2f} s over {len(run.merge_seconds)} commits"
            if run.merge_seconds
            else ""
        )
        report(
            f"silver {run.table}: {run.batches} batches, {run.input_rows} rows in, "
            f"{run.merged_rows} rows merged, {run.late_rows} late, "
            f"version {run.version_before} -> {run.version_after}{merge}"
        )
    report(
        f"silver {record.dataset}: {record.status} in {record.seconds:.1f} s: "
        f"{len(runs)} tables, {record.batches} batches, {record.rows} rows merged, "
        f"{record.late_rows} late"
    )
    if record.late_rows:
        report(
            f"silver {record.dataset}: {record.late_rows} late rows (or groups of rows) arrived "
            f"behind the watermark ({record.details.get('watermark')}) and are missing from "
            f"silver: backfill their days "
            f"(`runoff backfill {record.dataset} --start DAY --end DAY`)"
        )


def delete_tables(config: RunoffConfig, dataset: str, tables: list[Table]) -> None:
    """Delete silver tables and their checkpoints for a rebuild, under their locks; one ledger
    row (layer "rebuild")."""
    names = ", ".join(t.name for t in tables)
    record = RunRecord(dataset=dataset, layer="rebuild", trigger=names)
    checkpoints = [t.checkpoint for t in tables if t.checkpoint is not None]
    with deleting(config, record, tables, checkpoints, f"runoff rebuild {names}"):
        pass


def apply_compatible(
    config: RunoffConfig,
    spec: DatasetSpec,
    silver: Mapping[str, Table],
    report: Callable[[str], None],
) -> dict[str, list[str]]:
    """Apply the spec's compatible changes (measures added: `definitions.compatible`): each such
    table and its checkpoint are deleted (a `rebuild` ledger row), so that the run builds it
    anew from all of bronze. Nothing is deleted when another table of the dataset has a change
    no run applies (the run refuses it first). Returns what was applied, per table."""
    applicable = definitions.refuse_changed(silver.values(), spec, applied=True)
    applied = {name: change.what for name, change in applicable.items()}
    if applied:
        delete_tables(config, spec.name, [silver[name] for name in applied])
        for name, what in applied.items():
            report(f"silver {name}: {'; '.join(what)}: applied, the table is rebuilt from bronze")
    return applied


def run_silver(
    spark: SparkSession | None,
    config: RunoffConfig,
    dataset_name: str,
    options: SilverOptions | None = None,
    report: Callable[[str], None] = say,
) -> RunRecord:
    """Bring every silver table of the dataset up to date with bronze; returns the ledger row.

    Every run, refused or failed ones too, appends one row to the run ledger. The run takes
    every checkpoint's lock and checks bronze and the checkpoints first; `spark=None` builds the
    session only then, so that a refused run costs no JVM start.
    """
    options = options or SilverOptions()
    catalog = Catalog.load(config)
    dataset = load_dataset(catalog, dataset_name)
    silver = {table.name: table for table in catalog.tables(dataset.name).silver}
    watermark = options.watermark or dataset.watermark
    record = RunRecord(dataset=dataset.name, layer="silver", trigger=TRIGGER)
    current = CurrentBatch(f"silver {dataset.name}", rows="rows to merge")  # the live line
    record.details = {
        "watermark": watermark,
        "max_files_per_trigger": options.max_files_per_trigger,
    }
    tables = {name: table.path for name, table in silver.items()}
    from quality.gate import Gate, record_checks, say_problems
    from quality.suites import checked_tables  # GX: a heavy import

    runs: list[TableRun] = []
    checked = {t.name: t for t in checked_tables(catalog, dataset.name) if t.kind == "silver"}
    remedy = (
        f"fix bronze (`runoff backfill {dataset.name} --start DAY --end DAY`) or the expectation "
        f"in {dataset.spec.file}, then run `runoff silver {dataset.name}` again: it reads the same "
        "bronze rows"
    )
    with recorded_run(config.runs_path, record, describe=error_line):
        record.details["applied"] = apply_compatible(config, dataset.spec, silver, report)
        record.versions_before = {table: table_version(path) for table, path in tables.items()}
        record.versions_after = dict(record.versions_before)
        checkpoints = [t.checkpoint for t in catalog.tables(dataset.name).silver if t.checkpoint]
        with checkpoint_locks(config, checkpoints, f"runoff silver {dataset.name}"):
            bronze = catalog.tables(dataset.name).bronze.path
            if not is_delta_table(bronze):
                raise RunoffError(
                    f"bronze table {bronze} does not exist: run `runoff bronze {dataset.name}` "
                    "first"
                )
            # A table built by another definition is refused before anything is written.
            definitions.refuse_changed(silver.values(), dataset.spec)
            record.details["definitions"] = definitions.fingerprints(dataset.spec)
            for aggregate in dataset.aggregates:
                path = tables[aggregate.table]
                checkpoint = silver[aggregate.table].checkpoint
                assert checkpoint is not None
                guard_checkpoint(
                    checkpoint,
                    {
                        "dataset": dataset.name,
                        "layer": "silver",
                        "table": str(path.relative_to(config.data)),
                    },
                    {aggregate.table: path},
                    f"runoff reset {dataset.name} --layer silver --yes",
                )
                runs.append(
                    TableRun(
                        aggregate=aggregate,
                        path=path,
                        checkpoint=checkpoint,
                        writer=BatchWriter(
                            aggregate, path, checkpoint, Gate(checked[aggregate.table], remedy)
                        ),
                        version_before=record.versions_before[aggregate.table],
                    )
                )
            if spark is None:
                from jobs.spark import get_spark

                spark = get_spark(app_name=f"runoff-silver-{dataset.name}", config=config)
            ensure_resolves(spark, catalog, dataset.name)
            definitions.adopt(spark, silver.values(), dataset.spec)
            try:
                # One query at a time: concurrent queries on a small machine start their Python
                # stream readers together and compete for the same cores.
                # The queries' sessions are clones that keep the conf as it was at their start.
                with live_status(current.describe), session_conf(spark, INTERPRETED_PROJECTIONS):
                    for run in runs:
                        current.restart(f"silver {run.table}")
                        run.writer.current = current
                        run.query = start_query(spark, catalog, run, watermark, options)
                        await_query(run, report)
            finally:
                _close(record, runs)
                gates = [run.writer.gate for run in runs if run.writer.gate is not None]
                record_checks(catalog.quality_results.path, record, gates)
                now = datetime.now(UTC)
                append_metrics(
                    catalog.quality_metrics.path,
                    [
                        row
                        for run in runs
                        for row in metric_rows(
                            record.run_id, dataset.name, run.table, run.batch_metrics(now)
                        )
                    ],
                )
    say_problems(record, gates)
    summarize(record, runs, report)
    return record


def _close(record: RunRecord, runs: Sequence[TableRun]) -> None:
    for run in runs:
        run.version_after = table_version(run.path)
    record.versions_after = {run.table: run.version_after for run in runs}
    record.batches = sum(run.batches for run in runs)
    record.rows = sum(run.merged_rows for run in runs)
    # Every table reads the same bronze rows: the largest count is the closest to late records.
    record.late_rows = max((run.late_rows for run in runs), default=0)
    record.details["tables"] = {
        run.table: {
            "batches": run.batches,
            "input_rows": run.input_rows,
            "merged_rows": run.merged_rows,
            "late_rows": run.late_rows,
            "watermark": run.watermark,
            "stream_seconds": round(run.seconds, 3),
            "merge_seconds": [round(s, 4) for s in run.merge_seconds],
        }
        for run in runs
    }


def cmd_silver(config: RunoffConfig, args: argparse.Namespace) -> int:
    """`runoff silver <dataset> [--watermark "1 hour"] [--max-files-per-trigger N]`."""
    record = run_silver(None, config, args.dataset, SilverOptions.from_args(args))
    return 0 if record.status == "success" else 1


__all__ = [
    "BatchWriter",
    "MergeOutcome",
    "SilverOptions",
    "cmd_silver",
    "merge_batch",
    "merge_predicate",
    "run_silver",
]
