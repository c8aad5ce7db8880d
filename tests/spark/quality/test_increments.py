"""Tables written by delta-spark with column mapping, checkpoints and deletion vectors are read
whole by `quality.increments` (tests/unit/quality/test_increments.py has the rest)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from deltalake import DeltaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

from quality.increments import (
    plan_increment,
    read_rows,
    read_table,
)
from tests.unit.quality.test_increments import _mark, _rows, _sql_table


@pytest.mark.spark
def test_deletion_vector_tables_are_read_whole_through_datafusion(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "dv"
    name = _sql_table(spark, path, "'delta.enableDeletionVectors' = 'true'")
    spark.sql(f"DELETE FROM {name} WHERE id % 3 = 0")
    log = (path / "_delta_log" / f"{2:020d}.json").read_text()
    assert '"deletionVector"' in log  # the DELETE wrote a deletion vector, not a new file
    table = DeltaTable(str(path))

    increment = plan_increment(path, table, _mark(path, 1))

    assert increment is not None and increment.full
    assert increment.reason == "reader features deletionVectors: the whole table is read"
    kept = sorted(str(i) for i in range(20) if i % 3 != 0)
    assert sorted(read_rows(table, increment).column("value").to_pylist()) == kept
    assert read_table(table).num_rows == len(kept)


@pytest.mark.spark
def test_column_mapped_and_checkpointed_tables_read_whole(
    spark: SparkSession, tmp_path: Path
) -> None:
    mapped = tmp_path / "mapped"
    name = _sql_table(
        spark,
        mapped,
        "'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
        "'delta.minWriterVersion' = '5'",
    )
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN value TO label")
    data = read_table(DeltaTable(str(mapped)), path=mapped)
    assert _rows(data, ["id", "label"]) == [(i, str(i)) for i in range(20)]

    checkpointed = tmp_path / "checkpointed"
    name = _sql_table(spark, checkpointed, "'delta.checkpointInterval' = '2'")
    for low in (0, 5, 10):
        spark.sql(f"DELETE FROM {name} WHERE id >= {low} AND id < {low + 2}")
    assert list((checkpointed / "_delta_log").glob("*.checkpoint.parquet"))
    data = read_table(DeltaTable(str(checkpointed)), path=checkpointed)
    assert sorted(data.column("id").to_pylist()) == [
        i for i in range(20) if i not in {0, 1, 5, 6, 10, 11}
    ]
