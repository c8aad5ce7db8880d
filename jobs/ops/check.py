"""`runoff check`: a dry run of every dataset spec, like `spark-pipelines dry-run`.

Input: every spec of the catalog (the built-in folder, `RUNOFF_DATASETS`, `--datasets`), or
those of the datasets named (`runoff check events orders`; an unknown name exits 2 before Spark
starts). Each spec is checked against the JSON Schema of the format (`core.specs`), then every
SQL expression is resolved by Spark's analyzer on empty DataFrames of the declared schema (no
data is read):
the event time (a timestamp), the bronze projection, the row rules (booleans), and for each silver
table its select, where, keys, measures, having (or transform) and the declared expectations'
columns. Output: the plan (tables, columns and types, keys, partitioning, expectations, DAG) of
every good spec, with each silver table built by another definition than its spec's, what
changed and whether runs apply it or refuse it (`delta_tables.definitions`), and one
`<file>: <key>: <problem>` line per problem; exit 2 when a spec is refused. `--no-spark` stops
after the format's checks and prints each spec's outline instead (`print_outline`: what the
spec states, no column types), without starting a JVM.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from core.config import RunoffConfig
from core.console import current_console, say
from core.spec_checks import record_check
from core.specs import DatasetSpec
from delta_tables import definitions
from delta_tables.catalog import Catalog, DatasetTables
from delta_tables.definitions import Change
from jobs.streaming.resolve import DatasetPlan, resolve

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def built_by_another(table: str, change: Change) -> str:
    """What `check` says of a table built by another definition: what changed and what a run
    does (`delta_tables.definitions`)."""
    return f"built by another definition ({'; '.join(change.what)}): {change.remedy(table)}"


def print_plan(
    plan: DatasetPlan, schedule: str | None, changed: Mapping[str, Change] | None = None
) -> None:
    """The plan; `changed`: the tables built by another definition than the spec's now, and what
    changed (`delta_tables.definitions`)."""
    from rich.table import Table as RichTable

    console = current_console()
    spec = plan.spec
    console.print(f"[bold]{spec.name}[/bold]  {spec.file}")
    console.print(f"  DAG runoff_{spec.name}, schedule {schedule}; watermark {spec.watermark}")
    for table in plan.tables:
        grid = RichTable(
            title=f"  {table.layer} {table.name}  ({table.path})",
            title_justify="left",
            show_edge=False,
        )
        for column in ("column", "type", "role"):
            grid.add_column(column)
        for name, kind in table.columns:
            role = "key" if name in table.keys else ""
            if name in table.partition_by:
                role = f"{role} partition".strip()
            grid.add_row(name, kind, role)
        console.print(grid)
        for line in table.details:
            console.print(f"    {line}", markup=False)
        for line in table.expectations:
            console.print(f"    expect {line}", markup=False)
        if changed and table.name in changed:
            console.print(f"    {built_by_another(table.name, changed[table.name])}", markup=False)


def refused_files(catalog: Catalog, names: Sequence[str] = ()) -> dict[Path, tuple[str, ...]]:
    """The spec files the catalog refused (only those of the datasets `names`, when given), and
    their problem lines."""
    return {
        path: lines for path, lines in catalog.problems.items() if not names or path.stem in names
    }


def summary(config: RunoffConfig, good: int, refused: int) -> str:
    folders = ", ".join(str(d) for d in config.dataset_dirs)
    return f"check: {good} datasets ok, {refused} refused (folders: {folders})"


def check_specs(
    spark: SparkSession, catalog: Catalog, names: Sequence[str] = ()
) -> tuple[list[DatasetPlan], list[str]]:
    """Plans of the good specs and every problem line (refused files first); only the datasets
    `names` when given."""
    problems = [line for lines in refused_files(catalog, names).values() for line in lines]
    specs = [spec for spec in catalog.specs if not names or spec.name in names]
    plans = [resolve(spark, spec, catalog) for spec in specs]
    for plan in plans:
        problems.extend(plan.problems)
        record_check(catalog.config.home, plan.spec, plan.problems)
    return plans, problems


def print_outline(spec: DatasetSpec, tables: DatasetTables, changed: Mapping[str, Change]) -> None:
    """What a spec declares, as far as it states it without Spark: the DAG, each table's path,
    keys and partitioning, the silver definitions and the expectations (no column types: those
    come from resolving the SQL)."""
    console = current_console()
    console.print(f"[bold]{spec.name}[/bold]  {spec.file}")
    console.print(f"  DAG runoff_{spec.name}, schedule {spec.schedule}; watermark {spec.watermark}")
    for table in (tables.bronze, tables.quarantine, *tables.silver):
        console.print(f"  {table.layer} {table.name}  ({table.path})", markup=False)
        if table.keys:
            console.print(f"    keys {', '.join(table.keys)}", markup=False)
        if table.partition_by:
            console.print(f"    partitioned by {', '.join(table.partition_by)}", markup=False)
        if table.layer == "silver":
            silver = spec.silver_spec(table.name)
            for line in (
                f"output {silver.output}",
                *(f"key {name} = {path}" for name, path in silver.key_sources if name != path),
                *([f"window {silver.window}"] if silver.window else []),
                *([f"slide {silver.slide}"] if silver.slide else []),
                *(f"select {sql}" for sql in silver.select),
                *([f"where {silver.where}"] if silver.where else []),
                *(f"{name} = {sql}" for name, sql in silver.measures),
                *([f"having {silver.having}"] if silver.having else []),
                *([f"transform {silver.transform}"] if silver.transform else []),
            ):
                console.print(f"    {line}", markup=False)
        for item in spec.expectations_of(table.name if table.layer == "silver" else table.layer):
            arguments = ", ".join(f"{k}={v!r}" for k, v in item.kwargs.items())
            console.print(f"    expect {item.expect}({arguments}) [{item.severity}]", markup=False)
        if table.name in changed:
            console.print(f"    {built_by_another(table.name, changed[table.name])}", markup=False)


def _check_format(config: RunoffConfig, catalog: Catalog, names: Sequence[str]) -> int:
    """`runoff check --no-spark`: the specs' format (JSON Schema and `core.specs`' checks, what
    `Catalog.load` does) and their outline; no SQL is resolved."""
    specs = [spec for spec in catalog.specs if not names or spec.name in names]
    for spec in specs:
        tables = catalog.tables(spec.name)
        changed = definitions.changed_tables(tables.defined, spec)
        print_outline(spec, tables, changed)
    refused = refused_files(catalog, names)
    problems = [line for lines in refused.values() for line in lines]
    say(
        f"{summary(config, len(specs), len(refused))}; format only: their SQL was not resolved "
        "(`runoff check` without --no-spark resolves it)"
    )
    for line in problems:
        print(line, file=sys.stderr, flush=True)
    return 2 if problems else 0


def cmd_check(config: RunoffConfig, args: argparse.Namespace) -> int:
    catalog = Catalog.load(config)
    names = list(dict.fromkeys(getattr(args, "names", None) or ()))
    unknown = [name for name in names if not catalog.declares(name)]
    if unknown:
        raise catalog.unknown(unknown[0])
    if getattr(args, "no_spark", False):
        return _check_format(config, catalog, names)

    from jobs.spark import get_spark

    spark = get_spark(app_name="runoff-check", config=config)
    plans, problems = check_specs(spark, catalog, names)
    for plan in plans:
        if not plan.problems:
            tables = catalog.tables(plan.spec.name)
            changed = definitions.changed_tables(tables.defined, plan.spec)
            print_plan(plan, plan.spec.schedule, changed)
    good = sum(1 for p in plans if not p.problems)
    say(summary(config, good, len(refused_files(catalog, names)) + len(plans) - good))
    for line in problems:
        print(line, file=sys.stderr, flush=True)
    return 2 if problems else 0
