"""A running Airflow seen from outside: its REST API v2, its CLI, its processes.

Shared by the Airflow end-to-end tests: `make airflow`'s (tests/e2e/test_airflow_e2e.py, sqlite)
and compose's deployment on PostgreSQL (tests/e2e/test_airflow_postgres.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from tests.receiver import Receiver

T = TypeVar("T")
DAG_ID = "runoff_events"
# A run takes about a minute on an idle 2-core machine; allow for one busy with the other
# worker's tests (a spark-submit per task, each a cold JVM).
RUN_TIMEOUT = 900.0
# The task states of an incremental run (the route picks bronze: reset and backfill are skipped).
INCREMENTAL_STATES = {
    "route": "success",
    "reset": "skipped",
    "replay": "skipped",
    "rebuild": "skipped",
    "bronze": "success",
    "silver": "success",
    "backfill": "skipped",
    "validate": "success",
    "publish": "success",
}


@dataclass
class Airflow:
    url: str
    env: dict[str, str]  # the environment of Airflow's processes
    token: str
    log: Path
    receiver: Receiver | None = None  # the failure notifications' endpoint, when there is one
    lineage: Receiver | None = None  # the OpenLineage endpoint (OPENLINEAGE_URL), when there is one
    # The environment of a shell that runs `airflow` commands; None: only AIRFLOW_HOME (with
    # PATH and HOME), what README shows for `make airflow` (its settings are in airflow.cfg).
    shell_env: Mapping[str, str] | None = None
    dag_id: str = DAG_ID
    pid: int | None = None  # the process that started it (Airflow's processes descend from it)
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
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt == attempts:
                    log = self.log.read_text(errors="replace") if self.log.is_file() else ""
                    said = f"{method} {path}: {exc}; see {self.log}"
                    raise AssertionError(f"{said}, which ends:\n{log[-3000:]}") from exc
                time.sleep(5)
        raise AssertionError("unreachable")

    def cli(self, *args: str, attempts: int = 3) -> str:
        """Run `airflow <args>` as a user would from a shell (`shell_env`); retried when sqlite
        reports a lock (busy machine)."""
        if self.shell_env is not None:
            env = dict(self.shell_env)
        else:
            env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
            env["AIRFLOW_HOME"] = self.env["AIRFLOW_HOME"]
        result = again_while_locked(
            lambda: subprocess.run(
                [str(Path(sys.executable).parent / "airflow"), *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            ),
            lambda done: done.stderr if done.returncode else "",
            attempts,
        )
        if result.returncode == 0:
            return result.stdout
        raise AssertionError(f"airflow {' '.join(args)}: {result.stderr[-2000:]}")

    def task_states(self, run_id: str) -> dict[str, str | None]:
        quoted = urllib.parse.quote(run_id, safe="")
        payload = self.api("GET", f"/dags/{self.dag_id}/dagRuns/{quoted}/taskInstances")
        return {ti["task_id"]: ti["state"] for ti in payload["task_instances"]}

    def task_log(self, run_id: str, task_id: str, try_number: int = 1) -> str:
        quoted = urllib.parse.quote(run_id, safe="")
        payload = self.api(
            "GET",
            f"/dags/{self.dag_id}/dagRuns/{quoted}/taskInstances/{task_id}/logs/{try_number}"
            "?full_content=true",
        )
        return "\n".join(log_line(entry) for entry in payload["content"])

    def explain(self, run_id: str) -> str:
        """Task states of a run and the log tails of its failed tasks (for failure messages)."""
        states = self.task_states(run_id)
        parts = [f"{run_id}: {states}"]
        for task_id, state in states.items():
            if state in ("failed", "up_for_retry"):
                tail = self.task_log(run_id, task_id).splitlines()[-40:]
                parts.append(f"--- {task_id} log tail:\n" + "\n".join(tail))
        return "\n".join(parts)

    def run(self, run_id: str) -> dict[str, Any]:
        quoted = urllib.parse.quote(run_id, safe="")
        run: dict[str, Any] = self.api("GET", f"/dags/{self.dag_id}/dagRuns/{quoted}")
        return run

    def wait_for_runs(self, run_ids: Sequence[str], timeout: float) -> dict[str, str]:
        """Wait until every run is finished; return run id -> state."""
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            for run_id in run_ids:
                states[run_id] = self.run(run_id)["state"]
            if all(s in ("success", "failed") for s in states.values()):
                return states
            time.sleep(2)
        details = "\n".join(self.explain(run_id) for run_id in run_ids)
        raise AssertionError(f"runs not finished after {timeout:.0f} s:\n{details}")

    def asset_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The asset events of the DAG's tasks (of one run when `run_id` is given)."""
        query = {"source_dag_id": self.dag_id, "limit": "100"}
        if run_id is not None:
            query["source_run_id"] = run_id
        payload = self.api("GET", f"/assets/events?{urllib.parse.urlencode(query)}")
        events: list[dict[str, Any]] = payload["asset_events"]
        return events

    def runs(self, run_type: str) -> list[dict[str, Any]]:
        payload = self.api("GET", f"/dags/{self.dag_id}/dagRuns?run_type={run_type}&limit=100")
        runs: list[dict[str, Any]] = payload["dag_runs"]
        return runs


def log_line(entry: Any) -> str:
    """A structured task-log entry as text; errors keep their details (exception, traceback)."""
    if not isinstance(entry, dict):
        return str(entry)
    text = str(entry.get("event", ""))
    if "error_detail" in entry:
        text += "\n" + json.dumps(entry["error_detail"], indent=1)[-3000:]
    return text


def again_while_locked(attempt: Callable[[], T], said: Callable[[T], str], attempts: int = 5) -> T:
    """`attempt()`, made again 5 s later (at most `attempts` times in all) while what it `said`
    holds sqlite's "database is locked": `make airflow`'s scheduler was writing (the README's
    advice: submit it again). The last result, whatever it is."""
    for _ in range(attempts - 1):
        result = attempt()
        if "database is locked" not in said(result):
            return result
        time.sleep(5)
    return attempt()


def clean_environment() -> dict[str, str]:
    """This process's environment without Airflow or runoff settings (tests may set some)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "RUNOFF_")) and k != "PYTHONPATH"
    }


def stop_group(process: subprocess.Popen[Any], timeout: float = 30.0) -> None:
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


def stop_groups(processes: Iterable[subprocess.Popen[Any]], timeout: float = 10.0) -> None:
    """`stop_group` of several processes side by side: SIGTERM to every group at once, then
    SIGKILL to those still running after `timeout` (one deadline for all)."""
    running = [p for p in processes if p.poll() is None]
    for process in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for process in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
    for process in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # what is left of each group
        process.wait(timeout=timeout)


def kill_leftovers(airflow_home: Path) -> None:
    """Task processes run in sessions of their own; anything still running with this
    AIRFLOW_HOME in its environment was started by the test that made it (spark-submit, its
    JVM, ...)."""
    for pid in pids_with_environment("AIRFLOW_HOME", str(airflow_home)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


LOOPBACK = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})


def listening_sockets(root: int) -> dict[str, set[tuple[str, int]]]:
    """The TCP addresses that process `root` and its descendants (Airflow's components, their
    task processes, `runoff serve` and its JVM) listen on, by process. (Not found by their
    environment: Airflow's components set their process titles over it.)"""
    import psutil

    parent = psutil.Process(root)
    pids = {root, *(child.pid for child in parent.children(recursive=True))}
    found: dict[str, set[tuple[str, int]]] = {}
    for connection in psutil.net_connections(kind="tcp"):
        if connection.status != psutil.CONN_LISTEN or connection.pid not in pids:
            continue
        with contextlib.suppress(psutil.NoSuchProcess):
            command = " ".join(psutil.Process(connection.pid).cmdline())[:120]
            found.setdefault(f"{connection.pid} {command}", set()).add(
                (connection.laddr.ip, connection.laddr.port)
            )
    return found


def pids_with_environment(key: str, value: str) -> list[int]:
    wanted = f"{key}={value}".encode()
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if wanted in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
        except OSError:
            continue
    return [pid for pid in pids if pid != os.getpid()]


def wait_for_dags(af: Airflow, timeout: float = 180.0) -> dict[str, dict[str, Any]]:
    """The parsed `runoff_*` DAGs by id, once `af.dag_id` is among them (no import error
    allowed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        payload = af.api("GET", "/dags?dag_id_pattern=runoff_")
        dags = {d["dag_id"]: d for d in payload["dags"]}
        if af.dag_id in dags:
            errors = af.api("GET", "/importErrors")
            assert errors["total_entries"] == 0, errors
            return dags
        time.sleep(2)
    raise AssertionError(f"{af.dag_id} not parsed within {timeout:.0f} s")


def backfill(af: Airflow, from_date: str, to_date: str, *extra: str) -> list[str]:
    """`airflow backfill create` over [from_date, to_date] (logical dates, both inclusive: README's
    command); wait until the backfill completes; return the ids of its runs, each of which
    succeeded (a re-run with `--reprocess-behavior completed` reuses them)."""
    started = datetime.now(UTC)
    af.cli(
        "backfill",
        "create",
        "--dag-id",
        af.dag_id,
        "--from-date",
        from_date,
        "--to-date",
        to_date,
        *extra,
    )
    # The scheduler closes a backfill once its runs have finished: only then may another start.
    deadline = time.monotonic() + 2 * RUN_TIMEOUT
    while True:
        newest = max(af.api("GET", f"/backfills?dag_id={af.dag_id}")["backfills"], key=_by_id)
        if newest["completed_at"]:
            break
        if time.monotonic() > deadline:
            runs = [r["dag_run_id"] for r in af.runs("backfill")]
            details = "\n".join(af.explain(r) for r in runs)
            raise AssertionError(f"backfill {newest} not completed:\n{details}")
        time.sleep(3)
    low, high = datetime.fromisoformat(from_date), datetime.fromisoformat(to_date)
    runs = [
        r for r in af.runs("backfill") if low <= datetime.fromisoformat(r["logical_date"]) <= high
    ]
    for run in runs:
        assert run["state"] == "success", af.explain(run["dag_run_id"])
        assert datetime.fromisoformat(run["start_date"]) >= started, run
    return [r["dag_run_id"] for r in runs]


def _by_id(backfill: dict[str, Any]) -> int:
    return int(backfill["id"])
