"""`dag.test()` runs a dataset DAG end to end: spark-submit for bronze, silver and validate.

`runoff_events` (a seed dataset) lands data from `runoff generate`; its silver tables must equal
the independent computation of tests/expected.py exactly. `runoff_orders` is declared by a user
(a spec folder in `RUNOFF_DATASETS`, tests/spark/jobs/test_declared_dataset.py) and lands
hand-written orders, malformed lines included; its bronze, quarantine and silver tables must
equal that module's plain-Python computation exactly. No SparkSession in this process: every
step is a `spark-submit` child, as under a real Airflow worker.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from core.config import RunoffConfig
from jobs.cli.main import main as runoff
from tests.airflow_api import INCREMENTAL_STATES
from tests.spark.jobs.test_declared_dataset import (
    BAD_LINES,
    BAD_REASONS,
    START,
    assert_tables,
    land,
    order_lines,
)
from tests.tables import assert_silver_matches_expected, read_table
from tests.user_specs import write_orders

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def run_dag(dataset: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Build `runoff_<dataset>` from the environment and run it once with `dag.test()`."""
    from airflow.utils.state import TaskInstanceState

    from dags.factory import build_dataset_dag

    # The home reaches the tasks through the Airflow Variable, Spark through the connection.
    monkeypatch.setenv("AIRFLOW_VAR_RUNOFF_HOME", str(home))
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"})
    )
    dag = build_dataset_dag(dataset)
    for task in dag.tasks:
        task.retries = 0  # fail fast: a failure here is a bug, not a flaky cluster
    dag_run = dag.test()

    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states == {k: TaskInstanceState(v) for k, v in INCREMENTAL_STATES.items()}
    assert dag_run.state == "success"


def test_dag_test_runs_runoff_events_end_to_end(
    airflow_db: None, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNOFF_DATASETS", raising=False)
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
    run_dag("events", home, monkeypatch)
    assert_silver_matches_expected(config, "events")
    assert read_table(config.bronze_path("events")).num_rows == 4 * 30


def test_dag_test_runs_a_user_declared_dataset_end_to_end(
    airflow_db: None, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's spec folder: the DAG is built from it and its spark-submits read it.
    specs = tmp_path / "my-datasets"
    write_orders(specs)
    monkeypatch.setenv("RUNOFF_DATASETS", str(specs))

    # Two deliveries: valid orders with a blank line and every kind of malformed line between
    # them, then later orders, one with a field never seen before (rescued).
    first = order_lines(0, 30, START)
    land(home, "part-0001.json", [*first[:15], "", *BAD_LINES, *first[15:]])
    second = order_lines(30, 20, START + timedelta(minutes=7 * 30 - 3))
    second[3] = second[3][:-1] + ', "gift": true}'
    land(home, "part-0002.json", second)

    run_dag("orders", home, monkeypatch)
    # bronze, quarantine and both silver tables, row for row.
    assert_tables(home, first + second, BAD_LINES, BAD_REASONS)
    assert read_table(home / "delta" / "bronze" / "orders").num_rows == 30 + 20
