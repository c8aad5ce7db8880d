"""A dataset spec resolved by Spark's analyzer, without reading data: the plan of its tables.

Input: a `DatasetSpec` and a SparkSession. Every SQL expression of the spec is resolved on empty
DataFrames of the declared schema: the event time (a timestamp), the bronze projection, the row
rules (booleans), and for each silver table its select, where, keys, measures, having (or
transform) and the declared expectations' columns. Output: a `DatasetPlan` (tables, columns and
types, keys, partitioning, expectations) and one `<file>: <key>: <problem>` line per problem.
`runoff check` prints it; every Spark command calls `ensure_resolves` before reading data.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from core.errors import ConfigError
from core.spec_checks import record_check
from core.specs import DatasetSpec
from delta_tables.catalog import Catalog
from jobs.streaming.dataset import Dataset, SilverAggregate, compile_dataset, selected
from quality.anomalies import metric_names

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

T = TypeVar("T")
# Expectation arguments that name columns of the table they check.
COLUMN_ARGUMENTS = ("column", "column_A", "column_B")
COLUMN_LIST_ARGUMENTS = ("column_list",)
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@dataclass
class TablePlan:
    name: str
    layer: str
    path: str
    columns: list[tuple[str, str]]
    keys: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    details: list[str] = field(default_factory=list)
    expectations: list[str] = field(default_factory=list)
    schema: StructType | None = None  # the table's, with the types within its columns


@dataclass
class DatasetPlan:
    spec: DatasetSpec
    tables: list[TablePlan] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _columns(schema: StructType) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


class _Resolver:
    """Resolves one spec's SQL, collecting `<file>: <key>: <problem>` lines."""

    def __init__(self, spec: DatasetSpec) -> None:
        self.spec = spec
        self.problems: list[str] = []

    def problem(self, key: str, message: str) -> None:
        self.problems.append(f"{self.spec.file}: {key}: {message}")

    def attempt(self, key: str, columns: Sequence[str], build: Callable[[], T]) -> T | None:
        """`build()`, or None with the analyzer's complaint recorded under `key`."""
        from pyspark.errors import AnalysisException
        from pyspark.logger import PySparkLogger

        # PySpark logs every analysis error with its query context (of SQL text or of a
        # DataFrame call): expected here, so quiet. (Its own logger class: PySpark logs with
        # arguments a plain `logging.Logger` refuses, and the first to ask creates the logger.)
        loggers = [PySparkLogger.getLogger(n) for n in QUERY_CONTEXT_LOGGERS]
        levels = [logger.level for logger in loggers]
        for logger in loggers:
            logger.setLevel(logging.CRITICAL)
        try:
            return build()
        except AnalysisException as exc:
            self.problem(key, describe(exc, columns))
            return None
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)

    def known(
        self, key: str, names: Sequence[str], columns: Sequence[str], schema: Any = None
    ) -> bool:
        """Every name is a column, or (with the table's `schema`, a StructType) the path of a
        field within a struct column (`user.country`)."""
        missing = [n for n in names if n not in columns and not has_path(schema, n)]
        for name in missing:
            self.problem(key, f"unknown column {name!r} (columns: {', '.join(columns)})")
        return not missing


def has_path(schema: StructType | None, path: str) -> bool:
    """`schema` has the field `path` (`user.country`: field country of struct column user)."""
    from pyspark.sql.types import StructType

    kind: Any = schema
    for name in path.split("."):
        if not isinstance(kind, StructType) or name not in kind.fieldNames():
            return False
        kind = kind[name].dataType
    return True


def describe(exc: Exception, columns: Sequence[str]) -> str:
    """The analyzer's complaint in one line; an unknown column names the columns that exist."""
    get = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    condition = (get() if get else None) or ""
    params: dict[str, Any] = {}
    if hasattr(exc, "getMessageParameters"):
        params = exc.getMessageParameters() or {}
    if condition.startswith("UNRESOLVED_COLUMN") or condition.startswith("UNRESOLVED_FIELD"):
        name = str(params.get("objectName", "?")).strip("`")
        return f"unknown column {name!r} (columns: {', '.join(columns)})"
    if condition.startswith("UNRESOLVED_ROUTINE"):
        name = str(params.get("routineName", "?")).strip("`")
        return f"unknown function {name!r}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.split(" SQLSTATE")[0].strip()


def resolve(spark: SparkSession, spec: DatasetSpec, catalog: Catalog) -> DatasetPlan:
    """The plan of `spec`, every SQL expression resolved on empty DataFrames (see module doc)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    plan = DatasetPlan(spec)
    check = _Resolver(spec)
    dataset = compile_dataset(spec)
    try:
        declared = dataset.declared_schema
    except Exception as exc:  # noqa: BLE001 - Spark's DDL parser raises several kinds
        check.problem("schema", f"not a Spark DDL column list ({describe(exc, [])})")
        plan.problems = check.problems
        return plan
    if spec.source_format == "text" and len(declared.fields) != 1:
        check.problem("schema", "a text dataset has one STRING column: the line")
    names = declared.fieldNames()
    record = spark.createDataFrame(
        [], StructType([*declared.fields, StructField("_source_file", StringType())])
    )
    scope = [*names, "_source_file"]
    event_time = check.attempt(
        "event_time", scope, lambda: record.select(dataset.event_time().alias("t")).schema[0]
    )
    if event_time is not None and not isinstance(event_time.dataType, TimestampType):
        check.problem(
            "event_time", f"is {event_time.dataType.simpleString()}, not a timestamp: cast it"
        )
    check.attempt("required", names, lambda: record.select(*spec.required))
    check.known("bronze.rename", [old for old, _ in spec.rename], names)
    renamed = record.withColumns(
        {new: F.col(old) for old, new in spec.rename if old in names and new not in names}
    ).withColumn("event_time", F.lit(None).cast("timestamp"))
    for i, rule in enumerate(spec.rules):
        result = check.attempt(
            f"rules[{i}].expr",
            renamed.columns,
            lambda rule=rule: renamed.select(F.expr(rule.expr)).schema[0],  # type: ignore[misc]
        )
        if result is not None and result.dataType.simpleString() != "boolean":
            check.problem(f"rules[{i}].expr", f"is {result.dataType.simpleString()}, not boolean")
    bronze_key = "bronze.select" if spec.select else "bronze"
    projected = check.attempt(bronze_key, names, lambda: record.select(*dataset.bronze_columns()))
    tables = catalog.tables(spec.name)
    if projected is not None and not check.problems:
        bronze_schema = dataset.full_bronze_schema
        plan.tables.append(
            TablePlan(
                tables.bronze.name,
                "bronze",
                str(tables.bronze.path),
                _columns(bronze_schema),
                partition_by=tables.bronze.partition_by,
                details=[
                    f"source {spec.source_format} {catalog.landing_dir(spec.name)}",
                    f"event_time = {spec.event_time}",
                    *(
                        [f"schema_evolution {spec.schema_evolution}"]
                        if spec.source_format == "json"
                        else []
                    ),
                    *(f"rule {r.name}: {r.expr}" for r in spec.rules),
                ],
            )
        )
        metrics = metric_names([r.name for r in dataset.rules], dataset.bronze_schema.fieldNames())
        _check_expectations(check, "bronze", bronze_schema, plan.tables[-1], metrics)
        bronze = spark.createDataFrame([], bronze_schema)
        for i, aggregate in enumerate(dataset.aggregates):
            table = _resolve_silver(check, f"silver[{i}]", bronze, dataset, aggregate)
            if table is not None:
                silver = tables.named(aggregate.table)
                table.path = str(silver.path)
                table.keys = silver.keys
                table.partition_by = silver.partition_by
                plan.tables.append(table)
                assert table.schema is not None
                _check_expectations(check, aggregate.table, table.schema, table)
    plan.problems = check.problems
    return plan


def _resolve_silver(
    check: _Resolver, key: str, bronze: DataFrame, dataset: Dataset, aggregate: SilverAggregate
) -> TablePlan | None:
    from pyspark.sql import functions as F

    s = aggregate.spec
    problems_before = len(check.problems)
    if s.transform is None:
        rows: DataFrame | None = bronze
        if s.select:
            rows = check.attempt(
                f"{key}.select",
                bronze.columns,
                lambda: bronze.select(*selected(s)),
            )
        if rows is not None and s.where:
            where, condition = rows, s.where
            rows = check.attempt(
                f"{key}.where", where.columns, lambda: where.where(F.expr(condition))
            )
        if rows is None:
            return None
        base = rows
        keys = [F.col(path).alias(name) for name, path in s.key_sources]
        if check.attempt(f"{key}.keys", base.columns, lambda: base.select(*keys)) is None:
            return None
        for name, sql in s.measures:
            check.attempt(
                f"{key}.measures.{name}",
                base.columns,
                lambda sql=sql: base.groupBy(*keys).agg(F.expr(sql)).schema,  # type: ignore[misc]
            )
        if len(check.problems) > problems_before:
            return None
    measure_names = [*s.measure_names]
    result = check.attempt(
        f"{key}.having" if s.having else key,
        [*s.key_columns, *measure_names],
        lambda: aggregate.transform(bronze, dataset.watermark).schema,
    )
    if result is None:
        return None
    if s.transform is not None:
        check.known(f"{key}.transform", s.key_columns, result.fieldNames())
    details = [f"output {s.output}"]
    if s.window:
        details.append(f"window {s.window}" + (f", slide {s.slide}" if s.slide else ""))
    details.append(f"watermark {dataset.watermark}")
    details += [f"{name} = {sql}" for name, sql in s.measures]
    if s.having:
        details.append(f"having {s.having}")
    if s.transform:
        details.append(f"transform {s.transform}")
    return TablePlan(
        aggregate.table, "silver", "", _columns(result), details=details, schema=result
    )


def _check_expectations(
    check: _Resolver,
    table: str,
    schema: StructType,
    plan: TablePlan,
    metrics: Sequence[str] = (),
) -> None:
    from quality.anomalies import HistoryRule
    from quality.suites import declared

    columns = schema.fieldNames()

    spec_expectations = check.spec.expectations_of(table)
    for i, item in enumerate(spec_expectations):
        key = f"expectations.{table}[{i}]"
        if item.is_history:  # not a GX name: judged by quality.anomalies
            try:
                rule = HistoryRule.of(item)
            except ConfigError as exc:
                check.problem(key, str(exc))
                continue
            if rule.metric not in metrics:
                check.problem(
                    f"{key}.metric",
                    f"unknown batch metric {rule.metric!r} (metrics: {', '.join(metrics)})",
                )
                continue
            arguments = ", ".join(f"{k}={v!r}" for k, v in rule.arguments.items())
            plan.expectations.append(f"{item.expect}({arguments}) [{item.severity}]")
            continue
        for argument in COLUMN_ARGUMENTS:
            if argument in item.kwargs:
                check.known(f"{key}.{argument}", [str(item.kwargs[argument])], columns, schema)
        for argument in COLUMN_LIST_ARGUMENTS:
            if argument in item.kwargs:
                check.known(f"{key}.{argument}", list(item.kwargs[argument]), columns, schema)
        if item.is_freshness:
            # Not a GX name: the age of the table's newest event time (quality.suites.freshness).
            column = check.spec.newest_event_column(table)
            if column is None:
                check.problem(f"{key}.expect", "freshness needs an event time: the table has none")
                continue
            check.known(f"{key}.expect", [column], columns)
        try:
            declared((item,))
        except (ConfigError, TypeError, ValueError) as exc:
            check.problem(key, str(exc).splitlines()[0])
            continue
        kwargs = {"max_age": item.max_age, **item.kwargs} if item.is_freshness else item.kwargs
        arguments = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        plan.expectations.append(f"{item.expect}({arguments}) [{item.severity}]")


def ensure_resolves(spark: SparkSession, catalog: Catalog, dataset: str) -> None:
    """Refuse to run a dataset whose spec's SQL does not resolve (the lines `runoff check`
    prints), before any data is read; the finding is kept for Airflow (`core.spec_checks`)."""
    from core.specs import SpecError

    spec = catalog.spec(dataset)
    problems = resolve(spark, spec, catalog).problems
    record_check(catalog.config.home, spec, problems)
    if problems:
        raise SpecError(problems)
