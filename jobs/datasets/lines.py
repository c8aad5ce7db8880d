"""lines: plain text, one record per non-empty line (landing files `*.txt`).

Lines carry no timestamp: bronze takes the event time from the landing folder's date
(`landing/lines/date=YYYY-MM-DD/...`, midnight UTC), so backfills by date work as for the others.

Silver `lines_word_counts`: one row per word (lower-cased, split on non-letters): the classic
running word count, upserted after every batch; no window, so no watermark applies.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from jobs.datasets.base import Dataset, SilverAggregate

BRONZE_SCHEMA = StructType([StructField("line", StringType(), True)])
DATE_IN_PATH = r"date=(\d{4}-\d{2}-\d{2})"


def event_time() -> Column:
    day = F.regexp_extract(F.col("_source_file"), DATE_IN_PATH, 1)
    return F.to_timestamp(F.when(day != "", day), "yyyy-MM-dd")


def to_bronze(parsed: DataFrame) -> DataFrame:
    return parsed.select("line")


def word_counts(bronze: DataFrame, watermark: str) -> DataFrame:
    """One row per word with its running count over all lines."""
    words = F.explode(F.split(F.lower(F.col("line")), r"[^\p{L}']+")).alias("word")
    return (
        bronze.select(words)
        .where(F.col("word") != "")
        .groupBy("word")
        .agg(F.count(F.lit(1)).alias("count"))
    )


DATASET = Dataset(
    name="lines",
    description=__doc__ or "",
    record_format="text",
    record_schema=None,
    bronze_schema=BRONZE_SCHEMA,
    required=("line",),
    to_bronze=to_bronze,
    event_time=event_time,
    watermark="0 seconds",
    aggregates=(
        SilverAggregate(
            table="lines_word_counts",
            description="Running count of every word",
            transform=word_counts,
            keys=("word",),
        ),
    ),
)
