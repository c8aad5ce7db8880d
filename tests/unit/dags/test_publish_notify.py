"""`publish` turns validate's outcome file into asset-event metadata; a failed task is notified
through `RunoffFailureNotifier` (the HTTP provider's `HttpNotifier` when the connection exists,
one log line otherwise); a failed critical expectation fails its task without retries.

No Spark: the tasks' callables are called with hand-made contexts and outcome files, and the
notification goes to a fake HTTP receiver on loopback.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.expected import SILVER_TABLES
from tests.receiver import Receiver

pytestmark = pytest.mark.airflow

RUN_ID = "manual__2024-01-02T05:00:00+00:00"
HOURLY = "3f2a9c0d1e4b"  # the fingerprint of the definition that built events_action_hourly
BRONZE = "9d0c4e1b7a25"  # and of bronze_events
EXPECTATION = "column_values_to_be_in_set(action, value_set=[Open, Close])"
GATE_ERROR = (
    "runoff: error: critical expectation failed on bronze_events in batch 0: "
    f"{EXPECTATION}: observed 1 of 26 unexpected: Jump. Nothing of the batch was committed"
)


def validate_outcome(docs: str | None = "/home/q/gx/index.html") -> dict[str, Any]:
    """What `runoff --outcome P validate events` writes for a passed run (the shape of
    `ValidationReport.summary()`, tests/unit/jobs/cli/test_outcome.py)."""

    def table(layer: str, versions: str, first: int, last: int, rows: int) -> dict[str, Any]:
        return {
            "layer": layer,
            "status": "validated",
            "versions": versions,
            "from_version": first,
            "to_version": last,
            "rows": rows,
            "expectations_passed": 3,
            "expectations_failed": 0,
            "warnings": 1,
        }

    tables = {
        "bronze_events": {**table("bronze", "1..2", 1, 2, 150), "definition": BRONZE},
        "quarantine_events": table("bronze", "1..2", 1, 2, 6),
        "events_action_hourly": {**table("silver", "0..3", 0, 3, 40), "definition": HOURLY},
        # a table validate had nothing new for, and without a stored definition
        "events_action_sliding": {
            **table("silver", "5", 5, 5, 0),
            "status": "no new data",
            "from_version": None,
            "definition": None,
        },
    }
    return {
        "command": "validate",
        "dataset": "events",
        "exit_code": 0,
        "error": None,
        "error_type": None,
        "summary": {
            "dataset": "events",
            "run_id": "abc",
            "layers": ["bronze", "silver"],
            "full": False,
            "tables": tables,
            "expectations_passed": 12,
            "expectations_failed": 0,
            "warnings": 4,
            "quarantined_rows": 6,
            "passed": True,
            "failure": None,
            "data_docs": docs,
        },
    }


class OutletEvents(dict[Any, Any]):
    """The task context's `outlet_events`: an accessor per asset, made on first use."""

    def __missing__(self, asset: Any) -> SimpleNamespace:
        self[asset] = SimpleNamespace(extra={})
        return self[asset]


@pytest.fixture(scope="module")
def dag() -> Any:
    from dags.factory import build_dataset_dag

    return build_dataset_dag("events")


# -- publish --------------------------------------------------------------------------------
def test_publish_sets_every_outlet_events_extra(dag: Any, tmp_path: Path) -> None:
    path = tmp_path / "validate.json"
    path.write_text(json.dumps(validate_outcome()))
    publish = dag.get_task("publish")
    events = OutletEvents()
    publish.python_callable(str(path), outlet_events=events)

    names = ["bronze_events", "quarantine_events", *SILVER_TABLES["events"]]
    assert [a.name for a in publish.outlets] == names
    assert set(events) == set(publish.outlets)
    extra = {asset.name: events[asset].extra for asset in publish.outlets}
    common = {
        "dataset": "events",
        "quarantined_rows": 6,
        "expectations_failed": 0,
        "data_docs": "/home/q/gx/index.html",
        "validate_run_id": "abc",
    }
    assert extra["bronze_events"] == {
        **common,
        "table": "bronze_events",
        "layer": "bronze",
        "status": "validated",
        "rows": 150,
        "versions": "1..2",
        "from_version": 1,
        "to_version": 2,
        "expectations_passed": 3,
        "warnings": 1,
        "definition": BRONZE,
    }
    assert extra["quarantine_events"]["layer"] == "quarantine"  # the asset's layer
    assert extra["quarantine_events"]["rows"] == 6
    assert extra["events_action_hourly"] | {"rows": 40} == extra["events_action_hourly"]
    assert (
        extra["events_action_hourly"]["from_version"],
        extra["events_action_hourly"]["to_version"],
    ) == (0, 3)
    assert extra["events_action_sliding"]["status"] == "no new data"
    assert extra["events_action_sliding"]["from_version"] is None
    assert extra["events_action_hourly"]["definition"] == HOURLY
    assert extra["events_action_sliding"]["definition"] is None
    assert "definition" not in extra["quarantine_events"]
    json.dumps(extra)  # an event's extra must be JSON


def test_publish_template_reads_validates_outcome_file(dag: Any) -> None:
    from dags.outcome import outcome_template

    assert list(dag.get_task("publish").op_args) == [outcome_template("validate")]
    assert "'validate'" in outcome_template("validate")


@pytest.mark.parametrize("case", ["failed", "missing"])
def test_publish_announces_nothing_without_a_passed_validation(
    dag: Any, tmp_path: Path, case: str
) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    path = tmp_path / "validate.json"
    if case == "failed":
        failed = validate_outcome() | {"exit_code": 1, "error": "runoff: error: critical ..."}
        failed["summary"]["passed"] = False
        path.write_text(json.dumps(failed))
    events = OutletEvents()
    with pytest.raises(AirflowFailException):
        dag.get_task("publish").python_callable(str(path), outlet_events=events)
    assert events == {}


# -- the failure notifier ---------------------------------------------------------------------


def failed_context(outcome_file: Path, task_id: str = "bronze") -> dict[str, Any]:
    """The callback context of a failed, rendered runoff task."""
    return {
        "ti": SimpleNamespace(dag_id="runoff_events", task_id=task_id, run_id=RUN_ID),
        "task": SimpleNamespace(
            task_id=task_id,
            application_args=["--home", "/h", "--outcome", str(outcome_file), task_id, "events"],
        ),
        "run_id": RUN_ID,
        "exception": RuntimeError("Cannot execute: spark-submit ... Error code is: 1."),
    }


def write_gate_failure(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "command": "bronze",
                "dataset": "events",
                "exit_code": 1,
                "error": GATE_ERROR,
                "error_type": "QualityCheckFailed",
                "summary": None,
            }
        )
    )
    return path


def test_notifier_posts_one_message_to_the_connection(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dags.notifier import runoff_notifier

    monkeypatch.delenv("RUNOFF_NOTIFY_CONN_ID", raising=False)
    monkeypatch.setenv(
        "AIRFLOW_CONN_RUNOFF_NOTIFY",
        json.dumps({"conn_type": "http", "host": "127.0.0.1", "port": receiver.port}),
    )
    outcome = write_gate_failure(tmp_path / "bronze.json")
    runoff_notifier()(failed_context(outcome))

    assert len(receiver.received) == 1, receiver.received
    method, _path, body = receiver.received[0]
    assert method == "POST"
    assert set(body) == {"dag_id", "task_id", "run_id", "message"}
    assert (body["dag_id"], body["task_id"], body["run_id"]) == ("runoff_events", "bronze", RUN_ID)
    assert body["message"] == (
        f"runoff: task bronze of DAG runoff_events failed (run {RUN_ID}): {GATE_ERROR}"
    )
    assert EXPECTATION in body["message"]


def test_notifier_connection_id_comes_from_the_environment(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dags.notifier import runoff_notifier

    monkeypatch.delenv("AIRFLOW_CONN_RUNOFF_NOTIFY", raising=False)
    monkeypatch.setenv("RUNOFF_NOTIFY_CONN_ID", "team_hook")
    monkeypatch.setenv("AIRFLOW_CONN_TEAM_HOOK", f"http://127.0.0.1:{receiver.port}")
    runoff_notifier()(failed_context(write_gate_failure(tmp_path / "bronze.json")))
    assert [body["task_id"] for _, _, body in receiver.received] == ["bronze"]


def test_notifier_logs_one_line_without_the_connection(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dags.notifier import runoff_notifier

    monkeypatch.delenv("RUNOFF_NOTIFY_CONN_ID", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_RUNOFF_NOTIFY", raising=False)
    outcome = write_gate_failure(tmp_path / "bronze.json")
    with caplog.at_level(logging.WARNING, logger="dags.notifier"):
        runoff_notifier()(failed_context(outcome))
    records = [r for r in caplog.records if r.name == "dags.notifier"]
    assert [r.levelname for r in records] == ["ERROR"]
    message = records[0].getMessage()
    assert "\n" not in message
    assert (
        message == f"runoff: task bronze of DAG runoff_events failed (run {RUN_ID}): {GATE_ERROR}"
    )


def test_notifier_without_an_outcome_names_the_exception(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dags.notifier import runoff_notifier

    monkeypatch.delenv("AIRFLOW_CONN_RUNOFF_NOTIFY", raising=False)
    with caplog.at_level(logging.WARNING, logger="dags.notifier"):
        runoff_notifier()(failed_context(tmp_path / "none.json", task_id="silver"))
    [record] = [r for r in caplog.records if r.name == "dags.notifier"]
    assert record.getMessage() == (
        f"runoff: task silver of DAG runoff_events failed (run {RUN_ID}): "
        "Cannot execute: spark-submit ... Error code is: 1."
    )


# -- a failed critical expectation is not retried ------------------------------------------------
@pytest.mark.parametrize("quality", [True, False])
def test_a_failed_expectation_fails_the_task_without_retry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, quality: bool
) -> None:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

    from dags.factory import build_dataset_dag

    outcome = tmp_path / "bronze.json"
    outcome.write_text("stale")  # an earlier try's: removed before the submit
    seen: list[bool] = []

    def submit(self: Any, context: Any) -> None:
        seen.append(outcome.exists())
        write_gate_failure(outcome)
        if not quality:
            data = json.loads(outcome.read_text()) | {"error_type": "LockHeldError"}
            outcome.write_text(json.dumps(data))
        raise AirflowException("Cannot execute: spark-submit. Error code is: 1.")

    monkeypatch.setattr(SparkSubmitOperator, "execute", submit)
    task = build_dataset_dag("events").get_task("bronze")
    task.application_args = ["--home", "/h", "--outcome", str(outcome), "bronze", "events"]
    with pytest.raises(AirflowException) as raised:
        task.execute(context={})
    assert seen == [False]
    assert isinstance(raised.value, AirflowFailException) is quality
    assert (str(raised.value) == GATE_ERROR) is quality
