"""Notifications of runoff's DAGs: a failed task (`RunoffFailureNotifier`, every task's
`on_failure_callback`) and a missed freshness deadline (`freshness_deadline_missed`, the callback
of a dataset DAG's deadline alert).

Input: a failed task's callback context (DAG, task, run, exception) and its outcome file
(`dags.outcome`); or a missed deadline's context (the DAG run, the deadline's time) and the
dataset's freshness expectation. Output: one message, POSTed as JSON by the HTTP provider's
`HttpNotifier` to the Airflow connection `$RUNOFF_NOTIFY_CONN_ID` (default `runoff_notify`) when
it exists, else logged as one ERROR line (logger `dags.notifier`: the task's log, or the
callback's).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseNotifier

from dags.outcome import outcome_arg, outcome_path, read_outcome, runoff_home

NOTIFY_CONN_ENV = "RUNOFF_NOTIFY_CONN_ID"
DEFAULT_NOTIFY_CONN_ID = "runoff_notify"

log = logging.getLogger(__name__)


def failure_message(
    dag_id: str, task_id: str, run_id: str, outcome: Mapping[str, Any] | None, exception: object
) -> str:
    """One line naming the DAG, task, run and why: the outcome's error line (for a failed
    expectation it names the table and the expectation), else the task's exception."""
    reason = (outcome or {}).get("error") or (
        str(exception).strip().splitlines()[0] if str(exception or "").strip() else "see its log"
    )
    return f"runoff: task {task_id} of DAG {dag_id} failed (run {run_id}): {reason}"


def deadline_message(
    dag_id: str, run_id: str, dataset: str, deadline: str, table: str, max_age: str
) -> str:
    """One line naming the DAG, the run, the dataset, the deadline and the freshness expectation
    it comes from."""
    return (
        f"runoff: DAG {dag_id} missed its freshness deadline (run {run_id}): dataset {dataset} "
        f"was not published by {deadline} (freshness of {table}: max_age {max_age} after the run "
        "was queued)"
    )


def _connection_exists(conn_id: str) -> bool:
    from airflow.sdk import Connection

    try:
        Connection.get(conn_id)
    except Exception:  # noqa: BLE001 - not found, or no way to look it up: log instead
        return False
    return True


def _http_notifier(conn_id: str, payload: Mapping[str, Any]) -> BaseNotifier | None:
    try:
        from airflow.providers.http.notifications.http import HttpNotifier
    except ImportError:
        return None
    if not _connection_exists(conn_id):
        return None
    return HttpNotifier(http_conn_id=conn_id, method="POST", json=dict(payload))


def send(payload: Mapping[str, Any], conn_id: str | None = None) -> None:
    """Deliver one notification: POST `payload` (its `message` is the text) as JSON through the
    HTTP provider's `HttpNotifier` to the connection `conn_id` (default `$RUNOFF_NOTIFY_CONN_ID`,
    else `runoff_notify`) when it exists and the provider is installed, else log the message as
    one ERROR line."""
    conn_id = conn_id or os.environ.get(NOTIFY_CONN_ENV) or DEFAULT_NOTIFY_CONN_ID
    notifier = _http_notifier(conn_id, payload)
    if notifier is None:
        log.error("%s", payload["message"])
        return
    # `notify`, not `notifier(context)`: the message is literal text, never a template.
    notifier.notify({})


class RunoffFailureNotifier(BaseNotifier):
    """`on_failure_callback` of every runoff task: one message naming the DAG, the task, the run
    and the error line of the task's outcome file (`runoff --outcome`).

    Delivery (`send`): when the Airflow connection `conn_id` (default `$RUNOFF_NOTIFY_CONN_ID`,
    else `runoff_notify`) exists and apache-airflow-providers-http is installed, the provider's
    `HttpNotifier` POSTs `{dag_id, task_id, run_id, message}` as JSON to it (its host, port,
    schema and, in its extra, `endpoint`); otherwise the message is logged as one error line.
    """

    def __init__(self, conn_id: str | None = None) -> None:
        super().__init__()
        self.conn_id = conn_id

    def notify(self, context: Any) -> None:
        ti = context.get("ti") or context.get("task_instance")
        dag_id = str(getattr(ti, "dag_id", None) or context["dag"].dag_id)
        task_id = str(getattr(ti, "task_id", None) or context["task"].task_id)
        run_id = str(getattr(ti, "run_id", None) or context.get("run_id"))
        path = outcome_arg(getattr(context.get("task"), "application_args", None))
        if path is None or "{{" in path:  # not rendered: the task failed before it started
            path = outcome_path(runoff_home(), dag_id, run_id, task_id)
        message = failure_message(
            dag_id, task_id, run_id, read_outcome(path), context.get("exception")
        )
        payload = {"dag_id": dag_id, "task_id": task_id, "run_id": run_id, "message": message}
        send(payload, self.conn_id)


def runoff_notifier(conn_id: str | None = None) -> RunoffFailureNotifier:
    """The failure notifier of runoff's tasks (`DEFAULT_ARGS["on_failure_callback"]`)."""
    return RunoffFailureNotifier(conn_id)


def _utc_text(moment: object) -> str:
    """A deadline's time as ISO-8601 UTC to the second; the scheduler hands it over as a datetime
    or, once the callback's data went through JSON, as its ISO-8601 text."""
    try:
        when = moment if isinstance(moment, datetime) else datetime.fromisoformat(str(moment))
    except ValueError:
        return str(moment)
    return when.astimezone(UTC).isoformat(timespec="seconds")


def freshness_deadline_missed(
    context: Mapping[str, Any],
    dataset: str,
    table: str,
    max_age: str,
) -> None:
    """The callback of a dataset DAG's freshness deadline (`dags.factory.freshness_deadline`), run
    by the executor when a run has not finished by its deadline: one message naming the DAG, the
    run, the dataset and the deadline, delivered like a failed task's (`send`), with `task_id`
    null.

    `context` is what the scheduler gives a deadline callback: `dag_run` (the run as the REST
    API shows it: `dag_id`, `dag_run_id`, `run_type`, ...) and `deadline` (`deadline_time`).
    A backfill run is not notified (one INFO line instead): a backfill queues all of its runs at
    once and re-runs past intervals, so its runs' deadlines say nothing about a delivery.
    """
    dag_run = context.get("dag_run") or {}
    dag_id = str(dag_run.get("dag_id") or f"runoff_{dataset}")
    run_id = str(dag_run.get("dag_run_id") or dag_run.get("run_id"))
    deadline = _utc_text((context.get("deadline") or {}).get("deadline_time"))
    if dag_run.get("run_type") == "backfill":
        log.info(
            "runoff: backfill run %s of DAG %s passed its deadline %s", run_id, dag_id, deadline
        )
        return
    message = deadline_message(dag_id, run_id, dataset, deadline, table, max_age)
    send({"dag_id": dag_id, "task_id": None, "run_id": run_id, "message": message})
