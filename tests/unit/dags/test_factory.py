"""The DAGs parse, follow the pipeline's policies and render the right spark-submit commands."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from core.config import RunoffConfig
from tests.airflow_env import DAGS_FOLDER
from tests.conftest import REPO_ROOT
from tests.expected import SILVER_TABLES
from tests.seeds import SEED_NAMES
from tests.user_specs import (
    ORDERS_SCHEDULE,
    ORDERS_TABLES,
    write_bad_specs,
    write_orders,
)


def data_intervals(schedule: str | None) -> Any:
    """What the factory makes of a spec's schedule (imported late: Airflow is heavy)."""
    from dags.factory import data_intervals as timetable

    return timetable(schedule)


pytestmark = pytest.mark.airflow

SEED_DAG_IDS = {f"runoff_{name}" for name in SEED_NAMES}
SPARK_TASKS = ("reset", "replay", "rebuild", "bronze", "silver", "backfill", "validate")
SPEC_ERRORS_FILE = str(DAGS_FOLDER / "runoff_spec_errors.py")
HOME_TEMPLATE = "{{ var.value.get('runoff_home', runoff_home_default()) }}"
OUTCOME = (
    "{{ runoff_outcome_path(var.value.get('runoff_home', runoff_home_default()), "
    "dag.dag_id, run_id, task.task_id) }}"
)


def parse_dags(datasets: Path | None = None) -> Any:
    """A DagBag of the repository's dags folder, parsed as a default deployment (no RUNOFF_HOME,
    no schedule override) with `RUNOFF_DATASETS` = `datasets` (unset when None): the DAG files
    read the environment while they are parsed."""
    from airflow.dag_processing.dagbag import DagBag

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("RUNOFF_HOME", raising=False)
        if datasets is None:
            mp.delenv("RUNOFF_DATASETS", raising=False)
        else:
            mp.setenv("RUNOFF_DATASETS", str(datasets))
        # known_pools makes the bag reject tasks assigned to a pool that does not exist.
        return DagBag(dag_folder=str(DAGS_FOLDER), known_pools={"default_pool", "spark"})


@pytest.fixture(scope="module")
def dagbag() -> Any:
    """The seed datasets only."""
    return parse_dags()


@pytest.fixture(scope="module")
def user_specs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[Path, str]]:
    """A RUNOFF_DATASETS folder with the good `orders` spec and two refused specs; returns the
    folder and every refused file's expected problem line (its start)."""
    folder = tmp_path_factory.mktemp("user-datasets")
    write_orders(folder)
    return folder, write_bad_specs(folder)


@pytest.fixture(scope="module")
def user_dagbag(user_specs: tuple[Path, dict[Path, str]]) -> Any:
    """The seed datasets, `orders`, and two refused specs."""
    return parse_dags(user_specs[0])


def test_dagbag_imports_every_dag_without_errors(dagbag: Any) -> None:
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == SEED_DAG_IDS | {"runoff_maintenance"}


def test_dagbag_builds_user_specs_and_reports_refused_ones(
    user_dagbag: Any, user_specs: tuple[Path, dict[Path, str]]
) -> None:
    """A good user spec becomes a DAG; the refused ones are one import error, of
    runoff_spec_errors.py, naming every refused file with its key and problem; every other DAG
    still loads."""
    folder, refused = user_specs
    assert set(user_dagbag.dag_ids) == SEED_DAG_IDS | {"runoff_orders", "runoff_maintenance"}
    assert user_dagbag.dags["runoff_orders"].schedule == data_intervals(ORDERS_SCHEDULE)
    for dag_id in SEED_DAG_IDS:
        assert user_dagbag.dags[dag_id].schedule == data_intervals("@hourly")

    assert list(user_dagbag.import_errors) == [SPEC_ERRORS_FILE]
    message = user_dagbag.import_errors[SPEC_ERRORS_FILE]
    raised = message[message.rindex("ImportError: ") + len("ImportError: ") :].splitlines()
    assert raised[0] == f"{len(refused)} dataset spec(s) refused; their DAGs are not built:"
    problems = [line for line in raised[1:] if line.strip()]
    # One line per refused file (each has exactly one problem), in file order.
    assert len(problems) == len(refused), raised
    for line, (path, start) in zip(problems, sorted(refused.items()), strict=True):
        assert line.startswith(start), (line, start)
        assert path.parent == folder


def test_dagbag_with_good_user_specs_has_no_import_error(tmp_path: Path) -> None:
    write_orders(tmp_path / "datasets")
    bag = parse_dags(tmp_path / "datasets")
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == SEED_DAG_IDS | {"runoff_orders", "runoff_maintenance"}
    assert bag.dags["runoff_orders"].schedule == data_intervals(ORDERS_SCHEDULE)


def test_a_schedule_airflow_cannot_parse_is_reported_as_a_refused_spec(tmp_path: Path) -> None:
    """A spec whose schedule Airflow cannot parse is refused by the catalog: runoff_spec_errors.py
    reports `<file>: schedule: <problem>`, its DAG is not built, and every other DAG loads."""
    folder = tmp_path / "datasets"
    path = write_orders(folder)
    path.write_text(path.read_text().replace('schedule: "@daily"', 'schedule: "every day"', 1))
    assert "every day" in path.read_text()
    bag = parse_dags(folder)
    assert set(bag.dag_ids) == SEED_DAG_IDS | {"runoff_maintenance"}
    assert list(bag.import_errors) == [SPEC_ERRORS_FILE], bag.import_errors
    assert f"\n{path}: schedule: " in bag.import_errors[SPEC_ERRORS_FILE]


def assert_dataset_dag_policies(
    dag: Any, dataset: str, schedule: str, silver_tables: Sequence[str]
) -> None:
    assert dag.schedule == data_intervals(schedule)
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert dag.tags == {"runoff", dataset}
    assert dag.start_date == datetime(2024, 1, 1, tzinfo=UTC)
    assert dag.params["full_refresh"] is False
    assert dag.params["replay_quarantine"] is False
    assert dag.params["rebuild_silver"] == []
    assert dag.params.get_param("rebuild_silver").schema["items"]["enum"] == list(silver_tables)
    for table in (f"bronze_{dataset}", f"quarantine_{dataset}", *silver_tables):
        assert f"`{table}`" in dag.doc_md
    assert "runoff backfill" in dag.doc_md and "full_refresh" in dag.doc_md

    assert set(dag.task_ids) == {"route", *SPARK_TASKS, "publish"}
    for task_id in SPARK_TASKS:
        task = dag.get_task(task_id)
        assert type(task).__name__ == "RunoffSubmitOperator"
        assert "SparkSubmitOperator" in [c.__name__ for c in type(task).__mro__]
        # Every runoff call writes its outcome file; every task notifies its failure.
        assert task.application_args[:4] == ["--home", HOME_TEMPLATE, "--outcome", OUTCOME]
        assert type(task.on_failure_callback[0]).__name__ == "RunoffFailureNotifier"
        assert task._conn_id == "spark_default"
        assert task.pool == "spark"
        assert task.max_active_tis_per_dag == 1
        assert task.application == str(REPO_ROOT / "jobs" / "cli" / "submit.py")
        assert task.retries == (0 if task_id == "validate" else 2)
        assert task.retry_exponential_backoff == 2.0
        assert task.retry_delay == timedelta(minutes=1)
        assert task.max_retry_delay == timedelta(minutes=10)
        assert task.conf["spark.pyspark.python"] == sys.executable
        assert task.env_vars["PYSPARK_PYTHON"] == sys.executable
        assert task.env_vars["PYTHONPATH"].split(":")[0] == str(REPO_ROOT)
        assert task.env_vars["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert dag.get_task("route").pool == "default_pool"
    assert dag.get_task("publish").pool == "default_pool"
    # A free slot goes to the step furthest along its run (the sum of its upstream weights).
    assert {task.weight_rule for task in dag.tasks} == {"upstream"}
    assert type(dag.get_task("publish").on_failure_callback[0]).__name__ == (
        "RunoffFailureNotifier"
    )


@pytest.mark.parametrize("dataset", SEED_NAMES)
def test_dataset_dag_policies(dagbag: Any, dataset: str) -> None:
    dag = dagbag.dags[f"runoff_{dataset}"]
    assert_dataset_dag_policies(dag, dataset, "@hourly", SILVER_TABLES[dataset])
    for task_id in SPARK_TASKS:
        assert "RUNOFF_DATASETS" not in dag.get_task(task_id).env_vars


def test_user_dataset_dag_policies(
    user_dagbag: Any, user_specs: tuple[Path, dict[Path, str]]
) -> None:
    dag = user_dagbag.dags["runoff_orders"]
    assert_dataset_dag_policies(dag, "orders", ORDERS_SCHEDULE, ORDERS_TABLES)
    assert "Web shop orders" in dag.doc_md
    assert f"{user_specs[0] / 'orders.yaml'}" in dag.doc_md
    # The tasks' spark-submit finds the user's specs too.
    for task_id in SPARK_TASKS:
        assert dag.get_task(task_id).env_vars["RUNOFF_DATASETS"] == str(user_specs[0])
    # The seed datasets' tasks get the folder as well: a task loads the whole catalog.
    assert user_dagbag.dags["runoff_events"].get_task("bronze").env_vars["RUNOFF_DATASETS"] == (
        str(user_specs[0])
    )


def test_user_dataset_task_order(user_dagbag: Any) -> None:
    assert_task_order(user_dagbag.dags["runoff_orders"])


@pytest.mark.parametrize("dataset", SEED_NAMES)
def test_task_order(dagbag: Any, dataset: str) -> None:
    assert_task_order(dagbag.dags[f"runoff_{dataset}"])


def assert_task_order(dag: Any) -> None:
    def downstream(task_id: str) -> set[str]:
        return set(dag.get_task(task_id).downstream_task_ids)

    assert downstream("route") == {"reset", "replay", "rebuild", "bronze", "backfill"}
    for first in ("reset", "replay", "rebuild"):
        assert downstream(first) == {"bronze"}
    assert downstream("bronze") == {"silver"}
    assert downstream("silver") == {"validate"}
    assert downstream("backfill") == {"validate"}
    # Asset events only after validate passed: publish, with the default trigger rule.
    assert downstream("validate") == {"publish"}
    assert downstream("publish") == set()
    assert dag.get_task("publish").trigger_rule == "all_success"
    # bronze runs whether or not reset or replay ran; validate after either silver or backfill.
    assert dag.get_task("bronze").trigger_rule == "none_failed_min_one_success"
    assert dag.get_task("validate").trigger_rule == "none_failed_min_one_success"
    assert dag.get_task("silver").trigger_rule == "all_success"


@pytest.mark.parametrize("dataset", SEED_NAMES)
def test_assets_are_the_tables_of_the_runoff_home(dagbag: Any, dataset: str) -> None:
    assert_assets(dagbag.dags[f"runoff_{dataset}"], dataset, SILVER_TABLES[dataset])


def test_user_dataset_assets_are_the_tables_of_the_runoff_home(user_dagbag: Any) -> None:
    assert_assets(user_dagbag.dags["runoff_orders"], "orders", ORDERS_TABLES)


def assert_assets(dag: Any, dataset: str, silver_tables: Sequence[str]) -> None:
    # The bag was parsed with RUNOFF_HOME unset: tables live under <repo>/.runoff.
    config = RunoffConfig.from_sources(home=REPO_ROOT / ".runoff", env={})
    bronze = config.bronze_path(dataset).as_uri()
    quarantine = config.quarantine_path(dataset).as_uri()
    silver = [config.silver_path(t).as_uri() for t in silver_tables]

    def uris(task_id: str, kind: str) -> list[str]:
        return [a.uri for a in getattr(dag.get_task(task_id), kind)]

    # Only publish (after validate) announces tables: no Spark task has outlets.
    for task_id in SPARK_TASKS:
        assert uris(task_id, "outlets") == [], task_id
    assert uris("publish", "outlets") == [bronze, quarantine, *silver]
    assert uris("bronze", "inlets") == [config.landing_dir(dataset).as_uri()]
    assert uris("silver", "inlets") == [bronze]
    assert uris("backfill", "inlets") == [config.landing_dir(dataset).as_uri()]
    assert uris("validate", "inlets") == [bronze, *silver]
    assert [a.name for a in dag.get_task("publish").outlets] == [
        f"bronze_{dataset}",
        f"quarantine_{dataset}",
        *silver_tables,
    ]
    assert bronze == f"file://{REPO_ROOT}/.runoff/delta/bronze/{dataset}"
    assert uris("bronze", "inlets") == [f"file://{REPO_ROOT}/.runoff/landing/{dataset}"]


def test_maintenance_dag(dagbag: Any) -> None:
    assert_maintenance_dag(dagbag.dags["runoff_maintenance"], SEED_NAMES)


def test_maintenance_dag_maintains_user_datasets(user_dagbag: Any) -> None:
    assert_maintenance_dag(user_dagbag.dags["runoff_maintenance"], (*SEED_NAMES, "orders"))


def assert_maintenance_dag(dag: Any, datasets: Sequence[str]) -> None:
    assert dag.schedule == "@daily"
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert dag.tags == {"runoff", "maintenance"}
    assert set(dag.task_ids) == {f"maintain_{name}" for name in datasets}
    for name in datasets:
        task = dag.get_task(f"maintain_{name}")
        assert task.pool == "spark"
        assert task.application_args[:4] == ["--home", HOME_TEMPLATE, "--outcome", OUTCOME]
        assert task.application_args[4:] == ["maintain", name]
        assert f"`bronze_{name}`" in dag.doc_md


def test_schedule_comes_from_the_spec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from dags.factory import build_dataset_dag, load_catalog

    write_orders(tmp_path / "datasets")
    catalog = load_catalog({"RUNOFF_DATASETS": str(tmp_path / "datasets")})
    # No global override: RUNOFF_DAG_SCHEDULE does not change a DAG's schedule.
    monkeypatch.setenv("RUNOFF_DAG_SCHEDULE", "@monthly")
    assert build_dataset_dag("orders", catalog=catalog).schedule == data_intervals(ORDERS_SCHEDULE)
    assert build_dataset_dag("events", catalog=catalog).schedule == data_intervals("@hourly")
    assert build_dataset_dag("orders", "@weekly", catalog=catalog).schedule == data_intervals(
        "@weekly"
    )


def test_cron_schedules_are_contiguous_data_intervals() -> None:
    """An hourly run covers the hour before its tick, not an empty point in time: what its
    backfill re-runs."""
    from airflow.sdk import CronDataIntervalTimetable

    from dags.factory import data_intervals

    assert data_intervals("@hourly") == CronDataIntervalTimetable("@hourly", timezone="UTC")
    assert data_intervals("*/15 * * * *") == CronDataIntervalTimetable(
        "*/15 * * * *", timezone="UTC"
    )
    assert data_intervals(None) is None
    assert data_intervals("@once") == "@once"


def test_spec_errors_names_every_refused_file(tmp_path: Path) -> None:
    from dags.factory import build_dataset_dags, load_catalog, spec_errors

    folder = tmp_path / "datasets"
    write_orders(folder)
    catalog = load_catalog({"RUNOFF_DATASETS": str(folder)})
    assert spec_errors(catalog) is None
    refused = write_bad_specs(folder)
    catalog = load_catalog({"RUNOFF_DATASETS": str(folder)})
    lines = (spec_errors(catalog) or "").splitlines()
    assert lines[0] == f"{len(refused)} dataset spec(s) refused; their DAGs are not built:"
    assert len(lines) == 1 + len(refused)
    for line, start in zip(lines[1:], [refused[p] for p in sorted(refused)], strict=True):
        assert line.startswith(start), (line, start)
    assert set(build_dataset_dags(catalog)) == SEED_DAG_IDS | {"runoff_orders"}


def test_spec_errors_names_a_spec_whose_sql_failed_its_last_check(tmp_path: Path) -> None:
    """A SQL check's finding (`core.spec_checks`, written by `runoff check` and every Spark
    command) is an import error while the spec file is the one checked; the DAG is still built.
    An edited file, or a check that passed, shows nothing."""
    from core.spec_checks import record_check
    from dags.factory import build_dataset_dags, load_catalog, spec_errors

    folder, home = tmp_path / "datasets", tmp_path / "home"
    home.mkdir()
    path = write_orders(folder)
    env = {"RUNOFF_DATASETS": str(folder), "RUNOFF_HOME": str(home)}
    catalog = load_catalog(env)
    problem = f"{path}: silver[0].measures.revenue: unknown column 'amout' (columns: ...)"
    record_check(home, catalog.spec("orders"), [problem])
    assert (spec_errors(load_catalog(env)) or "").splitlines() == [
        "1 dataset spec(s) whose SQL did not resolve when last checked (`runoff check`, or a "
        "run); their runs fail until the file is fixed:",
        problem,
    ]
    assert "runoff_orders" in build_dataset_dags(load_catalog(env))
    path.write_text(path.read_text() + "# edited\n")
    assert spec_errors(load_catalog(env)) is None
    record_check(home, load_catalog(env).spec("orders"), [])
    assert spec_errors(load_catalog(env)) is None
    # No home: nothing is written (a check never creates one).
    record_check(tmp_path / "none", catalog.spec("orders"), [problem])
    assert not (tmp_path / "none").exists()


# -- the backfill branch --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("run_type", "full_refresh", "replay", "rebuild", "expected"),
    [
        ("backfill", False, False, [], ["backfill"]),
        ("backfill", True, True, ["events_action_hourly"], ["backfill"]),
        ("scheduled", False, False, [], ["bronze"]),
        ("manual", False, False, [], ["bronze"]),
        ("manual", True, False, [], ["reset"]),
        ("asset_triggered", True, False, [], ["reset"]),
        ("manual", False, True, [], ["replay"]),
        ("manual", False, False, ["events_action_hourly"], ["rebuild"]),
        ("manual", False, True, ["events_action_hourly"], ["replay", "rebuild"]),
        # a full refresh re-reads every line and rebuilds every table
        ("manual", True, True, ["events_action_hourly"], ["reset"]),
    ],
)
def test_route_task_chooses_backfill_for_backfill_runs(
    dagbag: Any,
    run_type: str,
    full_refresh: bool,
    replay: bool,
    rebuild: list[str],
    expected: list[str],
) -> None:
    from airflow.sdk.api.datamodels._generated import DagRunType

    route = dagbag.dags["runoff_events"].get_task("route")
    chosen = route.python_callable(
        dag_run=SimpleNamespace(run_type=DagRunType(run_type)),
        params={
            "full_refresh": full_refresh,
            "replay_quarantine": replay,
            "rebuild_silver": rebuild,
        },
    )
    assert chosen == expected


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        # an hourly run's bounds pass as they are: the backfill re-runs exactly its hour
        (pendulum.datetime(2024, 1, 2, 5, tz="UTC"), "2024-01-02T05:00:00+00:00"),
        (datetime(2024, 1, 3, tzinfo=UTC), "2024-01-03T00:00:00+00:00"),
        # in UTC: 2024-01-03T01:00+02:00 is 2024-01-02T23:00Z
        (pendulum.datetime(2024, 1, 3, 1, tz="Etc/GMT-2"), "2024-01-02T23:00:00+00:00"),
        (datetime(2024, 1, 3, 1, tzinfo=timezone(timedelta(hours=2))), "2024-01-02T23:00:00+00:00"),
        # sub-second bounds are kept
        (datetime(2024, 1, 2, 5, 0, 0, 250, tzinfo=UTC), "2024-01-02T05:00:00.000250+00:00"),
    ],
)
def test_backfill_time_is_the_interval_bound_in_utc(moment: datetime, text: str) -> None:
    from dags.factory import backfill_time
    from jobs.cli.main import iso_datetime

    assert backfill_time(moment) == text
    assert iso_datetime(text) == moment  # what `runoff backfill --start/--end` reads back


# -- rendered spark-submit commands ----------------------------------------------------------
RUN_ID = "manual__2024-01-02T05:00:00+00:00"


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
        "params": {
            "full_refresh": False,
            "replay_quarantine": False,
            "rebuild_silver": ["events_action_hourly", "events_action_sliding"],
        },
        "dag": dag,
        "task": task,
        "run_id": RUN_ID,
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
        ("replay", ["quarantine", "replay", "events"]),
        ("rebuild", ["rebuild", "events_action_hourly,events_action_sliding"]),
        (
            "backfill",
            [
                "backfill",
                "events",
                "--start",
                "2024-01-02T05:00:00+00:00",
                "--end",
                "2024-01-02T06:00:00+00:00",
            ],
        ),
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
    log4j = (REPO_ROOT / "jobs" / "log4j2.properties").as_uri()
    java_options = f"-Duser.timezone=UTC -Dlog4j2.configurationFile={log4j}"
    archive = REPO_ROOT / "jvm" / "jars" / "driver.jsa"
    # A task's driver is a command's: the JIT's quick tier only.
    driver_options = (
        java_options
        + " -XX:TieredStopAtLevel=1"
        + (
            f" -XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
            if archive.is_file()
            else ""
        )
    )
    assert command == [
        "spark-submit",
        "--master",
        "local[*]",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
        "--conf",
        f"spark.driver.extraJavaOptions={driver_options}",
        "--conf",
        f"spark.executor.extraJavaOptions={java_options}",
        "--jars",
        ",".join(str(jar) for jar in sorted((REPO_ROOT / "jvm" / "jars").glob("*.jar"))),
        "--name",
        f"runoff-{'-'.join(args[:2]) if task_id == 'replay' else task_id}-events",
        str(REPO_ROOT / "jobs" / "cli" / "submit.py"),
        "--home",
        str(home),
        "--outcome",
        f"{home}/airflow/outcomes/runoff_events/{RUN_ID}/{task_id}.json",
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
    outcome = f"airflow/outcomes/runoff_events/{RUN_ID}/bronze.json"
    home = tmp_path / "env-home"
    assert task.application_args[:4] == ["--home", str(home), "--outcome", f"{home}/{outcome}"]

    monkeypatch.delenv("RUNOFF_HOME")
    task = _render(build_dataset_dag("events"), "bronze", start, start)
    home = REPO_ROOT / ".runoff"
    assert task.application_args[:4] == ["--home", str(home), "--outcome", f"{home}/{outcome}"]
