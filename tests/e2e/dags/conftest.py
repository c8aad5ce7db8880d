"""The DAG tests' Airflow (tests/airflow_env.py): set up before these modules import Airflow."""

from __future__ import annotations

from tests.airflow_env import _remove_airflow_home, airflow_db, spark_connection

__all__ = ["_remove_airflow_home", "airflow_db", "spark_connection"]
