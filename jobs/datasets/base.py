"""What a dataset is: its landing record schema, event time, watermark and silver aggregates."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DateType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    from jobs.generate import GeneratedFile, GeneratorSpec

# Columns every bronze row carries in addition to the dataset's own (DESIGN.md).
BRONZE_METADATA = StructType(
    [
        StructField("event_time", TimestampType(), True),
        StructField("event_date", DateType(), True),
        StructField("_source_file", StringType(), True),
        StructField("_ingested_at", TimestampType(), True),
        StructField("_batch_id", LongType(), True),
    ]
)

QUARANTINE_SCHEMA = StructType(
    [
        StructField("_raw", StringType(), True),
        StructField("_error", StringType(), True),
        StructField("_source_file", StringType(), True),
        StructField("_line_number", LongType(), True),
        StructField("_ingested_at", TimestampType(), True),
        StructField("_batch_id", LongType(), True),
        StructField("ingest_date", DateType(), True),
    ]
)

Transform = Callable[[DataFrame, str], DataFrame]


@dataclass(frozen=True)
class SilverAggregate:
    """One silver table: a pure transform from bronze rows to one row per window and key.

    `transform(bronze, watermark)` works on batch and streaming DataFrames alike; the watermark
    and window live inside it. `keys` identify a row (the MERGE condition). `output_mode` is
    "update" for tables upserted after every batch and "append" for tables that only receive
    windows once the watermark has closed them (alerts).
    """

    table: str
    description: str
    transform: Transform
    keys: tuple[str, ...]
    output_mode: Literal["update", "append"] = "update"
    window: str | None = None
    slide: str | None = None
    partition_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dataset:
    """A dataset: how its landing lines parse into bronze rows and what silver tables it feeds.

    `record_schema` is the schema of one landing JSON record (None for plain-text datasets);
    `to_bronze(parsed)` maps parsed records (plus `_source_file`) to the dataset's bronze columns
    before the metadata columns are added; `event_time(df)` is the bronze event-time expression.
    """

    name: str
    description: str
    record_format: Literal["json", "text"]
    record_schema: StructType | None
    bronze_schema: StructType  # dataset columns only; BRONZE_METADATA is appended
    required: tuple[str, ...]
    to_bronze: Callable[[DataFrame], DataFrame]
    event_time: Callable[[], Column]
    watermark: str
    aggregates: tuple[SilverAggregate, ...]
    generator: GeneratorSpec | None = None

    @property
    def full_bronze_schema(self) -> StructType:
        return StructType(list(self.bronze_schema.fields) + list(BRONZE_METADATA.fields))

    def aggregate(self, table: str) -> SilverAggregate:
        for agg in self.aggregates:
            if agg.table == table:
                return agg
        from jobs.errors import ConfigError

        names = ", ".join(a.table for a in self.aggregates)
        raise ConfigError(f"dataset {self.name!r} has no silver table {table!r} (has: {names})")

    def generate(self, **kwargs: Any) -> list[GeneratedFile]:
        from jobs.errors import ConfigError

        if self.generator is None:
            raise ConfigError(f"dataset {self.name!r} has no generator")
        return self.generator.generate(**kwargs)


def window_columns(window_col: str = "window") -> list[Column]:
    """Flatten Spark's `window` struct into `window_start`, `window_end`."""
    return [
        F.col(f"{window_col}.start").alias("window_start"),
        F.col(f"{window_col}.end").alias("window_end"),
    ]


def window_date(window_col: str = "window") -> Column:
    """`window_date`: the UTC day of `window_start` (the session time zone is UTC), the partition
    column of the silver tables that gain thousands of rows a day."""
    return F.to_date(F.col(f"{window_col}.start")).alias("window_date")
