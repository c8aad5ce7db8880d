"""Retention of Great Expectations validation results: `quality.retention` and `runoff maintain`.

Validate runs happen at chosen times (GX records the run time the runner's `RunIdentifier`
carries; the tests fix it), then pruning is checked against independent listings of GX's
validations store and of the Data Docs site, and against the links of the index page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from delta_tables.catalog import Catalog
from quality.retention import dataset_suites, expired_results, prune_validation_results
from quality.runner import LAYERS, validate_dataset
from quality.suites import checked_tables
from tests.quality_tables import (
    action_counts,
    append,
    append_bronze,
    clean_bronze,
    clean_silver,
    hourly,
    open_close_events,
)
from tests.seeds import SEED_NAMES

START = 1_709_251_200  # 2024-03-01T00:00:00Z
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
WEEK_HOURS = 168
EVENTS_SILVER_SUITES = ("events_action_hourly",)
EVENTS_TABLES = (
    "bronze_events",
    "quarantine_events",
    "events_action_hourly",
    "events_action_sliding",
)
LINES_SUITES = ("bronze_lines", "lines_word_counts")


def _gx(config: RunoffConfig) -> Path:
    return config.quality_dir / "gx" / "uncommitted"


def stored_results(config: RunoffConfig) -> set[str]:
    """Result files in GX's validations store, relative to it."""
    root = _gx(config) / "validations"
    return {p.relative_to(root).as_posix() for p in root.rglob("*.json")}


def stored_pages(config: RunoffConfig) -> set[str]:
    """Validation pages of the Data Docs site, relative to the site."""
    site = _gx(config) / "data_docs" / "local_site"
    return {p.relative_to(site).as_posix() for p in (site / "validations").rglob("*.html")}


def index_links(config: RunoffConfig) -> set[str]:
    index = _gx(config) / "data_docs" / "local_site" / "index.html"
    return set(re.findall(r'href="(validations/[^"]+)"', index.read_text()))


def empty_dirs(config: RunoffConfig) -> list[Path]:
    roots = (_gx(config) / "validations", _gx(config) / "data_docs" / "local_site" / "validations")
    return [d for root in roots for d in root.rglob("*") if d.is_dir() and not any(d.iterdir())]


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root`: (size, mtime in ns)."""
    return {
        p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


class Run:
    """One validate run at a chosen time: the paths GX stores its results under."""

    def __init__(self, dataset: str, run_id: str, at: datetime) -> None:
        self.name = f"{dataset}-{run_id[:8]}"
        self.stamp = at.strftime("%Y%m%dT%H%M%S.%fZ")

    def result(self, suite: str) -> str:
        return f"{suite}/{self.name}/{self.stamp}/runoff-{suite}.json"

    def page(self, suite: str) -> str:
        return f"validations/{suite}/{self.name}/{self.stamp}/runoff-{suite}.html"


def validate_at(
    monkeypatch: pytest.MonkeyPatch,
    config: RunoffConfig,
    dataset: str,
    at: datetime,
    layers: Sequence[str] = LAYERS,
) -> Run:
    """`validate_dataset(full=True)` with GX recording `at` as the run time."""
    from great_expectations.core import run_identifier

    class RunIdentifierAt(run_identifier.RunIdentifier):
        def __init__(self, run_name: str | None = None, run_time: Any = None) -> None:
            super().__init__(run_name=run_name, run_time=at)

    with monkeypatch.context() as patch:
        patch.setattr(run_identifier, "RunIdentifier", RunIdentifierAt)
        report = validate_dataset(config, dataset, layers, full=True)
    assert report.passed and report.expectations
    return Run(dataset, report.run_id, at)


def build_tables(config: RunoffConfig) -> None:
    """Clean events tables (bronze, hourly silver) and lines tables (bronze, word counts)."""
    append_bronze(config.bronze_path("events"), open_close_events(START, 4))
    append(
        config.silver_path("events_action_hourly"),
        action_counts([hourly(0, "Open", 4), hourly(0, "Close", 4)]),
    )
    append_bronze(config.bronze_path("lines"), clean_bronze("lines"))
    append(config.silver_path("lines_word_counts"), clean_silver("lines_word_counts"))


def test_suites_of_a_dataset_are_the_suites_of_its_tables(config: RunoffConfig) -> None:
    suite_tables = {
        suite.name: suite.to_suite().meta["table"]
        for name in SEED_NAMES
        for table in checked_tables(Catalog.load(config), name)
        for suite in table.suites
    }
    for name in SEED_NAMES:
        expected = {s.name for t in checked_tables(Catalog.load(config), name) for s in t.suites}
        names = [t.name for t in Catalog.load(config).tables(name)]
        assert dataset_suites(suite_tables, names) == expected
    events = [t.name for t in Catalog.load(config).tables("events")]
    assert dataset_suites({"bronze_events": None, "x": "bronze_events"}, events) == {"x"}


def test_prune_keeps_recent_results_and_the_newest_of_each_suite(
    config: RunoffConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_tables(config)
    first = validate_at(monkeypatch, config, "events", NOW - timedelta(days=30))
    lines = validate_at(monkeypatch, config, "lines", NOW - timedelta(days=30))
    bronze_runs = [
        validate_at(monkeypatch, config, "events", NOW - age, layers=("bronze",))
        for age in (timedelta(days=20), timedelta(days=2), timedelta(hours=1))
    ]
    old, recent, newest = bronze_runs
    lines_results = {lines.result(s) for s in LINES_SUITES}
    silver_results = {first.result(s) for s in EVENTS_SILVER_SUITES}
    assert stored_results(config) == {
        *(run.result("bronze_events") for run in (first, *bronze_runs)),
        *silver_results,
        *lines_results,
    }
    assert stored_pages(config) == {
        p.replace(".json", ".html") for p in {"validations/" + r for r in stored_results(config)}
    }

    before = stored_results(config)

    pruning = prune_validation_results(
        config.quality_dir, "events", EVENTS_TABLES, WEEK_HOURS, now=NOW
    )

    # bronze_events: the 30- and 20-day-old results go, the 2-day-old and the newest stay; the
    # silver suites ran 30 days ago only, so that result is their newest and stays.
    removed = {first.result("bronze_events"), old.result("bronze_events")}
    kept = {recent.result("bronze_events"), newest.result("bronze_events"), *silver_results}
    assert stored_results(config) == kept | lines_results == before - removed
    kept_pages = {
        *(run.page("bronze_events") for run in (recent, newest)),
        *(first.page(s) for s in EVENTS_SILVER_SUITES),
        *(lines.page(s) for s in LINES_SUITES),
    }
    assert stored_pages(config) == kept_pages
    assert index_links(config) == kept_pages
    assert empty_dirs(config) == []
    assert (pruning.removed, pruning.pages_removed, pruning.kept) == (2, 2, len(kept))
    assert pruning.index_rebuilt
    assert pruning.line() == (
        f"maintain quality results: 2 old validation results removed (kept {len(kept)})"
    )

    # Again: nothing is old enough any more, and nothing is written.
    files = snapshot(config.quality_dir / "gx")
    again = prune_validation_results(
        config.quality_dir, "events", EVENTS_TABLES, WEEK_HOURS, now=NOW
    )
    assert (again.removed, again.pages_removed, again.kept) == (0, 0, len(kept))
    assert not again.index_rebuilt
    assert snapshot(config.quality_dir / "gx") == files

    # No retention at all: only the newest result of each suite stays, other datasets untouched.
    everything = prune_validation_results(config.quality_dir, "events", EVENTS_TABLES, 0, now=NOW)
    assert (everything.removed, everything.kept) == (1, 1 + len(silver_results))
    assert stored_results(config) == {newest.result("bronze_events"), *silver_results} | (
        lines_results
    )
    assert index_links(config) == kept_pages - {recent.page("bronze_events")}


def test_expired_results_keep_the_newest_even_at_the_cutoff() -> None:
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    def key(suite: str, hours_ago: int) -> ValidationResultIdentifier:
        run = RunIdentifier(run_name=f"r{hours_ago}", run_time=NOW - timedelta(hours=hours_ago))
        return ValidationResultIdentifier(ExpectationSuiteIdentifier(suite), run, f"b-{suite}")

    keys = [key("a", 1), key("a", 5), key("a", 9), key("b", 9), key("other", 9)]
    cutoff = NOW - timedelta(hours=5)
    expired = expired_results(keys, {"a", "b"}, cutoff)
    assert [(k.expectation_suite_identifier.name, k.run_id.run_name) for k in expired] == [
        ("a", "r9")  # a@5h is not older than the cutoff; b@9h is b's newest
    ]
    assert expired_results(keys, {"a", "b"}, NOW) == [keys[2], keys[1]]
    assert expired_results([], {"a"}, NOW) == []


def test_prune_without_a_quality_project_does_nothing(config: RunoffConfig) -> None:
    pruning = prune_validation_results(config.quality_dir, "events", EVENTS_TABLES, 0)
    assert not pruning.exists
    assert pruning.line() == "maintain quality results: no validation results yet, nothing to do"
    assert not config.quality_dir.exists()
