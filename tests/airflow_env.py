"""Airflow for the DAG tests: a throw-away AIRFLOW_HOME (sqlite) set before Airflow is imported.

Imported by the `conftest.py` of every tier's `dags/` folder, before any of their test modules
imports Airflow; its fixtures are registered there."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

# Airflow reads AIRFLOW_HOME and its config when first imported: set them before any test module
# of the DAG tests imports it. setdefault keeps an explicitly chosen home.
_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="runoff-airflow-tests-"))
os.environ.setdefault("AIRFLOW_HOME", str(_AIRFLOW_HOME))
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(REPO_ROOT / "dags"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

DAGS_FOLDER = REPO_ROOT / "dags"


@pytest.fixture(scope="session", autouse=True)
def _remove_airflow_home() -> Iterator[None]:
    yield
    shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A migrated sqlite metadata database (dag.test() needs one)."""
    from airflow.utils import db

    db.initdb()


@pytest.fixture
def spark_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow's `spark_default` connection: the local master (what the DAG tasks submit to)."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[*]"})
    )
