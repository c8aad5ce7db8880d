"""Build runoff's Airflow DAGs: one `runoff_<dataset>` DAG per dataset spec, one maintenance DAG.

Input: the table catalog (`delta_tables.catalog`: the specs of the built-in folder and of every
folder in `RUNOFF_DATASETS`; no Spark). Output: DAG objects (`build_dataset_dags`,
`build_dataset_dag`, `build_maintenance_dag`) and the refused specs' report (`spec_errors`).
Their steps are `RunoffSubmitOperator`s (`dags.operators`) running the `runoff` CLI through
`spark-submit` (connection `spark_default`: `local[*]` by default, a cluster master by changing
the connection), as clients of `runoff serve`, or, for validate and reset, which never start
Spark, as a plain process; the Assets and docs come from `dags.assets`,
the failure notifier from `dags.notifier`, outcome files and the home from `dags.outcome`.
Nothing here imports Spark or Great Expectations: a DAG file adds milliseconds to Airflow's own
imports when it is parsed.

Grain and trigger behaviour of `runoff_<dataset>` (the spec's `schedule`, `catchup=False`,
`max_active_runs=1` because a run holds the dataset's checkpoints):

    route ─▶ reset (param full_refresh) ──────┬▶ bronze ─▶ silver ─▶ validate ─▶ publish
      ├────▶ replay (param replay_quarantine) ─┤                   │
      ├────▶ rebuild (param rebuild_silver) ───┘                   │
      └────▶ backfill (run type "backfill") ───────────────────────┘

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
- The `replay_quarantine` param (default false) runs `runoff quarantine replay <dataset>` before
  bronze: the quarantined lines that the current spec passes are published to bronze, and the
  run's silver and validate take them. A full refresh re-reads every line anyway: with both
  params, the run resets and does not replay.
- The `rebuild_silver` param (default empty: a list of the dataset's silver tables) runs `runoff
  rebuild <tables>` before bronze (beside a replay, if asked): each named table is recomputed from
  the whole of bronze, as a changed definition requires. A full refresh rebuilds every table.
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
- A spec's `freshness` expectations become the DAG's deadline alert (`freshness_deadline`): a run
  not finished within the smallest `max_age` after it was queued calls
  `dags.notifier.freshness_deadline_missed` (run by the executor), which sends one message naming
  the DAG, run, dataset and deadline the way a failed task's is sent. A spec without freshness
  gets no deadline.

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
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.sdk import DAG, Param, TriggerRule, task

# `airflow.sdk` exports these as well, but its type stub (`__init__.pyi`) does not list them.
from airflow.sdk.definitions.callback import SyncCallback
from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

from core.config import RunoffConfig
from core.spec_checks import failed_checks
from core.specs import DatasetSpec
from dags.assets import dataset_assets, dataset_doc, maintenance_doc, publish_extras
from dags.hooks import SPARK_POOL
from dags.notifier import freshness_deadline_missed, runoff_notifier
from dags.operators import runoff_submit
from dags.outcome import default_home, outcome_template, read_outcome, template_macros
from delta_tables.catalog import Catalog

MAINTENANCE_SCHEDULE = "@daily"
START_DATE = pendulum.datetime(2024, 1, 1, tz="UTC")

log = logging.getLogger(__name__)

DEFAULT_ARGS: dict[str, Any] = {
    "owner": "runoff",
    "retries": 2,
    "retry_delay": timedelta(minutes=1),
    # Delay doubles with every retry (1 min, 2 min, ...), capped at 10 minutes.
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=10),
    # Every step is a Spark application or a `runoff` process of its own (validate, reset): the
    # pool bounds how many run at once.
    "pool": SPARK_POOL,
    # A free slot goes to the step furthest along its run (its priority is the sum of its
    # upstream steps'): runs that started finish first, instead of every queued run's bronze
    # before any silver (benchmarks/bench_airflow_datasets.py).
    "weight_rule": "upstream",
    "on_failure_callback": runoff_notifier(),
}

ROUTE_INCREMENTAL = "bronze"
ROUTE_FULL_REFRESH = "reset"
ROUTE_REPLAY = "replay"
ROUTE_REBUILD = "rebuild"
ROUTE_BACKFILL = "backfill"


# -- pure helpers (unit-tested without Airflow running) -------------------------------------
def choose_route(
    run_type: object,
    full_refresh: bool,
    replay_quarantine: bool = False,
    rebuild_silver: Sequence[str] = (),
) -> list[str]:
    """The first tasks of a run: backfill for backfill runs, else reset, or replay and rebuild
    (each if asked), else bronze.

    A backfill never resets: it only rewrites its own interval and leaves the checkpoints alone.
    A full refresh re-reads every landed line and rebuilds every table, so it needs neither a
    replay nor a rebuild.
    """
    kind = getattr(run_type, "value", run_type)
    if kind == "backfill":
        return [ROUTE_BACKFILL]
    if full_refresh:
        return [ROUTE_FULL_REFRESH]
    first = [ROUTE_REPLAY] * replay_quarantine + [ROUTE_REBUILD] * bool(rebuild_silver)
    return first or [ROUTE_INCREMENTAL]


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


def freshness_deadline(spec: DatasetSpec) -> DeadlineAlert | None:
    """The deadline alert of a dataset's DAG: its run must finish within the smallest `max_age`
    of the spec's freshness expectations after the run was queued, else
    `dags.notifier.freshness_deadline_missed` notifies; None when the spec declares no freshness.

    The reference is the run's queued time, not its logical date. A scheduled run is queued when
    its data interval ends, so its deadline is the interval's end + max_age: the interval's newest
    data must be published while it is at most max_age old, what the freshness expectation asks
    of the tables. A logical date is the interval's start (a day before the run for a daily
    schedule, so a 2-hour deadline would be missed before the run began), is null for a manual run
    (which then gets no deadline) and lies in the past for a backfill run.

    The callback is a `SyncCallback` (the notification is synchronous, as `HttpNotifier` is):
    Airflow stores it by its import path and the executor runs it, so the executor must run
    callback workloads (`LocalExecutor` does).
    """
    ages = [(e.max_age_seconds, e) for e in spec.expectations if e.max_age_seconds is not None]
    if not ages:
        return None
    seconds, tightest = min(ages, key=lambda age: age[0])
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=timedelta(seconds=seconds),
        callback=SyncCallback(
            freshness_deadline_missed,
            kwargs={"dataset": spec.name, "table": tightest.table, "max_age": tightest.max_age},
        ),
        name=f"freshness of {spec.name}",
    )


def load_catalog(env: Mapping[str, str] | None = None) -> Catalog:
    """The catalog as the tasks will see it: home and `RUNOFF_DATASETS` of the environment."""
    env = os.environ if env is None else env
    return Catalog.load(RunoffConfig.from_sources(home=default_home(env), env=env))


def _macros() -> dict[str, Any]:
    """The DAGs' `user_defined_macros`: those the home and outcome templates call, and
    `backfill_time` (the backfill task's arguments)."""
    return {**template_macros(), "backfill_time": backfill_time}


# -- DAG builders ---------------------------------------------------------------------------
def build_dataset_dags(catalog: Catalog | None = None) -> dict[str, DAG]:
    """A `runoff_<name>` DAG per good spec of the catalog, by DAG id."""
    catalog = catalog or load_catalog()
    return {f"runoff_{name}": build_dataset_dag(name, catalog=catalog) for name in catalog.names}


def spec_errors(catalog: Catalog | None = None) -> str | None:
    """Every refused spec file and its problems (one line each), then every spec whose SQL did
    not resolve when it was last checked (`core.spec_checks`; its DAG is built, and its runs fail
    at their first Spark step without a retry), or None when all are good."""
    catalog = catalog or load_catalog()
    failed = failed_checks(catalog.config.home, catalog.specs)
    if not catalog.problems and not failed:
        return None
    lines = []
    if catalog.problems:
        lines.append(f"{len(catalog.problems)} dataset spec(s) refused; their DAGs are not built:")
        for problems in catalog.problems.values():
            lines.extend(problems)
    if failed:
        lines.append(
            f"{len(failed)} dataset spec(s) whose SQL did not resolve when last checked (`runoff "
            "check`, or a run); their runs fail until the file is fixed:"
        )
        for found in failed.values():
            lines.extend(found)
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
                description="Delete the dataset's tables and checkpoints before bronze: every "
                "table is rebuilt from the landing files, as a change of bronze's definition "
                "requires (what runoff rebuild bronze_<dataset> does).",
            ),
            "replay_quarantine": Param(
                False,
                type="boolean",
                description="Before bronze, parse the quarantined lines again with the current "
                "spec and publish those that now pass to bronze (runoff quarantine replay).",
            ),
            "rebuild_silver": Param(
                [],
                type="array",
                items={"type": "string", "enum": list(spec.silver_tables)},
                examples=list(spec.silver_tables),  # the trigger form offers them to pick
                description="Before bronze, recompute these silver tables from the whole of "
                "bronze (runoff rebuild), as a change of their definition requires.",
            ),
        },
        user_defined_macros=_macros(),
        deadline=freshness_deadline(spec),
    ) as dag:

        @task.branch(task_id="route", pool="default_pool")
        def route(**context: Any) -> list[str]:
            """Backfill runs re-run their interval; others are incremental (a full refresh, or a
            quarantine replay and a rebuild, first)."""
            params = context["params"]
            return choose_route(
                context["dag_run"].run_type,
                bool(params["full_refresh"]),
                bool(params.get("replay_quarantine", False)),
                list(params.get("rebuild_silver") or ()),
            )

        reset = runoff_submit("reset", "reset", dataset, "--layer", "all", "--yes")
        replay = runoff_submit("replay", "quarantine replay", dataset)
        # `runoff rebuild` takes the tables as one argument, comma-separated.
        rebuild = runoff_submit(
            "rebuild",
            "rebuild",
            "{{ params.rebuild_silver | join(',') }}",
            name=f"runoff-rebuild-{dataset}",
        )
        bronze = runoff_submit(
            "bronze",
            "bronze",
            dataset,
            inlets=[assets["landing"]],
            # Runs after reset, replay or rebuild, or straight after route when all are skipped.
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
        chosen >> [reset, replay, rebuild, bronze, backfill]
        [reset, replay, rebuild] >> bronze >> silver >> validate
        backfill >> validate
        validate >> publish(outcome_template("validate"))
    return dag


def build_maintenance_dag(
    datasets: Sequence[str] | None = None, catalog: Catalog | None = None
) -> DAG:
    """`runoff_maintenance`: daily `runoff maintain <dataset>` (compact, checkpoint, vacuum)."""
    catalog = catalog or load_catalog()
    datasets = catalog.names if datasets is None else datasets
    with DAG(
        dag_id="runoff_maintenance",
        description="compact, checkpoint and vacuum every runoff table",
        schedule=MAINTENANCE_SCHEDULE,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=["runoff", "maintenance"],
        doc_md=maintenance_doc(catalog, datasets),
        user_defined_macros=_macros(),
    ) as dag:
        for name in datasets:
            runoff_submit(f"maintain_{name}", "maintain", name)
    return dag
