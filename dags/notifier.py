"""Failure notifications of runoff's tasks: `RunoffFailureNotifier` (`on_failure_callback`).

Input: a failed task's callback context (DAG, task, run, exception) and its outcome file
(`dags.outcome`). Output: one message naming the DAG, the task, the run and the outcome's error
line, POSTed as JSON by the HTTP provider's `HttpNotifier` to the Airflow connection
`$RUNOFF_NOTIFY_CONN_ID` (default `runoff_notify`) when it exists, else logged as one ERROR line
(logger `dags.notifier`, the task log).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
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


def _connection_exists(conn_id: str) -> bool:
    from airflow.sdk import Connection

    try:
        Connection.get(conn_id)
    except Exception:  # noqa: BLE001 - not found, or no way to look it up: log instead
        return False
    return True


class RunoffFailureNotifier(BaseNotifier):
    """`on_failure_callback` of every runoff task: one message naming the DAG, the task, the run
    and the error line of the task's outcome file (`runoff --outcome`).

    Delivery: when the Airflow connection `conn_id` (default `$RUNOFF_NOTIFY_CONN_ID`, else
    `runoff_notify`) exists and apache-airflow-providers-http is installed, the provider's
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
        conn_id = self.conn_id or os.environ.get(NOTIFY_CONN_ENV) or DEFAULT_NOTIFY_CONN_ID
        notifier = self._http_notifier(conn_id, dag_id, task_id, run_id, message)
        if notifier is None:
            log.error("%s", message)
            return
        # `notify`, not `notifier(context)`: the message is literal text, never a template.
        notifier.notify(context)

    @staticmethod
    def _http_notifier(
        conn_id: str, dag_id: str, task_id: str, run_id: str, message: str
    ) -> BaseNotifier | None:
        try:
            from airflow.providers.http.notifications.http import HttpNotifier
        except ImportError:
            return None
        if not _connection_exists(conn_id):
            return None
        payload = {"dag_id": dag_id, "task_id": task_id, "run_id": run_id, "message": message}
        return HttpNotifier(http_conn_id=conn_id, method="POST", json=payload)


def runoff_notifier(conn_id: str | None = None) -> RunoffFailureNotifier:
    """The failure notifier of runoff's tasks (`DEFAULT_ARGS["on_failure_callback"]`)."""
    return RunoffFailureNotifier(conn_id)
