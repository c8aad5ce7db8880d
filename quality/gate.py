"""The quality gate: each micro-batch is checked with Great Expectations on Spark before it is
committed.

bronze (its bronze rows and its quarantined lines) and silver (the rows a batch merges) call
`Gate.check(frame, batch_id)` inside `foreachBatch`, before writing anything. The frame is the
batch's Spark DataFrame: GX's Spark execution engine computes every metric as Spark aggregations,
so no row reaches the driver but the few unexpected values a result shows (`partial_unexpected`,
at most `SAMPLE` of them) and the validation of an increment needs no more driver memory than its
count does.

Actions (the spec's `severity`):
- `critical`: `check` raises `QualityCheckFailed` (exit code 1) naming the table, the batch, the
  expectation, the observed value and the remedy. The caller has written nothing of the batch, and
  Spark does not commit a batch whose function failed: the checkpoint stays before it and the next
  run reads the same data again (after a fix of the data or the spec, it publishes once).
- `warning`: recorded (ledger, results history) and reported; the batch is published.
- `quarantine`: applied by bronze as row rules before the gate (the failing rows go to quarantine
  named by the expectation); `rule_checks` turns their per-batch counts into the same records.

Every check of a run is kept in `Gate.checks` (one `BatchCheck` per expectation per batch) for the
run ledger and the results history (`batch_rows`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from core.config import Location
from core.console import say
from core.specs import HISTORY
from delta_tables.ledger import RunRecord
from quality.runner import QualityCheckFailed, describe_expectation, describe_observed

if TYPE_CHECKING:
    from great_expectations.core.batch_definition import BatchDefinition
    from pyspark.sql import DataFrame

    from quality.anomalies import MetricHistory
    from quality.history import ResultRow
    from quality.suites import CheckedTable

# Unexpected values shown per failed expectation (collected to the driver: a bounded sample).
SAMPLE = 3
DATASOURCE = "runoff_batches"
BATCH_DEFINITION = "batch"


@dataclass(frozen=True)
class BatchCheck:
    """One expectation on one micro-batch of one table."""

    table: str
    batch_id: int
    expectation: str
    severity: str  # critical, warning or quarantine
    evaluated: int  # rows the expectation looked at
    failed: int  # rows (or 1 for a table-level expectation) that did not meet it
    quarantined: int  # rows sent to quarantine for it (severity quarantine)
    observed: str
    success: bool
    kind: str = ""  # the GX expectation type (`expect_column_values_to_be_between`); "" for a rule
    column: str | None = None  # the column it checks, if one

    @property
    def critical_failure(self) -> bool:
        return not self.success and self.severity == "critical"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@cache
def _definition(table: str) -> BatchDefinition:
    """A whole-dataframe batch definition on Spark for `table`, in one ephemeral GX context per
    process (nothing of a batch check is written to the GX project)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = _context()
    try:
        source = context.data_sources.get(DATASOURCE)
    except (KeyError, ValueError, gx.exceptions.DataContextError):
        context.variables.progress_bars = ProgressBarsConfig(
            globally=False, metric_calculations=False
        )
        # The callers cache what they validate; GX would persist every batch and never release it.
        source = context.data_sources.add_spark(DATASOURCE, persist=False)
    asset = source.add_dataframe_asset(table)
    return asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION)


@cache
def _context() -> Any:
    import logging

    import great_expectations as gx

    # An ephemeral context announces (INFO) the temporary docs folder it never uses.
    logging.getLogger("great_expectations.data_context.types.base").setLevel(logging.WARNING)
    return gx.get_context(mode="ephemeral")


def _key(item: Any) -> str:
    """An expectation result's expectation: its type and arguments."""
    config = item.expectation_config
    return json.dumps([config.type, config.kwargs], sort_keys=True, default=str)


def with_derived(frame: DataFrame, table: CheckedTable) -> DataFrame:
    """The batch plus the derived columns its expectations check: bronze `event_time_date` (UTC
    date of event_time), windowed silver `window_seconds` and `window_start_offset_seconds`."""
    from pyspark.sql import functions as F

    if table.kind == "bronze" and "event_time" in frame.columns:
        return frame.withColumn("event_time_date", F.to_date("event_time"))
    if table.kind == "silver" and table.window_seconds is not None:
        start, end = F.unix_seconds("window_start"), F.unix_seconds("window_end")
        step = table.slide_seconds or table.window_seconds
        return frame.withColumns(
            {
                "window_seconds": end - start,
                "window_start_offset_seconds": F.pmod(start, F.lit(step)),
            }
        )
    return frame


class Gate:
    """Checks every micro-batch of one table before it is committed; remembers every check."""

    def __init__(self, table: CheckedTable, remedy: str) -> None:
        self.table = table
        self.remedy = remedy
        self.checks: list[BatchCheck] = []
        self.seconds = 0.0  # spent validating, over the run's batches

    def check(self, frame: DataFrame, batch_id: int, rows: int) -> list[BatchCheck]:
        """Validate `frame` (the batch's `rows` rows, cached by the caller) with the table's
        batch expectations; raise `QualityCheckFailed` when a critical one fails."""
        expectations = self.table.batch_expectations
        if not expectations or rows == 0:
            return []
        started = time.perf_counter()
        frame = with_derived(frame, self.table)
        # Counts first: GX then computes every column's metrics in one aggregation per column.
        # Asking it for unexpected values would add a Spark job per expectation to every batch,
        # so they are fetched only for the expectations that found some.
        results = self._validate(frame, expectations, sample=0)
        unexpected = [item for item in results if (item.result or {}).get("unexpected_count")]
        if unexpected:
            # Matched by expectation, not by position: GX need not keep the suite's order.
            again = [item.expectation_config.to_domain_obj() for item in unexpected]
            sampled = {_key(item): item for item in self._validate(frame, again, sample=SAMPLE)}
            results = [sampled.get(_key(item), item) for item in results]
        checks = []
        for item in results:
            config = item.expectation_config
            assert config is not None, f"{self.table.name}: a result without its expectation"
            severity = getattr(config, "severity", None)
            outcome = dict(item.result or {})
            failed = outcome.get("unexpected_count")
            checks.append(
                BatchCheck(
                    table=self.table.name,
                    batch_id=batch_id,
                    expectation=describe_expectation(config.type, dict(config.kwargs)),
                    severity=str(getattr(severity, "value", severity) or "critical"),
                    evaluated=int(outcome.get("element_count") or rows),
                    failed=int(failed) if failed is not None else int(not item.success),
                    quarantined=0,
                    observed=describe_observed(outcome, item.exception_info),
                    success=bool(item.success),
                    kind=config.type,
                    column=config.kwargs.get("column"),
                )
            )
        self.seconds += time.perf_counter() - started
        self._keep(checks)
        return checks

    def check_history(
        self, batch_id: int, at: datetime, metrics: Mapping[str, float], history: MetricHistory
    ) -> list[BatchCheck]:
        """Judge the batch's `metrics` (its time `at`) against their `history` by the table's
        history expectations; raise `QualityCheckFailed` when a critical one fails."""
        checks = []
        for rule in self.table.history:
            value = metrics.get(rule.metric)
            if value is None:  # not measured on this batch (no row reached bronze)
                continue
            judged = rule.judge(value, at, history.of(rule.metric))
            checks.append(
                BatchCheck(
                    table=self.table.name,
                    batch_id=batch_id,
                    expectation=describe_expectation(HISTORY, rule.arguments),
                    severity=rule.severity,
                    evaluated=1,  # the batch's one value
                    failed=int(not judged.success),
                    quarantined=0,
                    observed=judged.observed,
                    success=judged.success,
                    kind=HISTORY,
                )
            )
        self._keep(checks)
        return checks

    def _keep(self, checks: list[BatchCheck]) -> None:
        """Keep a batch's checks; raise `QualityCheckFailed` when a critical one failed."""
        self.checks.extend(checks)
        failures = [c for c in checks if c.critical_failure]
        if failures:
            raise QualityCheckFailed(self.failure_message(failures))

    def _validate(self, frame: DataFrame, expectations: Sequence[Any], sample: int) -> list[Any]:
        """GX's results for `expectations` on `frame`, in their order, with at most `sample`
        unexpected values each."""
        import great_expectations as gx

        suite = gx.ExpectationSuite(
            name=f"{self.table.name}_batch", expectations=[e.copy(deep=True) for e in expectations]
        )
        batch = _definition(self.table.name).get_batch(batch_parameters={"dataframe": frame})
        result = batch.validate(
            suite, result_format={"result_format": "BASIC", "partial_unexpected_count": sample}
        )
        return list(result.results)

    def record(self, checks: Sequence[BatchCheck]) -> None:
        """Keep checks made elsewhere (bronze's row rules) with this table's."""
        self.checks.extend(checks)

    def failure_message(self, failures: Sequence[BatchCheck]) -> str:
        first = failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return (
            f"critical expectation failed on {first.table} in batch {first.batch_id}: "
            f"{first.expectation}: observed {first.observed}{more}. Nothing of the batch was "
            f"committed and the checkpoint stays before it: {self.remedy}"
        )


def rule_checks(
    table: str, batch_id: int, evaluated: int, broken: Mapping[str, int]
) -> list[BatchCheck]:
    """Bronze's row rules on one batch (`broken`: rule name -> rows it sent to quarantine)."""
    return [
        BatchCheck(
            table=table,
            batch_id=batch_id,
            expectation=name,
            severity="quarantine",
            evaluated=evaluated,
            failed=count,
            quarantined=count,
            observed=f"{count} of {evaluated} quarantined",
            success=count == 0,
        )
        for name, count in broken.items()
    ]


def summarize(checks: Sequence[BatchCheck]) -> dict[str, dict[str, Any]]:
    """Per table and expectation over a run's batches: severity, kind, column, batches,
    evaluated, failed, quarantined (the run ledger's `details.expectations`)."""
    totals: dict[str, dict[str, Any]] = {}
    for c in checks:
        key = f"{c.table}: {c.expectation}"
        entry = totals.setdefault(
            key,
            {
                "severity": c.severity,
                "kind": c.kind,
                "column": c.column,
                "batches": 0,
                "evaluated": 0,
                "failed": 0,
                "quarantined": 0,
            },
        )
        entry["batches"] += 1
        entry["evaluated"] += c.evaluated
        entry["failed"] += c.failed
        entry["quarantined"] += c.quarantined
    return totals


def problems(checks: Sequence[BatchCheck]) -> list[str]:
    """One line per failed expectation of a run (warnings and quarantine rules with rows)."""
    lines = []
    for key, entry in summarize(checks).items():
        if entry["failed"] and entry["kind"] == HISTORY:
            lines.append(
                f"{key}: {entry['failed']} of {entry['batches']} batches outside their history "
                f"({entry['severity']})"
            )
        elif entry["failed"]:
            verb = "quarantined" if entry["severity"] == "quarantine" else entry["severity"]
            lines.append(
                f"{key}: {entry['failed']} of {entry['evaluated']} rows ({verb}) over "
                f"{entry['batches']} batches"
            )
    return lines


def batch_rows(
    run_id: str,
    dataset: str,
    layer: str,
    checks: Sequence[BatchCheck],
    versions_before: dict[str, int],
    versions_after: dict[str, int],
    table_ids: dict[str, str],
    checked_at: datetime,
) -> list[ResultRow]:
    """The gate's checks of one run as history rows (suite `<table>_batch`, the run's versions
    of the table: before the run, exclusive, and after it)."""
    from quality.history import ResultRow

    rows = []
    for c in checks:
        before = versions_before.get(c.table, -1)
        rows.append(
            ResultRow(
                run_id=run_id,
                dataset=dataset,
                table=c.table,
                table_id=table_ids.get(c.table, ""),
                layer=layer,
                suite=f"{c.table}_batch {c.batch_id}",
                expectation=c.expectation,
                severity=c.severity,
                success=c.success,
                observed=c.observed,
                from_version=before,
                to_version=versions_after.get(c.table, before),
                full=False,
                rows=c.evaluated,
                table_passed=not c.critical_failure,
                validated_at=checked_at,
                batch_id=c.batch_id,
                evaluated=c.evaluated,
                failed=c.failed,
                quarantined=c.quarantined,
            )
        )
    return rows


def record_checks(results: Location, record: RunRecord, gates: Sequence[Gate]) -> None:
    """Put a run's checks in its ledger record (`details.expectations`: totals per table and
    expectation) and in the results history (a row per expectation per batch)."""
    from deltalake import DeltaTable

    from delta_tables.writes import is_delta_table
    from quality.history import append_results

    checks = [c for gate in gates for c in gate.checks]
    if not checks:
        return
    record.details["expectations"] = summarize(checks)
    record.details["gate_seconds"] = round(sum(gate.seconds for gate in gates), 3)
    ids = {
        gate.table.name: str(DeltaTable(str(gate.table.path)).metadata().id)
        for gate in gates
        if gate.checks and is_delta_table(gate.table.path)
    }
    rows = batch_rows(
        record.run_id,
        record.dataset,
        record.layer,
        checks,
        record.versions_before,
        record.versions_after,
        ids,
        datetime.now(UTC),
    )
    append_results(results, rows)


def say_problems(record: RunRecord, gates: Sequence[Gate]) -> None:
    """Print a finished run's failed expectations and quarantine rules, one line each."""
    for line in problems([c for gate in gates for c in gate.checks]):
        say(f"{record.layer} {record.dataset}: {line}")
