"""runoff's Delta engine: delta-rs behind Spark's `delta` format (DESIGN.md, "The Delta engine").

Public API (imported lazily, so `import delta_tables` stays cheap):
- `ensure_delta_format(spark)`: register `format("delta")` unless delta-spark is present.
- `write_batch(df, path, ...)`: one-commit, idempotent batch write (the fast path; use it in
  `foreachBatch` via `foreach_batch_writer(path, checkpoint)`); `write_stream(...)`.
- `merge_into(source, path, keys, ...)`: MERGE a micro-batch (upsert) exactly once.
- `registry`: the runoff tables (`ensure_tables`, `table_specs`); `maintenance`: compact,
  checkpoint, vacuum, history.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from delta_tables.commit import CommitResult, read_query_id
    from delta_tables.fast_path import foreach_batch_writer, write_batch, write_stream
    from delta_tables.merge import MergeResult, merge_into
    from delta_tables.spark_source import DeltaDataSource, ensure_delta_format

_EXPORTS = {
    "CommitResult": "delta_tables.commit",
    "read_query_id": "delta_tables.commit",
    "foreach_batch_writer": "delta_tables.fast_path",
    "write_batch": "delta_tables.fast_path",
    "write_stream": "delta_tables.fast_path",
    "MergeResult": "delta_tables.merge",
    "merge_into": "delta_tables.merge",
    "DeltaDataSource": "delta_tables.spark_source",
    "ensure_delta_format": "delta_tables.spark_source",
}

__all__ = [
    "CommitResult",
    "DeltaDataSource",
    "MergeResult",
    "ensure_delta_format",
    "foreach_batch_writer",
    "merge_into",
    "read_query_id",
    "write_batch",
    "write_stream",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'delta_tables' has no attribute {name!r}")
    return getattr(import_module(module), name)
