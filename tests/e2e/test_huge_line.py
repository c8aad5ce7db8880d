"""One landing line of hundreds of MiB, with a 1 GiB driver: a cold `runoff bronze`, and the same
run through `runoff serve` (tests/e2e/test_server.py), whose shared driver must outlive it.

Read as one row it would fill the driver's heap (`OutOfMemoryError`, the driver gone, every rerun
the same, the good file beside it never ingested). The run must succeed: the good file's
records in bronze, the line in quarantine as `line too long` with its line number and the start
`_raw` keeps (jobs.bronze.long_lines; the exact rows of smaller long lines are
tests/spark/jobs/bronze/test_long_lines.py's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import RunoffConfig
from delta_tables.arrow import read_arrow
from jobs.bronze.parse import MAX_LINE_BYTES
from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LINE_BYTES = 400 << 20
START = 1704067200
HEAD = b'{"time": 1704067200, "action": "Open", "pad": "'
DRIVER_MEMORY = "spark.driver.memory=1g"


def land_a_huge_line(config: RunoffConfig) -> list[tuple[int, str]]:
    """Land `a-huge.json` (a record, a line of LINE_BYTES, a record) and `b-good.json` (five
    records) for `events`; return the (time, action) of every record bronze must hold."""
    folder = config.landing_dir("events") / "date=2024-01-01"
    folder.mkdir(parents=True)
    with (folder / "a-huge.json").open("wb") as out:
        out.write(b'{"time": 1704067200, "action": "Close"}\n' + HEAD)
        block = b"x" * (1 << 20)
        for _ in range(LINE_BYTES >> 20):
            out.write(block)
        out.write(b'"}\n{"time": 1704067260, "action": "Open"}\n')
    records = [{"time": START + 60 * i, "action": ("Open", "Close")[i % 2]} for i in range(5)]
    (folder / "b-good.json").write_text("".join(json.dumps(r) + "\n" for r in records))
    return [(START, "Close"), (START + 60, "Open"), *((r["time"], r["action"]) for r in records)]


def assert_the_huge_line_quarantined(config: RunoffConfig, records: list[tuple[int, str]]) -> None:
    bronze = read_arrow(str(config.bronze_path("events"))).to_pylist()
    assert sorted((r["time"], r["action"]) for r in bronze) == sorted(records)
    (quarantined,) = read_arrow(str(config.quarantine_path("events"))).to_pylist()
    assert Path(quarantined["_source_file"]).name == "a-huge.json"
    assert (quarantined["_line_number"], quarantined["_error"]) == (2, "line too long")
    assert quarantined["_raw"] == (HEAD + b"x" * MAX_LINE_BYTES).decode()[: MAX_LINE_BYTES + 1]


def test_a_line_of_hundreds_of_mib_is_quarantined_and_the_other_file_ingested(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    config = RunoffConfig.from_sources(home=home, env={})
    records = land_a_huge_line(config)
    env = {
        **os.environ,
        "RUNOFF_HOME": str(home),
        "RUNOFF_SPARK_MASTER": "local[2]",
        "RUNOFF_SPARK_CONF": DRIVER_MEMORY,
    }
    env.pop("RUNOFF_SERVER", None)

    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "bronze", "events"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    assert "OutOfMemoryError" not in done.stderr
    assert_the_huge_line_quarantined(config, records)
