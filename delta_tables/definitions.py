"""The definition a silver table was built by, kept with the table, and what a run does when the
spec now says something else.

A silver table's rows are decided by its spec entry's window, slide, keys, select, where,
measures, having, output mode, transform and partitioning (`definition`). The table keeps that
definition as the Delta table property `runoff.definition` (JSON), set when the table is created
(`Catalog.tables`). Before a silver run or a backfill writes anything, `refuse_changed` compares
the property of every existing table of the dataset with its spec: a table built by another
definition is refused (ConfigError, exit 2) with what changed, old -> new, and the remedy,
`runoff rebuild <table>`, which recomputes the table from the whole of bronze. Otherwise new
windows would be merged beside old ones of another shape, and the table would mix both.
(Every such change also changes the aggregation's state that the table's checkpoint keeps, so
the streaming query could not carry on from it anyway.) One change is applied instead of
refused: measures added, all else as it was (`compatible`). The rows keep their windows and keys
and gain columns, so the silver run rebuilds the table from bronze itself (its deletion recorded
as a `rebuild` run, what it applied said in its summary) and the new columns hold values for the
whole history, not nulls before the change. A backfill still refuses it until a silver run (or
`runoff rebuild`) applied it.

A table created before runoff kept definitions has no property: it is taken to be built by the
spec as it is, and the property is set (one metadata commit, `adopt`).

Spark-free but for `adopt`: the property is read with delta-rs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from core.config import Location
from core.errors import ConfigError
from core.specs import DatasetSpec, SilverSpec
from delta_tables.writes import is_delta_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Table(Protocol):
    """A silver table of the catalog (`delta_tables.catalog.Table`), which imports this module."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> Location: ...


PROPERTY = "runoff.definition"


def definition(spec: SilverSpec) -> dict[str, Any]:
    """What decides the rows of a silver table (not its description, expectations or schedule)."""
    return {
        "window": spec.window,
        "slide": spec.slide,
        "keys": list(spec.keys),
        "select": list(spec.select),
        "where": spec.where,
        "measures": [[name, sql] for name, sql in spec.measures],
        "having": spec.having,
        "output": spec.output,
        "transform": spec.transform,
        "partition_by": list(spec.partition_by),
    }


def encoded(spec: SilverSpec) -> str:
    """The table property's value."""
    return json.dumps(definition(spec), sort_keys=True, separators=(",", ":"))


def fingerprint(value: Mapping[str, Any]) -> str:
    """A short hash of a definition (`definition`'s or a stored one), for ledger rows and asset
    events: equal definitions, equal fingerprints."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def fingerprints(spec: DatasetSpec) -> dict[str, str]:
    """The fingerprint of each silver table's definition in `spec`, for the run ledger."""
    return {s.table: fingerprint(definition(s)) for s in spec.silver}


def built_by(tables: Iterable[Table]) -> dict[str, str]:
    """The fingerprint of the definition each existing table was built by (tables without one,
    or not created yet, are left out)."""
    return {t.name: fingerprint(value) for t in tables if (value := stored(t)) is not None}


def stored(table: Table) -> dict[str, Any] | None:
    """The definition the table was built by; None for a table without one (or no table)."""
    from deltalake import DeltaTable

    if not is_delta_table(table.path):
        return None
    text = DeltaTable(str(table.path)).metadata().configuration.get(PROPERTY)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _text(value: Any) -> str:
    return "none" if value in (None, []) else json.dumps(value)


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two definitions, one phrase each (`window "1 hour" -> "30 minutes"`,
    `measure revenue added: "sum(amount)"`)."""
    found: list[str] = []
    for key in sorted(new.keys() | old.keys()):
        if key == "measures":
            continue
        if old.get(key) != new.get(key):
            found.append(f"{key} {_text(old.get(key))} -> {_text(new.get(key))}")
    before = {name: sql for name, sql in old.get("measures") or []}
    after = {name: sql for name, sql in new.get("measures") or []}
    for name in after:
        if name not in before:
            found.append(f"measure {name} added: {_text(after[name])}")
        elif before[name] != after[name]:
            found.append(f"measure {name} {_text(before[name])} -> {_text(after[name])}")
    found += [
        f"measure {name} removed: {_text(sql)}" for name, sql in before.items() if name not in after
    ]
    return found


def compatible(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether `new` only adds measures to `old` (every other part, and every measure `old`
    had, as it was): the table's rows stay what they were and gain columns, which a rebuild
    from bronze fills for the whole history."""
    rest = {k: v for k, v in old.items() if k != "measures"}
    if rest != {k: v for k, v in new.items() if k != "measures"}:
        return False
    before = {name: sql for name, sql in old.get("measures") or []}
    after = {name: sql for name, sql in new.get("measures") or []}
    return before.items() < after.items()


@dataclass(frozen=True)
class Change:
    """How a table's spec entry differs from the definition that built it."""

    what: list[str]  # one phrase per change (`changes`)
    compatible: bool  # measures added only: a silver run applies it (`compatible`)

    def remedy(self, table: str) -> str:
        if self.compatible:
            return "the next silver run applies it, rebuilding the table from bronze"
        return f"runs refuse the table until `runoff rebuild {table}`"


def _silver(spec: DatasetSpec) -> dict[str, SilverSpec]:
    return {s.table: s for s in spec.silver}


def changed_tables(tables: Iterable[Table], spec: DatasetSpec) -> dict[str, Change]:
    """Per existing silver table (of `spec`'s dataset) whose stored definition differs from its
    spec: what changed."""
    specs = _silver(spec)
    found: dict[str, Change] = {}
    for table in tables:
        old = stored(table)
        new = definition(specs[table.name])
        if old is not None and (what := changes(old, new)):
            found[table.name] = Change(what, compatible(old, new))
    return found


def refuse_changed(
    tables: Iterable[Table], spec: DatasetSpec, *, applied: bool = False
) -> dict[str, Change]:
    """Raise a ConfigError naming every silver table built by another definition than its
    spec's; with `applied`, but those a silver run applies (`compatible`), which it returns."""
    changed = changed_tables(tables, spec)
    found = {
        name: change.what for name, change in changed.items() if not (applied and change.compatible)
    }
    if not found:
        return {name: change for name, change in changed.items() if change.compatible}
    lines = [f"{name}: {'; '.join(what)}" for name, what in found.items()]
    commands = " and ".join(f"`runoff rebuild {name}`" for name in found)
    raise ConfigError(
        f"{spec.file} changed the definition of silver tables built by the old one ("
        + " | ".join(lines)
        + "): their new rows would mix with rows of the old definition, so nothing was written. "
        f"Rebuild them from bronze with {commands}, or restore the old definition"
    )


def adopt(spark: SparkSession, tables: Iterable[Table], spec: DatasetSpec) -> list[str]:
    """Set the definition property of existing tables that have none (made before runoff kept
    definitions): the spec as it is now. Returns their names."""
    specs = _silver(spec)
    adopted = []
    for table in tables:
        if not is_delta_table(table.path) or stored(table) is not None:
            continue
        value = encoded(specs[table.name]).replace("\\", "\\\\").replace("'", "\\'")
        spark.sql(f"ALTER TABLE delta.`{table.path}` SET TBLPROPERTIES ('{PROPERTY}' = '{value}')")
        adopted.append(table.name)
    return adopted
