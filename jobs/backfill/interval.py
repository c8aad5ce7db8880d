"""The interval of `runoff backfill` and everything decided by it alone (pure: no writes).

`Interval` is [start, end) in UTC (`--start`/`--end` parsed by `Interval.parse`); from it follow
the SQL predicates of each table's slice, the windows a silver table recomputes and the bronze
rows they need, the landing files (live and archived) the interval reads, and the comparison of
a new slice with the current one that makes a second run change nothing. The job that reads and
writes is `jobs.backfill.job`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from core.config import Location, RunoffConfig, real_name
from core.errors import ConfigError
from core.specs import parse_duration
from jobs.checkpoints.landing_changes import is_data_file
from jobs.streaming.sql import sql_timestamp

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from jobs.streaming.dataset import Dataset, SilverAggregate

# Columns that say when and by which run a row was written, not what it holds.
BRONZE_RUN_COLUMNS = ("_ingested_at", "_batch_id")
QUARANTINE_RUN_COLUMNS = ("_ingested_at", "_batch_id", "ingest_date")
FLOAT_DECIMALS = 9


# -- the interval (pure) --------------------------------------------------------------------
def utc_moment(value: date | datetime) -> datetime:
    """An aware UTC datetime: a date is its midnight UTC, a naive datetime is taken as UTC."""
    if isinstance(value, datetime):  # before `date`: a datetime is a date too
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def is_midnight(moment: datetime) -> bool:
    return (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0)


def moment_text(moment: datetime) -> str:
    """`2024-01-02T05:00:00Z` (microseconds only when there are some)."""
    spec = "microseconds" if moment.microsecond else "seconds"
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec=spec) + "Z"


@dataclass(frozen=True)
class Interval:
    """Event times [start, end), aware UTC datetimes (naive ones are taken as UTC)."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        # Normalized once, so that every predicate and comparison below is in UTC.
        object.__setattr__(self, "start", utc_moment(self.start))
        object.__setattr__(self, "end", utc_moment(self.end))
        if self.end <= self.start:
            start, end = self.texts
            raise ConfigError(
                f"--end {end} must be after --start {start} "
                "(the interval [start, end) would be empty)"
            )

    @property
    def texts(self) -> tuple[str, str]:
        """The bounds as people write them: dates when both are midnight UTC, else UTC times."""
        if is_midnight(self.start) and is_midnight(self.end):
            return self.start.date().isoformat(), self.end.date().isoformat()
        return moment_text(self.start), moment_text(self.end)

    @property
    def days(self) -> list[date]:
        """The UTC days the interval overlaps: the `date=D/` folders it reads."""
        first, last = self.start.date(), (self.end - timedelta(microseconds=1)).date()
        return [first + timedelta(days=i) for i in range((last - first).days + 1)]

    def covers_day(self, day: date) -> bool:
        """Whether the whole UTC day lies in the interval."""
        midnight = utc_moment(day)
        return self.start <= midnight and midnight + timedelta(days=1) <= self.end

    def holds(self, moment: datetime) -> bool:
        return self.start <= utc_moment(moment) < self.end

    def __str__(self) -> str:
        start, end = self.texts
        return f"[{start}, {end})"


def _sql_day(day: date) -> str:
    return f"DATE '{day.isoformat()}'"


def bronze_predicate(interval: Interval) -> str:
    """The bronze slice of the interval (`replaceWhere`): its event times, and first the
    partitions (`event_date`) that can hold them, so that only those are read."""
    days = interval.days
    return (
        f"event_date >= {_sql_day(days[0])} AND event_date <= {_sql_day(days[-1])} AND "
        f"event_time >= {sql_timestamp(interval.start)} AND "
        f"event_time < {sql_timestamp(interval.end)}"
    )


def window_predicate(interval: Interval) -> str:
    """The silver windows that overlap the interval (`replaceWhere`)."""
    start, end = sql_timestamp(interval.start), sql_timestamp(interval.end)
    return f"window_end > {start} AND window_start < {end}"


def window_input_range(interval: Interval, window: timedelta) -> tuple[datetime, datetime]:
    """Event times [low, high) holding every row of every window overlapping the interval."""
    return interval.start - window, interval.end + window


def quarantine_predicate(source_files: Sequence[str]) -> str:
    """Quarantine rows of the given files (`replaceWhere`); never matches when there are none."""
    if not source_files:
        return "_source_file IS NULL AND _source_file IS NOT NULL"
    quoted = ", ".join("'" + f.replace("'", "''") + "'" for f in sorted(source_files))
    return f"_source_file IN ({quoted})"


def folder_day_pattern(landing_dir: Location) -> str:
    """Regex whose group 1 is the `date=` folder of a file below `landing_dir` (path or URI)."""
    folder = f"/{re.escape(landing_dir.parent.name)}/{re.escape(landing_dir.name)}/"
    return folder + r"date=(\d{4}-\d{2}-\d{2})/"


# -- pure transforms ------------------------------------------------------------------------
EVENT_KEY = "_event_key"  # a quarantine row's moment while it is placed in an interval


def in_interval_folders(source_file: Column, interval: Interval, landing_dir: Location) -> Column:
    """True for rows whose `_source_file` lies in a `date=D/` folder of a day of the interval."""
    from pyspark.sql import functions as F

    day = F.regexp_extract(source_file, folder_day_pattern(landing_dir), 1)
    first, last = interval.days[0].isoformat(), interval.days[-1].isoformat()
    return (day != "") & (day >= first) & (day <= last)


def in_interval_days(event_date: Column, interval: Interval) -> Column:
    from pyspark.sql import functions as F

    return (event_date >= F.lit(interval.days[0])) & (event_date <= F.lit(interval.days[-1]))


def in_interval_times(moment: Column, interval: Interval) -> Column:
    from pyspark.sql import functions as F

    return (moment >= F.lit(interval.start)) & (moment < F.lit(interval.end))


def in_slice(interval: Interval) -> Column:
    """The bronze slice of the interval (as `bronze_predicate`): the partitions, then the times."""
    from pyspark.sql import functions as F

    return in_interval_days(F.col("event_date"), interval) & in_interval_times(
        F.col("event_time"), interval
    )


def bronze_slice(
    fresh: DataFrame, current: DataFrame, interval: Interval, landing_dir: Location
) -> DataFrame:
    """The new bronze slice: fresh rows of the interval's files timed in the interval, plus the
    current slice's rows from files outside the interval's folders (kept unchanged)."""
    from pyspark.sql import functions as F

    new = fresh.where(in_slice(interval))
    kept = current.where(
        in_slice(interval) & ~in_interval_folders(F.col("_source_file"), interval, landing_dir)
    )
    return new.unionByName(kept)


def folder_midnight(source_file: Column, landing_dir: Location) -> Column:
    """Midnight UTC of the `date=D/` folder of a file below `landing_dir`; null elsewhere."""
    from pyspark.sql import functions as F

    day = F.regexp_extract(source_file, folder_day_pattern(landing_dir), 1)
    # try_: a folder such as date=2024-02-30 matches the pattern but is no day (null, not a
    # failed run); the explicit zone makes it UTC whatever the session's time zone.
    midnight = F.try_to_timestamp(F.concat(day, F.lit(" +00:00")), F.lit("yyyy-MM-dd XXX"))
    return F.when(day != "", midnight)


def with_event_key(rows: DataFrame, dataset: Dataset, landing_dir: Location) -> DataFrame:
    """Quarantine rows with `EVENT_KEY`: the moment whose interval the row belongs to.

    The event time `jobs.bronze.parse.parse_lines` finds when it parses the row's `_raw` again (as
    the line of its `_source_file`), else midnight UTC of the file's `date=D/` folder. A
    function of (`_raw`, `_source_file`) only, so a row of the table and the same line read
    again by a backfill always get the same key: each distinct pair is parsed once and joined
    back.
    """
    from pyspark.sql import functions as F

    from jobs.bronze.parse import parse_lines

    lines = rows.select(F.col("_raw").alias("value"), F.col("_source_file")).distinct()
    # `_raw` is valid UTF-8 (bronze replaced invalid bytes), so parse_lines gives it back as is.
    times = parse_lines(lines, dataset).select(
        F.col("_raw").alias("_key_raw"),
        F.col("_source_file").alias("_key_file"),
        F.col("event_time").alias("_key_time"),
    )
    same_line = F.col("_raw").eqNullSafe(F.col("_key_raw")) & F.col("_source_file").eqNullSafe(
        F.col("_key_file")
    )
    key = F.coalesce(F.col("_key_time"), folder_midnight(F.col("_source_file"), landing_dir))
    return rows.join(times, same_line, "left").select(*rows.columns, key.alias(EVENT_KEY))


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
    return current_windows(aggregate.transform(rows, watermark), interval)


def current_windows(silver: DataFrame, interval: Interval) -> DataFrame:
    """The windows of a silver table (or result) that overlap the interval."""
    from pyspark.sql import functions as F

    return silver.where(
        (F.col("window_end") > F.lit(interval.start))
        & (F.col("window_start") < F.lit(interval.end))
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

    relative: Location  # below the landing dir, e.g. date=2024-01-01/part-0.json
    location: Location  # the file to read (landing or archive)
    archived: bool
    day: date  # of its `date=` folder

    def pending(self, ingested: Collection[str]) -> bool:
        """In landing and not ingested by the bronze stream yet (`ingested`: real paths)."""
        return not self.archived and real_name(self.location) not in ingested


@dataclass(frozen=True)
class Folders:
    """Where a dataset's landing files are: not ingested yet, and archived
    (`jobs.bronze.job.landing_dirs`; looked up once per run, it loads the catalog)."""

    landing: Location
    archive: Location

    @classmethod
    def of(cls, config: RunoffConfig, dataset: str) -> Folders:
        from jobs.bronze.job import landing_dirs

        return cls(*landing_dirs(config, dataset))


def interval_files(folders: Folders, interval: Interval) -> list[IntervalFile]:
    """The interval's files from the landing folder and the archive (landing wins)."""
    found: dict[Location, IntervalFile] = {}
    for root, archived in ((folders.archive, True), (folders.landing, False)):
        for day in interval.days:
            folder = root / f"date={day.isoformat()}"
            if not folder.is_dir():
                continue
            for path in sorted(folder.rglob("*")):
                relative = path.relative_to(root)
                if path.is_file() and is_data_file(relative):
                    found[relative] = IntervalFile(relative, path, archived, day)
    return [found[k] for k in sorted(found)]


def files_to_read(
    files: Sequence[IntervalFile], interval: Interval, ingested: Collection[str]
) -> tuple[list[IntervalFile], list[IntervalFile]]:
    """(the files the backfill reads, the pending files it leaves to the stream).

    A pending file is read only when the interval covers its whole day: the backfill then
    writes all of its records and archives it. On a day the interval covers partly, writing
    the interval's records of a pending file would leave a choice between archiving it (its
    other records never reach bronze) and leaving it (the stream ingests the interval's records
    a second time); the stream ingests it whole instead.
    """
    read: list[IntervalFile] = []
    left: list[IntervalFile] = []
    for f in files:
        waits = f.pending(ingested) and not interval.covers_day(f.day)
        (left if waits else read).append(f)
    return read, left


def strip_segments_pattern(segments: int) -> str:
    """Regex removing the first `segments` path segments after a `file:` URI's scheme, or after
    an object store URI's bucket (`s3a://bucket`)."""
    return rf"^(file:(?://)?|[a-z][a-z0-9+.-]*://[^/]+)(?:/[^/]+){{{segments}}}(?=/)"
