"""Where a task's `runoff` call finds its home and writes its outcome file, and how that is read.

Input: the runoff home (Airflow Variable `runoff_home`, else `$RUNOFF_HOME`, else `<repo>/.runoff`)
and a task's DAG id, run id and task id. Output: the Jinja templates of a task's `--home` and
`--outcome` arguments (rendered at run time) with the macros they call, the outcome file's path
`<home>/airflow/outcomes/<dag_id>/<run_id>/<task_id>.json`, and its content: the JSON that
`runoff --outcome` writes (command, dataset, exit code, the error line and its class, validate's
summary). Airflow is imported only inside `runoff_home` (a task's Variable lookup).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
HOME_VARIABLE = "runoff_home"
# Rendered when a task runs: the Variable wins over the environment of the worker.
HOME_EXPRESSION = "var.value.get('" + HOME_VARIABLE + "', runoff_home_default())"
HOME_TEMPLATE = "{{ " + HOME_EXPRESSION + " }}"
# The error class (the outcome's `error_type`) of a failed critical expectation: a finding about
# the data, which a retry cannot fix.
QUALITY_FAILURE = "QualityCheckFailed"


def default_home(env: Mapping[str, str] | None = None) -> str:
    """`RUNOFF_HOME` of the environment (absolute), else `<repo>/.runoff`."""
    env = os.environ if env is None else env
    raw = env.get("RUNOFF_HOME") or str(REPO_ROOT / ".runoff")
    return str(Path(raw).expanduser().absolute())


def runoff_home() -> str:
    """The home as the tasks render it: Variable `runoff_home`, else `default_home()`."""
    from airflow.sdk import Variable

    try:
        return str(Variable.get(HOME_VARIABLE, default=None) or default_home())
    except Exception:  # noqa: BLE001 - no Variable access (outside a task): the environment's
        return default_home()


def outcome_path(home: str, dag_id: str, run_id: str, task_id: str) -> str:
    """Where a task's `runoff --outcome` file goes:
    `<home>/airflow/outcomes/<dag_id>/<run_id>/<task_id>.json` (a run id is one path segment:
    Airflow's default `allowed_run_id_pattern` has no `/`)."""
    return str(Path(home) / "airflow" / "outcomes" / dag_id / run_id / f"{task_id}.json")


def outcome_template(task_id: str | None = None) -> str:
    """The outcome file of a task of the running DAG run (`outcome_path`), rendered at run time;
    `task_id` None: the task that renders it."""
    task = "task.task_id" if task_id is None else repr(task_id)
    return f"{{{{ runoff_outcome_path({HOME_EXPRESSION}, dag.dag_id, run_id, {task}) }}}}"


OUTCOME_TEMPLATE = outcome_template()


def template_macros() -> dict[str, Callable[..., str]]:
    """The macros `HOME_TEMPLATE` and `outcome_template` call (a DAG's `user_defined_macros`)."""
    return {"runoff_home_default": default_home, "runoff_outcome_path": outcome_path}


def outcome_arg(args: Sequence[str] | None) -> str | None:
    """The value after `--outcome` in (rendered) `runoff` arguments."""
    args = list(args or ())
    if "--outcome" in args[:-1]:
        return str(args[args.index("--outcome") + 1])
    return None


def read_outcome(path: str | Path | None) -> dict[str, Any] | None:
    """The outcome file's content; None when there is none (or it is not JSON)."""
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
