"""Airflow DAG `runoff_maintenance`: daily compact, checkpoint and vacuum of every table."""

from __future__ import annotations

from dags.factory import build_maintenance_dag

dag = build_maintenance_dag()
