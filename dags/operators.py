"""The operator of every runoff step: `RunoffSubmitOperator`, thin over `RunoffCliHook`.

Input: a `runoff` command, a dataset and its extra arguments. Output: a `SparkSubmitOperator`
(connection `spark_default`, the spark-submit settings of `dags.hooks`) whose arguments are
`--home <home> --outcome <outcome file> <command> <dataset> ...`, rendered at run time
(`dags.outcome`). `execute` and `on_kill` hand the work to `RunoffCliHook`: a client of
`runoff serve` when the worker has `RUNOFF_SERVER`, else a plain process for a command that
never starts Spark (validate, reset), else the provider's spark-submit.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from dags.hooks import (
    SPARK_CONN_ID,
    SUBMIT_APPLICATION,
    RunoffCliHook,
    lineage_parent,
    spark_conf,
    spark_env,
    submit_jars,
)
from dags.outcome import HOME_TEMPLATE, OUTCOME_TEMPLATE


def runoff_args(command: str, dataset: str, *extra: str) -> list[str]:
    """Arguments of `jobs/cli/submit.py` (the `runoff` CLI):
    `--home <home> --outcome <outcome file> <command> <dataset> ...` (a command of two words,
    `quarantine replay`, is two arguments)."""
    return [
        "--home",
        HOME_TEMPLATE,
        "--outcome",
        OUTCOME_TEMPLATE,
        *command.split(),
        dataset,
        *extra,
    ]


class RunoffSubmitOperator(SparkSubmitOperator):
    """`SparkSubmitOperator` for the `runoff` CLI with `--outcome`; `RunoffCliHook` runs the call.

    The task's outcome file is removed before the call (no stale one from an earlier try), and a
    failed critical expectation fails the task at once, without retries, with the CLI's error
    line as the reason. With `RUNOFF_SERVER` in the worker's environment the step runs as a
    `runoff` client of that server (`runoff serve`, started by `make airflow`): no JVM of its
    own, seconds instead of a Spark start per task. Without it, validate and reset (which never
    start Spark) are a plain `runoff` process, and the other steps a spark-submit through
    `spark_default`."""

    _cli: RunoffCliHook | None = None

    def execute(self, context: Any) -> None:
        parent = lineage_parent(context)
        self.env_vars = {**(self.env_vars or {}), **parent}  # the spark-submit's environment
        self._cli = RunoffCliHook(self.application_args, env=parent)
        self._cli.run(spark_submit=partial(super().execute, context))

    def on_kill(self) -> None:
        if self._cli is not None and self._cli.started_process:
            self._cli.on_kill()
        else:
            super().on_kill()


def runoff_submit(
    task_id: str,
    command: str,
    dataset: str,
    *extra: str,
    **kwargs: Any,
) -> RunoffSubmitOperator:
    """A `RunoffSubmitOperator` running `runoff <command> <dataset> <extra...>` (its Spark
    application named `runoff-<command>-<dataset>` unless `name` is given)."""
    kwargs.setdefault("name", f"runoff-{command.replace(' ', '-')}-{dataset}")
    return RunoffSubmitOperator(
        task_id=task_id,
        conn_id=SPARK_CONN_ID,
        application=str(SUBMIT_APPLICATION),
        application_args=runoff_args(command, dataset, *extra),
        conf=spark_conf(),
        jars=submit_jars() or None,
        env_vars=spark_env(),
        # One instance of a step at a time across runs: backfill runs (which Airflow runs in
        # parallel up to the backfill's own max_active_runs) wait instead of failing on the
        # dataset's checkpoint locks and retrying.
        max_active_tis_per_dag=1,
        **kwargs,
    )
