"""quality.runner: how expectations and observed values read in the summary, and the report."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from core.errors import ConfigError
from quality.runner import (
    ExpectationOutcome,
    TableOutcome,
    ValidationReport,
    describe_expectation,
    describe_observed,
    validate_dataset,
)


def test_describe_expectation_puts_columns_first() -> None:
    assert (
        describe_expectation(
            "expect_column_values_to_be_between",
            {"column": "count", "min_value": 1, "max_value": None, "batch_id": "b"},
        )
        == "column_values_to_be_between(count, min_value=1)"
    )
    assert (
        describe_expectation(
            "expect_compound_columns_to_be_unique",
            {"column_list": ["window_start", "action"], "ignore_row_if": "all_values_are_missing"},
        )
        == "compound_columns_to_be_unique(window_start, action)"
    )
    assert (
        describe_expectation(
            "expect_column_pair_values_a_to_be_greater_than_b",
            {"column_A": "opens", "column_B": "closes", "or_equal": True},
        )
        == "column_pair_values_a_to_be_greater_than_b(opens, closes, or_equal=True)"
    )


def test_describe_observed() -> None:
    assert describe_observed({"observed_value": np.float64(0.25)}) == "0.25"
    assert describe_observed({"observed_value": 12.0}) == "12"
    row = {"window_start": datetime(2024, 3, 1, tzinfo=UTC), "action": "Open"}
    assert (
        describe_observed(
            {"unexpected_count": 2, "element_count": 9, "partial_unexpected_list": [row, row]}
        )
        == "2 of 9 unexpected: (2024-03-01T00:00:00Z, Open), ..."
    )
    assert (
        describe_observed(
            {"unexpected_count": 1, "element_count": 3, "partial_unexpected_list": [-1]}
        )
        == "1 of 3 unexpected: -1"
    )
    assert (
        describe_observed({}, {"raised_exception": True, "exception_message": "no column x\nmore"})
        == "error: no column x"
    )


def _outcome(table: str, severity: str, success: bool) -> ExpectationOutcome:
    return ExpectationOutcome(
        table=table,
        suite=table,
        expectation="column_values_to_not_be_null(action)",
        severity=severity,
        success=success,
        observed="1 of 4 unexpected: None",
        versions="(2, 3]",
        to_version=3,
    )


def test_report_passes_unless_a_critical_expectation_failed() -> None:
    report = ValidationReport(run_id="r", dataset="events", layers=("bronze",), full=False)
    report.expectations = [_outcome("bronze_events", "warning", False)]
    report.tables = [
        TableOutcome("quarantine_events", "bronze", "skipped", "table does not exist yet")
    ]
    assert report.passed and len(report.warnings) == 1
    assert [r["result"] for r in report.rows] == ["warn", "skipped"]

    report.expectations.append(_outcome("bronze_events", "critical", False))
    assert not report.passed
    assert report.failure_message() == (
        "critical expectation failed on bronze_events at version 3: "
        "column_values_to_not_be_null(action): observed 1 of 4 unexpected: None"
    )


def test_unknown_layer_is_a_config_error(tmp_path: object) -> None:
    from core.config import RunoffConfig

    config = RunoffConfig.from_sources(home=str(tmp_path), env={})
    with pytest.raises(ConfigError, match=r"layer 'gold' is not one of bronze, silver"):
        validate_dataset(config, "events", layers=("gold",))
    with pytest.raises(ConfigError, match=r"unknown dataset 'nope'"):
        validate_dataset(config, "nope")
