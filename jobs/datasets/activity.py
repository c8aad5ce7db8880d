"""activity: accelerometer readings from phones and watches (heterogeneity activity recognition).

Record: `Arrival_Time` (epoch ms), `Creation_Time` (epoch ns), `Device`, `Index`, `Model`,
`User`, `gt` (activity label), `x`, `y`, `z`. Bronze renames `Index` to `User_ID` as the
reference notebook does; event time is `Creation_Time`.

Silver `activity_user_minute`: one row per user, gt and minute: count and mean x/y/z, upserted.
Watermark: 10 minutes by default.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from jobs.datasets.base import Dataset, SilverAggregate, window_columns

RECORD_SCHEMA = StructType(
    [
        StructField("Arrival_Time", LongType(), True),
        StructField("Creation_Time", LongType(), True),
        StructField("Device", StringType(), True),
        StructField("Index", LongType(), True),
        StructField("Model", StringType(), True),
        StructField("User", StringType(), True),
        StructField("gt", StringType(), True),
        StructField("x", DoubleType(), True),
        StructField("y", DoubleType(), True),
        StructField("z", DoubleType(), True),
    ]
)
BRONZE_SCHEMA = StructType(
    [
        StructField("User_ID" if f.name == "Index" else f.name, f.dataType, True)
        for f in RECORD_SCHEMA.fields
    ]
)
GT_LABELS = ("stand", "sit", "walk", "bike", "stairsup", "stairsdown", "null")


def event_time() -> Column:
    # Creation_Time is in nanoseconds; keep microsecond precision (Spark's timestamp unit).
    return F.timestamp_micros(F.floor(F.col("Creation_Time") / F.lit(1000)))


def to_bronze(parsed: DataFrame) -> DataFrame:
    return parsed.withColumnRenamed("Index", "User_ID").select(*BRONZE_SCHEMA.fieldNames())


def user_minute(bronze: DataFrame, watermark: str) -> DataFrame:
    """One row per user, gt and minute: count and mean x, y, z."""
    return (
        bronze.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", "1 minute").alias("window"), F.col("User"), F.col("gt"))
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.avg("x").alias("mean_x"),
            F.avg("y").alias("mean_y"),
            F.avg("z").alias("mean_z"),
        )
        .select(*window_columns(), "User", "gt", "count", "mean_x", "mean_y", "mean_z")
    )


DATASET = Dataset(
    name="activity",
    description=__doc__ or "",
    record_format="json",
    record_schema=RECORD_SCHEMA,
    bronze_schema=BRONZE_SCHEMA,
    required=("Creation_Time", "Device", "User", "gt", "x", "y", "z"),
    to_bronze=to_bronze,
    event_time=event_time,
    watermark="10 minutes",
    aggregates=(
        SilverAggregate(
            table="activity_user_minute",
            description="Readings and mean acceleration per user and activity per minute",
            transform=user_minute,
            keys=("window_start", "window_end", "User", "gt"),
            window="1 minute",
        ),
    ),
)
