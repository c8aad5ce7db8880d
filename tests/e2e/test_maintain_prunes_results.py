"""`runoff maintain` prunes a dataset's quality results (a real CLI process)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.config import RunoffConfig
from delta_tables.ledger import read_runs
from jobs.cli.main import main
from tests.conftest import take_output
from tests.spark.quality.test_retention import (
    EVENTS_SILVER_SUITES,
    LINES_SUITES,
    WEEK_HOURS,
    build_tables,
    index_links,
    snapshot,
    stored_pages,
    stored_results,
    validate_at,
)


def test_maintain_prunes_the_dataset_results(
    home: Path, monkeypatch: pytest.MonkeyPatch, console_output: io.StringIO
) -> None:
    monkeypatch.delenv("RUNOFF_VACUUM_RETENTION_HOURS", raising=False)  # the default: 168 h
    config = RunoffConfig.from_sources(home=home, env={})
    assert main(["--home", str(home), "maintain", "events"]) == 0
    out = take_output(console_output)
    assert "maintain quality results: no validation results yet, nothing to do" in out
    assert not config.quality_dir.exists()

    build_tables(config)
    now = datetime.now(UTC)
    first = validate_at(monkeypatch, config, "events", now - timedelta(days=10))
    lines = validate_at(monkeypatch, config, "lines", now - timedelta(days=10))
    last = validate_at(monkeypatch, config, "events", now - timedelta(days=9), layers=("bronze",))
    take_output(console_output)

    assert main(["--home", str(home), "maintain", "events"]) == 0
    out = take_output(console_output)
    kept = {last.result("bronze_events"), *(first.result(s) for s in EVENTS_SILVER_SUITES)}
    assert f"maintain quality results: 1 old validation result removed (kept {len(kept)})\n" in out
    lines_results = {lines.result(s) for s in LINES_SUITES}
    assert stored_results(config) == kept | lines_results
    pages = {
        last.page("bronze_events"),
        *(first.page(s) for s in EVENTS_SILVER_SUITES),
        *(lines.page(s) for s in LINES_SUITES),
    }
    assert stored_pages(config) == pages
    assert index_links(config) == pages
    (run,) = [r for r in read_runs(config.runs_path, "events") if r["layer"] == "maintain"][1:]
    details = json.loads(run["details"])["quality_results"]
    assert (details["removed"], details["pages_removed"], details["kept"]) == (1, 1, len(kept))
    assert details["retention_hours"] == WEEK_HOURS

    # A second maintain changes nothing in the GX project.
    before = snapshot(config.quality_dir / "gx")
    assert main(["--home", str(home), "maintain", "events"]) == 0
    out = take_output(console_output)
    assert f"maintain quality results: 0 old validation results removed (kept {len(kept)})\n" in out
    assert snapshot(config.quality_dir / "gx") == before
