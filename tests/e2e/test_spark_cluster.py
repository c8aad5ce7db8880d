"""runoff on a Spark standalone cluster: a master and one worker, separate JVMs on loopback.

tests/spark_cluster.py starts them with PySpark's `spark-class` (the commands of
docker/compose.yaml's `spark-master` and `spark-worker`). `runoff` runs as the real CLI, a
process of its own with `RUNOFF_SPARK_MASTER=spark://127.0.0.1:<port>`: its driver is that
process (and its JVM), its executors are JVMs the worker launches. Landing files come from
`runoff generate events` (malformed lines included); after every run, bronze, quarantine and the
silver tables must equal the independent computation of tests/expected.py over every line landed,
exactly: each line once, in bronze or in quarantine, nothing lost, nothing duplicated.

- The driver is killed (SIGKILL of the `runoff run` process and its JVM, by pid) in the middle of
  its bronze micro-batch, when bronze has committed the batch and the checkpoint has not; the
  master drops the application and the worker stops its executor. The next `runoff run`
  resumes and the tables are exact. That run's executor was a process of the worker (a JVM with
  the application's id, a child of the worker's JVM, with its folder in the worker's work dir),
  not of the driver.
- The DAG's steps as `make airflow` runs them: `dags.standalone` starts `runoff serve` with only
  the `spark_default` connection (`AIRFLOW_CONN_SPARK_DEFAULT`) naming the cluster, and the
  DAG's bronze, silver and validate operators run as clients of that server, whose application
  runs on the cluster. While bronze's micro-batch runs, its executor's JVM is killed (SIGKILL):
  the worker launches a replacement (a second executor folder of the same application), Spark
  runs the lost tasks again, every step succeeds and the tables are exact.

Every process started here is stopped by pid or process group, also when a test fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.config import RunoffConfig
from dags import standalone
from tests import expected
from tests.conftest import REPO_ROOT
from tests.spark.jobs.bronze.test_job import assert_tables_hold_exactly
from tests.spark_cluster import EXECUTOR_CLASS, SparkCluster, spark_cluster, stop_process_tree
from tests.tables import assert_silver_matches_expected

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

DATASET = "events"
FILES, ROWS = 3, 200
# The driver listens on loopback, where the worker's executors reach it.
DRIVER_CONF = "spark.driver.host=127.0.0.1,spark.driver.bindAddress=127.0.0.1"
RUN_TIMEOUT = 300.0
APP_NAME = f"runoff-run-{DATASET}"  # jobs.ops.pipeline.cmd_run's application


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A master and one worker for the module; a cluster that does not start fails the test."""
    with spark_cluster(tmp_path_factory.mktemp("spark-cluster")) as running:
        yield running


def clean_environment() -> dict[str, str]:
    """This process's environment without runoff, Airflow or Spark settings (tests set some)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RUNOFF_", "AIRFLOW", "PYSPARK_GATEWAY", "SPARK_"))
    }


@dataclass
class Pipeline:
    """A runoff home whose Spark commands run on the cluster, and every file landed in it."""

    cluster: SparkCluster
    root: Path
    files: list[expected.LandingFile] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def config(self) -> RunoffConfig:
        return RunoffConfig.from_sources(home=self.home, env={})

    def env(self) -> dict[str, str]:
        env = clean_environment()
        env.update(
            {
                "RUNOFF_HOME": str(self.home),
                "RUNOFF_SPARK_MASTER": self.cluster.master_url,
                "RUNOFF_SPARK_CONF": DRIVER_CONF,
                "PYTHONPATH": str(REPO_ROOT),
                "SPARK_LOCAL_DIRS": str(self.scratch()),
            }
        )
        return env

    def scratch(self) -> Path:
        path = self.root / "driver-scratch"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def generate(self, seed: int, start: str) -> list[expected.LandingFile]:
        """`runoff generate events` (5 % malformed lines); the new files as tests/expected.py
        reads them, remembered with every earlier file."""
        landing = Path(str(self.config.landing_dir(DATASET)))
        before = set(expected.landing_files(landing)) if landing.is_dir() else set()
        result = subprocess.run(
            [
                *(sys.executable, "-m", "jobs.cli", "generate", DATASET),
                *("--files", str(FILES), "--rows-per-file", str(ROWS), "--seed", str(seed)),
                *("--start", start, "--malformed-rate", "0.05"),
            ],
            env=self.env(),
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        new = sorted(set(expected.landing_files(landing)) - before)
        assert len(new) == FILES, new
        files = [expected.read_file(DATASET, path) for path in new]
        assert sum(f.valid for f in files) == FILES * ROWS
        assert sum(f.malformed for f in files) > 0  # quarantine has lines to hold
        self.files.extend(files)
        return files

    def start_run(self, log: str) -> Run:
        """`runoff run events` in its own process group, its output in a file."""
        path = self.root / f"{log}.log"
        with path.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "jobs.cli", "run", DATASET],
                env=self.env(),
                cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return Run(process, path, self.cluster)

    def bronze_checkpoint(self, kind: str, batch: int) -> Path:
        return Path(str(self.config.checkpoint_dir("bronze", DATASET))) / kind / str(batch)

    def assert_exact(self) -> None:
        """bronze and quarantine hold each landed line once; each silver table is, row for row,
        the aggregate of every valid line landed (read when landed: bronze archives ingested
        files out of the landing folder)."""
        assert_tables_hold_exactly(self.config, DATASET, self.files)
        assert_silver_matches_expected(self.config, DATASET, files=self.files)


@dataclass
class Run:
    process: subprocess.Popen[bytes]
    log: Path
    cluster: SparkCluster
    # Executor JVMs seen while the run lasted: pid -> (parent pid, application id).
    executors: dict[int, tuple[int, str]] = field(default_factory=dict)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, path: Path, timeout: float = RUN_TIMEOUT) -> None:
        """Until `path` exists; the run must still be going."""
        deadline = time.monotonic() + timeout
        while not path.exists():
            code = self.process.poll()
            assert code is None, f"the run ended (exit {code}) before {path}:\n{self.output()}"
            assert time.monotonic() < deadline, f"no {path} after {timeout:.0f} s"
            time.sleep(0.02)

    def finish(self, timeout: float = RUN_TIMEOUT) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the run did not end in {timeout:.0f} s:\n{self.output()}"
            ) from None

    def application(self) -> str:
        """The id of this run's application, once the master lists it as running."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            apps = [a for a in self.cluster.master_state()["activeapps"] if a["name"] == APP_NAME]
            if apps:
                assert len(apps) == 1, apps
                return str(apps[0]["id"])
            assert self.process.poll() is None, self.output()
            time.sleep(0.1)
        raise AssertionError(f"the master never listed {APP_NAME}: {self.cluster.master_state()}")

    @contextlib.contextmanager
    def watching_executors(self) -> Iterator[None]:
        """Record the executor JVMs (their parent and application) while the block runs."""
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                for executor in self.cluster.executors():
                    with contextlib.suppress(psutil.Error):
                        command = executor.cmdline()
                        app = command[command.index("--app-id") + 1]
                        self.executors.setdefault(executor.pid, (executor.ppid(), app))
                done.wait(0.2)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def stop(self) -> None:
        stop_process_tree(self.process)


@pytest.fixture
def pipeline(cluster: SparkCluster, tmp_path: Path) -> Iterator[Pipeline]:
    yield Pipeline(cluster, tmp_path)


def kill_driver(run: Run) -> list[str]:
    """SIGKILL the `runoff run` process and every descendant (its JVM), by pid, at once; the
    names of the executables killed."""
    driver = psutil.Process(run.process.pid)
    victims = [driver, *driver.children(recursive=True)]
    names = []
    for victim in victims:
        with contextlib.suppress(psutil.Error):  # a short-lived child may be gone already
            names.append(Path(victim.exe()).name)
    for victim in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            victim.send_signal(signal.SIGKILL)
    run.process.wait(timeout=60)
    return names


def wait_until(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.2)


def test_a_driver_killed_mid_batch_is_resumed_exactly_by_the_next_run(
    pipeline: Pipeline, cluster: SparkCluster
) -> None:
    pipeline.generate(seed=41, start="2024-01-01T00:00:00Z")

    # -- the driver dies mid-batch: bronze committed batch 0, the checkpoint has not ----------
    run = pipeline.start_run("killed")
    try:
        app = run.application()
        bronze_commit = Path(str(pipeline.config.bronze_path(DATASET))) / "_delta_log"
        run.wait_for(bronze_commit / f"{1:020d}.json")  # version 0 created the table
        assert not pipeline.bronze_checkpoint("commits", 0).exists(), run.output()
        killed = kill_driver(run)
    finally:
        run.stop()
    assert run.process.returncode == -signal.SIGKILL
    assert "java" in killed, killed  # the driver's JVM, with its Python process
    assert not pipeline.bronze_checkpoint("commits", 0).exists()
    # The master notices the driver is gone; the worker stops its executor.
    wait_until(
        lambda: app not in {a["id"] for a in cluster.master_state()["activeapps"]},
        f"{app} still active",
    )
    wait_until(lambda: not cluster.executors(), "the killed driver's executor still runs")

    # -- the next run resumes: every line exactly once ----------------------------------------
    rerun = pipeline.start_run("resumed")
    try:
        with rerun.watching_executors():
            app = rerun.application()
            code = rerun.finish()
    finally:
        rerun.stop()
    assert code == 0, rerun.output()
    pipeline.assert_exact()

    # -- its executor was a JVM of the worker, not of the driver ------------------------------
    wait_until(lambda: app in completed(cluster), f"{app} not completed")
    assert completed(cluster)[app] == (APP_NAME, "FINISHED")
    ran = {pid: parent for pid, (parent, app_id) in rerun.executors.items() if app_id == app}
    assert ran, f"no executor of {app} seen: {rerun.executors}"
    assert set(ran.values()) == {cluster.worker.pid}, (ran, cluster.worker.pid)
    assert rerun.process.pid not in ran
    assert cluster.executor_dirs()[app] == ["0"]  # one executor, never replaced


def completed(cluster: SparkCluster) -> dict[str, tuple[str, str]]:
    """The master's completed applications: id -> (name, state)."""
    return {a["id"]: (a["name"], a["state"]) for a in cluster.master_state()["completedapps"]}


def executors_of(cluster: SparkCluster, app: str) -> list[psutil.Process]:
    """The executor JVMs of application `app` running now."""
    found = []
    for executor in cluster.executors():
        with contextlib.suppress(psutil.Error):
            command = executor.cmdline()
            if EXECUTOR_CLASS in command and command[command.index("--app-id") + 1] == app:
                found.append(executor)
    return found


def kill_executor_mid_batch(pipeline: Pipeline, app: str, step: threading.Thread) -> None:
    """Once bronze's micro-batch 0 is planned (its tasks run), SIGKILL `app`'s executor JVM."""
    offsets = pipeline.bronze_checkpoint("offsets", 0)
    deadline = time.monotonic() + RUN_TIMEOUT
    while not offsets.exists():
        assert step.is_alive(), f"the step ended before {offsets}"
        assert time.monotonic() < deadline, f"no {offsets} after {RUN_TIMEOUT:.0f} s"
        time.sleep(0.02)
    wait_until(lambda: executors_of(pipeline.cluster, app), f"an executor of {app}")
    [executor] = executors_of(pipeline.cluster, app)
    assert executor.ppid() == pipeline.cluster.worker.pid  # a JVM the worker launched
    assert step.is_alive()
    assert not pipeline.bronze_checkpoint("commits", 0).exists()  # the batch is under way
    executor.send_signal(signal.SIGKILL)
    executor.wait(timeout=30)


def test_the_dags_steps_run_on_the_spark_connections_master_and_outlive_an_executor(
    pipeline: Pipeline, cluster: SparkCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pipeline.generate(seed=43, start="2024-01-03T00:00:00Z")
    home = pipeline.home
    # `make airflow`'s environment: only the `spark_default` connection names the cluster.
    base = clean_environment()
    base.update(
        {
            "AIRFLOW_CONN_SPARK_DEFAULT": cluster.master_url,
            "RUNOFF_SPARK_CONF": DRIVER_CONF,
            "SPARK_LOCAL_DIRS": str(pipeline.scratch()),
        }
    )
    env = standalone.airflow_env(home, standalone.free_port(), base=base)
    assert "RUNOFF_SPARK_MASTER" not in env
    server = standalone.start_server(env, home)
    try:
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))  # before Airflow's import
        monkeypatch.setenv("RUNOFF_HOME", str(home))
        monkeypatch.setenv("RUNOFF_SERVER", str(standalone.server_socket(home)))
        from dags.factory import build_dataset_dag
        from dags.operators import RunoffSubmitOperator
        from dags.outcome import read_outcome

        dag = build_dataset_dag(DATASET)
        outcomes = tmp_path / "outcomes"
        failures: list[BaseException] = []

        def execute(step: str) -> None:
            task = dag.get_task(step)
            assert isinstance(task, RunoffSubmitOperator), task
            # The arguments the DAG renders for a run.
            outcome = outcomes / f"{step}.json"
            task.application_args = ["--home", str(home), "--outcome", str(outcome)]
            task.application_args += [step, DATASET]
            try:
                task.execute(context={})
            except BaseException as exc:  # noqa: BLE001 - raised in the test's thread below
                failures.append(exc)

        bronze = threading.Thread(target=execute, args=("bronze",))
        bronze.start()
        try:
            app = server_application(cluster, server)
            # The server's application runs on the cluster; its executor dies mid-batch.
            kill_executor_mid_batch(pipeline, app, bronze)
        finally:
            bronze.join(timeout=RUN_TIMEOUT)
        assert not bronze.is_alive()
        assert not failures, failures
        for step in ("silver", "validate"):
            execute(step)
            assert not failures, failures
        # The worker replaced the executor: a second one of the same application.
        assert cluster.executor_dirs()[app] == ["0", "1"], cluster.executor_dirs()
        [executor] = executors_of(cluster, app)
        assert executor.ppid() == cluster.worker.pid
    finally:
        standalone.stop(server)
    for step in ("bronze", "silver", "validate"):  # what the DAG's publish step reads
        outcome = read_outcome(outcomes / f"{step}.json")
        assert outcome is not None and outcome["exit_code"] == 0, (step, outcome)
    pipeline.assert_exact()


def server_application(cluster: SparkCluster, server: subprocess.Popen[bytes]) -> str:
    """The id of `runoff serve`'s application, once the master lists it as running."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        apps = [a for a in cluster.master_state()["activeapps"] if a["name"] == "runoff-server"]
        if apps:
            assert len(apps) == 1, apps
            return str(apps[0]["id"])
        assert server.poll() is None, f"runoff serve exited with code {server.returncode}"
        time.sleep(0.1)
    raise AssertionError(f"the master never listed runoff serve: {cluster.master_state()}")
