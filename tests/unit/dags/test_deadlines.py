"""A spec's freshness expectations become its DAG's deadline alert: the run must finish within the
smallest max_age after it was queued, else one message goes out the way a failed task's does.

No scheduler: the DAG is built from a spec folder, serialized as the dag-processor stores it, and
the callback is called the way the executor's callback runner calls it, with the context the
scheduler gives a missed deadline; the notification goes to a fake HTTP receiver on loopback.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.receiver import Receiver
from tests.seeds import SEED_NAMES
from tests.user_specs import write_orders

pytestmark = pytest.mark.airflow

RUN_ID = "scheduled__2024-01-01T00:00:00+00:00"
QUEUED_AT = datetime(2024, 1, 2, 0, 0, 5, tzinfo=UTC)
DEADLINE_TIME = QUEUED_AT + timedelta(minutes=90)
CALLBACK = "dags.notifier.freshness_deadline_missed"
KWARGS = {"dataset": "orders", "table": "orders_store_hourly", "max_age": "90 minutes"}
MESSAGE = (
    f"runoff: DAG runoff_orders missed its freshness deadline (run {RUN_ID}): dataset orders was "
    "not published by 2024-01-02T01:30:05+00:00 (freshness of orders_store_hourly: max_age "
    "90 minutes after the run was queued)"
)


def write_fresh_orders(folder: Path) -> Path:
    """The `orders` spec with three freshness expectations; the smallest max_age (90 minutes) is
    the hourly silver table's."""
    path = write_orders(folder)
    text = path.read_text()
    fresh = (
        text.replace(
            "  bronze:\n",
            '  bronze:\n    - {expect: freshness, max_age: "6 hours"}\n',
            1,
        )
        .replace(
            "  orders_store_hourly:\n",
            "  orders_store_hourly:\n"
            '    - {expect: freshness, max_age: "90 minutes", severity: critical}\n',
            1,
        )
        .replace(
            "schedule:",
            '  quarantine:\n    - {expect: freshness, max_age: "2 days"}\nschedule:',
            1,
        )
    )
    assert fresh.count("expect: freshness") == 3, fresh
    path.write_text(fresh)
    return path


def orders_dag(folder: Path) -> Any:
    from dags.factory import build_dataset_dag, load_catalog

    return build_dataset_dag("orders", catalog=load_catalog({"RUNOFF_DATASETS": str(folder)}))


@pytest.fixture(scope="module")
def fresh_dag(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("fresh-datasets")
    write_fresh_orders(folder)
    return orders_dag(folder)


# -- the deadline of the DAG ------------------------------------------------------------------
def test_a_spec_with_freshness_gets_a_deadline_of_its_smallest_max_age(fresh_dag: Any) -> None:
    from airflow.sdk.definitions.callback import SyncCallback
    from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

    [alert] = fresh_dag.deadline
    assert alert == DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=timedelta(minutes=90),
        callback=SyncCallback(CALLBACK, kwargs=KWARGS),
    )
    assert (
        type(alert.reference).__name__,
        alert.interval,
        type(alert.callback).__name__,
        alert.callback.path,
        alert.callback.kwargs,
        alert.callback.executor,
        alert.name,
    ) == (
        "DagRunQueuedAtDeadline",
        timedelta(minutes=90),
        "SyncCallback",
        CALLBACK,
        KWARGS,
        None,
        "freshness of orders",
    )


def test_a_spec_without_freshness_has_no_deadline(tmp_path: Path) -> None:
    from dags.factory import build_dataset_dag, freshness_deadline, load_catalog

    write_orders(tmp_path / "datasets")
    catalog = load_catalog({"RUNOFF_DATASETS": str(tmp_path / "datasets")})
    for name in (*SEED_NAMES, "orders"):
        assert [e.expect for e in catalog.spec(name).expectations if e.is_freshness] == []
        assert freshness_deadline(catalog.spec(name)) is None
        assert build_dataset_dag(name, catalog=catalog).deadline is None


def test_the_deadline_survives_serialization(fresh_dag: Any) -> None:
    """What the dag-processor stores is what the scheduler turns into each run's deadline."""
    from airflow.serialization.serialized_objects import DagSerialization

    data = DagSerialization.to_dict(fresh_dag)
    DagSerialization.validate_schema(data)
    stored = {
        "name": "freshness of orders",
        "reference": {"reference_type": "DagRunQueuedAtDeadline"},
        "interval": {"__classname__": "datetime.timedelta", "__version__": 2, "__data__": 5400.0},
        "callback": {
            "__classname__": "airflow.sdk.definitions.callback.SyncCallback",
            "__version__": 0,
            "__data__": {"path": CALLBACK, "kwargs": KWARGS, "executor": None},
        },
    }
    assert data["dag"]["deadline"] == [stored]
    back = DagSerialization.from_dict(json.loads(json.dumps(data)))
    assert back.dag_id == "runoff_orders"
    assert back.deadline == [stored]


# -- the callback -------------------------------------------------------------------------------


def missed_context(run_type: str = "scheduled", deadline_time: object = DEADLINE_TIME) -> dict:
    """What the scheduler gives a missed deadline's callback: the run as the REST API shows it
    (JSON) and the deadline."""
    return {
        "dag_run": {
            "dag_run_id": RUN_ID,
            "dag_id": "runoff_orders",
            "logical_date": "2024-01-01T00:00:00Z",
            "queued_at": QUEUED_AT.isoformat(),
            "data_interval_start": "2024-01-01T00:00:00Z",
            "data_interval_end": "2024-01-02T00:00:00Z",
            "run_type": run_type,
            "state": "running",
        },
        "deadline": {"id": "0198c4d2-0000-7000-8000-000000000001", "deadline_time": deadline_time},
    }


def run_callback(dag: Any, context: dict) -> None:
    """Call the DAG's deadline callback as the executor's callback runner does: imported by its
    path, with its kwargs and the context."""
    import structlog
    from airflow.sdk.execution_time.callback_supervisor import execute_callback

    [alert] = dag.deadline
    ok, error = execute_callback(
        alert.callback.path,
        {**alert.callback.kwargs, "context": context},
        dag_rel_path=Path("runoff_datasets.py"),
        bundle_path=None,
        log=structlog.get_logger(),
    )
    assert (ok, error) == (True, None)


def test_a_missed_deadline_posts_one_message_to_the_connection(
    fresh_dag: Any, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNOFF_NOTIFY_CONN_ID", raising=False)
    monkeypatch.setenv(
        "AIRFLOW_CONN_RUNOFF_NOTIFY",
        json.dumps({"conn_type": "http", "host": "127.0.0.1", "port": receiver.port}),
    )
    run_callback(fresh_dag, missed_context())

    assert len(receiver.received) == 1, receiver.received
    method, _path, body = receiver.received[0]
    assert method == "POST"
    assert body == {
        "dag_id": "runoff_orders",
        "task_id": None,
        "run_id": RUN_ID,
        "message": MESSAGE,
    }


def test_a_missed_deadline_is_logged_as_one_line_without_the_connection(
    fresh_dag: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The deadline's time as JSON carries it (ISO-8601 text) gives the same message."""
    monkeypatch.delenv("RUNOFF_NOTIFY_CONN_ID", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_RUNOFF_NOTIFY", raising=False)
    with caplog.at_level(logging.INFO, logger="dags.notifier"):
        run_callback(fresh_dag, missed_context(deadline_time="2024-01-02T01:30:05.123456Z"))
    records = [r for r in caplog.records if r.name == "dags.notifier"]
    assert [(r.levelname, r.getMessage()) for r in records] == [("ERROR", MESSAGE)]


def test_a_backfill_run_past_its_deadline_is_not_notified(
    fresh_dag: Any,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_RUNOFF_NOTIFY", f"http://127.0.0.1:{receiver.port}")
    with caplog.at_level(logging.INFO, logger="dags.notifier"):
        run_callback(fresh_dag, missed_context(run_type="backfill"))
    assert receiver.received == []
    records = [r for r in caplog.records if r.name == "dags.notifier"]
    assert [(r.levelname, r.getMessage()) for r in records] == [
        (
            "INFO",
            f"runoff: backfill run {RUN_ID} of DAG runoff_orders passed its deadline "
            "2024-01-02T01:30:05+00:00",
        )
    ]
