"""Faults across commands: a driver killed mid-backfill or mid-validate, then a rerun, is exact;
commands that would interleave on one dataset's tables are refused, naming the holder.

The killed command runs as a real process (its own process group: Python driver, JVM and Python
workers die together, as on a machine crash); the reruns and the refused commands run in this
process on the shared SparkSession. Tables are compared with tests/expected.py.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from delta_tables.ledger import read_runs
from tests import expected
from tests.conftest import REPO_ROOT
from tests.spark.jobs.bronze.test_job import assert_tables_hold_exactly, land
from tests.tables import assert_silver_matches_expected, snapshot_tables

pytestmark = [pytest.mark.slow, pytest.mark.spark]

TIMEOUT = 300.0
DAY = ("--start", "2024-01-01", "--end", "2024-01-02")


def start(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNOFF_")}
    env.update({"PYTHONPATH": str(REPO_ROOT), "RUNOFF_SPARK_MASTER": "local[2]"})
    return subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "--home", str(home), *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the JVM dies with it
    )


def wait_for(process: subprocess.Popen[str], text: str) -> list[str]:
    """The process's lines up to the first that contains `text`."""
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + TIMEOUT
    for line in process.stdout:
        seen.append(line.rstrip("\n"))
        if text in line:
            return seen
        assert time.monotonic() < deadline, seen
    raise AssertionError(f"{text!r} never printed: {seen}")


def kill(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def cli(home: Path, *args: str) -> int:
    from jobs.cli.main import main

    return main(["--home", str(home), *args])


def redeliver(files: list[expected.LandingFile]) -> list[expected.LandingFile]:
    """The first file delivered again with every action flipped (a correction to backfill)."""
    path = files[0].path
    lines = []
    for line in path.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            lines.append(line)
            continue
        if isinstance(record, dict) and record.get("action") in ("Open", "Close"):
            record["action"] = "Close" if record["action"] == "Open" else "Open"
            line = json.dumps(record).encode()
        lines.append(line)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return [expected.read_file("events", path), *files[1:]]


@pytest.fixture(scope="module")
def ingested_once(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, list[expected.LandingFile]]:
    """Landing files through bronze and silver, once for the module: the home, a copy of it
    made then, and the files."""
    root = tmp_path_factory.mktemp("faults")
    config = RunoffConfig.from_sources(home=root / "home", env={})
    files = land(config, "events", files=3, seed=31, start="2024-01-01T00:00:00Z")
    assert cli(config.home, "bronze", "events") == 0
    assert cli(config.home, "silver", "events") == 0
    shutil.copytree(config.home, root / "ingested", symlinks=True)
    return config.home, root / "ingested", files


@pytest.fixture
def ingested(
    spark: Any, ingested_once: tuple[Path, Path, list[expected.LandingFile]]
) -> tuple[RunoffConfig, list[expected.LandingFile]]:
    """A home whose landing files went through bronze and silver: `ingested_once`'s, put back
    as it was at the same path (the checkpoints name their files by absolute path; the copy
    keeps every file's modification time). Delta's cache of table states in the shared session
    is cleared: a table may now be older than what it holds."""
    home, saved, files = ingested_once
    shutil.rmtree(home)
    shutil.copytree(saved, home, symlinks=True)
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    return RunoffConfig.from_sources(home=home, env={}), copy.deepcopy(files)


def test_a_backfill_killed_mid_run_is_exact_after_a_rerun(
    ingested: tuple[RunoffConfig, list[expected.LandingFile]],
) -> None:
    config, files = ingested
    files = redeliver(files)
    backfill = start(
        config.home, "backfill", "events", "--start", "2024-01-01", "--end", "2024-01-02"
    )
    # Killed between its start (the landing files found) and its end, somewhere among its
    # per-table commits.
    wait_for(backfill, "landing files")
    time.sleep(random.uniform(0.5, 6.0))
    kill(backfill)
    assert cli(config.home, "backfill", "events", *DAY) == 0
    assert_tables_hold_exactly(config, "events", files)
    assert_silver_matches_expected(config, "events")
    # A second rerun finds nothing to change.
    tables = snapshot_tables(config, "events")
    assert cli(config.home, "backfill", "events", *DAY) == 0
    assert snapshot_tables(config, "events") == tables


def test_a_validate_killed_mid_run_is_rerun_over_the_same_versions(
    ingested: tuple[RunoffConfig, list[expected.LandingFile]], capsys: Any
) -> None:
    config, _ = ingested
    validate = start(config.home, "validate", "events")
    seen = wait_for(validate, "validate bronze_events: versions")
    kill(validate)
    first = next(line for line in seen if line.startswith("validate bronze_events: versions"))
    capsys.readouterr()
    assert cli(config.home, "validate", "events") == 0
    rerun = capsys.readouterr().out.splitlines()
    # Nothing was skipped: the rerun validates the versions the killed run had started on.
    assert first in rerun, rerun
    assert [r["status"] for r in read_runs(config.runs_path) if r["layer"] == "validate"] == [
        "success"
    ]


def test_bronze_during_a_backfill_is_refused_naming_it(
    ingested: tuple[RunoffConfig, list[expected.LandingFile]], capsys: Any
) -> None:
    config, files = ingested
    files = redeliver(files)
    backfill = start(
        config.home, "backfill", "events", "--start", "2024-01-01", "--end", "2024-01-02"
    )
    try:
        wait_for(backfill, "landing files")  # it holds the dataset's checkpoint locks now
        capsys.readouterr()
        assert cli(config.home, "bronze", "events") == 3
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "runoff backfill events" in err, err
        assert backfill.wait(timeout=TIMEOUT) == 0
    finally:
        kill(backfill)
    assert cli(config.home, "bronze", "events") == 0
    assert_tables_hold_exactly(config, "events", files)
    assert_silver_matches_expected(config, "events")


def test_maintain_during_silver_is_refused_naming_it(
    ingested: tuple[RunoffConfig, list[expected.LandingFile]], capsys: Any
) -> None:
    config, files = ingested
    more = land(config, "events", files=2, seed=32, start="2024-01-01T03:00:00Z")
    assert cli(config.home, "bronze", "events") == 0
    silver = start(config.home, "silver", "events", "--max-files-per-trigger", "1")
    try:
        wait_for(silver, "silver events_action_hourly batch")  # it holds the silver locks
        capsys.readouterr()
        assert cli(config.home, "maintain", "events") == 3
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "runoff silver events" in err, err
        assert silver.wait(timeout=TIMEOUT) == 0
    finally:
        kill(silver)
    assert cli(config.home, "maintain", "events") == 0
    assert_tables_hold_exactly(config, "events", [*files, *more])
    # (the first files are archived by now: the oracle reads what was landed)
    assert_silver_matches_expected(config, "events", files=[*files, *more])
