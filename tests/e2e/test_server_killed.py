"""`runoff serve` SIGKILLed (its whole process group: driver, JVM, Python workers) while it runs
commands of two datasets: each client says the server went away and exits 1, and each dataset's
next run (here, in this process on the shared SparkSession) resumes where the dataset's
checkpoint is, so that every landed row is in the tables exactly once.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from delta_tables.ledger import read_runs
from tests.e2e.test_faults import cli
from tests.e2e.test_server import RUN_TIMEOUT, serving
from tests.spark.jobs.bronze.test_job import assert_tables_hold_exactly, land
from tests.tables import assert_silver_matches_expected

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.spark]


def test_a_server_killed_with_commands_in_flight_leaves_each_dataset_to_resume_once(
    spark: Any, tmp_path: Path
) -> None:
    names = ("first", "second")
    configs = {n: RunoffConfig.from_sources(home=tmp_path / n, env={}) for n in names}
    landed = {n: land(configs[n], "events", files=6, seed=40 + i) for i, n in enumerate(names)}
    (tmp_path / "server").mkdir()
    with serving(tmp_path / "server") as server:
        clients = {}
        for name in names:
            client = server.start(
                configs[name].home, "bronze", "events", "--max-files-per-trigger", "1"
            )
            assert client.stdout is not None
            assert "bronze events batch 0" in client.stdout.readline()
            clients[name] = client
        assert all(c.poll() is None for c in clients.values()), "a command ended: none in flight"
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=60)
        for client in clients.values():
            _, err = client.communicate(timeout=RUN_TIMEOUT)
            assert client.returncode == 1, err
            assert err.splitlines()[-1] == (
                f"runoff: error: the runoff server at {server.socket} closed the connection "
                "before the command ended (its log says why): run the command again; what it "
                "committed is kept, and it resumes from its checkpoint"
            ), err
    for name in names:
        config = configs[name]
        assert cli(config.home, "bronze", "events") == 0
        assert cli(config.home, "silver", "events") == 0
        assert_tables_hold_exactly(config, "events", landed[name])
        assert_silver_matches_expected(config, "events", files=landed[name])
        assert [(r["layer"], r["status"]) for r in read_runs(config.runs_path)] == [
            ("bronze", "success"),
            ("silver", "success"),
        ]
