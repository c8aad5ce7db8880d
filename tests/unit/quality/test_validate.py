"""Validation end to end on Delta tables written with delta-rs: the API and `runoff validate`.

Each test writes small bronze / quarantine / silver tables directly (one `write_deltalake` per
simulated run), injects a defect and checks that the right expectation fails, with the right exit
status and message, and that clean data passes. Expected counts come from the injected data.
"""

from __future__ import annotations

import html
import io
import re
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable

from core.config import RunoffConfig
from core.specs import SEED_DIR
from delta_tables.arrow import read_arrow
from delta_tables.catalog import Catalog
from delta_tables.ledger import read_runs
from jobs.cli.main import main
from quality.history import read_results
from quality.project import data_docs_index
from quality.runner import ValidationReport, results_path, validate_dataset
from quality.suites import checked_tables
from tests.conftest import take_output
from tests.quality_tables import (
    action_counts,
    append,
    append_bronze,
    clean_bronze,
    clean_silver,
    hourly,
    open_close_events,
    quarantine_rows,
)
from tests.seeds import SEED_NAMES, seed_spec

START = 1_709_251_200  # 2024-03-01T00:00:00Z


def _clean_events(config: RunoffConfig) -> None:
    append_bronze(config.bronze_path("events"), open_close_events(START, 4, batch_id=0))
    append_bronze(config.bronze_path("events"), open_close_events(START + 3600, 4, batch_id=1))
    append(
        config.silver_path("events_action_hourly"),
        action_counts([hourly(0, "Open", 4), hourly(0, "Close", 4)]),
    )
    append(
        config.silver_path("events_action_hourly"),
        action_counts([hourly(1, "Open", 4), hourly(1, "Close", 4)]),
    )


def _expectation_count(config: RunoffConfig, table: str) -> int:
    spec = next(t for t in checked_tables(Catalog.load(config), "events") if t.name == table)
    # Row-level suites ("batch") are the gate's, checked before each commit
    # (tests/spark/quality/test_gate.py); validate runs the whole-table ones.
    return sum(len(suite.expectations) for suite in spec.suites if suite.frame != "batch")


def _failures(report: ValidationReport) -> list[tuple[str, str, str]]:
    return [(e.table, e.expectation, e.observed) for e in report.critical_failures]


def test_clean_data_passes_and_a_second_run_finds_no_new_data(
    home: Path, config: RunoffConfig, console_output: io.StringIO
) -> None:
    _clean_events(config)

    assert main(["--home", str(home), "validate", "events"]) == 0
    out = take_output(console_output)
    index = config.quality_dir / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    assert f"Data Docs: {index}" in out
    assert index.is_file()
    assert "quarantine_events" in out and "skipped" in out
    assert "0 critical failures" in out

    history = read_results(results_path(config), dataset="events")
    by_table = {t: [r for r in history if r["table"] == t] for t in {r["table"] for r in history}}
    assert {t: len(rows) for t, rows in by_table.items()} == {
        "bronze_events": _expectation_count(config, "bronze_events"),
        "events_action_hourly": _expectation_count(config, "events_action_hourly"),
    }
    assert all(r["success"] and r["table_passed"] for r in history)
    bronze_version = DeltaTable(str(config.bronze_path("events"))).version()
    assert {(r["from_version"], r["to_version"]) for r in by_table["bronze_events"]} == {
        (None, bronze_version)
    }

    assert main(["--home", str(home), "validate", "events"]) == 0
    out = take_output(console_output)
    paths = {
        "bronze_events": config.bronze_path("events"),
        "events_action_hourly": config.silver_path("events_action_hourly"),
    }
    for table, path in paths.items():
        version = DeltaTable(str(path)).version()
        assert f"{table}: no new data (no version after {version})" in out
    assert len(read_results(results_path(config), dataset="events")) == len(history)

    runs = read_runs(config.runs_path, "events")
    assert [(r["layer"], r["status"]) for r in runs] == [("validate", "success")] * 2
    assert f'"bronze_events": {bronze_version}' in runs[0]["versions_after"]


def test_a_window_duplicated_across_old_and_new_files_fails(config: RunoffConfig) -> None:
    path = config.silver_path("events_action_hourly")
    old = [hourly(h, action, 2) for h in range(3) for action in ("Open", "Close")]
    append(path, action_counts(old))
    assert validate_dataset(config, "events", layers=("silver",)).passed
    duplicate = [hourly(1, "Open", 5)]
    version = append(path, action_counts(duplicate))

    report = validate_dataset(config, "events", layers=("silver",))

    copies = len(duplicate) + sum(1 for r in old if r[:3] == duplicate[0][:3])
    hourly_table = next(t for t in report.tables if t.table == "events_action_hourly")
    # Only the new file and the old row sharing its key were read, not the whole table.
    assert (hourly_table.versions, hourly_table.rows) == (f"({version - 1}, {version}]", copies)
    assert _failures(report) == [
        (
            "events_action_hourly",
            "compound_columns_to_be_unique(window_start, window_end, action)",
            f"{copies} of {copies} unexpected: (2024-03-01T01:00:00Z, 2024-03-01T02:00:00Z, Open)"
            ", ...",
        )
    ]
    assert report.failure_message().startswith(
        f"critical expectation failed on events_action_hourly at version {version}: "
        "compound_columns_to_be_unique(window_start, window_end, action)"
    )


def test_quarantine_share_warns_then_fails(config: RunoffConfig) -> None:
    bronze = open_close_events(START, 10)
    quarantined = quarantine_rows(1)
    append_bronze(config.bronze_path("events"), bronze)
    append(config.quarantine_path("events"), quarantined)

    report = validate_dataset(config, "events", layers=("bronze",))

    share = quarantined.num_rows / (quarantined.num_rows + bronze.num_rows)
    assert report.passed
    assert [(w.table, w.expectation, w.observed) for w in report.warnings] == [
        (
            "quarantine_events",
            "column_max_to_be_between(quarantine_share, min_value=0, max_value=0.02)",
            f"{share:.4g}",
        )
    ]

    # A run whose every line was malformed: no bronze version, only quarantine rows.
    append(config.quarantine_path("events"), quarantine_rows(5, batch_id=1))
    report = validate_dataset(config, "events", layers=("bronze",))
    assert {t.table: t.status for t in report.tables}["bronze_events"] == "no new data"
    assert [(e.expectation, e.observed) for e in report.critical_failures] == [
        ("column_max_to_be_between(quarantine_share, min_value=0, max_value=0.2)", "1")
    ]


def test_rows_are_required_only_after_a_run_wrote(config: RunoffConfig) -> None:
    path = config.bronze_path("events")
    schema = open_close_events(START, 1).schema
    path.mkdir(parents=True)
    DeltaTable.create(str(path), schema=schema, partition_by=["event_date"])  # as jobs do

    created = validate_dataset(config, "events", layers=("bronze",))
    version = append_bronze(path, schema.empty_table())  # a run committed no bronze rows
    written = validate_dataset(config, "events", layers=("bronze",))

    def row_counts(report: ValidationReport) -> list[tuple[str, str, bool]]:
        return [
            (e.expectation, e.observed, e.success)
            for e in report.expectations
            if e.expectation.startswith("column_min")
        ]

    assert created.passed
    assert row_counts(created) == [("column_min_to_be_between(rows_added, min_value=0)", "0", True)]
    assert row_counts(written) == [
        ("column_min_to_be_between(rows_added, min_value=1)", "0", False)
    ]
    assert written.failure_message() == (
        f"critical expectation failed on bronze_events at version {version}: "
        "column_min_to_be_between(rows_added, min_value=1): observed 0"
    )


def test_full_validates_the_whole_table(config: RunoffConfig) -> None:
    _clean_events(config)
    validate_dataset(config, "events", layers=("bronze",))
    append_bronze(config.bronze_path("events"), open_close_events(START + 7200, 1, batch_id=2))

    incremental = validate_dataset(config, "events", layers=("bronze",))
    full = validate_dataset(config, "events", layers=("bronze",), full=True)

    table = DeltaTable(str(config.bronze_path("events")))
    total = read_arrow(table).num_rows
    bronze_of = {t.table: t for t in incremental.tables}["bronze_events"]
    full_of = {t.table: t for t in full.tables}["bronze_events"]
    assert (bronze_of.versions, bronze_of.rows) == ("(1, 2]", 2)
    assert (full_of.versions, full_of.rows) == (f"[0, {table.version()}]", total)


@pytest.mark.parametrize("dataset", SEED_NAMES)
def test_clean_tables_of_every_dataset_pass(config: RunoffConfig, dataset: str) -> None:
    append_bronze(config.bronze_path(dataset), clean_bronze(dataset))
    append(config.quarantine_path(dataset), quarantine_rows(0))
    for table in seed_spec(dataset).silver_tables:
        append(config.silver_path(table), clean_silver(table))

    report = validate_dataset(config, dataset)

    assert [(t.table, t.status, t.passed) for t in report.tables] == [
        (spec.name, "validated", True) for spec in checked_tables(Catalog.load(config), dataset)
    ]
    assert [
        (e.table, e.expectation, e.observed) for e in report.expectations if not e.success
    ] == []


def test_nothing_to_validate_is_not_an_error(
    home: Path, config: RunoffConfig, console_output: io.StringIO
) -> None:
    assert main(["--home", str(home), "validate", "events"]) == 0
    out = take_output(console_output)
    assert out.count("table does not exist yet") == 2 * len(
        checked_tables(Catalog.load(config), "events")
    )
    assert read_results(results_path(config)) == []
    assert [r["status"] for r in read_runs(config.runs_path, "events")] == ["success"]


def page_text(path: Path) -> str:
    """The words a reader sees on a Data Docs page (markup, scripts and styles dropped)."""
    raw = re.sub(r"<(script|style)\b.*?</\1>", " ", path.read_text(encoding="utf-8"), flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", raw)).split())


def test_data_docs_show_every_expectation_each_table_is_held_to(config: RunoffConfig) -> None:
    """A suite page per suite of each validated table, the gate's row-level ones included: every
    expectation of the spec is on its table's page with its severity and notes, and a suite
    parameter reads as its name, never as GX's `{'$PARAMETER': ...}`."""
    _clean_events(config)
    assert main(["--home", str(config.home), "validate", "events"]) == 0
    site = data_docs_index(config.quality_dir).parent / "expectations"
    pages = {path.stem: page_text(path) for path in site.glob("*.html")}
    validated = ("bronze_events", "events_action_hourly")  # the tables with rows
    assert set(pages) == {name for t in validated for name in (t, f"{t}_batch")}
    # The spec, read here as YAML: what each table's batch page must show.
    spec = yaml.safe_load((SEED_DIR / "events.yaml").read_text(encoding="utf-8"))
    for key, items in spec["expectations"].items():
        table = "bronze_events" if key == "bronze" else key
        if table not in validated:
            continue
        for item in items:
            notes = item.get("notes", "declared in the dataset spec.")
            assert f"severity: {item['severity']}. {notes}" in pages[f"{table}_batch"], item
    for page in pages.values():
        assert "$PARAMETER" not in page
    assert "greater than or equal to min_rows (set by each run)" in pages["bronze_events"]
