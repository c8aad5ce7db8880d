"""`delta_tables.registry`: the tables of every dataset, created by delta-spark.

The created tables are inspected through delta-spark (`DeltaTable.forPath(...).detail()` and the
table schema) and through delta-rs (`table_version`), and compared with what the test expects
from the datasets' own schemas and the configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.sql.types import (
    DateType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from core.config import RunoffConfig
from core.errors import ConfigError
from delta_tables.registry import (
    TableSpec,
    bronze_table,
    ensure_table,
    ensure_tables,
    quarantine_table,
    runs_table,
    silver_table,
    silver_tables,
    table_spec,
    table_specs,
)
from delta_tables.writes import is_delta_table, table_version
from jobs.datasets import DATASETS, get_dataset
from jobs.datasets.base import QUARANTINE_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

CHECKPOINT_INTERVAL = 7  # not the default (10), so the property must come from the config


@pytest.fixture
def interval_config(tmp_path: Path) -> RunoffConfig:
    env = {"RUNOFF_CHECKPOINT_INTERVAL": str(CHECKPOINT_INTERVAL)}
    return RunoffConfig.from_sources(home=tmp_path / "home", env=env)


def detail(spark: SparkSession, path: Path) -> dict[str, Any]:
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, str(path)).detail().first()
    assert row is not None
    return row.asDict()


def columns(spark: SparkSession, path: Path) -> list[tuple[str, Any, bool]]:
    """(name, type, nullable) of every column of the table, as delta-spark reads it."""
    from delta.tables import DeltaTable

    schema = DeltaTable.forPath(spark, str(path)).toDF().schema
    return [(f.name, f.dataType, f.nullable) for f in schema.fields]


def nullable(schema: StructType) -> list[tuple[str, Any, bool]]:
    return [(f.name, f.dataType, True) for f in schema.fields]


def test_ensure_tables_creates_bronze_quarantine_and_the_run_ledger(
    spark: SparkSession, interval_config: RunoffConfig
) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    from core.ledger import RUNS_SCHEMA

    config = interval_config
    home = config.home
    created = ensure_tables(spark, config, "events")

    assert [(s.name, s.layer, s.path) for s in created] == [
        ("bronze_events", "bronze", home / "delta" / "bronze" / "events"),
        ("quarantine_events", "quarantine", home / "delta" / "quarantine" / "events"),
        ("runs", "ops", home / "delta" / "ops" / "runs"),
    ]
    # the silver tables (schema unknown until their first MERGE) are not created
    for spec in silver_tables(config, "events"):
        assert not is_delta_table(spec.path)
        assert not spec.exists

    expected = {
        "bronze_events": (get_dataset("events").full_bronze_schema, ["event_date"]),
        "quarantine_events": (QUARANTINE_SCHEMA, ["ingest_date"]),
        "runs": (from_arrow_schema(RUNS_SCHEMA), []),
    }
    for spec in created:
        schema, partitions = expected[spec.name]
        assert spec.exists
        assert table_version(spec.path) == 0, spec.name
        assert columns(spark, spec.path) == nullable(schema), spec.name
        info = detail(spark, spec.path)
        assert list(info["partitionColumns"]) == partitions, spec.name
        assert info["properties"]["delta.checkpointInterval"] == str(CHECKPOINT_INTERVAL)
        assert info["description"] == spec.description
        assert info["numFiles"] == 0

    # a second call creates nothing and commits nothing
    assert ensure_tables(spark, config, "events") == []
    for spec in created:
        assert table_version(spec.path) == 0, spec.name


def test_ensure_tables_without_the_run_ledger(spark: SparkSession, config: RunoffConfig) -> None:
    created = ensure_tables(spark, config, get_dataset("lines"), include_runs=False)
    assert [s.name for s in created] == ["bronze_lines", "quarantine_lines"]
    assert not is_delta_table(config.runs_path)
    info = detail(spark, config.bronze_path("lines"))
    assert info["properties"]["delta.checkpointInterval"] == str(config.checkpoint_interval)


def test_ensure_table_creates_a_silver_table_from_the_given_schema(
    spark: SparkSession, interval_config: RunoffConfig
) -> None:
    spec = next(s for s in silver_tables(interval_config, "sensors") if s.partition_by)
    assert spec.schema is None
    assert spec.partition_by == ("window_date",)

    # without a schema there is nothing to create
    assert ensure_table(spark, spec) is False
    assert not is_delta_table(spec.path)

    schema = StructType(
        [
            StructField("window_start", TimestampType(), False),
            StructField("window_end", TimestampType(), False),
            StructField("window_date", DateType(), False),
            StructField("sensor", StringType(), True),
            StructField("readings", LongType(), False),
        ]
    )
    assert ensure_table(spark, spec, schema=schema) is True
    assert table_version(spec.path) == 0
    assert columns(spark, spec.path) == nullable(schema)
    info = detail(spark, spec.path)
    assert list(info["partitionColumns"]) == ["window_date"]
    assert info["properties"]["delta.checkpointInterval"] == str(CHECKPOINT_INTERVAL)

    assert ensure_table(spark, spec, schema=schema) is False
    assert table_version(spec.path) == 0


def test_every_dataset_has_distinct_table_names_and_paths(config: RunoffConfig) -> None:
    assert sorted(DATASETS) == ["activity", "events", "lines", "sensors"]
    runs = runs_table(config)
    every: list[TableSpec] = [runs]
    for name, dataset in DATASETS.items():
        specs = table_specs(config, name)
        assert specs == table_specs(config, dataset)  # a name or the Dataset itself
        assert specs[:2] == [bronze_table(config, name), quarantine_table(config, name)]
        assert [s.name for s in specs[2:]] == [a.table for a in dataset.aggregates]
        assert [s.keys for s in specs[2:]] == [tuple(a.keys) for a in dataset.aggregates]
        assert [s.path for s in specs] == [
            config.bronze_path(name),
            config.quarantine_path(name),
            *(config.silver_path(a.table) for a in dataset.aggregates),
        ]
        for spec in specs[2:]:
            assert silver_table(config, name, spec.name) == spec
            assert table_spec(config, name, spec.name) == spec
        assert table_spec(config, name, "runs") == runs
        every.extend(specs)

    names = [s.name for s in every]
    paths = [s.path for s in every]
    assert len(set(names)) == len(names), sorted(names)
    assert len(set(paths)) == len(paths), sorted(paths)
    assert all(p.is_relative_to(config.home / "delta") for p in paths)

    with pytest.raises(KeyError, match="no silver table 'bronze_events' in dataset 'events'"):
        silver_table(config, "events", "bronze_events")
    with pytest.raises(ConfigError, match=r"^no table 'nope' for dataset 'events' \(tables: "):
        table_spec(config, "events", "nope")
