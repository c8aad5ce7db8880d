"""`runoff quarantine list`: the lines quarantine holds, by reason and landing file.

The quarantine table is written with delta-rs from the lines below, so every count, filter and
sample is computed here from those tuples, independently of the command.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from core.config import RunoffConfig
from jobs.cli.main import main
from jobs.ops.quarantine import SAMPLE_LINES, SHOWN_CHARS, shown_line
from tests.conftest import take_output
from tests.quality_tables import TS, append

DAY1, DAY2 = datetime(2024, 1, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, 1, tzinfo=UTC)
A, B = "/landing/events/date=2024-01-01/a.json", "/landing/events/date=2024-01-02/b.json"
# (line, error, file, line number, ingested at, the reason a reader filters by)
LINES = [
    ('{"time": 17', "unparseable JSON", A, 3, DAY1, "unparseable JSON"),
    ("[1, 2]", "not a JSON object", A, 9, DAY1, "not a JSON object"),
    (
        '{"time": 1704070000}',
        "missing required field: action (string)",
        B,
        4,
        DAY2,
        "missing required field",
    ),
    ('{"action": "[bold]x[/bold]"}', "rule failed: known_action", B, 7, DAY2, "rule failed"),
    ('{"time": "x' + "y" * 300, "unparseable JSON", B, 8, DAY2, "unparseable JSON"),
    *[("{", "unparseable JSON", B, 10 + i, DAY2, "unparseable JSON") for i in range(12)],
]


def write_quarantine(config: RunoffConfig) -> None:
    """Two bronze runs' quarantine commits: day 1's lines, then day 2's."""
    for day in (DAY1, DAY2):
        rows = [line for line in LINES if line[4] == day]
        append(
            config.quarantine_path("events"),
            pa.table(
                {
                    "_raw": pa.array([r[0] for r in rows], pa.string()),
                    "_error": pa.array([r[1] for r in rows], pa.string()),
                    "_source_file": pa.array([r[2] for r in rows], pa.string()),
                    "_line_number": pa.array([r[3] for r in rows], pa.int64()),
                    "_ingested_at": pa.array([r[4] for r in rows], TS),
                    "_batch_id": pa.array([0 if day == DAY1 else 1] * len(rows), pa.int64()),
                    "ingest_date": pa.array([day.date()] * len(rows), pa.date32()),
                }
            ),
        )


def listed(capsys: pytest.CaptureFixture[str], config: RunoffConfig, *options: str) -> Any:
    code = main(["--home", str(config.home), "quarantine", "list", "events", "--json", *options])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def expected(lines: list[tuple[Any, ...]]) -> dict[str, Any]:
    ordered = sorted(lines, key=lambda line: (line[4], line[2], line[3]))
    return {
        "lines": len(lines),
        "by_reason": Counter(line[5] for line in lines),
        "by_file": Counter(line[2] for line in lines),
        "sample": [
            {
                "file": line[2],
                "line": line[3],
                "error": line[1],
                "ingested_at": line[4].isoformat(),
                "raw": line[0],
            }
            for line in ordered[:SAMPLE_LINES]
        ],
    }


def test_lines_by_reason_and_file_with_a_sample_oldest_first(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_quarantine(config)
    doc = listed(capsys, config)
    want = expected(LINES)
    assert (doc["lines"], doc["sample"]) == (want["lines"], want["sample"])
    assert (Counter(doc["by_reason"]), Counter(doc["by_file"])) == (
        want["by_reason"],
        want["by_file"],
    )
    # the largest count first
    assert list(doc["by_reason"].values()) == sorted(doc["by_reason"].values(), reverse=True)
    assert doc["reasons_held"] == sorted({line[5] for line in LINES})


@pytest.mark.parametrize(
    ("options", "kept"),
    [
        (("--reason", "unparseable JSON"), lambda line: line[5] == "unparseable JSON"),
        (("--reason", "missing required field"), lambda line: line[5] == "missing required field"),
        (("--since", "2024-01-02"), lambda line: line[4] >= DAY2),
        (
            ("--since", "2024-01-01T12:00:00Z", "--reason", "rule failed"),
            lambda line: line[4] >= DAY2 and line[5] == "rule failed",
        ),
        (("--reason", "nope"), lambda line: False),
        # a landing file by name, by path, or by the URI as listed
        (("--file", "b.json"), lambda line: line[2] == B),
        (("--file", A), lambda line: line[2] == A),
        (("--file", "date=2024-01-01/a.json", "--reason", "nope"), lambda line: False),
        (("--file", "a.jso"), lambda line: False),  # a name is matched whole
    ],
)
def test_filters_keep_exactly_their_lines(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str], options: tuple[str, ...], kept: Any
) -> None:
    write_quarantine(config)
    doc = listed(capsys, config, *options)
    want = expected([line for line in LINES if kept(line)])
    assert (doc["lines"], doc["sample"]) == (want["lines"], want["sample"])
    assert Counter(doc["by_reason"]) == want["by_reason"]
    assert Counter(doc["by_file"]) == want["by_file"]


def test_the_table_for_people_shows_data_as_text(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str], console_output: io.StringIO
) -> None:
    write_quarantine(config)
    assert main(["--home", str(config.home), "quarantine", "list", "events"]) == 0
    out = take_output(console_output)
    assert f"quarantine_events: {len(LINES)} quarantined lines" in out
    assert f"the first {SAMPLE_LINES} lines (oldest first)" in out
    assert '{"action": "[bold]x[/bold]"}' in out  # markup in the data stays text


def test_a_long_line_is_cut_in_the_table() -> None:
    assert shown_line("x" * SHOWN_CHARS) == "x" * SHOWN_CHARS
    assert shown_line("x" * (SHOWN_CHARS + 1)) == "x" * SHOWN_CHARS + "..."
    assert shown_line(None) == ""


def test_no_table_yet_and_no_home(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = listed(capsys, config)
    assert (doc["exists"], doc["lines"], doc["sample"]) == (False, 0, [])
    missing = tmp_path / "nowhere"
    assert main(["--home", str(missing), "quarantine", "list", "events"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not missing.exists()


def test_replay_refuses_json_before_it_starts(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--home", str(config.home), "quarantine", "replay", "events", "--json"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no --json output" in err, err
