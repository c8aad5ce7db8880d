"""runoff's Airflow DAGs: thin files built by `dags.factory` (no Spark or GX import at top level).

`runoff_<dataset>` per catalog dataset (bronze >> silver >> validate, backfill runs, full
refresh), `runoff_maintenance` daily, and `python -m dags.standalone` for a local Airflow.
"""
