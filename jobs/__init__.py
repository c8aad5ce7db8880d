"""runoff jobs: PySpark jobs (pure transforms + thin run()) and the `runoff` CLI."""
