"""`runoff backfill <dataset> --start T --end T`: idempotent re-run of the event times [start, end).

`--start` and `--end` are dates (`2024-01-02`: midnight UTC) or ISO-8601 times (`2024-01-02T05:00`,
naive = UTC; `Z` and offsets are converted to UTC); an empty or negative interval is refused.

Input: the landing files of the interval's days, i.e. every file below `date=D/` for each UTC day
D that [start, end) overlaps, found both in the landing folder and in the bronze archive (files
the bronze stream has ingested are moved there, `jobs.bronze.job.landing_dirs`); when both hold the
same file name the landing copy (the newer delivery) wins. A file the stream has not ingested yet
(pending in landing) is read only when the interval covers its whole day; on a day the interval
covers partly it is left to the stream, which ingests all of its records at once (a backfill
that wrote one hour of it would either archive it, leaving its other hours out of bronze, or
let the stream ingest that hour a second time). Output: one commit per table that changed, of
- bronze: the slice `event_time >= start AND event_time < end`, replaced (`replaceWhere`, with
  `event_date` between the interval's days first, so that only their partitions are read) by the
  records of the files read whose event time lies in the interval, plus the slice's rows that
  came from files outside the interval's folders (late records delivered on a later day), which
  are kept as they are. The files' records outside the interval belong to other intervals: they
  are left as bronze has them (those dated outside the files' own days are counted in the
  output; the generator never writes such records, a file never spans midnight);
- quarantine: each row belongs to exactly one interval, the one holding its *event key*: the
  event time `jobs.bronze.parse.parse_lines` finds in its `_raw` (re-parsed, for the table's rows as
  for the new ones, so both agree), else (unparseable JSON, no event time, ...) midnight UTC of
  its file's `date=D/` folder. The interval's rows from its folders are replaced by the files'
  malformed lines keyed in the interval (one `replaceWhere` on those files' `_source_file`;
  their rows of other intervals are written back unchanged); rows of other folders are kept. So
  the 24 hourly backfills of a day replace each of its quarantine rows once, and a run's
  `quarantined` counts its own interval's lines only;
- every silver table, recomputed as a batch job from the new bronze snapshot:
  windowed tables: every window that overlaps the interval, `window_end > start AND
  window_start < end`, is replaced by the aggregate of the bronze rows with
  `event_time` in [start - window, end + window) (which holds every row of every such window,
  so the recomputed windows are complete; windows that do not overlap the interval are neither
  read from the result nor touched). A window that straddles an edge (10 minutes sliding by 5:
  [start - 5 min, start + 5 min)) is recomputed too, from bronze rows on both sides of the edge,
  so whatever order the intervals run in, each window ends equal to its final bronze rows.
  `lines_word_counts` has no window: it is recomputed from all of bronze.
  Recomputed windows count every bronze row, including rows the live stream's watermark
  dropped: a backfill is how late data reaches silver.

Idempotent: each table's new slice is compared with its current slice first (bronze and
quarantine ignoring `_ingested_at`, `_batch_id` and `ingest_date`; doubles rounded to 9
decimals) and a table whose rows would not change gets no commit (nor a quality gate check:
nothing of it is published anew), so a second run adds no version anywhere. Backfilled rows
carry `_ingested_at` = the backfill's start and `_batch_id` = the last micro-batch the bronze
stream had committed (0 before the first).

Live streams: the checkpoints are never written. Pending files that were read (see above) are
moved to the archive after the run, as the stream does with the files it ingests, so the stream
never ingests them a second time. The silver streams read
bronze with `skipChangeCommits`, so they do not see the backfill's replace commit; the silver
tables get the recomputed windows from the backfill itself. Backfill intervals whose windows the
watermark has not closed yet may be updated again by the live silver stream afterwards.
Concurrency: the command holds the bronze checkpoint lock and every silver checkpoint lock of
the dataset for its whole run, so no scheduled run of the dataset interleaves with it (such a
run fails at once naming the backfill, and Airflow retries it); one ledger row, layer "backfill".
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from core.config import Location, RunoffConfig
from core.console import say
from core.errors import RunoffError
from core.specs import parse_duration
from delta_tables.ledger import RunRecord
from delta_tables.writes import session_conf, table_version
from jobs.backfill.interval import (
    BRONZE_RUN_COLUMNS,
    EVENT_KEY,
    QUARANTINE_RUN_COLUMNS,
    Folders,
    Interval,
    IntervalFile,
    SliceDiff,
    bronze_predicate,
    bronze_slice,
    current_windows,
    diff_slices,
    files_to_read,
    in_interval_days,
    in_interval_folders,
    in_interval_times,
    in_slice,
    interval_files,
    quarantine_predicate,
    recompute_windows,
    strip_segments_pattern,
    window_input_range,
    window_predicate,
    with_event_key,
)
from jobs.checkpoints.files import ingested_files, last_committed
from jobs.spark import projections_for

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from delta_tables.catalog import DatasetTables, Table
    from jobs.streaming.dataset import Dataset, SilverAggregate
    from quality.gate import Gate

LAYER = "backfill"
TRIGGER = "batch"


# Columns that say when and by which run a row was written, not what it holds.
# -- reading and archiving landing files --------------------------------------------------
def read_interval_lines(
    spark: SparkSession, folders: Folders, files: Sequence[IntervalFile]
) -> DataFrame:
    """The lines of `files` as `jobs.bronze.parse.RAW_SCHEMA`, `_source_file` = the landing URI
    (lines too long for the reader are left out: `with_long_lines` finds them).

    Spark gives an archived file the URI of its archive path, which is the archive root followed
    by the landing path: dropping the archive root's segments gives exactly the URI the stream
    recorded when it read the file in the landing folder.
    """
    from pyspark.sql import functions as F

    from jobs.bronze.long_lines import READER_OPTIONS, lines_read
    from jobs.bronze.parse import RAW_SCHEMA

    def lines(paths: list[str]) -> DataFrame:
        return lines_read(
            spark.read.format("text")
            .option("lineSep", "\n")
            .options(**READER_OPTIONS)
            .load(paths)
            .select(
                F.col("value"),
                F.col("_metadata.file_path").alias("_source_file"),
                F.col("_metadata.file_block_start").alias("_block_start"),
            )
        )

    frame = spark.createDataFrame([], RAW_SCHEMA)
    in_landing = [str(f.location) for f in files if not f.archived]
    if in_landing:
        frame = frame.unionByName(lines(in_landing))
    archived = [str(f.location) for f in files if f.archived]
    if archived:
        landing_uri = as_landing_uri(F.col("_source_file"), folders)
        frame = frame.unionByName(lines(archived).withColumn("_source_file", landing_uri))
    return frame


def archive_segments(folders: Folders) -> int:
    """How many path segments the archive root adds before a landing path (archive_dir =
    <archive root><absolute landing dir>)."""
    return len(folders.archive.parts) - len(folders.landing.absolute().parts)


def as_landing_uri(uri: Column, folders: Folders) -> Column:
    """An archived file's URI as the URI of its landing path."""
    from pyspark.sql import functions as F

    return F.regexp_replace(uri, strip_segments_pattern(archive_segments(folders)), "$1")


def interval_lines(
    spark: SparkSession, dataset: Dataset, folders: Folders, files: Sequence[IntervalFile]
) -> tuple[DataFrame, dict[str, list[int]]]:
    """The parsed lines of `files` (persisted: the caller unpersists), lines too long for the
    reader included (`jobs.bronze.long_lines`), and those lines' numbers per file."""
    from pyspark.sql import functions as F

    from jobs.bronze.long_lines import with_long_lines
    from jobs.bronze.parse import SOURCE_BYTES, kept, parse_lines

    raw = read_interval_lines(spark, folders, files)
    parsed = kept(parse_lines(raw, dataset))
    pattern = strip_segments_pattern(archive_segments(folders))
    uris = {f: str(f.location) if "://" in str(f.location) else f"file:{f.location}" for f in files}
    named = {re.sub(pattern, r"\1", uris[f]) if f.archived else uris[f]: f for f in files}
    raw, skipped = with_long_lines(
        spark,
        raw,
        parsed,
        int(parsed.agg(F.coalesce(F.sum(SOURCE_BYTES), F.lit(0))).first()[0]),  # type: ignore[index]
        {name: f.location.stat().st_size for name, f in named.items()},
        read_from={name: f.location for name, f in named.items()},
    )
    if skipped:
        parsed.unpersist()
        parsed = kept(parse_lines(raw, dataset))
    return parsed, skipped


def archive_pending(
    folders: Folders, files: Sequence[IntervalFile], ingested: Collection[str]
) -> int:
    """Move the files read that the bronze stream has not ingested into the archive."""
    moved = 0
    for f in files:
        if not f.pending(ingested):
            continue
        target = folders.archive / f.relative
        target.parent.mkdir(parents=True, exist_ok=True)
        f.location.rename(target)
        moved += 1
    return moved


# -- Delta I/O --------------------------------------------------------------------------------
@dataclass
class TableChange:
    """What the backfill did to one table."""

    table: str
    version_before: int
    version_after: int
    rows: int
    changed: bool
    note: str = ""

    def line(self) -> str:
        if not self.changed:
            return (
                f"backfill {self.table}: unchanged ({self.rows} rows), version {self.version_after}"
            )
        return (
            f"backfill {self.table}: {self.rows} rows written{self.note}, "
            f"version {self.version_before} -> {self.version_after}"
        )


def _read(spark: SparkSession, path: Location, version: int | None = None) -> DataFrame:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", str(version))
    return reader.load(str(path))


def _replace(
    df: DataFrame,
    path: Location,
    replace_where: str | None,
    partition_by: Sequence[str] = (),
) -> None:
    writer = df.write.format("delta").mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if replace_where is not None and table_version(path) >= 0:
        writer = writer.option("replaceWhere", replace_where)
    writer.save(str(path))


@dataclass(frozen=True)
class Replacement:
    """A table's new slice compared with its current one (`compare`); `commit` writes it."""

    table: str
    path: Location
    new: DataFrame
    version_before: int
    diff: SliceDiff
    exists: bool  # the table has a current slice to compare with

    @property
    def changed(self) -> bool:
        return not self.diff.same if self.exists else self.diff.new_rows > 0


def compare(
    table: str,
    path: Location,
    new: DataFrame,
    current: DataFrame | None,
    ignore: Sequence[str] = (),
) -> Replacement:
    """Whether `new` would change the table's slice `current` (None: no table yet): one job."""
    before = table_version(path)
    return Replacement(
        table, path, new, before, diff_slices(new, current, ignore), current is not None
    )


def commit(
    replacement: Replacement,
    replace_where: str | None,
    partition_by: Sequence[str] = (),
    write: DataFrame | None = None,
) -> TableChange:
    """Commit the new slice in place of the current one if it changes the table (else nothing).

    `write`: what replaces the rows `replace_where` selects when that is more than the slice
    (the new slice plus the selected rows outside it, written back unchanged); default the new
    slice.
    """
    if replacement.changed:
        rows = replacement.new if write is None else write
        _replace(rows, replacement.path, replace_where, partition_by)
    return TableChange(
        replacement.table,
        replacement.version_before,
        table_version(replacement.path),
        replacement.diff.new_rows,
        replacement.changed,
    )


# -- the job ----------------------------------------------------------------------------------
@dataclass
class BackfillResult:
    record: RunRecord
    changes: list[TableChange] = field(default_factory=list)


def run_backfill(
    spark: SparkSession | None,
    config: RunoffConfig,
    dataset_name: str,
    interval: Interval,
    report: Callable[[str], None] = say,
) -> BackfillResult:
    """Re-run the interval: bronze, quarantine, silver; one ledger row. See the module doc."""
    from delta_tables import definitions
    from delta_tables.catalog import Catalog
    from delta_tables.ledger import recorded_run
    from jobs.streaming.dataset import load_dataset
    from jobs.streaming.query import checkpoint_locks, error_line
    from quality.gate import Gate, record_checks, say_problems
    from quality.suites import checked_tables

    catalog = Catalog.load(config)
    dataset = load_dataset(catalog, dataset_name)
    remedy = (
        f"fix the interval's landing files (or the expectation in {dataset.spec.file}) and run "
        "the backfill again"
    )
    gates = {t.name: Gate(t, remedy) for t in checked_tables(catalog, dataset_name)}
    name = dataset.name
    started = time.perf_counter()
    record = RunRecord(dataset=name, layer=LAYER, trigger=TRIGGER)
    record.details = {"start": interval.start.isoformat(), "end": interval.end.isoformat()}
    result = BackfillResult(record)
    tables = catalog.tables(name)
    paths = {t.name: t.path for t in tables}

    def done(change: TableChange) -> None:
        result.changes.append(change)
        report(change.line())

    with recorded_run(config.runs_path, record, describe=error_line):
        record.versions_before = {t: table_version(p) for t, p in paths.items()}
        record.versions_after = dict(record.versions_before)
        try:
            checkpoints = [t.checkpoint for t in (tables.bronze, *tables.silver) if t.checkpoint]
            with checkpoint_locks(config, checkpoints, f"runoff backfill {name} {interval}"):
                # Rows (windows) of another definition are not written beside the table's own.
                definitions.refuse_changed_bronze(tables.bronze, dataset.spec, applied=False)
                definitions.refuse_changed(tables.silver, dataset.spec)
                record.details["definitions"] = definitions.fingerprints(dataset.spec)
                _backfill(spark, config, dataset, tables, interval, result, gates, report, done)
        finally:
            record.versions_after = {t: table_version(p) for t, p in paths.items()}
            record_checks(catalog.quality_results.path, record, list(gates.values()))
    say_problems(record, list(gates.values()))
    changed = [c.table for c in result.changes if c.changed]
    read = (
        f"{record.files} files, {record.rows} bronze rows, {record.quarantined} quarantined"
        if record.files
        else "the interval holds no data (no landing file, no bronze row)"
    )
    report(
        f"backfill {name} {interval}: {record.status} in {time.perf_counter() - started:.1f} s: "
        f"{read}, " + (f"changed {', '.join(changed)}" if changed else "no table changed")
    )
    return result


def _backfill(
    spark: SparkSession | None,
    config: RunoffConfig,
    dataset: Dataset,
    tables: DatasetTables,
    interval: Interval,
    result: BackfillResult,
    gates: dict[str, Gate],
    report: Callable[[str], None],
    done: Callable[[TableChange], None],
) -> None:
    """The run's work, under the dataset's checkpoint locks: every table's new rows pass its
    gate (`quality.gate`) before they replace its slice; a slice that does not change is
    neither checked nor written (nothing of it is published anew)."""
    from pyspark.sql import functions as F

    from jobs.bronze.parse import good_rows, quarantine_rows

    name, record = dataset.name, result.record
    folders = Folders.of(config, name)
    checkpoint = tables.bronze.checkpoint
    assert checkpoint is not None, "the catalog gives bronze its checkpoint"
    ingested = ingested_files(checkpoint)
    files, left = files_to_read(interval_files(folders, interval), interval, ingested)
    record.files = len(files)
    archived = sum(f.archived for f in files)
    report(
        f"backfill {name} {interval}: {len(files)} landing files "
        f"({archived} archived, {len(files) - archived} in landing)"
        + (
            f"; {len(left)} not ingested yet on days the interval covers partly: "
            f"left to `runoff bronze {name}`"
            if left
            else ""
        )
    )
    record.details["files_left_to_bronze"] = len(left)
    if spark is None:
        from jobs.spark import get_spark

        spark = get_spark(app_name=f"runoff-backfill-{name}", config=config)
    if not files:
        refuse_empty_interval(spark, tables.bronze, interval, folders)
        # Nothing to re-read and nothing of the interval in bronze: silver, computed from
        # bronze, has nothing of it to change either.
        return
    # A small interval's lines are parsed in interpreted projections (`projections_for`).
    with session_conf(spark, projections_for([f.location for f in files])):
        ingested_at = datetime.now(UTC)
        batch_id = max(last_committed(checkpoint) or 0, 0)
        parsed, skipped = interval_lines(spark, dataset, folders, files)
        fresh = good_rows(parsed, dataset, batch_id, ingested_at).persist()
        # The malformed lines that belong to the interval (see `with_event_key`).
        bad = (
            with_event_key(
                quarantine_rows(parsed, batch_id, ingested_at, skipped), dataset, folders.landing
            )
            .where(in_interval_times(F.col(EVENT_KEY), interval))
            .drop(EVENT_KEY)
            .persist()
        )
        try:
            counts = count_by_interval(fresh, interval)
            record.rows = counts.inside
            record.details["records_outside_interval"] = counts.outside
            if counts.outside_days:
                report(
                    f"backfill {name}: {counts.outside_days} records of the interval's files are "
                    f"dated outside their folders' days: left as bronze has them"
                )
            bronze = compare_bronze(spark, tables.bronze, interval, fresh, folders.landing)
            quarantine = compare_quarantine(
                spark, tables.quarantine, dataset, interval, bad, folders.landing
            )
            record.quarantined = quarantine.replacement.diff.new_rows
            try:
                # The gate: what both tables would get is checked before either is written.
                for replacement in (bronze, quarantine.replacement):
                    if replacement.changed:
                        gate = gates[replacement.table]
                        gate.check(replacement.new, batch_id, replacement.diff.new_rows)
                done(commit(bronze, bronze_predicate(interval), ("event_date",)))
                done(quarantine.commit(interval))
            finally:
                quarantine.release()
        finally:
            bad.unpersist()
            fresh.unpersist()
            parsed.unpersist()
        record.details["archived_files"] = archive_pending(folders, files, ingested)
        bronze_version = table_version(tables.bronze.path)
        if bronze_version < 0:
            report(f"backfill {name}: no bronze table yet: silver left alone")
        else:
            # Silver from the bronze snapshot just written (not whatever comes later).
            table = _read(spark, tables.bronze.path, bronze_version)
            near = bronze_near(table, dataset, interval).persist()
            try:
                for aggregate in dataset.aggregates:
                    source = near if aggregate.window is not None else table
                    gate = gates[aggregate.table]
                    change = replace_silver(
                        spark,
                        tables.named(aggregate.table),
                        dataset,
                        aggregate,
                        source,
                        interval,
                        gate,
                        batch_id,
                    )
                    done(change)
            finally:
                near.unpersist()
        record.details["tables"] = {
            c.table: {"changed": c.changed, "rows": c.rows} for c in result.changes
        }


@dataclass(frozen=True)
class RecordCounts:
    """Records of the files read: in the interval, outside it, and outside the files' days."""

    inside: int
    outside: int
    outside_days: int


def count_by_interval(fresh: DataFrame, interval: Interval) -> RecordCounts:
    """The records of the files read by where their event time lies, in one Spark job."""
    from pyspark.sql import functions as F

    inside = in_slice(interval)
    days = in_interval_days(F.col("event_date"), interval)
    row = fresh.agg(
        F.count(F.when(inside, 1)).alias("inside"),
        F.count(F.when(~inside | inside.isNull(), 1)).alias("outside"),
        F.count(F.when(~days | days.isNull(), 1)).alias("outside_days"),
    ).first()
    if row is None:
        return RecordCounts(0, 0, 0)
    return RecordCounts(int(row["inside"]), int(row["outside"]), int(row["outside_days"]))


def bronze_near(bronze: DataFrame, dataset: Dataset, interval: Interval) -> DataFrame:
    """The bronze rows any windowed aggregate of the dataset needs (by event date)."""
    from pyspark.sql import functions as F

    windows = [parse_duration(a.window) for a in dataset.aggregates if a.window is not None]
    if not windows:
        return bronze.limit(0)
    low, high = window_input_range(interval, max(windows))
    return bronze.where(
        (F.col("event_date") >= F.lit(low.date())) & (F.col("event_date") <= F.lit(high.date()))
    )


def refuse_empty_interval(
    spark: SparkSession, bronze: Table, interval: Interval, folders: Folders
) -> None:
    """No files for the interval anywhere: refuse rather than empty its bronze slice."""
    from pyspark.sql import functions as F

    path, dataset = bronze.path, bronze.dataset
    if table_version(path) < 0:
        return
    landing = folders.landing
    rows = (
        _read(spark, path)
        .where(in_slice(interval) & in_interval_folders(F.col("_source_file"), interval, landing))
        .count()
    )
    if rows:
        raise RunoffError(
            f"no landing files of {dataset} {interval} in {landing} or its archive, but "
            f"bronze holds {rows} rows from them: refusing to delete them (restore the files, "
            f"or rebuild with `runoff reset {dataset} --layer bronze --yes`)"
        )


def compare_bronze(
    spark: SparkSession,
    bronze: Table,
    interval: Interval,
    fresh: DataFrame,
    landing: Location,
) -> Replacement:
    """The bronze slice of the interval (see `bronze_slice`) against the table's."""
    path = bronze.path
    version = table_version(path)
    if version < 0:
        current = None
        new = fresh.where(in_slice(interval))
    else:
        current = _read(spark, path, version).where(in_slice(interval))
        new = bronze_slice(fresh, current, interval, landing)
    return compare(bronze.name, path, new, current, BRONZE_RUN_COLUMNS)


@dataclass
class QuarantineReplacement:
    """The quarantine rows of the interval against the table's, and what a commit rewrites:
    `keyed` holds the table's rows of the interval's folders with their `EVENT_KEY`."""

    replacement: Replacement
    keyed: DataFrame | None

    def commit(self, interval: Interval) -> TableChange:
        """One `replaceWhere` on the `_source_file` of the interval's rows, old and new; the
        other rows of those files go back as they are."""
        from pyspark.sql import functions as F

        partition_by = ("ingest_date",)
        if self.keyed is None or not self.replacement.changed:  # no table yet, or nothing to do
            return commit(self.replacement, None, partition_by)
        bad = self.replacement.new
        inside = in_interval_times(F.col(EVENT_KEY), interval)
        current = self.keyed.where(inside).select("_source_file")
        touched = current.unionByName(bad.select("_source_file")).distinct().collect()
        files = sorted(r["_source_file"] for r in touched)
        # Rows of those files outside the interval (a null key too: no interval holds it).
        others = self.keyed.where(
            F.col("_source_file").isin(files) & F.coalesce(~inside, F.lit(True))
        ).drop(EVENT_KEY)
        return commit(
            self.replacement,
            quarantine_predicate(files),
            partition_by,
            write=bad.unionByName(others),
        )

    def release(self) -> None:
        if self.keyed is not None:
            self.keyed.unpersist()


def compare_quarantine(
    spark: SparkSession,
    quarantine: Table,
    dataset: Dataset,
    interval: Interval,
    bad: DataFrame,
    landing: Location,
) -> QuarantineReplacement:
    """`bad` (the malformed lines of the files read that belong to the interval) against the
    table's rows of the interval: those of the interval's folders whose event key
    (`with_event_key`) lies in it. Rows of files outside the folders are never touched."""
    from pyspark.sql import functions as F

    table, path = quarantine.name, quarantine.path
    version = table_version(path)
    if version < 0:
        return QuarantineReplacement(compare(table, path, bad, None), None)
    folders = _read(spark, path, version).where(
        in_interval_folders(F.col("_source_file"), interval, landing)
    )
    keyed = with_event_key(folders, dataset, landing).persist()  # compared, then maybe written
    current = keyed.where(in_interval_times(F.col(EVENT_KEY), interval)).drop(EVENT_KEY)
    return QuarantineReplacement(compare(table, path, bad, current, QUARANTINE_RUN_COLUMNS), keyed)


def replace_silver(
    spark: SparkSession,
    silver: Table,
    dataset: Dataset,
    aggregate: SilverAggregate,
    bronze: DataFrame,
    interval: Interval,
    gate: Gate | None = None,
    batch_id: int = 0,
) -> TableChange:
    """Recompute one silver table's windows of the interval (or all of it, without windows);
    `gate` checks the recomputed rows first when they change the table."""
    path = silver.path
    exists = table_version(path) >= 0
    if aggregate.window is None:
        new = aggregate.transform(bronze, dataset.watermark)
        current = _read(spark, path) if exists else None
        replace_where = None
    else:
        new = recompute_windows(bronze, aggregate, dataset.watermark, interval)
        current = current_windows(_read(spark, path), interval) if exists else None
        replace_where = window_predicate(interval)
    new = new.persist()  # compared, then maybe checked and written
    try:
        replacement = compare(aggregate.table, path, new, current)
        if gate is not None and replacement.changed:
            gate.check(new, batch_id, replacement.diff.new_rows)
        return commit(replacement, replace_where, aggregate.partition_by)
    finally:
        new.unpersist()


def cmd_backfill(config: RunoffConfig, args: argparse.Namespace) -> int:
    interval = Interval(args.start, args.end)
    result = run_backfill(None, config, args.dataset, interval)
    return 0 if result.record.status == "success" else 1
