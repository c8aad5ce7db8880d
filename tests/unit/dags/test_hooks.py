"""`RunoffCliHook`: the failures a retry cannot fix, read from the call's outcome file, fail the
task at once (`AirflowFailException`); any other failure is left to Airflow's retries."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from core.config import RunoffConfig
from core.errors import ConfigError, LockHeldError, RunoffError
from dags.hooks import RunoffCliHook
from dags.outcome import QUALITY_FAILURE
from jobs.cli.main import command_outcome

SUBMIT_ERROR = "Cannot execute: spark-submit ... Error code is: {code}."


def failed_call(
    tmp_path: Path, code: int, error: str | None, error_type: str | None, *, written: bool = True
) -> AirflowException:
    """What the hook raises when the call exits `code` having written (or not) its outcome."""
    outcome = tmp_path / "outcome.json"
    args = ["--home", str(tmp_path), "--outcome", str(outcome), "bronze", "events"]
    hook = RunoffCliHook(args, server="")  # no server: the call is `spark_submit`

    def spark_submit() -> None:
        if written:
            namespace = argparse.Namespace(command="bronze", dataset="events")
            document = command_outcome(namespace, code, error, error_type)
            outcome.write_text(json.dumps(document), encoding="utf-8")
        raise AirflowException(SUBMIT_ERROR.format(code=code))

    with pytest.raises(AirflowException) as caught:
        hook.run(spark_submit)
    return caught.value


def test_a_configuration_error_is_not_retried(tmp_path: Path) -> None:
    line = "runoff: error: unknown dataset 'evnts': choose one of activity, events, lines, sensors"
    failure = failed_call(tmp_path, ConfigError.exit_code, line, ConfigError.__name__)
    assert isinstance(failure, AirflowFailException)
    assert str(failure) == f"{line} (a configuration error: not retried)"


def test_a_failed_critical_expectation_is_not_retried(tmp_path: Path) -> None:
    line = "runoff: error: bronze_events: critical expectation failed"
    failure = failed_call(tmp_path, 1, line, QUALITY_FAILURE)
    assert isinstance(failure, AirflowFailException)
    assert str(failure) == line


@pytest.mark.parametrize(
    ("code", "error_type", "written"),
    [
        (RunoffError.exit_code, RunoffError.__name__, True),  # a failed run: retried
        (LockHeldError.exit_code, LockHeldError.__name__, True),  # a lock held: retried
        (ConfigError.exit_code, ConfigError.__name__, False),  # no outcome: nothing known
    ],
)
def test_other_failures_are_left_to_retries(
    tmp_path: Path, code: int, error_type: str, written: bool
) -> None:
    failure = failed_call(tmp_path, code, "runoff: error: ...", error_type, written=written)
    assert type(failure) is AirflowException
    assert str(failure) == SUBMIT_ERROR.format(code=code)


def test_an_earlier_tries_outcome_is_not_read(tmp_path: Path) -> None:
    """A try that wrote no outcome is not judged by the one an earlier try left."""
    failed_call(tmp_path, ConfigError.exit_code, "runoff: error: bad spec", "ConfigError")
    failure = failed_call(tmp_path, 1, None, None, written=False)
    assert type(failure) is AirflowException


@pytest.mark.parametrize(
    ("command", "spark_submit"),
    [
        (["validate", "events"], False),
        (["reset", "events", "--layer", "all", "--yes"], False),
        (["bronze", "events"], True),
        (["quarantine", "replay", "events"], True),
        (["backfill", "events", "--start", "2024-01-01", "--end", "2024-01-02"], True),
    ],
)
def test_a_command_that_never_starts_spark_is_a_plain_process_not_a_spark_submit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], spark_submit: bool
) -> None:
    args = ["--home", str(tmp_path), "--outcome", str(tmp_path / "o.json"), *command]
    hook = RunoffCliHook(args, server="")
    ran: list[str] = []
    monkeypatch.setattr(hook, "run_cli", lambda server: ran.append(f"process {server}"))
    hook.run(lambda: ran.append("spark-submit"))
    assert ran == (["spark-submit"] if spark_submit else ["process None"])


def test_reset_and_validate_run_without_spark(tmp_path: Path) -> None:
    """What a task then runs: in this tier a JVM or a child process fails the test at once."""
    from jobs.cli.main import SPARK_FREE_COMMANDS, main
    from tests.quality_tables import append_bronze, open_close_events

    assert {"validate", "reset"} <= SPARK_FREE_COMMANDS
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    append_bronze(config.bronze_path("events"), open_close_events(1_709_251_200, 4, batch_id=0))
    home = ["--home", str(config.home)]
    assert main([*home, "validate", "events", "--layer", "bronze"]) == 0
    checkpoint = Path(str(config.checkpoint_dir("bronze", "events")))
    (checkpoint / "offsets").mkdir(parents=True)
    assert main([*home, "reset", "events", "--layer", "all", "--yes"]) == 0
    assert not Path(str(config.bronze_path("events"))).exists()
    assert not (checkpoint / "offsets").exists()


def test_a_task_passes_itself_as_the_lineage_parent_of_its_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With OpenLineage configured, the operator gives the task instance's OpenLineage ids (the
    provider's macros: the ids of the task's and the DAG run's own events) to the call, as a
    process or a spark-submit; without it, nothing (and no import of the provider)."""
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter

    from dags.operators import RunoffSubmitOperator, runoff_submit

    logical = datetime(2024, 5, 1, 9, tzinfo=UTC)
    run = SimpleNamespace(logical_date=logical, clear_number=0, conf={})
    ti = SimpleNamespace(
        dag_id="runoff_events", task_id="bronze", try_number=2, map_index=-1, dag_run=run
    )
    ti.get_template_context = lambda: {"dag_run": run}  # type: ignore[attr-defined]
    task = runoff_submit("bronze", "bronze", "events")
    calls: list[tuple[dict[str, str], dict[str, str]]] = []

    def run_call(hook: RunoffCliHook, spark_submit: object) -> None:
        calls.append((dict(hook.env), dict(task.env_vars or {})))

    monkeypatch.setattr(RunoffCliHook, "run", run_call)
    monkeypatch.chdir(tmp_path)  # no openlineage.yml here, nor in ~/.openlineage
    monkeypatch.setenv("HOME", str(tmp_path))
    for key in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(key)
    RunoffSubmitOperator.execute(task, {"ti": ti, "dag_run": run})  # lineage not configured
    monkeypatch.setenv("OPENLINEAGE_URL", "http://127.0.0.1:5000")
    RunoffSubmitOperator.execute(task, {"ti": ti, "dag_run": run})
    (unconfigured, _), (process_env, submit_env) = calls
    assert unconfigured == {}
    task_run = OpenLineageAdapter.build_task_instance_run_id(
        dag_id="runoff_events", task_id="bronze", try_number=2, logical_date=logical, map_index=-1
    )
    dag_run = OpenLineageAdapter.build_dag_run_id(
        dag_id="runoff_events", logical_date=logical, clear_number=0
    )
    assert process_env == {
        "OPENLINEAGE_PARENT_ID": f"default/runoff_events.bronze/{task_run}",
        "OPENLINEAGE_ROOT_PARENT_ID": f"default/runoff_events/{dag_run}",
    }
    assert submit_env.items() >= process_env.items()
