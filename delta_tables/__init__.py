"""runoff's Delta tables: the table catalog, exactly-once writes and maintenance through
delta-spark, and Spark-free reads through delta-rs.

- `catalog`: every dataset's tables (names, paths, checkpoints, keys, partitioning);
  `ensure_table` creates one. `schemas`: the fixed schemas (bronze metadata, quarantine).
- `writes`: `append` and `merge` carrying app transactions; `table_version`, `committed_version`.
- `maintenance`: OPTIMIZE, VACUUM and checkpoints.
- `ledger`: the run ledger's row and schema, how a run ends in it, writing and reading it.
- `ops`: the append-only operations tables (run ledger, quality results history).
- `arrow`: `read_arrow` / `count_rows`, delta-rs reads for status, report and quality.
"""
