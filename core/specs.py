"""Dataset specs: one YAML file per dataset, read into frozen dataclasses (no Spark here).

`load_spec(path)` checks a file against `dataset.schema.json` and the rules a schema cannot
state (a slide needs a window, names are unique, ...) and raises `SpecError` listing every
problem as `<file>: <key>: <problem>`. `scan(folders)` reads every `*.yaml`/`*.yml` of the
folders and keeps the good specs apart from the refused files, so one bad file never hides the
others. SQL inside a spec is checked by Spark's analyzer in `runoff check` (jobs.ops.check).
The format is documented in the README ("Dataset spec reference").
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jsonschema
import yaml
from croniter import croniter

from core.errors import ConfigError

SEED_DIR = Path(__file__).resolve().parents[1] / "jobs" / "datasets"
SCHEMA_FILE = Path(__file__).with_name("dataset.schema.json")
SPEC_SUFFIXES = (".yaml", ".yml")

Severity = Literal["warning", "quarantine", "critical"]
SchemaEvolution = Literal["rescue", "add_columns", "fail"]

# Durations ("10 minutes"): what Spark's window() and withWatermark() take, in the forms runoff
# accepts everywhere (spec keys, flags, backfill windows).
_DURATION = re.compile(r"\s*(\d+)\s+(second|minute|hour|day|week)s?\s*")
_UNITS = {
    "second": timedelta(seconds=1),
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
}
# Columns bronze adds to every row, and columns silver derives: a record may not use them.
BRONZE_METADATA_COLUMNS = (
    "event_time",
    "event_date",
    "_source_file",
    "_ingested_at",
    "_batch_id",
    "_rescued_data",
)
# Row-level expectations that severity `quarantine` turns into bronze row rules (their SQL:
# `jobs.streaming.dataset.expectation_rule`); GX skips nulls for all but not_null, and so do the
# rules.
QUARANTINE_EXPECTATIONS = (
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_be_between",
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_not_be_in_set",
    "expect_column_value_lengths_to_be_between",
    "expect_column_values_to_match_regex",
)
WINDOW_COLUMNS = ("window_start", "window_end")
# Airflow's schedule presets (a spec may also give a cron expression, or null: manual runs only).
SCHEDULE_PRESETS = (
    "@once",
    "@continuous",
    "@hourly",
    "@daily",
    "@weekly",
    "@monthly",
    "@quarterly",
    "@yearly",
)
WINDOW_DATE = "window_date"
# `{expect: freshness, max_age: "<interval>"}`: a table's newest event time is at most max_age old
# when it is validated. Not a GX expectation name: quality.suites builds it on a one-row frame.
FRESHNESS = "freshness"
# `{expect: expect_batch_metric_within_history, metric: ..., ...}`: each bronze batch's metric
# lies within what its history predicts. Not a GX expectation: `quality.anomalies` judges it.
HISTORY = "expect_batch_metric_within_history"
# The column holding a table's event time ("newest event" = its max): bronze's event time, the
# quarantine's ingestion time, a windowed silver table's window end (running totals have none).
NEWEST_EVENT_COLUMNS = {"bronze": "event_time", "quarantine": "_ingested_at"}
SILVER_NEWEST_EVENT_COLUMN = "window_end"


def key_column(item: str | Mapping[str, str]) -> tuple[str, str]:
    """A silver key as declared -> (its column, its path): `user.country` is the column
    `user_country`, `{country: user.country}` names it."""
    if isinstance(item, str):
        return item.replace(".", "_"), item
    ((name, path),) = item.items()
    return name, path


def parse_duration(text: str) -> timedelta:
    """ "10 minutes" -> timedelta(minutes=10): `<n> second|minute|hour|day|week[s]`, the one
    parser of durations (spec keys, `--watermark`, backfill windows)."""
    match = _DURATION.fullmatch(text)
    if not match:
        raise ConfigError(
            f"interval {text!r} is not of the form '<n> seconds|minutes|hours|days|weeks'"
        )
    return int(match.group(1)) * _UNITS[match.group(2)]


def interval_seconds(text: str) -> int:
    """ "10 minutes" -> 600 (`parse_duration` in whole seconds)."""
    return int(parse_duration(text).total_seconds())


class SpecError(ConfigError):
    """A refused spec file: one `<file>: <key>: <problem>` line per problem."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = tuple(problems)


@dataclass(frozen=True)
class Rule:
    """A row rule: bronze rows for which `expr` is not true go to quarantine."""

    name: str
    expr: str
    action: Literal["quarantine"] = "quarantine"


@dataclass(frozen=True)
class Expectation:
    """A declared expectation: a GX expectation type, its arguments and what a failure does.

    `expect` is a snake_case GX name, or `freshness` with its `max_age` (an interval) apart from
    `kwargs`."""

    table: str
    expect: str
    kwargs: Mapping[str, Any]
    severity: Severity = "warning"
    max_age: str | None = None

    @property
    def is_freshness(self) -> bool:
        return self.expect == FRESHNESS

    @property
    def is_history(self) -> bool:
        return self.expect == HISTORY

    @property
    def max_age_seconds(self) -> int | None:
        return interval_seconds(self.max_age) if self.max_age is not None else None


@dataclass(frozen=True)
class SilverSpec:
    """One silver table: rows of bronze grouped by window and keys into measures."""

    table: str
    description: str = ""
    window: str | None = None
    slide: str | None = None
    keys: tuple[str, ...] = ()  # the keys' columns
    select: tuple[str, ...] = ()
    where: str | None = None
    measures: tuple[tuple[str, str], ...] = ()  # (column, SQL aggregate), in declared order
    having: str | None = None
    output: Literal["update", "append"] = "update"
    transform: str | None = None
    partition_by: tuple[str, ...] = ()
    # What each key's column holds, as declared: a column of the rows, or a field within a
    # struct by its path (`user.country`); empty: the keys' own columns.
    key_paths: tuple[str, ...] = ()

    @property
    def key_sources(self) -> tuple[tuple[str, str], ...]:
        """(column, path) per key."""
        return tuple(zip(self.keys, self.key_paths or self.keys, strict=True))

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The columns that identify a row (the MERGE condition)."""
        return (*WINDOW_COLUMNS, *self.keys) if self.window else self.keys

    @property
    def measure_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.measures)

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's columns, in order."""
        date = (WINDOW_DATE,) if WINDOW_DATE in self.partition_by else ()
        return (*self.key_columns, *self.measure_names, *date)


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset as declared in its YAML file (`file`)."""

    name: str
    file: Path
    source_format: Literal["json", "text"]
    source_path: str
    schema: str
    event_time: str
    description: str = ""
    watermark: str = "10 minutes"
    required: tuple[str, ...] = ()
    rename: tuple[tuple[str, str], ...] = ()
    select: tuple[str, ...] = ()
    schema_evolution: SchemaEvolution = "rescue"
    rules: tuple[Rule, ...] = ()
    silver: tuple[SilverSpec, ...] = ()
    expectations: tuple[Expectation, ...] = ()
    schedule: str | None = "@hourly"
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def silver_tables(self) -> tuple[str, ...]:
        return tuple(s.table for s in self.silver)

    def silver_spec(self, table: str) -> SilverSpec:
        for spec in self.silver:
            if spec.table == table:
                return spec
        names = ", ".join(self.silver_tables) or "none"
        raise ConfigError(f"dataset {self.name!r} has no silver table {table!r} (has: {names})")

    def expectations_of(self, table: str) -> tuple[Expectation, ...]:
        return tuple(e for e in self.expectations if e.table == table)

    def newest_event_column(self, table: str) -> str | None:
        """The event-time column of `table` ("bronze", "quarantine" or a silver table): its max
        is the table's newest event; None for a silver table without a window."""
        if table in NEWEST_EVENT_COLUMNS:
            return NEWEST_EVENT_COLUMNS[table]
        return SILVER_NEWEST_EVENT_COLUMN if self.silver_spec(table).window else None


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def _key(path: Iterable[Any]) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return "".join(parts).lstrip(".") or "(top level)"


def _schema_problems(doc: Any) -> list[tuple[str, str]]:
    problems = []
    for error in sorted(_validator().iter_errors(doc), key=lambda e: list(map(str, e.path))):
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = sorted(error.schema.get("properties", {}))
            extra = sorted(set(error.instance) - set(allowed))
            for name in extra:
                problems.append(
                    (_key([*error.path, name]), f"unknown key (allowed: {', '.join(allowed)})")
                )
            continue
        problems.append((_key(error.path), error.message))
    return problems


def _rule_problems(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What the JSON Schema cannot say: uniqueness, combinations, reserved names."""
    problems: list[tuple[str, str]] = []
    source_path = (doc.get("source") or {}).get("path") or ""
    relative = "://" not in source_path and not Path(source_path).expanduser().is_absolute()
    if source_path and relative and posixpath.normpath(source_path).split("/")[0] == "..":
        problems.append(
            (
                "source.path",
                f"{source_path!r} leaves the data folder: use a path inside it, or an absolute "
                "path",
            )
        )
    tables: set[str] = set()
    for i, silver in enumerate(doc.get("silver") or []):
        key = f"silver[{i}]"
        if silver["table"] in tables:
            problems.append((f"{key}.table", f"table {silver['table']!r} is declared twice"))
        tables.add(silver["table"])
        window = silver.get("window")
        if silver.get("slide") and not window:
            problems.append((f"{key}.slide", "a slide needs a window"))
        if (
            window
            and silver.get("slide")
            and (interval_seconds(silver["slide"]) > interval_seconds(window))
        ):
            problems.append((f"{key}.slide", "the slide is longer than the window"))
        if silver.get("output") == "append" and not window:
            problems.append(
                (f"{key}.output", "append emits closed windows only: it needs a window")
            )
        measures = silver.get("measures") or {}
        if not measures and not silver.get("transform"):
            problems.append((f"{key}.measures", "declare at least one measure (or a transform)"))
        keys = [key_column(k)[0] for k in silver.get("keys") or []]
        for name in sorted({k for k in keys if keys.count(k) > 1}):
            problems.append((f"{key}.keys", f"two keys are column {name!r}: name one of them"))
        derived = (*WINDOW_COLUMNS, WINDOW_DATE) if window else ()
        for name in [*keys, *measures]:
            if name in derived:
                problems.append((key, f"column {name!r} is derived from the window: rename it"))
        for name in sorted(set(keys) & set(measures)):
            problems.append((f"{key}.measures.{name}", "is also a key"))
        for name in silver.get("partition_by") or []:
            if name != WINDOW_DATE and name not in keys:
                problems.append(
                    (
                        f"{key}.partition_by",
                        f"{name!r} is neither a key nor {WINDOW_DATE} (the window's UTC day)",
                    )
                )
            if name == WINDOW_DATE and not window:
                problems.append((f"{key}.partition_by", f"{WINDOW_DATE} needs a window"))
    allowed_tables = {"bronze", "quarantine", *tables}
    for table in doc.get("expectations") or {}:
        if table not in allowed_tables:
            problems.append(
                (
                    f"expectations.{table}",
                    f"no such table (tables: {', '.join(sorted(allowed_tables))})",
                )
            )
    for old, new in ((doc.get("bronze") or {}).get("rename") or {}).items():
        if new in BRONZE_METADATA_COLUMNS:
            problems.append((f"bronze.rename.{old}", f"{new!r} is a column runoff adds itself"))
    windowed = {s["table"] for s in doc.get("silver") or [] if s.get("window")}
    for table, items in (doc.get("expectations") or {}).items():
        for i, item in enumerate(items):
            if item["expect"] == FRESHNESS and table in tables - windowed:
                problems.append(
                    (
                        f"expectations.{table}[{i}].expect",
                        "freshness needs an event time: a silver table without a window (a "
                        "running total) has none",
                    )
                )
            if item["expect"] == HISTORY and table != "bronze":
                problems.append(
                    (
                        f"expectations.{table}[{i}].expect",
                        "batch metrics are kept for bronze batches: use it on bronze",
                    )
                )
            if item.get("severity") != "quarantine":
                continue
            key = f"expectations.{table}[{i}].severity"
            if table != "bronze":
                problems.append((key, "quarantine moves bronze rows: use it on bronze"))
            elif item["expect"] not in QUARANTINE_EXPECTATIONS:
                problems.append(
                    (
                        key,
                        f"quarantine needs a row-level expectation: one of "
                        f"{', '.join(QUARANTINE_EXPECTATIONS)}",
                    )
                )
            elif not isinstance(item.get("column"), str):
                problems.append((key, "quarantine needs the expectation's `column`"))
    schedule = doc.get("schedule")
    if isinstance(schedule, str) and not (
        schedule in SCHEDULE_PRESETS or croniter.is_valid(schedule)
    ):
        problems.append(
            (
                "schedule",
                f"{schedule!r} is neither a cron expression nor one of "
                f"{', '.join(SCHEDULE_PRESETS)}",
            )
        )
    names = [r["name"] for r in doc.get("rules") or []]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(("rules", f"rule {name!r} is declared twice"))
    return problems


def _spec_from(doc: Mapping[str, Any], file: Path) -> DatasetSpec:
    source = doc["source"]
    bronze = doc.get("bronze") or {}
    expectations = []
    for table, items in (doc.get("expectations") or {}).items():
        for item in items:
            kwargs = {k: v for k, v in item.items() if k not in ("expect", "severity")}
            max_age = kwargs.pop("max_age", None) if item["expect"] == FRESHNESS else None
            expectations.append(
                Expectation(
                    table=table,
                    expect=item["expect"],
                    kwargs=kwargs,
                    severity=item.get("severity", "warning"),
                    max_age=max_age,
                )
            )
    return DatasetSpec(
        name=doc["name"],
        file=file,
        description=(doc.get("description") or "").strip(),
        source_format=source["format"],
        source_path=source.get("path") or f"landing/{doc['name']}",
        schema=doc["schema"],
        event_time=doc["event_time"],
        watermark=doc.get("watermark") or "10 minutes",
        required=tuple(doc.get("required") or ()),
        rename=tuple((bronze.get("rename") or {}).items()),
        select=tuple(bronze.get("select") or ()),
        schema_evolution=doc.get("schema_evolution") or "rescue",
        rules=tuple(
            Rule(name=r["name"], expr=r["expr"], action=r.get("action", "quarantine"))
            for r in doc.get("rules") or ()
        ),
        silver=tuple(
            SilverSpec(
                table=s["table"],
                description=(s.get("description") or "").strip(),
                window=s.get("window"),
                slide=s.get("slide"),
                keys=tuple(name for name, _ in keys),
                key_paths=tuple(path for _, path in keys) if any(n != p for n, p in keys) else (),
                select=tuple(s.get("select") or ()),
                where=s.get("where"),
                measures=tuple((s.get("measures") or {}).items()),
                having=s.get("having"),
                output=s.get("output") or "update",
                transform=s.get("transform"),
                partition_by=tuple(s.get("partition_by") or ()),
            )
            for s in doc.get("silver") or ()
            for keys in [[key_column(k) for k in s.get("keys") or ()]]
        ),
        expectations=tuple(expectations),
        schedule=doc.get("schedule", "@hourly"),
        raw=doc,
    )


# libyaml's parser when PyYAML has it (its wheels do): a spec is read by every command, and by
# Airflow at every parse of the DAG files.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(text: str) -> Any:
    """The YAML document, read safely and without aliases (`*name`): a spec never needs them,
    and nested aliases expand exponentially (a few hundred bytes can stand for billions of
    nodes, which would hang every command and Airflow's DAG parsing while the schema check
    walks them). The events are checked before anything is composed."""
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent):
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed in a spec", event.start_mark
            )
    return yaml.load(text, Loader=_LOADER)


def load_spec(path: Path) -> DatasetSpec:
    """Read and check one spec file; `SpecError` lists every problem, naming file and key."""
    try:
        doc = _read_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError([f"{path}: cannot be read ({exc.strerror or exc})"]) from exc
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f"line {where.line + 1}" if where is not None else "(file)"
        reason = getattr(exc, "problem", None) or str(exc)
        raise SpecError([f"{path}: {at}: not valid YAML ({reason})"]) from exc
    problems = _schema_problems(doc)
    if not problems:
        problems = _rule_problems(doc)
    if problems:
        raise SpecError([f"{path}: {key}: {message}" for key, message in problems])
    if path.stem != doc["name"]:
        raise SpecError([f"{path}: name: {doc['name']!r} differs from the file name {path.stem!r}"])
    return _spec_from(doc, path)


@dataclass(frozen=True)
class SpecScan:
    """Every spec found: the good ones by name, and the problems of the refused files."""

    specs: Mapping[str, DatasetSpec]
    problems: Mapping[Path, tuple[str, ...]]


def spec_files(folders: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for folder in folders:
        if not folder.is_dir():
            raise ConfigError(f"datasets folder {str(folder)!r} does not exist")
        files.extend(
            sorted(p for p in folder.iterdir() if p.suffix in SPEC_SUFFIXES and p.is_file())
        )
    return files


def scan(folders: Sequence[Path]) -> SpecScan:
    """Load every spec of `folders` (in order); a name or silver table declared twice refuses
    the later file."""
    specs: dict[str, DatasetSpec] = {}
    problems: dict[Path, tuple[str, ...]] = {}
    dataset_files: dict[str, Path] = {}
    table_files: dict[str, Path] = {}
    for path in spec_files(folders):
        try:
            spec = load_spec(path)
        except SpecError as exc:
            problems[path] = exc.problems
            continue
        clashes = []
        if spec.name in dataset_files:
            first = dataset_files[spec.name]
            clashes.append(f"{path}: name: dataset {spec.name!r} is already declared in {first}")
        for table in spec.silver_tables:
            if table in table_files:
                first = table_files[table]
                clashes.append(f"{path}: silver: table {table!r} is already declared in {first}")
        if clashes:
            problems[path] = tuple(clashes)
            continue
        specs[spec.name] = spec
        dataset_files[spec.name] = path
        table_files.update(dict.fromkeys(spec.silver_tables, path))
    return SpecScan(specs=specs, problems=problems)
