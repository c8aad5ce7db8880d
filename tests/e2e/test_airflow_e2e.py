"""A real Airflow runs `runoff_events`: REST-triggered run, CLI backfills, the UI's grid page.

`python -m dags.standalone` (what `make airflow` runs) starts `airflow standalone` (api-server,
scheduler, dag-processor, triggerer; sqlite, LocalExecutor) on a free loopback port with a
throw-away AIRFLOW_HOME inside the runoff home. The test logs in with the generated admin
password (JWT from POST /auth/token), triggers a run through the REST API v2, checks the tables
against tests/expected.py, backfills two days with `airflow backfill create` twice (tables
unchanged, live checkpoints untouched), and screenshots the DAG's grid page in headless Chromium
through the DevTools protocol (the JWT goes in the `_token` cookie the UI uses). The good run's
asset events come from `publish` only, with validate's figures as `extra`. Last, a landing file
with an action outside {Open, Close} fails bronze's critical expectation: the run fails without
a retry, emits no asset event, leaves the tables as they were, and the failure notifier POSTs one
message to a fake HTTP receiver on loopback (connection `runoff_notify`, given to Airflow as
`AIRFLOW_CONN_RUNOFF_NOTIFY`). Every process it starts is stopped by process group in a `finally`.

`runoff_events` is hourly (its spec): the backfill over the six hours of data, which spans
midnight, makes six runs, each of which re-runs exactly its hour (one commit at most per table
and run, counted from the Delta history; a second backfill commits nothing). The backfills are
created with the plain `airflow` CLI from a shell that has only `AIRFLOW_HOME` (what the README
shows): `make airflow` wrote its settings into airflow.cfg. The scheduler creates no scheduled
runs (`use_job_schedule=False`). Every task runs in `make airflow`'s `runoff serve` server.
`RUNOFF_DATASETS` names a user's spec folder (the `orders` dataset): its DAG must be parsed next
to the seed ones, without an import error.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from dags import standalone
from tests import expected
from tests.browser import DevTools, assert_not_blank, devtools_page
from tests.dags.receiver import Receiver
from tests.dags.tables import assert_silver_matches_expected, snapshot_tables, tree_listing
from tests.dags.user_specs import write_orders

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.slow, pytest.mark.browser]

DAG_ID = "runoff_events"
USER_DAG_ID = "runoff_orders"  # declared in the RUNOFF_DATASETS folder
# Two days of hourly landing files: 2024-01-01 21:00 .. 2024-01-02 02:00.
GENERATE = ["--files", "6", "--rows-per-file", "25", "--start", "2024-01-01T21:00:00Z"]
# Logical dates (interval starts) of the hourly runs over the data: 21:00 .. 02:00, both
# inclusive, six runs, on two days.
BACKFILL_FROM, BACKFILL_TO = "2024-01-01T21:00:00+00:00", "2024-01-02T02:00:00+00:00"
BACKFILL_HOURS = 6
# A run takes about a minute on an idle 2-core machine; allow for a busy one.
RUN_TIMEOUT = 480.0
STARTUP_TIMEOUT = 300.0


@dataclass
class Airflow:
    url: str
    env: dict[str, str]
    token: str
    log: Path
    receiver: Receiver
    passed: bool = False  # set by the test when it got to the end: its files are then removed

    def api(self, method: str, path: str, body: Any = None, attempts: int = 3) -> Any:
        """One REST API v2 call; a timed-out or refused connection is retried (busy machine)."""
        request = urllib.request.Request(
            f"{self.url}/api/v2{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        for attempt in range(1, attempts + 1):
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    return json.loads(response.read() or b"null")
            except urllib.error.HTTPError as exc:
                raise AssertionError(
                    f"{method} {path} -> {exc.code}: {exc.read().decode()[:500]}"
                ) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError):
                if attempt == attempts:
                    raise
                time.sleep(5)
        raise AssertionError("unreachable")

    def cli(self, *args: str, attempts: int = 3) -> str:
        """Run `airflow <args>` as a user would from a shell: only `AIRFLOW_HOME` (and PATH,
        HOME) set; retried when sqlite reports a lock (busy machine)."""
        env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
        env["AIRFLOW_HOME"] = self.env["AIRFLOW_HOME"]
        for attempt in range(1, attempts + 1):
            result = subprocess.run(
                [str(Path(sys.executable).parent / "airflow"), *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if result.returncode == 0:
                return result.stdout
            if "database is locked" not in result.stderr or attempt == attempts:
                break
            time.sleep(5)
        raise AssertionError(f"airflow {' '.join(args)}: {result.stderr[-2000:]}")

    def task_states(self, run_id: str) -> dict[str, str | None]:
        quoted = urllib.parse.quote(run_id, safe="")
        payload = self.api("GET", f"/dags/{DAG_ID}/dagRuns/{quoted}/taskInstances")
        return {ti["task_id"]: ti["state"] for ti in payload["task_instances"]}

    def task_log(self, run_id: str, task_id: str, try_number: int = 1) -> str:
        quoted = urllib.parse.quote(run_id, safe="")
        payload = self.api(
            "GET",
            f"/dags/{DAG_ID}/dagRuns/{quoted}/taskInstances/{task_id}/logs/{try_number}"
            "?full_content=true",
        )
        return "\n".join(_log_line(entry) for entry in payload["content"])

    def explain(self, run_id: str) -> str:
        """Task states of a run and the log tails of its failed tasks (for failure messages)."""
        states = self.task_states(run_id)
        parts = [f"{run_id}: {states}"]
        for task_id, state in states.items():
            if state in ("failed", "up_for_retry"):
                tail = self.task_log(run_id, task_id).splitlines()[-40:]
                parts.append(f"--- {task_id} log tail:\n" + "\n".join(tail))
        return "\n".join(parts)

    def wait_for_runs(self, run_ids: Sequence[str], timeout: float) -> dict[str, str]:
        """Wait until every run is finished; return run id -> state."""
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            for run_id in run_ids:
                quoted = urllib.parse.quote(run_id, safe="")
                states[run_id] = self.api("GET", f"/dags/{DAG_ID}/dagRuns/{quoted}")["state"]
            if all(s in ("success", "failed") for s in states.values()):
                return states
            time.sleep(2)
        details = "\n".join(self.explain(run_id) for run_id in run_ids)
        raise AssertionError(f"runs not finished after {timeout:.0f} s:\n{details}")

    def asset_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The asset events of DAG_ID's tasks (of one run when `run_id` is given)."""
        query = {"source_dag_id": DAG_ID, "limit": "100"}
        if run_id is not None:
            query["source_run_id"] = run_id
        payload = self.api("GET", f"/assets/events?{urllib.parse.urlencode(query)}")
        events: list[dict[str, Any]] = payload["asset_events"]
        return events

    def runs(self, run_type: str) -> list[dict[str, Any]]:
        payload = self.api("GET", f"/dags/{DAG_ID}/dagRuns?run_type={run_type}&limit=100")
        runs: list[dict[str, Any]] = payload["dag_runs"]
        return runs


def _log_line(entry: Any) -> str:
    """A structured task-log entry as text; errors keep their details (exception, traceback)."""
    if not isinstance(entry, dict):
        return str(entry)
    text = str(entry.get("event", ""))
    if "error_detail" in entry:
        text += "\n" + json.dumps(entry["error_detail"], indent=1)[-3000:]
    return text


def _clean_environment() -> dict[str, str]:
    """This process's environment without Airflow or runoff settings (tests may set some)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "RUNOFF_")) and k != "PYTHONPATH"
    }


@pytest.fixture(scope="module")
def airflow() -> Iterator[Airflow]:
    # Not pytest's tmp_path: concurrent pytest runs rotate those away, with the logs of a failure.
    root = Path(tempfile.mkdtemp(prefix="runoff-airflow-e2e-"))
    home = root / "home"
    specs = root / "datasets"
    write_orders(specs)
    port = standalone.free_port()
    receiver = Receiver()  # the failure notifications' endpoint
    base = _clean_environment()
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
            url=url, env=env, token=standalone.api_token(url, password), log=log, receiver=receiver
        )
        yield af
    finally:
        _stop_airflow(process, Path(env["AIRFLOW_HOME"]))
        receiver.stop()
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


def _stop_group(process: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """SIGTERM the process group led by `process` (SIGKILL after `timeout`)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # stragglers of the group


def _stop_airflow(process: subprocess.Popen[bytes], airflow_home: Path) -> None:
    """Stop dags.standalone (it stops `airflow standalone` on SIGTERM); then make sure the
    `airflow standalone` process group it recorded is gone too."""
    pid_file = airflow_home / standalone.PID_FILE
    group = int(pid_file.read_text()) if pid_file.is_file() else None
    _stop_group(process)
    if group is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    # Task processes run in sessions of their own; anything still running with this test's
    # AIRFLOW_HOME in its environment was started by this test (spark-submit, its JVM, ...).
    for pid in _pids_with_environment("AIRFLOW_HOME", str(airflow_home)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _pids_with_environment(key: str, value: str) -> list[int]:
    wanted = f"{key}={value}".encode()
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if wanted in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
        except OSError:
            continue
    return [pid for pid in pids if pid != os.getpid()]


def _wait_for_dags(af: Airflow, timeout: float = 180.0) -> dict[str, dict[str, Any]]:
    """The parsed `runoff_*` DAGs by id, once DAG_ID is among them (no import error allowed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        payload = af.api("GET", "/dags?dag_id_pattern=runoff_")
        dags = {d["dag_id"]: d for d in payload["dags"]}
        if DAG_ID in dags:
            errors = af.api("GET", "/importErrors")
            assert errors["total_entries"] == 0, errors
            return dags
        time.sleep(2)
    raise AssertionError(f"{DAG_ID} not parsed within {timeout:.0f} s")


def _backfill(af: Airflow, *extra: str) -> list[str]:
    """`airflow backfill create` over the hours of data (the README's command); wait until the
    backfill completes; return the ids of its six runs (a re-run with `--reprocess-behavior
    completed` reuses them)."""
    started = datetime.now(UTC)
    af.cli(
        "backfill",
        "create",
        "--dag-id",
        DAG_ID,
        "--from-date",
        BACKFILL_FROM,
        "--to-date",
        BACKFILL_TO,
        *extra,
    )
    # The scheduler closes a backfill once its runs have finished: only then may another start.
    deadline = time.monotonic() + 2 * RUN_TIMEOUT
    while True:
        newest = max(af.api("GET", f"/backfills?dag_id={DAG_ID}")["backfills"], key=_by_id)
        if newest["completed_at"]:
            break
        if time.monotonic() > deadline:
            runs = [r["dag_run_id"] for r in af.runs("backfill")]
            details = "\n".join(af.explain(r) for r in runs)
            raise AssertionError(f"backfill {newest} not completed:\n{details}")
        time.sleep(3)
    low, high = datetime.fromisoformat(BACKFILL_FROM), datetime.fromisoformat(BACKFILL_TO)
    runs = [
        r for r in af.runs("backfill") if low <= datetime.fromisoformat(r["logical_date"]) <= high
    ]
    assert len(runs) == BACKFILL_HOURS, runs
    for run in runs:
        assert run["state"] == "success", af.explain(run["dag_run_id"])
        assert datetime.fromisoformat(run["start_date"]) >= started, run
    return [r["dag_run_id"] for r in runs]


def _by_id(backfill: dict[str, Any]) -> int:
    return int(backfill["id"])


def test_airflow_runs_backfills_and_shows_runoff_events(airflow: Airflow, tmp_path: Path) -> None:
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

    dags = _wait_for_dags(af)
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
    assert af.task_states(run["dag_run_id"]) == {
        "route": "success",
        "reset": "skipped",
        "bronze": "success",
        "silver": "success",
        "backfill": "skipped",
        "validate": "success",
        "publish": "success",
    }
    # The quality outcome is in the task log: the summary table, then the Data Docs path.
    validate_log = af.task_log(run["dag_run_id"], "validate")
    assert "events_action_hourly" in validate_log
    docs = validate_log.rindex(f"Data Docs: {config.quality_dir}")
    assert validate_log.rindex("events_action_hourly") < docs
    assert_silver_matches_expected(config, "events")
    after_run = snapshot_tables(config, "events")
    checkpoints = tree_listing(home / "checkpoints")
    assert_published(af, run["dag_run_id"], config)

    # -- a corrected delivery of hour 22, then the backfill of the six hours of data ----------
    # Every run re-runs exactly its hour: only the 22:00 run finds a change, and it rewrites
    # bronze's hour and every silver window overlapping it, one commit per table; the runs of
    # the other hours commit nothing; the live checkpoints are untouched.
    landed = expected.landing_files(config.landing_dir("events"))
    hour_22 = next(p for p in landed if "T22" in p.name)
    start_22 = datetime(2024, 1, 1, 22, tzinfo=UTC).timestamp()

    def corrected(record: dict[str, Any]) -> dict[str, Any]:
        if not start_22 <= record["time"] < start_22 + 3600:
            return record
        return {**record, "action": "Close" if record["action"] == "Open" else "Open"}

    records = [json.loads(line) for line in hour_22.read_text().splitlines() if line.strip()]
    assert sum(start_22 <= r["time"] < start_22 + 3600 for r in records) > 0
    hour_22.write_text("".join(json.dumps(corrected(r)) + "\n" for r in records))
    before = table_versions(config)
    first = _backfill(af)
    for run_id in first:
        assert af.task_states(run_id) == {
            "route": "success",
            "reset": "skipped",
            "bronze": "skipped",
            "silver": "skipped",
            "backfill": "success",
            "validate": "success",
            "publish": "success",
        }
    logs = {run_id: af.task_log(run_id, "backfill") for run_id in first}
    assert "backfill events --start 2024-01-01T21:00:00" in "\n".join(logs.values())
    assert "backfill events --start 2024-01-02T02:00:00" in "\n".join(logs.values())
    after = table_versions(config)
    assert {t: after[t] - before[t] for t in after} == {
        "bronze_events": 1,
        "quarantine_events": 0,
        "events_action_hourly": 1,
        "events_action_sliding": 1,
    }
    changed = [log for log in logs.values() if "no table changed" not in log]
    assert len(changed) == 1, changed  # the run of [22:00, 23:00) (its run id names its end)
    assert "backfill events --start 2024-01-01T22:00:00+00:00 --end 2024-01-01T23:00" in changed[0]
    assert_silver_matches_expected(config, "events")  # the oracle reads the corrected file
    corrected = snapshot_tables(config, "events")
    assert corrected != after_run
    assert tree_listing(home / "checkpoints") == checkpoints

    _backfill(af, "--reprocess-behavior", "completed")
    assert table_versions(config) == after  # nothing to change: nothing written
    assert snapshot_tables(config, "events") == corrected
    assert tree_listing(home / "checkpoints") == checkpoints
    after_run = corrected

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

    # -- last: a critical expectation fails; nothing is published, one notification ------------
    # (the bad file stays pending in bronze: the tables no longer match tests/expected.py)
    landed = expected.landing_files(config.landing_dir("events"))
    records = [json.loads(line) for line in landed[-1].read_text().splitlines() if line.strip()]
    records[0]["action"] = "Jump"
    bad = landed[-1].with_name(f"zz-bad-{landed[-1].name}")
    bad.write_text("".join(json.dumps(r) + "\n" for r in records))
    events_before = af.asset_events()
    assert af.receiver.received == []
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
    [(method, _, body)] = af.receiver.wait_for(1, timeout=30)
    assert method == "POST"
    assert (body["dag_id"], body["task_id"], body["run_id"]) == (DAG_ID, "bronze", failed), body
    assert "critical expectation failed on bronze_events" in body["message"], body
    assert "column_values_to_be_in_set(action" in body["message"], body
    assert f"DAG {DAG_ID}" in body["message"] and "task bronze" in body["message"], body
    time.sleep(3)
    assert len(af.receiver.received) == 1, af.receiver.received
    af.passed = True


def table_versions(config: RunoffConfig) -> dict[str, int]:
    """The Delta version of each table of `events` (delta-rs, independent of Spark)."""
    from deltalake import DeltaTable

    from delta_tables.catalog import Catalog

    return {
        t.name: DeltaTable(str(t.path)).version() for t in Catalog.load(config).tables("events")
    }


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
    # The validate outcome file publish read, where the factory puts it.
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
