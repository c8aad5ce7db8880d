"""Airflow DAGs `runoff_<dataset>`, one per dataset spec: landing -> bronze -> silver -> validate
(see dags/factory.py). Refused specs are reported by dags/runoff_spec_errors.py instead."""

from __future__ import annotations

from dags.factory import build_dataset_dags

globals().update(build_dataset_dags())
