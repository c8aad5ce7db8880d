"""`runoff status <dataset> [--json]`: where every table and checkpoint of a dataset stands.

Input: the dataset's Delta tables (bronze, quarantine, silver), its Structured Streaming
checkpoints, its landing folder and the run ledger. Output: one row per table (Delta version,
exact row count, data files, last committed micro-batch of the checkpoint that writes it, newest
event time, time of the last commit), the landing files not yet ingested (and the oldest of them
by modification time), the ingested files changed since with the backfill that re-reads each
(`jobs.checkpoints.landing_changes`; read-only here: nothing is recorded), and the last runs; a
rich table for people or, with `--json`, one JSON document whose keys are stable (absent tables
report `null` versions and counts; times are ISO-8601 UTC strings or `null`).

Freshness, per table: `newest_event_time` is the max of the table's event-time column
(`newest_event_column`: bronze `event_time`, quarantine `_ingested_at`, windowed silver
`window_end`, null for running totals), taken from the Delta file statistics (milliseconds,
as Delta truncates them) and read from the column only when statistics are missing;
`last_commit_at` is the commit timestamp of the table's latest version (`history(1)`).

Spark-free on purpose (fast, usable while a run holds the locks): Delta tables are read with
delta-rs, checkpoints as files through `jobs.checkpoints.files` (each table's newest committed
micro-batch; the files the bronze checkpoint's file source has ingested, compared with the
landing files by their real names, symlinks resolved).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from core.config import Location, RunoffConfig, real_name
from delta_tables.catalog import Catalog, Table
from jobs.checkpoints.files import ingested_files, last_committed
from jobs.checkpoints.landing_changes import check_landing, landing_files

RUNS_SHOWN = 5
RUN_KEYS = (
    "run_id",
    "layer",
    "trigger",
    "status",
    "started_at",
    "seconds",
    "batches",
    "files",
    "rows",
    "quarantined",
    "error",
)
# Facts of a run's `details` each run of the document has (null when the run has none).
RUN_DETAILS = ("rescued_fields",)


def bronze_checkpoint(config: RunoffConfig, dataset: str) -> Location:
    """The bronze query's checkpoint: it writes bronze and quarantine in the same micro-batch."""
    checkpoint = Catalog.load(config).tables(dataset).bronze.checkpoint
    assert checkpoint is not None
    return checkpoint


# -- landing files ---------------------------------------------------------------------------
def pending_files(files: Iterable[Location], ingested: set[str]) -> list[Location]:
    """The files of `files` that the bronze checkpoint has not ingested yet."""
    return [f for f in files if real_name(f) not in ingested]


def oldest_file(files: Iterable[Location]) -> tuple[Location, datetime] | None:
    """The file of `files` modified first (ties: the first path) and its modification time."""
    dated = [(datetime.fromtimestamp(f.stat().st_mtime, UTC), f) for f in files]
    if not dated:
        return None
    modified, path = min(dated, key=lambda pair: (pair[0], str(pair[1])))
    return path, modified


# -- Delta tables (delta-rs) -----------------------------------------------------------------
def table_facts(ref: Table) -> dict[str, Any]:
    """Version, exact row count and data file count of one table (nulls if it does not exist)."""
    facts: dict[str, Any] = {"version": None, "rows": None, "files": None}
    if not ref.exists:
        return facts
    from deltalake import DeltaTable

    from delta_tables.arrow import count_rows

    table = DeltaTable(str(ref.path))
    facts["version"] = table.version()
    facts["files"] = len(table.file_uris())
    facts["rows"] = count_rows(table)
    return facts


def last_commit_at(table: Any) -> datetime | None:
    """The commit timestamp of the latest version of a delta-rs table (None if unrecorded)."""
    commits = table.history(1)
    millis = commits[0].get("timestamp") if commits else None
    return datetime.fromtimestamp(millis / 1000, UTC) if millis is not None else None


def freshness_facts(ref: Table, column: str | None) -> dict[str, Any]:
    """Newest event time (max of `column`, from file statistics when they cover every file) and
    last commit time of one table, as aware UTC datetimes (None when absent or unknown)."""
    facts: dict[str, Any] = {
        "newest_event_column": column,
        "newest_event_time": None,
        "last_commit_at": None,
    }
    if not ref.exists:
        return facts
    from deltalake import DeltaTable

    from quality.frames import column_max, utc

    table = DeltaTable(str(ref.path))
    if column is not None and column in table.schema().to_arrow().names:
        facts["newest_event_time"] = utc(column_max(table, column))
    facts["last_commit_at"] = last_commit_at(table)
    return facts


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo else value).isoformat()
    return value


def spec_key(ref: Table) -> str:
    """How the spec names a table: `bronze`, `quarantine` or the silver table's name."""
    return ref.layer if ref.layer in ("bronze", "quarantine") else ref.name


def collect_status(config: RunoffConfig, dataset: str, runs: int = RUNS_SHOWN) -> dict[str, Any]:
    """The status document of `dataset` (what `--json` prints)."""
    from delta_tables.ledger import read_runs, run_details

    catalog = Catalog.load(config)
    spec = catalog.spec(dataset)
    tables = []
    for ref in catalog.tables(dataset):
        freshness = freshness_facts(ref, spec.newest_event_column(spec_key(ref)))
        tables.append(
            {
                "table": ref.name,
                "layer": ref.layer,
                "path": str(ref.path),
                "exists": ref.exists,
                **table_facts(ref),
                "checkpoint": str(ref.checkpoint) if ref.checkpoint else None,
                "last_batch_id": last_committed(ref.checkpoint),
                **{key: _jsonable(value) for key, value in freshness.items()},
            }
        )
    landing_dir = catalog.landing_dir(dataset)
    files = landing_files(landing_dir)
    pending = pending_files(files, ingested_files(bronze_checkpoint(config, dataset)))
    oldest = oldest_file(pending)
    ledger = read_runs(config.runs_path, dataset)
    changed = check_landing(config, dataset, runs=ledger).changed  # read-only: nothing recorded
    last_runs = ledger[-runs:] if runs else []
    return {
        "dataset": dataset,
        "home": str(config.home),
        "data": str(config.data),
        "tables": tables,
        "landing": {
            "path": str(landing_dir),
            "files": len(files),
            "pending": len(pending),
            "pending_files": [str(p.relative_to(landing_dir)) for p in pending],
            "oldest_pending_file": str(oldest[0].relative_to(landing_dir)) if oldest else None,
            "oldest_pending_modified_at": _jsonable(oldest[1]) if oldest else None,
            "changed_files": [c.to_json() for c in changed],
        },
        "runs": [
            {
                **{key: _jsonable(run.get(key)) for key in RUN_KEYS},
                **{key: run_details(run).get(key) for key in RUN_DETAILS},
            }
            for run in reversed(last_runs)
        ],
    }


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _time_cell(value: str | None) -> str:
    """An ISO-8601 time of the document as `2024-03-01 12:00:00` (UTC, to the second; `-` for
    None; `--json` has the full precision)."""
    if value is None:
        return "-"
    return datetime.fromisoformat(value).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def render_status(doc: dict[str, Any]) -> None:
    """Print the status document as rich tables."""
    from rich.table import Table as RichTable

    from core.console import console, print_whole

    tables = RichTable(title=f"runoff status: {doc['dataset']}", title_justify="left")
    columns = ("table", "layer", "version", "rows", "files", "last batch")
    for column in (*columns, "newest event UTC", "last commit UTC"):
        tables.add_column(
            column, justify="right" if column not in ("table", "layer") else "left", no_wrap=True
        )
    for t in doc["tables"]:
        tables.add_row(
            t["table"],
            t["layer"],
            _cell(t["version"]),
            _cell(t["rows"]),
            _cell(t["files"]),
            _cell(t["last_batch_id"]),
            _time_cell(t["newest_event_time"]),
            _time_cell(t["last_commit_at"]),
        )
    print_whole(tables)
    landing = doc["landing"]
    console.print(
        f"landing {landing['path']}: {landing['files']} files, {landing['pending']} pending"
    )
    if landing["oldest_pending_file"] is not None:
        console.print(
            f"oldest pending file {landing['oldest_pending_file']} "
            f"(modified {_time_cell(landing['oldest_pending_modified_at'])} UTC)",
            markup=False,
        )
    for changed in landing.get("changed_files", ()):
        console.print(changed_file_line(doc["dataset"], changed), markup=False)
    if not doc["runs"]:
        console.print("no runs recorded yet")
        return
    runs = RichTable(title="last runs (newest first)", title_justify="left")
    for column in ("started", "layer", "status", "seconds", "batches", "files", "rows", "error"):
        runs.add_column(column)
    for r in doc["runs"]:
        runs.add_row(
            _cell(r["started_at"])[:19],
            r["layer"],
            r["status"],
            f"{r['seconds']:.1f}" if r["seconds"] is not None else "-",
            _cell(r["batches"]),
            _cell(r["files"]),
            _cell(r["rows"]),
            _cell(r["error"])[:60] if r["error"] else "",
        )
    print_whole(runs)
    rescued = next((r for r in doc["runs"] if r.get("rescued_fields")), None)
    if rescued is not None:
        fields = ", ".join(f"{name} ({rows})" for name, rows in rescued["rescued_fields"].items())
        console.print(
            f"undeclared fields kept in _rescued_data by the {rescued['layer']} run of "
            f"{_cell(rescued['started_at'])[:19]}: {fields}",
            markup=False,
        )
    console.file.flush()


def changed_file_line(dataset: str, changed: dict[str, Any]) -> str:
    """`changed after ingestion: date=.../x.json (archive, 1935 -> 2100 bytes, ...): runoff
    backfill ...` for one entry of `landing.changed_files`."""
    size = (
        f"{changed['recorded_size']} -> {changed['size']} bytes"
        if changed["recorded_size"] not in (None, changed["size"])
        else f"{changed['size']} bytes"
    )
    facts = (
        f"{changed['location']}, {size}, modified {_time_cell(changed['recorded_modified_at'])} "
        f"-> {_time_cell(changed['modified_at'])} UTC"
    )
    remedy = changed["backfill"] or (
        f"not in a date= folder: `runoff reset {dataset} --layer bronze --yes` re-ingests it"
    )
    return f"changed after ingestion: {changed['file']} ({facts}): {remedy}"


def cmd_status(config: RunoffConfig, args: argparse.Namespace) -> int:
    doc = collect_status(config, args.dataset)
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=False), flush=True)
    else:
        render_status(doc)
    return 0
