"""What runoff's DAGs announce and show: Airflow Assets, their events' `extra`, the DAGs' docs.

Input: the table catalog (a dataset's landing folder and tables, its spec) and validate's outcome
(`dags.outcome`). Output: an `Asset` per landing folder and table (lineage in the UI; URIs under
the home of the environment, read when the DAG file is parsed), the `extra` of each asset event
`publish` emits (`publish_extras`), and the `doc_md` of a dataset DAG and of the maintenance DAG.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.sdk import Asset

from core.config import Location
from dags.hooks import SPARK_CONN_ID, SPARK_POOL
from dags.notifier import DEFAULT_NOTIFY_CONN_ID, NOTIFY_CONN_ENV
from dags.outcome import HOME_VARIABLE
from delta_tables.catalog import Catalog


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


def publish_extras(
    outcome: Mapping[str, Any], assets: Sequence[Asset], dataset: str
) -> dict[str, dict[str, Any]]:
    """The `extra` of each asset's event, by asset name, from validate's outcome.

    Per table (the asset's name): its layer, validate's status, the rows it validated, the Delta
    versions validated (text and from/to), the table's expectations passed / failed (critical) /
    warnings, and for a bronze or silver table the fingerprint of the definition that built it
    (`delta_tables.definitions`); for the dataset: the rows quarantine gained and the Data Docs
    path. Raises
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
        if extras[asset.name]["layer"] in ("bronze", "silver"):  # the definition of its rows
            extras[asset.name]["definition"] = table.get("definition")
    return extras


def dataset_doc(catalog: Catalog, dataset: str) -> str:
    """The `doc_md` of `runoff_<dataset>`: its runs, tables and settings."""
    spec = catalog.spec(dataset)
    tables = catalog.tables(dataset)
    rows = "\n".join(f"| {t.layer} | `{t.name}` | `{t.path}` |" for t in tables)
    silver = ", ".join(f"`{t}`" for t in spec.silver_tables)
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
- **Quarantine replay**: trigger with param `replay_quarantine=true` to run
  `runoff quarantine replay {dataset}` before bronze: the quarantined lines the current spec
  passes are published to bronze, and this run's silver and validate take them.
- **Rebuild**: trigger with param `rebuild_silver` (some of {silver}) to run
  `runoff rebuild <tables>` before bronze, after a change of their definition.
- Every task takes a slot of pool `{SPARK_POOL}`. Bronze, silver, backfill, replay and rebuild
  are a `spark-submit` through connection `{SPARK_CONN_ID}`; validate and reset, which never
  start Spark, a plain `runoff` process (a client of `runoff serve` when the worker has
  `RUNOFF_SERVER`). `max_active_runs=1` because a run holds the dataset's checkpoints.
- Home: Variable `{HOME_VARIABLE}`, else `$RUNOFF_HOME` (Asset URIs use
  `{catalog.config.home}`).
"""


def maintenance_doc(catalog: Catalog, datasets: Sequence[str]) -> str:
    """The `doc_md` of `runoff_maintenance`: what it does and the tables of `datasets`."""
    tables = "\n".join(
        f"- `{name}`: " + ", ".join(f"`{t.name}`" for t in catalog.tables(name))
        for name in datasets
    )
    return f"""\
### runoff maintenance

Daily `runoff maintain <dataset>` for every dataset: compacts small files, writes a Delta
checkpoint and vacuums files older than the retention (`RUNOFF_VACUUM_RETENTION_HOURS`). Tables
under `{catalog.config.home}/delta`:

{tables}
"""
