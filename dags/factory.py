"""Build runoff's Airflow DAGs: one `runoff_<dataset>` DAG per dataset spec, one maintenance DAG.

Input: the table catalog (`delta_tables.catalog`: the specs of the built-in folder and of every
folder in `RUNOFF_DATASETS`; no Spark). Output: DAG objects whose tasks run the `runoff`
CLI through `spark-submit` (`SparkSubmitOperator`, connection `spark_default`: `local[*]` by
default, a cluster master by changing the connection). Nothing here imports Spark or Great
Expectations: a DAG file adds milliseconds to Airflow's own imports when it is parsed.

Grain and trigger behaviour of `runoff_<dataset>` (the spec's `schedule`, `catchup=False`,
`max_active_runs=1` because a run holds the dataset's checkpoints):

    route ─▶ reset (param full_refresh) ─▶ bronze ─▶ silver ─▶ validate ─▶ publish
      └────▶ backfill (run type "backfill") ─────────────────────┘

- A scheduled or manual run is incremental: bronze and silver are Structured Streaming jobs with
  `trigger(availableNow)` that process whatever landed since the checkpoint, then validate checks
  what changed. The run's data interval does not bound it; the checkpoint does.
- A backfill run (`airflow backfill create ...`) runs `runoff backfill <dataset> --start --end`
  with its data interval as ISO-8601 UTC times (`backfill_time`), a bounded batch re-run of
  exactly that interval (an hourly run re-runs its hour), then validate. It never touches the
  live checkpoints and is idempotent, and each quarantined line belongs to exactly one interval,
  so the hourly runs of one day together re-run the day once. Airflow runs the
  runs of a backfill in parallel (up to the backfill's own `max_active_runs`, which the DAG's does
  not bound); every step has `max_active_tis_per_dag=1`, so their Spark jobs queue instead. A
  backfill holds the dataset's checkpoint locks: a scheduled run that overlaps one fails at
  once, naming it, and Airflow retries it (exponential backoff).
- The `full_refresh` param (default false) runs `runoff reset <dataset> --layer all --yes`
  before bronze: tables and checkpoints are rebuilt from every landing file.
- Asset events are emitted by `publish` only (bronze, quarantine and every silver table are its
  outlets), which runs only when validate succeeded: an event announces data that passed its
  critical expectations. Its `extra` comes from validate's outcome file (`publish_extras`).
- Every `runoff` call writes an outcome file (`runoff --outcome PATH`, JSON: exit code, the error
  line, validate's summary) at `<home>/airflow/outcomes/<dag_id>/<run_id>/<task_id>.json`. A
  failed critical expectation (bronze/silver's per-batch gate or validate) fails its task without
  retries. A failed task calls `RunoffFailureNotifier` (`on_failure_callback`): one message naming
  the DAG, task, run and the outcome's error line, POSTed as JSON by the HTTP provider's
  `HttpNotifier` to the Airflow connection `$RUNOFF_NOTIFY_CONN_ID` (default `runoff_notify`)
  when it exists, else logged as one error line.

The runoff home comes from the Airflow Variable `runoff_home`, else the `RUNOFF_HOME` environment
variable, else `<repo>/.runoff`; it is read when a task renders its arguments (run time), except
for the Asset URIs, which the DAG file needs while it is parsed (environment or default only).
Each DAG's schedule is its spec's `schedule`. `dags/runoff_datasets.py` builds a DAG per good spec;
`dags/runoff_spec_errors.py` fails to import while a spec is refused, so the Airflow UI lists the
refused files and their problems as an import error while every other DAG still loads.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from airflow.sdk import DAG, Asset, BaseNotifier, Param, TriggerRule, task

from core.config import Location, RunoffConfig
from delta_tables.catalog import Catalog

REPO_ROOT = Path(__file__).resolve().parents[1]
# The Python file spark-submit runs: it calls `jobs.cli.main.main(argv)` and exits with its code.
SUBMIT_APPLICATION = REPO_ROOT / "jobs" / "submit.py"
# Set in the workers' environment (as `make airflow` does): tasks are clients of that
# `runoff serve` server instead of spark-submits of their own.
SERVER_ENV = "RUNOFF_SERVER"

SPARK_CONN_ID = "spark_default"
SPARK_POOL = "spark"
MAINTENANCE_SCHEDULE = "@daily"
START_DATE = pendulum.datetime(2024, 1, 1, tz="UTC")
HOME_VARIABLE = "runoff_home"
# Rendered when a task runs: the Variable wins over the environment of the worker.
HOME_EXPRESSION = "var.value.get('" + HOME_VARIABLE + "', runoff_home_default())"
HOME_TEMPLATE = "{{ " + HOME_EXPRESSION + " }}"


def outcome_template(task_id: str | None = None) -> str:
    """The outcome file of a task of the running DAG run (`outcome_path`), rendered at run time;
    `task_id` None: the task that renders it."""
    task = "task.task_id" if task_id is None else repr(task_id)
    return f"{{{{ runoff_outcome_path({HOME_EXPRESSION}, dag.dag_id, run_id, {task}) }}}}"


OUTCOME_TEMPLATE = outcome_template()
NOTIFY_CONN_ENV = "RUNOFF_NOTIFY_CONN_ID"
DEFAULT_NOTIFY_CONN_ID = "runoff_notify"
# The error class (`--outcome`'s error_type) of a failed critical expectation: a finding about
# the data, which a retry cannot fix.
QUALITY_FAILURE = "QualityCheckFailed"

log = logging.getLogger(__name__)

DEFAULT_ARGS: dict[str, Any] = {
    "owner": "runoff",
    "retries": 2,
    "retry_delay": timedelta(minutes=1),
    # Delay doubles with every retry (1 min, 2 min, ...), capped at 10 minutes.
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=10),
    # Every task starts a Spark application: the pool bounds how many run at once.
    "pool": SPARK_POOL,
}

ROUTE_INCREMENTAL = "bronze"
ROUTE_FULL_REFRESH = "reset"
ROUTE_BACKFILL = "backfill"


# -- pure helpers (unit-tested without Airflow running) -------------------------------------
def default_home(env: Mapping[str, str] | None = None) -> str:
    """`RUNOFF_HOME` of the environment (absolute), else `<repo>/.runoff`."""
    env = os.environ if env is None else env
    raw = env.get("RUNOFF_HOME") or str(REPO_ROOT / ".runoff")
    return str(Path(raw).expanduser().absolute())


def choose_route(run_type: object, full_refresh: bool) -> str:
    """The first task of a run: backfill for backfill runs, else reset or bronze.

    A backfill never resets: it only rewrites its own interval and leaves the checkpoints alone.
    """
    kind = getattr(run_type, "value", run_type)
    if kind == "backfill":
        return ROUTE_BACKFILL
    return ROUTE_FULL_REFRESH if full_refresh else ROUTE_INCREMENTAL


def backfill_time(moment: datetime) -> str:
    """A bound of a run's data interval as `runoff backfill --start/--end` takes it: ISO-8601
    in UTC, to the microsecond when there are any (2024-01-02T05:00:00+00:00).

    The backfill re-runs exactly [data_interval_start, data_interval_end) (contiguous intervals:
    `data_intervals`), so an hourly run re-runs its hour, not its day.
    """
    utc = moment.astimezone(UTC)
    return utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds")


def data_intervals(schedule: str | None) -> Any:
    """A dataset DAG's schedule as contiguous data intervals: a cron expression or preset (not
    `@once` or `@continuous`) becomes `CronDataIntervalTimetable` in UTC, so that every run,
    scheduled or backfilled, covers [previous tick, its tick), the interval `runoff backfill`
    re-runs. (Airflow 3 otherwise makes a cron string a point in time whose interval is empty.)"""
    if schedule is None or schedule in ("@once", "@continuous"):
        return schedule
    from airflow.sdk import CronDataIntervalTimetable

    return CronDataIntervalTimetable(schedule, timezone="UTC")


def load_catalog(env: Mapping[str, str] | None = None) -> Catalog:
    """The catalog as the tasks will see it: home and `RUNOFF_DATASETS` of the environment."""
    env = os.environ if env is None else env
    return Catalog.load(RunoffConfig.from_sources(home=default_home(env), env=env))


def runoff_args(command: str, dataset: str, *extra: str) -> list[str]:
    """Arguments of `jobs/cli/submit.py` (the `runoff` CLI):
    `--home <home> --outcome <outcome file> <command> <dataset> ...`."""
    return ["--home", HOME_TEMPLATE, "--outcome", OUTCOME_TEMPLATE, command, dataset, *extra]


def outcome_path(home: str, dag_id: str, run_id: str, task_id: str) -> str:
    """Where a task's `runoff --outcome` file goes:
    `<home>/airflow/outcomes/<dag_id>/<run_id>/<task_id>.json` (a run id is one path segment:
    Airflow's default `allowed_run_id_pattern` has no `/`)."""
    return str(Path(home) / "airflow" / "outcomes" / dag_id / run_id / f"{task_id}.json")


def read_outcome(path: str | Path | None) -> dict[str, Any] | None:
    """The outcome file's content; None when there is none (or it is not JSON)."""
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def outcome_arg(args: Sequence[str] | None) -> str | None:
    """The value after `--outcome` in (rendered) `runoff` arguments."""
    args = list(args or ())
    if "--outcome" in args[:-1]:
        return str(args[args.index("--outcome") + 1])
    return None


def publish_extras(
    outcome: Mapping[str, Any], assets: Sequence[Asset], dataset: str
) -> dict[str, dict[str, Any]]:
    """The `extra` of each asset's event, by asset name, from validate's outcome.

    Per table (the asset's name): its layer, validate's status, the rows it validated, the Delta
    versions validated (text and from/to), the table's expectations passed / failed (critical) /
    warnings; for the dataset: the rows quarantine gained and the Data Docs path. Raises
    `AirflowFailException` when the outcome is no passed validation: nothing is announced then.
    """
    summary = outcome.get("summary") if outcome.get("exit_code") == 0 else None
    if not isinstance(summary, Mapping) or not summary.get("passed"):
        raise AirflowFailException(
            f"no passed validation of {dataset} to publish: {outcome.get('error') or outcome}"
        )
    tables = summary.get("tables") or {}
    extras = {}
    for asset in assets:
        table = tables.get(asset.name) or {}
        extras[asset.name] = {
            "dataset": dataset,
            "table": asset.name,
            "layer": (asset.extra or {}).get("layer", table.get("layer")),
            "status": table.get("status", "not validated"),
            "rows": table.get("rows", 0),
            "versions": table.get("versions", ""),
            "from_version": table.get("from_version"),
            "to_version": table.get("to_version"),
            "quarantined_rows": summary.get("quarantined_rows", 0),
            "expectations_passed": table.get("expectations_passed", 0),
            "expectations_failed": table.get("expectations_failed", 0),
            "warnings": table.get("warnings", 0),
            "data_docs": summary.get("data_docs"),
            "validate_run_id": summary.get("run_id"),
        }
    return extras


# -- failure notifications -----------------------------------------------------------------
def failure_message(
    dag_id: str, task_id: str, run_id: str, outcome: Mapping[str, Any] | None, exception: object
) -> str:
    """One line naming the DAG, task, run and why: the outcome's error line (for a failed
    expectation it names the table and the expectation), else the task's exception."""
    reason = (outcome or {}).get("error") or (
        str(exception).strip().splitlines()[0] if str(exception or "").strip() else "see its log"
    )
    return f"runoff: task {task_id} of DAG {dag_id} failed (run {run_id}): {reason}"


def _runoff_home() -> str:
    """The home as the tasks render it: Variable `runoff_home`, else `default_home()`."""
    from airflow.sdk import Variable

    try:
        return str(Variable.get(HOME_VARIABLE, default=None) or default_home())
    except Exception:  # noqa: BLE001 - no Variable access (outside a task): the environment's
        return default_home()


def _connection_exists(conn_id: str) -> bool:
    from airflow.sdk import Connection

    try:
        Connection.get(conn_id)
    except Exception:  # noqa: BLE001 - not found, or no way to look it up: log instead
        return False
    return True


class RunoffFailureNotifier(BaseNotifier):
    """`on_failure_callback` of every runoff task: one message naming the DAG, the task, the run
    and the error line of the task's outcome file (`runoff --outcome`).

    Delivery: when the Airflow connection `conn_id` (default `$RUNOFF_NOTIFY_CONN_ID`, else
    `runoff_notify`) exists and apache-airflow-providers-http is installed, the provider's
    `HttpNotifier` POSTs `{dag_id, task_id, run_id, message}` as JSON to it (its host, port,
    schema and, in its extra, `endpoint`); otherwise the message is logged as one error line.
    """

    def __init__(self, conn_id: str | None = None) -> None:
        super().__init__()
        self.conn_id = conn_id

    def notify(self, context: Any) -> None:
        ti = context.get("ti") or context.get("task_instance")
        dag_id = str(getattr(ti, "dag_id", None) or context["dag"].dag_id)
        task_id = str(getattr(ti, "task_id", None) or context["task"].task_id)
        run_id = str(getattr(ti, "run_id", None) or context.get("run_id"))
        path = outcome_arg(getattr(context.get("task"), "application_args", None))
        if path is None or "{{" in path:  # not rendered: the task failed before it started
            path = outcome_path(_runoff_home(), dag_id, run_id, task_id)
        message = failure_message(
            dag_id, task_id, run_id, read_outcome(path), context.get("exception")
        )
        conn_id = self.conn_id or os.environ.get(NOTIFY_CONN_ENV) or DEFAULT_NOTIFY_CONN_ID
        notifier = self._http_notifier(conn_id, dag_id, task_id, run_id, message)
        if notifier is None:
            log.error("%s", message)
            return
        # `notify`, not `notifier(context)`: the message is literal text, never a template.
        notifier.notify(context)

    @staticmethod
    def _http_notifier(
        conn_id: str, dag_id: str, task_id: str, run_id: str, message: str
    ) -> BaseNotifier | None:
        try:
            from airflow.providers.http.notifications.http import HttpNotifier
        except ImportError:
            return None
        if not _connection_exists(conn_id):
            return None
        payload = {"dag_id": dag_id, "task_id": task_id, "run_id": run_id, "message": message}
        return HttpNotifier(http_conn_id=conn_id, method="POST", json=payload)


def runoff_notifier(conn_id: str | None = None) -> RunoffFailureNotifier:
    """The failure notifier of runoff's tasks (`DEFAULT_ARGS["on_failure_callback"]`)."""
    return RunoffFailureNotifier(conn_id)


DEFAULT_ARGS["on_failure_callback"] = runoff_notifier()


def spark_conf() -> dict[str, str]:
    """Spark properties of every submit: Python driver and workers run this interpreter; the
    JVMs run in UTC with runoff's quiet Spark logging (`jobs.spark.JAVA_OPTIONS`)."""
    from jobs.spark import JAVA_OPTIONS

    return {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.extraJavaOptions": JAVA_OPTIONS,
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


def dataset_assets(catalog: Catalog, dataset: str) -> dict[str, Asset]:
    """Airflow Assets for a dataset's landing files and tables (lineage in the UI)."""

    def asset(name: str, path: Location, layer: str) -> Asset:
        return Asset(
            name=name,
            uri=path.absolute().as_uri(),
            group="runoff",
            extra={"dataset": dataset, "layer": layer},
        )

    tables = catalog.tables(dataset)
    assets = {"landing": asset(f"landing_{dataset}", catalog.landing_dir(dataset), "landing")}
    assets["bronze"] = asset(tables.bronze.name, tables.bronze.path, "bronze")
    assets["quarantine"] = asset(tables.quarantine.name, tables.quarantine.path, "quarantine")
    for table in tables.silver:
        assets[table.name] = asset(table.name, table.path, "silver")
    return assets


def dataset_doc(catalog: Catalog, dataset: str) -> str:
    spec = catalog.spec(dataset)
    tables = catalog.tables(dataset)
    rows = "\n".join(f"| {t.layer} | `{t.name}` | `{t.path}` |" for t in tables)
    return f"""\
### runoff pipeline: `{dataset}`

{spec.description or dataset} (spec: `{spec.file}`)

Scheduled and manual runs are incremental (Structured Streaming, `availableNow`, checkpointed):
`bronze` ingests new landing files, `silver` updates the windowed aggregates, `validate` checks
every changed table with Great Expectations and fails on a critical expectation (its log ends
with the summary table and the Data Docs path), and `publish` emits the asset events of bronze,
quarantine and the silver tables, only after validate passed. Each event's `extra` carries
rows, Delta versions, quarantined rows, expectations passed / failed / warnings and the Data Docs
path. A failed task is notified through connection `${NOTIFY_CONN_ENV}` (default
`{DEFAULT_NOTIFY_CONN_ID}`, an HTTP connection) or, without it, logged as one error line.

| layer | table | path |
|---|---|---|
| landing | `landing_{dataset}` | `{catalog.landing_dir(dataset)}` |
{rows}

- **Backfill** (`airflow backfill create --dag-id runoff_{dataset} ...`): each backfill run
  executes `runoff backfill {dataset} --start T1 --end T2` for exactly its data interval (ISO-8601
  UTC times; an hourly run re-runs its hour), a bounded batch re-run that replaces that slice of
  bronze, quarantine and silver, is idempotent and never touches the live checkpoints.
- **Full refresh**: trigger with param `full_refresh=true` to run
  `runoff reset {dataset} --layer all --yes` before bronze.
- Every task is a `spark-submit` through connection `{SPARK_CONN_ID}` in pool `{SPARK_POOL}`;
  `max_active_runs=1` because a run holds the dataset's checkpoints.
- Home: Variable `{HOME_VARIABLE}`, else `$RUNOFF_HOME` (Asset URIs use
  `{catalog.config.home}`).
"""


# -- operators ------------------------------------------------------------------------------
class RunoffSubmitOperator(SparkSubmitOperator):
    """`SparkSubmitOperator` for the `runoff` CLI with `--outcome`: the task's outcome file is
    removed before the submit (no stale one from an earlier try), and a failed critical
    expectation fails the task at once, without retries (a finding about the data, not a
    transient error), with the CLI's error line as the reason.

    With `RUNOFF_SERVER` in the worker's environment the step runs as a `runoff` client of that
    server (`runoff serve`, started by `make airflow`): no JVM of its own, seconds instead of a
    Spark start per task. Without it, the step is a spark-submit through `spark_default`."""

    _client: subprocess.Popen[str] | None = None

    def execute(self, context: Any) -> None:
        path = outcome_arg(self.application_args)
        if path:
            Path(path).unlink(missing_ok=True)
        server = os.environ.get(SERVER_ENV)
        try:
            if server:
                self._run_client(server)
            else:
                super().execute(context)
        except AirflowException as exc:
            outcome = read_outcome(path)
            if outcome and outcome.get("error_type") == QUALITY_FAILURE:
                raise AirflowFailException(outcome.get("error") or str(exc)) from exc
            raise

    def _run_client(self, server: str) -> None:
        """The step as a client of the `runoff serve` server at `server`: the command runs in
        the server's warm Spark driver; its output is this task's log."""
        env = {**os.environ, **spark_env(), SERVER_ENV: server}
        args = [str(a) for a in self.application_args or ()]
        self.log.info("runoff %s (server %s)", " ".join(args), server)
        self._client = subprocess.Popen(
            [sys.executable, str(SUBMIT_APPLICATION), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self._client.stdout is not None
        for line in self._client.stdout:
            self.log.info("%s", line.rstrip("\n"))
        code = self._client.wait()
        if code:
            raise AirflowException(f"runoff exited with code {code}")

    def on_kill(self) -> None:
        client = self._client
        if client is None:
            super().on_kill()
            return
        if client.poll() is None:  # the client passes SIGTERM on: the server stops the command
            client.terminate()
            try:
                client.wait(timeout=60)
            except subprocess.TimeoutExpired:
                client.kill()


def runoff_submit(
    task_id: str,
    command: str,
    dataset: str,
    *extra: str,
    **kwargs: Any,
) -> SparkSubmitOperator:
    """A `RunoffSubmitOperator` running `runoff <command> <dataset> <extra...>`."""
    return RunoffSubmitOperator(
        task_id=task_id,
        conn_id=SPARK_CONN_ID,
        application=str(SUBMIT_APPLICATION),
        application_args=runoff_args(command, dataset, *extra),
        name=f"runoff-{command}-{dataset}",
        conf=spark_conf(),
        jars=submit_jars() or None,
        env_vars=spark_env(),
        # One instance of a step at a time across runs: backfill runs (which Airflow runs in
        # parallel up to the backfill's own max_active_runs) wait instead of failing on the
        # dataset's checkpoint locks and retrying.
        max_active_tis_per_dag=1,
        **kwargs,
    )


def _macros() -> dict[str, Any]:
    return {
        "runoff_home_default": default_home,
        "runoff_outcome_path": outcome_path,
        "backfill_time": backfill_time,
    }


def build_dataset_dags(catalog: Catalog | None = None) -> dict[str, DAG]:
    """A `runoff_<name>` DAG per good spec of the catalog, by DAG id."""
    catalog = catalog or load_catalog()
    return {f"runoff_{name}": build_dataset_dag(name, catalog=catalog) for name in catalog.names}


def spec_errors(catalog: Catalog | None = None) -> str | None:
    """Every refused spec file and its problems (one line each), or None when all are good."""
    catalog = catalog or load_catalog()
    if not catalog.problems:
        return None
    lines = [f"{len(catalog.problems)} dataset spec(s) refused; their DAGs are not built:"]
    for problems in catalog.problems.values():
        lines.extend(problems)
    return "\n".join(lines)


def build_dataset_dag(
    dataset: str, schedule: str | None = None, catalog: Catalog | None = None
) -> DAG:
    """`runoff_<dataset>`: route, [reset,] bronze, silver, validate, publish; or backfill then
    validate, publish."""
    catalog = catalog or load_catalog()
    spec = catalog.spec(dataset)
    assets = dataset_assets(catalog, dataset)
    silver_assets = [assets[t] for t in spec.silver_tables]
    with DAG(
        dag_id=f"runoff_{dataset}",
        description=f"landing -> bronze -> silver -> validate for {dataset}",
        schedule=data_intervals(schedule or spec.schedule),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=["runoff", dataset],
        doc_md=dataset_doc(catalog, dataset),
        params={
            "full_refresh": Param(
                False,
                type="boolean",
                description="Delete the dataset's tables and checkpoints before bronze.",
            )
        },
        user_defined_macros=_macros(),
    ) as dag:

        @task.branch(task_id="route", pool="default_pool")
        def route(**context: Any) -> str:
            """Backfill runs re-run their interval; others are incremental (full refresh first)."""
            return choose_route(
                context["dag_run"].run_type, bool(context["params"]["full_refresh"])
            )

        reset = runoff_submit("reset", "reset", dataset, "--layer", "all", "--yes")
        bronze = runoff_submit(
            "bronze",
            "bronze",
            dataset,
            inlets=[assets["landing"]],
            # Runs after reset, or straight after route when reset is skipped.
            trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
        )
        silver = runoff_submit("silver", "silver", dataset, inlets=[assets["bronze"]])
        backfill = runoff_submit(
            "backfill",
            "backfill",
            dataset,
            "--start",
            "{{ backfill_time(data_interval_start) }}",
            "--end",
            "{{ backfill_time(data_interval_end) }}",
            inlets=[assets["landing"]],
        )
        validate = runoff_submit(
            "validate",
            "validate",
            dataset,
            inlets=[assets["bronze"], *silver_assets],
            # A failed expectation is a finding, not a transient error: retrying cannot fix it.
            retries=0,
            trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
        )
        published = [assets["bronze"], assets["quarantine"], *silver_assets]

        @task(task_id="publish", pool="default_pool", outlets=published)
        def publish(outcome: str, **context: Any) -> None:
            """Emit the asset events of what validate passed, with its figures as `extra`.

            The default trigger rule: it runs only when validate succeeded."""
            data = read_outcome(outcome)
            if data is None:
                raise AirflowFailException(f"validate wrote no outcome file at {outcome}")
            extras = publish_extras(data, published, dataset)
            for asset in published:
                context["outlet_events"][asset].extra = extras[asset.name]
            log.info("publish %s: %s", dataset, json.dumps(extras, default=str))

        chosen = route()
        chosen >> [reset, bronze, backfill]
        reset >> bronze >> silver >> validate
        backfill >> validate
        validate >> publish(outcome_template("validate"))
    return dag


def build_maintenance_dag(
    datasets: Sequence[str] | None = None, catalog: Catalog | None = None
) -> DAG:
    """`runoff_maintenance`: daily `runoff maintain <dataset>` (compact, checkpoint, vacuum)."""
    catalog = catalog or load_catalog()
    home = catalog.config.home
    datasets = catalog.names if datasets is None else datasets
    tables = "\n".join(
        f"- `{name}`: " + ", ".join(f"`{t.name}`" for t in catalog.tables(name))
        for name in datasets
    )
    with DAG(
        dag_id="runoff_maintenance",
        description="compact, checkpoint and vacuum every runoff table",
        schedule=MAINTENANCE_SCHEDULE,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=["runoff", "maintenance"],
        doc_md=f"""\
### runoff maintenance

Daily `runoff maintain <dataset>` for every dataset: compacts small files, writes a Delta
checkpoint and vacuums files older than the retention (`RUNOFF_VACUUM_RETENTION_HOURS`). Tables
under `{home}/delta`:

{tables}
""",
        user_defined_macros=_macros(),
    ) as dag:
        for name in datasets:
            runoff_submit(f"maintain_{name}", "maintain", name)
    return dag
