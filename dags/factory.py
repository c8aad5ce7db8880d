"""Build runoff's Airflow DAGs: one `runoff_<dataset>` DAG per dataset spec, one maintenance DAG.

Input: the table catalog (`delta_tables.catalog`: the specs of the built-in folder and of every
folder in `RUNOFF_DATASETS`; no Spark). Output: DAG objects whose tasks run the `runoff`
CLI through `spark-submit` (`SparkSubmitOperator`, connection `spark_default`: `local[*]` by
default, a cluster master by changing the connection). Nothing here imports Spark or Great
Expectations: a DAG file adds milliseconds to Airflow's own imports when it is parsed.

Grain and trigger behaviour of `runoff_<dataset>` (the spec's `schedule`, `catchup=False`,
`max_active_runs=1` because a run holds the dataset's checkpoints):

    route ─▶ reset (param full_refresh) ─▶ bronze ─▶ silver ─▶ validate
      └────▶ backfill (run type "backfill") ─────────────────────┘

- A scheduled or manual run is incremental: bronze and silver are Structured Streaming jobs with
  `trigger(availableNow)` that process whatever landed since the checkpoint, then validate checks
  what changed. The run's data interval does not bound it; the checkpoint does.
- A backfill run (`airflow backfill create ...`) runs `runoff backfill <dataset> --start --end`, a
  bounded batch re-run of the whole UTC days that contain its data interval (see
  `backfill_days`), then validate. It never touches the live checkpoints and is idempotent, so
  the hourly runs of one day re-running that day leave the tables unchanged. Airflow runs the
  runs of a backfill in parallel (up to the backfill's own `max_active_runs`, which the DAG's does
  not bound); every step has `max_active_tis_per_dag=1`, so their Spark jobs queue instead. A
  backfill holds the dataset's checkpoint locks: a scheduled run that overlaps one fails at
  once, naming it, and Airflow retries it (exponential backoff).
- The `full_refresh` param (default false) runs `runoff reset <dataset> --layer all --yes`
  before bronze: tables and checkpoints are rebuilt from every landing file.

The runoff home comes from the Airflow Variable `runoff_home`, else the `RUNOFF_HOME` environment
variable, else `<repo>/.runoff`; it is read when a task renders its arguments (run time), except
for the Asset URIs, which the DAG file needs while it is parsed (environment or default only).
`RUNOFF_DAG_SCHEDULE` overrides the specs' schedules (e.g. `@daily`, so that a backfill over N
days creates N runs instead of 24 N). `dags/runoff_datasets.py` builds a DAG per good spec;
`dags/runoff_spec_errors.py` fails to import while a spec is refused, so the Airflow UI lists the
refused files and their problems as an import error while every other DAG still loads.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Asset, Param, TriggerRule, task

from core.config import RunoffConfig
from delta_tables.catalog import Catalog

REPO_ROOT = Path(__file__).resolve().parents[1]
# The Python file spark-submit runs: it calls `jobs.cli.main(argv)` and exits with its code.
SUBMIT_APPLICATION = REPO_ROOT / "jobs" / "submit.py"

SPARK_CONN_ID = "spark_default"
SPARK_POOL = "spark"
MAINTENANCE_SCHEDULE = "@daily"
START_DATE = pendulum.datetime(2024, 1, 1, tz="UTC")
HOME_VARIABLE = "runoff_home"
# Rendered when a task runs: the Variable wins over the environment of the worker.
HOME_TEMPLATE = "{{ var.value.get('" + HOME_VARIABLE + "', runoff_home_default()) }}"

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

    A backfill never resets: it only rewrites its own days and leaves the checkpoints alone.
    """
    kind = getattr(run_type, "value", run_type)
    if kind == "backfill":
        return ROUTE_BACKFILL
    return ROUTE_FULL_REFRESH if full_refresh else ROUTE_INCREMENTAL


def backfill_days(start: datetime, end: datetime) -> tuple[date, date]:
    """The whole UTC days [first, last) covering the data interval [start, end).

    `runoff backfill` re-runs whole days, so an hourly run's one-hour interval widens to the day
    that contains it: 2024-01-02T05:00/06:00 -> (2024-01-02, 2024-01-03); a daily interval maps to
    itself. The end is exclusive, hence `end - 1 µs`. Re-running a day is idempotent, so the
    24 hourly backfill runs of one day leave the same tables as one run.
    """
    first = start.astimezone(UTC).date()
    if end <= start:
        return first, first + timedelta(days=1)
    last = (end.astimezone(UTC) - timedelta(microseconds=1)).date() + timedelta(days=1)
    return first, last


def backfill_start(start: datetime, end: datetime) -> str:
    return backfill_days(start, end)[0].isoformat()


def backfill_end(start: datetime, end: datetime) -> str:
    return backfill_days(start, end)[1].isoformat()


def load_catalog(env: Mapping[str, str] | None = None) -> Catalog:
    """The catalog as the tasks will see it: home and `RUNOFF_DATASETS` of the environment."""
    env = os.environ if env is None else env
    return Catalog.load(RunoffConfig.from_sources(home=default_home(env), env=env))


def runoff_args(command: str, dataset: str, *extra: str) -> list[str]:
    """Arguments of `jobs/submit.py` (the `runoff` CLI): `--home <home> <command> <dataset> ...`."""
    return ["--home", HOME_TEMPLATE, command, dataset, *extra]


def spark_conf() -> dict[str, str]:
    """Spark properties of every submit: Python driver and workers run this interpreter."""
    return {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
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

    def asset(name: str, path: Path, layer: str) -> Asset:
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
with the summary table and the Data Docs path).

| layer | table | path |
|---|---|---|
| landing | `landing_{dataset}` | `{catalog.landing_dir(dataset)}` |
{rows}

- **Backfill** (`airflow backfill create --dag-id runoff_{dataset} ...`): each backfill run
  executes `runoff backfill {dataset} --start D1 --end D2` for the whole UTC days containing its
  data interval (an hourly interval widens to its day), a bounded batch re-run that replaces that
  slice of bronze and silver, is idempotent and never touches the live checkpoints.
- **Full refresh**: trigger with param `full_refresh=true` to run
  `runoff reset {dataset} --layer all --yes` before bronze.
- Every task is a `spark-submit` through connection `{SPARK_CONN_ID}` in pool `{SPARK_POOL}`;
  `max_active_runs=1` because a run holds the dataset's checkpoints.
- Home: Variable `{HOME_VARIABLE}`, else `$RUNOFF_HOME` (Asset URIs use
  `{catalog.config.home}`).
"""


# -- operators ------------------------------------------------------------------------------
def runoff_submit(
    task_id: str,
    command: str,
    dataset: str,
    *extra: str,
    **kwargs: Any,
) -> SparkSubmitOperator:
    """A `SparkSubmitOperator` running `runoff <command> <dataset> <extra...>`."""
    return SparkSubmitOperator(
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
        "backfill_start": backfill_start,
        "backfill_end": backfill_end,
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
    """`runoff_<dataset>`: route, [reset,] bronze, silver, validate; or backfill then validate."""
    catalog = catalog or load_catalog()
    spec = catalog.spec(dataset)
    assets = dataset_assets(catalog, dataset)
    silver_assets = [assets[t] for t in spec.silver_tables]
    with DAG(
        dag_id=f"runoff_{dataset}",
        description=f"landing -> bronze -> silver -> validate for {dataset}",
        schedule=schedule or os.environ.get("RUNOFF_DAG_SCHEDULE") or spec.schedule,
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
            """Backfill runs re-run their days; other runs are incremental (full refresh first)."""
            return choose_route(
                context["dag_run"].run_type, bool(context["params"]["full_refresh"])
            )

        reset = runoff_submit("reset", "reset", dataset, "--layer", "all", "--yes")
        bronze = runoff_submit(
            "bronze",
            "bronze",
            dataset,
            inlets=[assets["landing"]],
            outlets=[assets["bronze"], assets["quarantine"]],
            # Runs after reset, or straight after route when reset is skipped.
            trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
        )
        silver = runoff_submit(
            "silver", "silver", dataset, inlets=[assets["bronze"]], outlets=silver_assets
        )
        backfill = runoff_submit(
            "backfill",
            "backfill",
            dataset,
            "--start",
            "{{ backfill_start(data_interval_start, data_interval_end) }}",
            "--end",
            "{{ backfill_end(data_interval_start, data_interval_end) }}",
            inlets=[assets["landing"]],
            outlets=[assets["bronze"], *silver_assets],
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
        chosen = route()
        chosen >> [reset, bronze, backfill]
        reset >> bronze >> silver >> validate
        backfill >> validate
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
