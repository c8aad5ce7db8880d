"""sensors: `{"timestamp": ISO-8601, "deviceId", "deviceType", "signalStrength"}`.

Silver:
- `sensors_device_counts`: one row per device per 5-second window (count), upserted.
- `sensors_type_signal`: one row per device type per minute: count, min/max/avg signal, upserted.
- `sensors_lost_signal`: the alert table: one row per device and 1-minute window that received
  fewer than 5 signals; appended once the watermark closes the window, never updated.
Watermark: 10 minutes by default.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

from jobs.datasets.base import Dataset, SilverAggregate, window_columns

RECORD_SCHEMA = StructType(
    [
        StructField("timestamp", TimestampType(), True),
        StructField("deviceId", StringType(), True),
        StructField("deviceType", StringType(), True),
        StructField("signalStrength", DoubleType(), True),
    ]
)
BRONZE_SCHEMA = RECORD_SCHEMA
LOST_SIGNAL_THRESHOLD = 5


def event_time() -> Column:
    return F.col("timestamp")


def to_bronze(parsed: DataFrame) -> DataFrame:
    return parsed.select("timestamp", "deviceId", "deviceType", "signalStrength")


def device_counts(bronze: DataFrame, watermark: str) -> DataFrame:
    """One row per device per 5-second window."""
    return (
        bronze.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", "5 seconds").alias("window"), F.col("deviceId"))
        .agg(F.count(F.lit(1)).alias("count"))
        .select(*window_columns(), "deviceId", "count")
    )


def type_signal(bronze: DataFrame, watermark: str) -> DataFrame:
    """One row per device type per minute with signal statistics."""
    return (
        bronze.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", "1 minute").alias("window"), F.col("deviceType"))
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.min("signalStrength").alias("min_signal"),
            F.max("signalStrength").alias("max_signal"),
            F.avg("signalStrength").alias("avg_signal"),
        )
        .select(*window_columns(), "deviceType", "count", "min_signal", "max_signal", "avg_signal")
    )


def lost_signal(bronze: DataFrame, watermark: str) -> DataFrame:
    """Device minutes with fewer than 5 signals (only windows the watermark has closed)."""
    return (
        bronze.withWatermark("event_time", watermark)
        .groupBy(
            F.window("event_time", "1 minute").alias("window"),
            F.col("deviceId"),
            F.col("deviceType"),
        )
        .agg(F.count(F.lit(1)).alias("count"))
        .where(F.col("count") < LOST_SIGNAL_THRESHOLD)
        .select(*window_columns(), "deviceId", "deviceType", "count")
    )


DATASET = Dataset(
    name="sensors",
    description=__doc__ or "",
    record_format="json",
    record_schema=RECORD_SCHEMA,
    bronze_schema=BRONZE_SCHEMA,
    required=("timestamp", "deviceId", "deviceType", "signalStrength"),
    to_bronze=to_bronze,
    event_time=event_time,
    watermark="10 minutes",
    aggregates=(
        SilverAggregate(
            table="sensors_device_counts",
            description="Signals per device per 5 seconds",
            transform=device_counts,
            keys=("window_start", "window_end", "deviceId"),
            window="5 seconds",
        ),
        SilverAggregate(
            table="sensors_type_signal",
            description="Signal min/max/avg per device type per minute",
            transform=type_signal,
            keys=("window_start", "window_end", "deviceType"),
            window="1 minute",
        ),
        SilverAggregate(
            table="sensors_lost_signal",
            description="Alert: device minutes with fewer than 5 signals",
            transform=lost_signal,
            keys=("window_start", "window_end", "deviceId"),
            output_mode="append",
            window="1 minute",
        ),
    ),
)
