"""Fixed schemas of runoff's tables: the columns bronze adds to every row, and quarantine."""

from __future__ import annotations

from pyspark.sql.types import (
    DateType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# Columns every bronze row carries after the dataset's own (`_rescued_data`: rescue mode only).
BRONZE_METADATA = StructType(
    [
        StructField("event_time", TimestampType(), True),
        StructField("event_date", DateType(), True),
        StructField("_source_file", StringType(), True),
        StructField("_ingested_at", TimestampType(), True),
        StructField("_batch_id", LongType(), True),
    ]
)
RESCUED_DATA = StructField("_rescued_data", StringType(), True)

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
