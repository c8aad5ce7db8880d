"""Landing lines too long to read as one row: read in bounded memory, never lost.

Spark's text source hands each line to a task as one row: one line of hundreds of MiB fills the
driver's heap (`OutOfMemoryError`, the driver gone, the same on every rerun, the files beside it
never ingested). So the landing readers (`READER_OPTIONS`, bronze's stream and backfill) tell
Hadoop's line reader to skip every line of `HUGE_LINE_BYTES` or more: it reads past such a line
keeping at most that many of its bytes (when the line runs past the end of the file split being
read, the reader hands over those first bytes as a line: `lines_read` drops such a remnant).
Skipped silently by Hadoop; found here:

- every line read stands for its bytes and its `\\n` (bronze counts them with the batch's other
  counts: `LineCounts.bytes`), so a batch whose lines hold less than its files' sizes lost lines
  (`lost_bytes`); only then are the lines of each file added up and the files found short scanned
  on the driver (`scan`: a chunk at a time, as the line reader counts lines): `with_long_lines`;
- each long line comes back as a raw row (`raw_rows`) holding its first `KEPT_BYTES` bytes and its
  line number (`_known_line`). Parsing quarantines it as `line too long`, as any line over
  `jobs.bronze.parse.MAX_LINE_BYTES`, with the same start kept in `_raw`; the other lines of its
  file keep their own line numbers (`jobs.bronze.parse.quarantine_rows`).

A compressed file (`.gz`, `.bz2`, ...: `jobs.bronze.parse.COMPRESSED`) is left out of the
accounting: its size says nothing of its lines' bytes, so a line of HUGE_LINE_BYTES or more in
it is skipped without being found (read in bounded memory all the same).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config import Location, as_location
from jobs.bronze.parse import COMPRESSED, KNOWN_LINE, MAX_LINE_BYTES, RAW_SCHEMA, SOURCE_BYTES
from jobs.checkpoints.files import spark_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Lines of this many bytes or more (with their `\n`) are not read by Spark but scanned here.
HUGE_LINE_BYTES = 16 << 20
READER_OPTIONS = {"mapreduce.input.linerecordreader.line.maxlength": str(HUGE_LINE_BYTES)}
# Bytes kept of a long line: enough for the MAX_LINE_BYTES + 1 characters `_raw` keeps.
KEPT_BYTES = 4 * (MAX_LINE_BYTES + 1)
# A file's lines hold its size within these bytes: a UTF-8 byte order mark is not part of the
# first line (3), and the last line may have no `\n` (-1).
SLACK = 3
BOM = b"\xef\xbb\xbf"
CHUNK = 8 << 20


@dataclass(frozen=True)
class LongLine:
    """A line Spark did not read: its file (as Spark names it), number and first bytes."""

    file: str
    number: int  # 1-based, every line of the file counted
    start: bytes  # the first KEPT_BYTES bytes


def lines_read(frame: DataFrame) -> DataFrame:
    """The reader's rows that are lines: not the first HUGE_LINE_BYTES bytes of a longer line,
    which the reader returns when the line crosses the end of its split (a whole line it returns
    is shorter: it holds less than HUGE_LINE_BYTES bytes with its `\\n`)."""
    from pyspark.sql import functions as F

    return frame.where(F.octet_length("value") < HUGE_LINE_BYTES)


def lost_bytes(counted: int, sizes: Sequence[int]) -> bool:
    """Whether lines holding `counted` bytes in all fall short of files of `sizes`: a skipped
    line has at least HUGE_LINE_BYTES, a file's own slack is a few bytes."""
    return sum(sizes) - counted > SLACK * len(sizes)


def with_long_lines(
    spark: SparkSession,
    raw: DataFrame,
    parsed: DataFrame,
    counted: int,
    sizes: Mapping[str, int],
    read_from: Mapping[str, Location] | None = None,
) -> tuple[DataFrame, dict[str, list[int]]]:
    """`raw` (the lines read of the files of `sizes`: URI as `_source_file` names it -> size)
    with a row for each long line the reader skipped, and the numbers of those lines per file.

    `parsed`: `raw` parsed (cached), whose lines stand for `counted` bytes in all
    (`SOURCE_BYTES`: `LineCounts.bytes`). Only when they fall short of the sizes are its lines
    added up per file and the files found short scanned, each where `read_from` says (default:
    at its URI).
    """
    from pyspark.sql import functions as F

    sizes = {path: size for path, size in sizes.items() if not re.search(COMPRESSED, path)}
    if not lost_bytes(counted, list(sizes.values())):
        return raw, {}
    named = {
        spark_path(row[0]): (row[0], int(row[1]))
        for row in parsed.groupBy("_source_file").agg(F.sum(SOURCE_BYTES)).collect()
    }
    found: list[LongLine] = []
    for path, size in sizes.items():
        name, read = named.get(spark_path(path), (None, 0))
        if size - read > SLACK:
            where = (read_from or {}).get(path) or as_location(spark_path(path))
            found += scan(where, name or qualified(spark, path))
    if not found:
        return raw, {}
    skipped: dict[str, list[int]] = {}
    for line in found:
        skipped.setdefault(line.file, []).append(line.number)
    return raw.unionByName(raw_rows(spark, found), allowMissingColumns=True), skipped


def qualified(spark: SparkSession, path: str) -> str:
    """A file's URI as Spark's readers name it in `_metadata.file_path` (`file:/a/b%20c.json`):
    Hadoop's qualified path (for a file none of whose lines was read)."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(spark_path(path))  # type: ignore[union-attr]
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    uri = str(hadoop_path.getFileSystem(conf).makeQualified(hadoop_path).toUri().toString())
    # A local file's status (which names it for the reader) is `file:/a`, not `file:///a`.
    return "file:/" + uri.removeprefix("file:///") if uri.startswith("file:///") else uri


def scan(location: Location, name: str) -> list[LongLine]:
    """The lines of the file at `location` that Hadoop's line reader skips (HUGE_LINE_BYTES or
    more, their `\\n` included; a first line's byte order mark not counted), with `name` (the
    file as Spark names it). Reads the file a chunk at a time: memory bounded by KEPT_BYTES."""
    found: list[LongLine] = []
    number, length, start = 1, 0, bytearray()

    def ended(consumed: int) -> None:
        if number == 1 and start.startswith(BOM):
            consumed -= len(BOM)
            del start[: len(BOM)]
        if consumed >= HUGE_LINE_BYTES:
            found.append(LongLine(name, number, bytes(start[:KEPT_BYTES])))

    with as_location(location).open("rb") as stream:
        while chunk := stream.read(CHUNK):
            at = 0
            while (end := chunk.find(b"\n", at)) != -1:
                start += chunk[at : min(end, at + KEPT_BYTES + len(BOM) - len(start))]
                ended(length + end - at + 1)
                number, length, start = number + 1, 0, bytearray()
                at = end + 1
            start += chunk[at : at + max(0, KEPT_BYTES + len(BOM) - len(start))]
            length += len(chunk) - at
    if length:
        ended(length)
    return found


def raw_rows(spark: SparkSession, lines: Sequence[LongLine]) -> DataFrame:
    """The long lines as raw rows (`RAW_SCHEMA` and `_known_line`): the value is the line's
    start, long enough to be `line too long`, as bytes (invalid UTF-8 kept, as Spark's reader
    keeps it)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("start", BinaryType()),
            StructField("_source_file", StringType()),
            StructField(KNOWN_LINE, LongType()),
        ]
    )
    rows = [(bytearray(line.start), line.file, line.number) for line in lines]
    frame = spark.createDataFrame(rows, schema)
    return frame.select(
        F.col("start").cast("string").alias("value"),
        "_source_file",
        F.lit(0).cast("long").alias("_block_start"),
        KNOWN_LINE,
    ).select(*RAW_SCHEMA.fieldNames(), KNOWN_LINE)
