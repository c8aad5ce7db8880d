"""`runoff quarantine list <dataset> [--reason R] [--file F] [--since T] [--json]`: what
quarantine holds (`runoff quarantine replay`: `jobs.ops.replay`).

Input: the dataset's quarantine table (`delta/quarantine/<dataset>`, one row per malformed line:
`delta_tables.schemas.QUARANTINE_SCHEMA`), read with delta-rs: no JVM, and usable while a run
holds the locks. Output: the lines held, counted by reason and by landing file, and a sample of
them (file, line number, the error, the start of the line), the oldest first; a rich table for
people or, with `--json`, one JSON document.

A line's reason is its `_error` up to the first `": "`: one of the parse errors of
`jobs.bronze.parse.ERRORS` (`unparseable JSON`, `missing required field`, ...) or `rule failed`
for the spec's row rules; the rest of `_error` names the fields or rules. `--reason` keeps the
lines of one reason, `--file` those of one landing file (its URI, path or name: `file_matches`),
`--since` those ingested at or after a time (a date is midnight UTC).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import datetime
from typing import Any

from core.config import RunoffConfig
from core.errors import ConfigError
from delta_tables.catalog import Catalog

SAMPLE_LINES = 10
SHOWN_CHARS = 100  # of a sampled line, in the table for people (JSON has the whole line)
COLUMNS = ("_raw", "_error", "_source_file", "_line_number", "_ingested_at")


def reason_of(error: str) -> str:
    """The kind of an `_error`: `wrong type: amount (double)` -> `wrong type`."""
    return error.split(": ", 1)[0]


def file_matches(source_file: str, wanted: str) -> bool:
    """Whether `wanted` (a URI, a path or a file name) names the landing file `source_file`."""
    wanted = wanted.strip()
    return source_file == wanted or source_file.endswith("/" + wanted.lstrip("/"))


def collect_quarantine(
    config: RunoffConfig,
    dataset: str,
    reason: str | None = None,
    since: datetime | None = None,
    file: str | None = None,
) -> dict[str, Any]:
    """The quarantine document of `dataset` (module doc); `lines` is 0 and `exists` false when
    bronze has made no quarantine table yet."""
    from delta_tables.arrow import read_arrow
    from delta_tables.writes import is_delta_table

    table = Catalog.load(config).tables(dataset).quarantine
    doc: dict[str, Any] = {
        "dataset": dataset,
        "table": table.name,
        "path": str(table.path),
        "exists": is_delta_table(table.path),
        "reason": reason,
        "file": file,
        "since": since.isoformat() if since else None,
        "lines": 0,
        "by_reason": {},
        "by_file": {},
        "sample": [],
        "reasons_held": [],
    }
    if not doc["exists"]:
        return doc
    where = [f"_ingested_at >= TIMESTAMP '{since.isoformat()}'"] if since else []
    rows = read_arrow(str(table.path), COLUMNS, where).to_pylist()
    for r in rows:
        r["reason"] = reason_of(r["_error"] or "")
    if file is not None:
        rows = [r for r in rows if file_matches(r["_source_file"] or "", file)]
    doc["reasons_held"] = sorted({r["reason"] for r in rows})
    if reason is not None:
        rows = [r for r in rows if r["reason"] == reason]
    rows.sort(key=lambda r: (r["_ingested_at"], r["_source_file"] or "", r["_line_number"] or 0))
    by_reason = Counter(r["reason"] for r in rows)
    by_file = Counter(r["_source_file"] for r in rows)
    doc["lines"] = len(rows)
    doc["by_reason"] = dict(sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0])))
    doc["by_file"] = dict(sorted(by_file.items(), key=lambda kv: (-kv[1], kv[0])))
    doc["sample"] = [
        {
            "file": r["_source_file"],
            "line": r["_line_number"],
            "error": r["_error"],
            "ingested_at": r["_ingested_at"].isoformat(),
            "raw": r["_raw"],
        }
        for r in rows[:SAMPLE_LINES]
    ]
    return doc


def render_quarantine(doc: dict[str, Any]) -> None:
    """Print the quarantine document as rich tables."""
    from rich.table import Table as RichTable
    from rich.text import Text  # values from the data: never read as markup

    from core.console import console, print_whole

    plural = "" if doc["lines"] == 1 else "s"
    held = f"{doc['table']}: {doc['lines']} quarantined line{plural}"
    filters = [
        f"reason {doc['reason']!r}" if doc["reason"] else "",
        f"file {doc['file']}" if doc["file"] else "",
        _since(doc),
    ]
    if any(filters):
        held += f" ({', '.join(f for f in filters if f)})"
    if not doc["exists"]:
        console.print(f"{doc['table']}: no quarantine table yet ({doc['path']})", markup=False)
        return
    console.print(held, markup=False)
    if not doc["lines"]:
        if doc["reason"] and doc["reasons_held"]:
            reasons = ", ".join(doc["reasons_held"])
            console.print(f"reasons held: {reasons}", markup=False)
        return
    counts = RichTable(title="by reason", title_justify="left")
    counts.add_column("reason")
    counts.add_column("lines", justify="right")
    for reason, lines in doc["by_reason"].items():
        counts.add_row(Text(reason), str(lines))
    print_whole(counts)
    files = RichTable(title="by landing file", title_justify="left")
    files.add_column("file", overflow="fold")
    files.add_column("lines", justify="right")
    for name, lines in doc["by_file"].items():
        files.add_row(Text(str(name)), str(lines))
    print_whole(files)
    sample = RichTable(
        title=f"the first {len(doc['sample'])} lines (oldest first)", title_justify="left"
    )
    for column in ("file:line", "error", "line"):
        sample.add_column(column, overflow="fold")
    for line in doc["sample"]:
        row = (f"{line['file']}:{line['line']}", line["error"], shown_line(line["raw"]))
        sample.add_row(*(Text(cell) for cell in row))
    print_whole(sample)
    console.file.flush()


def shown_line(raw: str | None) -> str:
    """A sampled line as the table shows it: its first `SHOWN_CHARS` characters."""
    raw = raw or ""
    return raw if len(raw) <= SHOWN_CHARS else raw[:SHOWN_CHARS] + "..."


def _since(doc: dict[str, Any]) -> str:
    return f"ingested since {doc['since']}" if doc["since"] else ""


def cmd_quarantine(config: RunoffConfig, args: argparse.Namespace) -> int:
    if args.action == "replay":
        if args.json:
            raise ConfigError(
                "`runoff quarantine replay` has no --json output: it prints what it published; "
                "`runoff quarantine list --json` shows what quarantine holds"
            )
        from jobs.ops.replay import Choice, run_replay

        choice = Choice(reason=args.reason, file=args.file, since=args.since)
        record = run_replay(None, config, args.dataset, choice)
        return 0 if record.status == "success" else 1
    doc = collect_quarantine(config, args.dataset, args.reason, args.since, args.file)
    if args.json:
        print(json.dumps(doc, indent=2), flush=True)
    else:
        render_quarantine(doc)
    return 0
