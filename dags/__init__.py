"""runoff's Airflow DAGs: thin files built by `dags.factory` (no Spark or GX import at top level).

`runoff_<dataset>` per catalog dataset (bronze >> silver >> validate, backfill runs, full
refresh), `runoff_maintenance` daily, and `python -m dags.standalone` for a local Airflow.

DAG files (the ones Airflow parses; `.airflowignore` lists every other module):
- `runoff_datasets.py`: a `runoff_<dataset>` DAG per good spec.
- `maintenance.py`: `runoff_maintenance`.
- `runoff_spec_errors.py`: no DAG; fails to import with every problem while a spec is refused.

Modules, one role each (`outcome.py` imports none of the others, none imports `factory.py`):
- `factory.py`: the DAG builders (`build_dataset_dags`, `build_dataset_dag`,
  `build_maintenance_dag`, `spec_errors`), the default args, schedules, freshness deadlines and
  the run's route.
- `operators.py`: `RunoffSubmitOperator` (thin: `execute` and `on_kill` call the hook) and
  `runoff_submit`, the operator of every step with its `runoff` arguments.
- `hooks.py`: `RunoffCliHook`, which runs the `runoff` CLI (a `runoff serve` client, a plain
  process for the commands that never start Spark, or the provider's spark-submit), stops it on
  kill and turns a failed expectation into a failure without retries; and the spark-submit
  settings (application, connection, pool, conf, jars, environment).
- `notifier.py`: `RunoffFailureNotifier`, every task's `on_failure_callback`, and
  `freshness_deadline_missed`, the callback of a dataset DAG's freshness deadline.
- `outcome.py`: the runoff home and the outcome file each `runoff --outcome` call writes (path,
  templates and macros, reading it).
- `assets.py`: the Assets of a dataset, the `extra` of `publish`'s events, the DAGs' `doc_md`.
- `standalone.py`: `python -m dags.standalone` (`make airflow`), a local Airflow of these DAGs.
"""
