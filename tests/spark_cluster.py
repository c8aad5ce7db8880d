"""A Spark standalone cluster on loopback: one master and one worker, each its own JVM.

Both are started with PySpark's own `spark-class` (SPARK_HOME = the installed pyspark package), the
launcher docker/compose.yaml's `spark-master` and `spark-worker` services run: the command lines
come from `master_command` and `worker_command` here, and tests/unit/docker/test_compose_cluster.py
checks that the compose services run the same classes with the same flags (only hosts, ports and
paths differ).

`spark_cluster(root)` starts the master, then the worker (2 cores, 2g, its own `--work-dir`
under `root`), on 127.0.0.1 with free ports, waits until the master's JSON (`/json/` of its web
UI) lists the worker ALIVE, and yields a `SparkCluster` whose `master_url` is the
`spark://127.0.0.1:<port>` a driver connects to. On the way out, also after a failure, it stops
every process it started by process group (the master, the worker and the executors the worker
launched), then kills by pid any of their descendants that left those groups (PySpark's
daemons make their own).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from dags.standalone import free_port
from tests.conftest import REPO_ROOT

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# The one worker's resources (docker/compose.yaml's worker has the same).
WORKER_CORES = 2
WORKER_MEMORY = "2g"
# An executor is this class's JVM, a child of the worker's JVM.
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
START_TIMEOUT = 120.0


def spark_home() -> Path:
    """The installed pyspark package: its `bin/spark-class` and `jars/` are a Spark distribution."""
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.submodule_search_locations, "pyspark is not installed"
    return Path(next(iter(spec.submodule_search_locations)))


def spark_class() -> Path:
    return spark_home() / "bin" / "spark-class"


def master_command(spark_class: str, host: str, port: int, webui_port: int) -> list[str]:
    """The master's command line: `spark-class <Master> --host H --port P --webui-port W`."""
    return [
        spark_class,
        MASTER_CLASS,
        "--host",
        host,
        "--port",
        str(port),
        "--webui-port",
        str(webui_port),
    ]


def worker_command(
    spark_class: str, master_url: str, host: str, port: int, webui_port: int, work_dir: str
) -> list[str]:
    """The worker's command line: `spark-class <Worker> <master URL> --host H --port P
    --webui-port W --cores C --memory M --work-dir D` (executors' folders go in D)."""
    return [
        spark_class,
        WORKER_CLASS,
        master_url,
        "--host",
        host,
        "--port",
        str(port),
        "--webui-port",
        str(webui_port),
        "--cores",
        str(WORKER_CORES),
        "--memory",
        WORKER_MEMORY,
        "--work-dir",
        work_dir,
    ]


def cluster_env(scratch: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the master, the worker and so of the executors: PySpark's Spark, on
    loopback, Python workers on this interpreter (the venv's) with the repository importable,
    executors' scratch space (shuffle and spill files) in `scratch`."""
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if not k.startswith(("RUNOFF_", "AIRFLOW", "PYSPARK_GATEWAY", "SPARK_"))
    }
    env.update(
        {
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_LOCAL_DIRS": str(scratch),
            "SPARK_DAEMON_MEMORY": "512m",  # the master's and worker's heaps, not executors'
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": str(REPO_ROOT),
        }
    )
    return env


def get_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        data: dict[str, Any] = json.loads(response.read())
        return data


@dataclass
class SparkCluster:
    master_url: str  # spark://127.0.0.1:<port>
    master_ui: str  # http://127.0.0.1:<webui port>
    worker_ui: str
    work_dir: Path  # the worker's --work-dir: <app id>/<executor id>/ per executor it launched
    logs: Path
    master: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def master_state(self) -> dict[str, Any]:
        """The master's JSON: workers, active and completed applications."""
        return get_json(f"{self.master_ui}/json/")

    def worker_state(self) -> dict[str, Any]:
        """The worker's JSON: its running and finished executors."""
        return get_json(f"{self.worker_ui}/json/")

    def executors(self) -> list[psutil.Process]:
        """The executor JVMs running now: descendants of the worker started here. (A process an
        executor is forking has the executor's command line for a moment: left out.)"""
        found = {}
        for process in psutil.Process(self.worker.pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                if EXECUTOR_CLASS in process.cmdline():
                    found[process.pid] = process
        return [p for p in found.values() if _parent_pid(p) not in found]

    def executor_dirs(self) -> dict[str, list[str]]:
        """Executor ids per application id, from the worker's work dir (one folder each)."""
        if not self.work_dir.is_dir():
            return {}
        return {
            app.name: sorted(e.name for e in app.iterdir() if e.is_dir())
            for app in sorted(self.work_dir.iterdir())
            if app.is_dir()
        }

    def log_tails(self, lines: int = 30) -> str:
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path.name}:\n" + "\n".join(tail))
        return "\n".join(parts)


def _parent_pid(process: psutil.Process) -> int | None:
    try:
        return process.ppid()
    except psutil.Error:
        return None


def _start(command: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            command,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped with its children
            cwd=log.parent,
        )


def stop_process_tree(process: subprocess.Popen[Any], timeout: float = 15.0) -> None:
    """Stop `process`, its process group and every descendant of it, by pid: SIGTERM to the
    group, SIGKILL after `timeout`; descendants that left the group are killed by pid."""
    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # what is left of the group
    if process.poll() is None:
        process.wait(timeout=timeout)
    for child in descendants:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(descendants, timeout=timeout)


def _wait_for_worker(cluster: SparkCluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, process in (("master", cluster.master), ("worker", cluster.worker)):
            if process.poll() is not None:
                raise RuntimeError(
                    f"the {name} exited with code {process.returncode}:\n" + cluster.log_tails()
                )
        try:
            workers = cluster.master_state().get("workers", [])
        except (urllib.error.URLError, OSError, ValueError):
            workers = []
        if any(w.get("state") == "ALIVE" and w.get("host") == HOST for w in workers):
            return
        time.sleep(0.5)
    raise RuntimeError(
        f"no worker registered with {cluster.master_url} within {timeout:.0f} s:\n"
        + cluster.log_tails()
    )


@contextlib.contextmanager
def spark_cluster(root: Path, timeout: float = START_TIMEOUT) -> Iterator[SparkCluster]:
    """A master and one worker on 127.0.0.1, logs and the worker's work dir under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    work_dir = root / "work"
    work_dir.mkdir(exist_ok=True)
    scratch = root / "scratch"
    scratch.mkdir(exist_ok=True)
    env = cluster_env(scratch)
    launcher = str(spark_class())
    ports: set[int] = set()
    while len(ports) < 4:
        ports.add(free_port(HOST))
    port, master_web, worker_port, worker_web = sorted(ports)
    master_url = f"spark://{HOST}:{port}"
    started: list[subprocess.Popen[bytes]] = []
    try:
        master = _start(master_command(launcher, HOST, port, master_web), env, logs / "master.log")
        started.append(master)
        worker = _start(
            worker_command(launcher, master_url, HOST, worker_port, worker_web, str(work_dir)),
            env,
            logs / "worker.log",
        )
        started.append(worker)
        cluster = SparkCluster(
            master_url=master_url,
            master_ui=f"http://{HOST}:{master_web}",
            worker_ui=f"http://{HOST}:{worker_web}",
            work_dir=work_dir,
            logs=logs,
            master=master,
            worker=worker,
            started=started,
        )
        _wait_for_worker(cluster, timeout)
        yield cluster
    finally:
        for process in reversed(started):  # the worker (and its executors) first
            stop_process_tree(process)
