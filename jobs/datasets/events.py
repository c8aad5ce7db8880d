"""events: `{"time": <epoch seconds>, "action": "Open"|"Close"}`; a Close follows its Open.

Silver:
- `events_action_hourly`: one row per action per 1-hour tumbling window (window_start,
  window_end, action, count), upserted after every micro-batch.
- `events_action_sliding`: one row per action per 10-minute window sliding by 5 minutes.
Watermark: 1 hour by default; rows later than that are dropped from silver (and counted).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.datasets.base import Dataset, SilverAggregate, window_columns

RECORD_SCHEMA = StructType(
    [
        StructField("time", LongType(), True),
        StructField("action", StringType(), True),
    ]
)
BRONZE_SCHEMA = RECORD_SCHEMA
ACTIONS = ("Open", "Close")


def event_time() -> Column:
    return F.col("time").cast("timestamp")


def to_bronze(parsed: DataFrame) -> DataFrame:
    return parsed.select("time", "action")


def action_counts(bronze: DataFrame, watermark: str, window: str, slide: str | None) -> DataFrame:
    windowed = F.window("event_time", window, slide) if slide else F.window("event_time", window)
    return (
        bronze.withWatermark("event_time", watermark)
        .groupBy(windowed.alias("window"), F.col("action"))
        .agg(F.count(F.lit(1)).alias("count"))
        .select(*window_columns(), "action", "count")
    )


def action_hourly(bronze: DataFrame, watermark: str) -> DataFrame:
    """One row per action per hour."""
    return action_counts(bronze, watermark, "1 hour", None)


def action_sliding(bronze: DataFrame, watermark: str) -> DataFrame:
    """One row per action per 10-minute window, windows starting every 5 minutes."""
    return action_counts(bronze, watermark, "10 minutes", "5 minutes")


DATASET = Dataset(
    name="events",
    description=__doc__ or "",
    record_format="json",
    record_schema=RECORD_SCHEMA,
    bronze_schema=BRONZE_SCHEMA,
    required=("time", "action"),
    to_bronze=to_bronze,
    event_time=event_time,
    watermark="1 hour",
    aggregates=(
        SilverAggregate(
            table="events_action_hourly",
            description="Opens and Closes per hour",
            transform=action_hourly,
            keys=("window_start", "window_end", "action"),
            window="1 hour",
        ),
        SilverAggregate(
            table="events_action_sliding",
            description="Opens and Closes per 10 minutes, sliding by 5 minutes",
            transform=action_sliding,
            keys=("window_start", "window_end", "action"),
            window="10 minutes",
            slide="5 minutes",
        ),
    ),
)
