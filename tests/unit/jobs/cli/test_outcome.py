"""`runoff --outcome PATH <command>`: the JSON file Airflow's tasks read when the command ended.

No Spark and no Great Expectations run here: `generate` stands in for a successful command, an
unknown dataset for a failing one, and `validate_dataset` is replaced by a hand-built
`ValidationReport` to check the summary `runoff validate` records.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from core.errors import RunoffError
from jobs.cli import main as cli
from jobs.cli.main import main
from jobs.ops import validate
from quality.runner import ExpectationOutcome, TableOutcome, ValidationReport

OUTCOME_KEYS = {"command", "dataset", "exit_code", "error", "error_type", "summary"}
SUMMARY_TABLE_KEYS = {
    "layer",
    "status",
    "versions",
    "from_version",
    "to_version",
    "rows",
    "expectations_passed",
    "expectations_failed",
    "warnings",
    "definition",
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """(exit code, stderr) of `runoff argv...`."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    assert set(data) == OUTCOME_KEYS
    # Written atomically: no temporary file is left next to it.
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    return data


@pytest.mark.parametrize("position", ["before", "after"])
def test_outcome_of_a_successful_command(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path, position: str
) -> None:
    """Before or after the command: exit code 0, no error, no summary; parent folders made."""
    path = tmp_path / "outcomes" / "dag" / "run" / "generate.json"
    command = ["generate", "events", "--files", "1", "--rows-per-file", "2"]
    option = ["--outcome", str(path)]
    argv = [*option, *command] if position == "before" else [*command, *option]
    code, err = run(capsys, "--home", str(home), *argv)
    assert (code, err) == (0, "")
    assert read(path) == {
        "command": "generate",
        "dataset": "events",
        "exit_code": 0,
        "error": None,
        "error_type": None,
        "summary": None,
    }


def test_outcome_of_a_failing_command_is_its_stderr_line(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "out" / "validate.json"
    path.parent.mkdir()
    path.write_text('{"stale": true}')  # replaced, not merged
    code, err = run(capsys, "--home", str(home), "--outcome", str(path), "validate", "nosuch")
    assert code == 2
    data = read(path)
    assert err.splitlines() == [data["error"]]
    assert data["error"].startswith("runoff: error: unknown dataset 'nosuch'")
    assert data | {"error": None} == {
        "command": "validate",
        "dataset": "nosuch",
        "exit_code": 2,
        "error": None,
        "error_type": "ConfigError",
        "summary": None,
    }


def test_a_handler_provides_the_summary_even_when_it_fails(
    capsys: pytest.CaptureFixture[str],
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def handler(config: RunoffConfig, args: argparse.Namespace) -> int:
        args.summary = {"answer": 42}
        raise RunoffError("it went wrong\n(second line)")

    monkeypatch.setattr(cli, "handler_for", lambda command: handler)
    path = tmp_path / "out" / "status.json"
    code, err = run(capsys, "--home", str(home), "status", "events", "--outcome", str(path))
    assert code == 1
    assert err == "runoff: error: it went wrong\n(second line)\n"
    assert read(path) == {
        "command": "status",
        "dataset": "events",
        "exit_code": 1,
        "error": "runoff: error: it went wrong\n(second line)",  # what stderr shows
        "error_type": "RunoffError",
        "summary": {"answer": 42},
    }


def test_no_outcome_file_without_the_option(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _ = run(capsys, "--home", str(home), "generate", "events", "--files", "1")
    assert code == 0
    assert not [p for p in tmp_path.glob("**/*.json") if p.is_relative_to(home) is False]


# -- runoff validate's summary --------------------------------------------------------------
def report(*, critical_failure: bool = False, docs: Path | None = None) -> ValidationReport:
    def outcome(table: str, expectation: str, severity: str, success: bool) -> ExpectationOutcome:
        return ExpectationOutcome(table, "suite", expectation, severity, success, "-", "1..2", 2)

    return ValidationReport(
        run_id="r1",
        dataset="events",
        layers=("bronze", "silver"),
        full=False,
        tables=[
            TableOutcome("bronze_events", "bronze", "validated", "new", "1..2", 1, 2, 120),
            TableOutcome("quarantine_events", "bronze", "validated", "new", "0..1", 0, 1, 7),
            TableOutcome(
                "events_action_hourly", "silver", "no new data", "no version", "", None, 4
            ),
            TableOutcome("events_action_sliding", "silver", "skipped", "does not exist yet"),
        ],
        expectations=[
            outcome("bronze_events", "rows_added(min_value=1)", "critical", True),
            outcome("bronze_events", "freshness(max_age=1)", "warning", False),
            outcome("quarantine_events", "share(max=0.1)", "critical", not critical_failure),
            outcome("events_action_hourly", "freshness(max_age=1)", "critical", True),
        ],
        data_docs_path=docs,
        definitions={"events_action_hourly": "3f2a9c0d1e4b"},
    )


def test_validation_report_summary_shape(tmp_path: Path) -> None:
    summary = report(docs=tmp_path / "index.html").summary()
    json.dumps(summary)  # JSON-able as is
    assert summary["tables"]["bronze_events"] == {
        "layer": "bronze",
        "status": "validated",
        "versions": "1..2",
        "from_version": 1,
        "to_version": 2,
        "rows": 120,
        "expectations_passed": 1,
        "expectations_failed": 0,
        "warnings": 1,
        "definition": None,  # the report knows none for bronze (a table made before definitions)
    }
    assert summary["tables"]["events_action_hourly"] == {
        "layer": "silver",
        "status": "no new data",
        "versions": "4",
        "from_version": None,
        "to_version": 4,
        "rows": 0,
        "expectations_passed": 1,
        "expectations_failed": 0,
        "warnings": 0,
        "definition": "3f2a9c0d1e4b",  # the fingerprint of what built the table
    }
    for table in summary["tables"].values():
        assert set(table) == SUMMARY_TABLE_KEYS
    assert list(summary["tables"]) == [
        "bronze_events",
        "quarantine_events",
        "events_action_hourly",
        "events_action_sliding",
    ]
    assert summary["tables"]["events_action_sliding"]["status"] == "skipped"
    assert {k: v for k, v in summary.items() if k != "tables"} == {
        "dataset": "events",
        "run_id": "r1",
        "layers": ["bronze", "silver"],
        "full": False,
        "expectations_passed": 3,
        "expectations_failed": 0,
        "warnings": 1,
        "quarantined_rows": 7,
        "passed": True,
        "failure": None,
        "data_docs": str(tmp_path / "index.html"),
    }


@pytest.mark.parametrize("critical_failure", [False, True])
def test_validate_writes_its_summary_to_the_outcome(
    capsys: pytest.CaptureFixture[str],
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    critical_failure: bool,
) -> None:
    """`cmd_validate` leaves `report.summary()` for the outcome, also when it fails; the error
    line then names the table and the expectation."""
    made = report(critical_failure=critical_failure)
    monkeypatch.setattr(validate, "validate_dataset", lambda *args, **kwargs: made)
    path = tmp_path / "out" / "validate.json"
    code, err = run(capsys, "--home", str(home), "--outcome", str(path), "validate", "events")
    data = read(path)
    assert data["summary"] == made.summary()
    assert data["exit_code"] == code == (1 if critical_failure else 0)
    assert data["summary"]["passed"] is not critical_failure
    if critical_failure:
        assert data["error"] == err.splitlines()[-1]
        assert data["error"] == (
            "runoff: error: critical expectation failed on quarantine_events at version 2: "
            "share(max=0.1): observed -"
        )
        assert data["error_type"] == "QualityCheckFailed"
        assert data["summary"]["expectations_failed"] == 1
    else:
        assert data["error"] is None
