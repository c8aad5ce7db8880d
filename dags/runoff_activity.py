"""Airflow DAG `runoff_activity`: landing -> bronze -> silver -> validate (see dags/factory.py)."""

from __future__ import annotations

from dags.factory import build_dataset_dag

dag = build_dataset_dag("activity")
