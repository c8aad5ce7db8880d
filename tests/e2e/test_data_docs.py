"""The Data Docs index in a real browser: headless Chromium shows the suites and latest results.

Needs Chromium (`make browser`): without it the test fails, it does not skip, so that CI cannot
pass without having looked at the page.
"""

from __future__ import annotations

import struct
from html.parser import HTMLParser
from pathlib import Path

import pytest

from core.config import RunoffConfig
from quality.runner import ValidationReport, validate_dataset
from tests.browser import dump_dom, screenshot
from tests.quality_tables import (
    action_counts,
    append,
    append_bronze,
    hourly,
    open_close_events,
    quarantine_rows,
)

START = 1_709_251_200  # 2024-03-01T00:00:00Z


class TableRows(HTMLParser):
    """Text of every table row of a page, per table id: {table_id: [[cell text, ...], ...]}."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table":
            self._table = attributes.get("id") or f"table-{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "span" and "top" in (attributes.get("class") or "").split():
            self._hidden += 1  # tooltip text, not shown

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._table is not None and self._row is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag == "span" and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self._hidden:
            self._cell.append(data)


def _validate_twice(config: RunoffConfig) -> tuple[ValidationReport, ValidationReport]:
    """A clean run, then a run in which most new lines went to quarantine (the quarantine share
    fails its warning and its critical expectation)."""
    append_bronze(config.bronze_path("events"), open_close_events(START, 3))
    append(
        config.silver_path("events_action_hourly"),
        action_counts([hourly(0, "Open", 3), hourly(0, "Close", 3)]),
    )
    first = validate_dataset(config, "events")
    assert first.passed
    append_bronze(config.bronze_path("events"), open_close_events(START + 3600, 1, batch_id=1))
    append(config.quarantine_path("events"), quarantine_rows(5, batch_id=1))
    second = validate_dataset(config, "events")
    assert not second.passed
    return first, second


@pytest.mark.browser
@pytest.mark.e2e
def test_data_docs_index_shows_suites_and_latest_results(
    config: RunoffConfig, tmp_path: Path
) -> None:
    first, report = _validate_twice(config)
    index = report.data_docs_path
    assert index is not None and index.is_file()

    dom = dump_dom(index)
    shot = screenshot(index, tmp_path / "data-docs.png", window=(1280, 900))

    parser = TableRows()
    parser.feed(dom)
    results = next(rows for rows in parser.tables.values() if rows and rows[0][0] == "Status")
    suites = next(
        rows for rows in parser.tables.values() if rows and rows[0] == ["Expectation Suites"]
    )
    header = results[0]
    column = {name: header.index(name) for name in ("Status", "Run Name", "Expectation Suite")}

    # The suites run, and the gate's row-level suite of each table with rows (bronze and silver;
    # the quarantine share has no row-level suite): the index lists each once.
    every_suite = sorted(
        {e.suite for e in first.expectations + report.expectations}
        | {f"{table}_batch" for table in ("bronze_events", "events_action_hourly")}
    )
    assert sorted(row[0] for row in suites[1:]) == every_suite
    validated_suites = sorted({e.suite for e in report.expectations})

    run_name = f"events-{report.run_id[:8]}"
    latest = {
        row[column["Expectation Suite"]]: row[column["Status"]]
        for row in results[1:]
        if row[column["Run Name"]] == run_name
    }
    expected = {
        suite: "Success"
        if all(e.success for e in report.expectations if e.suite == suite)
        else "Failed"
        for suite in validated_suites
    }
    assert latest == expected
    assert latest["quarantine_events_share"] == "Failed"
    # Every validation of both runs is listed, the latest first.
    first_suites = {e.suite for e in first.expectations}
    assert len(results) - 1 == len(first_suites) + len(validated_suites)
    assert results[1][column["Run Name"]] == run_name

    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1280, 900)
