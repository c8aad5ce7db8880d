"""Batch reads through Spark beyond the golden tables: empty tables, errors, `timestampAsOf`."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from delta_tables.registry import bronze_table, ensure_table
from delta_tables.schema import strip_metadata, table_struct
from jobs.config import RunoffConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_empty_registry_table_reads_with_its_schema(
    spark: SparkSession, config: RunoffConfig
) -> None:
    spec = bronze_table(config, "sensors")
    assert ensure_table(spec)
    df = spark.read.format("delta").load(str(spec.path))
    assert df.schema == strip_metadata(table_struct(DeltaTable(str(spec.path))))
    assert df.schema == spec.schema
    assert df.count() == 0


def test_missing_table_and_bad_options_fail_naming_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    with pytest.raises(Exception, match=rf"{tmp_path / 'nope'} is not a Delta table"):
        spark.read.format("delta").load(str(tmp_path / "nope")).count()
    write_deltalake(str(tmp_path / "t"), pa.table({"id": pa.array([1], pa.int64())}))
    with pytest.raises(Exception, match=r"option versionAsOf=5 is not available"):
        spark.read.format("delta").option("versionAsOf", 5).load(str(tmp_path / "t")).count()


def test_timestamp_as_of_reads_the_version_committed_before(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    for n in range(3):
        write_deltalake(str(table), pa.table({"id": pa.array([n], pa.int64())}), mode="append")
        time.sleep(0.05)
    commits = {h["version"]: h["timestamp"] for h in DeltaTable(str(table)).history()}
    between = datetime.fromtimestamp((commits[1] + 1) / 1000, tz=UTC)
    df = (
        spark.read.format("delta")
        .option("timestampAsOf", between.strftime("%Y-%m-%d %H:%M:%S.%f"))
        .load(str(table))
    )
    assert sorted(r["id"] for r in df.collect()) == [0, 1]
    with pytest.raises(
        Exception, match=r"option timestampAsOf='2000-01-01' is before the first commit"
    ):
        spark.read.format("delta").option("timestampAsOf", "2000-01-01").load(str(table)).count()


def test_engine_switch_registers_the_delta_rs_source(spark: SparkSession) -> None:
    from delta_tables.spark_source import delta_spark_available, ensure_delta_format

    assert not delta_spark_available(spark)  # no delta-spark jars on this classpath
    assert ensure_delta_format(spark) == "delta-rs"
    assert spark.conf.get("spark.sql.python.filterPushdown.enabled") == "true"
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
