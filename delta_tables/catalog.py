"""The table catalog: the one place that maps a dataset to its tables.

For every declared dataset (`core.specs`): its landing folder, and its tables with their names,
paths, checkpoints, keys, partitioning and properties:
- `bronze_<dataset>` at `delta/bronze/<dataset>`, partitioned by `event_date`, checkpoint
  `checkpoints/bronze/<dataset>`; schema given by the bronze job on creation;
- `quarantine_<dataset>` at `delta/quarantine/<dataset>`: `QUARANTINE_SCHEMA`, partitioned by
  `ingest_date`, written by the bronze query (same checkpoint);
- one silver table per aggregate at `delta/silver/<table>`, keyed by window and keys,
  checkpoint `checkpoints/silver/<table>`, schema set by its first write, the definition that
  builds it kept as a table property (`delta_tables.definitions`);
- the run ledger `runs` at `delta/ops/runs`.
Everything else asks this module; nothing here imports pyspark at module level (DAG files use it).
`ensure_table(spark, table)` creates a missing table through delta-spark
(`DeltaTable.createIfNotExists`: idempotent, safe against a concurrent creator).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from upath import UPath

from core.config import Location, RunoffConfig, data_location, remove_tree
from core.errors import ConfigError
from core.specs import DatasetSpec, SpecError, SpecScan, scan
from delta_tables import definitions
from delta_tables.writes import is_delta_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

Layer = Literal["bronze", "quarantine", "silver", "ops"]


@dataclass(frozen=True)
class Table:
    """One Delta table of runoff."""

    name: str
    layer: Layer
    path: Location
    dataset: str = ""
    checkpoint: Location | None = None
    partition_by: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()  # the columns that identify a row (silver MERGE condition)
    properties: Mapping[str, str] = field(default_factory=dict)
    description: str = ""

    @property
    def exists(self) -> bool:
        return is_delta_table(str(self.path))

    @property
    def schema(self) -> StructType | None:
        """The fixed schema of quarantine and the ledger; None: set by the job that writes it."""
        if self.layer == "quarantine":
            from delta_tables.schemas import QUARANTINE_SCHEMA

            return QUARANTINE_SCHEMA
        if self.name == "runs":
            from pyspark.sql.pandas.types import from_arrow_schema

            from delta_tables.ledger import RUNS_SCHEMA

            return from_arrow_schema(RUNS_SCHEMA)
        return None


@dataclass(frozen=True)
class DatasetTables:
    """A dataset's tables: bronze, quarantine, silver (declared order)."""

    bronze: Table
    quarantine: Table
    silver: tuple[Table, ...]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter((self.bronze, self.quarantine, *self.silver))

    @property
    def defined(self) -> tuple[Table, ...]:
        """The tables that keep the definition they were built by (`delta_tables.definitions`):
        bronze and silver."""
        return (self.bronze, *self.silver)

    def named(self, name: str) -> Table:
        for table in self:
            if table.name == name:
                return table
        names = ", ".join(t.name for t in self)
        raise ConfigError(f"no table {name!r} (tables: {names})")


class Catalog:
    """The datasets found in `config.dataset_dirs` and their tables."""

    def __init__(self, config: RunoffConfig, found: SpecScan) -> None:
        self.config = config
        self._found = found

    @classmethod
    def load(cls, config: RunoffConfig) -> Catalog:
        return cls(config, scan(config.dataset_dirs))._without_shared_landing()

    def _without_shared_landing(self) -> Catalog:
        """Refuse a spec whose landing folder is another's, lies inside it or holds it: bronze
        archives the files it ingests, so the other dataset would never see them. The spec found
        first keeps its folder; the other is refused naming both files."""
        specs = dict(self._found.specs)
        problems = dict(self._found.problems)
        kept: list[tuple[DatasetSpec, str]] = []
        for spec in self._found.specs.values():
            try:
                folder = _folder_text(self.landing_dir(spec.name))
            except ConfigError:
                continue  # a source.path runoff cannot read fails where it is used, by name
            other = next((k for k in kept if _overlap(folder, k[1])), None)
            if other is None:
                kept.append((spec, folder))
                continue
            del specs[spec.name]
            problems[spec.file] = (
                f"{spec.file}: source.path: the landing folder {folder} overlaps {other[1]} of "
                f"dataset {other[0].name!r} ({other[0].file}): bronze archives the files it "
                "ingests, so one dataset would miss the other's files; give each its own folder",
            )
        if len(specs) == len(self._found.specs):
            return self
        return Catalog(self.config, SpecScan(specs=specs, problems=problems))

    # -- datasets -------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._found.specs))

    @property
    def specs(self) -> tuple[DatasetSpec, ...]:
        return tuple(self._found.specs[n] for n in self.names)

    @property
    def problems(self) -> Mapping[Path, tuple[str, ...]]:
        """Refused spec files and why (one line per problem)."""
        return self._found.problems

    def spec(self, dataset: str) -> DatasetSpec:
        """The spec of `dataset`; a refused file raises its problems, an unknown name the
        choices."""
        try:
            return self._found.specs[dataset]
        except KeyError:
            pass
        for path, problems in self._found.problems.items():
            if path.stem == dataset:
                raise SpecError(problems)
        raise self.unknown(dataset) from None

    def declares(self, dataset: str) -> bool:
        """Whether a spec file declares `dataset`, refused files included."""
        return dataset in self._found.specs or any(p.stem == dataset for p in self.problems)

    def unknown(self, dataset: str) -> ConfigError:
        """The error for a name no spec file declares, with the names that are."""
        declared = {*self.names, *(path.stem for path in self.problems)}
        choices = ", ".join(sorted(declared)) or "none"
        return ConfigError(f"unknown dataset {dataset!r}: choose one of {choices}")

    def landing_dir(self, dataset: str) -> Location:
        """`source.path` of the spec: relative to the data root (the home unless `RUNOFF_DATA`
        names another), absolute, or an `s3a://` URI."""
        raw = self.spec(dataset).source_path
        if "://" in raw:
            return data_location(raw, what=f"dataset {dataset!r}: source.path")
        path = Path(raw).expanduser()
        return UPath(path) if path.is_absolute() else self.config.data / path

    # -- tables ---------------------------------------------------------------------------
    def _properties(self) -> dict[str, str]:
        # delta-spark writes a checkpoint every this many commits: opening a table replays the
        # JSON commits since the last one, and streaming tables get one or two commits a batch.
        return {"delta.checkpointInterval": str(self.config.checkpoint_interval)}

    def tables(self, dataset: str) -> DatasetTables:
        spec = self.spec(dataset)
        config = self.config
        checkpoint = config.checkpoint_dir("bronze", spec.name)
        props = self._properties()
        return DatasetTables(
            bronze=Table(
                name=f"bronze_{spec.name}",
                layer="bronze",
                path=config.bronze_path(spec.name),
                dataset=spec.name,
                checkpoint=checkpoint,
                partition_by=("event_date",),
                properties={**props, definitions.PROPERTY: definitions.encoded(spec)},
                description=f"bronze {spec.name}: one row per parsed landing record",
            ),
            quarantine=Table(
                name=f"quarantine_{spec.name}",
                layer="quarantine",
                path=config.quarantine_path(spec.name),
                dataset=spec.name,
                checkpoint=checkpoint,
                partition_by=("ingest_date",),
                properties=props,
                description=f"quarantine {spec.name}: one row per malformed landing line",
            ),
            silver=tuple(
                Table(
                    name=s.table,
                    layer="silver",
                    path=config.silver_path(s.table),
                    dataset=spec.name,
                    checkpoint=config.checkpoint_dir("silver", s.table),
                    partition_by=s.partition_by,
                    keys=s.key_columns,
                    properties={**props, definitions.PROPERTY: definitions.encoded(s)},
                    description=s.description,
                )
                for s in spec.silver
            ),
        )

    def silver_table(self, table: str) -> Table:
        """The silver table called `table`, whichever dataset declares it."""
        for spec in self.specs:
            if table in spec.silver_tables:
                return self.tables(spec.name).named(table)
        raise ConfigError(f"no silver table {table!r} is declared")

    @property
    def quality_results(self) -> Table:
        return Table(
            name="quality_results",
            layer="ops",
            path=self.config.quality_results_path,
            properties=self._properties(),
            description="quality results history: one row per expectation per validation",
        )

    @property
    def quality_metrics(self) -> Table:
        return Table(
            name="quality_metrics",
            layer="ops",
            path=self.config.quality_metrics_path,
            properties=self._properties(),
            description="batch metrics history: one row per metric per committed bronze batch",
        )

    @property
    def runs(self) -> Table:
        return Table(
            name="runs",
            layer="ops",
            path=self.config.runs_path,
            properties=self._properties(),
            description="run ledger: one row per job run",
        )


def ensure_table(spark: SparkSession, table: Table, schema: StructType | None = None) -> bool:
    """Create the table if it is missing (its schema: `table.schema`, else `schema`); True when
    this call created it. Every column is nullable, as delta-spark makes them anyway."""
    from delta.tables import DeltaTable
    from pyspark.sql.types import StructField, StructType

    struct = table.schema or schema
    if struct is None or table.exists:
        return False
    # A log without a commit, left by a creation stopped before its first one: delta-spark
    # takes the folder for a table and then finds none, so it goes, holding nothing.
    remove_tree(table.path / "_delta_log")
    builder = (
        DeltaTable.createIfNotExists(spark)
        .location(str(table.path))
        .addColumns(StructType([StructField(f.name, f.dataType, True) for f in struct.fields]))
    )
    if table.partition_by:
        builder = builder.partitionedBy(*table.partition_by)
    if table.description:
        builder = builder.comment(table.description)
    for key, value in table.properties.items():
        builder = builder.property(key, value)
    builder.execute()
    return True


def _folder_text(folder: Location) -> str:
    """A landing folder as comparable text: a normalized local path, or the URI."""
    text = str(folder)
    return text.rstrip("/") if "://" in text else os.path.normpath(text)


def _overlap(one: str, other: str) -> bool:
    """The same folder, or one inside the other."""
    return one == other or one.startswith(other + "/") or other.startswith(one + "/")
