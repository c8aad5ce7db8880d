"""DAG tasks as real processes: a failing command fails its task, and the DAG files import
neither Spark nor Great Expectations in a fresh interpreter (tests/unit/dags/test_factory.py has
the rest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.unit.dags.test_factory import SEED_DAG_IDS
from tests.user_specs import (
    write_orders,
)


@pytest.mark.parametrize("with_user_specs", [False, True])
def test_dag_files_import_neither_spark_nor_great_expectations(
    tmp_path: Path, with_user_specs: bool
) -> None:
    """Parsing the DAG files (seed specs, or with a user's spec folder too) loads none of Spark,
    py4j, delta-spark, delta-rs or Great Expectations. `delta_tables.catalog` is imported: the
    catalog lives there, and it imports Spark only when a table is created."""
    heavy = {"pyspark", "py4j", "delta", "deltalake", "great_expectations"}
    code = (
        "import sys, dags.runoff_datasets, dags.runoff_spec_errors, dags.maintenance; "
        "print(sorted(dags.runoff_datasets.__dict__)); "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(heavy)!r})))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNOFF_")}
    if with_user_specs:
        write_orders(tmp_path / "datasets")
        env["RUNOFF_DATASETS"] = str(tmp_path / "datasets")
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    names, modules = out.stdout.strip().splitlines()[-2:]
    dag_ids = SEED_DAG_IDS | ({"runoff_orders"} if with_user_specs else set())
    for dag_id in dag_ids:
        assert repr(dag_id) in names
    assert modules == "[]"


@pytest.mark.slow
def test_a_failing_command_fails_its_task(
    spark_connection: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """spark-submit exits with the CLI's code (jobs/cli/submit.py), so the task fails with its
    error; a step that runs as a plain process (validate: no Spark) fails with its exit code, its
    error line in the task log."""
    from airflow.providers.common.compat.sdk import AirflowException

    from dags.factory import build_dataset_dag

    dag = build_dataset_dag("events")
    failures = {
        "bronze": r"(?s)Error code is: 2\..*unknown dataset 'no_such_dataset'",
        "validate": r"^runoff exited with code 2$",
    }
    for step, message in failures.items():
        task = dag.get_task(step)
        task.application_args = ["--home", str(tmp_path), step, "no_such_dataset"]
        capsys.readouterr()
        with pytest.raises(AirflowException, match=message):
            task.execute(context={})
        assert "unknown dataset 'no_such_dataset'" in capsys.readouterr().out, step
