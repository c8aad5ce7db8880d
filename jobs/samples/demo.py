"""`runoff demo` (`make demo`): sample data for every dataset, a full run, a summary, reports.

Input: the configured home (`--home`, else `RUNOFF_HOME`, else `./.runoff`).
Output: landing files for every dataset (`DEMO_SIZES`, seed 0), bronze, quarantine and silver
tables, quality results and Data Docs (`runoff run` per dataset, all in ONE SparkSession), a
summary table (per dataset: bronze rows, quarantined rows, silver tables and their rows, the
quality result) and one HTML report per dataset (`runoff report`), whose paths end the output,
in dataset order.

Re-running is safe and idempotent: a dataset whose landing folder (or its archive of ingested
files) already holds files gets no new sample data, so the second run finds nothing new, changes
no table and prints the same totals. To see incremental ingestion, add files yourself, e.g.
`runoff generate events --seed 1 --start 2024-01-02` then `runoff run events`.
Trigger: the streaming steps run with `availableNow` and stop once caught up.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config import Location, RunoffConfig
from core.console import current_console, say
from core.errors import RunoffError
from delta_tables.catalog import Catalog
from jobs.report.build import TableInfo, table_info, write_report

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jobs.ops.pipeline import PipelineResult

DEMO_SEED = 0


@dataclass
class DatasetOutcome:
    """What the demo did for one dataset and what its tables hold afterwards."""

    dataset: str
    generated_files: int = 0
    generated_records: int = 0
    landing_files_before: int = 0
    new_bronze_rows: int = 0
    tables: list[TableInfo] = field(default_factory=list)
    quality: str = "-"
    passed: bool = False
    error: str | None = None
    seconds: float = 0.0
    report: Path | None = None

    def rows_of(self, name: str) -> int | None:
        return next((t.rows for t in self.tables if t.name == name), None)


def count_files(*folders: Location) -> int:
    """Data files below `folders` (hidden and `_`-prefixed files are in-flight, not data)."""
    total = 0
    for folder in folders:
        if folder.is_dir():
            total += sum(
                1 for p in folder.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))
            )
    return total


def quality_summary(result: PipelineResult) -> str:
    """`passed (12/12 expectations)`, `FAILED (...)`, or `no new data` when nothing changed."""
    validation = result.validation
    expectations = validation.expectations
    if not expectations:
        return "no new data"
    passed = sum(1 for e in expectations if e.success)
    verdict = "passed" if validation.passed else "FAILED"
    return f"{verdict} ({passed}/{len(expectations)} expectations)"


def demo_sizes(dataset: str) -> Mapping[str, Any] | None:
    """The demo's sample size of a dataset with a generator (its `GeneratorSpec.demo`)."""
    from jobs.samples import GENERATORS

    generator = GENERATORS.get(dataset)
    return generator.demo if generator is not None else None


def generate_if_new(
    config: RunoffConfig, dataset: str, sizes: Mapping[str, Any] | None
) -> tuple[int, int, int]:
    """Sample data for `dataset` unless it already has landing files (ingested or not) or has
    no generator (`sizes` None: a declared dataset brings its own files).

    Returns (files already there, files generated, records generated).
    """
    from jobs.bronze.job import landing_dirs
    from jobs.samples import generate_dataset, generated_line

    landing, archive = landing_dirs(config, dataset)
    existing = count_files(landing, archive)
    if existing:
        say(f"generate {dataset}: {existing} landing files already there, none added")
        return existing, 0, 0
    if sizes is None:
        return 0, 0, 0
    written = generate_dataset(config, dataset, seed=DEMO_SEED, **sizes)
    say(generated_line(dataset, written, landing))
    return 0, len(written), sum(f.records for f in written)


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def table_infos(config: RunoffConfig, dataset: str) -> list[TableInfo]:
    return [table_info(t.name, t.path) for t in Catalog.load(config).tables(dataset)]


def run_demo(
    spark: SparkSession,
    config: RunoffConfig,
    datasets: tuple[str, ...] | None = None,
    sizes: Mapping[str, Mapping[str, Any]] | None = None,
    report: Callable[[str], None] = say,
) -> list[DatasetOutcome]:
    """Generate (if new), run and report every dataset on `spark`; failures do not stop the rest."""
    from jobs.ops.pipeline import run_pipeline

    if datasets is None:
        datasets = Catalog.load(config).names
    outcomes = []
    for dataset in datasets:
        outcome = DatasetOutcome(dataset)
        report(f"demo: {dataset}")
        started = time.perf_counter()
        try:
            size = sizes[dataset] if sizes is not None else demo_sizes(dataset)
            existing, files, records = generate_if_new(config, dataset, size)
            if not existing and not files:  # a declared dataset with nothing landed yet
                report(f"demo {dataset}: no landing files and no generator: skipped")
                continue
            outcome.landing_files_before = existing
            outcome.generated_files, outcome.generated_records = files, records
            result = run_pipeline(spark, config, dataset, report=report)
            outcome.new_bronze_rows = result.bronze.rows
            outcome.quality = quality_summary(result)
            outcome.passed = result.validation.passed
        except Exception as exc:  # noqa: BLE001 - one dataset's failure must not hide the others'
            outcome.error = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            outcome.quality = "not run"
            report(f"demo {dataset}: FAILED: {exc}")
        outcome.seconds = time.perf_counter() - started
        outcome.tables = table_infos(config, dataset)
        outcomes.append(outcome)
    for outcome in outcomes:
        outcome.report = write_report(config, outcome.dataset)
    return outcomes


def render_summary(config: RunoffConfig, outcomes: list[DatasetOutcome]) -> None:
    """The closing table (rich): one row per dataset."""
    from rich.table import Table

    table = Table(title=f"runoff demo: {config.home}", title_justify="left")
    for column, justify in (
        ("dataset", "left"),
        ("bronze rows", "right"),
        ("quarantined", "right"),
        ("silver tables (rows)", "left"),
        ("quality", "left"),
        ("seconds", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for o in outcomes:
        bronze_table, quarantine_table, *silver_tables = o.tables
        silver = "\n".join(
            f"{t.name} ({t.rows:,})" if t.rows is not None else f"{t.name} (none)"
            for t in silver_tables
        )
        bronze = bronze_table.rows
        quarantined = quarantine_table.rows
        table.add_row(
            o.dataset,
            f"{bronze:,}" if bronze is not None else "-",
            f"{quarantined or 0:,}",
            silver,
            o.quality if o.error is None else f"FAILED: {shorten(o.error, 160)}",
            f"{o.seconds:.1f}",
        )
    current_console().print(table)


def cmd_demo(config: RunoffConfig, args: argparse.Namespace) -> int:
    from jobs.spark import get_spark

    started = time.perf_counter()
    spark = get_spark(app_name="runoff-demo", config=config)
    outcomes = run_demo(spark, config)
    render_summary(config, outcomes)
    say(f"demo finished in {time.perf_counter() - started:.0f} s; reports:")
    for outcome in outcomes:
        print(outcome.report, flush=True)
    failed = [o.dataset for o in outcomes if not o.passed]
    if failed:
        raise RunoffError(f"demo: {', '.join(failed)} did not pass (see the summary above)")
    return 0
