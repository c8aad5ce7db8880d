"""Expectation suites derived from a dataset's spec: one suite per table, plus the quarantine share.

Input: the catalog and a dataset name. Output: `CheckedTable`s (bronze, quarantine, every silver
table) each holding `SuiteSpec`s: a Great Expectations suite and the frame it checks. Two stages:

Before the commit (`quality.gate`, on the micro-batch as a Spark DataFrame):
- `batch`: the rows a micro-batch is about to commit, with derived columns (`event_time_date`,
  `window_seconds`, `window_start_offset_seconds`): the row-level expectations derived from the
  spec and every declared expectation but freshness (and those with severity `quarantine`, which
  bronze applies as row rules).

After the commit (`runoff validate`, on the Delta version range since the last validation):
- `counts`: one row: the rows the range added (`rows_added`), from the Delta log;
- `rows` (silver): the key columns of the changed rows and of the older rows sharing a key with
  them: one row per window and key across the table;
- `quarantine_share`: one row: bronze rows, quarantined rows and their share for the range;
- `freshness`: one row: the table's newest event time and its age in seconds at validation
  (`newest_event_age_seconds`), for the spec's `{expect: freshness, max_age: ...}` expectations;
  it is validated on every run, with or without new data.

Every expectation carries a severity: `critical` stops the batch (gate) or fails the run
(validate), `warning` is recorded and reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import great_expectations as gx
from great_expectations.expectations import Expectation
from great_expectations.expectations.metadata_types import FailureSeverity

from core.config import Location
from core.errors import ConfigError
from core.specs import (
    FRESHNESS,
    DatasetSpec,
    SilverSpec,
    interval_seconds,
)
from core.specs import Expectation as DeclaredExpectation
from delta_tables.catalog import Catalog
from quality.anomalies import HistoryRule

Severity = Literal["critical", "warning"]
Frame = Literal["batch", "counts", "rows", "quarantine_share", "freshness"]
TableKind = Literal["bronze", "quarantine", "silver"]

# Share of a run's input lines that may land in quarantine before it is reported / fails the run.
QUARANTINE_WARN_SHARE = 0.02
QUARANTINE_FAIL_SHARE = 0.20

# Suite parameter of the bronze row count: set by the runner for every validation.
MIN_ROWS_PARAMETER = "min_rows"
# How GX refers to a suite parameter (a value given to each validation run) in an expectation.
SUITE_PARAMETER = "$PARAMETER"
# The column of the counts frame: rows the validated versions added.
ROWS_ADDED_COLUMN = "rows_added"
# The column of the freshness frame that `freshness` expectations check.
FRESHNESS_AGE_COLUMN = "newest_event_age_seconds"


@dataclass(frozen=True)
class SuiteSpec:
    """A GX suite (its name is the GX suite name) and the frame it validates."""

    name: str
    table: str
    frame: Frame
    expectations: tuple[Expectation, ...]
    notes: str = ""

    def to_suite(self) -> gx.ExpectationSuite:
        return gx.ExpectationSuite(
            name=self.name,
            expectations=[e.copy(deep=True) for e in self.expectations],
            meta={"table": self.table, "frame": self.frame},
            notes=self.notes or None,
        )


@dataclass(frozen=True)
class CheckedTable:
    """A table to validate: where it lives (from the catalog), how its rows are keyed, and its
    suites."""

    name: str
    dataset: str
    kind: TableKind
    path: Location
    suites: tuple[SuiteSpec, ...]
    keys: tuple[str, ...] = ()
    window_seconds: int | None = None
    slide_seconds: int | None = None
    newest_event_column: str | None = None  # its max is the newest event (freshness)
    history: tuple[HistoryRule, ...] = ()  # batch metrics judged against their history

    @property
    def batch_expectations(self) -> tuple[Expectation, ...]:
        """What the gate checks on every micro-batch of the table before it is committed."""
        suite = self.suite("batch")
        return suite.expectations if suite else ()

    @property
    def layer(self) -> Literal["bronze", "silver"]:
        return "silver" if self.kind == "silver" else "bronze"

    def suite(self, frame: Frame) -> SuiteSpec | None:
        return next((s for s in self.suites if s.frame == frame), None)


# -- expectation helpers: every one states its severity and why it matters ------------------------
def _notes(severity: Severity, why: str) -> str:
    return f"severity: {severity}. {why}"


def not_null(column: str, severity: Severity = "critical", why: str = "") -> Expectation:
    return gx.expectations.ExpectColumnValuesToNotBeNull(
        column=column,
        severity=FailureSeverity(severity),
        notes=_notes(severity, why or f"every row needs `{column}`."),
    )


def in_set(column: str, values: tuple[Any, ...], severity: Severity, why: str) -> Expectation:
    return gx.expectations.ExpectColumnValuesToBeInSet(
        column=column,
        value_set=list(values),
        severity=FailureSeverity(severity),
        notes=_notes(severity, why),
    )


def between(
    column: str,
    severity: Severity,
    why: str,
    min_value: float | None = None,
    max_value: float | None = None,
) -> Expectation:
    return gx.expectations.ExpectColumnValuesToBeBetween(
        column=column,
        min_value=min_value,
        max_value=max_value,
        severity=FailureSeverity(severity),
        notes=_notes(severity, why),
    )


def unique(columns: tuple[str, ...], severity: Severity, why: str) -> Expectation:
    if len(columns) == 1:
        return gx.expectations.ExpectColumnValuesToBeUnique(
            column=columns[0], severity=FailureSeverity(severity), notes=_notes(severity, why)
        )
    return gx.expectations.ExpectCompoundColumnsToBeUnique(
        column_list=list(columns), severity=FailureSeverity(severity), notes=_notes(severity, why)
    )


def min_length(column: str, severity: Severity, why: str) -> Expectation:
    return gx.expectations.ExpectColumnValueLengthsToBeBetween(
        column=column, min_value=1, severity=FailureSeverity(severity), notes=_notes(severity, why)
    )


def declared(expectations: tuple[DeclaredExpectation, ...]) -> list[Expectation]:
    """The spec's own expectations as GX objects (`expect` is the snake_case GX name).

    Severity `quarantine`: bronze already sent the failing rows to quarantine (the expectation is
    a row rule there, `jobs.streaming.dataset.expectation_rule`), so here it is reported like
    `warning`.
    """
    built = []
    for item in expectations:
        if item.is_freshness:
            built.append(freshness(item))
            continue
        class_name = "".join(part.title() for part in item.expect.split("_"))
        cls = getattr(gx.expectations, class_name, None)
        if cls is None:
            raise ConfigError(
                f"unknown expectation {item.expect!r} (no gx.expectations.{class_name})"
            )
        severity: Severity = "critical" if item.severity == "critical" else "warning"
        kwargs = dict(item.kwargs)
        why = kwargs.pop("notes", None) or "declared in the dataset spec."
        built.append(cls(**kwargs, severity=FailureSeverity(severity), notes=_notes(severity, why)))
    return built


def freshness(item: DeclaredExpectation) -> Expectation:
    """`{expect: freshness, max_age: ...}`: the age of the table's newest event time at
    validation, `newest_event_age_seconds` of the freshness frame, is at most max_age."""
    max_age = item.max_age_seconds
    if max_age is None:
        raise ConfigError(f"expectation {FRESHNESS!r} needs `max_age` (an interval)")
    kwargs = dict(item.kwargs)
    why = kwargs.pop("notes", None) or "declared in the dataset spec."
    if kwargs:
        raise ConfigError(
            f"expectation {FRESHNESS!r} takes max_age, severity and notes, not "
            f"{', '.join(sorted(kwargs))}"
        )
    severity: Severity = "critical" if item.severity == "critical" else "warning"
    return gx.expectations.ExpectColumnMaxToBeBetween(
        column=FRESHNESS_AGE_COLUMN,
        max_value=max_age,
        severity=FailureSeverity(severity),
        notes=_notes(severity, f"freshness: the newest event is at most {item.max_age} old. {why}"),
    )


def _row_expectations(spec: DatasetSpec, table: str) -> list[Expectation]:
    """The declared expectations of `table` the gate checks on every batch: all but freshness and
    those with severity `quarantine` (bronze row rules: their rows never reach the batch)."""
    return declared(
        tuple(
            e
            for e in spec.expectations_of(table)
            if not e.is_freshness and not e.is_history and e.severity != "quarantine"
        )
    )


def _freshness_suites(spec: DatasetSpec, table: str, name: str) -> tuple[SuiteSpec, ...]:
    """The freshness suite of `table` (spec key) named after table `name`, if it declares one."""
    items = tuple(e for e in spec.expectations_of(table) if e.is_freshness)
    if not items:
        return ()
    column = spec.newest_event_column(table)
    return (
        SuiteSpec(
            f"{name}_freshness",
            name,
            "freshness",
            tuple(declared(items)),
            f"Age of the newest `{column}` of {name} when validated (every run, new data or not).",
        ),
    )


# -- bronze ---------------------------------------------------------------------------------------
def bronze_table(catalog: Catalog, spec: DatasetSpec) -> CheckedTable:
    table = catalog.tables(spec.name).bronze
    renames = dict(spec.rename)
    # (a field within a struct column: its path, from the column's bronze name)
    required = [
        ".".join([renames.get(top, top), *within])
        for top, *within in (column.split(".") for column in spec.required)
    ]
    # The columns runoff sets itself (event_date, _source_file, _ingested_at, _batch_id) are not
    # checked on every batch: they cannot fail but by a bug, which the exact-table tests catch.
    batch: list[Expectation] = [
        not_null("event_time", why="the event time drives windows and partitions."),
        *(
            not_null(column, why="a required field: records without it go to quarantine.")
            for column in required
            if column != "event_time" and not spec.select
        ),
        *_row_expectations(spec, "bronze"),
    ]
    counts = gx.expectations.ExpectColumnMinToBeBetween(
        column=ROWS_ADDED_COLUMN,
        min_value={SUITE_PARAMETER: MIN_ROWS_PARAMETER},
        severity=FailureSeverity.CRITICAL,
        notes=_notes(
            "critical",
            f"`{MIN_ROWS_PARAMETER}` is 1 when a run wrote to the table in the validated "
            "versions (it had input, so it must have added rows) and 0 otherwise (e.g. a "
            "table just created empty).",
        ),
    )
    return CheckedTable(
        name=table.name,
        dataset=spec.name,
        kind="bronze",
        path=table.path,
        suites=(
            SuiteSpec(
                f"{table.name}_batch",
                table.name,
                "batch",
                tuple(batch),
                f"Every micro-batch of `{spec.name}` bronze rows, before it is committed.",
            ),
            SuiteSpec(
                table.name,
                table.name,
                "counts",
                (counts,),
                f"Bronze rows of `{spec.name}` added since the last validation.",
            ),
            *_freshness_suites(spec, "bronze", table.name),
        ),
        newest_event_column=spec.newest_event_column("bronze"),
        history=tuple(HistoryRule.of(e) for e in spec.expectations_of("bronze") if e.is_history),
    )


# -- quarantine -----------------------------------------------------------------------------------
def quarantine_table(catalog: Catalog, spec: DatasetSpec) -> CheckedTable:
    table = catalog.tables(spec.name).quarantine
    name = table.name
    # Every column of a quarantine row is set by runoff: only the spec's own expectations are
    # checked on every batch (no batch suite without them).
    declared_rows = tuple(_row_expectations(spec, "quarantine"))
    batch = (
        SuiteSpec(
            f"{name}_batch",
            name,
            "batch",
            declared_rows,
            f"Every micro-batch of malformed `{spec.name}` lines, before it is committed.",
        ),
    )
    share = SuiteSpec(
        f"{name}_share",
        name,
        "quarantine_share",
        (
            gx.expectations.ExpectColumnMaxToBeBetween(
                column="quarantine_share",
                min_value=0.0,
                max_value=QUARANTINE_WARN_SHARE,
                severity=FailureSeverity.WARNING,
                notes=_notes(
                    "warning",
                    f"more than {QUARANTINE_WARN_SHARE:.0%} of the run's lines were quarantined.",
                ),
            ),
            gx.expectations.ExpectColumnMaxToBeBetween(
                column="quarantine_share",
                min_value=0.0,
                max_value=QUARANTINE_FAIL_SHARE,
                severity=FailureSeverity.CRITICAL,
                notes=_notes(
                    "critical",
                    f"more than {QUARANTINE_FAIL_SHARE:.0%} of the run's lines were quarantined: "
                    "the input or the parser is broken.",
                ),
            ),
        ),
        "Share of the run's lines (bronze + quarantine rows added since the last validation) "
        "that were quarantined.",
    )
    return CheckedTable(
        name=name,
        dataset=spec.name,
        kind="quarantine",
        path=table.path,
        suites=(
            *(batch if declared_rows else ()),
            share,
            *_freshness_suites(spec, "quarantine", name),
        ),
        newest_event_column=spec.newest_event_column("quarantine"),
    )


# -- silver ---------------------------------------------------------------------------------------
def silver_table(catalog: Catalog, spec: DatasetSpec, silver: SilverSpec) -> CheckedTable:
    table = catalog.silver_table(silver.table)
    name = silver.table
    keys = silver.key_columns
    window = interval_seconds(silver.window) if silver.window else None
    slide = interval_seconds(silver.slide) if silver.slide else None
    batch: list[Expectation] = [not_null(key, why="part of the row's key.") for key in keys]
    if window is not None:
        batch.append(
            in_set(
                "window_seconds",
                (window,),
                "critical",
                f"window_end - window_start is the window size ({silver.window}).",
            )
        )
        batch.append(
            in_set(
                "window_start_offset_seconds",
                (0,),
                "critical",
                f"windows start on multiples of {silver.slide or silver.window} since the epoch.",
            )
        )
    batch.extend(_row_expectations(spec, name))
    rows = SuiteSpec(
        name,
        name,
        "rows",
        (
            unique(
                keys,
                "critical",
                f"one row per {', '.join(keys)}: checked over every row of the table that shares "
                "a key with the changed rows.",
            ),
        ),
        f"{silver.description or name}: the keys of the rows changed since the last validation "
        "and of the rows sharing them.",
    )
    return CheckedTable(
        name=name,
        dataset=spec.name,
        kind="silver",
        path=table.path,
        suites=(
            SuiteSpec(
                f"{name}_batch",
                name,
                "batch",
                tuple(batch),
                f"{silver.description or name}: every micro-batch, before it is merged.",
            ),
            rows,
            *_freshness_suites(spec, name, name),
        ),
        keys=keys,
        window_seconds=window,
        slide_seconds=slide,
        newest_event_column=spec.newest_event_column(name),
    )


def checked_tables(catalog: Catalog, name: str) -> tuple[CheckedTable, ...]:
    """Bronze, quarantine and silver tables of dataset `name` with their suites, in validation
    order."""
    spec = catalog.spec(name)
    return (
        bronze_table(catalog, spec),
        quarantine_table(catalog, spec),
        *(silver_table(catalog, spec, silver) for silver in spec.silver),
    )
