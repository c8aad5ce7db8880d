"""`runoff validate <dataset> [--layer bronze|silver|all] [--full]`: Great Expectations on what
runs changed (`quality.runner.validate_dataset`), a summary table, exit 1 on a critical failure.
"""

from __future__ import annotations

import argparse

from core.config import RunoffConfig
from core.console import current_console, say
from quality.runner import LAYERS, QualityCheckFailed, ValidationReport, validate_dataset


def render_summary(report: ValidationReport) -> None:
    """Print the summary table (expectation, observed, result), totals and the Data Docs path."""
    from rich.table import Table

    styles = {"FAIL": "bold red", "warn": "yellow", "skipped": "dim", "no new data": "dim"}
    grid = Table(title=f"validate {report.dataset}", title_justify="left")
    for column in ("table", "versions", "expectation", "severity", "observed", "result"):
        grid.add_column(column, overflow="fold")
    for row in report.rows:
        grid.add_row(*row.values(), style=styles.get(row["result"], ""))
    current_console().print(grid)
    validated = [t for t in report.tables if t.status == "validated"]
    say(
        f"validate {report.dataset}: {len(validated)} of {len(report.tables)} tables validated, "
        f"{len(report.expectations)} expectations, {len(report.critical_failures)} critical "
        f"failures, {len(report.warnings)} warnings ({report.seconds:.1f}s)"
    )
    if report.data_docs_path is not None:
        say(f"Data Docs: {report.data_docs_path}")


def cmd_validate(config: RunoffConfig, args: argparse.Namespace) -> int:
    layers = LAYERS if args.layer == "all" else (args.layer,)
    report = validate_dataset(config, args.dataset, layers, full=bool(getattr(args, "full", False)))
    args.summary = report.summary()  # `--outcome`: jobs.cli.main writes it next to the exit code
    render_summary(report)
    if not report.passed:
        raise QualityCheckFailed(report.failure_message())
    return 0
