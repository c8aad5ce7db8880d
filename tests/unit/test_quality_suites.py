"""quality.suites: suites follow the dataset definitions; every expectation has a severity."""

from __future__ import annotations

import pytest

from jobs.catalog import CATALOG, DATASET_NAMES
from jobs.datasets import get_dataset
from quality.suites import dataset_tables, interval_seconds

UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600}


def _seconds_by_hand(text: str) -> int:
    number, unit = text.split()
    return int(number) * UNIT_SECONDS[unit.rstrip("s")]


@pytest.mark.parametrize("text", ["5 seconds", "1 minute", "10 minutes", "1 hour", "2 hours"])
def test_interval_seconds(text: str) -> None:
    assert interval_seconds(text) == _seconds_by_hand(text)


def test_interval_seconds_rejects_other_text() -> None:
    with pytest.raises(ValueError, match=r"interval 'soon' is not of the form '<n> <unit>'"):
        interval_seconds("soon")


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_tables_are_the_catalog_tables(name: str) -> None:
    info = CATALOG[name]
    specs = dataset_tables(name)
    assert [s.name for s in specs] == [
        info.bronze_table,
        info.quarantine_table,
        *info.silver_tables,
    ]
    suite_names = [suite.name for spec in specs for suite in spec.suites]
    assert len(suite_names) == len(set(suite_names))


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_every_expectation_has_a_severity_stated_in_its_notes(name: str) -> None:
    for spec in dataset_tables(name):
        for suite in spec.suites:
            assert suite.expectations, suite.name
            for expectation in suite.expectations:
                severity = expectation.severity.value
                assert severity in ("critical", "warning")
                assert str(expectation.notes).startswith(f"severity: {severity}.")


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_silver_suites_follow_the_aggregate_definitions(name: str) -> None:
    dataset = get_dataset(name)
    specs = {s.name: s for s in dataset_tables(name)}
    for aggregate in dataset.aggregates:
        spec = specs[aggregate.table]
        assert spec.keys == aggregate.keys
        configs = [e.configuration for e in spec.suite("rows").expectations]  # type: ignore[union-attr]
        unique = [c for c in configs if "unique" in c.type]
        assert len(unique) == 1
        columns = unique[0].kwargs.get("column_list") or [unique[0].kwargs["column"]]
        assert tuple(columns) == aggregate.keys
        sizes = [
            c.kwargs["value_set"] for c in configs if c.kwargs.get("column") == "window_seconds"
        ]
        if aggregate.window is None:
            assert sizes == []
        else:
            assert sizes == [[_seconds_by_hand(aggregate.window)]]
            step = _seconds_by_hand(aggregate.slide or aggregate.window)
            assert spec.slide_seconds in (None, step)
        positive = [
            c
            for c in configs
            if c.type == "expect_column_values_to_be_between" and c.kwargs["column"] == "count"
        ]
        assert positive and all(c.kwargs["min_value"] == 1 for c in positive)


def test_bronze_suite_requires_the_dataset_required_columns() -> None:
    for name in DATASET_NAMES:
        dataset = get_dataset(name)
        bronze = dataset_tables(name)[0]
        not_null = {
            e.configuration.kwargs["column"]
            for e in bronze.suite("rows").expectations  # type: ignore[union-attr]
            if e.configuration.type == "expect_column_values_to_not_be_null"
        }
        assert set(dataset.required) <= not_null
        assert {"event_time", "event_date", "_source_file", "_ingested_at", "_batch_id"} <= not_null


def test_quarantine_share_has_a_warning_and_a_critical_threshold() -> None:
    quarantine = dataset_tables("events")[1]
    share = quarantine.suite("quarantine_share")
    assert share is not None
    limits = sorted(
        (e.configuration.kwargs["max_value"], e.severity.value) for e in share.expectations
    )
    assert [severity for _, severity in limits] == ["warning", "critical"]
    assert limits[0][0] < limits[1][0]


def test_only_events_tables_check_cumulative_actions() -> None:
    for name in DATASET_NAMES:
        for spec in dataset_tables(name):
            has = spec.suite("cumulative_actions") is not None
            assert has == (name == "events" and spec.kind == "silver"), spec.name
