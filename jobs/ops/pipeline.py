"""`runoff run <dataset>`: bronze, silver and validate in one process (one SparkSession).

Input: the dataset's landing files and checkpoints. Output: what the three commands produce on
their own: bronze and quarantine rows for the new landing files (`jobs.bronze.job.run_bronze`),
the silver aggregates brought up to date (`jobs.silver.run_silver`), then Great Expectations on
every table the run changed (`quality.runner.validate_dataset`). Each step records its own ledger
row; the steps' ledger, results and metrics rows are committed once per table as the run ends
(`delta_tables.ops.one_commit_per_table`).
A silver table built by another definition than its spec's stops the run before bronze
(`delta_tables.definitions`, exit 2).
Trigger: the streaming steps run with `availableNow` and stop when caught up. A step that fails
stops the run (later steps do not run): a batch held back by a critical expectation (the quality
gate) or a failed critical whole-table expectation (validate) exits 1 with its one-line message.

`runoff run DATASET DATASET ...` (or `--all`) runs several datasets side by side in one driver,
at most `--parallel` at once (`run_datasets`): each in its own thread and its own Spark session
(`SparkSession.newSession`: its own SQL settings, so that one dataset's MERGE settings never
reach another's), sharing the driver's cores and memory. Each dataset's steps record their
ledger rows and print their lines as a run of that dataset alone does; a dataset that fails
does not stop the others. The command exits with the worst exit code of its datasets (an
interrupt: 130 or 143, then a configuration error: 2, then a failure: 1). Ctrl-C or SIGTERM
stops every dataset's queries; each records `interrupted`, and the next run resumes them.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core import caller, interrupts
from core.config import DEFAULT_PARALLEL, RunoffConfig
from core.console import say
from core.errors import ConfigError
from delta_tables import definitions
from delta_tables.catalog import Catalog
from delta_tables.ledger import RunRecord
from delta_tables.ops import one_commit_per_table

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
    # A silver table built by another definition stops the run before bronze writes anything,
    # unless silver applies the change itself (measures added).
    catalog = Catalog.load(config)
    definitions.refuse_changed(catalog.tables(dataset).silver, catalog.spec(dataset), applied=True)
    # The steps' ledger, results and metrics rows: one commit per table as the run ends.
    with one_commit_per_table():
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


@dataclass(frozen=True)
class DatasetOutcome:
    """How one dataset of a `runoff run` of several ended."""

    dataset: str
    exit_code: int
    error: str | None
    seconds: float


def run_datasets(
    spark: SparkSession,
    config: RunoffConfig,
    datasets: Sequence[str],
    parallel: int = DEFAULT_PARALLEL,
    report: Callable[[str], None] = say,
) -> list[DatasetOutcome]:
    """`run_pipeline` for each of `datasets`, at most `parallel` at once, each in its own thread
    and Spark session. A dataset's failure is its outcome (and one line on stderr), not the
    others'. Ctrl-C or SIGTERM stops them all, then raises as a run of one dataset does."""
    from jobs.streaming.query import error_line

    sessions: list[SparkSession] = []

    def one(dataset: str) -> DatasetOutcome:
        started = time.perf_counter()
        session = spark.newSession()
        sessions.append(session)
        try:
            result = run_pipeline(session, config, dataset, report=report)
        except BaseException as exc:  # noqa: BLE001 - every dataset ends with an outcome
            code = interrupts.exit_code(exc)
            error: str | None = "interrupted" if code > 2 else error_line(exc)
        else:
            passed = result.validation.passed
            code, error = (0, None) if passed else (1, result.validation.failure_message())
        if error is not None and code <= 2:  # an interrupt is the command's one line
            print(f"runoff: error: {dataset}: {error}", file=sys.stderr, flush=True)
        return DatasetOutcome(dataset, code, error, time.perf_counter() - started)

    pool = ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="runoff-run")
    futures = [pool.submit(caller.carried(one), dataset) for dataset in datasets]
    try:
        while wait(futures, timeout=0.5).done != set(futures):
            interrupts.check()  # a signal `runoff serve` delivered for its client
        interrupts.check()  # the datasets saw it first: the command ends interrupted all the same
    except KeyboardInterrupt:  # SIGINT, or SIGTERM (interrupts.Terminated): stop every dataset
        interrupts.deliver(signal.SIGTERM if interrupts.received() else signal.SIGINT)
        for future in futures:
            future.cancel()
        for session in list(sessions):
            for query in session.streams.active:
                with suppress(Exception):
                    query.stop()
            with suppress(Exception):
                session.interruptAll()  # its jobs only: a server runs other commands' too
        wait(futures)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [future.result() for future in futures]


def datasets_to_run(config: RunoffConfig, args: argparse.Namespace) -> list[str]:
    """The datasets `runoff run` names (or every declared one, `--all`); unknown or refused
    ones are a ConfigError before anything runs."""
    named = [d for d in (args.dataset, *args.more) if d is not None]
    if bool(named) == bool(args.all):
        raise ConfigError("name the datasets to run (e.g. `runoff run events sensors`) or --all")
    catalog = Catalog.load(config)
    if args.all:  # a refused spec's dataset too: it ends with its error (exit 2), not the others
        declared = sorted({*catalog.names, *(path.stem for path in catalog.problems)})
        if not declared:
            raise ConfigError("--all: no dataset is declared (`runoff check` lists the folders)")
        return declared
    for dataset in named:
        catalog.spec(dataset)
    return list(dict.fromkeys(named))


def cmd_run(config: RunoffConfig, args: argparse.Namespace) -> int:
    from jobs.spark import get_spark
    from quality.runner import QualityCheckFailed

    datasets = datasets_to_run(config, args)
    if len(datasets) == 1 and not args.all:
        spark = get_spark(app_name=f"runoff-run-{datasets[0]}", config=config)
        result = run_pipeline(spark, config, datasets[0])
        if not result.validation.passed:
            raise QualityCheckFailed(result.validation.failure_message())
        return 0
    started = time.perf_counter()
    spark = get_spark(app_name="runoff-run", config=config)
    parallel = args.parallel or DEFAULT_PARALLEL
    say(f"run: {len(datasets)} datasets, {min(parallel, len(datasets))} at a time")
    outcomes = run_datasets(spark, config, datasets, parallel)
    args.dataset = None
    args.summary = {
        "datasets": {o.dataset: {"exit_code": o.exit_code, "error": o.error} for o in outcomes}
    }
    ended = ", ".join(
        f"{o.dataset} {'success' if o.exit_code == 0 else f'failed (exit {o.exit_code})'}"
        for o in outcomes
    )
    say(f"run: {ended} in {time.perf_counter() - started:.1f} s")
    return max(o.exit_code for o in outcomes)
