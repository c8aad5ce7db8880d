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

from core.config import RunoffConfig, remove_tree
from core.console import say
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


def delete_tables(config: RunoffConfig, dataset: str, tables: list[Table]) -> None:
    """Delete the tables and their checkpoints, under their locks; one ledger row."""
    from delta_tables.ledger import RunRecord, recorded_run
    from delta_tables.writes import table_version
    from jobs.streaming.query import checkpoint_locks, error_line

    names = ", ".join(t.name for t in tables)
    record = RunRecord(dataset=dataset, layer="rebuild", trigger=names)
    checkpoints = [t.checkpoint for t in tables if t.checkpoint is not None]
    with (
        recorded_run(config.runs_path, record, describe=error_line),
        checkpoint_locks(config, checkpoints, f"runoff rebuild {names}"),
    ):
        record.versions_before = {t.name: table_version(t.path) for t in tables}
        for table in tables:
            remove_tree(table.path)
            if table.checkpoint is not None:
                remove_tree(table.checkpoint)
            say(f"rebuild {table.name}: deleted the table and its checkpoint")
        record.versions_after = {t.name: -1 for t in tables}


def cmd_rebuild(config: RunoffConfig, args: argparse.Namespace) -> int:
    from jobs.silver import run_silver

    status = 0
    for dataset, tables in rebuild_targets(Catalog.load(config), list(args.table)).items():
        delete_tables(config, dataset, tables)
        record = run_silver(None, config, dataset)
        if record.status != "success":
            status = 1
    return status
