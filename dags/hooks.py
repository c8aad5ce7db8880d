"""How a task runs the `runoff` CLI: the spark-submit settings and `RunoffCliHook`.

Input: a task's rendered `runoff` arguments (`--home H --outcome O <command> <dataset> ...`) and
the worker's environment. Output: the finished call, or `AirflowException` (the CLI failed) /
`AirflowFailException` (what a retry cannot fix, read from its outcome file: a failed critical
expectation, or a configuration error, exit 2: no retry).

- Spark settings of every spark-submit: the application (`jobs/cli/submit.py`), the connection
  (`spark_default`) and pool (`spark`), the conf (this interpreter, UTC JVMs, quiet logging),
  delta-spark's jars and the process environment (`spark_env`).
- `RunoffCliHook`, one per task try: with `RUNOFF_SERVER` in the worker's environment it starts the
  CLI as a client of that `runoff serve` server (its output is the task log; `on_kill` sends
  SIGTERM, which the client passes on to the server, and SIGKILL after 60 s); without it, a
  command that never starts Spark (`jobs.cli.main.SPARK_FREE_COMMANDS`: validate, reset) runs as
  a plain `runoff` process in the worker, the same way, and the others are the spark-submit of
  `SparkSubmitOperator` (the provider's `SparkSubmitHook` owns that process). Either way it
  removes the outcome file of an earlier try first and reads it after a failure.
- `lineage_parent`: the task instance as the OpenLineage parent of the runs its call records.

No Spark import: `jobs.spark` (which imports none at top level) is imported when settings are read.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from airflow.sdk import BaseHook

from core.errors import ConfigError
from dags.outcome import QUALITY_FAILURE, REPO_ROOT, outcome_arg, read_outcome
from jobs.cli.main import SPARK_FREE_COMMANDS, build_parser

log = logging.getLogger(__name__)

# The Python file spark-submit runs: it calls `jobs.cli.main.main(argv)` and exits with its code.
SUBMIT_APPLICATION = REPO_ROOT / "jobs" / "cli" / "submit.py"
# Set in the workers' environment (as `make airflow` does): tasks are clients of that
# `runoff serve` server instead of spark-submits of their own.
SERVER_ENV = "RUNOFF_SERVER"
SPARK_CONN_ID = "spark_default"
# Every spark-submit starts a Spark application: the pool bounds how many run at once.
SPARK_POOL = "spark"
# How long a stopped `runoff` process (a client passing SIGTERM on, or the command itself) may
# take to exit before it is killed.
CLIENT_STOP_TIMEOUT = 60


# -- spark-submit settings ------------------------------------------------------------------
def spark_conf() -> dict[str, str]:
    """Spark properties of every submit: Python driver and workers run this interpreter; the
    JVMs run in UTC with runoff's quiet Spark logging (`jobs.spark.JAVA_OPTIONS`), the driver
    from the class archive when `make install` made it (`jobs.spark.driver_java_options`)."""
    from jobs.spark import JAVA_OPTIONS, driver_java_options

    return {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.extraJavaOptions": driver_java_options(),
        "spark.executor.extraJavaOptions": JAVA_OPTIONS,
    }


def submit_jars() -> str:
    """delta-spark's jars for `spark-submit --jars` (jobs.spark.delta_jars). When they are not
    installed the DAG still loads: the task then fails with the one-line remedy."""
    from core.errors import ConfigError
    from jobs.spark import delta_jars

    try:
        return ",".join(delta_jars())
    except ConfigError:
        return ""


def spark_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of the spark-submit process.

    The worker's interpreter runs the driver and the Python workers; the repository is on
    PYTHONPATH so `jobs`, `delta_tables` and `quality` import; the interpreter's `bin` (where the
    venv's `spark-submit` lives) leads PATH, which is also where Popen looks the binary up.
    """
    env = os.environ if env is None else env
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    spark = {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": pythonpath,
        "PATH": path,
    }
    if env.get("RUNOFF_DATASETS"):  # the spec folders the DAGs were built from
        spark["RUNOFF_DATASETS"] = env["RUNOFF_DATASETS"]
    return spark


def lineage_parent(context: Mapping[str, Any]) -> dict[str, str]:
    """The task as the parent of the runs its call records (`jobs.lineage`): the
    `OPENLINEAGE_PARENT_ID` and `OPENLINEAGE_ROOT_PARENT_ID` of its task instance, as Airflow's
    OpenLineage provider names the task and the DAG run in its own events (its
    `lineage_parent_id` and `lineage_root_parent_id` macros), so that both join in one graph.
    Empty when the call sends no lineage (OpenLineage is not configured in the worker's
    environment), or when they cannot be made: lineage never fails a task."""
    from jobs.lineage import PARENT_ENV, ROOT_PARENT_ENV, configured

    if not configured(os.environ):
        return {}
    try:
        from airflow.providers.openlineage.plugins.macros import (
            lineage_parent_id,
            lineage_root_parent_id,
        )

        ti = context["ti"]
        return {PARENT_ENV: lineage_parent_id(ti), ROOT_PARENT_ENV: lineage_root_parent_id(ti)}
    except Exception as exc:  # noqa: BLE001 - the task runs without a lineage parent
        log.warning("no OpenLineage parent for this task: %s", exc)
        return {}


# -- the hook ------------------------------------------------------------------------------
def command_of(args: Sequence[str]) -> str | None:
    """The `runoff` command of a task's arguments (`--home H --outcome O <command> ...`), None
    when they are not a valid call (the CLI then says why, in whatever runs it)."""
    try:
        return str(build_parser().parse_args(list(args)).command)
    except SystemExit:
        return None


class RunoffCliHook(BaseHook):
    """One `runoff` call of a task: a client of `runoff serve` when `server` is set (default: the
    worker's `$RUNOFF_SERVER`), else a plain process for a command that never starts Spark, else
    the spark-submit it is given; its outcome file is removed before and read after a failure."""

    def __init__(
        self,
        application_args: Sequence[Any] | None,
        server: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.args = [str(a) for a in application_args or ()]
        self.env = dict(env or {})  # added to the worker's environment (`lineage_parent`)
        self.outcome = outcome_arg(self.args)
        self.server = os.environ.get(SERVER_ENV) if server is None else server
        self.command = command_of(self.args)
        self._process: subprocess.Popen[str] | None = None

    def get_conn(self) -> None:
        """No connection of its own: spark-submit's is `spark_default` (`SparkSubmitHook`)."""
        return None

    def run(self, spark_submit: Callable[[], object]) -> None:
        """The call: as a client of the server when there is one, else as a plain process when
        the command never starts Spark (a spark-submit would start a JVM for nothing: seconds and
        hundreds of megabytes), else `spark_submit()`.

        A failed critical expectation (the outcome's `error_type`) or a configuration error (its
        exit code 2: a spec, a setting or an argument at fault) becomes `AirflowFailException`
        with the CLI's error line: the task fails at once, without retries (a finding about the
        data or the configuration, not a transient error). Any other failure is raised as it is.
        """
        if self.outcome:  # no stale outcome of an earlier try
            Path(self.outcome).unlink(missing_ok=True)
        try:
            if self.server:
                self.run_cli(self.server)
            elif self.command in SPARK_FREE_COMMANDS:
                self.run_cli(None)
            else:
                spark_submit()
        except AirflowException as exc:
            failure = self.final_failure(exc)
            if failure is None:
                raise
            raise failure from exc

    def read_outcome(self) -> dict[str, Any] | None:
        """The call's outcome file (`--outcome`), None when it wrote none."""
        return read_outcome(self.outcome)

    def final_failure(self, exc: BaseException) -> AirflowFailException | None:
        """`AirflowFailException` with the outcome's error line when the call failed a critical
        expectation or exited 2 (configuration), else None."""
        outcome = self.read_outcome()
        if not outcome:
            return None
        if outcome.get("error_type") == QUALITY_FAILURE:
            return AirflowFailException(outcome.get("error") or str(exc))
        if outcome.get("exit_code") == ConfigError.exit_code:
            error = outcome.get("error") or str(exc)
            return AirflowFailException(f"{error} (a configuration error: not retried)")
        return None

    def run_cli(self, server: str | None) -> None:
        """The call as a `runoff` process: a client of the `runoff serve` server at `server`
        (the command runs in the server's warm Spark driver), or with no server, the command
        itself; its output is logged line by line (the task log)."""
        env = {k: v for k, v in os.environ.items() if k != SERVER_ENV}
        env.update(spark_env())
        env.update(self.env)
        if server:
            env[SERVER_ENV] = server
        where = f"server {server}" if server else "no Spark: in this worker"
        self.log.info("runoff %s (%s)", " ".join(self.args), where)
        self._process = subprocess.Popen(
            [sys.executable, str(SUBMIT_APPLICATION), *self.args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self.log.info("%s", line.rstrip("\n"))
        code = self._process.wait()
        if code:
            raise AirflowException(f"runoff exited with code {code}")

    @property
    def started_process(self) -> bool:
        """Whether this call started a `runoff` process (else `on_kill` is spark-submit's
        business)."""
        return self._process is not None

    def on_kill(self) -> None:
        """Stop the process: SIGTERM (a client passes it on and the server stops the command;
        a command stops itself), then SIGKILL when it has not exited within
        `CLIENT_STOP_TIMEOUT` seconds."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=CLIENT_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
