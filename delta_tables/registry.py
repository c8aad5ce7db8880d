"""The table registry: every runoff Delta table's name, path, schema, partitioning, properties.

One place answers "where is table X and what does it look like":
- bronze `delta/bronze/<dataset>`: `dataset.full_bronze_schema`, partitioned by `event_date`;
- quarantine `delta/quarantine/<dataset>`: `QUARANTINE_SCHEMA`, partitioned by `ingest_date`;
- silver `delta/silver/<table>`: one per silver aggregate, schema derived by the first MERGE
  (`schema is None`), MERGE keys from the aggregate;
- the run ledger `delta/ops/runs`: `jobs.ledger.RUNS_SCHEMA`.
Paths come from `RunoffConfig`. `ensure_tables(spark, config, dataset)` creates the missing
tables through delta-spark (`DeltaTable.createIfNotExists`: idempotent, safe against a
concurrent creator), with `delta.checkpointInterval` from the configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pyspark.sql.types import StructField, StructType

from delta_tables.writes import is_delta_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jobs.config import RunoffConfig
    from jobs.datasets.base import Dataset

Layer = Literal["bronze", "quarantine", "silver", "ops"]


@dataclass(frozen=True)
class TableSpec:
    """One Delta table of runoff."""

    name: str
    layer: Layer
    path: Path
    schema: StructType | None  # None: created by its first write (silver MERGE)
    partition_by: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    keys: tuple[str, ...] = ()  # MERGE keys (silver)
    description: str = ""

    @property
    def exists(self) -> bool:
        return is_delta_table(str(self.path))


def _properties(config: RunoffConfig) -> dict[str, str]:
    # delta-spark writes a checkpoint every this many commits: opening a table replays the JSON
    # commits since the last one, and streaming tables receive one or two commits per batch.
    return {"delta.checkpointInterval": str(config.checkpoint_interval)}


def _dataset(dataset: Dataset | str) -> Dataset:
    if isinstance(dataset, str):
        from jobs.datasets import get_dataset

        return get_dataset(dataset)
    return dataset


def bronze_table(config: RunoffConfig, dataset: Dataset | str) -> TableSpec:
    ds = _dataset(dataset)
    return TableSpec(
        name=f"bronze_{ds.name}",
        layer="bronze",
        path=config.bronze_path(ds.name),
        schema=ds.full_bronze_schema,
        partition_by=("event_date",),
        properties=_properties(config),
        description=f"bronze {ds.name}: one row per parsed landing record",
    )


def quarantine_table(config: RunoffConfig, dataset: Dataset | str) -> TableSpec:
    from jobs.datasets.base import QUARANTINE_SCHEMA

    ds = _dataset(dataset)
    return TableSpec(
        name=f"quarantine_{ds.name}",
        layer="quarantine",
        path=config.quarantine_path(ds.name),
        schema=QUARANTINE_SCHEMA,
        partition_by=("ingest_date",),
        properties=_properties(config),
        description=f"quarantine {ds.name}: one row per malformed landing line",
    )


def silver_tables(config: RunoffConfig, dataset: Dataset | str) -> list[TableSpec]:
    ds = _dataset(dataset)
    return [
        TableSpec(
            name=agg.table,
            layer="silver",
            path=config.silver_path(agg.table),
            schema=None,
            partition_by=tuple(agg.partition_by),
            properties=_properties(config),
            keys=tuple(agg.keys),
            description=agg.description,
        )
        for agg in ds.aggregates
    ]


def silver_table(config: RunoffConfig, dataset: Dataset | str, table: str) -> TableSpec:
    """The silver table called `table` of the dataset."""
    for spec in silver_tables(config, dataset):
        if spec.name == table:
            return spec
    raise KeyError(f"no silver table {table!r} in dataset {_dataset(dataset).name!r}")


def runs_table(config: RunoffConfig) -> TableSpec:
    from pyspark.sql.pandas.types import from_arrow_schema

    from jobs.ledger import RUNS_SCHEMA

    return TableSpec(
        name="runs",
        layer="ops",
        path=config.runs_path,
        schema=from_arrow_schema(RUNS_SCHEMA),
        properties=_properties(config),
        description="run ledger: one row per job run",
    )


def table_specs(config: RunoffConfig, dataset: Dataset | str) -> list[TableSpec]:
    """The dataset's tables: bronze, quarantine, then its silver tables."""
    return [
        bronze_table(config, dataset),
        quarantine_table(config, dataset),
        *silver_tables(config, dataset),
    ]


def table_spec(config: RunoffConfig, dataset: Dataset | str, name: str) -> TableSpec:
    """The table called `name` (e.g. `bronze_events`, `events_action_hourly`, `runs`)."""
    specs = [*table_specs(config, dataset), runs_table(config)]
    for spec in specs:
        if spec.name == name:
            return spec
    from jobs.errors import ConfigError

    raise ConfigError(
        f"no table {name!r} for dataset {_dataset(dataset).name!r} "
        f"(tables: {', '.join(s.name for s in specs)})"
    )


def ensure_table(spark: SparkSession, spec: TableSpec, schema: StructType | None = None) -> bool:
    """Create the table if it is missing (its schema: `spec.schema`, else `schema`); True when
    this call created it. Every column is nullable, as delta-spark makes them anyway."""
    from delta.tables import DeltaTable

    struct = spec.schema or schema
    if struct is None or spec.exists:
        return False
    builder = (
        DeltaTable.createIfNotExists(spark)
        .location(str(spec.path))
        .addColumns(StructType([StructField(f.name, f.dataType, True) for f in struct.fields]))
    )
    if spec.partition_by:
        builder = builder.partitionedBy(*spec.partition_by)
    if spec.description:
        builder = builder.comment(spec.description)
    for key, value in spec.properties.items():
        builder = builder.property(key, value)
    builder.execute()
    return True


def ensure_tables(
    spark: SparkSession, config: RunoffConfig, dataset: Dataset | str, include_runs: bool = True
) -> list[TableSpec]:
    """Create the dataset's missing tables (and the run ledger); returns those created."""
    specs = table_specs(config, dataset) + ([runs_table(config)] if include_runs else [])
    return [spec for spec in specs if ensure_table(spark, spec)]
