"""`runoff rebuild TABLE [TABLE ...]`: silver tables recomputed from the whole of bronze.

For a table whose spec entry changed what decides its rows (a silver run or backfill refuses it
until then: `delta_tables.definitions`), or whose rows are in doubt. Per dataset: under the
checkpoint locks of the named tables, each table and its checkpoint are deleted (one ledger row,
layer "rebuild"); then `runoff silver <dataset>` runs, in which each rebuilt table's new query
reads bronze from its first row under the spec as it is now, while the dataset's other tables
carry on from their checkpoints. A rebuild stopped after the delete is finished by the next
silver run, which finds neither table nor checkpoint. Bronze is rebuilt with `runoff reset
<dataset> --layer bronze --yes` (it re-reads landing and archive).
"""

from __future__ import annotations

import argparse

from core.config import RunoffConfig
from core.errors import ConfigError
from delta_tables.catalog import Catalog, Table


def rebuild_targets(catalog: Catalog, names: list[str]) -> dict[str, list[Table]]:
    """The named silver tables by dataset, in the order named (ConfigError for other names)."""
    datasets: dict[str, list[Table]] = {}
    for name in dict.fromkeys(names):
        try:
            table = catalog.silver_table(name)
        except ConfigError:
            declared = ", ".join(t for spec in catalog.specs for t in spec.silver_tables)
            raise ConfigError(
                f"no silver table {name!r} is declared (silver tables: {declared}); bronze is "
                "rebuilt with `runoff reset <dataset> --layer bronze --yes`"
            ) from None
        datasets.setdefault(table.dataset, []).append(table)
    return datasets


def table_names(args: list[str]) -> list[str]:
    """The tables named by the arguments, each a name or names separated by commas (how the
    Airflow param `rebuild_silver` passes its list): `["a,b", "c"]` -> `["a", "b", "c"]`."""
    return [name.strip() for arg in args for name in arg.split(",") if name.strip()]


def cmd_rebuild(config: RunoffConfig, args: argparse.Namespace) -> int:
    from jobs.silver import delete_tables, run_silver

    names = table_names(list(args.table))
    if not names:
        raise ConfigError("name the silver tables to rebuild (e.g. events_action_hourly)")
    status = 0
    for dataset, tables in rebuild_targets(Catalog.load(config), names).items():
        delete_tables(config, dataset, tables)
        record = run_silver(None, config, dataset)
        if record.status != "success":
            status = 1
    return status
