"""The definition a table was built by, kept with the table, and what a run does when the
spec now says something else.

A silver table's rows are decided by its spec entry's window, slide, keys, select, where,
measures, having, output mode, transform and partitioning (`definition`); bronze's by the
dataset's schema, event time, projection, schema evolution, required fields, rules and
quarantine expectations (`bronze_definition`). Each table keeps its definition as the Delta
table property `runoff.definition` (JSON), set when the table is created (`Catalog.tables`).

Silver: before a silver run or a backfill writes anything, `refuse_changed` compares the property
of every existing table of the dataset with its spec: a table built by another definition is
refused (ConfigError, exit 2) with what changed, old -> new, and the remedy, `runoff rebuild
<table>`, which recomputes the table from the whole of bronze. Otherwise new windows would be
merged beside old ones of another shape, and the table would mix both. (Every such change also
changes the aggregation's state that the table's checkpoint keeps, so the streaming query could
not carry on from it anyway.) One change is applied instead of refused: measures added, all else
as it was (`compatible`). The rows keep their windows and keys and gain columns, so the silver
run rebuilds the table from bronze itself (its deletion recorded as a `rebuild` run, what it
applied said in its summary) and the new columns hold values for the whole history, not nulls
before the change. A backfill still refuses it until a silver run (or `runoff rebuild`) applied
it.

Bronze: before a bronze run, backfill or replay writes anything, `refuse_changed_bronze` refuses
a change of what the rows mean (a column's type, a column removed, the event time, the
projection, schema evolution) with the remedy `runoff rebuild bronze_<dataset>` (bronze from the
landing files, with the dataset's silver tables). Columns added and changes of which records go
to quarantine (`BRONZE_APPLIED`) are applied by the next bronze run to what it ingests, which
then records the new definition (`record`); a backfill refuses them until then.

A table created before runoff kept definitions has no property: it is taken to be built by the
spec as it is, and the property is set (one metadata commit, `adopt`).

Spark-free but for `adopt` and `record`: the property is read with delta-rs, the schema's DDL
split without Spark (`schema_columns`).
"""

from __future__ import annotations

import hashlib
import json
import re
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
    """A bronze or silver table of the catalog (`delta_tables.catalog.Table`, which imports
    this module)."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> Location: ...

    @property
    def layer(self) -> str: ...


PROPERTY = "runoff.definition"


def definition(spec: SilverSpec) -> dict[str, Any]:
    """What decides the rows of a silver table (not its description, expectations or schedule)."""
    return {
        "window": spec.window,
        "slide": spec.slide,
        "keys": [name if name == path else f"{name}={path}" for name, path in spec.key_sources],
        "select": list(spec.select),
        "where": spec.where,
        "measures": [[name, sql] for name, sql in spec.measures],
        "having": spec.having,
        "output": spec.output,
        "transform": spec.transform,
        "partition_by": list(spec.partition_by),
    }


def encoded(spec: SilverSpec | DatasetSpec) -> str:
    """The table property's value (a silver table's, or its dataset's bronze table's)."""
    value = bronze_definition(spec) if isinstance(spec, DatasetSpec) else definition(spec)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def bronze_definition(spec: DatasetSpec) -> dict[str, Any]:
    """What decides the rows of a dataset's bronze table: the record's columns and types, the
    event time, the projection (rename or select), what becomes of undeclared fields, and which
    records go to quarantine (required fields, rules, quarantine expectations)."""
    return {
        "schema": [[name, kind] for name, kind in schema_columns(spec.schema)],
        "event_time": spec.event_time,
        "rename": [[old, new] for old, new in spec.rename],
        "select": list(spec.select),
        "schema_evolution": spec.schema_evolution,
        "required": list(spec.required),
        "rules": [[rule.name, rule.expr] for rule in spec.rules],
        "quarantine": [
            [e.expect, json.dumps(dict(e.kwargs), sort_keys=True, default=str)]
            for e in spec.expectations_of("bronze")
            if e.severity == "quarantine"
        ],
    }


# Parts of a bronze definition whose change a bronze run applies to the records it ingests from
# then on (with the schema's columns added): the others change what every row means.
BRONZE_APPLIED = ("required", "rules", "quarantine")


def schema_columns(ddl: str) -> list[tuple[str, str]]:
    """A Spark DDL column list as (name, type) pairs, each type in one spelling (upper case,
    no spaces but between words), without Spark: `"a INT, b struct<x: string>"` ->
    `[("a", "INT"), ("b", "STRUCT<X STRING>")]`. Splits at the commas outside `<>` and `()`."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(ddl):
        depth += (char in "<(") - (char in ">)")
        if char == "," and depth == 0:
            parts.append(ddl[start:i])
            start = i + 1
    parts.append(ddl[start:])
    columns = []
    for part in filter(None, (p.strip() for p in parts)):
        if part.startswith("`"):
            name, _, kind = part[1:].partition("`")
        else:
            name, _, kind = part.partition(" ")
        kind = re.sub(r"\s*([<,(:])\s*", r"\1", " ".join(kind.split()))
        kind = re.sub(r"\s+([>)])", r"\1", kind).replace(":", " ")
        columns.append((name, kind.upper()))
    return columns


def fingerprint(value: Mapping[str, Any]) -> str:
    """A short hash of a definition (`definition`'s or a stored one), for ledger rows and asset
    events: equal definitions, equal fingerprints."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def fingerprints(spec: DatasetSpec) -> dict[str, str]:
    """The fingerprint of the bronze table's definition in `spec` and of each silver table's,
    by table, for the run ledger."""
    return {
        f"bronze_{spec.name}": fingerprint(bronze_definition(spec)),
        **{s.table: fingerprint(definition(s)) for s in spec.silver},
    }


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
    """How a table's spec differs from the definition that built it."""

    what: list[str]  # one phrase per change (`changes`, `bronze_changes`)
    compatible: bool  # a run applies it (`compatible`, `bronze_compatible`)
    layer: str = "silver"

    def remedy(self, table: str) -> str:
        if self.layer == "bronze":
            if self.compatible:
                return (
                    "the next bronze run applies it to the records it ingests; "
                    f"`runoff rebuild {table}` applies it to every record"
                )
            return f"runs refuse the dataset until `runoff rebuild {table}`"
        if self.compatible:
            return "the next silver run applies it, rebuilding the table from bronze"
        return f"runs refuse the table until `runoff rebuild {table}`"


def bronze_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two bronze definitions, one phrase each (`column plan added:
    STRING`, `column amount DOUBLE -> STRING`, `event_time "to_timestamp(ts)" -> ...`)."""
    before = {name: kind for name, kind in old.get("schema") or []}
    after = {name: kind for name, kind in new.get("schema") or []}
    found = []
    for name, kind in after.items():
        if name not in before:
            found.append(f"column {name} added: {kind}")
        elif before[name] != kind:
            found.append(f"column {name} {before[name]} -> {kind}")
    found += [f"column {n} removed: {kind}" for n, kind in before.items() if n not in after]
    for key in sorted(new.keys() | old.keys()):
        if key != "schema" and old.get(key) != new.get(key):
            found.append(f"{key} {_text(old.get(key))} -> {_text(new.get(key))}")
    return found


def bronze_compatible(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a bronze run can apply `new` to the records it ingests while the table's rows
    keep their meaning: columns only added (each old one as it was), and nothing else changed
    but which records go to quarantine (`BRONZE_APPLIED`)."""
    after = {name: kind for name, kind in new.get("schema") or []}
    if any(after.get(name) != kind for name, kind in old.get("schema") or []):
        return False
    rest = (old.keys() | new.keys()) - {"schema", *BRONZE_APPLIED}
    return all(old.get(key) == new.get(key) for key in rest)


def bronze_change(table: Table, spec: DatasetSpec) -> Change | None:
    """How `spec` differs from the definition its bronze `table` was built by; None when it
    does not (or the table has none yet)."""
    old = stored(table)
    if old is None:
        return None
    new = bronze_definition(spec)
    what = bronze_changes(old, new)
    return Change(what, bronze_compatible(old, new), layer="bronze") if what else None


def refuse_changed_bronze(
    table: Table, spec: DatasetSpec, *, applied: bool = True
) -> Change | None:
    """Raise a ConfigError when `spec` changed what the rows of its bronze `table` mean (and,
    without `applied`, for any change no bronze run applied yet: a backfill's); else the change
    a bronze run applies, if any."""
    change = bronze_change(table, spec)
    if change is None or (applied and change.compatible):
        return change
    what = "; ".join(change.what)
    if change.compatible:
        raise ConfigError(
            f"{spec.file} changed the definition of {table.name} ({what}) and no bronze run "
            f"applied it yet: run `runoff bronze {spec.name}` first, which applies it to what "
            f"it ingests, or `runoff rebuild {table.name}`"
        )
    raise ConfigError(
        f"{spec.file} changed the definition of {table.name} ({what}): records ingested now "
        "would not mean what its rows mean, so nothing was written. Rebuild it from the landing "
        f"files with `runoff rebuild {table.name}` (its silver tables are rebuilt with it), or "
        "restore the old definition"
    )


def _silver(spec: DatasetSpec) -> dict[str, SilverSpec]:
    return {s.table: s for s in spec.silver}


def changed_tables(tables: Iterable[Table], spec: DatasetSpec) -> dict[str, Change]:
    """Per existing table (of `spec`'s dataset: its bronze and silver tables; others are left
    out) whose stored definition differs from its spec: what changed."""
    specs = _silver(spec)
    found: dict[str, Change] = {}
    for table in tables:
        if table.layer == "bronze":
            if change := bronze_change(table, spec):
                found[table.name] = change
            continue
        if table.name not in specs:
            continue
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
    adopted = []
    for table in tables:
        if is_delta_table(table.path) and stored(table) is None:
            record(spark, table, spec)
            adopted.append(table.name)
    return adopted


def record(spark: SparkSession, table: Table, spec: DatasetSpec) -> None:
    """Keep the spec's definition of `table` (bronze, or a silver table of `spec`) as its
    property (one metadata commit)."""
    source = spec if table.layer == "bronze" else _silver(spec)[table.name]
    value = encoded(source).replace("\\", "\\\\").replace("'", "\\'")
    spark.sql(f"ALTER TABLE delta.`{table.path}` SET TBLPROPERTIES ('{PROPERTY}' = '{value}')")
