"""`runoff backfill <dataset> --start DAY --end DAY`: idempotent re-run of the days [start, end).

Input: the landing files of the interval, i.e. every file below `date=D/` for each day D in
[start, end), found both in the landing folder and in the bronze archive (files the bronze stream
has ingested are moved there, `jobs.bronze.landing_dirs`); when both hold the same file name the
landing copy (the newer delivery) wins. Output: one commit per table that changed, of
- bronze: the slice `event_date >= start AND event_date < end`, replaced (`replaceWhere`) by the
  records of the interval's files whose event date lies in the interval, plus the slice's rows
  that came from files outside the interval's folders (late records delivered on a later day),
  which are kept as they are. Records of the interval's files dated outside the interval are
  outside the slice: they are left as bronze has them (counted in the output; the generator never
  writes such records, a file never spans midnight);
- quarantine: every row whose `_source_file` lies in the interval's folders (quarantine is
  partitioned by ingest date, not event date) replaced by the malformed lines of the files;
- every silver table, recomputed as a batch job from the new bronze snapshot:
  windowed tables: every window that overlaps the interval, `window_end > start AND
  window_start < end`, is replaced by the aggregate of the bronze rows with
  `event_time` in [start - window, end + window) (which holds every row of every such window,
  so the recomputed windows are complete; windows that do not overlap the interval are neither
  read from the result nor touched). Tumbling windows align with days, so for them this is
  exactly the windows starting in [start, end); a sliding window that straddles an edge (10
  minutes sliding by 5: [start - 5 min, start + 5 min)) is recomputed too, from bronze rows on
  both sides of the edge. `lines_word_counts` has no window: it is recomputed from all of bronze.
  Recomputed windows count every bronze row, including rows the live stream's watermark
  dropped: a backfill is how late data reaches silver.

Idempotent: each table's new slice is compared with its current slice first (bronze and
quarantine ignoring `_ingested_at`, `_batch_id` and `ingest_date`; doubles rounded to 9
decimals) and a table whose rows would not change gets no commit, so a second run adds no
version anywhere. Backfilled rows carry `_ingested_at` = the backfill's start and `_batch_id` =
the last micro-batch the bronze stream had committed (0 before the first).

Live streams: the checkpoints are never written. Files the bronze stream has not seen yet
(pending in landing) are ingested here and then moved to the archive, as the stream does with
the files it ingests, so the stream never ingests them a second time. The silver streams read
bronze with `skipChangeCommits`, so they do not see the backfill's replace commit; the silver
tables get the recomputed windows from the backfill itself. Backfill days whose windows the
watermark has not closed yet may be updated again by the live silver stream afterwards.
Concurrency: the command holds the bronze checkpoint lock and every silver checkpoint lock of
the dataset for its whole run, so no scheduled run of the dataset interleaves with it (such a
run fails at once naming the backfill, and Airflow retries it); one ledger row, layer "backfill".
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from core.config import RunoffConfig
from core.console import say
from core.errors import ConfigError, RunoffError
from core.ledger import RunRecord
from core.locking import checkpoint_lock
from delta_tables.writes import table_version
from jobs.status import bronze_checkpoint, ingested_files, is_data_file, last_batch_id

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from jobs.dataset import Dataset, SilverAggregate
    from quality.gate import Gate

LAYER = "backfill"
TRIGGER = "batch"
# Columns that say when and by which run a row was written, not what it holds.
BRONZE_RUN_COLUMNS = ("_ingested_at", "_batch_id")
QUARANTINE_RUN_COLUMNS = ("_ingested_at", "_batch_id", "ingest_date")
FLOAT_DECIMALS = 9
_DURATION = re.compile(r"\s*(\d+)\s+(second|minute|hour|day|week)s?\s*")
_UNITS = {
    "second": timedelta(seconds=1),
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
}


# -- the interval (pure) --------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    """Whole UTC days [start, end)."""

    start: date
    end: date

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ConfigError(
                f"--end {self.end.isoformat()} must be after --start {self.start.isoformat()} "
                "(the interval [start, end) would be empty)"
            )

    @property
    def days(self) -> list[date]:
        return [self.start + timedelta(days=i) for i in range((self.end - self.start).days)]

    @property
    def start_time(self) -> datetime:
        return datetime(self.start.year, self.start.month, self.start.day, tzinfo=UTC)

    @property
    def end_time(self) -> datetime:
        return datetime(self.end.year, self.end.month, self.end.day, tzinfo=UTC)

    def __str__(self) -> str:
        return f"[{self.start.isoformat()}, {self.end.isoformat()})"


def parse_duration(text: str) -> timedelta:
    """`"10 minutes"` -> timedelta(minutes=10) (the Spark interval strings of the datasets)."""
    match = _DURATION.fullmatch(text)
    if not match:
        raise ConfigError(f"window {text!r} is not a duration like '10 minutes' or '1 hour'")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _sql_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def bronze_predicate(interval: Interval) -> str:
    """The bronze slice of the interval (`replaceWhere`)."""
    start, end = interval.start.isoformat(), interval.end.isoformat()
    return f"event_date >= '{start}' AND event_date < '{end}'"


def window_predicate(interval: Interval) -> str:
    """The silver windows that overlap the interval (`replaceWhere`)."""
    return (
        f"window_end > TIMESTAMP '{_sql_time(interval.start_time)}' AND "
        f"window_start < TIMESTAMP '{_sql_time(interval.end_time)}'"
    )


def window_input_range(interval: Interval, window: timedelta) -> tuple[datetime, datetime]:
    """Event times [low, high) holding every row of every window overlapping the interval."""
    return interval.start_time - window, interval.end_time + window


def quarantine_predicate(source_files: Sequence[str]) -> str:
    """Quarantine rows of the given files (`replaceWhere`); never matches when there are none."""
    if not source_files:
        return "_source_file IS NULL AND _source_file IS NOT NULL"
    quoted = ", ".join("'" + f.replace("'", "''") + "'" for f in sorted(source_files))
    return f"_source_file IN ({quoted})"


def folder_day_pattern(landing_dir: Path) -> str:
    """Regex whose group 1 is the `date=` folder of a file below `landing_dir` (path or URI)."""
    folder = f"/{re.escape(landing_dir.parent.name)}/{re.escape(landing_dir.name)}/"
    return folder + r"date=(\d{4}-\d{2}-\d{2})/"


# -- pure transforms ------------------------------------------------------------------------
def in_interval_folders(source_file: Column, interval: Interval, landing_dir: Path) -> Column:
    """True for rows whose `_source_file` lies in a `date=D/` folder with D in the interval."""
    from pyspark.sql import functions as F

    day = F.regexp_extract(source_file, folder_day_pattern(landing_dir), 1)
    return (day != "") & (day >= interval.start.isoformat()) & (day < interval.end.isoformat())


def in_interval_dates(event_date: Column, interval: Interval) -> Column:
    from pyspark.sql import functions as F

    return (event_date >= F.lit(interval.start)) & (event_date < F.lit(interval.end))


def bronze_slice(
    fresh: DataFrame, current: DataFrame, interval: Interval, landing_dir: Path
) -> DataFrame:
    """The new bronze slice: fresh rows of the interval's files dated in the interval, plus the
    current slice's rows from files outside the interval's folders (kept unchanged)."""
    from pyspark.sql import functions as F

    new = fresh.where(in_interval_dates(F.col("event_date"), interval))
    kept = current.where(
        in_interval_dates(F.col("event_date"), interval)
        & ~in_interval_folders(F.col("_source_file"), interval, landing_dir)
    )
    return new.unionByName(kept)


def recompute_windows(
    bronze: DataFrame, aggregate: SilverAggregate, watermark: str, interval: Interval
) -> DataFrame:
    """Every window of `aggregate` that overlaps the interval, from the bronze rows it needs."""
    from pyspark.sql import functions as F

    assert aggregate.window is not None
    low, high = window_input_range(interval, parse_duration(aggregate.window))
    rows = bronze.where(
        (F.col("event_date") >= F.lit(low.date()))
        & (F.col("event_date") <= F.lit(high.date()))
        & (F.col("event_time") >= F.lit(low))
        & (F.col("event_time") < F.lit(high))
    )
    result = aggregate.transform(rows, watermark)
    return result.where(
        (F.col("window_end") > F.lit(interval.start_time))
        & (F.col("window_start") < F.lit(interval.end_time))
    )


def current_windows(silver: DataFrame, interval: Interval) -> DataFrame:
    from pyspark.sql import functions as F

    return silver.where(
        (F.col("window_end") > F.lit(interval.start_time))
        & (F.col("window_start") < F.lit(interval.end_time))
    )


def comparable(df: DataFrame, ignore: Sequence[str] = ()) -> DataFrame:
    """The columns that make up a row's content, sorted by name, doubles rounded."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType

    columns = []
    for f in sorted(df.schema.fields, key=lambda f: f.name):
        if f.name in ignore:
            continue
        column = F.col(f"`{f.name}`")
        if isinstance(f.dataType, DoubleType | FloatType):
            column = F.round(column, FLOAT_DECIMALS)
        columns.append(column.alias(f.name))
    return df.select(*columns)


@dataclass(frozen=True)
class SliceDiff:
    """Rows of a new slice, and how many distinct rows differ in multiplicity from the old."""

    new_rows: int
    differing: int

    @property
    def same(self) -> bool:
        return self.differing == 0


def diff_slices(new: DataFrame, old: DataFrame | None, ignore: Sequence[str] = ()) -> SliceDiff:
    """Compare two slices as multisets of rows (ignoring some columns) in one Spark job."""
    from pyspark.sql import functions as F

    a = comparable(new, ignore)
    if old is None:
        return SliceDiff(a.count(), -1)
    b = comparable(old, ignore)
    if a.columns != b.columns:
        return SliceDiff(a.count(), -1)
    sides = (
        a.withColumn("_new", F.lit(1))
        .withColumn("_old", F.lit(0))
        .unionByName(b.withColumn("_new", F.lit(0)).withColumn("_old", F.lit(1)))
    )
    grouped = sides.groupBy(*[F.col(f"`{c}`") for c in a.columns]).agg(
        F.sum("_new").alias("_new"), F.sum("_old").alias("_old")
    )
    row = grouped.agg(
        F.coalesce(F.sum("_new"), F.lit(0)).alias("new_rows"),
        F.count(F.when(F.col("_new") != F.col("_old"), 1)).alias("differing"),
    ).first()
    assert row is not None
    return SliceDiff(int(row["new_rows"]), int(row["differing"]))


def same_rows(left: DataFrame, right: DataFrame, ignore: Sequence[str] = ()) -> bool:
    """Whether two DataFrames hold the same multiset of rows (ignoring some columns)."""
    return diff_slices(left, right, ignore).same


# -- landing files --------------------------------------------------------------------------
@dataclass(frozen=True)
class IntervalFile:
    """A landing file of the interval: where it landed and where it is now."""

    relative: Path  # below the landing dir, e.g. date=2024-01-01/part-0.json
    location: Path  # the file to read (landing or archive)
    archived: bool


def interval_files(config: RunoffConfig, dataset: str, interval: Interval) -> list[IntervalFile]:
    """The interval's files from the landing folder and the archive (landing wins)."""
    from jobs.bronze import landing_dirs

    landing, archive = landing_dirs(config, dataset)
    found: dict[Path, IntervalFile] = {}
    for root, archived in ((archive, True), (landing, False)):
        for day in interval.days:
            folder = root / f"date={day.isoformat()}"
            if not folder.is_dir():
                continue
            for path in sorted(folder.rglob("*")):
                relative = path.relative_to(root)
                if path.is_file() and is_data_file(relative):
                    found[relative] = IntervalFile(relative, path, archived)
    return [found[k] for k in sorted(found)]


def strip_segments_pattern(segments: int) -> str:
    """Regex removing the first `segments` path segments after a `file:` URI's scheme."""
    return rf"^(file:(?://)?)(?:/[^/]+){{{segments}}}(?=/)"


def read_interval_lines(
    spark: SparkSession, config: RunoffConfig, dataset: str, files: Sequence[IntervalFile]
) -> DataFrame:
    """The lines of `files` as `jobs.bronze.RAW_SCHEMA`, `_source_file` = the landing URI.

    Spark gives an archived file the URI of its archive path, which is the archive root followed
    by the landing path: dropping the archive root's segments gives exactly the URI the stream
    recorded when it read the file in the landing folder.
    """
    from pyspark.sql import functions as F

    from jobs.bronze import RAW_SCHEMA, archive_dir

    def lines(paths: list[str]) -> DataFrame:
        return (
            spark.read.format("text")
            .option("lineSep", "\n")
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
        landing_root = _landing(config, dataset).absolute()
        # archive_dir = <archive root><absolute landing dir>: the root's segments come first.
        segments = len(archive_dir(config, dataset).parts) - len(landing_root.parts)
        as_landing = F.regexp_replace("_source_file", strip_segments_pattern(segments), "$1")
        frame = frame.unionByName(lines(archived).withColumn("_source_file", as_landing))
    return frame


def archive_pending(config: RunoffConfig, dataset: str, files: Sequence[IntervalFile]) -> int:
    """Move the interval's files the bronze stream has not ingested into the archive."""
    from jobs.bronze import archive_dir

    seen = ingested_files(bronze_checkpoint(config, dataset))
    archive = archive_dir(config, dataset)
    moved = 0
    for f in files:
        if f.archived or os.path.realpath(f.location) in seen:
            continue
        target = archive / f.relative
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(f.location, target)
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


def _read(spark: SparkSession, path: Path, version: int | None = None) -> DataFrame:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", str(version))
    return reader.load(str(path))


def _replace(
    df: DataFrame,
    path: Path,
    replace_where: str | None,
    partition_by: Sequence[str] = (),
) -> None:
    writer = df.write.format("delta").mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if replace_where is not None and table_version(path) >= 0:
        writer = writer.option("replaceWhere", replace_where)
    writer.save(str(path))


def replace_slice(
    name: str,
    path: Path,
    new: DataFrame,
    current: DataFrame | None,
    replace_where: str | None,
    ignore: Sequence[str] = (),
    partition_by: Sequence[str] = (),
) -> TableChange:
    """Commit `new` in place of `current` (the table's slice) unless they hold the same rows."""
    before = table_version(path)
    diff = diff_slices(new, current, ignore)
    changed = diff.new_rows > 0 if current is None else not diff.same
    if changed:
        _replace(new, path, replace_where, partition_by)
    return TableChange(name, before, table_version(path), diff.new_rows, changed)


# -- the job ----------------------------------------------------------------------------------
@contextmanager
def hold_locks(config: RunoffConfig, dataset: Dataset, what: str) -> Iterator[None]:
    """The bronze checkpoint's lock and every silver checkpoint's lock of the dataset."""
    with ExitStack() as stack:
        stack.enter_context(checkpoint_lock(bronze_checkpoint(config, dataset.name), what))
        for aggregate in dataset.aggregates:
            stack.enter_context(
                checkpoint_lock(config.checkpoint_dir("silver", aggregate.table), what)
            )
        yield


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
    from delta_tables.catalog import Catalog
    from jobs.dataset import load_dataset
    from jobs.streaming import recorded_run
    from quality.gate import Gate, say_problems
    from quality.gate import record_run as record_checks
    from quality.suites import dataset_tables

    catalog = Catalog.load(config)
    dataset = load_dataset(catalog, dataset_name)
    remedy = (
        f"fix the interval's landing files (or the expectation in {dataset.spec.file}) and run "
        "the backfill again"
    )
    gates = {t.name: Gate(t, remedy) for t in dataset_tables(catalog, dataset_name)}
    name = dataset.name
    started = time.perf_counter()
    record = RunRecord(dataset=name, layer=LAYER, trigger=TRIGGER)
    record.details = {"start": interval.start.isoformat(), "end": interval.end.isoformat()}
    result = BackfillResult(record)
    tables = {
        f"bronze_{name}": config.bronze_path(name),
        f"quarantine_{name}": config.quarantine_path(name),
        **{a.table: config.silver_path(a.table) for a in dataset.aggregates},
    }

    def done(change: TableChange) -> None:
        result.changes.append(change)
        report(change.line())

    with recorded_run(config.runs_path, record):
        record.versions_before = {t: table_version(p) for t, p in tables.items()}
        record.versions_after = dict(record.versions_before)
        try:
            with hold_locks(config, dataset, f"runoff backfill {name} {interval}"):
                _backfill(spark, config, dataset, interval, result, gates, report, done)
        finally:
            record.versions_after = {t: table_version(p) for t, p in tables.items()}
            record_checks(catalog.quality_results.path, record, list(gates.values()))
    say_problems(record, list(gates.values()))
    changed = [c.table for c in result.changes if c.changed]
    report(
        f"backfill {name} {interval}: {record.status} in {time.perf_counter() - started:.1f} s: "
        f"{record.files} files, {record.rows} bronze rows, {record.quarantined} quarantined, "
        + (f"changed {', '.join(changed)}" if changed else "no table changed")
    )
    return result


def _backfill(
    spark: SparkSession | None,
    config: RunoffConfig,
    dataset: Dataset,
    interval: Interval,
    result: BackfillResult,
    gates: dict[str, Gate],
    report: Callable[[str], None],
    done: Callable[[TableChange], None],
) -> None:
    """The run's work, under the dataset's checkpoint locks: every table's new rows pass its
    gate (`quality.gate`) before they replace its slice."""
    from jobs.bronze import good_rows, parse_lines, quarantine_rows

    name, record = dataset.name, result.record
    files = interval_files(config, name, interval)
    record.files = len(files)
    archived = sum(f.archived for f in files)
    report(
        f"backfill {name} {interval}: {len(files)} landing files "
        f"({archived} archived, {len(files) - archived} in landing)"
    )
    if spark is None:
        from jobs.spark import get_spark

        spark = get_spark(app_name=f"runoff-backfill-{name}", config=config)
    if not files:
        refuse_empty_interval(spark, config, name, interval)
    ingested_at = datetime.now(UTC)
    batch_id = max(last_batch_id(bronze_checkpoint(config, name)) or 0, 0)
    raw = read_interval_lines(spark, config, name, files)
    parsed = parse_lines(raw, dataset).persist()
    fresh = good_rows(parsed, dataset, batch_id, ingested_at).persist()
    try:
        inside, outside = count_by_interval(fresh, interval)
        record.rows = inside
        record.details["records_outside_interval"] = outside
        if outside:
            report(
                f"backfill {name}: {outside} records of the interval's files are dated "
                f"outside {interval}: left as bronze has them"
            )
        bad = quarantine_rows(parsed, batch_id, ingested_at)
        gates[f"bronze_{name}"].check(fresh, batch_id, inside + outside)
        gates[f"quarantine_{name}"].check(bad, batch_id, bad.count())
        done(replace_bronze(spark, config, name, interval, fresh))
        done(replace_quarantine(spark, config, name, interval, bad))
        record.quarantined = result.changes[-1].rows
    finally:
        fresh.unpersist()
        parsed.unpersist()
    record.details["archived_files"] = archive_pending(config, name, files)
    bronze_version = table_version(config.bronze_path(name))
    if bronze_version < 0:
        report(f"backfill {name}: no bronze table yet: silver left alone")
    else:
        # Silver from the bronze snapshot just written (not whatever comes later).
        bronze = _read(spark, config.bronze_path(name), bronze_version)
        near = bronze_near(bronze, dataset, interval).persist()
        try:
            for aggregate in dataset.aggregates:
                source = near if aggregate.window is not None else bronze
                gate = gates[aggregate.table]
                change = replace_silver(
                    spark, config, dataset, aggregate, source, interval, gate, batch_id
                )
                done(change)
        finally:
            near.unpersist()
    record.details["tables"] = {
        c.table: {"changed": c.changed, "rows": c.rows} for c in result.changes
    }


def count_by_interval(fresh: DataFrame, interval: Interval) -> tuple[int, int]:
    """(rows dated inside the interval, rows dated outside it), in one Spark job."""
    from pyspark.sql import functions as F

    inside = in_interval_dates(F.col("event_date"), interval)
    row = fresh.agg(
        F.count(F.when(inside, 1)).alias("inside"),
        F.count(F.when(~inside | inside.isNull(), 1)).alias("outside"),
    ).first()
    return (int(row["inside"]), int(row["outside"])) if row else (0, 0)


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


def _landing(config: RunoffConfig, dataset: str) -> Path:
    from delta_tables.catalog import Catalog

    return Catalog.load(config).landing_dir(dataset)


def refuse_empty_interval(
    spark: SparkSession, config: RunoffConfig, dataset: str, interval: Interval
) -> None:
    """No files for the interval anywhere: refuse rather than empty its bronze slice."""
    from pyspark.sql import functions as F

    path = config.bronze_path(dataset)
    if table_version(path) < 0:
        return
    landing = _landing(config, dataset)
    rows = (
        _read(spark, path)
        .where(
            in_interval_dates(F.col("event_date"), interval)
            & in_interval_folders(F.col("_source_file"), interval, landing)
        )
        .count()
    )
    if rows:
        raise RunoffError(
            f"no landing files of {dataset} {interval} in {landing} or its archive, but "
            f"bronze holds {rows} rows from them: refusing to delete them (restore the files, "
            f"or rebuild with `runoff reset {dataset} --layer bronze --yes`)"
        )


def replace_bronze(
    spark: SparkSession, config: RunoffConfig, dataset: str, interval: Interval, fresh: DataFrame
) -> TableChange:
    """Replace the bronze slice of the interval (see `bronze_slice`)."""
    from pyspark.sql import functions as F

    path = config.bronze_path(dataset)
    version = table_version(path)
    if version < 0:
        current = None
        new = fresh.where(in_interval_dates(F.col("event_date"), interval))
    else:
        table = _read(spark, path, version)
        current = table.where(in_interval_dates(F.col("event_date"), interval))
        new = bronze_slice(fresh, current, interval, _landing(config, dataset))
    return replace_slice(
        f"bronze_{dataset}",
        path,
        new,
        current,
        bronze_predicate(interval),
        BRONZE_RUN_COLUMNS,
        ("event_date",),
    )


def replace_quarantine(
    spark: SparkSession,
    config: RunoffConfig,
    dataset: str,
    interval: Interval,
    bad: DataFrame,
) -> TableChange:
    """Replace the quarantine rows of the interval's folders by the files' malformed lines."""
    from pyspark.sql import functions as F

    path = config.quarantine_path(dataset)
    landing = _landing(config, dataset)
    new_files = {r["_source_file"] for r in bad.select("_source_file").distinct().collect()}
    version = table_version(path)
    if version < 0:
        return replace_slice(f"quarantine_{dataset}", path, bad, None, None, (), ("ingest_date",))
    current_slice = _read(spark, path, version).where(
        in_interval_folders(F.col("_source_file"), interval, landing)
    )
    old_files = {
        r["_source_file"] for r in current_slice.select("_source_file").distinct().collect()
    }
    return replace_slice(
        f"quarantine_{dataset}",
        path,
        bad,
        current_slice,
        quarantine_predicate(sorted(old_files | new_files)),
        QUARANTINE_RUN_COLUMNS,
        ("ingest_date",),
    )


def replace_silver(
    spark: SparkSession,
    config: RunoffConfig,
    dataset: Dataset,
    aggregate: SilverAggregate,
    bronze: DataFrame,
    interval: Interval,
    gate: Gate | None = None,
    batch_id: int = 0,
) -> TableChange:
    """Recompute one silver table's windows of the interval (or all of it, without windows);
    `gate` checks the recomputed rows first."""
    path = config.silver_path(aggregate.table)
    exists = table_version(path) >= 0
    if aggregate.window is None:
        new = aggregate.transform(bronze, dataset.watermark)
        current = _read(spark, path) if exists else None
        replace_where = None
    else:
        new = recompute_windows(bronze, aggregate, dataset.watermark, interval)
        current = current_windows(_read(spark, path), interval) if exists else None
        replace_where = window_predicate(interval)
    if gate is None:
        return replace_slice(
            aggregate.table, path, new, current, replace_where, partition_by=aggregate.partition_by
        )
    new = new.persist()  # counted, checked, compared and written
    try:
        gate.check(new, batch_id, new.count())
        return replace_slice(
            aggregate.table, path, new, current, replace_where, partition_by=aggregate.partition_by
        )
    finally:
        new.unpersist()


def cmd_backfill(config: RunoffConfig, args: argparse.Namespace) -> int:
    interval = Interval(args.start, args.end)
    result = run_backfill(None, config, args.dataset, interval)
    return 0 if result.record.status == "success" else 1
