"""runoff's Delta tables: the table registry, exactly-once writes and maintenance through
delta-spark, and Spark-free reads through delta-rs.

- `registry`: every table's name, path, schema, partitioning; `ensure_tables` creates them.
- `writes`: `append` and `merge` carrying app transactions; `table_version`, `committed_version`.
- `maintenance`: OPTIMIZE, VACUUM and checkpoints.
- `ops`: the append-only operations tables (run ledger, quality results history).
- `arrow`: `read_arrow` / `count_rows`, delta-rs reads for status, report and quality.
"""
