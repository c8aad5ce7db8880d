"""events: `{"time": <epoch seconds>, "action": "Open"|"Close"}`; a Close follows its Open.

Silver:
- `events_action_hourly`: one row per action per 1-hour tumbling window (window_start,
  window_end, action, count), upserted after every micro-batch.
- `events_action_sliding`: one row per action per 10-minute window sliding by 5 minutes.
Watermark: 1 hour by default; rows later than that are dropped from silver (and counted).
"""

from __future__ import annotations

import heapq
import random
from datetime import datetime, timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.datasets.base import Dataset, SilverAggregate, window_columns
from jobs.generate import GeneratorSpec, Record, epoch_us, next_midnight

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


# -- sample data (`runoff generate events`) ----------------------------------------------------
FILE_SECONDS = 3600  # one landing file per hour of events
MEAN_OPEN_SECONDS = 600


def _open_seconds(rng: random.Random) -> int:
    """How long something stays open: mostly minutes, at most two hours."""
    return max(1, min(7200, round(rng.expovariate(1 / MEAN_OPEN_SECONDS))))


def generate_records(
    rng: random.Random, start: datetime, files: int, rows_per_file: int
) -> list[list[Record]]:
    """Open/Close pairs: file i holds the events of one hour (cut at midnight).

    Each Open at t has its Close at t + a random duration, in the same file or a later one, so
    every Close follows its Open (pairs whose Close falls after the last file stay open).
    """
    second = epoch_us(start) // 1_000_000
    pending: list[tuple[int, int]] = []  # (close time, pair) of Closes not yet delivered
    built: list[list[tuple[int, int, str]]] = []  # per file: (time, pair, action)
    close_file: dict[int, int] = {}
    pair = 0
    for i in range(files):
        end = min(second + FILE_SECONDS, next_midnight(second, 86_400))
        due: list[tuple[int, int]] = []
        while pending and pending[0][0] < end:
            due.append(heapq.heappop(pending))
        for _, late_pair in due[rows_per_file:]:  # more Closes than fit: they close a bit later
            heapq.heappush(pending, (end + rng.randrange(60), late_pair))
        rows = [(when, p, "Close") for when, p in due[:rows_per_file]]
        while len(rows) < rows_per_file:
            opened = rng.randrange(second, end)
            closed = opened + _open_seconds(rng)
            rows.append((opened, pair, "Open"))
            if closed < end and len(rows) < rows_per_file:
                rows.append((closed, pair, "Close"))
            else:
                # no room left in this file: the Close goes to a later one
                closed = closed if closed >= end else end + rng.randrange(60)
                heapq.heappush(pending, (closed, pair))
            pair += 1
        rows.sort()
        close_file.update((p, i) for _, p, action in rows if action == "Close")
        built.append(rows)
        second = end
    return [
        [
            Record(
                time_us=when * 1_000_000,
                value={"time": when, "action": action},
                # an Open may arrive one file late only if its Close arrives later still
                movable=action == "Close" or close_file.get(p, files) >= i + 2,
            )
            for when, p, action in rows
        ]
        for i, rows in enumerate(built)
    ]


GENERATOR = GeneratorSpec(
    dataset="events",
    record_format="json",
    build=generate_records,
    default_files=50,
    default_rows_per_file=2000,
    event_time_field="time",
    wrong_types=(("time", "abc"), ("time", "yesterday")),
    text_fields=("action",),
    max_lateness=timedelta(minutes=30),
)


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
    generator=GENERATOR,
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
