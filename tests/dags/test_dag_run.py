"""`dag.test()` runs `runoff_events` end to end: spark-submit for bronze, silver and validate.

Landing data comes from `runoff generate`; the silver tables must equal the independent
computation of tests/expected.py exactly. No SparkSession in this process: every step is a
`spark-submit` child, as under a real Airflow worker.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config import RunoffConfig
from jobs.cli import main as runoff
from tests.dags.tables import assert_silver_matches_expected, read_table

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_dag_test_runs_runoff_events_end_to_end(
    airflow_db: None, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.utils.state import TaskInstanceState

    from dags.factory import build_dataset_dag

    config = RunoffConfig.from_sources(home=home, env={})
    assert (
        runoff(
            [
                "--home",
                str(home),
                "generate",
                "events",
                "--files",
                "4",
                "--rows-per-file",
                "30",
                "--start",
                "2024-01-01T22:00:00Z",
                "--malformed-rate",
                "0.05",
                "--seed",
                "3",
            ]
        )
        == 0
    )
    # The home reaches the tasks through the Airflow Variable, Spark through the connection.
    monkeypatch.setenv("AIRFLOW_VAR_RUNOFF_HOME", str(home))
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"})
    )

    dag = build_dataset_dag("events")
    for task in dag.tasks:
        task.retries = 0  # fail fast: a failure here is a bug, not a flaky cluster
    dag_run = dag.test()

    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states == {
        "route": TaskInstanceState.SUCCESS,
        "reset": TaskInstanceState.SKIPPED,
        "bronze": TaskInstanceState.SUCCESS,
        "silver": TaskInstanceState.SUCCESS,
        "backfill": TaskInstanceState.SKIPPED,
        "validate": TaskInstanceState.SUCCESS,
    }
    assert dag_run.state == "success"
    assert_silver_matches_expected(config, "events")
    assert read_table(config.bronze_path("events")).num_rows == 4 * 30
