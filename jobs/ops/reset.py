"""`runoff reset <dataset> --layer bronze|silver|all --yes`: full refresh of a layer.

Input: the dataset's tables and checkpoints. Output: the layer's Delta tables and streaming
checkpoints deleted, so that the next scheduled run rebuilds them from scratch under a new
streaming query id (a new checkpoint gets a new id, hence a new Delta app id, so no batch of the
new query is mistaken for one already committed). One ledger row (layer "reset").

Layers:
- `silver`: every silver table of the dataset and their checkpoints.
- `bronze` (and `all`): bronze, quarantine and the bronze checkpoint, AND the silver layer: a
  silver checkpoint records offsets into bronze (table version, file index); once bronze is
  rebuilt from version 0 those offsets point at versions that mean something else, so the silver
  streams would silently skip or re-read data. The command says so in its output. The landing
  files the bronze stream had archived (`jobs.bronze.job.archive_dir`) are moved back into the
  landing folder (`jobs.bronze.job.restore_archive`), so that the next run ingests every file again
  (a file delivered again since, already back in landing, wins over its archived copy).

Refuses without `--yes` (one line, exit 1). Holds the checkpoint locks of everything it deletes
(the lock files live beside the checkpoints and survive the reset), so it never pulls a table from
under a running job. Landing files, the run ledger and quality results are kept (quality
recognises a recreated table by its new Delta table id).
"""

from __future__ import annotations

import argparse

from core.config import Location, RunoffConfig
from core.console import say
from core.errors import RunoffError
from delta_tables.catalog import Catalog, Table
from delta_tables.ledger import RunRecord
from jobs.streaming.query import deleting


def layers_to_reset(layer: str) -> tuple[str, ...]:
    """Which layers a reset of `layer` clears (bronze drags silver along; see module doc)."""
    if layer == "silver":
        return ("silver",)
    if layer in ("bronze", "all"):
        return ("bronze", "silver")
    raise RunoffError(f"layer {layer!r} is not one of bronze, silver, all")


def reset_targets(
    config: RunoffConfig, dataset: str, layer: str
) -> tuple[list[Table], list[Location]]:
    """The tables and the checkpoint directories a reset of `layer` deletes."""
    layers = layers_to_reset(layer)
    tables = [
        t
        for t in Catalog.load(config).tables(dataset)
        if (t.layer in ("bronze", "quarantine") and "bronze" in layers)
        or (t.layer == "silver" and "silver" in layers)
    ]
    checkpoints: list[Location] = []
    for t in tables:
        if t.checkpoint is not None and t.checkpoint not in checkpoints:
            checkpoints.append(t.checkpoint)
    return tables, checkpoints


def cmd_reset(config: RunoffConfig, args: argparse.Namespace) -> int:
    dataset: str = args.dataset
    layer: str = args.layer
    tables, _ = reset_targets(config, dataset, layer)
    names = ", ".join(t.name for t in tables)
    if not args.yes:
        raise RunoffError(
            f"reset {dataset} --layer {layer} deletes tables {names} and their checkpoints: "
            "add --yes to confirm"
        )
    gone = reset(config, dataset, layer)
    say(
        f"reset {dataset} ({', '.join(layers_to_reset(layer))}): {len(gone)} paths deleted; "
        "the next run rebuilds them from the landing files with a new streaming query id"
    )
    return 0


def reset(config: RunoffConfig, dataset: str, layer: str, command: str = "reset") -> list[str]:
    """Delete the tables and checkpoints of `layer` (see the module doc), moving the archived
    landing files back for bronze; one ledger row (layer `command`). Returns the paths deleted."""
    tables, checkpoints = reset_targets(config, dataset, layer)
    if layer == "bronze":
        doing = "resetting bronze resets" if command == "reset" else "rebuilding bronze rebuilds"
        say(
            f"{doing} silver too: the silver checkpoints of {dataset} hold offsets into the "
            "bronze table that is being rebuilt"
        )
    record = RunRecord(dataset=dataset, layer=command, trigger=layer)
    what = f"{command} {dataset} --layer {layer}"
    with deleting(config, record, tables, checkpoints, what) as gone:
        if "bronze" in layers_to_reset(layer):
            # Ingested files sit in the bronze archive: the rebuild must find them in landing.
            from jobs.bronze.job import landing_dir, restore_archive

            restored = record.files = restore_archive(config, dataset)
            say(f"moved {restored} archived files back to {landing_dir(config, dataset)}")
        record.details = {"layers": list(layers_to_reset(layer)), "deleted": gone}
    return gone
