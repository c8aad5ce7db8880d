"""`runoff rebuild TABLE [TABLE ...]`: tables recomputed under the spec as it is now.

For a table whose spec changed what decides its rows (runs refuse it until then:
`delta_tables.definitions`), or whose rows are in doubt.

- A silver table is recomputed from the whole of bronze. Per dataset: under the checkpoint locks
  of the named tables, each table and its checkpoint are deleted (one ledger row, layer
  "rebuild"); then `runoff silver <dataset>` runs, in which each rebuilt table's new query reads
  bronze from its first row, while the dataset's other tables carry on from their checkpoints.
- A bronze table (`bronze_<dataset>`) is recomputed from the landing files: what `runoff reset
  <dataset> --layer bronze` deletes is deleted (bronze, quarantine, their checkpoint and every
  silver table of the dataset, whose checkpoints point into the old bronze; the archived landing
  files move back to landing), then `runoff bronze` and `runoff silver` run.

A rebuild stopped after the delete is finished by the next run, which finds neither tables nor
checkpoints.
"""

from __future__ import annotations

import argparse

from core.config import RunoffConfig
from core.errors import ConfigError
from delta_tables.catalog import Catalog, Table


def rebuild_targets(catalog: Catalog, names: list[str]) -> dict[str, list[Table]]:
    """The named tables by dataset, in the order named (ConfigError for other names)."""
    datasets: dict[str, list[Table]] = {}
    bronze = {catalog.tables(spec.name).bronze.name: spec.name for spec in catalog.specs}
    for name in dict.fromkeys(names):
        if name in bronze:
            datasets.setdefault(bronze[name], []).append(catalog.tables(bronze[name]).bronze)
            continue
        try:
            table = catalog.silver_table(name)
        except ConfigError:
            declared = ", ".join(
                [*bronze, *(t for spec in catalog.specs for t in spec.silver_tables)]
            )
            raise ConfigError(
                f"no bronze or silver table {name!r} is declared (tables: {declared})"
            ) from None
        datasets.setdefault(table.dataset, []).append(table)
    return datasets


def table_names(args: list[str]) -> list[str]:
    """The tables named by the arguments, each a name or names separated by commas (how the
    Airflow param `rebuild_silver` passes its list): `["a,b", "c"]` -> `["a", "b", "c"]`."""
    return [name.strip() for arg in args for name in arg.split(",") if name.strip()]


def cmd_rebuild(config: RunoffConfig, args: argparse.Namespace) -> int:
    from jobs.bronze.job import run_bronze
    from jobs.ops.reset import reset
    from jobs.silver import delete_tables, run_silver

    names = table_names(list(args.table))
    if not names:
        raise ConfigError("name the tables to rebuild (e.g. events_action_hourly, bronze_events)")
    status = 0
    for dataset, tables in rebuild_targets(Catalog.load(config), names).items():
        if any(t.layer == "bronze" for t in tables):
            reset(config, dataset, "bronze", command="rebuild")
            if run_bronze(None, config, dataset).status != "success":
                status = 1
                continue
        else:
            delete_tables(config, dataset, tables)
        record = run_silver(None, config, dataset)
        if record.status != "success":
            status = 1
    return status
