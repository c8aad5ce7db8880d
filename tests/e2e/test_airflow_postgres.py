"""Airflow as docker/compose.yaml deploys it, as processes on loopback: scheduled, manual, backfill.

The test starts its own PostgreSQL (tests/postgres_server.py: Debian's binaries, a throw-away
cluster on a free loopback port, a generated password), then runs compose's commands
(tests/airflow_deployment.py, which tests/unit/docker/test_compose_airflow.py holds compose to):
the runoff server (`runoff serve --listen`, on 127.0.0.1 at a free port, with a generated secret),
`airflow db migrate` and the `spark` pool, then api-server, scheduler (LocalExecutor),
dag-processor and triggerer, each its own process with the deployment's settings in its
environment: the metadata database on PostgreSQL through psycopg 3 (sync and async), a JWT secret
and Fernet key generated for the test, the api-server on 127.0.0.1 at a free port. Tasks run as
compose runs them: each Spark step a client of the runoff server over TCP (`local[2]` here,
compose's Spark master there), which every task log says; a client with another secret is
refused and changes nothing. (Tasks as spark-submits, compose's fallback, are
tests/e2e/dags/test_dag_run.py's and tests/e2e/test_spark_cluster.py's.)

In that Airflow, with `runoff_events` (hourly, from its spec):
- unpausing it creates one scheduled run, for the latest complete hour (`catchup=False`), which
  ingests the two landed files; another one per hour tick while the test runs, all successful;
- a run triggered through the REST API v2 (token from POST /auth/token) ingests a third file;
- after hour 23's file was corrected, `airflow backfill create` of that hour makes one run that
  re-runs exactly its data interval (`runoff backfill events --start --end`, bronze and silver
  skipped): it commits once to bronze and to each silver table, quarantine unchanged.
After each, bronze, quarantine and silver equal tests/expected.py's computation over every file
delivered (kept aside: bronze archives ingested files), row for row. Airflow's own record of the
runs is read from PostgreSQL. Every process is stopped by its process group in a `finally`, the
PostgreSQL server by its pid, also when the test fails. (That a backfill leaves the live
checkpoints alone and commits nothing when run again is tests/spark/jobs/backfill/test_job.py's.)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from core.config import RunoffConfig
from dags import standalone
from delta_tables.writes import table_version
from tests import expected
from tests.airflow_api import (
    DAG_ID,
    INCREMENTAL_STATES,
    RUN_TIMEOUT,
    Airflow,
    backfill,
    clean_environment,
    kill_leftovers,
    stop_group,
    stop_groups,
    wait_for_dags,
)
from tests.airflow_deployment import (
    COMPONENTS,
    INIT_COMMANDS,
    POSTGRES_DB,
    POSTGRES_READY,
    POSTGRES_USER,
    Site,
    airflow_settings,
    component_command,
    new_secrets,
    server_command,
    server_settings,
)
from tests.conftest import REPO_ROOT
from tests.postgres_server import running_postgres
from tests.tables import assert_silver_matches_expected, read_table

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.slow]

START = datetime(2024, 1, 1, 21, tzinfo=UTC)  # the first landed hour
HOUR = timedelta(hours=1)
STARTUP_TIMEOUT = 300.0
BACKFILLED = {**INCREMENTAL_STATES, "bronze": "skipped", "silver": "skipped", "backfill": "success"}
# Bronze columns from the landing record (ingestion metadata and the file's path aside).
BRONZE_COLUMNS = ("time", "action", "event_time", "event_date", "_rescued_data")


@pytest.fixture(scope="module")
def deployed() -> Iterator[Airflow]:
    """Compose's Airflow on a new PostgreSQL, as processes on loopback."""
    # Not pytest's tmp_path: concurrent pytest runs rotate those away, with the logs of a failure.
    root = Path(tempfile.mkdtemp(prefix="runoff-airflow-postgres-"))
    logs = root / "logs"
    logs.mkdir()
    passed = False
    try:
        with running_postgres(POSTGRES_USER, POSTGRES_DB) as postgres:
            site = _site(postgres.address, postgres.password)
            env = _environment(root, site)
            # Compose's healthcheck, then airflow-init's commands, then the components.
            ready = subprocess.run(
                POSTGRES_READY,
                env={**postgres.tool_env(), "PATH": f"{postgres.bin_dir}:{env['PATH']}"},
                capture_output=True,
                text=True,
                check=False,
            )
            assert ready.returncode == 0, ready.stdout + ready.stderr
            for command in INIT_COMMANDS:
                _run_init(command, env, logs / "init.log", cwd=root)
            processes: dict[str, subprocess.Popen[bytes]] = {}
            try:
                processes["runoff-server"] = _start_server(site, env, root, logs)
                for component in COMPONENTS:
                    with (logs / f"{component}.log").open("wb") as output:
                        processes[component] = subprocess.Popen(
                            component_command(component),
                            env=env,
                            cwd=root,
                            stdout=output,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        )
                password = _wait_until_serving(processes, env, logs)
                url = env["AIRFLOW__API__BASE_URL"]
                af = Airflow(
                    url=url,
                    env=env,
                    token=standalone.api_token(url, password),
                    log=logs,
                    shell_env=env,  # `docker compose exec airflow-scheduler airflow ...`
                )
                yield af
                passed = af.passed
            finally:
                stop_groups(processes.values())
                kill_leftovers(Path(env["AIRFLOW_HOME"]))
    finally:
        if passed:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"Airflow home, logs and tables kept in {root}")


def _site(postgres: str, password: str) -> Site:
    """This test's site: the database it started, the api-server and the log servers on free
    loopback ports, new secrets, this repository's DAGs, the runoff server on a free loopback
    port with Spark in its driver (`local[2]`)."""
    port = standalone.free_port()
    server = f"127.0.0.1:{standalone.free_port()}"
    url = f"http://127.0.0.1:{port}"
    return Site(
        postgres=postgres,
        postgres_password=password,
        **new_secrets(),
        api_host="127.0.0.1",
        api_port=port,
        base_url=url,
        execution_api_url=f"{url}/execution/",
        dags_folder=str(REPO_ROOT / "dags"),
        spark_connection=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        server_listen=server,
        server_address=server,
        spark_master="local[2]",
        worker_log_port=standalone.free_port(),
        trigger_log_port=standalone.free_port(),
    )


def _environment(root: Path, site: Site) -> dict[str, str]:
    """The environment of every Airflow process: the deployment's settings for `site`, the
    runoff home, AIRFLOW_HOME, and the venv's `bin` (airflow, spark-submit) first on PATH as in
    the image; nothing of this process's own Airflow or runoff settings."""
    env = clean_environment()
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env["AIRFLOW_HOME"] = str(root / "airflow")
    env["RUNOFF_HOME"] = str(root / "home")
    env["RUNOFF_SPARK_MASTER"] = site.spark_master
    env.update(airflow_settings(site))
    return env


def _start_server(
    site: Site, env: dict[str, str], cwd: Path, logs: Path
) -> subprocess.Popen[bytes]:
    """Compose's `runoff-server`: its command, the runoff settings every service gets and its
    own (no Airflow setting); returned once Spark is up and it serves."""
    runoff_env = {k: v for k, v in env.items() if not k.startswith(("AIRFLOW", "RUNOFF_SERVER"))}
    log = logs / "runoff-server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            server_command(site),
            env={**runoff_env, **server_settings(site)},
            cwd=cwd,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while "runoff: serving on" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_group(process)
            raise AssertionError("runoff serve did not start:\n" + log.read_text()[-3000:])
        time.sleep(0.5)
    return process


def _run_init(command: tuple[str, ...], env: dict[str, str], log: Path, cwd: Path) -> None:
    result = subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )
    with log.open("a") as output:
        output.write(f"$ {' '.join(command)}\n{result.stdout}{result.stderr}\n")
    assert result.returncode == 0, f"{' '.join(command)}: {result.stderr[-3000:]}"


def _wait_until_serving(
    processes: dict[str, subprocess.Popen[bytes]], env: dict[str, str], logs: Path
) -> str:
    """The admin password, once the api-server answers and has generated it; every component
    must still be running."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    airflow_home = Path(env["AIRFLOW_HOME"])
    while time.monotonic() < deadline:
        for component, process in processes.items():
            if process.poll() is not None:
                tail = (logs / f"{component}.log").read_text(errors="replace")[-3000:]
                raise AssertionError(f"airflow {component} exited ({process.returncode}):\n{tail}")
        password = standalone.admin_password(airflow_home)
        if password is not None and standalone.api_ready(env["AIRFLOW__API__BASE_URL"]):
            return password
        time.sleep(1)
    tail = (logs / "api-server.log").read_text(errors="replace")[-3000:]
    raise AssertionError(f"the api-server did not serve within {STARTUP_TIMEOUT:.0f} s:\n{tail}")


def _generate(home: Path, *args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "--home", str(home), "generate", "events", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def _deliver(landing: Path, delivered: Path) -> None:
    """Keep a copy of every landing file: bronze moves ingested files to its archive, the
    expected tables are computed from everything ever delivered."""
    for path in expected.landing_files(landing):
        copy = delivered / path.relative_to(landing)
        if not copy.exists():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)


def assert_tables_as_expected(config: RunoffConfig, delivered: Path) -> None:
    """Bronze (its record columns), quarantine (empty: nothing malformed was delivered) and
    every silver table equal tests/expected.py over the delivered files, row for row."""
    from delta_tables.catalog import Catalog

    files = expected.read_landing("events", delivered)
    tables = Catalog.load(config).tables("events")
    bronze = expected.naive_utc(
        {c: row[c] for c in BRONZE_COLUMNS}
        for row in read_table(Path(str(tables.bronze.path))).to_pylist()
    )
    want = expected.naive_utc(
        {c: record[c] for c in BRONZE_COLUMNS} for record in expected.valid_records(files)
    )
    assert len(bronze) == len(want) == expected.counts(files)[0]
    assert sorted(bronze, key=repr) == sorted(want, key=repr)
    assert read_table(Path(str(tables.quarantine.path))).num_rows == 0
    assert_silver_matches_expected(config, "events", landing=delivered)


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _interval(run: dict[str, Any]) -> tuple[datetime, datetime]:
    return (
        datetime.fromisoformat(run["data_interval_start"]),
        datetime.fromisoformat(run["data_interval_end"]),
    )


def _wait_for_scheduled_run(af: Airflow, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = af.runs("scheduled")
        if runs:
            return min(runs, key=lambda run: run["data_interval_end"])
        time.sleep(2)
    raise AssertionError(f"no scheduled run of {DAG_ID} within {timeout:.0f} s of unpausing it")


def _backfill_summary(af: Airflow, run_id: str) -> str:
    """The `runoff backfill` lines of the run's backfill task (its last try's log)."""
    quoted = urllib.parse.quote(run_id, safe="")
    ti = af.api("GET", f"/dags/{DAG_ID}/dagRuns/{quoted}/taskInstances/backfill")
    log = af.task_log(run_id, "backfill", try_number=ti["try_number"])
    return "\n".join(line for line in log.splitlines() if line.startswith("backfill "))


def assert_served(af: Airflow, run_id: str, tasks: tuple[str, ...]) -> None:
    """Each of the run's `tasks` ran its step in the runoff server (`dags.hooks.RunoffCliHook`
    logs where a call runs), none as a spark-submit."""
    for task in tasks:
        log = af.task_log(run_id, task)
        assert f"(server {af.env['RUNOFF_SERVER']})" in log, (task, log[-3000:])
        assert "Spark-Submit cmd" not in log, (task, log[-3000:])


def assert_other_secret_refused(af: Airflow, config: RunoffConfig) -> None:
    """A client of the deployment's server with another secret: one line, exit 2, nothing
    written."""
    versions = [table_version(config.bronze_path("events")), table_version(config.runs_path)]
    env = {**clean_environment(), "RUNOFF_SERVER": af.env["RUNOFF_SERVER"]}
    env["RUNOFF_SERVER_SECRET"] = "another-secret-of-enough-length"
    refused = subprocess.run(
        [
            str(Path(sys.executable).parent / "runoff"),
            "--home",
            str(config.home),
            "bronze",
            "events",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.splitlines() == [
        "runoff: error: the server refused the request: wrong or missing secret "
        "(RUNOFF_SERVER_SECRET)"
    ], refused.stderr
    assert [
        table_version(config.bronze_path("events")),
        table_version(config.runs_path),
    ] == versions


def _runs_in_postgres(env: dict[str, str]) -> list[tuple[str, str, str]]:
    """(run type, state, run id) of every run of DAG_ID, as Airflow recorded them in PostgreSQL."""
    url = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].replace(
        "postgresql+psycopg://", "postgresql://"
    )
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT run_type, state, run_id FROM dag_run WHERE dag_id = %s ORDER BY run_id",
            (DAG_ID,),
        ).fetchall()
    return [(str(t), str(s), str(r)) for t, s, r in rows]


def test_scheduled_manual_and_backfill_runs_on_postgres(deployed: Airflow) -> None:
    af = deployed
    root = Path(af.env["AIRFLOW_HOME"]).parent
    home = Path(af.env["RUNOFF_HOME"])
    config = RunoffConfig.from_sources(home=home, env={})
    landing, delivered = Path(str(config.landing_dir("events"))), root / "delivered"
    # Hours 21:00 and 22:00 of 2024-01-01, one file each.
    _generate(home, "--files", "2", "--rows-per-file", "25", "--start", START.isoformat())
    _deliver(landing, delivered)

    # The metadata database is PostgreSQL: no sqlite file; the password is required.
    assert not list(Path(af.env["AIRFLOW_HOME"]).rglob("*.db"))
    database = urllib.parse.urlsplit(af.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(
            host=database.hostname, port=database.port, user=POSTGRES_USER, dbname=POSTGRES_DB
        )

    dag = wait_for_dags(af)[DAG_ID]
    assert dag["timetable_summary"] == "0 * * * *"  # hourly, as its spec says
    assert dag["is_paused"] is True  # every DAG starts paused

    # -- a scheduled run: unpausing creates one, for the latest complete hour ----------------
    unpaused = datetime.now(UTC)
    af.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
    scheduled = _wait_for_scheduled_run(af)
    run_id = scheduled["dag_run_id"]
    start, end = _interval(scheduled)
    assert end - start == HOUR, scheduled
    # (The DAG's next run was computed when it was parsed: an hour earlier when the hour changed
    # in between; the run of the hour that ended since follows at once.)
    assert _hour(unpaused) - HOUR <= end <= _hour(datetime.now(UTC)), (unpaused, scheduled)
    assert af.wait_for_runs([run_id], timeout=RUN_TIMEOUT)[run_id] == "success", af.explain(run_id)
    assert af.task_states(run_id) == INCREMENTAL_STATES
    assert_served(af, run_id, ("bronze", "silver", "validate"))
    assert_tables_as_expected(config, delivered)
    assert_other_secret_refused(af, config)

    # -- a manual run through the REST API: the file of hour 23 ------------------------------
    _generate(
        home, "--files", "1", "--rows-per-file", "25", "--start", (START + 2 * HOUR).isoformat()
    )
    _deliver(landing, delivered)
    manual = af.api("POST", f"/dags/{DAG_ID}/dagRuns", {"logical_date": None})
    run_id = manual["dag_run_id"]
    assert manual["run_type"] == "manual", manual
    assert af.wait_for_runs([run_id], timeout=RUN_TIMEOUT)[run_id] == "success", af.explain(run_id)
    assert af.task_states(run_id) == INCREMENTAL_STATES
    assert_tables_as_expected(config, delivered)

    # -- a corrected delivery of hour 23, then `airflow backfill create` of that hour ----------
    # The backfill run re-runs exactly its data interval: it reads the corrected file (the live
    # stream never reads a landing path twice) and rewrites bronze's hour and every silver
    # window overlapping it, one commit per table.
    hour_23 = START + 2 * HOUR
    [path] = [p for p in expected.landing_files(landing) if f"{hour_23:%Y%m%dT%H}" in p.name]
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    low, high = hour_23.timestamp(), (hour_23 + HOUR).timestamp()
    assert sum(low <= r["time"] < high for r in records) > 0
    flipped = {"Open": "Close", "Close": "Open"}
    corrected = "".join(
        json.dumps({**r, "action": flipped[r["action"]]} if low <= r["time"] < high else r) + "\n"
        for r in records
    )
    path.write_text(corrected)
    (delivered / path.relative_to(landing)).write_text(corrected)
    [backfilled] = backfill(af, hour_23.isoformat(), hour_23.isoformat())
    assert af.task_states(backfilled) == BACKFILLED, af.explain(backfilled)
    assert_served(af, backfilled, ("backfill",))
    assert _interval(af.run(backfilled)) == (hour_23, hour_23 + HOUR)
    summary = _backfill_summary(af, backfilled)
    assert f"backfill events [{hour_23:%Y-%m-%dT%H:%M:%SZ}, " in summary, summary
    commits = dict(re.findall(r"backfill (\w+): \d+ rows written, version (\d+ -> \d+)", summary))
    assert set(commits) == {"bronze_events", "events_action_hourly", "events_action_sliding"}
    for table, versions in commits.items():
        old, new = (int(v) for v in versions.split(" -> "))
        assert new == old + 1, (table, versions)  # one commit
    assert "backfill quarantine_events: unchanged" in summary, summary
    assert_tables_as_expected(config, delivered)  # the oracle reads the corrected file

    # -- every scheduled run (one per hour since unpausing: catchup=False) succeeded ----------
    scheduled_runs = sorted(af.runs("scheduled"), key=lambda run: run["data_interval_end"])
    ends = [_interval(run)[1] for run in scheduled_runs]
    assert ends == [end + i * HOUR for i in range(len(ends))], ends
    assert ends[-1] <= _hour(datetime.now(UTC)), ends
    ids = [run["dag_run_id"] for run in scheduled_runs]
    assert set(af.wait_for_runs(ids, timeout=RUN_TIMEOUT).values()) == {"success"}
    # Airflow's record of the runs is in PostgreSQL.
    recorded = _runs_in_postgres(af.env)
    assert sorted((t, s) for t, s, _ in recorded) == sorted(
        [("backfill", "success"), ("manual", "success")] + [("scheduled", "success")] * len(ids)
    ), recorded
    assert {r for _, _, r in recorded} == {backfilled, manual["dag_run_id"], *ids}
    af.passed = True
