"""Data source options and write planning: every error names the option, column or table."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql.types import DateType, LongType, StringType, StructField, StructType

from delta_tables.errors import DeltaOptionError, DeltaSchemaMismatchError
from delta_tables.spark_source import Options, plan_write

SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("name", StringType()),
        StructField("day", DateType()),
    ]
)


def test_option_parsing() -> None:
    options = Options(
        {"MaxBytesPerTrigger": "64m", "mergeschema": "TRUE", "partitionBy": "a, b", "n": "3"}
    )
    assert options.byte_size("maxBytesPerTrigger") == 64 * 1024 * 1024
    assert options.boolean("mergeSchema") is True
    assert options.columns("partitionBy") == ("a", "b")
    assert Options({"partitionBy": '["x"]'}).columns("partitionBy") == ("x",)
    assert options.integer("n") == 3
    with pytest.raises(DeltaOptionError, match=r"option flag='maybe' is not a boolean"):
        Options({"flag": "maybe"}).boolean("flag")
    with pytest.raises(DeltaOptionError, match=r"option maxFilesPerTrigger='0' must be at least 1"):
        Options({"maxFilesPerTrigger": "0"}).integer("maxFilesPerTrigger", minimum=1)
    with pytest.raises(DeltaOptionError, match=r"option maxBytesPerTrigger='lots' is not a size"):
        Options({"maxBytesPerTrigger": "lots"}).byte_size("maxBytesPerTrigger")
    with pytest.raises(DeltaOptionError, match="option path is required"):
        Options({}).path()
    with pytest.raises(DeltaOptionError, match="only local filesystem paths"):
        Options({"path": "s3://bucket/table"}).path()


def test_plan_write_validates_before_any_task_runs(tmp_path: Path) -> None:
    table = tmp_path / "t"
    path = {"path": str(table)}
    new = plan_write(Options({**path, "partitionBy": "DAY"}), SCHEMA, overwrite=False)
    assert new.partition_by == ("day",)
    with pytest.raises(
        DeltaOptionError, match=r"option replaceWhere='id = 1' needs mode overwrite"
    ):
        plan_write(Options({**path, "replaceWhere": "id = 1"}), SCHEMA, overwrite=False)
    with pytest.raises(DeltaOptionError, match="overwriteSchema=true needs mode overwrite"):
        plan_write(Options({**path, "overwriteSchema": "true"}), SCHEMA, overwrite=False)
    with pytest.raises(DeltaSchemaMismatchError, match=r"partition column `hour` is not a column"):
        plan_write(Options({**path, "partitionBy": "hour"}), SCHEMA, overwrite=False)
    write_deltalake(
        str(table),
        pa.table(
            {"id": pa.array([1], pa.int64()), "name": ["a"], "day": pa.array([0], pa.date32())}
        ),
        partition_by=["day"],
    )
    existing = plan_write(Options(path), SCHEMA, overwrite=False)
    assert existing.partition_by == ("day",)
    with pytest.raises(DeltaSchemaMismatchError, match=r"partitionBy \['name'\] does not match"):
        plan_write(Options({**path, "partitionBy": "name"}), SCHEMA, overwrite=False)
    with pytest.raises(DeltaOptionError, match=r"replaceWhere='hour = 1' references column `hour`"):
        plan_write(Options({**path, "replaceWhere": "hour = 1"}), SCHEMA, overwrite=True)
    replaced = plan_write(
        Options({**path, "partitionBy": "name", "overwriteSchema": "true"}), SCHEMA, overwrite=True
    )
    assert replaced.partition_by == ("name",)


def test_partitioning_of_new_existing_and_replaced_tables() -> None:
    """One rule for the data source and the fast path (`resolve_partitioning`)."""
    from delta_tables.schema import resolve_partitioning

    def resolve(
        requested: tuple[str, ...] | None, existing: tuple[str, ...] | None, replaces: bool = False
    ) -> tuple[str, ...]:
        return resolve_partitioning(
            requested, existing, SCHEMA, replaces_schema=replaces, table_name="/t"
        )

    assert resolve(("DAY",), None) == ("day",)  # new table: requested, data's spelling
    assert resolve(None, None) == ()
    assert resolve(None, ("day",)) == ("day",)  # existing table: its own partitioning
    assert resolve(("day",), ("day",)) == ("day",)
    assert resolve(("name",), ("day",), replaces=True) == ("name",)
    assert resolve(None, ("day",), replaces=True) == ("day",)
    with pytest.raises(
        DeltaSchemaMismatchError,
        match=r"partitionBy \['name'\] does not match the partition columns \['day'\] of Delta "
        r"table /t; to change them, overwrite with overwriteSchema=true",
    ):
        resolve(("name",), ("day",))
    with pytest.raises(
        DeltaSchemaMismatchError,
        match=r"partition column `zone` is not a column of the data written to Delta table /t "
        r"\[id, name, day\]",
    ):
        resolve(("zone",), None)
