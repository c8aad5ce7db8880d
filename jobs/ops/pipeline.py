"""`runoff run <dataset>`: bronze, silver and validate in one process (one SparkSession).

Input: the dataset's landing files and checkpoints. Output: what the three commands produce on
their own: bronze and quarantine rows for the new landing files (`jobs.bronze.job.run_bronze`),
the silver aggregates brought up to date (`jobs.silver.run_silver`), then Great Expectations on
every table the run changed (`quality.runner.validate_dataset`). Each step appends its own ledger
row.
A silver table built by another definition than its spec's stops the run before bronze
(`delta_tables.definitions`, exit 2).
Trigger: the streaming steps run with `availableNow` and stop when caught up. A step that fails
stops the run (later steps do not run): a batch held back by a critical expectation (the quality
gate) or a failed critical whole-table expectation (validate) exits 1 with its one-line message.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config import RunoffConfig
from core.console import say
from delta_tables import definitions
from delta_tables.catalog import Catalog
from delta_tables.ledger import RunRecord

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from quality.runner import ValidationReport


@dataclass(frozen=True)
class PipelineResult:
    bronze: RunRecord
    silver: RunRecord
    validation: ValidationReport
    seconds: float


def run_pipeline(
    spark: SparkSession,
    config: RunoffConfig,
    dataset: str,
    report: Callable[[str], None] = say,
) -> PipelineResult:
    """Bronze, then silver, then validate `dataset` on `spark`."""
    from jobs.bronze.job import BronzeOptions, run_bronze
    from jobs.ops.validate import render_summary
    from jobs.silver import run_silver
    from quality.runner import validate_dataset

    started = time.perf_counter()
    # A silver table built by another definition stops the run before bronze writes anything.
    catalog = Catalog.load(config)
    definitions.refuse_changed(catalog.tables(dataset).silver, catalog.spec(dataset))
    bronze = run_bronze(spark, config, dataset, BronzeOptions())  # prints its own summary
    silver = run_silver(spark, config, dataset, report=report)
    validation = validate_dataset(config, dataset)
    render_summary(validation)
    seconds = time.perf_counter() - started
    report(
        f"run {dataset}: bronze {bronze.rows} rows ({bronze.quarantined} quarantined), "
        f"silver {silver.rows} rows merged, validate "
        f"{'passed' if validation.passed else 'FAILED'} in {seconds:.1f} s"
    )
    return PipelineResult(bronze, silver, validation, seconds)


def cmd_run(config: RunoffConfig, args: argparse.Namespace) -> int:
    from jobs.spark import get_spark
    from quality.runner import QualityCheckFailed

    spark = get_spark(app_name=f"runoff-run-{args.dataset}", config=config)
    result = run_pipeline(spark, config, args.dataset)
    if not result.validation.passed:
        raise QualityCheckFailed(result.validation.failure_message())
    return 0
