"""The session's master: `RUNOFF_SPARK_MASTER`, except under spark-submit, whose `--master` stands.

Airflow's tasks are spark-submits whose `--master` comes from the `spark_default` connection;
changing the connection alone must move them (README, Airflow). `jobs.spark.master_conf` decides,
and a real spark-submit shows the session keeps spark-submit's master.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import RunoffConfig
from jobs.spark import delta_jars, master_conf
from tests.conftest import REPO_ROOT


def test_the_session_runs_on_runoff_spark_master(tmp_path: Path) -> None:
    config = RunoffConfig.from_sources(home=tmp_path, env={"RUNOFF_SPARK_MASTER": "local[3]"})
    assert master_conf(config, env={}) == {"spark.master": "local[3]"}
    default = RunoffConfig.from_sources(home=tmp_path, env={})
    assert master_conf(default, env={}) == {"spark.master": "local[*]"}


def test_a_driver_spark_submit_started_keeps_its_master(tmp_path: Path) -> None:
    config = RunoffConfig.from_sources(home=tmp_path, env={"RUNOFF_SPARK_MASTER": "local[3]"})
    assert master_conf(config, env={"PYSPARK_GATEWAY_PORT": "40000"}) == {}


@pytest.mark.slow
def test_spark_submits_master_is_the_sessions(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from jobs.spark import get_spark\n"
        "spark = get_spark(app_name='probe')\n"
        "print('master', spark.sparkContext.master, flush=True)\n"
        "spark.stop()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNOFF_", "PYSPARK_"))}
    env.update({"PYTHONPATH": str(REPO_ROOT), "RUNOFF_HOME": str(tmp_path / "home")})
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            *("--master", "local[1]", "--jars", ",".join(delta_jars())),
            str(probe),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "master local[1]" in result.stdout.splitlines(), result.stdout
