"""Trigger-to-success of `runoff_events` through a real Airflow, with and without `runoff serve`.

`make airflow`'s Airflow (`python -m dags.standalone`: api-server, scheduler, dag-processor,
triggerer, LocalExecutor, sqlite) in a scratch home (`benchmarks/work/airflow_run`), once with
its `runoff serve` server (every task a client of one warm Spark driver: what `make airflow`
runs) and once with `--no-server` (the same-run baseline: every Spark task a spark-submit with a
JVM of its own). In each: a history first (`runoff generate events --files 4`, one triggered
run), then `REPETITIONS` times a run with nothing new and a run after a 1-file increment
(`runoff generate events --files 1`, the next hour, 200 rows), each triggered through the REST API
v2 and timed by Airflow itself: the run's `queued_at` to its `end_date`, and each task's
`duration`, read back from the API. Reported: the medians, server vs spark-submit (ratio), with
targets on the server's absolute seconds (1-file increment <= 30 s, nothing new <= 15 s), and
every run's timings and the machine's load averages in `params`.

    uv run --frozen python -m benchmarks.bench_airflow_run [--repetitions 5] [--baseline 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.result import load_average, metric, write_result

REPO_ROOT = Path(__file__).resolve().parents[1]
WORK = Path(__file__).resolve().parent / "work" / "airflow_run"
DAG_ID = "runoff_events"
HISTORY_FILES = 4
ROWS_PER_FILE = 200
STARTUP_TIMEOUT = 300.0
RUN_TIMEOUT = 600.0
TARGETS = {"1-file increment": "<= 30", "nothing new": "<= 15"}


@dataclass
class Airflow:
    url: str
    token: str

    def api(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self.url}/api/v2{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read() or b"null")

    def trigger(self, dag_id: str = DAG_ID) -> str:
        """A run of `dag_id`, triggered now; its id."""
        run = self.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None})
        return str(run["dag_run_id"])

    def wait(self, run_id: str, dag_id: str = DAG_ID) -> dict[str, Any]:
        """Wait for the run to succeed; Airflow's own timings of it and its tasks."""
        quoted = urllib.parse.quote(run_id, safe="")
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            run = self.api("GET", f"/dags/{dag_id}/dagRuns/{quoted}")
            if run["state"] in ("success", "failed"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{run_id} still {run['state']} after {RUN_TIMEOUT:.0f} s")
            time.sleep(0.5)
        if run["state"] != "success":
            raise RuntimeError(f"{dag_id} {run_id} failed")
        tasks = self.api("GET", f"/dags/{dag_id}/dagRuns/{quoted}/taskInstances")
        return {
            "run_id": run_id,
            "queued_at": run["queued_at"],
            "end_date": run["end_date"],
            "seconds": round(_seconds(run["queued_at"], run["end_date"]), 2),
            "tasks": {
                t["task_id"]: round(t["duration"], 2)
                for t in tasks["task_instances"]
                if t["duration"] is not None and t["state"] == "success"
            },
        }

    def run(self) -> dict[str, Any]:
        """Trigger DAG_ID, wait for it to end; Airflow's own timings of the run and its tasks."""
        return self.wait(self.trigger())


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "RUNOFF_")) and k != "PYTHONPATH"
    }
    # Only triggered runs: no scheduled ones in between.
    env["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "False"
    env["RUNOFF_SPARK_MASTER"] = "local[2]"
    return {**env, **(extra or {})}


def _runoff(home: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "jobs.cli", "--home", str(home), *args],
        cwd=REPO_ROOT,
        env=_environment(),
        check=True,
        capture_output=True,
    )


@contextmanager
def airflow(
    home: Path,
    server: bool,
    env: Mapping[str, str] | None = None,
    dag_ids: Sequence[str] = (DAG_ID,),
) -> Iterator[Airflow]:
    """`python -m dags.standalone` on a free port (with `env` added to its environment), once
    `dag_ids` are parsed and unpaused; stopped (its process group) at the end."""
    from dags import standalone

    port = standalone.free_port()
    log = home.parent / f"standalone-{'server' if server else 'submit'}.log"
    command = [sys.executable, "-m", "dags.standalone", "--home", str(home), "--port", str(port)]
    process = subprocess.Popen(
        [*command, *([] if server else ["--no-server"])],
        env=_environment(env),
        cwd=REPO_ROOT,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while "runoff: login admin /" not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Airflow did not start: {log.read_text()[-2000:]}")
            time.sleep(1)
        url = f"http://127.0.0.1:{port}"
        password = standalone.admin_password(home / "airflow")
        af = Airflow(url, standalone.api_token(url, password))
        while missing := set(dag_ids) - {
            d["dag_id"] for d in af.api("GET", "/dags?limit=1000")["dags"]
        }:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{sorted(missing)} not parsed")
            time.sleep(1)
        for dag_id in dag_ids:
            af.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})
        yield af
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def measure(server: bool, repetitions: int) -> dict[str, list[dict[str, Any]]]:
    """Runs with nothing new and after a 1-file increment, `repetitions` of each."""
    home = WORK / ("server" if server else "submit") / "home"
    shutil.rmtree(home.parent, ignore_errors=True)
    home.mkdir(parents=True)
    rows = str(ROWS_PER_FILE)
    _runoff(home, "generate", "events", "--files", str(HISTORY_FILES), "--rows-per-file", rows)
    timings: dict[str, list[dict[str, Any]]] = {"nothing new": [], "1-file increment": []}
    with airflow(home, server) as af:
        af.run()  # the history (and the first-run costs: imports, table creation)
        for i in range(repetitions):
            load = load_average()
            timings["nothing new"].append({**af.run(), "load_before": load})
            start = f"2024-01-01T{HISTORY_FILES + i:02d}:00:00Z"
            _runoff(home, "generate", "events", "--files", "1", "--rows-per-file", rows,
                    "--start", start, "--seed", str(100 + i))  # fmt: skip
            load = load_average()
            timings["1-file increment"].append({**af.run(), "load_before": load})
            print(
                f"{'server' if server else 'spark-submit'} #{i + 1}: nothing new "
                f"{timings['nothing new'][-1]['seconds']} s, 1-file increment "
                f"{timings['1-file increment'][-1]['seconds']} s",
                flush=True,
            )
    return timings


def median(runs: Sequence[dict[str, Any]]) -> float:
    return round(statistics.median(r["seconds"] for r in runs), 2)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_airflow_run")
    parser.add_argument("--repetitions", type=int, default=5, help="runs of each kind (server)")
    parser.add_argument("--baseline", type=int, default=3, help="runs of each kind (baseline)")
    args = parser.parse_args(argv or [])
    # SIGTERM (a timeout, Ctrl-C's cousin) unwinds through `airflow()`, which stops Airflow.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_before = load_average()
    served = measure(server=True, repetitions=args.repetitions)
    submitted = measure(server=False, repetitions=args.baseline)
    metrics = [
        metric(
            f"trigger to success, {kind} (server)",
            median(served[kind]),
            unit="s",
            target=TARGETS[kind],
        )
        for kind in TARGETS
    ] + [
        metric(
            f"trigger to success, {kind}: server vs spark-submit",
            median(served[kind]),
            unit="s",
            baseline=median(submitted[kind]),
            baseline_label="a spark-submit per task",
        )
        for kind in TARGETS
    ]
    return write_result(
        "airflow_run",
        "runoff_events through Airflow: trigger to success (Airflow's timings, median) with "
        "`runoff serve` vs a spark-submit per task.",
        metrics,
        params={
            "repetitions": args.repetitions,
            "baseline_repetitions": args.baseline,
            "history_files": HISTORY_FILES,
            "rows_per_file": ROWS_PER_FILE,
            "spark_master": "local[2]",
            "load_before": load_before,
            "load_after": load_average(),
            "server": served,
            "spark_submit": submitted,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
