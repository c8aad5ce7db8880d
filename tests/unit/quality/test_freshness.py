"""`freshness` expectations in `runoff validate`: the age of each table's newest event time.

Tables are written with delta-rs with known event times and validation runs at an injected time
(`now`, or `quality.runner.utc_now` for the CLI), so every age below is computed by hand:
newest event time (bronze `event_time`, quarantine `_ingested_at`, silver `window_end`) to now.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.config import RunoffConfig
from jobs.cli.main import main
from quality import runner
from quality.history import read_results
from quality.runner import results_path, validate_dataset
from tests.conftest import take_output
from tests.quality_tables import (
    HOUR,
    INGESTED_AT,
    action_counts,
    append,
    append_bronze,
    at,
    bronze_events,
    hourly,
    open_close_events,
    quarantine_rows,
)

SPEC = """\
name: fresh
source: {format: json}
schema: "time BIGINT, action STRING"
event_time: "CAST(time AS TIMESTAMP)"
silver:
  - table: fresh_hourly
    window: "1 hour"
    keys: [action]
    measures: {count: "count(*)"}
expectations:
  bronze:
    - {expect: freshness, max_age: "2 hours", severity: critical}
  quarantine:
    - {expect: freshness, max_age: "1 day", severity: critical}
  fresh_hourly:
    - {expect: freshness, max_age: "1 hour", severity: warning}
"""
BRONZE_FRESHNESS = "column_max_to_be_between(newest_event_age_seconds, max_value=7200)"
QUARANTINE_FRESHNESS = "column_max_to_be_between(newest_event_age_seconds, max_value=86400)"
SILVER_FRESHNESS = "column_max_to_be_between(newest_event_age_seconds, max_value=3600)"
NEWEST_EVENT = at(10)  # bronze
NEWEST_WINDOW_END = at(8) + HOUR  # fresh_hourly


@pytest.fixture
def fresh(tmp_path: Path) -> RunoffConfig:
    """A home whose `fresh` tables hold known times; the spec folder passed as `--datasets`."""
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "fresh.yaml").write_text(SPEC)
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={}, datasets=[folder])
    # 100 rows: the one quarantined line stays under the quarantine share's warning level
    append_bronze(config.bronze_path("fresh"), open_close_events(int(at(9).timestamp()), 50))
    append_bronze(
        config.bronze_path("fresh"),
        bronze_events([int(NEWEST_EVENT.timestamp())], ["Open"], batch_id=1),
    )
    append(config.quarantine_path("fresh"), quarantine_rows(1))
    append(
        config.silver_path("fresh_hourly"),
        action_counts([hourly(7, "Open", 1), hourly(8, "Close", 2)]),
    )
    return config


def _freshness(report: runner.ValidationReport) -> dict[str, tuple[str, str, bool]]:
    return {
        e.table: (e.severity, e.observed, e.success)
        for e in report.expectations
        if "newest_event_age_seconds" in e.expectation
    }


def test_fresh_tables_pass_and_a_stale_warning_is_reported(fresh: RunoffConfig) -> None:
    now = datetime(2024, 3, 1, 11, 30, tzinfo=UTC)
    report = validate_dataset(fresh, "fresh", now=now)
    ages = {
        "bronze_fresh": (now - NEWEST_EVENT).total_seconds(),  # 5400 <= 7200
        "quarantine_fresh": (now - INGESTED_AT).total_seconds(),  # -1800: ingested "later"
        "fresh_hourly": (now - NEWEST_WINDOW_END).total_seconds(),  # 9000 > 3600
    }
    assert ages == {"bronze_fresh": 5400, "quarantine_fresh": -1800, "fresh_hourly": 9000}
    assert _freshness(report) == {
        "bronze_fresh": ("critical", "5400", True),
        "quarantine_fresh": ("critical", "-1800", True),
        "fresh_hourly": ("warning", "9000", False),
    }
    assert report.passed
    assert [(w.table, w.expectation) for w in report.warnings] == [
        ("fresh_hourly", SILVER_FRESHNESS)
    ]
    assert {r["table"]: r["result"] for r in report.rows if "newest_event" in r["expectation"]} == {
        "bronze_fresh": "pass",
        "quarantine_fresh": "pass",
        "fresh_hourly": "warn",
    }
    history = read_results(results_path(fresh), dataset="fresh")
    recorded = {
        r["table"]: (r["severity"], r["observed"], r["success"], r["table_passed"])
        for r in history
        if r["suite"].endswith("_freshness")
    }
    assert recorded == {
        "bronze_fresh": ("critical", "5400", True, True),
        "quarantine_fresh": ("critical", "-1800", True, True),
        "fresh_hourly": ("warning", "9000", False, True),
    }


def test_a_stale_table_fails_without_new_data(fresh: RunoffConfig) -> None:
    assert validate_dataset(fresh, "fresh", now=at(11)).passed
    later = at(13, 0)  # bronze's newest event is now 3 hours old: more than 2 hours
    report = validate_dataset(fresh, "fresh", now=later)
    assert {t.table: t.status for t in report.tables} == {
        "bronze_fresh": "no new data",
        "quarantine_fresh": "no new data",
        "fresh_hourly": "no new data",
    }
    assert not report.passed
    assert [(f.table, f.expectation, f.observed) for f in report.critical_failures] == [
        ("bronze_fresh", BRONZE_FRESHNESS, str(int((later - NEWEST_EVENT).total_seconds())))
    ]
    assert report.failure_message() == (
        f"critical expectation failed on bronze_fresh at version 1: {BRONZE_FRESHNESS}: "
        "observed 10800"
    )
    assert {t.table: t.passed for t in report.tables} == {
        "bronze_fresh": False,
        "quarantine_fresh": True,
        "fresh_hourly": True,
    }
    failed = [
        r
        for r in read_results(results_path(fresh), dataset="fresh")
        if r["run_id"] == report.run_id and r["table"] == "bronze_fresh"
    ]
    assert [
        (r["from_version"], r["to_version"], r["success"], r["table_passed"]) for r in failed
    ] == [(1, 1, False, False)]


def test_validate_cli_exits_1_on_a_stale_critical_table(
    fresh: RunoffConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    console_output: io.StringIO,
) -> None:
    folder = str(fresh.dataset_dirs[-1])
    args = ["--home", str(fresh.home), "--datasets", folder, "validate", "fresh"]
    monkeypatch.setattr(runner, "utc_now", lambda: at(11))
    assert main(args) == 0  # fresh_hourly is 2 hours old: a warning only
    out = take_output(console_output)
    warned = [line for line in out.splitlines() if "newest_event_age_seconds" in line]
    assert len(warned) == 3
    assert [line for line in warned if "warn" in line and "fresh_hourly" in line]
    assert "0 critical failures, 1 warnings" in out
    capsys.readouterr()

    monkeypatch.setattr(runner, "utc_now", lambda: at(12, 1))  # bronze: 7260 s > 7200 s
    assert main(args) == 1
    err = capsys.readouterr().err
    assert (
        f"critical expectation failed on bronze_fresh at version 1: {BRONZE_FRESHNESS}: "
        "observed 7260"
    ) in err
    out = take_output(console_output)
    failed = [line for line in out.splitlines() if "FAIL" in line]
    assert len(failed) == 1 and "bronze_fresh" in failed[0]
