"""A declared dataset made executable: its spec's SQL as Spark columns and pure transforms.

`load_dataset(catalog, name)` -> `Dataset`: the record schema (Spark DDL), the event-time column,
the bronze projection (renames or a select list), the row rules, and one `SilverAggregate` per
silver table whose `transform(bronze, watermark)` works on batch and streaming DataFrames alike:
select -> where -> group by window and keys -> measures -> having. A spec's `transform:
module:function` replaces that chain for one table. Schemas and columns are built lazily: they
need a running SparkSession, the spec does not.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from core.errors import ConfigError
from core.specs import WINDOW_DATE, DatasetSpec, Expectation, Rule, SilverSpec
from delta_tables.schemas import BRONZE_METADATA, RESCUED_DATA
from jobs.streaming.sql import sql_literal

if TYPE_CHECKING:
    from delta_tables.catalog import Catalog

Transform = Callable[[DataFrame, str], DataFrame]


def _spark() -> SparkSession:
    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError("a SparkSession must be running to build a dataset's columns")
    return spark


def expectation_rule(expectation: Expectation) -> Rule:
    """A row-level expectation as a bronze row rule named `<expect>(<column>)`: the SQL that holds
    for the rows the expectation accepts (nulls pass, as in GX, except for not_null)."""
    kwargs = expectation.kwargs
    column = ".".join(f"`{part}`" for part in kwargs["column"].split("."))
    kind = expectation.expect
    if kind == "expect_column_values_to_not_be_null":
        return Rule(f"{kind}({kwargs['column']})", f"{column} IS NOT NULL")
    if kind == "expect_column_value_lengths_to_be_between":
        measured = f"length({column})"
    else:
        measured = column
    if kind in ("expect_column_values_to_be_between", "expect_column_value_lengths_to_be_between"):
        bounds = []
        if kwargs.get("min_value") is not None:
            op = ">" if kwargs.get("strict_min") else ">="
            bounds.append(f"{measured} {op} {sql_literal(kwargs['min_value'])}")
        if kwargs.get("max_value") is not None:
            op = "<" if kwargs.get("strict_max") else "<="
            bounds.append(f"{measured} {op} {sql_literal(kwargs['max_value'])}")
        test = " AND ".join(bounds) or "true"
    elif kind in ("expect_column_values_to_be_in_set", "expect_column_values_to_not_be_in_set"):
        values = ", ".join(sql_literal(v) for v in kwargs["value_set"])
        negation = "NOT " if kind.endswith("not_be_in_set") else ""
        test = f"{column} {negation}IN ({values})"
    elif kind == "expect_column_values_to_match_regex":
        test = f"{column} RLIKE {sql_literal(kwargs['regex'])}"
    else:
        raise ConfigError(f"{kind} cannot quarantine rows")
    return Rule(f"{kind}({kwargs['column']})", f"{column} IS NULL OR ({test})")


def parse_ddl(ddl: str) -> StructType:
    """A Spark DDL column list ("a INT, b STRING") as a StructType (Spark's own parser)."""
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return StructType([StructField(f.name, f.dataType, True) for f in schema.fields])


def load_transform(reference: str) -> Transform:
    """`module:function` -> the function (the spec's escape hatch)."""
    module_name, _, name = reference.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"transform {reference!r} cannot be imported ({exc})") from exc
    if not callable(function):
        raise ConfigError(f"transform {reference!r} is not a function")
    return function


def selected(spec: SilverSpec) -> list[Column]:
    """A silver table's `select` list, with `event_time` carried along for the window (unless
    the list keeps every column with `*`)."""
    keep_all = any(e.strip() == "*" for e in spec.select)
    carried = [F.col("event_time")] if spec.window and not keep_all else []
    return [*carried, *[F.expr(e) for e in spec.select]]


@dataclass(frozen=True)
class SilverAggregate:
    """One silver table: bronze rows -> one row per window and key (see the module doc)."""

    spec: SilverSpec
    dataset: str

    @property
    def table(self) -> str:
        return self.spec.table

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def keys(self) -> tuple[str, ...]:
        return self.spec.key_columns

    @property
    def output_mode(self) -> Literal["update", "append"]:
        return self.spec.output

    @property
    def window(self) -> str | None:
        return self.spec.window

    @property
    def slide(self) -> str | None:
        return self.spec.slide

    @property
    def partition_by(self) -> tuple[str, ...]:
        return self.spec.partition_by

    def transform(self, bronze: DataFrame, watermark: str) -> DataFrame:
        s = self.spec
        if s.transform:
            return load_transform(s.transform)(bronze, watermark)
        rows = bronze.withWatermark("event_time", watermark) if s.window else bronze
        if s.select:
            rows = rows.select(*selected(s))
        if s.where:
            rows = rows.where(F.expr(s.where))
        groups: list[Column] = [F.col(path).alias(name) for name, path in s.key_sources]
        if s.window:
            window = (
                F.window("event_time", s.window, s.slide)
                if s.slide
                else F.window("event_time", s.window)
            )
            groups.insert(0, window.alias("window"))
        grouped = rows.groupBy(*groups).agg(*[F.expr(sql).alias(n) for n, sql in s.measures])
        if s.having:
            grouped = grouped.where(F.expr(s.having))
        columns: list[Column] = [F.col(k) for k in s.keys]
        columns += [F.col(n) for n in s.measure_names]
        if s.window:
            columns[:0] = [
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"),
            ]
            if WINDOW_DATE in s.partition_by:
                columns.append(F.to_date(F.col("window.start")).alias(WINDOW_DATE))
        return grouped.select(*columns)


@dataclass(frozen=True)
class Dataset:
    """A dataset as Spark sees it (see the module doc)."""

    spec: DatasetSpec
    aggregates: tuple[SilverAggregate, ...] = field(default=())

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def record_format(self) -> Literal["json", "text"]:
        return self.spec.source_format

    @property
    def watermark(self) -> str:
        return self.spec.watermark

    @property
    def required(self) -> tuple[str, ...]:
        return self.spec.required

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The spec's row rules, then its bronze expectations of severity `quarantine`."""
        derived = [
            expectation_rule(e)
            for e in self.spec.expectations_of("bronze")
            if e.severity == "quarantine"
        ]
        return (*self.spec.rules, *derived)

    @property
    def rescues(self) -> bool:
        """Unknown fields go to `_rescued_data` (JSON datasets in `rescue` mode)."""
        return self.record_format == "json" and self.spec.schema_evolution == "rescue"

    @cached_property
    def declared_schema(self) -> StructType:
        return parse_ddl(self.spec.schema)

    @property
    def record_schema(self) -> StructType | None:
        """The JSON record's schema; None for text datasets (the line is the record)."""
        return self.declared_schema if self.record_format == "json" else None

    @property
    def record_columns(self) -> list[str]:
        return self.declared_schema.fieldNames()

    def event_time(self) -> Column:
        return F.expr(self.spec.event_time)

    def bronze_columns(self) -> list[Column]:
        """The bronze projection over the record's columns: its select list, or every column
        under its (renamed) name."""
        if self.spec.select:
            return [F.expr(e) for e in self.spec.select]
        renames = dict(self.spec.rename)
        return [F.col(n).alias(renames.get(n, n)) for n in self.record_columns]

    @cached_property
    def bronze_schema(self) -> StructType:
        """The dataset's own bronze columns (the metadata columns follow them)."""
        empty = _spark().createDataFrame([], StructType([*self.declared_schema.fields]))
        projected = empty.select(*self.bronze_columns())
        return StructType([StructField(f.name, f.dataType, True) for f in projected.schema])

    @property
    def full_bronze_schema(self) -> StructType:
        rescued = [RESCUED_DATA] if self.rescues else []
        return StructType([*self.bronze_schema.fields, *BRONZE_METADATA.fields, *rescued])

    def aggregate(self, table: str) -> SilverAggregate:
        self.spec.silver_spec(table)  # the error naming the tables
        return next(a for a in self.aggregates if a.table == table)


def compile_dataset(spec: DatasetSpec) -> Dataset:
    return Dataset(
        spec=spec,
        aggregates=tuple(SilverAggregate(spec=s, dataset=spec.name) for s in spec.silver),
    )


def load_dataset(catalog: Catalog, name: str) -> Dataset:
    """The dataset `name` of the catalog, ready for Spark."""
    return compile_dataset(catalog.spec(name))
