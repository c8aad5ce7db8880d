"""`runoff validate`: check what runs changed in a dataset's tables with Great Expectations.

Input: the dataset's Delta tables (bronze, quarantine, silver), read with delta-rs (no Spark),
and the results history `<data>/quality/results` (`<data>`: the home, or `RUNOFF_DATA`), where
each table's last successfully validated version is kept. For every table: the rows in files
added since that version (`--full`: the whole table) are validated with the table's suites
(`quality.suites`); silver uniqueness also sees the older rows sharing a key with the changed
ones. Output: a `ValidationReport`, one history row per expectation, one run-ledger row (layer
"validate") and the Great Expectations Data Docs under
`<home>/quality/gx/uncommitted/data_docs/local_site/`.

Tables that do not exist yet are skipped; a table without a version after the last validated one
reports "no new data"; its freshness suite (the spec's `freshness` expectations: the age of its
newest event at validation time) still runs, since a table without new data is what goes stale.
A failed critical expectation fails the run (exit code 1, the message
names the table, its version and the expectation); warnings are only reported.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
import pyarrow as pa

from core.config import Location, RunoffConfig
from core.console import say
from core.errors import ConfigError, RunoffError
from delta_tables.ledger import RunRecord, recorded_run

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from quality.history import ResultRow
    from quality.increments import Increment
    from quality.suites import CheckedTable, SuiteSpec

LAYERS = ("bronze", "silver")
TableStatus = Literal["validated", "no new data", "skipped"]
# Result kwargs that say nothing about what is expected.
_PLUMBING_KWARGS = frozenset(
    {"batch_id", "result_format", "catch_exceptions", "meta", "notes", "ignore_row_if"}
)
_COLUMN_KWARGS = frozenset({"column", "column_A", "column_B", "column_list"})


class QualityCheckFailed(RunoffError):
    """A critical expectation failed: the message names the table, version and expectation."""

    exit_code = 1


@dataclass(frozen=True)
class ExpectationOutcome:
    """One expectation's result on one table."""

    table: str
    suite: str
    expectation: str
    severity: str
    success: bool
    observed: str
    versions: str
    to_version: int
    kind: str = ""  # the GX expectation type
    column: str | None = None  # the column it checks, if one

    @property
    def critical_failure(self) -> bool:
        return not self.success and self.severity == "critical"


@dataclass(frozen=True)
class TableOutcome:
    """What happened to one table in a validate run."""

    table: str
    layer: str
    status: TableStatus
    detail: str
    versions: str = ""
    from_version: int | None = None
    to_version: int | None = None
    rows: int = 0
    passed: bool = True


@dataclass
class ValidationReport:
    """The outcome of `validate_dataset`: per table, per expectation, and where the docs are."""

    run_id: str
    dataset: str
    layers: tuple[str, ...]
    full: bool
    tables: list[TableOutcome] = field(default_factory=list)
    expectations: list[ExpectationOutcome] = field(default_factory=list)
    data_docs_path: Path | None = None
    seconds: float = 0.0
    # The fingerprint of the definition each bronze and silver table was built by
    # (`delta_tables.definitions`): what its validated rows mean.
    definitions: dict[str, str] = field(default_factory=dict)

    @property
    def critical_failures(self) -> list[ExpectationOutcome]:
        return [e for e in self.expectations if e.critical_failure]

    @property
    def warnings(self) -> list[ExpectationOutcome]:
        return [e for e in self.expectations if not e.success and e.severity != "critical"]

    @property
    def passed(self) -> bool:
        return not self.critical_failures

    @property
    def rows(self) -> list[dict[str, str]]:
        """The summary table: one row per expectation, then one per skipped or unchanged table.

        Keys: table, versions, expectation, severity, observed, result (pass, FAIL for a critical
        failure, warn for a failed warning, or the table's status: skipped, no new data).
        """
        rows = [
            {
                "table": e.table,
                "versions": e.versions,
                "expectation": e.expectation,
                "severity": e.severity,
                "observed": e.observed,
                "result": "pass" if e.success else ("FAIL" if e.critical_failure else "warn"),
            }
            for e in self.expectations
        ]
        rows.extend(
            {
                "table": t.table,
                "versions": t.versions or (f"{t.to_version}" if t.to_version is not None else ""),
                "expectation": "-",
                "severity": "",
                "observed": t.detail,
                "result": t.status,
            }
            for t in self.tables
            if t.status != "validated"
        )
        return rows

    def summary(self, quarantine: str | None = None) -> dict[str, Any]:
        """The run as JSON-able data (what `runoff --outcome PATH validate` records).

        Per table: layer, status, versions (text), from/to version, rows and its expectations
        passed / failed (critical) / warnings, and the fingerprint of the definition a bronze or
        silver table was built by (`definition`; None for quarantine, and before one is kept); then
        the totals,
        `quarantined_rows` (the rows the quarantine table gained in the validated range: its
        `rows`; `quarantine` is its name, the catalog's `quarantine_<dataset>` by default),
        `passed` and the Data Docs path.
        """
        quarantine = quarantine or f"quarantine_{self.dataset}"

        def counts(outcomes: Iterable[ExpectationOutcome]) -> dict[str, int]:
            chosen = list(outcomes)
            return {
                "expectations_passed": sum(e.success for e in chosen),
                "expectations_failed": sum(e.critical_failure for e in chosen),
                "warnings": sum(not e.success and not e.critical_failure for e in chosen),
            }

        tables = {
            t.table: {
                "layer": t.layer,
                "status": t.status,
                "versions": t.versions or (f"{t.to_version}" if t.to_version is not None else ""),
                "from_version": t.from_version,
                "to_version": t.to_version,
                "rows": t.rows,
                **counts(e for e in self.expectations if e.table == t.table),
                "definition": self.definitions.get(t.table),
            }
            for t in self.tables
        }
        return {
            "dataset": self.dataset,
            "run_id": self.run_id,
            "layers": list(self.layers),
            "full": self.full,
            "tables": tables,
            **counts(self.expectations),
            "quarantined_rows": sum(t.rows for t in self.tables if t.table == quarantine),
            "passed": self.passed,
            "failure": self.failure_message() or None,
            "data_docs": str(self.data_docs_path) if self.data_docs_path else None,
        }

    def failure_message(self) -> str:
        """One line naming the first critical failure (table, version, expectation)."""
        failures = self.critical_failures
        if not failures:
            return ""
        first = failures[0]
        more = f" (and {len(failures) - 1} more critical failures)" if len(failures) > 1 else ""
        return (
            f"critical expectation failed on {first.table} at version {first.to_version}: "
            f"{first.expectation}: observed {first.observed}{more}"
        )


# -- describing GX results ------------------------------------------------------------------------
def _short(value: Any) -> str:
    """Compact text for kwargs and observed values (UTC timestamps as ISO-8601 with Z)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.4g}"
    if isinstance(value, datetime):
        if value.tzinfo is not None and value.utcoffset() == timedelta(0):
            return value.strftime("%Y-%m-%dT%H:%M:%SZ")
        return value.isoformat()
    if isinstance(value, dict):
        return "(" + ", ".join(_short(v) for v in value.values()) + ")"
    if isinstance(value, str):
        return value
    if isinstance(value, Iterable):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _short(value.item())
    return str(value)


def describe_expectation(kind: str, kwargs: dict[str, Any]) -> str:
    """`column_values_to_be_between(count, min_value=1)`: the column(s) first, then the rest."""
    name = kind.removeprefix("expect_")
    args: list[str] = []
    for key in ("column", "column_A", "column_B"):
        if kwargs.get(key) is not None:
            args.append(str(kwargs[key]))
    if kwargs.get("column_list") is not None:
        args.append(", ".join(str(c) for c in kwargs["column_list"]))
    for key, value in kwargs.items():
        if key in _PLUMBING_KWARGS or key in _COLUMN_KWARGS or value is None:
            continue
        args.append(f"{key}={_short(value)}")
    return f"{name}({', '.join(args)})"


def describe_observed(result: dict[str, Any], exception: dict[str, Any] | None = None) -> str:
    """The observed value of a GX result, as one short line."""
    if exception and exception.get("raised_exception"):
        message = str(exception.get("exception_message") or "error").strip().splitlines()
        return f"error: {message[0] if message else 'error'}"
    if "observed_value" in result:
        return _short(result["observed_value"])
    if "unexpected_count" in result:
        count = int(result.get("unexpected_count") or 0)
        total = int(result.get("element_count") or 0)
        text = f"{count} of {total} unexpected"
        sample = list(result.get("partial_unexpected_list") or [])
        if count and sample:
            shown = sample[:1] if isinstance(sample[0], dict) else sample[:3]
            text += ": " + ", ".join(_short(v) for v in shown)
            if count > len(shown):
                text += ", ..."
        return text
    return "-"


# -- the run ------------------------------------------------------------------------------------
def _layers(layers: Sequence[str]) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(layers))
    for layer in chosen:
        if layer not in LAYERS:
            raise ConfigError(f"layer {layer!r} is not one of {', '.join(LAYERS)}")
    if not chosen:
        raise ConfigError("no layer to validate: choose bronze, silver or both")
    return chosen


def _error_line(exc: BaseException) -> str:
    """A crashed validation's ledger error: the exception's type and first line."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def utc_now() -> datetime:
    """The validation time (what freshness ages are measured against)."""
    return datetime.now(UTC)


def results_path(config: RunoffConfig) -> Location:
    from delta_tables.catalog import Catalog

    return Catalog.load(config).quality_results.path


def validate_dataset(
    config: RunoffConfig,
    dataset: str,
    layers: Sequence[str] = LAYERS,
    full: bool = False,
    now: datetime | None = None,
) -> ValidationReport:
    """Validate what runs changed in `dataset`'s tables of `layers` (or everything with `full`).

    Never raises on failed expectations: look at `.passed` / `.critical_failures`. Records the
    run in the results history and the run ledger (also when it crashes). `now`: the validation
    time (default `utc_now()`), against which freshness is measured.
    """
    from delta_tables.catalog import Catalog
    from quality.project import project_lock

    Catalog.load(config).spec(dataset)  # unknown or refused: the error, before any work
    chosen = _layers(layers)
    record = RunRecord(dataset=dataset, layer="validate", trigger="full" if full else "incremental")
    record.details["layers"] = list(chosen)  # known from the start (its listeners' START)
    with recorded_run(config.runs_path, record, describe=_error_line):
        with project_lock(config.quality_dir):
            report = _validate(config, dataset, chosen, full, record, now or utc_now())
        record.rows = sum(t.rows for t in report.tables)
        record.details = {
            "layers": list(chosen),
            "passed": report.passed,
            "critical_failures": len(report.critical_failures),
            "warnings": len(report.warnings),
            "tables": {t.table: t.status for t in report.tables},
            "expectations": {
                f"{e.table}: {e.expectation}": {
                    "severity": e.severity,
                    "kind": e.kind,
                    "column": e.column,
                    "success": e.success,
                    "observed": e.observed,
                }
                for e in report.expectations
            },
            "data_docs": str(report.data_docs_path) if report.data_docs_path else None,
            "definitions": report.definitions,
        }
        if not report.passed:
            record.error = report.failure_message()
    return report


@dataclass
class _Work:
    """One suite to run on one frame of one table."""

    table: CheckedTable
    suite: SuiteSpec
    frame: pd.DataFrame
    increment: Increment


def _validate(
    config: RunoffConfig,
    dataset: str,
    layers: tuple[str, ...],
    full: bool,
    record: RunRecord,
    now: datetime,
) -> ValidationReport:
    # GX and the dataset definitions are heavy imports: only a validate run pays for them.
    from delta_tables import definitions
    from delta_tables.catalog import Catalog
    from quality import history, increments, project
    from quality.suites import checked_tables

    catalog = Catalog.load(config)
    results = catalog.quality_results.path
    started = time.monotonic()
    report = ValidationReport(run_id=record.run_id, dataset=dataset, layers=layers, full=full)
    report.definitions = definitions.built_by(catalog.tables(dataset).defined)
    marks = history.last_validated(results, dataset)
    work: list[_Work] = []
    history_rows: list[history.ResultRow] = []
    validated_at = now
    bronze_rows = 0  # rows the bronze increment added: the quarantine share's denominator
    for spec in (t for t in checked_tables(catalog, dataset) if t.layer in layers):
        path = spec.path
        mark = marks.get(spec.name)
        record.versions_before[spec.name] = mark.version if mark else -1
        if not increments.table_exists(path):
            _unvalidated(report, spec, "skipped", "table does not exist yet")
            continue
        table = increments.open_table(path)
        record.versions_after[spec.name] = table.version()
        increment = increments.plan_increment(path, table, mark, full=full)
        if increment is None:
            detail = f"no version after {mark.version}" if mark else "no new version"
            _unvalidated(report, spec, "no new data", detail, to_version=table.version())
            if mark is not None:
                unchanged = increments.Increment(
                    path, mark.table_id, mark.version, mark.version, detail, frozenset(), ()
                )
                work.extend(_freshness_work(spec, table, unchanged, now))
            continue
        if not increment.data_changed:
            operations = ", ".join(sorted(set(increment.operations or ())))
            _unvalidated(
                report,
                spec,
                "no new data",
                f"only {operations} since version {increment.start_version}",
                increment,
            )
            # Recorded as validated so that the next increment starts after these commits.
            history_rows.append(
                _history_row(
                    record.run_id,
                    spec,
                    increment,
                    validated_at,
                    rows=0,
                    passed=True,
                    outcome=ExpectationOutcome(
                        spec.name,
                        "",
                        "(no data change)",
                        "info",
                        True,
                        operations,
                        increment.version_range,
                        increment.end_version,
                    ),
                )
            )
            work.extend(_freshness_work(spec, table, increment, now))
            continue
        added = increments.count_rows(table, increment)
        frames_, rows = _frames(spec, table, increment, added, bronze_rows)
        if spec.kind == "bronze":
            bronze_rows = added
        work.extend(_Work(spec, suite, frame, increment) for suite, frame in frames_)
        work.extend(_freshness_work(spec, table, increment, now))
        report.tables.append(
            TableOutcome(
                spec.name,
                spec.layer,
                "validated",
                increment.reason,
                increment.version_range,
                increment.start_version,
                increment.end_version,
                rows,
            )
        )
        read = f", {rows:,} rows read for uniqueness" if spec.kind == "silver" else ""
        say(f"validate {spec.name}: versions {increment.version_range}, {added:,} rows added{read}")

    if work:
        outcomes = _run_suites(config, dataset, record.run_id, work)
        report.expectations.extend(outcomes)
        failed = {o.table for o in outcomes if o.critical_failure}
        report.tables = [replace(t, passed=t.table not in failed) for t in report.tables]
        spec_of = {w.table.name: (w.table, w.increment) for w in work}
        rows_of = {t.table: t.rows for t in report.tables}
        # A table without new data whose freshness failed did not pass either.
        history_rows = [
            replace(r, table_passed=False) if r.table in failed else r for r in history_rows
        ]
        for outcome in outcomes:
            spec, increment = spec_of[outcome.table]
            history_rows.append(
                _history_row(
                    record.run_id,
                    spec,
                    increment,
                    validated_at,
                    rows=rows_of[outcome.table],
                    passed=outcome.table not in failed,
                    outcome=outcome,
                )
            )
    history.append_results(results, history_rows)
    index = project.data_docs_index(config.quality_dir)
    report.data_docs_path = index if index.exists() else None
    report.seconds = time.monotonic() - started
    return report


def _unvalidated(
    report: ValidationReport,
    spec: CheckedTable,
    status: TableStatus,
    detail: str,
    increment: Increment | None = None,
    to_version: int | None = None,
) -> None:
    report.tables.append(
        TableOutcome(
            spec.name,
            spec.layer,
            status,
            detail,
            increment.version_range if increment else "",
            increment.start_version if increment else None,
            increment.end_version if increment else to_version,
        )
    )
    say(f"validate {spec.name}: {status} ({detail})")


def _frames(
    spec: CheckedTable,
    table: DeltaTable,
    increment: Increment,
    added: int,
    bronze_rows: int,
) -> tuple[list[tuple[SuiteSpec, pd.DataFrame]], int]:
    """The frame of every whole-table suite of `spec`, and how many table rows were read for them.

    Row-level expectations were checked on every batch before its commit (`quality.gate`): only
    silver's uniqueness reads rows here, and only the key columns of the changed rows and of the
    older rows sharing their keys. Bronze and quarantine are counted from the Delta log.
    """
    import pandas as pd

    from quality import frames, increments
    from quality.suites import ROWS_ADDED_COLUMN

    out: list[tuple[SuiteSpec, pd.DataFrame]] = []
    rows = 0 if spec.kind == "silver" else added
    for suite in spec.suites:
        if suite.frame == "counts":
            frame = pd.DataFrame({ROWS_ADDED_COLUMN: [added]})
        elif suite.frame == "quarantine_share":
            frame = frames.quarantine_share_frame(bronze_rows, added)
        elif suite.frame == "rows":
            keys = list(spec.keys)
            changed = increments.read_rows(table, increment, columns=keys)
            sharing = increments.rows_sharing_keys(table, increment, changed, keys)
            both = pa.concat_tables([changed, sharing])
            rows += both.num_rows
            frame = both.to_pandas()
        else:
            continue  # batch: the gate's; freshness: `_freshness_work`, new data or not
        out.append((suite, frame))
    return out, rows


def _freshness_work(
    spec: CheckedTable, table: DeltaTable, increment: Increment, now: datetime
) -> list[_Work]:
    """The freshness suite of `spec` (if declared) on a one-row frame: the newest event's age."""
    from quality import frames

    suite = spec.suite("freshness")
    if suite is None or spec.newest_event_column is None:
        return []
    newest = frames.utc(frames.column_max(table, spec.newest_event_column))
    frame = frames.freshness_frame(newest, now)
    age = "no event yet" if newest is None else f"newest {spec.newest_event_column} {newest}"
    say(f"validate {spec.name}: freshness ({age})")
    return [_Work(spec, suite, frame, increment)]


def _history_row(
    run_id: str,
    spec: CheckedTable,
    increment: Increment,
    validated_at: datetime,
    rows: int,
    passed: bool,
    outcome: ExpectationOutcome,
) -> ResultRow:
    from quality.history import ResultRow

    return ResultRow(
        run_id=run_id,
        dataset=spec.dataset,
        table=spec.name,
        table_id=increment.table_id,
        layer=spec.layer,
        suite=outcome.suite,
        expectation=outcome.expectation,
        severity=outcome.severity,
        success=outcome.success,
        observed=outcome.observed,
        from_version=increment.start_version,
        to_version=increment.end_version,
        full=increment.full,
        rows=rows,
        table_passed=passed,
        validated_at=validated_at,
    )


def _run_suites(
    config: RunoffConfig, dataset: str, run_id: str, work: list[_Work]
) -> list[ExpectationOutcome]:
    """Run every suite on its frame in one GX context; rebuild the Data Docs once, with a page for
    each suite of the validated tables."""
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    from quality import project
    from quality.suites import MIN_ROWS_PARAMETER

    context = project.open_context(config.quality_dir)
    run = RunIdentifier(run_name=f"{dataset}-{run_id[:8]}", run_time=datetime.now(UTC))
    identifiers: list[Any] = []
    outcomes: list[ExpectationOutcome] = []
    for w in work:
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(
                name=w.suite.name,
                data=project.batch_definition(context, w.suite.name),
                suite=w.suite.to_suite(),
            )
        )
        result = definition.run(
            batch_parameters={"dataframe": w.frame},
            expectation_parameters={MIN_ROWS_PARAMETER: 1 if w.increment.had_writes else 0},
            result_format={"result_format": "SUMMARY", "partial_unexpected_count": 5},
            run_id=run,
        )
        suite_id = ExpectationSuiteIdentifier(name=w.suite.name)
        identifiers.append(ValidationResultIdentifier(suite_id, run, result.batch_id))
        identifiers.append(suite_id)
        for item in result.results:
            config_ = item.expectation_config
            assert config_ is not None, f"{w.suite.name}: a result without its expectation"
            severity = getattr(config_, "severity", None)
            outcomes.append(
                ExpectationOutcome(
                    table=w.table.name,
                    suite=w.suite.name,
                    expectation=describe_expectation(config_.type, dict(config_.kwargs)),
                    severity=str(getattr(severity, "value", severity) or "critical"),
                    success=bool(item.success),
                    observed=describe_observed(dict(item.result or {}), item.exception_info),
                    versions=w.increment.version_range,
                    to_version=w.increment.end_version,
                    kind=config_.type,
                    column=config_.kwargs.get("column"),
                )
            )
    # The gate's suites (row-level, run on each micro-batch before its commit) are saved too, so
    # that the Data Docs show every expectation a table is held to, the spec's included.
    for table in {w.table.name: w.table for w in work}.values():
        for suite in table.suites:
            if suite.frame == "batch":
                context.suites.add_or_update(suite.to_suite())
                identifiers.append(ExpectationSuiteIdentifier(name=suite.name))
    context.build_data_docs(resource_identifiers=identifiers)
    return outcomes
