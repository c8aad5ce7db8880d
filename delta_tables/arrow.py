"""Reading a whole Delta snapshot into Arrow on the driver, without Spark.

Every Spark-free reader of the project (the run ledger, `runoff status`, `runoff report`, the
quality results history, whole-table validation) goes through `read_arrow`: delta-rs' DataFusion
engine scans the snapshot natively, honouring deletion vectors and column mapping.

`DeltaTable.to_pyarrow_dataset()`/`to_pyarrow_table()` are avoided on purpose: they read through
a Python filesystem handler, and Arrow's I/O threads may still hold its Python buffers when the
interpreter exits, which aborts the process ("terminate called without an active exception",
exit status 134) after a command has already printed its result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from deltalake import DeltaTable


def plain_types(data: pa.Table) -> pa.Table:
    """DataFusion returns string_view/binary_view; pandas, GX and filters want string/binary."""
    fields = []
    for field in data.schema:
        if pa.types.is_string_view(field.type):
            field = field.with_type(pa.string())
        elif pa.types.is_binary_view(field.type):
            field = field.with_type(pa.binary())
        fields.append(field)
    return data.cast(pa.schema(fields))


def quote_name(column: str) -> str:
    """A column name as a SQL identifier."""
    return '"' + column.replace('"', '""') + '"'


def equals(column: str, value: str | bool) -> str:
    """A SQL condition `column = value` for `read_arrow(where=...)`, the value quoted."""
    if isinstance(value, bool):
        return f"{quote_name(column)} = {str(value).lower()}"
    return f"{quote_name(column)} = '" + value.replace("'", "''") + "'"


def read_arrow(
    table: DeltaTable | str, columns: Sequence[str] | None = None, where: Sequence[str] = ()
) -> pa.Table:
    """The rows of a snapshot (optionally some columns, rows matching every SQL condition of
    `where`) as an Arrow table with plain types; DataFusion prunes files by their statistics."""
    from deltalake import DeltaTable, QueryBuilder

    snapshot = table if isinstance(table, DeltaTable) else DeltaTable(table)
    select = ", ".join(quote_name(c) for c in columns) if columns else "*"
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    reader = QueryBuilder().register("t", snapshot).execute(f"SELECT {select} FROM t{condition}")
    return plain_types(pa.table(reader.read_all()))


def count_rows(table: DeltaTable | str) -> int:
    """The exact row count of a snapshot (deletion vectors honoured, unlike file statistics)."""
    from deltalake import DeltaTable, QueryBuilder

    snapshot = table if isinstance(table, DeltaTable) else DeltaTable(table)
    reader = QueryBuilder().register("t", snapshot).execute("SELECT COUNT(*) AS n FROM t")
    return int(reader.read_all().column("n")[0].as_py())
