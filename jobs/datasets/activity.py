"""activity: accelerometer readings from phones and watches (heterogeneity activity recognition).

Record: `Arrival_Time` (epoch ms), `Creation_Time` (epoch ns), `Device`, `Index`, `Model`,
`User`, `gt` (activity label), `x`, `y`, `z`. Bronze renames `Index` to `User_ID` as the
reference notebook does; event time is `Creation_Time`.

Silver `activity_user_minute`: one row per user, gt and minute: count and mean x/y/z, upserted;
partitioned by `window_date`.
Watermark: 10 minutes by default.
"""

from __future__ import annotations

import heapq
import random
from datetime import datetime, timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from jobs.datasets.base import Dataset, SilverAggregate, window_columns, window_date
from jobs.generate import GeneratorSpec, Record, chunk_by_day, epoch_us

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
    # Exact decimal division: a double (53 bits) cannot hold epoch nanoseconds, and rounding
    # moved readings from the last microsecond of a minute into the next minute's window.
    nanos = F.col("Creation_Time").cast("decimal(20,0)")
    return F.timestamp_micros(F.floor(nanos / F.lit(1000)).cast("long"))


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
        .select(
            *window_columns(), "User", "gt", "count", "mean_x", "mean_y", "mean_z", window_date()
        )
    )


# -- sample data (`runoff generate activity`) --------------------------------------------------
USERS = tuple("abcdefghi")
PHONES = (
    "nexus4_1",
    "nexus4_2",
    "s3_1",
    "s3_2",
    "s3mini_1",
    "s3mini_2",
    "samsungold_1",
    "samsungold_2",
)
# Mean acceleration (m/s^2) of a phone in a pocket per activity, and its spread.
ACCELERATION: dict[str, tuple[tuple[float, float, float], float]] = {
    "stand": ((-0.3, 9.6, 0.8), 0.2),
    "sit": ((0.6, 3.1, 9.1), 0.15),
    "walk": ((-0.8, 9.2, 1.4), 2.5),
    "bike": ((1.2, 7.4, 5.1), 1.6),
    "stairsup": ((-1.0, 9.9, 2.0), 3.0),
    "stairsdown": ((-0.9, 9.5, 1.7), 3.3),
    "null": ((0.0, 8.0, 3.0), 0.6),
}
READING_EVERY_US = (800_000, 1_200_000)
ACTIVITY_MINUTES = (2, 6)


def generate_records(
    rng: random.Random, start: datetime, files: int, rows_per_file: int
) -> list[list[Record]]:
    """Users a..i each carry one phone that reads about once a second; users switch activity
    (gt) every 2-6 minutes. Creation_Time is epoch ns, Arrival_Time epoch ms a little later,
    Index counts each phone's readings."""
    begin = epoch_us(start)
    phone = {user: rng.choice(PHONES) for user in USERS}
    label = {user: rng.choice(GT_LABELS) for user in USERS}
    switch_at = {user: begin + rng.randint(*ACTIVITY_MINUTES) * 60_000_000 for user in USERS}
    heap = [(begin + rng.randrange(READING_EVERY_US[1]), user) for user in USERS]
    heapq.heapify(heap)
    stream: list[tuple[int, str, str, tuple[float, float, float]]] = []
    while len(stream) < files * rows_per_file:
        when, user = heapq.heappop(heap)
        if when >= switch_at[user]:
            label[user] = rng.choice(GT_LABELS)
            switch_at[user] = when + rng.randint(*ACTIVITY_MINUTES) * 60_000_000
        mean, spread = ACCELERATION[label[user]]
        xyz = (
            round(rng.gauss(mean[0], spread), 6),
            round(rng.gauss(mean[1], spread), 6),
            round(rng.gauss(mean[2], spread), 6),
        )
        stream.append((when, user, label[user], xyz))
        heapq.heappush(heap, (when + rng.randint(*READING_EVERY_US), user))
    chunks = chunk_by_day([us for us, _, _, _ in stream], files, rows_per_file, 86_400_000_000)
    index = dict.fromkeys(PHONES, 0)
    built: list[list[Record]] = []
    for c, chunk in enumerate(chunks):
        records: list[Record] = []
        rows = stream[c * rows_per_file : (c + 1) * rows_per_file]
        for us, (_, user, gt, (x, y, z)) in zip(chunk, rows, strict=True):
            created_ns = us * 1000 + rng.randrange(1000)
            device = phone[user]
            index[device] += 1
            value = {
                "Arrival_Time": created_ns // 1_000_000 + rng.randint(1, 250),
                "Creation_Time": created_ns,
                "Device": device,
                "Index": index[device],
                "Model": device.rsplit("_", 1)[0],
                "User": user,
                "gt": gt,
                "x": x,
                "y": y,
                "z": z,
            }
            records.append(Record(time_us=us, value=value))
        built.append(records)
    return built


GENERATOR = GeneratorSpec(
    dataset="activity",
    record_format="json",
    build=generate_records,
    event_time_field="Creation_Time",
    wrong_types=(("x", "abc"), ("z", "n/a"), ("Creation_Time", "soon")),
    text_fields=("Device", "User", "gt"),
    max_lateness=timedelta(minutes=4),
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
    generator=GENERATOR,
    aggregates=(
        SilverAggregate(
            table="activity_user_minute",
            description="Readings and mean acceleration per user and activity per minute",
            transform=user_minute,
            keys=("window_start", "window_end", "User", "gt"),
            window="1 minute",
            partition_by=("window_date",),
        ),
    ),
)
