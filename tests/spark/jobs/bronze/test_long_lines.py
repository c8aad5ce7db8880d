"""A landing line too long to be read as one row is quarantined, and nothing else changes.

Lines of HUGE_LINE_BYTES or more are skipped by Hadoop's line reader (bounded memory) and found
again by jobs.bronze.long_lines: `runoff bronze` must hold every valid line in bronze and every
other one in quarantine with its reason, its true line number and the start `_raw` keeps, as
tests/expected.py classifies the files independently; a file holding nothing but such a line
(no `\\n`) included. A backfill of the interval then re-reads the same files (one of them
archived) and changes nothing. The same through a cold `runoff` process with a 1 GiB driver and
a line of hundreds of MiB is tests/e2e/test_faults.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

import pytest

from core.config import RunoffConfig
from delta_tables.arrow import read_arrow
from delta_tables.writes import table_version
from jobs.bronze.job import archive_dir
from jobs.bronze.long_lines import HUGE_LINE_BYTES
from jobs.bronze.parse import MAX_LINE_BYTES
from jobs.cli.main import main
from tests import expected

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

START = 1704067200  # 2024-01-01T00:00:00Z
HUGE = (
    b'{"time": 1704067300, "action": "Open", "pad": "'
    + b"\xe2\x82\xac" * (HUGE_LINE_BYTES // 3)
    + b'"}'
)


def good(i: int) -> bytes:
    return json.dumps({"time": START + 60 * i, "action": ("Open", "Close")[i % 2]}).encode()


def local(uri: str) -> str:
    return unquote(urlparse(uri).path)


def test_a_line_too_long_to_read_is_quarantined_and_every_other_line_flows_on(
    spark: SparkSession, config: RunoffConfig
) -> None:
    folder = config.landing_dir("events") / "date=2024-01-01"
    folder.mkdir(parents=True)
    files = {
        "a.json": b"\n".join([good(0), HUGE, good(1), b"oops", good(2), HUGE, good(3)]) + b"\n",
        "b b.json": HUGE,  # one line, no newline: the reader reads nothing of the file
        "c.json": b"\n".join([good(4), good(5)]) + b"\n",
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    assert len(HUGE) > HUGE_LINE_BYTES
    landed = expected.read_landing("events", config.landing_dir("events"))

    assert main(["--home", str(config.home), "bronze", "events"]) == 0

    bronze = read_arrow(str(config.bronze_path("events"))).to_pylist()
    assert sorted((r["time"], r["action"]) for r in bronze) == sorted(
        (r["time"], r["action"]) for r in expected.valid_records(landed)
    )
    quarantine = read_arrow(str(config.quarantine_path("events"))).to_pylist()
    got = sorted(
        (local(r["_source_file"]), r["_line_number"], r["_raw"], r["_error"]) for r in quarantine
    )
    # Which lines, where and what `_raw` keeps: as the independent classification says.
    want = sorted(
        (str(path), number, raw.decode(errors="replace")[: MAX_LINE_BYTES + 1])
        for path, number, raw, _ in expected.malformed_lines(landed)
    )
    assert [(Path(p).name, n, e) for p, n, _, e in got] == [
        ("a.json", 2, "line too long"),
        ("a.json", 4, "not a JSON object"),
        ("a.json", 6, "line too long"),
        ("b b.json", 1, "line too long"),
    ]
    assert [g[:3] for g in got] == want
    # One name per file, as Spark's reader gives it (`file:/...%20...`).
    assert {r["_source_file"] for r in quarantine} == {
        f"file:{folder}/a.json",
        f"file:{folder}/b%20b.json",
    }

    # A backfill of the day re-reads the files, archived by the next bronze run's batch (one
    # moved back to landing), and finds nothing to change.
    home = ["--home", str(config.home)]
    later = config.landing_dir("events") / "date=2024-01-02" / "d.json"
    later.parent.mkdir()
    later.write_bytes(good(1440) + b"\n")
    assert main([*home, "bronze", "events"]) == 0
    archive = archive_dir(config, "events") / folder.name
    assert sorted(p.name for p in archive.iterdir()) == sorted(files)
    (archive / "b b.json").rename(folder / "b b.json")
    tables = (config.bronze_path("events"), config.quarantine_path("events"))
    versions = [table_version(t) for t in tables]
    assert main([*home, "backfill", "events", "--start", "2024-01-01", "--end", "2024-01-02"]) == 0
    assert [table_version(t) for t in tables] == versions
