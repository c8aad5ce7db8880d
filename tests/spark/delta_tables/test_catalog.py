"""`delta_tables.catalog`: every dataset's tables, paths, keys and checkpoints; created by
delta-spark.

The created tables are inspected through delta-spark (`DeltaTable.forPath(...).detail()` and the
table schema) and through delta-rs (`table_version`), and compared with what the test expects
from the specs and the configuration.
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
from core.specs import SpecError
from delta_tables.catalog import Catalog, Table, ensure_table
from delta_tables.schemas import QUARANTINE_SCHEMA
from delta_tables.writes import is_delta_table, table_version
from tests.seeds import SEED_NAMES, seed, seed_spec

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


def test_ensure_table_creates_bronze_quarantine_and_the_run_ledger(
    spark: SparkSession, interval_config: RunoffConfig
) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    from delta_tables.ledger import RUNS_SCHEMA

    config = interval_config
    home = config.home
    catalog = Catalog.load(config)
    tables = catalog.tables("events")
    bronze_schema = seed("events").full_bronze_schema
    wanted = [
        (tables.bronze, bronze_schema, ["event_date"]),
        (tables.quarantine, QUARANTINE_SCHEMA, ["ingest_date"]),
        (catalog.runs, from_arrow_schema(RUNS_SCHEMA), []),
    ]
    assert [(t.name, t.layer, t.path) for t, _, _ in wanted] == [
        ("bronze_events", "bronze", home / "delta" / "bronze" / "events"),
        ("quarantine_events", "quarantine", home / "delta" / "quarantine" / "events"),
        ("runs", "ops", home / "delta" / "ops" / "runs"),
    ]
    # bronze's schema comes from the job (the spec compiled by Spark): without it, nothing
    assert ensure_table(spark, tables.bronze) is False
    assert not tables.bronze.exists
    for table, schema, partitions in wanted:
        assert ensure_table(spark, table, bronze_schema) is True, table.name
        assert table.exists
        assert table_version(table.path) == 0, table.name
        assert columns(spark, table.path) == nullable(schema), table.name
        info = detail(spark, table.path)
        assert list(info["partitionColumns"]) == partitions, table.name
        assert info["properties"]["delta.checkpointInterval"] == str(CHECKPOINT_INTERVAL)
        assert info["description"] == table.description
        assert info["numFiles"] == 0
    # the silver tables (schema unknown until their first write) are not created
    for table in tables.silver:
        assert not is_delta_table(table.path)
    # a second call creates nothing and commits nothing
    for table, _, _ in wanted:
        assert ensure_table(spark, table, bronze_schema) is False
        assert table_version(table.path) == 0, table.name


def test_ensure_table_creates_a_table_whose_creation_was_stopped_before_its_first_commit(
    spark: SparkSession, interval_config: RunoffConfig
) -> None:
    """A process killed while creating a table leaves `_delta_log` without a commit: the next
    run creates the table there, as if nothing were there."""
    table = Catalog.load(interval_config).tables("events").quarantine
    log = Path(str(table.path)) / "_delta_log"
    log.mkdir(parents=True)
    (log / ".00000000000000000000.json.tmp").write_text("{")  # the commit being written
    assert not is_delta_table(table.path)
    assert ensure_table(spark, table) is True
    assert table_version(table.path) == 0
    assert columns(spark, table.path) == nullable(QUARANTINE_SCHEMA)


def test_ensure_table_creates_a_silver_table_from_the_given_schema(
    spark: SparkSession, interval_config: RunoffConfig
) -> None:
    table = Catalog.load(interval_config).silver_table("sensors_type_signal")
    assert table.schema is None
    assert table.partition_by == ("window_date",)

    # without a schema there is nothing to create
    assert ensure_table(spark, table) is False
    assert not is_delta_table(table.path)

    schema = StructType(
        [
            StructField("window_start", TimestampType(), False),
            StructField("window_end", TimestampType(), False),
            StructField("window_date", DateType(), False),
            StructField("sensor", StringType(), True),
            StructField("readings", LongType(), False),
        ]
    )
    assert ensure_table(spark, table, schema=schema) is True
    assert table_version(table.path) == 0
    assert columns(spark, table.path) == nullable(schema)
    info = detail(spark, table.path)
    assert list(info["partitionColumns"]) == ["window_date"]
    assert info["properties"]["delta.checkpointInterval"] == str(CHECKPOINT_INTERVAL)

    assert ensure_table(spark, table, schema=schema) is False
    assert table_version(table.path) == 0


def test_every_dataset_has_distinct_table_names_paths_and_checkpoints(
    config: RunoffConfig,
) -> None:
    catalog = Catalog.load(config)
    assert catalog.names == SEED_NAMES
    home = config.home
    every: list[Table] = [catalog.runs, catalog.quality_results]
    for name in SEED_NAMES:
        spec = seed_spec(name)
        tables = catalog.tables(name)
        assert catalog.spec(name) == spec
        assert (tables.bronze.name, tables.quarantine.name) == (
            f"bronze_{name}",
            f"quarantine_{name}",
        )
        assert [t.name for t in tables.silver] == [s.table for s in spec.silver]
        windowed = {s.table: bool(s.window) for s in spec.silver}
        assert [t.keys for t in tables.silver] == [
            (("window_start", "window_end") if windowed[s.table] else ()) + s.keys
            for s in spec.silver
        ]
        assert [t.path for t in tables] == [
            home / "delta" / "bronze" / name,
            home / "delta" / "quarantine" / name,
            *(home / "delta" / "silver" / s.table for s in spec.silver),
        ]
        bronze_checkpoint = home / "checkpoints" / "bronze" / name
        assert [t.checkpoint for t in tables] == [
            bronze_checkpoint,
            bronze_checkpoint,  # one query writes bronze and quarantine
            *(home / "checkpoints" / "silver" / s.table for s in spec.silver),
        ]
        assert catalog.landing_dir(name) == home / "landing" / name
        for table in tables.silver:
            assert catalog.silver_table(table.name) == table
            assert tables.named(table.name) == table
        every.extend(tables)

    names = [t.name for t in every]
    paths = [t.path for t in every]
    assert len(set(names)) == len(names), sorted(names)
    assert len(set(paths)) == len(paths), sorted(paths)

    with pytest.raises(ConfigError, match=r"^no silver table 'bronze_events' is declared$"):
        catalog.silver_table("bronze_events")
    with pytest.raises(ConfigError, match=r"^no table 'nope' \(tables: bronze_events, "):
        catalog.tables("events").named("nope")
    with pytest.raises(
        ConfigError,
        match=r"^unknown dataset 'nope': choose one of activity, events, lines, sensors$",
    ):
        catalog.spec("nope")


def test_source_path_relative_absolute_s3a_or_refused(tmp_path: Path, config: RunoffConfig) -> None:
    folder = tmp_path / "specs"
    folder.mkdir()
    base = (seed_spec("events").file).read_text()
    paths = {"a": "inbox/a", "b": str(tmp_path / "elsewhere"), "c": "s3a://x/y/", "d": "gs://x/y"}
    for name, path in paths.items():
        text = base.replace("name: events", f"name: {name}").replace("landing/events", path)
        text = text.replace("events_action_", f"{name}_action_")
        (folder / f"{name}.yaml").write_text(text)
    catalog = Catalog.load(config.with_changes(dataset_dirs=(*config.dataset_dirs, folder)))
    assert catalog.landing_dir("a") == config.home / "inbox" / "a"
    assert catalog.landing_dir("b") == tmp_path / "elsewhere"
    assert str(catalog.landing_dir("c")) == "s3a://x/y"
    with pytest.raises(ConfigError, match=r"source.path='gs://x/y': use a local folder or s3a://"):
        catalog.landing_dir("d")


def test_a_refused_spec_is_reported_by_name_and_the_others_load(
    tmp_path: Path, config: RunoffConfig
) -> None:
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "broken.yaml").write_text("name: broken\nsource: {format: csv}\n")
    catalog = Catalog.load(config.with_changes(dataset_dirs=(*config.dataset_dirs, folder)))
    assert catalog.names == SEED_NAMES
    problems = catalog.problems[folder / "broken.yaml"]
    assert problems == (
        f"{folder / 'broken.yaml'}: (top level): 'schema' is a required property",
        f"{folder / 'broken.yaml'}: (top level): 'event_time' is a required property",
        f"{folder / 'broken.yaml'}: source.format: 'csv' is not one of ['json', 'text']",
    )
    with pytest.raises(SpecError) as refused:
        catalog.spec("broken")
    assert refused.value.problems == problems
