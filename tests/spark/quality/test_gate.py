"""The quality gate: expectations decide, on each micro-batch before its commit, what is published.

A declared dataset (`orders`, tests/spark/jobs/test_declared_dataset.py) goes through the real
commands. A batch that fails a `critical` expectation leaves every table's version and every
checkpoint's commit log as they were, exits 1 naming the table, batch, expectation and observed
value, and is retried by the next run; once the spec only warns, the same data is published
exactly once (tables compared with the independent computation of that module). `quarantine`
counts and `warning` counts reach the run ledger and the results history per batch. A crash
between the gate and the commit loses and duplicates nothing.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from core.config import RunoffConfig
from delta_tables.catalog import Catalog
from delta_tables.ledger import read_runs
from delta_tables.writes import table_version
from quality.history import read_results
from tests.spark.jobs.test_declared_dataset import (
    SPEC,
    START,
    assert_tables,
    expected_bronze,
    expected_silver,
    land,
    order_lines,
    orders_config,
    runoff,
    specs,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]
__all__ = ["orders_config", "specs"]  # fixtures, imported for pytest

AMOUNT = "column_values_to_be_between(amount, min_value=0)"


def published(config: RunoffConfig) -> dict[str, Any]:
    """Every table's version and every checkpoint's committed batches."""
    tables = Catalog.load(config).tables("orders")
    state: dict[str, Any] = {}
    for table in tables:
        state[table.name] = table_version(table.path)
        if table.checkpoint is not None:
            commits = table.checkpoint / "commits"
            state[f"{table.name} commits"] = sorted(p.name for p in commits.glob("[0-9]*"))
    return state


def last_run(config: RunoffConfig, layer: str) -> dict[str, Any]:
    run = [r for r in read_runs(config.runs_path, "orders") if r["layer"] == layer][-1]
    return {**run, "details": json.loads(run["details"] or "{}")}


def batch_results(config: RunoffConfig, table: str, expectation: str) -> list[tuple[Any, ...]]:
    rows = read_results(Catalog.load(config).quality_results.path, "orders", table)
    return [
        (r["batch_id"], r["severity"], r["success"], r["evaluated"], r["failed"], r["quarantined"])
        for r in rows
        if r["expectation"] == expectation and r["batch_id"] is not None
    ]


def test_a_critical_bronze_expectation_holds_the_batch_back_until_the_spec_changes(
    spark: SparkSession,
    orders_config: RunoffConfig,
    specs: Path,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = order_lines(0, 12, START)
    land(home, "part-0001.json", first)
    assert runoff("run", "orders") == 0
    before = published(orders_config)

    second = order_lines(12, 10, START + timedelta(hours=2))
    assert '"amount": 11.25' in second[4]
    second[4] = second[4].replace('"amount": 11.25', '"amount": -11.25')
    land(home, "part-0002.json", second)
    capsys.readouterr()
    for _ in range(2):  # the next run retries the same batch, with the same finding
        assert runoff("bronze", "orders") == 1
        assert capsys.readouterr().err.strip().splitlines() == [
            f"runoff: error: critical expectation failed on bronze_orders in batch 1: {AMOUNT}: "
            "observed 1 of 10 unexpected: -11.25. Nothing of the batch was committed and the "
            "checkpoint stays before it: fix those landing files (or the expectation in "
            f"{specs / 'orders.yaml'}) and run `runoff bronze orders` again: it reads the same "
            "files"
        ]
        assert published(orders_config) == before
    failed = last_run(orders_config, "bronze")
    assert failed["status"] == "failed"
    assert failed["error"].startswith("critical expectation failed on bronze_orders in batch 1")
    assert batch_results(orders_config, "bronze_orders", AMOUNT) == [
        (0, "critical", True, 12, 0, 0),
        (1, "critical", False, 10, 1, 0),
        (1, "critical", False, 10, 1, 0),
    ]

    # The spec now only warns: the held-back batch is published, every row once.
    (specs / "orders.yaml").write_text(
        SPEC.replace(
            "min_value: 0,\n       severity: critical", "min_value: 0,\n       severity: warning"
        )
    )
    assert runoff("run", "orders") == 0
    assert_tables(home, first + second, [], [])
    out = capsys.readouterr().out
    assert f"bronze orders: bronze_orders: {AMOUNT}: 1 of 10 rows (warning) over 1 batches" in out
    details = last_run(orders_config, "bronze")["details"]
    assert details["expectations"][f"bronze_orders: {AMOUNT}"] == {
        "severity": "warning",
        "kind": "expect_column_values_to_be_between",
        "column": "amount",
        "batches": 1,
        "evaluated": 10,
        "failed": 1,
        "quarantined": 0,
    }
    after = published(orders_config)
    assert after["bronze_orders"] == before["bronze_orders"] + 1
    assert after["bronze_orders commits"] == ["0", "1"]


def test_a_critical_silver_expectation_leaves_silver_and_its_checkpoint_alone(
    spark: SparkSession,
    orders_config: RunoffConfig,
    specs: Path,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = order_lines(0, 12, START)
    hour = timedelta(hours=1)
    windows = expected_silver(expected_bronze(first), hour, hour, sliding=False)
    assert max(r["revenue"] for r in windows) < 1000  # amounts are at most 22.5
    strict = SPEC.replace(
        "min_value: 1,\n       severity: critical}",
        "min_value: 1,\n       severity: critical}\n"
        "    - {expect: expect_column_values_to_be_between, column: revenue, "
        "max_value: 1000, severity: critical}",
    )
    (specs / "orders.yaml").write_text(strict)
    land(home, "part-0001.json", first)
    assert runoff("run", "orders") == 0
    before = published(orders_config)

    second = order_lines(12, 10, START + timedelta(hours=3))
    second[0] = second[0].replace('"amount": 2.25', '"amount": 5000.0')
    assert '"amount": 5000.0' in second[0]
    land(home, "part-0002.json", second)
    assert runoff("bronze", "orders") == 0  # bronze has no limit on amounts
    capsys.readouterr()
    assert runoff("silver", "orders") == 1
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"runoff: error: critical expectation failed on orders_store_hourly in batch \d+: "
        r"column_values_to_be_between\(revenue, max_value=1000\): observed 1 of \d+ "
        r"unexpected: 50\d\d(\.\d+)?\. Nothing of the batch was committed and the checkpoint "
        r"stays before it: fix bronze .* then run `runoff silver orders` again: it reads the "
        r"same bronze rows",
        err.strip(),
    ), err
    after = published(orders_config)
    silver = ("orders_store_hourly", "orders_store_hourly commits")
    assert {k: after[k] for k in silver} == {k: before[k] for k in silver}

    (specs / "orders.yaml").write_text(
        strict.replace("max_value: 1000, severity: critical", "max_value: 1000, severity: warning")
    )
    assert runoff("silver", "orders") == 0
    assert_tables(home, first + second, [], [])


def test_a_crash_between_the_gate_and_the_commit_loses_and_duplicates_nothing(
    spark: SparkSession,
    orders_config: RunoffConfig,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jobs.bronze.job
    import jobs.silver

    lines = order_lines(0, 20, START)
    land(home, "part-0001.json", lines)
    before = published(orders_config)

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the machine went away")

    with monkeypatch.context() as patch:  # the gate passed; the commit never happens
        patch.setattr(jobs.bronze.job, "append", crash)
        assert runoff("bronze", "orders") == 1
    assert published(orders_config)["bronze_orders commits"] == before["bronze_orders commits"]
    assert runoff("bronze", "orders") == 0
    with monkeypatch.context() as patch:
        patch.setattr(jobs.silver, "merge", crash)
        assert runoff("silver", "orders") == 1
    assert published(orders_config)["orders_store_hourly commits"] == []
    assert runoff("silver", "orders") == 0
    assert_tables(home, lines, [], [])
    assert batch_results(orders_config, "bronze_orders", AMOUNT) == [
        (0, "critical", True, 20, 0, 0),  # checked, then the crash
        (0, "critical", True, 20, 0, 0),  # checked again, committed once
    ]


def test_the_gate_derives_its_columns_on_spark(spark: SparkSession, config: RunoffConfig) -> None:
    """`event_time_date` (UTC date), `window_seconds` and `window_start_offset_seconds` (seconds
    past the last multiple of the slide, or of the window), against Python's arithmetic."""
    from datetime import UTC, datetime

    from quality.gate import with_derived
    from quality.suites import checked_tables

    tables = {t.name: t for t in checked_tables(Catalog.load(config), "events")}
    times = [1_709_251_199, 1_709_251_200, 1_709_337_599]  # 23:59:59, midnight, 23:59:59 UTC
    bronze = spark.createDataFrame(
        [(datetime.fromtimestamp(t, UTC),) for t in times], "event_time timestamp"
    )
    got = [r["event_time_date"] for r in with_derived(bronze, tables["bronze_events"]).collect()]
    assert got == [datetime.fromtimestamp(t, UTC).date() for t in times]

    start = datetime(2024, 3, 1, 10, 5, tzinfo=UTC)
    windows = [(start, 600), (start.replace(second=7), 593), (None, None)]
    rows = [(s, datetime.fromtimestamp(start.timestamp() + 600, UTC), "Open") for s, _ in windows]
    frame = spark.createDataFrame(
        rows, "window_start timestamp, window_end timestamp, action string"
    )
    for name, step in (("events_action_sliding", 300), ("events_action_hourly", 3600)):
        derived = with_derived(frame, tables[name]).collect()
        assert [r["window_seconds"] for r in derived] == [length for _, length in windows]
        assert [r["window_start_offset_seconds"] for r in derived] == [
            None if s is None else int(s.timestamp()) % step for s, _ in windows
        ]
