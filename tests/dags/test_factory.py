"""The DAGs parse, follow the pipeline's policies and render the right spark-submit commands."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from core.config import RunoffConfig
from jobs.catalog import CATALOG, DATASET_NAMES
from tests.conftest import REPO_ROOT
from tests.dags.conftest import DAGS_FOLDER

pytestmark = pytest.mark.airflow

DATASET_DAG_IDS = {f"runoff_{name}" for name in DATASET_NAMES}
SPARK_TASKS = ("reset", "bronze", "silver", "backfill", "validate")


@pytest.fixture(scope="module")
def dagbag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    # Parse as a default deployment: no RUNOFF_HOME, no schedule override.
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("RUNOFF_HOME", raising=False)
        mp.delenv("RUNOFF_DAG_SCHEDULE", raising=False)
        # known_pools makes the bag reject tasks assigned to a pool that does not exist.
        return DagBag(dag_folder=str(DAGS_FOLDER), known_pools={"default_pool", "spark"})


@pytest.fixture
def spark_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[*]"})
    )


def test_dagbag_imports_every_dag_without_errors(dagbag: Any) -> None:
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == DATASET_DAG_IDS | {"runoff_maintenance"}


def test_dag_files_import_neither_spark_nor_great_expectations() -> None:
    code = (
        "import sys, dags.runoff_events, dags.runoff_sensors, dags.runoff_activity, "
        "dags.runoff_lines, dags.maintenance; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'great_expectations',"
        " 'delta_tables', 'deltalake', 'py4j'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_dataset_dag_policies(dagbag: Any, dataset: str) -> None:
    dag = dagbag.dags[f"runoff_{dataset}"]
    assert dag.schedule == "@hourly"
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert dag.tags == {"runoff", dataset}
    assert dag.start_date == datetime(2024, 1, 1, tzinfo=UTC)
    assert dag.params["full_refresh"] is False
    info = CATALOG[dataset]
    for table in (info.bronze_table, info.quarantine_table, *info.silver_tables):
        assert f"`{table}`" in dag.doc_md
    assert "runoff backfill" in dag.doc_md and "full_refresh" in dag.doc_md

    assert set(dag.task_ids) == {"route", *SPARK_TASKS}
    for task_id in SPARK_TASKS:
        task = dag.get_task(task_id)
        assert type(task).__name__ == "SparkSubmitOperator"
        assert task._conn_id == "spark_default"
        assert task.pool == "spark"
        assert task.max_active_tis_per_dag == 1
        assert task.application == str(REPO_ROOT / "jobs" / "submit.py")
        assert task.retries == (0 if task_id == "validate" else 2)
        assert task.retry_exponential_backoff == 2.0
        assert task.retry_delay == timedelta(minutes=1)
        assert task.max_retry_delay == timedelta(minutes=10)
        assert task.conf["spark.pyspark.python"] == sys.executable
        assert task.env_vars["PYSPARK_PYTHON"] == sys.executable
        assert task.env_vars["PYTHONPATH"].split(":")[0] == str(REPO_ROOT)
        assert task.env_vars["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert dag.get_task("route").pool == "default_pool"


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_task_order(dagbag: Any, dataset: str) -> None:
    dag = dagbag.dags[f"runoff_{dataset}"]

    def downstream(task_id: str) -> set[str]:
        return set(dag.get_task(task_id).downstream_task_ids)

    assert downstream("route") == {"reset", "bronze", "backfill"}
    assert downstream("reset") == {"bronze"}
    assert downstream("bronze") == {"silver"}
    assert downstream("silver") == {"validate"}
    assert downstream("backfill") == {"validate"}
    assert downstream("validate") == set()
    # bronze runs whether or not reset ran; validate after either silver or backfill.
    assert dag.get_task("bronze").trigger_rule == "none_failed_min_one_success"
    assert dag.get_task("validate").trigger_rule == "none_failed_min_one_success"
    assert dag.get_task("silver").trigger_rule == "all_success"


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_assets_are_the_tables_of_the_runoff_home(dagbag: Any, dataset: str) -> None:
    dag = dagbag.dags[f"runoff_{dataset}"]
    # The bag was parsed with RUNOFF_HOME unset: tables live under <repo>/.runoff.
    config = RunoffConfig.from_sources(home=REPO_ROOT / ".runoff", env={})
    info = CATALOG[dataset]
    bronze = config.bronze_path(dataset).as_uri()
    quarantine = config.quarantine_path(dataset).as_uri()
    silver = [config.silver_path(t).as_uri() for t in info.silver_tables]

    def uris(task_id: str, kind: str) -> list[str]:
        return [a.uri for a in getattr(dag.get_task(task_id), kind)]

    assert uris("bronze", "outlets") == [bronze, quarantine]
    assert uris("bronze", "inlets") == [config.landing_dir(dataset).as_uri()]
    assert uris("silver", "inlets") == [bronze]
    assert uris("silver", "outlets") == silver
    assert uris("backfill", "outlets") == [bronze, *silver]
    assert uris("validate", "inlets") == [bronze, *silver]
    assert [a.name for a in dag.get_task("silver").outlets] == list(info.silver_tables)
    assert bronze == f"file://{REPO_ROOT}/.runoff/delta/bronze/{dataset}"


def test_maintenance_dag(dagbag: Any) -> None:
    dag = dagbag.dags["runoff_maintenance"]
    assert dag.schedule == "@daily"
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert dag.tags == {"runoff", "maintenance"}
    assert set(dag.task_ids) == {f"maintain_{name}" for name in DATASET_NAMES}
    for name in DATASET_NAMES:
        task = dag.get_task(f"maintain_{name}")
        assert task.pool == "spark"
        assert task.application_args[2:] == ["maintain", name]
        assert f"`{CATALOG[name].bronze_table}`" in dag.doc_md


def test_schedule_follows_runoff_dag_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    from dags.factory import build_dataset_dag

    monkeypatch.setenv("RUNOFF_DAG_SCHEDULE", "@daily")
    assert build_dataset_dag("events").schedule == "@daily"


# -- the backfill branch --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("run_type", "full_refresh", "expected"),
    [
        ("backfill", False, "backfill"),
        ("backfill", True, "backfill"),
        ("scheduled", False, "bronze"),
        ("manual", False, "bronze"),
        ("manual", True, "reset"),
        ("asset_triggered", True, "reset"),
    ],
)
def test_route_task_chooses_backfill_for_backfill_runs(
    dagbag: Any, run_type: str, full_refresh: bool, expected: str
) -> None:
    from airflow.sdk.api.datamodels._generated import DagRunType

    route = dagbag.dags["runoff_events"].get_task("route")
    chosen = route.python_callable(
        dag_run=SimpleNamespace(run_type=DagRunType(run_type)),
        params={"full_refresh": full_refresh},
    )
    assert chosen == expected


@pytest.mark.parametrize(
    ("start", "end", "days"),
    [
        # an hourly run widens to the day that contains it
        ("2024-01-02T05:00:00+00:00", "2024-01-02T06:00:00+00:00", ("2024-01-02", "2024-01-03")),
        # the last hour of a day still belongs to that day (the end is exclusive)
        ("2024-01-02T23:00:00+00:00", "2024-01-03T00:00:00+00:00", ("2024-01-02", "2024-01-03")),
        # a daily interval maps to itself, two days to two days
        ("2024-01-02T00:00:00+00:00", "2024-01-03T00:00:00+00:00", ("2024-01-02", "2024-01-03")),
        ("2024-01-02T00:00:00+00:00", "2024-01-04T00:00:00+00:00", ("2024-01-02", "2024-01-04")),
        # an interval crossing midnight covers both days
        ("2024-01-02T23:30:00+00:00", "2024-01-03T00:30:00+00:00", ("2024-01-02", "2024-01-04")),
        # days are UTC days: 2024-01-03T01:00+02:00 is 2024-01-02T23:00Z
        ("2024-01-03T01:00:00+02:00", "2024-01-03T02:00:00+02:00", ("2024-01-02", "2024-01-03")),
        # an empty interval still re-runs its day
        ("2024-01-02T05:00:00+00:00", "2024-01-02T05:00:00+00:00", ("2024-01-02", "2024-01-03")),
    ],
)
def test_backfill_days(start: str, end: str, days: tuple[str, str]) -> None:
    from dags.factory import backfill_days

    first, last = backfill_days(datetime.fromisoformat(start), datetime.fromisoformat(end))
    assert (first, last) == (date.fromisoformat(days[0]), date.fromisoformat(days[1]))


# -- rendered spark-submit commands ----------------------------------------------------------
def _render(dag: Any, task_id: str, start: datetime, end: datetime) -> Any:
    from airflow.sdk.execution_time.context import VariableAccessor

    task = dag.get_task(task_id)
    context = {
        "var": {
            "value": VariableAccessor(deserialize_json=False),
            "json": VariableAccessor(deserialize_json=True),
        },
        "data_interval_start": start,
        "data_interval_end": end,
        "params": {"full_refresh": False},
    }
    task.render_template_fields(context, jinja_env=dag.get_template_env())
    return task


@pytest.mark.parametrize(
    ("task_id", "args"),
    [
        ("bronze", ["bronze", "events"]),
        ("silver", ["silver", "events"]),
        ("validate", ["validate", "events"]),
        ("reset", ["reset", "events", "--layer", "all", "--yes"]),
        ("backfill", ["backfill", "events", "--start", "2024-01-02", "--end", "2024-01-03"]),
    ],
)
def test_rendered_spark_submit_command(
    monkeypatch: pytest.MonkeyPatch,
    spark_connection: None,
    tmp_path: Path,
    task_id: str,
    args: list[str],
) -> None:
    from dags.factory import build_dataset_dag

    home = tmp_path / "variable-home"
    monkeypatch.setenv("AIRFLOW_VAR_RUNOFF_HOME", str(home))
    dag = build_dataset_dag("events")
    task = _render(
        dag,
        task_id,
        pendulum.datetime(2024, 1, 2, 5, tz="UTC"),
        pendulum.datetime(2024, 1, 2, 6, tz="UTC"),
    )
    command = task._get_hook()._build_spark_submit_command(task.application)
    assert command == [
        "spark-submit",
        "--master",
        "local[*]",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
        "--jars",
        ",".join(str(jar) for jar in sorted((REPO_ROOT / "jvm" / "jars").glob("*.jar"))),
        "--name",
        f"runoff-{task_id}-events",
        str(REPO_ROOT / "jobs" / "submit.py"),
        "--home",
        str(home),
        *args,
    ]


def test_home_falls_back_to_runoff_home_then_repo(
    monkeypatch: pytest.MonkeyPatch, spark_connection: None, tmp_path: Path
) -> None:
    from dags.factory import build_dataset_dag

    monkeypatch.delenv("AIRFLOW_VAR_RUNOFF_HOME", raising=False)
    start = pendulum.datetime(2024, 1, 2, tz="UTC")
    monkeypatch.setenv("RUNOFF_HOME", str(tmp_path / "env-home"))
    task = _render(build_dataset_dag("events"), "bronze", start, start)
    assert task.application_args[:2] == ["--home", str(tmp_path / "env-home")]

    monkeypatch.delenv("RUNOFF_HOME")
    task = _render(build_dataset_dag("events"), "bronze", start, start)
    assert task.application_args[:2] == ["--home", str(REPO_ROOT / ".runoff")]


@pytest.mark.slow
def test_a_failing_command_fails_its_task(spark_connection: None, tmp_path: Path) -> None:
    """spark-submit exits with the CLI's code (jobs/submit.py), so the task fails with its error."""
    from airflow.providers.common.compat.sdk import AirflowException

    from dags.factory import build_dataset_dag

    task = build_dataset_dag("events").get_task("validate")
    task.application_args = ["--home", str(tmp_path), "validate", "no_such_dataset"]
    with pytest.raises(AirflowException, match=r"(?s)Error code is: 2\..*invalid choice"):
        task.execute(context={})
