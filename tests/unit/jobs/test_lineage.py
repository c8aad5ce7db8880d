"""OpenLineage events without Spark: configuration, names, column lineage from the spec, and
events built from run records, each checked against the specification's JSON schemas.

The emitted events of real runs (bronze -> silver -> validate, a failed run) are
tests/spark/jobs/test_lineage.py's.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.serde import Serde

from core.config import RunoffConfig
from delta_tables.ledger import RunRecord, listening, recorded_run
from jobs import lineage
from jobs.lineage import (
    ColumnSource,
    LineageListener,
    RunReference,
    bronze_lineage,
    configured,
    dataset_id,
    record_fields,
    silver_lineage,
)
from tests.lineage_receiver import LineageReceiver, problems
from tests.user_specs import write_orders

PARENT_RUN = "01931f2e-6a6e-7c4e-9d3e-2b1f5a0c9e11"
ROOT_RUN = "01931f2e-0000-7c4e-9d3e-2b1f5a0c9e22"


@pytest.fixture
def orders(tmp_path: Path, home: Path) -> RunoffConfig:
    """A home whose datasets folder holds the user's `orders` spec."""
    folder = tmp_path / "specs"
    write_orders(folder)
    return RunoffConfig.from_sources(home=home, env={"RUNOFF_DATASETS": str(folder)})


class Kept:
    """A stand-in for the OpenLineage client: keeps what it is given, as JSON."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: Any) -> None:
        self.events.append(json.loads(Serde.to_json(event)))


def listener(config: RunoffConfig, env: dict[str, str] | None = None) -> tuple[Any, Kept]:
    kept = Kept()
    return LineageListener(config, kept, env or {}), kept  # type: ignore[arg-type]


# -- configuration and names --------------------------------------------------------------------
def test_nothing_is_configured_without_the_standard_settings(tmp_path: Path) -> None:
    assert not configured({}, cwd=tmp_path)
    assert configured({"OPENLINEAGE_URL": "http://127.0.0.1:5000"}, cwd=tmp_path)
    assert configured({"OPENLINEAGE_CONFIG": str(tmp_path / "ol.yml")}, cwd=tmp_path)
    assert configured({"OPENLINEAGE__TRANSPORT__TYPE": "console"}, cwd=tmp_path)
    disabled = {"OPENLINEAGE_URL": "http://127.0.0.1:5000", "OPENLINEAGE_DISABLED": "true"}
    assert not configured(disabled, cwd=tmp_path)
    (tmp_path / "openlineage.yml").write_text("transport:\n  type: console\n")
    assert configured({}, cwd=tmp_path)


def test_without_settings_a_run_has_no_listener(
    config: RunoffConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    told: list[str] = []
    monkeypatch.setattr(LineageListener, "run_started", lambda self, r: told.append("start"))
    record = RunRecord(dataset="events", layer="bronze")
    with lineage.emitting(config, env={}), recorded_run(config.runs_path, record):
        pass
    assert told == []


def test_dataset_names_follow_openlineage_naming(tmp_path: Path) -> None:
    assert dataset_id(tmp_path / "delta" / "bronze" / "events") == (
        "file",
        str(tmp_path / "delta" / "bronze" / "events"),
    )
    assert dataset_id("s3a://lake/runoff/delta/bronze/events") == (
        "s3://lake",
        "runoff/delta/bronze/events",
    )


def test_a_parent_is_namespace_job_and_run_id() -> None:
    assert RunReference.parse(f"default/runoff_events.bronze/{PARENT_RUN}") == RunReference(
        "default", "runoff_events.bronze", PARENT_RUN
    )
    assert RunReference.parse("default/runoff_events.bronze/not-a-uuid") is None
    assert RunReference.parse("") is None


def test_record_fields_of_a_ddl_list() -> None:
    ddl = "order_id STRING, `unit price` DECIMAL(10, 2), tags ARRAY<STRING>, m MAP<STRING, INT>"
    assert record_fields(ddl) == [
        ("order_id", "string"),
        ("unit price", "decimal(10, 2)"),
        ("tags", "array<string>"),
        ("m", "map<string, int>"),
    ]


# -- column lineage from the spec ---------------------------------------------------------------
def test_bronze_columns_come_from_their_landing_fields(orders: RunoffConfig) -> None:
    from delta_tables.catalog import Catalog

    spec = Catalog.load(orders).spec("orders")
    same = {f: ColumnSource((f,), "IDENTITY") for f in ("order_id", "ts", "store", "amount")}
    assert bronze_lineage(spec) == {
        **same,
        "items": ColumnSource(("items",), "IDENTITY"),
        "event_time": ColumnSource(("ts",), "TRANSFORMATION"),
        "event_date": ColumnSource(("ts",), "TRANSFORMATION"),
    }


def test_silver_keys_and_measures_come_from_their_bronze_columns(orders: RunoffConfig) -> None:
    from delta_tables.catalog import Catalog

    spec = Catalog.load(orders).spec("orders")
    window = {
        c: ColumnSource(("event_time",), "TRANSFORMATION") for c in ("window_start", "window_end")
    }
    # count(*) reads no column: `orders` has no input field.
    assert silver_lineage(spec.silver_spec("orders_store_hourly")) == {
        **window,
        "store": ColumnSource(("store",), "IDENTITY"),
        "revenue": ColumnSource(("amount",), "AGGREGATION"),
        "max_items": ColumnSource(("items",), "AGGREGATION"),
    }
    assert silver_lineage(spec.silver_spec("orders_store_sliding")) == {
        **window,
        "store": ColumnSource(("store",), "IDENTITY"),
        "mean_items": ColumnSource(("items",), "AGGREGATION"),
        "revenue": ColumnSource(("amount",), "AGGREGATION"),
    }


def test_renamed_and_selected_columns(tmp_path: Path, home: Path) -> None:
    from core.specs import load_spec

    activity = load_spec(Path(lineage.__file__).parent / "datasets" / "activity.yaml")
    found = bronze_lineage(activity)
    assert found["User_ID"] == ColumnSource(("Index",), "IDENTITY")
    assert "Index" not in found
    selected = activity.__class__(
        **{**activity.__dict__, "select": ("upper(Model) AS model", "x + y AS xy")}
    )
    found = bronze_lineage(selected)
    assert (found["model"], found["xy"]) == (
        ColumnSource(("Model",), "TRANSFORMATION"),
        ColumnSource(("x", "y"), "TRANSFORMATION"),
    )


# -- events from run records --------------------------------------------------------------------
def finished(record: RunRecord, status: str, error: str | None = None) -> RunRecord:
    record.ended_at = record.started_at + timedelta(seconds=3)
    record.status, record.error = status, error
    return record


def test_a_bronze_run_reads_landing_and_writes_bronze_and_quarantine(
    orders: RunoffConfig,
) -> None:
    env = {
        "OPENLINEAGE_NAMESPACE": "shop",
        "OPENLINEAGE_PARENT_ID": f"airflow/runoff_orders.bronze/{PARENT_RUN}",
        "OPENLINEAGE_ROOT_PARENT_ID": f"airflow/runoff_orders/{ROOT_RUN}",
    }
    watcher, kept = listener(orders, env)
    record = RunRecord(dataset="orders", layer="bronze", trigger="available-now")
    watcher.run_started(record)
    record.rows, record.quarantined = 40, 2
    record.versions_after = {"bronze_orders": 3, "quarantine_orders": 1}
    record.details["expectations"] = {
        "bronze_orders: column_values_to_be_between(amount, min_value=0)": {
            "severity": "critical",
            "kind": "expect_column_values_to_be_between",
            "column": "amount",
            "batches": 2,
            "evaluated": 40,
            "failed": 0,
            "quarantined": 0,
        },
        "bronze_orders: known_store": {
            "severity": "quarantine",
            "kind": "",
            "column": None,
            "batches": 2,
            "evaluated": 42,
            "failed": 2,
            "quarantined": 2,
        },
    }
    watcher.run_ended(finished(record, "success"))
    start, end = kept.events
    assert [problems(e) for e in kept.events] == [[], []]
    assert (start["eventType"], end["eventType"]) == ("START", "COMPLETE")
    assert start["run"]["runId"] == end["run"]["runId"] == str(uuid.UUID(record.run_id))
    assert start["job"]["namespace"] == "shop" and start["job"]["name"] == "runoff.orders.bronze"
    parent = end["run"]["facets"]["parent"]
    assert (parent["job"]["namespace"], parent["job"]["name"], parent["run"]["runId"]) == (
        "airflow",
        "runoff_orders.bronze",
        PARENT_RUN,
    )
    assert parent["root"]["job"]["name"] == "runoff_orders"
    assert parent["root"]["run"]["runId"] == ROOT_RUN
    landing = ("file", str(orders.home / "landing" / "orders"))
    tables = [("file", str(orders.home / "delta" / k / "orders")) for k in ("bronze", "quarantine")]
    assert [(d["namespace"], d["name"]) for d in end["inputs"]] == [landing]
    assert [(d["namespace"], d["name"]) for d in end["outputs"]] == tables
    fields = end["inputs"][0]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in fields] == [
        ("order_id", "string"),
        ("ts", "string"),
        ("store", "string"),
        ("amount", "double"),
        ("items", "int"),
    ]
    bronze, quarantine = end["outputs"]
    assert bronze["facets"]["version"]["datasetVersion"] == "3"
    assert quarantine["facets"]["version"]["datasetVersion"] == "1"
    assert bronze["facets"]["symlinks"]["identifiers"][0]["name"] == "bronze_orders"
    assert bronze["outputFacets"]["outputStatistics"]["rowCount"] == 40
    assert quarantine["outputFacets"]["outputStatistics"]["rowCount"] == 2
    amount = bronze["facets"]["columnLineage"]["fields"]["amount"]["inputFields"]
    assert [(f["namespace"], f["name"], f["field"]) for f in amount] == [(*landing, "amount")]
    assertions = bronze["facets"]["dataQualityAssertions"]["assertions"]
    assert [(a["assertion"], a.get("column"), a["success"], a["severity"]) for a in assertions] == [
        ("expect_column_values_to_be_between", "amount", True, "critical"),
        ("known_store", None, False, "quarantine"),
    ]
    assert "dataQualityAssertions" not in quarantine["facets"]
    # Nothing at the start that only the end knows.
    assert all("version" not in d["facets"] for d in start["outputs"])


def test_a_failed_run_ends_with_fail_and_its_error_line(orders: RunoffConfig) -> None:
    watcher, kept = listener(orders)
    record = RunRecord(dataset="orders", layer="silver", trigger="available-now")
    watcher.run_started(record)
    watcher.run_ended(finished(record, "failed", "orders_store_hourly: a critical expectation"))
    assert [e["eventType"] for e in kept.events] == ["START", "FAIL"]
    end = kept.events[1]
    assert [problems(e) for e in kept.events] == [[], []]
    assert end["run"]["facets"]["errorMessage"]["message"] == (
        "orders_store_hourly: a critical expectation"
    )
    assert [d["name"] for d in end["inputs"]] == [str(orders.home / "delta" / "bronze" / "orders")]
    assert [d["name"] for d in end["outputs"]] == [
        str(orders.home / "delta" / "silver" / t)
        for t in ("orders_store_hourly", "orders_store_sliding")
    ]
    revenue = end["outputs"][0]["facets"]["columnLineage"]["fields"]["revenue"]["inputFields"]
    assert [(f["field"], f["transformations"]) for f in revenue] == [
        ("amount", [{"type": "DIRECT", "subtype": "AGGREGATION"}])
    ]


def test_an_interrupted_run_ends_with_abort_and_a_backfill_has_its_interval(
    orders: RunoffConfig,
) -> None:
    watcher, kept = listener(orders)
    record = RunRecord(dataset="orders", layer="backfill", trigger="batch")
    start = datetime(2024, 5, 1, 9, tzinfo=UTC)
    record.details = {"start": start.isoformat(), "end": (start + timedelta(hours=1)).isoformat()}
    watcher.run_ended(finished(record, "interrupted", "terminated by SIGTERM"))
    (end,) = kept.events
    assert problems(end) == []
    assert end["eventType"] == "ABORT"
    assert end["run"]["facets"]["nominalTime"] == {
        **{k: v for k, v in end["run"]["facets"]["nominalTime"].items() if k.startswith("_")},
        "nominalStartTime": "2024-05-01T09:00:00Z",
        "nominalEndTime": "2024-05-01T10:00:00Z",
    }
    assert len(end["outputs"]) == 4  # bronze, quarantine and both silver tables


def test_reset_and_maintain_emit_nothing(orders: RunoffConfig) -> None:
    watcher, kept = listener(orders)
    for layer in ("reset", "maintain"):
        record = RunRecord(dataset="orders", layer=layer)
        watcher.run_started(record)
        watcher.run_ended(finished(record, "success"))
    assert kept.events == []


def test_a_lineage_server_that_fails_costs_a_warning_not_the_run(
    orders: RunoffConfig, caplog: pytest.LogCaptureFixture
) -> None:
    class Refusing:
        def emit(self, event: Any) -> None:
            raise ConnectionRefusedError("[Errno 111] Connection refused")

    watcher = LineageListener(orders, Refusing(), {})  # type: ignore[arg-type]
    record = RunRecord(dataset="orders", layer="validate")
    with listening(watcher), recorded_run(orders.runs_path, record):
        pass
    warnings = [r.getMessage() for r in caplog.records if r.name == "jobs.lineage"]
    assert warnings == [
        "lineage: could not send the START event of runoff.orders.validate: "
        "[Errno 111] Connection refused",
        "lineage: could not send the COMPLETE event of runoff.orders.validate: "
        "[Errno 111] Connection refused",
    ]


def test_settings_the_client_refuses_cost_a_warning_not_the_run(
    config: RunoffConfig,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = tmp_path / "openlineage.yml"
    settings.write_text("transport:\n  type: nosuch\n")
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(settings))
    record = RunRecord(dataset="events", layer="bronze")
    with lineage.emitting(config), recorded_run(config.runs_path, record):
        pass
    assert record.status == "success"
    warnings = [r.getMessage() for r in caplog.records if r.name == "jobs.lineage"]
    assert warnings == [
        "lineage: not sent, the OpenLineage settings are refused: Failed to import nosuch"
    ]


def test_validate_starts_with_its_layers_tables_and_ends_with_those_it_validated(
    orders: RunoffConfig,
) -> None:
    watcher, kept = listener(orders)
    record = RunRecord(dataset="orders", layer="validate", trigger="incremental")
    record.details["layers"] = ["bronze"]
    watcher.run_started(record)
    record.details = {
        "layers": ["bronze", "silver"],
        "tables": {
            "bronze_orders": "validated",
            "quarantine_orders": "no new data",
            "orders_store_hourly": "validated",
            "orders_store_sliding": "skipped",
        },
    }
    watcher.run_ended(finished(record, "success"))
    start, end = kept.events
    delta = orders.home / "delta"
    assert [d["name"] for d in start["inputs"]] == [
        str(delta / "bronze" / "orders"),
        str(delta / "quarantine" / "orders"),
    ]
    assert [d["name"] for d in end["inputs"]] == [
        str(delta / "bronze" / "orders"),
        str(delta / "silver" / "orders_store_hourly"),
    ]
    assert start["outputs"] == end["outputs"] == []


def test_each_command_sends_to_the_url_of_its_own_environment(
    orders: RunoffConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client copies OPENLINEAGE_URL into OPENLINEAGE__TRANSPORT__* variables as it starts;
    left in the process, they would send the next command's events (the next client of
    `runoff serve`) to the first one's server."""
    import os

    first, second = LineageReceiver(), LineageReceiver()
    before = dict(os.environ)
    try:
        for receiver in (first, second):
            monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
            record = RunRecord(dataset="orders", layer="validate")
            with lineage.emitting(orders), recorded_run(orders.runs_path, record):
                pass
            assert dict(os.environ) == {**before, "OPENLINEAGE_URL": receiver.url}
        assert [len(first.events()), len(second.events())] == [2, 2]
    finally:
        first.stop()
        second.stop()
