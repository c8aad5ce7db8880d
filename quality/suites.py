"""Expectation suites as code: one suite per table, plus one per derived frame.

Input: a dataset name. Output: `TableSpec`s (bronze, quarantine, every silver table) each holding
`SuiteSpec`s: a Great Expectations suite and the frame it checks:
- `rows`: the table's changed rows (for silver also the older rows sharing a key with them), with
  derived columns added by `quality.frames` (`event_time_date`, `window_seconds`,
  `window_start_offset_seconds`);
- `quarantine_share`: one row: bronze rows, quarantined rows and their share for the run;
- `cumulative_actions`: events only: cumulative Opens and Closes per non-overlapping window.

Every expectation carries a severity: `critical` fails the run, `warning` is reported. Window
sizes, slides and keys come from the dataset definitions (`jobs.datasets`, importing pyspark
modules but starting no JVM), the single source of truth shared with the silver jobs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import great_expectations as gx
from great_expectations.expectations import Expectation
from great_expectations.expectations.metadata_types import FailureSeverity

from jobs.config import RunoffConfig
from jobs.datasets import activity, events, get_dataset, sensors
from jobs.datasets.base import Dataset, SilverAggregate

Severity = Literal["critical", "warning"]
Frame = Literal["rows", "quarantine_share", "cumulative_actions"]
TableKind = Literal["bronze", "quarantine", "silver"]

# Share of a run's input lines that may land in quarantine before it is reported / fails the run.
QUARANTINE_WARN_SHARE = 0.02
QUARANTINE_FAIL_SHARE = 0.20
# Accelerometer readings beyond +-20 g (m/s^2) are not physical for phones and watches.
ACCELERATION_LIMIT = 200.0
# Event times are epoch seconds: before 1970 or after 2100 is a unit or parsing error.
EPOCH_SECONDS_MAX = 4_102_444_800

# Suite parameter of the bronze row count: set by the runner for every validation.
MIN_ROWS_PARAMETER = "min_rows"

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400, "week": 604_800}


def interval_seconds(text: str) -> int:
    """Spark interval text ("10 minutes", "1 hour") -> seconds."""
    match = re.fullmatch(r"\s*(\d+)\s+(second|minute|hour|day|week)s?\s*", text)
    if match is None:
        raise ValueError(f"interval {text!r} is not of the form '<n> <unit>'")
    return int(match.group(1)) * _UNITS[match.group(2)]


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
class TableSpec:
    """A table to validate: where it lives, how its rows are keyed, and its suites."""

    name: str
    dataset: str
    kind: TableKind
    suites: tuple[SuiteSpec, ...]
    keys: tuple[str, ...] = ()
    window_seconds: int | None = None
    slide_seconds: int | None = None

    @property
    def layer(self) -> Literal["bronze", "silver"]:
        return "silver" if self.kind == "silver" else "bronze"

    def path(self, config: RunoffConfig) -> Path:
        if self.kind == "bronze":
            return config.bronze_path(self.dataset)
        if self.kind == "quarantine":
            return config.quarantine_path(self.dataset)
        return config.silver_path(self.name)

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


# -- bronze ---------------------------------------------------------------------------------------
BRONZE_METADATA_COLUMNS = ("event_time", "event_date", "_source_file", "_ingested_at", "_batch_id")


def _bronze_values(dataset: str) -> list[Expectation]:
    """Value sets and ranges of each dataset's own columns."""
    if dataset == "events":
        return [
            in_set("action", events.ACTIONS, "critical", "an event is an Open or a Close."),
            between(
                "time",
                "critical",
                "epoch seconds between 1970 and 2100 (anything else is a unit error).",
                min_value=0,
                max_value=EPOCH_SECONDS_MAX,
            ),
        ]
    if dataset == "sensors":
        return [
            min_length("deviceId", "critical", "a device id is never empty."),
            min_length("deviceType", "critical", "a device type is never empty."),
        ]
    if dataset == "activity":
        return [
            in_set("gt", activity.GT_LABELS, "warning", "the dataset's activity labels."),
            between("Creation_Time", "critical", "epoch nanoseconds are positive.", min_value=0),
            between("Arrival_Time", "critical", "epoch milliseconds are positive.", min_value=0),
            *(
                between(
                    axis,
                    "warning",
                    f"accelerations beyond +-{ACCELERATION_LIMIT:g} m/s^2 are not physical.",
                    min_value=-ACCELERATION_LIMIT,
                    max_value=ACCELERATION_LIMIT,
                )
                for axis in ("x", "y", "z")
            ),
        ]
    if dataset == "lines":
        return [min_length("line", "critical", "bronze keeps only non-empty lines.")]
    return []


def bronze_table(dataset: Dataset) -> TableSpec:
    name = f"bronze_{dataset.name}"
    expectations: list[Expectation] = [
        gx.expectations.ExpectTableRowCountToBeBetween(
            min_value={"$PARAMETER": MIN_ROWS_PARAMETER},
            severity=FailureSeverity.CRITICAL,
            notes=_notes(
                "critical",
                f"`{MIN_ROWS_PARAMETER}` is 1 when a run wrote to the table in the validated "
                "versions (it had input, so it must have added rows) and 0 otherwise (e.g. a "
                "table just created empty).",
            ),
        ),
        not_null("event_time", why="the event time drives windows and partitions."),
        *(
            not_null(column, why="a required field: records without it go to quarantine.")
            for column in dataset.required
            if column != "event_time"
        ),
        *(not_null(column) for column in BRONZE_METADATA_COLUMNS if column != "event_time"),
        gx.expectations.ExpectColumnPairValuesToBeEqual(
            column_A="event_date",
            column_B="event_time_date",
            ignore_row_if="either_value_is_missing",
            severity=FailureSeverity.CRITICAL,
            notes=_notes("critical", "the partition `event_date` is the UTC date of event_time."),
        ),
        between("_batch_id", "critical", "micro-batch ids start at 0.", min_value=0),
        *_bronze_values(dataset.name),
    ]
    return TableSpec(
        name=name,
        dataset=dataset.name,
        kind="bronze",
        suites=(
            SuiteSpec(
                name,
                name,
                "rows",
                tuple(expectations),
                f"Bronze rows of `{dataset.name}` added since the last validation.",
            ),
        ),
    )


# -- quarantine -----------------------------------------------------------------------------------
def quarantine_table(dataset: Dataset) -> TableSpec:
    name = f"quarantine_{dataset.name}"
    rows = SuiteSpec(
        name,
        name,
        "rows",
        (
            not_null("_error", why="a quarantined line says why it was rejected."),
            not_null("_source_file", why="a quarantined line names its file."),
            not_null("_ingested_at"),
            not_null("_batch_id"),
            not_null("ingest_date"),
            between("_line_number", "critical", "line numbers start at 1.", min_value=1),
        ),
        f"Malformed `{dataset.name}` lines quarantined since the last validation.",
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
    return TableSpec(name=name, dataset=dataset.name, kind="quarantine", suites=(rows, share))


# -- silver ---------------------------------------------------------------------------------------
def _silver_values(dataset: str, aggregate: SilverAggregate) -> list[Expectation]:
    table = aggregate.table
    if dataset == "events":
        return [in_set("action", events.ACTIONS, "critical", "an event is an Open or a Close.")]
    if table == "sensors_lost_signal":
        return [
            between(
                "count",
                "critical",
                f"the alert holds windows with fewer than {sensors.LOST_SIGNAL_THRESHOLD} signals.",
                min_value=1,
                max_value=sensors.LOST_SIGNAL_THRESHOLD - 1,
            )
        ]
    if table == "sensors_type_signal":
        return [
            gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="max_signal",
                column_B="min_signal",
                or_equal=True,
                ignore_row_if="either_value_is_missing",
                severity=FailureSeverity.CRITICAL,
                notes=_notes("critical", "a window's max signal is at least its min signal."),
            )
        ]
    if dataset == "activity":
        return [in_set("gt", activity.GT_LABELS, "warning", "the dataset's activity labels.")]
    if dataset == "lines":
        return [min_length("word", "critical", "empty words are dropped before counting.")]
    return []


def silver_table(dataset: Dataset, aggregate: SilverAggregate) -> TableSpec:
    name = aggregate.table
    keys = tuple(aggregate.keys)
    window = interval_seconds(aggregate.window) if aggregate.window else None
    slide = interval_seconds(aggregate.slide) if aggregate.slide else None
    expectations: list[Expectation] = [
        *(not_null(key, why="part of the row's key.") for key in keys),
        not_null("count"),
        unique(
            keys,
            "critical",
            f"one row per {', '.join(keys)}: checked over every row of the table that shares "
            "a key with the changed rows.",
        ),
        between("count", "critical", "a row exists because at least one event fell in it.", 1),
    ]
    if window is not None:
        expectations.append(
            in_set(
                "window_seconds",
                (window,),
                "critical",
                f"window_end - window_start is the window size ({aggregate.window}).",
            )
        )
        expectations.append(
            in_set(
                "window_start_offset_seconds",
                (0,),
                "critical",
                f"windows start on multiples of {aggregate.slide or aggregate.window} "
                "since the epoch.",
            )
        )
    expectations.extend(_silver_values(dataset.name, aggregate))
    suites = [
        SuiteSpec(
            name,
            name,
            "rows",
            tuple(expectations),
            f"{aggregate.description}: rows changed since the last validation and the rows "
            "sharing their keys.",
        )
    ]
    if dataset.name == "events":
        suites.append(
            SuiteSpec(
                f"{name}_cumulative",
                name,
                "cumulative_actions",
                (
                    gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
                        column_A="cumulative_opens",
                        column_B="cumulative_closes",
                        or_equal=True,
                        severity=FailureSeverity.WARNING,
                        notes=_notes(
                            "warning",
                            "a Close always follows its Open, so up to any window's end there "
                            "are at least as many Opens as Closes (rows dropped as late by the "
                            "watermark can break it, hence a warning).",
                        ),
                    ),
                ),
                "Cumulative Opens and Closes up to the end of each non-overlapping window "
                "from the first changed window on.",
            )
        )
    return TableSpec(
        name=name,
        dataset=dataset.name,
        kind="silver",
        suites=tuple(suites),
        keys=keys,
        window_seconds=window,
        slide_seconds=slide,
    )


def dataset_tables(name: str) -> tuple[TableSpec, ...]:
    """Bronze, quarantine and silver specs of dataset `name`, in validation order."""
    dataset = get_dataset(name)
    return (
        bronze_table(dataset),
        quarantine_table(dataset),
        *(silver_table(dataset, aggregate) for aggregate in dataset.aggregates),
    )
