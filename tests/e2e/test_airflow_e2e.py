"""A real Airflow runs `runoff_events`: REST-triggered run, the CLI, the UI's grid page, a failure.

`python -m dags.standalone` (what `make airflow` runs) starts `airflow standalone` (api-server,
scheduler, dag-processor, triggerer; sqlite, LocalExecutor) on a free loopback port with a
throw-away AIRFLOW_HOME inside the runoff home. The test logs in with the generated admin
password (JWT from POST /auth/token), triggers a run through the REST API v2, checks the tables
against tests/expected.py, lists the run with the plain `airflow` CLI from a shell that has only
`AIRFLOW_HOME` (what the README shows: `make airflow` wrote its settings into airflow.cfg), and
screenshots the DAG's grid page in headless Chromium through the DevTools protocol (the JWT goes
in the `_token` cookie the UI uses). The good run's asset events come from `publish` only, with
validate's figures as `extra`. Airflow's OpenLineage provider and runoff send their events to one
OpenLineage receiver on loopback (`OPENLINEAGE_URL`): each runoff run of a step names that
step's task run as its parent and the DAG run as its root. The scheduler, killed, is started
again and schedules the runs that follow. Last, a landing file with an action
outside {Open, Close} fails bronze's critical expectation: the run fails without a retry, emits
no asset event, leaves the tables as they were, and the failure notifier POSTs one message to a
fake HTTP receiver on loopback (connection `runoff_notify`, given to Airflow as
`AIRFLOW_CONN_RUNOFF_NOTIFY`). Every process it starts is stopped by process group in a `finally`.

The scheduler creates no scheduled runs (`use_job_schedule=False`). Every task runs in `make
airflow`'s `runoff serve` server. `RUNOFF_DATASETS` names a user's spec folder (the `orders`
dataset): its DAG must be parsed next to the seed ones, without an import error. Scheduled runs,
backfills (`airflow backfill create`, each run re-running exactly its hour) and tasks as
spark-submits are proven on Airflow as docker/compose.yaml deploys it, on PostgreSQL:
tests/e2e/test_airflow_postgres.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

from core.config import RunoffConfig
from dags import standalone
from delta_tables import definitions
from delta_tables.catalog import Catalog
from tests import expected
from tests.airflow_api import (
    DAG_ID,
    INCREMENTAL_STATES,
    LOOPBACK,
    RUN_TIMEOUT,
    Airflow,
    again_while_locked,
    clean_environment,
    kill_leftovers,
    listening_sockets,
    stop_group,
    wait_for_dags,
)
from tests.browser import DevTools, assert_not_blank, devtools_page
from tests.conftest import REPO_ROOT
from tests.lineage_receiver import LineageReceiver, problems
from tests.readme import fresh_shell, readme_blocks
from tests.receiver import Receiver
from tests.tables import assert_silver_matches_expected, snapshot_tables
from tests.user_specs import write_orders

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.slow, pytest.mark.browser]

USER_DAG_ID = "runoff_orders"  # declared in the RUNOFF_DATASETS folder
# Six hourly landing files: 2024-01-01 21:00 .. 2024-01-02 02:00.
GENERATE = ["--files", "6", "--rows-per-file", "25", "--start", "2024-01-01T21:00:00Z"]
STARTUP_TIMEOUT = 300.0


@pytest.fixture(scope="module")
def airflow() -> Iterator[Airflow]:
    # Not pytest's tmp_path: concurrent pytest runs rotate those away, with the logs of a failure.
    root = Path(tempfile.mkdtemp(prefix="runoff-airflow-e2e-"))
    home = root / "home"
    specs = root / "datasets"
    orders = write_orders(specs)
    # A delivery due 20 seconds after a run is queued: its DAG's freshness deadline.
    fresh = '  bronze:\n    - {expect: freshness, max_age: "20 seconds"}\n'
    orders.write_text(orders.read_text().replace("  bronze:\n", fresh, 1))
    port = standalone.free_port()
    receiver = Receiver()  # the failure notifications' endpoint
    lineage = LineageReceiver()  # Airflow's OpenLineage events and runoff's
    base = clean_environment()
    base.update(
        {
            "RUNOFF_DATASETS": str(specs),
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(standalone.free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(standalone.free_port()),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "AIRFLOW_CONN_RUNOFF_NOTIFY": json.dumps(
                {"conn_type": "http", "host": "127.0.0.1", "port": receiver.port}
            ),
            "OPENLINEAGE_URL": lineage.url,
        }
    )
    env = standalone.airflow_env(home, port, base=base)
    log = root / "standalone.log"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dags.standalone",
            "--home",
            str(home),
            "--port",
            str(port),
            "--timeout",
            str(STARTUP_TIMEOUT),
        ],
        env=base,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=standalone.REPO_ROOT,
    )
    try:
        password = _wait_for_login(process, env, log)
        url = env["AIRFLOW__API__BASE_URL"]
        af = Airflow(
            url=url,
            env=env,
            token=standalone.api_token(url, password),
            log=log,
            receiver=receiver,
            lineage=lineage,
            pid=process.pid,
        )
        yield af
    finally:
        _stop_airflow(process, Path(env["AIRFLOW_HOME"]))
        receiver.stop()
        lineage.stop()
    if af.passed:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"Airflow home, logs and tables kept in {root}")


def _wait_for_login(process: subprocess.Popen[bytes], env: dict[str, str], log: Path) -> str:
    deadline = time.monotonic() + STARTUP_TIMEOUT + 60
    airflow_home = Path(env["AIRFLOW_HOME"])
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"dags.standalone exited: {log.read_text()[-3000:]}")
        # dags.standalone prints the login once the API answers.
        if "runoff: login admin /" in log.read_text(errors="replace"):
            password = standalone.admin_password(airflow_home)
            assert password, f"no generated password in {airflow_home}"
            return password
        time.sleep(1)
    raise AssertionError(
        f"Airflow not up within {STARTUP_TIMEOUT:.0f} s: {log.read_text()[-3000:]}"
    )


def _stop_airflow(process: subprocess.Popen[bytes], airflow_home: Path) -> None:
    """Stop dags.standalone (it stops `airflow standalone` on SIGTERM); then make sure the
    `airflow standalone` process group it recorded is gone too, and every task process."""
    pid_file = airflow_home / standalone.PID_FILE
    group = int(pid_file.read_text()) if pid_file.is_file() else None
    stop_group(process, timeout=10.0)  # what is left after that is killed below
    if group is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    kill_leftovers(airflow_home)


def test_airflow_runs_and_shows_runoff_events(airflow: Airflow, tmp_path: Path) -> None:
    af = airflow
    home = Path(af.env["RUNOFF_HOME"])
    config = RunoffConfig.from_sources(home=home, env={})
    generated = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "--home", str(home), "generate", "events", *GENERATE],
        capture_output=True,
        text=True,
        check=False,
    )
    assert generated.returncode == 0, generated.stderr

    dags = wait_for_dags(af)
    dag = dags[DAG_ID]
    assert dag["timetable_summary"] == "0 * * * *"  # hourly, as its spec says
    assert {tag["name"] for tag in dag["tags"]} == {"runoff", "events"}
    # The user's dataset comes from the same DAG file as the seed ones: parsed together.
    assert USER_DAG_ID in dags, sorted(dags)
    assert {tag["name"] for tag in dags[USER_DAG_ID]["tags"]} == {"runoff", "orders"}
    af.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})

    # -- a run triggered through the REST API: incremental bronze >> silver >> validate --------
    run = af.api("POST", f"/dags/{DAG_ID}/dagRuns", {"logical_date": None})
    states = af.wait_for_runs([run["dag_run_id"]], timeout=RUN_TIMEOUT)
    assert states[run["dag_run_id"]] == "success", af.explain(run["dag_run_id"])
    assert af.task_states(run["dag_run_id"]) == INCREMENTAL_STATES
    # The quality outcome is in the task log: the summary table, then the Data Docs path.
    validate_log = af.task_log(run["dag_run_id"], "validate")
    assert "events_action_hourly" in validate_log
    docs = validate_log.rindex(f"Data Docs: {config.quality_dir}")
    assert validate_log.rindex("events_action_hourly") < docs
    assert_silver_matches_expected(config, "events")
    after_run = snapshot_tables(config, "events")
    assert_published(af, run["dag_run_id"], config)
    assert_lineage_joins_the_dag(af)

    # -- every listening socket of this Airflow is on loopback --------------------------------
    # The api-server, and no log server (`airflow serve-logs` listens on every interface); the
    # Spark driver of `runoff serve` (local[2]) binds its RPC and block manager to loopback.
    assert af.pid is not None
    listening = listening_sockets(af.pid)
    addresses = {address for sockets in listening.values() for address in sockets}
    assert ("127.0.0.1", int(urllib.parse.urlsplit(af.url).port or 0)) in addresses, listening
    assert any("java" in process for process in listening), listening
    assert {ip for ip, _ in addresses} <= LOOPBACK, listening

    # -- the plain `airflow` CLI, from a shell with only AIRFLOW_HOME, sees the same Airflow ----
    output = af.cli("dags", "list-runs", DAG_ID, "--output", "json")
    # (Airflow prints its import warnings on stdout before the JSON line.)
    listed = json.loads(next(line for line in output.splitlines() if line.startswith("[")))
    assert [(r["run_id"], r["state"]) for r in listed] == [(run["dag_run_id"], "success")], listed

    # -- the grid page in a browser ------------------------------------------------------------
    png = tmp_path / "runoff_events_grid.png"
    text = browse(
        f"{af.url}/dags/{DAG_ID}",
        af.token,
        png,
        expect=(DAG_ID, "route", "bronze", "silver", "validate", "backfill"),
    )
    assert DAG_ID in text
    assert_not_blank(png)

    # -- a component that ends is started again: the scheduler, killed, schedules what follows -
    # (the components are dags.standalone's children; Airflow sets their process titles)
    components = psutil.Process(af.pid).children()
    [scheduler] = [c for c in components if "scheduler" in " ".join(c.cmdline())]
    scheduler.kill()
    restarted = "runoff: airflow scheduler was ended by SIGKILL: starting it again"
    deadline = time.monotonic() + 30
    while restarted not in af.log.read_text(errors="replace"):
        assert time.monotonic() < deadline, af.log.read_text(errors="replace")[-3000:]
        time.sleep(1)

    # -- last: a critical expectation fails; nothing is published, one notification ------------
    # (the bad file stays pending in bronze: the tables no longer match tests/expected.py)
    landed = expected.landing_files(config.landing_dir("events"))
    records = [json.loads(line) for line in landed[-1].read_text().splitlines() if line.strip()]
    records[0]["action"] = "Jump"
    bad = landed[-1].with_name(f"zz-bad-{landed[-1].name}")
    bad.write_text("".join(json.dumps(r) + "\n" for r in records))
    events_before = af.asset_events()
    receiver = af.receiver
    assert receiver is not None and receiver.received == []
    failed = af.api("POST", f"/dags/{DAG_ID}/dagRuns", {"logical_date": None})["dag_run_id"]
    assert af.wait_for_runs([failed], timeout=RUN_TIMEOUT)[failed] == "failed", af.explain(failed)
    states = af.task_states(failed)
    assert (states["bronze"], states["publish"]) == ("failed", "upstream_failed"), states
    ti = af.api(
        "GET", f"/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(failed, safe='')}/taskInstances/bronze"
    )
    assert ti["try_number"] == 1, ti  # a failed expectation is not retried
    assert af.asset_events(failed) == []
    assert len(af.asset_events()) == len(events_before)
    assert snapshot_tables(config, "events") == after_run  # nothing of the batch committed
    [(method, _, body)] = receiver.wait_for(1, timeout=30)
    assert method == "POST"
    assert (body["dag_id"], body["task_id"], body["run_id"]) == (DAG_ID, "bronze", failed), body
    assert "critical expectation failed on bronze_events" in body["message"], body
    assert "column_values_to_be_in_set(action" in body["message"], body
    assert f"DAG {DAG_ID}" in body["message"] and "task bronze" in body["message"], body
    time.sleep(3)
    assert len(receiver.received) == 1, receiver.received

    # -- a missed freshness deadline pages through the same connection ------------------------
    # The user's `orders` has nothing landed: its bronze fails at once (no retry), and the run
    # has not published when its deadline (queued + 20 s) passes.
    user = dataclasses.replace(af, dag_id=USER_DAG_ID)
    user.api("PATCH", f"/dags/{USER_DAG_ID}", {"is_paused": False})
    late = user.api("POST", f"/dags/{USER_DAG_ID}/dagRuns", {"logical_date": None})["dag_run_id"]
    assert user.wait_for_runs([late], timeout=RUN_TIMEOUT)[late] == "failed", user.explain(late)
    received = receiver.wait_for(3, timeout=120)
    bodies = sorted((b["task_id"] or "", b["run_id"], b["message"]) for _, _, b in received[1:])
    queued = datetime.fromisoformat(user.run(late)["queued_at"])
    due = (queued + timedelta(seconds=20)).astimezone(UTC).isoformat(timespec="seconds")
    assert bodies[0] == (
        "",
        late,
        f"runoff: DAG {USER_DAG_ID} missed its freshness deadline (run {late}): dataset orders "
        f"was not published by {due} (freshness of bronze: max_age 20 seconds after the run was "
        "queued)",
    ), received
    assert bodies[1][:2] == ("bronze", late) and "no landing directory" in bodies[1][2], received
    time.sleep(3)
    assert len(receiver.received) == 3, receiver.received

    # -- the README's backfill recipe, typed into a fresh shell in the repository's folder -----
    # (with the RUNOFF_HOME its walkthrough exports); the six hourly runs it creates are those
    # of GENERATE's files. The backfill is then cancelled: running such runs is
    # tests/e2e/test_airflow_postgres.py's.
    (recipe,) = [b for b in readme_blocks() if "airflow backfill create" in b.text]
    shell_home = tmp_path / "user"
    shell_home.mkdir()
    script = f'export RUNOFF_HOME={home}\n{recipe.text}echo "@@ exit $?"'
    printed = again_while_locked(
        lambda: fresh_shell(script, home=shell_home, cwd=REPO_ROOT, timeout=300), str
    )
    assert printed.rstrip().endswith("@@ exit 0"), printed[-3000:]
    (created,) = af.api("GET", f"/backfills?dag_id={DAG_ID}")["backfills"]
    assert (created["from_date"], created["to_date"]) == (
        "2024-01-01T21:00:00Z",
        "2024-01-02T02:00:00Z",
    ), created
    runs = af.api("GET", f"/dags/{DAG_ID}/dagRuns?run_type=backfill&limit=100")["dag_runs"]
    af.api("PUT", f"/backfills/{created['id']}/cancel")
    starts = sorted(datetime.fromisoformat(r["data_interval_start"]) for r in runs)
    first = datetime(2024, 1, 1, 21, tzinfo=UTC)
    assert starts == [first + timedelta(hours=h) for h in range(6)], runs
    # It used make airflow's database: no other one appeared (the repository, ~/airflow).
    assert not (REPO_ROOT / "airflow.db").exists()
    assert list(shell_home.iterdir()) == []
    af.passed = True


def assert_lineage_joins_the_dag(af: Airflow) -> None:
    """Airflow's OpenLineage provider sends the DAG run's and each task's events; each runoff run
    of a step (bronze, silver, validate: valid against the specification) names that step's task
    run as its parent and the DAG run as its root, so both are one graph."""
    assert isinstance(af.lineage, LineageReceiver)
    events = af.lineage.events()
    airflow_runs = {
        e["job"]["name"]: e["run"]["runId"]
        for e in events
        if e["job"]["name"].startswith(f"{DAG_ID}") and e["eventType"] == "COMPLETE"
    }
    runoff = [e for e in events if e["job"]["name"].startswith("runoff.events.")]
    assert [(e["job"]["name"], e["eventType"]) for e in runoff] == [
        (f"runoff.events.{step}", state)
        for step in ("bronze", "silver", "validate")
        for state in ("START", "COMPLETE")
    ], [(e["job"]["name"], e["eventType"]) for e in events]
    assert [problems(e) for e in runoff] == [[]] * len(runoff)
    for event in runoff:
        step = event["job"]["name"].rsplit(".", 1)[1]
        parent = event["run"]["facets"]["parent"]
        assert (parent["job"]["name"], parent["run"]["runId"]) == (
            f"{DAG_ID}.{step}",
            airflow_runs[f"{DAG_ID}.{step}"],
        ), (sorted(airflow_runs), parent)
        root = parent["root"]
        assert (root["job"]["name"], root["run"]["runId"]) == (DAG_ID, airflow_runs[DAG_ID])


def assert_published(af: Airflow, run_id: str, config: RunoffConfig) -> None:
    """The run's asset events: one per table, all from `publish`, with validate's figures."""
    events = {e["name"]: e for e in af.asset_events(run_id)}
    assert set(events) == {
        "bronze_events",
        "quarantine_events",
        *expected.SILVER_TABLES["events"],
    }, events
    # No other task of the DAG emits asset events (bronze, silver, backfill have no outlets).
    assert {e["source_task_id"] for e in af.asset_events()} == {"publish"}
    for name, event in events.items():
        extra = event["extra"]
        assert extra["dataset"] == "events" and extra["table"] == name, extra
        assert extra["expectations_failed"] == 0, extra
        assert extra["quarantined_rows"] == 0, extra  # GENERATE lands no malformed line
        assert str(extra["data_docs"]).startswith(str(config.quality_dir)), extra
    bronze = events["bronze_events"]["extra"]
    assert (bronze["layer"], bronze["status"], bronze["rows"]) == ("bronze", "validated", 150)
    hourly = events["events_action_hourly"]["extra"]
    assert (hourly["layer"], hourly["status"]) == ("silver", "validated"), hourly
    assert hourly["rows"] > 0 and hourly["expectations_passed"] > 0, hourly
    assert isinstance(hourly["to_version"], int) and hourly["versions"], hourly
    # each bronze and silver event names the definition that built its table, as it keeps it
    catalog = Catalog.load(config)
    built = definitions.built_by(catalog.tables("events").defined)
    assert built == definitions.fingerprints(catalog.spec("events"))
    for table in ["bronze_events", *expected.SILVER_TABLES["events"]]:
        assert events[table]["extra"]["definition"] == built[table], events[table]
    # The validate outcome file publish read, where dags.outcome.outcome_path puts it.
    home = Path(af.env["RUNOFF_HOME"])
    outcome = json.loads(
        (home / "airflow" / "outcomes" / DAG_ID / run_id / "validate.json").read_text()
    )
    assert outcome["exit_code"] == 0 and outcome["summary"]["passed"] is True, outcome


# -- headless Chromium through the DevTools protocol ---------------------------------------------
def browse(
    url: str,
    token: str,
    png: Path,
    expect: Sequence[str],
    timeout: float = 60.0,
    window: tuple[int, int] = (1400, 1000),
) -> str:
    """Open `url` logged in (JWT in the `_token` cookie), wait until the page's text shows every
    string of `expect`, save a screenshot to `png` and return the text."""
    with devtools_page(DevTools, window=window, timeout=timeout) as page:
        page.call("Network.setCookie", name="_token", value=token, url=url)
        page.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = str(page.evaluate("document.body ? document.body.innerText : ''") or "")
            if all(s in text for s in expect):
                break
            time.sleep(1)
        else:
            missing = [s for s in expect if s not in text]
            raise AssertionError(f"{url} never showed {missing}; page text: {text[:1500]}")
        time.sleep(1)  # let the last requests paint
        page.screenshot(png)
        return text
