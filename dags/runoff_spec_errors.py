"""Makes refused dataset specs visible in Airflow: while a spec file is refused, importing this
file fails with every problem (file, key, problem), which the UI lists as an import error; the
other datasets' DAGs (dags/runoff_datasets.py) load as usual. Defines no DAG."""

from __future__ import annotations

from dags.factory import spec_errors

problems = spec_errors()
if problems:
    raise ImportError(problems)
