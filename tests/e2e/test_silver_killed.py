"""`runoff silver` as a real process, SIGKILLed after its first batches, then run again: the same
tables as an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from core.errors import LockHeldError
from core.locking import checkpoint_lock
from delta_tables.ledger import read_runs
from tests import expected
from tests.conftest import REPO_ROOT
from tests.seeds import seed as get_dataset
from tests.spark.jobs.silver.test_job import (
    UV,
    Landing,
    append_bronze,
    assert_matches_expected,
    landings,
    new_config,
    silver,
    table_version,
)


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Landing]:
    """Generated landing files per dataset, made once for the module."""
    return landings(tmp_path_factory)


def wait_for_locks(config: RunoffConfig, dataset: str, timeout: float = 120.0) -> None:
    """Wait until the killed run's locks are free: a SIGKILLed process releases its files when
    its last thread has exited, which can be a moment after it shows up as dead."""
    deadline = time.monotonic() + timeout
    for aggregate in get_dataset(dataset).aggregates:
        checkpoint = config.checkpoint_dir("silver", aggregate.table)
        while True:
            try:
                with checkpoint_lock(checkpoint, "test: wait for the killed run"):
                    break
            except LockHeldError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


@pytest.mark.slow
def test_run_killed_mid_run_then_rerun_gives_the_same_tables(
    spark: Any, tmp_path: Path, landing: Callable[[str], Landing]
) -> None:
    """`runoff silver` (a real process) is SIGKILLed after its first batches, then run again."""
    dataset = "sensors"
    files = landing(dataset).files
    config = new_config(tmp_path, "home")
    append_bronze(config, dataset, files)
    command = [
        UV, "run", "--frozen", "runoff", "--home", str(config.home),
        "silver", dataset, "--max-files-per-trigger", "1",
    ]  # fmt: skip
    env = {**os.environ, "RUNOFF_SPARK_MASTER": "local[1]", "PYTHONUNBUFFERED": "1"}
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr:
        child = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,  # its own process group: uv, Python and the JVM die together
        )
    seen: list[str] = []
    try:
        assert child.stdout is not None
        for line in child.stdout:
            seen.append(line)
            if " batch 2:" in line:
                break
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    wait_for_locks(config, dataset)
    assert any(" batch 2:" in line for line in seen), (seen, errors.read_text()[-2000:])
    assert child.returncode == -signal.SIGKILL
    assert read_runs(config.runs_path, dataset) == []  # the killed run never finished
    versions = {agg.table: table_version(config.silver_path(agg.table))
                for agg in get_dataset(dataset).aggregates}  # fmt: skip
    assert max(versions.values()) >= 1  # some batches were committed before the kill

    record, _ = silver(spark, config, dataset)

    assert record.status == "success"
    assert record.versions_before == versions
    assert_matches_expected(config, dataset, expected.valid_records(files))
